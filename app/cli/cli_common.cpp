// Shared CLI plumbing.
#include "app/cli/cli_common.hpp"

#include <cstdio>
#include <sstream>

namespace moeplan::cli {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int agree_exit_code(kernels::Communicator& world, int rc) {
  std::vector<std::int64_t> code{rc};
  world.all_reduce_max(code);
  return static_cast<int>(code[0]);
}

int report_error(const Error& error) {
  std::fprintf(stderr, "moeplan: error: %s\n", error.message.c_str());
  return kExitBadInput;
}

}  // namespace moeplan::cli
