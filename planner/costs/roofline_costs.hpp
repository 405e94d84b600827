// RooflineCosts: a CostSource derived from the device spec (peak FLOP/s, HBM bandwidth) and the
// cluster topology (collectives routed over the link graph). No measurements needed. With a
// device calibration (resources/devices/calibration/NAME.json, fitted to measured GPU tables) it
// is the calibrated roofline: GEMM efficiency in (m, n, k), HBM efficiency, the fused MoE kernel
// and NCCL curves inside an NVLink domain; what the calibration lacks keeps the plain formula.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "planner/costs/calibration.hpp"
#include "planner/costs/cost_source.hpp"
#include "planner/topology/cluster.hpp"

namespace moeplan::planner {

/// Fraction of peak FLOP/s a GEMM with m rows reaches:
///   efficiency(m) = kMaxGemmEfficiency · m / (m + kGemmHalfEfficiencyRows).
/// kMaxGemmEfficiency = 0.77 is what well-tuned dense BF16 GEMMs reach on H100 (cuBLAS ≈ 765 of
/// 989 TFLOP/s). kGemmHalfEfficiencyRows = 64 is the height of one Hopper WGMMA tile: a GEMM of
/// m rows keeps its tensor cores busy roughly m / (m + 64) of the time, so 64 rows reach half
/// the large-m efficiency, 8 rows 11%, 4096 rows 98%. Small grouped expert GEMMs therefore run
/// far from peak, as measured (Qwen3-30B grouped shapes: 85–160 of 989 TFLOP/s).
inline constexpr double kMaxGemmEfficiency = 0.77;
inline constexpr double kGemmHalfEfficiencyRows = 64.0;
/// Fraction of HBM bandwidth streaming kernels reach.
inline constexpr double kHbmEfficiency = 0.85;
/// Fixed cost of one kernel launch (GEMM, grouped GEMM or elementwise kernel), seconds.
inline constexpr double kKernelLaunchSeconds = 3e-6;

/// efficiency(m) above; 0 for m ≤ 0.
double gemm_efficiency(double m);

/// Source labels of RooflineCosts answers: the plain formula, or the calibrated form.
inline constexpr const char* kSourceRoofline = "roofline";
inline constexpr const char* kSourceCalibrated = "roofline-calibrated";

/// True when every group of `q` lies inside one NVLink domain of `cluster` (where the measured
/// NCCL tables were taken: one HGX node, or one NVL72 rack).
bool groups_inside_nvlink_domain(const Cluster& cluster, const CollectiveQuery& q);

/// The even collective a -v query is measured as (all_to_all_v → all_to_all, all_gather_v →
/// all_gather; the others unchanged) and its nccl-tests size: all_to_all(-v) bytes = what one
/// rank sends; all_gather_v's largest row sum r = (g−1)/g of the gathered size.
CollectiveOp even_collective(CollectiveOp op);
double even_collective_bytes(const CollectiveQuery& q);

/// How an all-reduce is run (NCCL picks per message size; so do we: the faster of the two).
enum class AllReduceAlgo { kRing, kTree };

/// The GPU-to-GPU flows of a collective query: the even split or the given matrix for
/// all-to-all(-v) and all-gather-v (every rank sends to every other directly), a ring in group
/// order for all-gather ((g−1)/g·S to the next rank), and for all-reduce either a ring
/// (2(g−1)/g·S to the next rank) or a binary tree in group order (reduce up, broadcast down:
/// S each way on every tree edge). `steps` gets the number of sequential steps whose latency
/// adds up (1; g−1 for the all-gather ring; 2(g−1) for the all-reduce ring; 2·depth for the
/// tree).
std::vector<Flow> collective_flows(const CollectiveQuery& q, int* steps,
                                   AllReduceAlgo algo = AllReduceAlgo::kRing);

/// Time of a collective over `cluster`: the busiest link's bytes / bandwidth plus steps × the
/// slowest path's latency; for an all-reduce, the faster of ring and tree. Also fills `load`
/// (of the algorithm chosen) when non-null.
double collective_seconds(const Cluster& cluster, const CollectiveQuery& q,
                          LinkLoad* load = nullptr);

class RooflineCosts final : public CostSource {
 public:
  /// Without `calibration`: the plain roofline (the device spec's peaks, fixed efficiencies).
  explicit RooflineCosts(const Cluster& cluster,
                         std::shared_ptr<const Calibration> calibration = nullptr)
      : cluster_(cluster), calibration_(std::move(calibration)), network_(network_links(cluster)) {}

  /// "roofline", or "roofline-calibrated (<provenance of the fit>)".
  std::string name() const override;
  /// Calibrated for the dtype: the fitted dense-GEMM form; else the plain one.
  Result<CostEstimate> gemm(const GemmQuery& q) const override;
  /// Always the plain formula: a grouped GEMM is calibrated only inside the fused MoE kernel.
  Result<CostEstimate> grouped_gemm(const GroupedGemmQuery& q) const override;
  /// Calibrated: bytes at the fitted HBM efficiency of the device's fused MoE fit.
  Result<CostEstimate> elementwise(const ElementwiseQuery& q) const override;
  /// Calibrated, for a group size with a fitted curve and groups inside one NVLink domain: the
  /// NCCL curve (a -v collective: the even curve scaled by the routed shape). Groups across
  /// nodes, with a device calibration that has NIC curves: routed over the cluster graph with
  /// the NIC links at the fitted efficiency for the bytes on the busiest one and the nodes a
  /// group spans (DeepEP normal mode; an all-reduce at the combine curve, which reduces at the
  /// receiver, the others at the dispatch curve). Otherwise routed (routed_collective).
  Result<CostEstimate> collective(const CollectiveQuery& q) const override;
  /// The attention core as a fused (flash) kernel: max(FLOPs / (peak · efficiency(query rows per
  /// KV head)), bytes / (HBM · 0.85)) + one launch; the calibrated HBM efficiency where fitted.
  Result<CostEstimate> attention(const AttentionQuery& q) const override;
  /// True when the calibration has a fused MoE fit for `table_dtype`.
  bool has_fused_moe(const std::string& table_dtype) const override;
  /// The calibrated fused form (calibration.hpp) when fitted for the dtype; otherwise the plain
  /// parts the cost model books without it (grouped GEMMs, SiLU, the permute of the rank's
  /// pairs), labelled "roofline".
  Result<CostEstimate> moe_fused(const MoeFusedQuery& q) const override;

