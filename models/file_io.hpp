// Reading user files with clear errors, and writing outputs atomically (temp file, then rename)
// so a failed or interrupted command never leaves a half-written file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "models/result.hpp"

namespace moeplan {

/// The largest input file moeplan reads (configs, clusters, loads, placements, plans): 256 MiB.
/// Parsed, a file takes several times its size in memory (docs/RELIABILITY.md, "Resource
/// limits"); a larger file is refused before it is read.
inline constexpr std::uintmax_t kMaxInputFileBytes = std::uintmax_t{256} << 20;

/// Reads a whole file of at most `max_bytes`; errors name the path and say what went wrong. A
/// device or pipe that never ends (/dev/zero) is refused once it passes the limit.
Result<std::string> read_text_file(const std::filesystem::path& path,
                                   std::uintmax_t max_bytes = kMaxInputFileBytes);

/// Writes `content` to `path` through a temporary file in the same directory and a rename.
Status write_file_atomic(const std::filesystem::path& path, const std::string& content);

}  // namespace moeplan
