// Where moeplan's bundled resources (models, devices, clusters, loads) live.
#pragma once

#include <filesystem>

namespace moeplan {

/// The resources directory: $MOEPLAN_RESOURCES if set, else the source tree's resources/.
std::filesystem::path resource_dir();

}  // namespace moeplan
