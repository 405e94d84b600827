// A profile: every point of a sweep measured by the harness and written to the cost database,
// one transaction per point (a kill at any moment keeps every completed point), resumable,
// stoppable between points.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/communicator.hpp"
#include "planner/costs/cost_db.hpp"
#include "profiler/environment.hpp"
#include "profiler/harness.hpp"

namespace moeplan::profiler {

struct ProfileRequest {
  SweepSpec sweep;
  std::vector<std::string> ops;  ///< empty: every op
  HarnessOptions harness;
  std::string out_path;
  /// Skip points the database already holds (with remeasure_unsettled, those that had not
  /// settled and have had no second look are measured again after the sweep).
  bool resume = false;
  std::string command;  ///< recorded with the run
  /// Where each rank runs (kernels::JobWorld::places under a launcher); empty: every rank on
  /// this host, in one shared-memory domain (in-process ranks).
  std::vector<planner::RunRank> places;
  /// A device backend profiled on one rank (made with the request, so an unusable one is an
  /// input error before any file is touched); null: each rank's run_profile makes
  /// sweep.backend's (the CPU backend).
  std::shared_ptr<kernels::Backend> backend;
  /// Measure again, after the sweep, every point whose samples did not settle (spread beyond
  /// harness.target_spread when its time budget ran out: the machine was interfered with), and
  /// keep the measurement that spread less. make_profile_request sets it for full profiles.
  bool remeasure_unsettled = false;
};

/// A profile's settings as `moeplan profile` takes them (and moeplan-gui's profiling view):
/// the request is built from these and checked before any file is touched.
struct ProfileOptions {
  std::string backend = "cpu";
  std::string model;    ///< bundled name or config.json path
  std::string cluster;  ///< "" or local:<world size>
  std::string dtypes;   ///< comma-separated; "" = the model's
  /// Weight format (models::weight_format_names); "" = the model's own. fp8 block weights make
  /// the expert GEMMs fp8 ones (gemm_fp8), as the layer runs them.
  std::string weights;
  std::string ops;  ///< comma-separated; "" = all
  std::string out;
  int scale = 1;
  int max_tokens = 0;
  double max_bytes = 0.0;
  double max_seconds = 1.0;
  /// The rotation, in MiB, of the operand copies each point reads in turn so that its weights
  /// are cold as in a step of a many-layer model (SweepSpec::cold_bytes; 1 MiB to 64 GiB).
  long cold_mib = static_cast<long>(kColdBytes >> 20);
  bool quick = false;
  bool resume = false;
  std::string command;
  /// One process per rank under a launcher (mpirun, srun); false: in-process ranks (threads).
  bool launched = false;
  /// The CUDA device of this rank (cuda backend; kernels::cuda::device_for_local_rank under a
  /// launcher).
  int device = 0;
};

/// The request for `world_size` ranks. Errors name the option (--out, --scale, ...) and what it
/// expects.
Result<ProfileRequest> make_profile_request(const ProfileOptions& options, int world_size);

/// The output file's state (run on rank 0 before profiling): an existing file needs `resume`, a
/// new one a directory that exists.
Status check_profile_output(const ProfileRequest& request);

struct ProfileSummary {
  std::string device;
  int total = 0;
  int measured = 0;
  int skipped = 0;  ///< already in the database (--resume)
  int incorrect = 0;
  int not_supported = 0;
  bool interrupted = false;
  /// The machine's pace before the first point and after the last (pace.hpp; the end's is not
  /// measured when the profile was interrupted).
  planner::MachinePace pace_start;
  planner::MachinePace pace_end;
  int remeasured = 0;  ///< unsettled points measured again after the sweep
  int replaced = 0;    ///< of those, replaced by the steadier second measurement
};

/// Device name of a CPU profile: "cpu:<CPU model>/ranks=<N>" (ranks share the host's cores, so
/// a profile is of the machine as run with N ranks), and "/nodes=<K>" after it when the ranks
/// span K > 1 nodes (shared-memory domains): its collectives crossed the network, so its points
/// are not those of one node.
std::string cpu_device_name(const Environment& env, int world_size, int num_nodes = 1);

/// Device name of a device profile (a backend with a device clock): "<backend>:<device
/// name>/ranks=<N>", e.g. "cuda:NVIDIA H200/ranks=1".
std::string device_profile_name(const kernels::Backend& backend, int world_size);

/// A note for a CPU profile whose rotation is under kColdCacheRatio times the CPU's last-level
/// cache (its weights may be measured warmer than a many-layer model reads them), naming the
/// --cold-mib that is not; empty when the rotation is large enough or the cache is not known.
std::string cold_rotation_note(std::size_t last_level_cache_bytes, std::size_t cold_bytes);
/// The note for `req` on this machine: its rotation against this CPU's last-level cache; empty for
/// a device backend (its operands are not read through the CPU's caches).
std::string cold_rotation_note(const ProfileRequest& req);

/// The number of shared-memory domains (nodes) of `places`; 1 when empty.
int count_nodes(const std::vector<planner::RunRank>& places);

/// Runs collectively on `world` (every rank calls it; rank 0 writes the database). `progress`
/// runs on rank 0 after each point; `stop` is polled on every rank between points and any
/// rank's request stops all of them; `written` (optional) runs on rank 0 with each point once
/// its transaction has committed. `collectives` (optional; the same ranks in the same order as
/// `world`) is the communicator whose groups the collective ops are measured on — NCCL under a
/// CUDA profile, its collectives timed on device memory — while `world` keeps the barriers and
/// the agreement between ranks; null: `world`'s own groups.
Result<ProfileSummary> run_profile(
    kernels::Communicator& world, const ProfileRequest& request,
    const std::function<void(int done, int total, const std::string& what)>& progress,
    const std::function<bool()>& stop,
    const std::function<void(const planner::CostPoint& point)>& written = {},
    kernels::Communicator* collectives = nullptr);

}  // namespace moeplan::profiler
