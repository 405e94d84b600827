// The ranks a collective job (verify, profile, validate) runs on, set up once for every front end:
// under mpirun/srun the launcher's processes (MPI_COMM_WORLD, one rank each, the launcher's task
// count and the same arguments checked on every rank, a rank watchdog that ends the job within
// seconds when a rank is lost), else ranks as threads in this process. Errors are agreed across
// ranks before any work, and exit codes after it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/communicator.hpp"
#include "kernels/rank_watchdog.hpp"
#include "models/result.hpp"

namespace moeplan::kernels {

/// Where one rank runs.
struct RankPlace {
  std::string host;    ///< gethostname
  std::string node;    ///< Slurm's node name, else the host
  int shm_domain = 0;  ///< world rank of the first rank sharing memory with it (MPI's locality)
};

/// How many in-process ranks a command takes when not launched by mpirun/srun.
struct ThreadRanks {
  int requested = -1;  ///< the "ranks" input; -1 when not given
  int default_count = 1;
  int max_count = 64;
};

class JobWorld {
 public:
  /// Rank 0's report of an error every rank shares (called before any rank leaves, so that
  /// under mpirun the line is printed before the launcher kills the others).
  using Report = std::function<void(const Error&)>;

  /// The world this process belongs to. Under a launcher of more than one process: MPI, with
  /// `args` (the command line) compared across ranks; `ranks.requested` must then be -1 or the
  /// launcher's count. Otherwise `ranks` in-process threads. Errors name the input ("ranks"). A
  /// rank whose arguments differ from rank 0's is reported through `report` on rank 0, and every
  /// rank gets an empty error.
  ///
  /// Before MPI_Init: a launcher this MPI cannot join (srun without PMIx) is an error on the
  /// launcher's rank 0 ("srun started 2 tasks without PMIx …") and an empty one elsewhere; after
  /// it, an MPI world of another size than the launcher's task count likewise. Then a rank
  /// watchdog (kernels/rank_watchdog.hpp) watches the ranks and SIGINT/SIGTERM: a rank lost, or
  /// one still blocked right after a stop signal, ends the process (exit 1, or 130 after a
  /// signal). MOEPLAN_WATCHDOG=0 leaves it off.
  static Result<JobWorld> open(const ThreadRanks& ranks, const std::vector<std::string>& args,
                               const Report& report);

  JobWorld(JobWorld&&) noexcept;
  JobWorld& operator=(JobWorld&&) noexcept;
  ~JobWorld();

  /// Ranks in the job.
  int size() const { return size_; }
  /// Whether the ranks are the launcher's processes (MPI) rather than threads.
  bool launched() const { return mpi_ != nullptr; }
  /// This process's rank under a launcher; 0 with threads (the process holds every rank).
  int rank() const;
  bool is_root() const { return rank() == 0; }
  /// "mpi" or "in-process threads".
  std::string mode() const { return launched() ? "mpi" : "in-process threads"; }
  /// MPI_COMM_WORLD under a launcher (e.g. to bootstrap NCCL); null with threads.
  Communicator* mpi() const { return mpi_.get(); }
  /// Where each rank runs (in-process ranks: all on this host).
  const std::vector<RankPlace>& places() const { return places_; }
  /// Shared-memory domains (nodes, as MPI sees them) the ranks span.
  int num_nodes() const;
  /// Whether a rank watchdog watches this job.
  bool watched() const { return watchdog_ != nullptr; }
  /// The job stops between its units by itself after SIGINT/SIGTERM (kernels::stop_requested());
  /// the watchdog waits `grace_s` before it ends a rank still blocked (default: at once).
  void allow_graceful_stop(double grace_s);

  /// Every rank's `mine` agreed before any work: OK on every rank when all are OK. Else rank 0
  /// reports its own error (every rank checks the same inputs) through `report` before any rank
  /// leaves, and every rank returns an empty error (already reported); the ranks then end
  /// (the watchdog is told so).
  Status agree(const Status& mine, const Report& report);

  /// Runs `job` on every rank (one call per process under a launcher, one thread per rank
  /// otherwise) and returns rank 0's value (under a launcher, each process its own).
  template <typename T>
  T run(const std::function<T(Communicator&)>& job) {
    if (mpi_) return job(*mpi_);
    std::optional<T> root_value;
    run_in_process(size_, [&](Communicator& world) {
      T v = job(world);
      if (world.rank() == 0) root_value.emplace(std::move(v));
    });
    return std::move(*root_value);
  }

  /// Under a launcher every rank returns the same exit code: the largest any rank reached. The
  /// job ends after it: the watchdog is told so, and bounds MPI_Finalize.
  int agree_exit_code(int rc);

 private:
  JobWorld(std::unique_ptr<Communicator> mpi, int size);
  void end_agreed(int rc);
  std::unique_ptr<Communicator> mpi_;
  int size_ = 1;
  std::vector<RankPlace> places_;
  RankWatchdog* watchdog_ = nullptr;  ///< lives as long as the process (through MPI_Finalize)
};

}  // namespace moeplan::kernels
