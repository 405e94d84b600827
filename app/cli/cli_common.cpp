// Shared CLI plumbing.
#include "app/cli/cli_common.hpp"

#include "models/file_io.hpp"
#include "models/weight_format.hpp"

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <utility>

namespace moeplan::cli {

namespace {
std::vector<std::string>& command_line() {
  static std::vector<std::string> args;
  return args;
}
}  // namespace

void set_command_line(std::vector<std::string> args) { command_line() = std::move(args); }

const std::vector<std::string>& command_line_args() { return command_line(); }

void report_and_flush(const Error& error) {
  report_error(error);
  std::fflush(stderr);
}

std::string flag_of(const std::string& input) { return cli_flag(input); }

std::string weights_flag_help() {
  std::string names;
  for (const auto& n : weight_format_names()) names += (names.empty() ? "" : "|") + n;
  return "Weight format for a what-if plan: " + names +
         " (default: the model's own, from its quantization_config or torch_dtype)";
}

int report_error(const Error& error) {
  if (error.message.empty()) return kExitBadInput;
  std::fprintf(stderr, "moeplan: error: %s\n", render_error(error, flag_of).c_str());
  return kExitBadInput;
}

int emit_text(const std::string& text, const std::string& output) {
  if (!output.empty()) {
    const Status s = write_file_atomic(output, text);
    if (!s) return report_error(s.error());
    return kExitOk;
  }
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace moeplan::cli
