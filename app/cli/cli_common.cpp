// Shared CLI plumbing.
#include "app/cli/cli_common.hpp"

#include <cstdio>

namespace moeplan::cli {

int report_error(const Error& error) {
  std::fprintf(stderr, "moeplan: error: %s\n", error.message.c_str());
  return kExitBadInput;
}

}  // namespace moeplan::cli
