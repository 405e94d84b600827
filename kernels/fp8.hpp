// fp8 e4m3fn (OCP FP8 E4M3, "fn": no infinities, one NaN pattern per sign) conversion with
// round-to-nearest-even and saturation to ±448, and DeepSeek-V3's block-scaled quantization:
// weights in 128×128 blocks, activations in 1×128 groups, one fp32 scale each.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace moeplan::kernels {

/// The largest finite e4m3fn value.
inline constexpr float kE4m3Max = 448.0F;

/// fp32 → e4m3fn bits: round to nearest, ties to even; values beyond ±448 (infinities included)
/// saturate to ±448, as NVIDIA's satfinite conversion does; NaN stays NaN (0x7f / 0xff).
std::uint8_t f32_to_e4m3(float f);

/// e4m3fn bits → fp32 (exact).
float e4m3_to_f32(std::uint8_t bits);

/// Quantizes a row-major [rows × cols] matrix in blocks of [block_rows × block_cols] (partial
/// blocks at the edges, as DeepSeek-V3's checkpoint tiles them): each block's scale is
/// amax / 448 (1 for an all-zero block) and its values e4m3(v / scale). `q` holds rows·cols
/// bytes; `scales` ⌈rows/block_rows⌉·⌈cols/block_cols⌉ floats, row-major by block.
void quantize_blocks(std::span<const float> values, int rows, int cols, int block_rows,
                     int block_cols, std::span<std::uint8_t> q, std::span<float> scales);

/// The inverse of quantize_blocks: values[i] = e4m3_to_f32(q[i]) · scale of its block.
void dequantize_blocks(std::span<const std::uint8_t> q, std::span<const float> scales, int rows,
                       int cols, int block_rows, int block_cols, std::span<float> values);

/// Each row of the row-major [rows × cols] matrix `x` quantized to e4m3 in 1 × `group` groups
/// and dequantized, in place: exactly quantize_blocks then dequantize_blocks on the row (the
/// dynamic activation quantization of DeepSeek-V3's fp8 GEMMs).
void fake_quantize_rows(float* x, int rows, int cols, int group);

/// How a GEMM quantizes its activation input to e4m3 (on a copy): dynamically in 1 × group
/// groups of each row (DeepSeek-V3's recipe), dynamically with one scale per row (per token:
/// the "FP8-dynamic" checkpoints' per-channel weights), or with a static per-tensor scale (the
/// calibrated input_scale per-tensor fp8 checkpoints ship).
struct Fp8Act {
  enum class Kind : std::uint8_t { kGroups, kToken, kStatic };
  Kind kind = Kind::kGroups;
  int group = 0;       ///< kGroups: inputs per scale
  float scale = 0.0F;  ///< kStatic: the fixed scale (calibration amax / 448)

  static Fp8Act groups(int g) { return {Kind::kGroups, g, 0.0F}; }
  static Fp8Act token() { return {Kind::kToken, 0, 0.0F}; }
  static Fp8Act fixed(float s) { return {Kind::kStatic, 0, s}; }
  /// "1×128 groups", "per token", "static per tensor".
  std::string describe() const;
};

/// How a backend's fp8 GEMM accumulates beyond fp32, for the bounds that check it: within each
/// run of `chunk` products along K (0: all of K) an addition may lose up to `unit` relative to
/// the running sum (fp8 tensor cores keep about 14 bits — DeepSeek-V3's report, §3.3.2 — and
/// promote to fp32 only between chunks); unit 0 when it accumulates in fp32 throughout.
struct Fp8Accumulation {
  double unit = 0.0;
  int chunk = 0;

  /// The relative error this adds to a K-term dot product, as a multiple of Σ|a·b|:
  /// γ(n) = n·unit / (1 − n·unit) for the n = min(chunk, K) − 1 additions of one chunk.
  double extra(int k) const {
    if (unit <= 0.0 || k <= 1) return 0.0;
    const int n = (chunk > 0 && chunk < k ? chunk : k) - 1;
    return n * unit / (1.0 - n * unit);
  }
};

/// x [rows × cols] quantized to e4m3 and dequantized in place, as `act` says: quantize_blocks
/// then dequantize_blocks with blocks of 1 × group or 1 × cols; or each value e4m3(v / scale)
/// · scale with the static scale (saturating at ±448 · scale).
void fake_quantize_activations(float* x, int rows, int cols, const Fp8Act& act);

/// A static activation scale calibrated on `values`: amax / 448 (1 when all are zero).
float calibrated_scale(std::span<const float> values);

/// Quantizes the [rows][cols] part at column `c0` of `values` (row stride `ld`) in
/// [block_rows × block_cols] blocks, as a checkpoint stores one weight of a fused matrix: its
/// e4m3 bits into `q` (same layout as `values`), its scales into `scales` (resized), and its
/// values replaced by their exact dequantized values.
void quantize_part(std::vector<float>& values, int ld, int c0, int rows, int cols, int block_rows,
                   int block_cols, std::vector<std::uint8_t>& q, std::vector<float>& scales);

/// Dequantizes the [rows × cols] part of `q` at column `c0` (row stride `ld`) whose scales are
/// `scales` (quantize_blocks's layout for that part alone) into `out` at column `out_c0` (row
/// stride `out_ld`): out = e4m3_to_f32(q) · scale of its block.
void dequantize_part(const std::uint8_t* q, int ld, int c0, int rows, int cols, int block_rows,
                     int block_cols, const float* scales, float* out, int out_ld, int out_c0);

/// The same for a panel of such a part: its columns [first_col, first_col + cols) (blocks cut by
/// the panel's edges taken in part), the part's scales having `scale_ld` blocks per row of
/// blocks.
void dequantize_panel(const std::uint8_t* q, int ld, int c0, int rows, int first_col, int cols,
                      int block_rows, int block_cols, const float* scales, int scale_ld, float* out,
                      int out_ld, int out_c0);

/// The largest |dequantized − v| of one value v of a block (or group) whose scale is `scale`
/// (amax / 448): half a step of e4m3 (2^-4 relative on normals, 2^-10 · scale on subnormals)
/// and the two fp32 roundings (v / scale, q · scale).
double e4m3_error_bound(double abs_value, double scale);

}  // namespace moeplan::kernels
