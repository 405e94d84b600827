// MeasuredCosts: the CostSource that answers from a cost database (a profile of the real kernels
// and collectives, or GPU tables imported by `moeplan costs import`). Exact hits are returned as
// measured; queries inside the measured range are interpolated in log space; outside it the
// measured efficiency is held and scaled by the roofline; anything the database never measured
// is an explicit miss answered by the roofline (the calibrated one where the device has it).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "planner/costs/cost_db.hpp"
#include "planner/costs/roofline_costs.hpp"

namespace moeplan::planner {

/// Source names of MeasuredCosts answers (every figure carries one).
inline constexpr const char* kSourceExact = "db-exact";
inline constexpr const char* kSourceInterp = "db-interp";
inline constexpr const char* kSourceExtrap = "db-extrap";
inline constexpr const char* kSourceMiss = "roofline-miss";
inline constexpr const char* kSourceTrivial = "trivial";  ///< no work: one-rank group, 0 bytes
/// The start of a MeasuredCosts name: "measured:<db path>[ (statistic)]".
inline constexpr const char* kSourceMeasuredPrefix = "measured:";

/// One measured curve: time against one size (GEMM rows m, or bytes), ascending.
struct CostCurve {
  std::vector<double> x;
  std::vector<double> seconds;
};

/// Answers t(x) from a curve: exact hit, log-log interpolation inside, or outside the range the
/// nearest point's efficiency held against `roofline(x)`: t = t_end · roofline(x) /
/// roofline(x_end). Returns the seconds and sets `source` to kSourceExact/Interp/Extrap.
double curve_lookup(const CostCurve& curve, double x, double (*roofline)(const void*, double),
                    const void* roofline_ctx, std::string* source);

/// Which timing statistic of a point a MeasuredCosts answers with.
enum class CostStatistic : std::uint8_t {
  kMedian,  ///< the default
  kP10,     ///< the 10th percentile: closer to the unloaded time on a shared machine
};
std::string statistic_name(CostStatistic s);  ///< "median", "p10"
std::optional<CostStatistic> parse_statistic(const std::string& name);

/// The bundled device (of `known`) a CUDA profile measured: its device "cuda:<GPU name>/ranks=N"
/// names a GPU whose name has the device's name (or its part before '_') as a word, e.g.
/// "cuda:NVIDIA H200/ranks=1" → "h200"; empty for other devices or an unknown GPU.
std::string profiled_gpu_device(const std::string& device, const std::vector<std::string>& known);

/// The ops a MeasuredCosts reads from a database.
const std::vector<std::string>& planner_ops();

class MeasuredCosts final : public CostSource {
 public:
  /// Reads every passed point of `device` from `db` ("" = the database's only device, or the
  /// cluster's device when the database holds several). Misses are answered by the roofline of
  /// `cluster` with `calibration` (null: the plain one). Errors: an empty database, no points of
  /// that device (the message lists the devices it has), or a database of a bundled GPU device
  /// (e.g. imported h100 tables) used for a cluster of another device.
  static Result<std::unique_ptr<MeasuredCosts>> load(
      const CostDb& db, const Cluster& cluster, const std::string& device = "",
      CostStatistic statistic = CostStatistic::kMedian,
      std::shared_ptr<const Calibration> calibration = nullptr);
  /// Builds from points already read (tests); `name` is the source's name.
  MeasuredCosts(const std::vector<CostPoint>& points, const Cluster& cluster, std::string name,
                CostStatistic statistic = CostStatistic::kMedian,
                std::shared_ptr<const Calibration> calibration = nullptr);

