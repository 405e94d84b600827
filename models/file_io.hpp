// Reading user files with clear errors, and writing outputs atomically (temp file, then rename)
// so a failed or interrupted command never leaves a half-written file.
#pragma once

#include <filesystem>
#include <string>

#include "models/result.hpp"

namespace moeplan {

/// Reads a whole file; errors name the path and say what went wrong.
Result<std::string> read_text_file(const std::filesystem::path& path);

/// Writes `content` to `path` through a temporary file in the same directory and a rename.
Status write_file_atomic(const std::filesystem::path& path, const std::string& content);

}  // namespace moeplan
