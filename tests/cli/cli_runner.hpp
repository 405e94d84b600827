// Runs the `moeplan` binary as a user would and captures stdout, stderr and the exit code;
// compares output with golden files (MOEPLAN_UPDATE_GOLDEN=1 rewrites them).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "models/resources.hpp"

namespace moeplan::cli_test {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs `moeplan <args>` (args are passed through the shell as written).
inline CliResult run_cli(const std::string& args) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string tag = std::to_string(::getpid());
  const auto out = dir / ("moeplan_cli_out_" + tag);
  const auto err = dir / ("moeplan_cli_err_" + tag);
  const std::string cmd = std::string(MOEPLAN_CLI_PATH) + " " + args + " >" + out.string() + " 2>" +
                          err.string() + " </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

/// Replaces machine-specific paths with a fixed marker so golden files are portable.
inline std::string normalise(std::string text) {
  const std::string res = moeplan::resource_dir().string();
  for (std::size_t pos = 0; (pos = text.find(res, pos)) != std::string::npos;) {
    text.replace(pos, res.size(), "<resources>");
    pos += 11;
  }
  return text;
}

/// Bad input: exit 2, nothing on stdout, exactly one "moeplan: error: " line naming `part`.
inline void expect_one_line_error(const CliResult& r, const std::string& part) {
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(r.err.rfind("moeplan: error: ", 0), 0U) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
}

inline void expect_golden(const std::string& name, const std::string& actual) {
  const auto path = std::filesystem::path(MOEPLAN_GOLDEN_DIR) / name;
  const std::string text = normalise(actual);
  if (const char* u = std::getenv("MOEPLAN_UPDATE_GOLDEN"); u != nullptr && u[0] == '1') {
    std::ofstream(path, std::ios::binary) << text;
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << "missing golden file " << path;
  EXPECT_EQ(text, slurp(path)) << "output differs from " << path
                               << " (MOEPLAN_UPDATE_GOLDEN=1 rewrites it after review)";
}

}  // namespace moeplan::cli_test
