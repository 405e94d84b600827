// Setting up a collective job's ranks and agreeing on errors and exit codes.
#include "kernels/job_world.hpp"

#include <cstdint>
#include <utility>

#include "kernels/mpi_communicator.hpp"
#include "kernels/mpi_info.hpp"

namespace moeplan::kernels {

JobWorld::JobWorld(std::unique_ptr<Communicator> mpi, int size)
    : mpi_(std::move(mpi)), size_(size) {}
JobWorld::JobWorld(JobWorld&&) noexcept = default;
JobWorld& JobWorld::operator=(JobWorld&&) noexcept = default;
JobWorld::~JobWorld() = default;

int JobWorld::rank() const { return mpi_ ? mpi_->rank() : 0; }

Result<JobWorld> JobWorld::open(const ThreadRanks& ranks, const std::vector<std::string>& args,
                                const Report& report) {
  const int launched = launcher_world_size();
  if (launched <= 1) {
    const int n = ranks.requested == -1 ? ranks.default_count : ranks.requested;
    if (n < 1 || n > ranks.max_count) {
      return input_error("ranks", ": expected 1 to " + std::to_string(ranks.max_count) +
                                      " in-process ranks, got " + std::to_string(n));
    }
    return JobWorld(nullptr, n);
  }
  if (ranks.requested != -1 && ranks.requested != launched) {
    return input_error("ranks", " " + std::to_string(ranks.requested) + " under a launcher of " +
                                    std::to_string(launched) + " processes: expected no {ranks}");
  }
  auto world = mpi_world();
  if (!world) {
    return Error{"launched with " + std::to_string(launched) +
                 " ranks but MPI is not compiled into this moeplan"};
  }
  // Every rank must run the same command: a rank with another model, scale or token list would
  // run other collectives and hang or corrupt the others. FNV-1a of the arguments.
  std::uint64_t hash = 14695981039346656037ULL;
  for (const auto& arg : args) {
    for (const char c : arg + '\0') {
      hash = (hash ^ static_cast<std::uint64_t>(static_cast<unsigned char>(c))) * 1099511628211ULL;
    }
  }
  std::vector<std::uint64_t> all(static_cast<std::size_t>(world->size()));
  world->all_gather(&hash, sizeof(hash), all.data());
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    // Rank 0 reports before anyone leaves: under mpirun the first rank to exit non-zero gets
    // the others killed, which could cut rank 0 off before its line.
    if (world->rank() == 0 && report) {
      report(Error{"rank " + std::to_string(r) +
                   " was started with other arguments than rank 0; expected the same "
                   "moeplan command line on every rank"});
    }
    world->barrier();
    return Error{""};  // reported by rank 0
  }
  const int size = world->size();
  return JobWorld(std::move(world), size);
}

Status JobWorld::agree(const Status& mine, const Report& report) {
  if (!mpi_) {
    if (mine) return Status::Ok();
    if (report) report(mine.error());
    return Error{""};
  }
  std::vector<std::int64_t> bad{mine ? 0 : 1};
  mpi_->all_reduce_max(bad);
  if (bad[0] == 0) return Status::Ok();
  if (mpi_->rank() == 0 && report) {
    report(mine ? Error{"another rank could not set up the job; expected the same inputs and "
                        "files on every rank"}
                : mine.error());
  }
  mpi_->barrier();
  return Error{""};
}

int JobWorld::agree_exit_code(int rc) {
  if (!mpi_) return rc;
  std::vector<std::int64_t> code{rc};
  mpi_->all_reduce_max(code);
  return static_cast<int>(code[0]);
}

}  // namespace moeplan::kernels
