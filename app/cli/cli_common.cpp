// Shared CLI plumbing.
#include "app/cli/cli_common.hpp"

#include "kernels/mpi_communicator.hpp"

#include <cstdio>
#include <sstream>

namespace moeplan::cli {

Result<std::unique_ptr<kernels::Communicator>> launcher_world(int launched, int ranks_option) {
  if (ranks_option != -1 && ranks_option != launched) {
    return Error{"--ranks " + std::to_string(ranks_option) + " under a launcher of " +
                 std::to_string(launched) + " processes: expected no --ranks"};
  }
  auto world = kernels::mpi_world();
  if (!world) {
    return Error{"launched with " + std::to_string(launched) +
                 " ranks but MPI is not compiled into this moeplan"};
  }
  return world;
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
