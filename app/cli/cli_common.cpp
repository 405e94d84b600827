// Shared CLI plumbing.
#include "app/cli/cli_common.hpp"

#include "kernels/mpi_communicator.hpp"

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
  // Every rank must run the same command: a rank with another --model, --scale or --tokens
  // would run other collectives and hang or corrupt the others. FNV-1a of the arguments.
  std::uint64_t hash = 14695981039346656037ULL;
  for (const auto& arg : command_line()) {
    for (const char c : arg + '\0') {
      hash = (hash ^ static_cast<std::uint64_t>(static_cast<unsigned char>(c))) * 1099511628211ULL;
    }
  }
  std::vector<std::uint64_t> all(static_cast<std::size_t>(world->size()));
  world->all_gather(&hash, sizeof(hash), all.data());
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    // Rank 0 prints before anyone leaves: under mpirun the first rank to exit non-zero gets the
    // others killed, which could cut rank 0 off before its line.
    if (world->rank() == 0) {
      report_error(Error{"rank " + std::to_string(r) +
                         " was started with other arguments than rank 0; expected the same "
                         "moeplan command line on every rank"});
      std::fflush(stderr);
    }
    world->barrier();
    return Error{""};  // reported by rank 0
  }
  return world;
}

int agree_exit_code(kernels::Communicator& world, int rc) {
  std::vector<std::int64_t> code{rc};
  world.all_reduce_max(code);
  return static_cast<int>(code[0]);
}

int report_error(const Error& error) {
  if (error.message.empty()) return kExitBadInput;
  std::fprintf(stderr, "moeplan: error: %s\n", error.message.c_str());
  return kExitBadInput;
}

}  // namespace moeplan::cli
