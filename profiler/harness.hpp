// The measurement harness (nccl-tests' plug-in table, CUTLASS's dispositions): each measured op
// registers an OpTable — name, the sweep of points it needs, data init, FLOPs and bytes, the
// nccl-tests bus-bandwidth factor, run, verify — and one harness warms up, verifies before it
// records, and repeats until the timing is stable (median, p10, p90, repetitions).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/communicator.hpp"
#include "models/dtype.hpp"
#include "models/moe_model.hpp"
#include "models/result.hpp"
#include "planner/costs/cost_db.hpp"

namespace moeplan::profiler {

/// Timing statistics of one point, seconds.
struct Stats {
  double median_s = 0.0;
  double p10_s = 0.0;
  double p90_s = 0.0;
  int repetitions = 0;
};

/// Median, 10th and 90th percentile (linear interpolation between order statistics) of
/// `samples`; all zero for no samples.
Stats summarize(std::vector<double> samples);

/// (p90 − p10) / median: how far the samples spread (0 when nothing was measured); settled when
/// it is at most HarnessOptions::target_spread.
double spread(const Stats& s);

struct HarnessOptions {
  int warmup = 2;               ///< untimed runs before verification and timing
  int min_reps = 5;             ///< at least this many timed samples
  int max_reps = 200;           ///< at most this many
  double max_seconds = 2.0;     ///< stop once the samples add up to this
  double target_spread = 0.05;  ///< stable: (p90 − p10) / median ≤ this
  double min_sample_s = 2e-4;   ///< back-to-back runs per sample so one lasts at least this
  /// The backend whose device clock times the samples, when it has one (the CUDA backend: its
  /// kernels' event time, without the host copies around them); null or without a device
  /// clock: wall time. Either way the repetitions stop once max_seconds of wall time is spent.
  const kernels::Backend* device_clock = nullptr;
};

/// A verification's verdict.
struct Check {
  bool passed = true;
  std::string detail;  ///< what differed, where (empty when passed)
};

/// One op at one point with its data, ready to run on this rank.
class OpCase {
 public:
  virtual ~OpCase() = default;
  /// Runs the op once (the timed work). A device case may only enqueue it: settle() then waits.
  virtual void run() = 0;
  /// Waits for the runs enqueued (a device's collectives), before a sample's clock is read: once
  /// per sample, after its back-to-back runs, as nccl-tests waits once per timed loop. Host
  /// cases run synchronously and have nothing to wait for.
  virtual void settle() {}
  /// Runs the op on check data through run()'s code path and compares with a reference
  /// computed independently; leaves the case ready for timing.
  virtual Check verify() = 0;
  /// Makes every later run produce a wrong result (tests prove each verification can fail).
  void inject_fault() { fault_ = true; }

