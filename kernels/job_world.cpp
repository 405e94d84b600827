// Setting up a collective job's ranks and agreeing on errors and exit codes.
#include "kernels/job_world.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>
#include <utility>

#include "kernels/mpi_communicator.hpp"
#include "kernels/mpi_info.hpp"

namespace moeplan::kernels {

namespace {

/// One rank's place as all-gathered (fixed size; names cut at 63 bytes).
struct PlaceRecord {
  char host[64] = {};
  char node[64] = {};
  std::int32_t shm_domain = 0;
};

void copy_name(char (&to)[64], const std::string& from) {
  std::snprintf(to, sizeof to, "%s", from.c_str());
}

std::vector<RankPlace> gather_places(Communicator& world) {
  PlaceRecord mine;
  copy_name(mine.host, host_name());
  copy_name(mine.node, node_name());
  mine.shm_domain = mpi_shared_memory_domain();
  std::vector<PlaceRecord> all(static_cast<std::size_t>(world.size()));
  world.all_gather(&mine, sizeof mine, all.data());
  std::vector<RankPlace> out;
  for (const auto& r : all) {
    out.push_back({std::string(r.host, strnlen(r.host, sizeof r.host)),
                   std::string(r.node, strnlen(r.node, sizeof r.node)), r.shm_domain});
  }
  return out;
}

bool watchdog_wanted() {
  const char* v = std::getenv("MOEPLAN_WATCHDOG");
  return v == nullptr || std::string_view(v) != "0";
}

}  // namespace

JobWorld::JobWorld(std::unique_ptr<Communicator> mpi, int size)
    : mpi_(std::move(mpi)), size_(size) {}
JobWorld::JobWorld(JobWorld&&) noexcept = default;
JobWorld& JobWorld::operator=(JobWorld&&) noexcept = default;
JobWorld::~JobWorld() = default;

int JobWorld::rank() const { return mpi_ ? mpi_->rank() : 0; }

int JobWorld::num_nodes() const {
  std::set<int> domains;
  for (const auto& p : places_) domains.insert(p.shm_domain);
  return std::max<int>(1, static_cast<int>(domains.size()));
}

Result<JobWorld> JobWorld::open(const ThreadRanks& ranks, const std::vector<std::string>& args,
                                const Report& report) {
  const Launcher launcher = detect_launcher();
  if (!launcher.launched()) {
    const int n = ranks.requested == -1 ? ranks.default_count : ranks.requested;
    if (n < 1 || n > ranks.max_count) {
      return input_error("ranks", ": expected 1 to " + std::to_string(ranks.max_count) +
                                      " in-process ranks, got " + std::to_string(n));
    }
    JobWorld w(nullptr, n);
    w.places_.assign(static_cast<std::size_t>(n), RankPlace{host_name(), node_name(), 0});
    return w;
  }
  const int launched = launcher.tasks;
  // Before MPI_Init: tasks this MPI cannot join would each die in MPI_Init with the library's
  // banner, or run as singletons. One line from the launcher's rank 0, exit 2 everywhere.
  if (!launcher.wired) return launcher.rank == 0 ? Error{launcher.hint} : Error{""};
  if (ranks.requested != -1 && ranks.requested != launched) {
    return input_error("ranks", " " + std::to_string(ranks.requested) + " under a launcher of " +
                                    std::to_string(launched) + " processes: expected no {ranks}");
  }
  auto world = mpi_world();
  if (!world) {
    return Error{"launched with " + std::to_string(launched) +
                 " ranks but MPI is not compiled into this moeplan"};
  }
  if (world->size() != launched) {
    // Each process may be its own MPI world of 1 (every one a rank 0): the launcher's rank 0
    // alone reports.
    if (launcher.rank != 0) return Error{""};
    return Error{launcher.name + " started " + std::to_string(launched) +
                 (launcher.name == "srun" ? " tasks" : " processes") + " but MPI sees " +
                 std::to_string(world->size()) +
                 (launcher.name == "srun" ? ": use srun --mpi=pmix"
                                          : ": expected the MPI library of the launcher")};
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
  JobWorld w(std::move(world), size);
  w.places_ = gather_places(*w.mpi_);
  if (watchdog_wanted()) {
    WatchdogOptions o;
    for (const auto& p : w.places_) o.places.push_back(p.node);
    o.report = report;
    auto dog = RankWatchdog::start(*w.mpi_, std::move(o));
    if (dog) {
      // NOTE: never destroyed: the watchdog bounds MPI_Finalize, which runs at exit, after this
      // world is gone; its thread ends with the process.
      w.watchdog_ = dog->release();
      install_stop_handler();
    } else if (w.rank() == 0) {
      std::fprintf(stderr,
                   "moeplan: warning: %s; running without the rank watchdog (a lost rank may "
                   "leave the others waiting)\n",
                   dog.error().message.c_str());
    }
  }
  return w;
}

void JobWorld::allow_graceful_stop(double grace_s) {
  if (watchdog_ != nullptr) watchdog_->set_stop_grace(grace_s);
}

void JobWorld::end_agreed(int rc) {
  if (watchdog_ != nullptr) watchdog_->bye(rc);
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
  end_agreed(2);
  return Error{""};
}

int JobWorld::agree_exit_code(int rc) {
  if (!mpi_) return rc;
  std::vector<std::int64_t> code{rc};
  mpi_->all_reduce_max(code);
  end_agreed(static_cast<int>(code[0]));
  return static_cast<int>(code[0]);
}

}  // namespace moeplan::kernels