  /// Calibrated (the calibration has the kernel): fixed_s + max(the inter-node flows' busiest
  /// link time / nic_efficiency, the intra-node flows' routed time); otherwise the default
  /// (notify, then the slowest hop, routed).
  Result<CostEstimate> ep_kernel(const EpKernelQuery& q) const override;
  /// Whether ep_kernel prices `q` with a calibrated DeepEP form (fitted on measured kernels).
  bool calibrated_ep_kernel(const EpKernelQuery& q) const;

  /// The plain collective: routed over the cluster graph. Link load is linear in the bytes, so
  /// each collective's shape (op, groups, matrix normalised by `bytes`) is routed once and cached.
  Result<CostEstimate> routed_collective(const CollectiveQuery& q) const;

  /// The most nodes (NIC hosts of `gpus_per_node` GPUs) one group of `q` spans.
  int nodes_spanned(const CollectiveQuery& q) const;

  /// Peak dense FLOP/s of the device for `dtype`.
  double peak_flops(DType dtype) const;
  /// The calibration in use, or null.
  const Calibration* calibration() const { return calibration_.get(); }

  /// The routed shapes' caches hold each query's groups and traffic matrix; a caller that
  /// costs many different loads (the placement search on predicted time: every step and
  /// candidate map its own matrix) would grow them without bound, so each cache starts over
  /// past this many cells (64 MiB of doubles). A routed shape recomputed is the same shape:
  /// answers do not change.
  static constexpr std::size_t kMaxCachedCells = std::size_t{8} << 20;
  /// Cells held by the two caches now (groups' members and matrix entries, one per entry).
  std::size_t cached_cells() const;

 private:
  const char* label() const { return calibration_ ? kSourceCalibrated : kSourceRoofline; }

  struct Algo {
    double seconds_per_byte = 0.0;  ///< busiest link seconds per byte of `bytes`
    double latency = 0.0;           ///< steps × slowest path latency
    /// The same split into network links (touching a NIC or a switch) and the others: the
    /// busiest network link's seconds and bytes per byte, the busiest other link's seconds.
    double nic_seconds_per_byte = 0.0;
    double nic_bytes_per_byte = 0.0;
    double other_seconds_per_byte = 0.0;
    double seconds(double bytes) const { return seconds_per_byte * bytes + latency; }
  };
  struct Shape {
    Algo primary;              ///< ring (all-reduce) or the only algorithm
    std::optional<Algo> tree;  ///< all-reduce only
    double seconds(double bytes) const {
      return tree ? std::min(primary.seconds(bytes), tree->seconds(bytes)) : primary.seconds(bytes);
    }
  };
  /// A routed query scaled (routed_shape: to one byte): its op, bytes, groups and matrix. Looked up
  /// by a hash of the query as given and compared against it in place, so a hit copies nothing (the
  /// planner asks the same shapes thousands of times per plan, groups of up to 1,024 GPUs).
  struct UnitQuery {
    int op = 0;
    double bytes = 1.0;  ///< q.bytes / scale
    std::vector<std::vector<int>> groups;
    std::vector<std::vector<double>> matrix;  ///< q.matrix / scale
    bool matches(int query_op, const CollectiveQuery& q, double scale) const;
  };
  struct ShapeEntry {
    UnitQuery query;
    Shape shape;
  };
  /// An ep_kernel query's hops scaled by 1 / (the first hop's bytes): its routed NIC and NVLink
  /// busiest seconds per byte of that scale (routing is linear in the bytes).
  struct EpEntry {
    std::vector<UnitQuery> hops;
    double nic = 0.0, nvlink = 0.0;
  };

  /// Per edge index: 1 when the link touches a NIC or a network switch.
  static std::vector<char> network_links(const Cluster& cluster);
  /// The routed shape of `q` (cached; q's groups and matrix must be valid).
  Shape routed_shape(const CollectiveQuery& q) const;
  /// routed_collective with the NIC links at the calibrated efficiency (see collective()).
  Result<CostEstimate> internode_collective(const CollectiveQuery& q,
                                            const CostEstimate& routed) const;

  const Cluster& cluster_;
  std::shared_ptr<const Calibration> calibration_;
  std::vector<char> network_;
  static std::size_t cells(const UnitQuery& q);

  mutable std::mutex mutex_;
  mutable std::unordered_map<std::uint64_t, std::vector<ShapeEntry>> cache_;
  mutable std::unordered_map<std::uint64_t, std::vector<EpEntry>> ep_cache_;
  mutable std::size_t cache_cells_ = 0;
  mutable std::size_t ep_cache_cells_ = 0;
};

}  // namespace moeplan::planner