 protected:
  bool fault_ = false;
};

/// One attention-core shape a rank runs (per phase and attention TP size): query heads on the
/// rank, the K/V heads they share, the head dims, the scale (1/√ of the unabsorbed q·k dim).
struct AttentionSweepShape {
  bool decode = false;
  int heads = 0;
  int kv_heads = 0;
  int qk_dim = 0;
  int v_dim = 0;
  float scale = 1.0F;
  bool operator==(const AttentionSweepShape&) const = default;
};

/// Operand copies rotated so their total exceeds a core's caches (L2 is 1–4 MiB per core on
/// current server CPUs; the layer's local experts span tens of MiB and stream through the caches
/// between two uses of any activation buffer): the default of SweepSpec::cold_bytes, of
/// `profile --cold-mib` and of the validate runs of a profile that recorded none.
/// NOTE: 64 MiB (twice the 32 MiB L3 of the AMD EPYC this was measured on) was not enough for
/// the one-row expert GEMMs of decode: a rotation of 6 × 12.6 MiB weights (Qwen3-30B-A3B's
/// gate/up) measured the GEMV 12–18% faster than with 256 MiB, and the one-token MoE layer came
/// out 13% slower than predicted (docs/BENCHMARKS.md, "The whole decoder layer"). Rows ≥ 2
/// (Eigen's GEMM path) did not move. A CPU with a larger last-level cache needs a larger
/// rotation (kColdCacheRatio).
inline constexpr std::size_t kColdBytes = 256UL * 1024 * 1024;
/// The rotation that measured cold on that EPYC was 8 times its last-level cache; `profile`
/// notes when a rotation is smaller than this many times the CPU's.
inline constexpr std::size_t kColdCacheRatio = 8;
/// `profile --cold-mib` from 1 MiB to this.
inline constexpr std::size_t kMaxColdBytes = 64UL * 1024 * 1024 * 1024;

/// What a profile's sweep is derived from: the model's layer (widths divided by the scale), the
/// world, the storage dtypes and the size caps.
struct SweepSpec {
  std::string backend = "cpu";  ///< the backend profiled (names the kernels in the points)
  std::string model;
  int hidden = 0;
  int intermediate = 0;
  int shared_width = 0;
  int num_experts = 0;
  int top_k = 0;
  bool shared_gated = false;
  models::RouterSpec router;
  int world_size = 1;
  std::vector<int> tp_sizes;     ///< tp of every legal layout on world_size ranks
  std::vector<int> group_sizes;  ///< collective group sizes (2..world_size dividing it)
  std::vector<DType> dtypes;
  /// fp8 expert weights (kernels::LayerSpec::fp8_*), kPlain when none: the expert GEMMs are
  /// then measured as gemm_fp8 points of dtype fp8 with the format's scales.
  WeightScheme fp8_scheme = WeightScheme::kPlain;
  int fp8_block_out = 0;
  int fp8_block_in = 0;
  kernels::Fp8Act fp8_act;
  /// The attention core's shapes on the ranks of every tp (the model's heads, unscaled).
  std::vector<AttentionSweepShape> attention;
  /// (n, k) of the attention projections and dense MLP GEMMs on the ranks of every tp
  /// (planner::dense_gemm_shapes of the scaled model).
  std::vector<std::pair<int, int>> projections;
  /// RoPE as one tp-1 rank runs it per token: `rope_heads` heads (query and key) of
  /// `rope_head_dim`, the first `rope_rot_dim` rotated; 0 heads: the model has no attention.
  int rope_heads = 0;
  int rope_head_dim = 0;
  int rope_rot_dim = 0;
  double rope_theta = 10000.0;
  float norm_eps = 1e-6F;
  int max_rows = 4096;                    ///< GEMM rows up to this
  double min_bytes = 256.0;               ///< elementwise and collective sizes from this
  double max_bytes = 64.0 * 1024 * 1024;  ///< up to this (capped by memory)
  bool quick = false;
  /// Operands a point reads cold rotate over copies that together exceed this (kColdBytes);
  /// validate's cases read the profile's recorded rotation the same way.
  std::size_t cold_bytes = kColdBytes;
};

/// One point of an op's sweep: the identity and size of what is measured.
struct OpPoint {
  std::string op;
  DType dtype = DType::kBf16;
  std::string shape;  ///< canonical text, part of the DB identity
  double m = 0.0;     ///< GEMM rows; elementwise and collective bytes
  double n = 0.0;     ///< GEMM columns; collectives: concurrent groups
  double k = 0.0;
  int group_size = 1;
  double bytes = 0.0;  ///< moved (elementwise: read + written; collectives: nccl-tests S)
  double flops = 0.0;
  std::string kernel;  ///< the kernel measured (recorded in the DB's detail)
};

/// An op's plug-in table.
struct OpTable {
  std::string name;
  bool collective = false;
  /// Host code of the layer (packing rows, staging, fp8 (de)quantization on the host), not a
  /// call of the backend: a device profile (a backend with a device clock) does not time it.
  bool host_op = false;
  /// The points a sweep needs.
  std::function<std::vector<OpPoint>(const SweepSpec&)> sweep;
  /// busBw = algBw · bus_factor(group size) (nccl-tests); null for compute ops.
  std::function<double(int)> bus_factor;
  /// Builds the case on this rank; `group` is this rank's group for collectives (null for
  /// compute ops); compute ops run `backend`'s calls (the backend being profiled), after asking
  /// its can_implement. An Error means the point is not supported by this backend.
  std::function<Result<std::unique_ptr<OpCase>>(
      const OpPoint&, const SweepSpec&, kernels::Communicator* group, kernels::Backend& backend)>
      init;
};

/// Every registered op, in profiling order (GEMMs, elementwise ops, collectives).
const std::vector<OpTable>& all_ops();

/// A measured point's outcome.
struct Measurement {
  Stats stats;
  planner::Disposition disposition = planner::Disposition::kPassed;
  std::string detail;
};

/// Whether `backend` ran a stand-in for one of its kernels (Backend::fallbacks: the CUDA fp8 GEMM
/// emulated in fp32) since the watch was made: made before a measurement, asked after it.
class StandInWatch {
 public:
  explicit StandInWatch(const kernels::Backend& backend)
      : backend_(backend), count_(backend.fallbacks().count) {}
  /// The backend's reason for the last stand-in since the watch was made; empty when none ran.
  std::string reason() const {
    const kernels::Backend::Fallbacks f = backend_.fallbacks();
    if (f.count == count_) return {};
    return f.last.empty() ? "the backend ran a stand-in for a kernel" : f.last;
  }

 private:
  const kernels::Backend& backend_;
  std::uint64_t count_;
};

/// Warm-up, verification, timing until stable. With `sync` every rank of that communicator
/// measures its own case at the same time: each sample is the slowest rank's, and every decision
/// (verdict, repetitions) is the same on all ranks. An incorrect case is not timed.
Measurement measure(OpCase& c, kernels::Communicator* sync, const HarnessOptions& options);

/// Sizes in powers of two from `lo` to `hi` (both rounded to powers of two).
std::vector<double> powers_of_two(double lo, double hi);

/// GEMM row counts 1..max_rows: powers of two, and with `dense` also 3·2^j between them.
std::vector<int> row_counts(int max_rows, bool dense);

/// True on every rank when `flag` is true on any rank (a MAX all-reduce; no communication with
/// one rank): how every rank agrees to stop, skip or fail together.
bool any_rank(kernels::Communicator& world, bool flag);

}  // namespace moeplan::profiler