  std::string name() const override { return name_; }
  const std::string& device() const { return device_; }
  Result<CostEstimate> gemm(const GemmQuery& q) const override;
  /// The CPU backend runs a grouped GEMM as one GEMM per non-empty group: the sum of the
  /// groups' GEMM costs.
  Result<CostEstimate> grouped_gemm(const GroupedGemmQuery& q) const override;
  Result<CostEstimate> elementwise(const ElementwiseQuery& q) const override;
  /// Imported collective curves (NCCL tables) were measured inside one NVLink domain: a query
  /// whose groups span domains is a miss. An -v collective with no curve of its own is answered
  /// by an imported even curve at the same nccl-tests size, scaled by the roofline's shape ratio
  /// (labelled db-extrap: measured efficiency held).
  Result<CostEstimate> collective(const CollectiveQuery& q) const override;
  /// True when the database holds fused MoE points (imported GPU tables): then every rank's
  /// experts, permute and weighted sum are one moe_fused answer.
  bool has_fused_moe(const std::string& table_dtype) const override;
  /// The curve of (dtype, H, I, E, k, tp, ep), balanced routing, in tokens: exact, interpolated,
  /// or extrapolated against the roofline's fused form. A rank whose rows are not balanced (a
  /// skewed load, padding, replicas) gets the balanced time scaled by the roofline's ratio of its
  /// rows to balanced ones (db-extrap), and so does a rank whose kernel reads other rows than
  /// `tokens` (rows_in of an all-to-all dispatch). A shape not in the tables is a miss.
  Result<CostEstimate> moe_fused(const MoeFusedQuery& q) const override;
  /// The attention core from profiled attention points (op "attention"), keyed by (dtype,
  /// phase, heads, kv_heads, qk, v) on the rank. Decode reads the KV cache: one curve in the
  /// (sequence, cached token) pairs, sequences × context, whatever batch and context make them
  /// up. Prefill: per measured context a curve in tokens (exact, interpolated, or extrapolated
  /// against the roofline); between two measured contexts the answers are interpolated in
  /// log-log, outside them the nearest one is scaled by the roofline's ratio (db-extrap). A shape
  /// the database never measured (imported GPU tables hold no attention yet) is a miss answered by
  /// the roofline.
  Result<CostEstimate> attention(const AttentionQuery& q) const override;

  /// DeepEP's kernels from imported DeepEP tables (ops moe_dispatch, moe_combine; impl
  /// deepep_normal at DeepEP's default 20 SMs, or deepep_ll), keyed by (hidden, top-k, experts,
  /// nodes), a curve in tokens per rank: exact, interpolated, or extrapolated against the
  /// roofline's kernel time. The tables route uniformly: a skewed load's traffic is not in
  /// them. Another shape is a miss answered by the roofline.
  Result<CostEstimate> ep_kernel(const EpKernelQuery& q) const override;

  /// The queries that missed the database (answered by the roofline), one line each, sorted.
  std::vector<std::string> misses() const;

  /// The measured fused MoE curve for a query's key, or null (the accuracy report's leave-one-out
  /// reads it).
  const CostCurve* moe_curve(const MoeFusedQuery& q) const;

 private:
  using GemmKey = std::tuple<std::string, long, long>;             // dtype, n, k
  using OpKey = std::tuple<std::string, std::string>;              // op, dtype
  using CollKey = std::tuple<std::string, std::string, int, int>;  // op, dtype, g, groups
  /// dtype, hidden, inter, experts, top-k, tp, ep
  using MoeKey = std::tuple<std::string, long, long, int, int, int, int>;
  /// kernel ("normal_dispatch", ...), hidden, top-k, experts, nodes
  using EpKey = std::tuple<std::string, long, int, int, int>;
  /// dtype, decode, heads, kv_heads, qk, v
  using AttnKey = std::tuple<std::string, bool, int, int, int, int>;
  struct CollCurve {
    CostCurve curve;
    bool imported = false;
  };
  Result<CostEstimate> gemm_one(double m, double n, double k, DType dtype) const;
  const CollCurve* find_collective(const std::string& op, const std::string& dtype, int g,
                                   int num_groups) const;
  void note_miss(const std::string& what) const;

  std::string name_;
  std::string device_;
  const Cluster& cluster_;
  RooflineCosts roofline_;
  std::map<GemmKey, CostCurve> gemm_;
  std::map<OpKey, CostCurve> elementwise_;
  std::map<CollKey, CollCurve> collective_;
  std::map<MoeKey, CostCurve> moe_;
  std::map<EpKey, CostCurve> ep_;
  /// Prefill (and a GPU's decode): by context, a curve in tokens (decode: sequences).
  std::map<AttnKey, std::map<double, CostCurve>> attention_;
  std::map<AttnKey, CostCurve> attention_decode_;  ///< the CPU's decode, in sequences × context
  mutable std::mutex mutex_;
  mutable std::set<std::string> misses_;
};

/// The distinct devices of a set of points, sorted.
std::vector<std::string> point_devices(const std::vector<CostPoint>& points);

/// A device spec for "this machine" derived from its profile: peak FLOP/s = the fastest measured
/// GEMM (the CPU backend computes every storage dtype in fp32, so one peak serves all), memory
/// bandwidth = the fastest measured elementwise op, link bandwidth = the highest measured busBw,
/// `memory_bytes` per rank as given.
DeviceSpec derive_device_spec(const std::vector<CostPoint>& points, const std::string& device,
                              double memory_bytes);

/// Smallest measured collective time of `device` (the per-step latency of its fabric), seconds;
/// 0 when the profile has no collective.
double derive_link_latency(const std::vector<CostPoint>& points, const std::string& device);

}  // namespace moeplan::planner
