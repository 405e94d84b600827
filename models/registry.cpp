// Bundled model configs and name-or-path resolution.
#include "models/registry.hpp"

#include <algorithm>
#include <filesystem>

#include "models/resources.hpp"

namespace moeplan::models {

namespace fs = std::filesystem;

std::vector<std::string> bundled_model_names() {
  std::vector<std::string> names;
  std::error_code ec;
  const fs::path dir = resource_dir() / "models";
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".json") names.push_back(it->path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<MoeModel> load_model(const std::string& name_or_path) {
  const bool looks_like_path =
      name_or_path.find('/') != std::string::npos || fs::path(name_or_path).extension() == ".json";
  if (looks_like_path) return load_model_config(name_or_path);
  const fs::path bundled = resource_dir() / "models" / (name_or_path + ".json");
  std::error_code ec;
  if (!fs::is_regular_file(bundled, ec)) {
    std::string known;
    for (const auto& n : bundled_model_names()) known += (known.empty() ? "" : ", ") + n;
    return Error{"unknown model '" + name_or_path + "': expected a bundled model (" + known +
                 ") or a path to a config.json"};
  }
  return load_model_config(bundled, name_or_path);
}

}  // namespace moeplan::models
