// The calibrated roofline's parameters for one device (resources/devices/calibration/NAME.json):
// GEMM efficiency in (m, n, k), HBM efficiency, the fused MoE kernel's overheads and NCCL
// collective curves, fitted by scripts/aiconfigurator/fit_calibration.py from measured GPU tables
// (forms and provenance in docs/GPU_COSTS.md).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "models/result.hpp"

namespace moeplan::planner {

/// Fraction of peak FLOP/s a GEMM of m rows, n columns and depth k reaches:
///   eff = max_efficiency · m/(m + rows_half) · n/(n + cols_half) · k/(k + depth_half).
/// The factors are fitted together: read eff as a whole (max_efficiency alone may exceed 1).
struct EfficiencyFit {
  double max_efficiency = 0.0;
  double rows_half = 0.0;
  double cols_half = 0.0;
  double depth_half = 0.0;
  double operator()(double m, double n, double k) const;
};

/// Dense GEMM: t = fixed_s + ((2mnk / (peak·eff))^q + (bytes / (hbm·hbm_efficiency))^q)^(1/q).
struct GemmCalibration {
  EfficiencyFit efficiency;
  double hbm_efficiency = 0.0;
  double fixed_s = 0.0;
  double blend_exponent = 1.0;  ///< q: the smooth maximum of compute and memory time
};

/// One EP rank's fused MoE kernel (docs/GPU_COSTS.md, "Calibrated roofline"):
///   t = fixed_s + fixed_per_hidden_s·H + G(2·I/tp, H) + G(H, I/tp) + 3·P·(I/tp)·2 / (η·HBM)
///       + permute_factor · 2·(P + N)·H·2 / (η·HBM)
/// (N: the rows the kernel reads in and writes out: the tokens under all-gather dispatch, the
/// routed rows under an all-to-all one)
/// with G a grouped GEMM of output width n and depth k over the rank's non-empty groups:
/// P = Σ m_g rows, A = Σ occupancy(m_g) groups (group_occupancy: min(1, m) for counts,
/// 1 − e^{−m} for expected counts), m̄ = P/A, eff(m̄, n, k), t_c = 2·P·n·k /
/// (peak·eff), t_m = (A·n·k·w + P·(n+k)·a) / (η·HBM), G = (t_c^q + t_m^q)^(1/q) +
/// per_tile_s · T, with T = Σ_g tiles(m_g) · ceil(n / tile_cols) output tiles, tiles(m) =
/// o · ceil(m / o / tile_rows) with o = occupancy(m) (counts: ceil(m / tile_rows) for m ≥ 1,
/// m below).
struct MoeCalibration {
  /// What the form needs of a rank's groups, from one pass over them: P rows, A non-empty groups
  /// (group_occupancy) and their row tiles Σ_g tiles(m_g).
  struct Groups {
    double pairs = 0.0;
    double active = 0.0;
    double row_tiles = 0.0;
  };
  EfficiencyFit efficiency;
  double hbm_efficiency = 0.0;  ///< η
  double per_tile_s = 0.0;      ///< fixed cost of one output tile of a grouped GEMM
  double tile_rows = 128.0;     ///< the output tile the per-tile cost counts (not fitted)
  double tile_cols = 128.0;
  double fixed_s = 0.0;
  double fixed_per_hidden_s = 0.0;  ///< the fixed cost's part in the hidden size, s per element
  double permute_factor = 0.0;
  double blend_exponent = 1.0;
  /// P, A and the row tiles of groups of `rows` (`expected`: the rows are expected counts,
  /// group_occupancy).
  Groups groups(const std::vector<double>& rows, bool expected) const;
  /// Output tiles of one grouped GEMM of width n over groups of `rows` (T above).
  double output_tiles(const std::vector<double>& rows, double n, bool expected = false) const;
};

/// A collective of S bytes (nccl-tests' buffer size) over g GPUs inside one NVLink domain:
///   t = latency_s + S·f / bus_bandwidth · (1 + (half_size_bytes / S)^shape_exponent)
/// with f = busBw / algBw of the op (2(g−1)/g all-reduce, (g−1)/g the others).
struct CollectiveCalibration {
  double latency_s = 0.0;
  double bus_bandwidth = 0.0;  ///< bytes/s
  double half_size_bytes = 0.0;
  double shape_exponent = 0.0;
  double min_bytes = 0.0;  ///< the measured sizes the curve was fitted on
  double max_bytes = 0.0;
  double seconds(double bytes, double bus_factor) const;
};

/// A DeepEP kernel (normal or low-latency dispatch or combine), fitted on aiconfigurator's
/// DeepEP tables (scripts/aiconfigurator/fit_deepep.py):
///   t = fixed_s + per_node_s · nodes + max(NIC time / nic_efficiency, NVLink time)
/// with the NIC time the busiest network link's bytes / bandwidth of the kernel's inter-node
/// flows and the NVLink time its intra-node flows routed at link bandwidth.
struct EpKernelCalibration {
  double fixed_s = 0.0;         ///< notify, launch and per-kernel latency
  double per_node_s = 0.0;      ///< the part of it that grows with the nodes the kernel spans
  double nic_efficiency = 1.0;  ///< fraction of the NIC bandwidth the kernel reaches
};

/// A transfer through the NICs between nodes, fitted on sglang's DeepEP tables (normal and
/// low-latency mode, dispatch and combine, 2/4/8 nodes):
///   t(S) = latency_s + S / (efficiency(S) · nic_bandwidth),
///   efficiency(S) = max_efficiency / (1 + (half_size_bytes / S)^shape_exponent)
/// with S the bytes one GPU sends through its NIC and nic_bandwidth the per-GPU NIC bandwidth the
/// fit is relative to (Calibration::nic_bandwidth).
struct NicCalibration {
  double latency_s = 0.0;
  double max_efficiency = 0.0;
  double half_size_bytes = 0.0;
  double shape_exponent = 0.0;
  double min_bytes = 0.0;  ///< the measured sizes the curve was fitted on
  double max_bytes = 0.0;
  /// Fraction of the NIC bandwidth a transfer of `bytes` reaches (0 for no bytes).
  double efficiency(double bytes) const;
  /// The whole transfer at `nic_bandwidth` bytes/s per GPU.
  double seconds(double bytes, double nic_bandwidth) const;
};

/// nccl-tests' busBw / algBw for `op` ("all_reduce", "all_gather", ...) over g GPUs.
double nccl_bus_factor(const std::string& op, int g);

struct Calibration {
  std::string device;      ///< moeplan device name ("h200")
  std::string system;      ///< the measured system ("h200_sxm")
  std::string file;        ///< the file it was read from
  std::string provenance;  ///< "aiconfigurator-core 0.12.0, trtllm 1.3.0rc20"
  /// The device figures the parameters are relative to (the calibrated roofline uses these).
  double peak_bf16_flops = 0.0;
  double peak_fp8_flops = 0.0;
  double hbm_bandwidth = 0.0;
  /// By table dtype: "bf16", "fp8", "fp8_block".
  std::map<std::string, GemmCalibration> gemm;
  std::map<std::string, MoeCalibration> moe;
  /// By (op, GPUs): the curve fitted on every measured size, and the one fitted on every other
  /// size only (the accuracy report judges it on the sizes it left out).
  std::map<std::pair<std::string, int>, CollectiveCalibration> collectives;
  std::map<std::pair<std::string, int>, CollectiveCalibration> collectives_held_out;
  /// By ep_kernel_name: "normal_dispatch", "normal_combine", "ll_dispatch", "ll_combine".
  std::map<std::string, EpKernelCalibration> ep_kernels;
  std::string ep_kernels_provenance;  ///< the DeepEP tables they were fitted on
  /// Inter-node transfers by (mode "normal" | "ll", phase "dispatch" | "combine", nodes): the
  /// curve fitted on every measured size, and the one fitted on every other size only.
  using NicKey = std::tuple<std::string, std::string, int>;
  std::map<NicKey, NicCalibration> nic;
  std::map<NicKey, NicCalibration> nic_held_out;
  double nic_bandwidth = 0.0;  ///< bytes/s per GPU the NIC efficiencies are relative to
  std::string nic_provenance;  ///< "sglang 0.5.6.post2 DeepEP tables (borrowed: H100 rows)"

