// File reading and atomic writing.
#include "models/file_io.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

namespace moeplan {

Result<std::string> read_text_file(const std::filesystem::path& path, std::uintmax_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Error{path.string() + ": file not found"};
  if (std::filesystem::is_directory(path, ec)) {
    return Error{path.string() + ": expected a file, got a directory"};
  }
  const auto too_large = [&](const std::string& size) {
    return Error{path.string() + ": " + size + " bytes, expected at most " +
                 std::to_string(max_bytes) + " (moeplan's limit on input files, " +
                 std::to_string(max_bytes >> 20) + " MiB)"};
  };
  if (std::filesystem::is_regular_file(path, ec)) {
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > max_bytes) return too_large(std::to_string(size));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path.string() + ": cannot be read: " + std::strerror(errno)};
  // Chunked, so a file that grows or a device without end stops at the limit.
  std::string text;
  std::vector<char> chunk(std::size_t{1} << 16);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (text.size() + got > max_bytes) return too_large("more than " + std::to_string(max_bytes));
    text.append(chunk.data(), got);
  }
  if (in.bad()) return Error{path.string() + ": read error"};
  return text;
}

Status write_file_atomic(const std::filesystem::path& path, const std::string& content) {
  const std::filesystem::path dir =
      path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::string tmpl = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) {
    return Error{path.string() + ": cannot create a temporary file in " + dir.string() + ": " +
                 std::strerror(errno)};
  }
  ::fchmod(fd, 0644);  // mkstemp creates 0600; outputs are ordinary files
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = std::strerror(errno);
      ::close(fd);
      std::remove(tmpl.c_str());
      return Error{path.string() + ": write failed: " + why};
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmpl.c_str());
    return Error{path.string() + ": write failed: " + why};
  }
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmpl.c_str());
    return Error{path.string() + ": cannot be written: " + why};
  }
  return Status::Ok();
}

}  // namespace moeplan
