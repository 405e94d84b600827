// Locating bundled resources.
#include "models/resources.hpp"

#include <cstdlib>

namespace moeplan {

std::filesystem::path resource_dir() {
  if (const char* env = std::getenv("MOEPLAN_RESOURCES"); env != nullptr && env[0] != '\0') {
    return std::filesystem::path(env);
  }
  return std::filesystem::path(MOEPLAN_RESOURCE_DIR);
}

}  // namespace moeplan