  /// The NIC curve fitted for exactly (mode, phase, nodes), or null.
  const NicCalibration* nic_curve(const std::string& mode, const std::string& phase,
                                  int nodes) const;
  /// Fraction of the NIC bandwidth a transfer of `bytes` per GPU among `nodes` nodes reaches,
  /// for DeepEP `mode` ("normal" | "ll") and `phase` ("dispatch": sends only; "combine": sends
  /// and a reduction at the receiver). A fitted node count uses its curve; between two fitted
  /// counts the efficiency is interpolated in log(nodes); beyond the largest (8) the largest's
  /// curve holds, and `extrapolated` (when given) is set. nullopt when the device has no fit for
  /// (mode, phase) or nodes < 2 (nothing crosses a NIC).
  std::optional<double> nic_efficiency(double bytes, int nodes, const std::string& mode = "normal",
                                       const std::string& phase = "dispatch",
                                       bool* extrapolated = nullptr) const;

  /// Peak FLOP/s for a table dtype (fp8 and fp8_block: the fp8 peak).
  double peak_flops(const std::string& table_dtype) const;
};

/// Where a device's calibration lives: <resources>/devices/calibration/<device>.json.
std::filesystem::path calibration_path(const std::string& device);

/// Reads and validates a calibration file; errors name the file and the key.
Result<Calibration> load_calibration_file(const std::filesystem::path& path);

/// The bundled calibration of `device`, or nullopt when there is none (the plain roofline).
Result<std::optional<Calibration>> load_calibration(const std::string& device);

}  // namespace moeplan::planner
