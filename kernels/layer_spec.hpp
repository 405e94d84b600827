// The shapes and semantics of one MoE layer as the kernels see them, and the deterministic
// weights and inputs every rank generates from a seed (no broadcast needed).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/fp8.hpp"
#include "models/dtype.hpp"
#include "models/moe_model.hpp"
#include "models/result.hpp"
#include "models/weight_format.hpp"

namespace moeplan::kernels {

/// One MoE layer: sizes, router semantics and storage dtype.
struct LayerSpec {
  int hidden = 0;               ///< H
  int intermediate = 0;         ///< I, width of one routed expert
  int num_experts = 0;          ///< E
  int top_k = 0;                ///< k
  int shared_intermediate = 0;  ///< total shared-expert width (0: none)
  bool shared_gated = false;    ///< Qwen2-MoE: sigmoid(x·w_sg) scales the shared expert
  models::RouterSpec router;
  DType dtype = DType::kFp32;
  std::uint64_t seed = 0;
  /// fp8 expert weights, kPlain when none: each expert matrix (gate, up, down; routed and
  /// shared) stored as fp8 e4m3 with fp32 scales — kFp8Block: one per [fp8_block_out ×
  /// fp8_block_in] block (output channels × inputs, DeepSeek-V3's recipe); kFp8Channel: one per
  /// output channel; kFp8Tensor: one per matrix — and each GEMM's activation input quantized to
  /// fp8 e4m3 as fp8_act says (1 × 128 groups, per token, static per tensor).
  WeightScheme fp8_scheme = WeightScheme::kPlain;
  int fp8_block_out = 0;
  int fp8_block_in = 0;
  Fp8Act fp8_act;
  /// 4-bit expert weights decoded on load (W4A16): kW4A16 (int4 groups of four_bit_group inputs,
  /// fp16 scales, zero points when four_bit_zero_points), kMxfp4 (e2m1, e8m0 scale per
  /// four_bit_group inputs) or kNvfp4 (e2m1, e4m3 scale per four_bit_group inputs and an fp32
  /// scale per matrix); kPlain otherwise. Each expert matrix is quantized to the format and
  /// the kernels (and the reference) compute with its decoded values in the dtype.
  WeightScheme four_bit = WeightScheme::kPlain;
  int four_bit_group = 0;
  bool four_bit_zero_points = false;

  bool fp8() const { return fp8_scheme != WeightScheme::kPlain; }
  bool four_bit_weights() const { return four_bit != WeightScheme::kPlain; }

  /// The model's layer with hidden and expert widths divided by `scale` (expert count, top-k and
  /// routing kept). Errors when `scale` does not divide a width.
  static Result<LayerSpec> from_model(const models::MoeModel& m, int scale, DType dtype,
                                      std::uint64_t seed);
};

/// An expert's fp8 form: e4m3 bits in the layout of gate_up and down, and the fp32 scales of
/// the gate, up and down parts, each row-major by block over that part as stored here (edge
/// blocks partial, as DeepSeek-V3's checkpoint tiles). Blocks are [rows × cols] of the stored
/// part: gate and up are stored [H][width] (inputs × outputs), down [width][H]. A block format
/// has block_in × block_out blocks; per output channel, blocks of every input × 1 column; per
/// tensor, one block. A tp-slice of the last two keeps the full matrix's scales (and block
/// shape): the scale of a channel or tensor is taken over all of it, not over the slice. Static
/// activation scales are calibrated on 16 tokens of their own (make_input's tokens from
/// kCalibrationToken) through the full expert: amax / 448 of its input and of its activation.
struct Fp8ExpertWeights {
  int gate_up_block_rows = 0;
  int gate_up_block_cols = 0;
  int down_block_rows = 0;
  int down_block_cols = 0;
  Fp8Act act;                ///< kStatic: the scales below
  float input_scale = 0.0F;  ///< kStatic: gate/up's input scale (calibrated)
  float mid_scale = 0.0F;    ///< kStatic: down's input scale (calibrated on the full width)
  std::vector<std::uint8_t> gate_up;  ///< [H][2·width]
  std::vector<std::uint8_t> down;     ///< [width][H]
  std::vector<float> gate_scales;
  std::vector<float> up_scales;
  std::vector<float> down_scales;

  /// How gate/up and down quantize their inputs (act, with the static scales where static).
  Fp8Act input_act() const {
    return act.kind == Fp8Act::Kind::kStatic ? Fp8Act::fixed(input_scale) : act;
  }
  Fp8Act mid_act() const {
    return act.kind == Fp8Act::Kind::kStatic ? Fp8Act::fixed(mid_scale) : act;
  }
};

/// One expert's weights (routed or shared), possibly a tp-slice of its intermediate dim:
/// gate_up [H][2·width] (gate columns first, then up), down [width][H]; values representable in
/// the storage dtype. With fp8 weights (`fp8` not empty) gate_up and down hold the exact
/// dequantized values of the fp8 form, which the reference computes with; the CPU backend's
/// GEMMs read the fp8 form.
struct ExpertWeights {
  int width = 0;
  std::vector<float> gate_up;
  std::vector<float> down;
  std::vector<Fp8ExpertWeights> fp8;  ///< empty, or one entry: the fp8 form
};

/// Sets `spec`'s weight format from a model's: plain, fp8 with block, channel or tensor scales
/// (fp8_*), or W4A16 / MXFP4 / NVFP4 decoded on load (four_bit*; NVFP4's activations then run
/// at the dtype: kernel_run_format). The other formats (int4 per channel, fp8 weights with
/// unquantized activations) have no kernels yet: an error names the input "weights". So does a
/// 4-bit group that does not divide the layer's widths (checkpoints have no partial groups).
Status apply_weight_format(LayerSpec& spec, const WeightFormat& format);

/// The [rows × cols] scale blocks of one fp8 weight stored [inputs][outputs] (as the kernels keep
/// gate, up and down): the format's block_in × block_out blocks, every input of one output
/// column (per channel), or the whole matrix (per tensor).
std::pair<int, int> fp8_part_blocks(WeightScheme scheme, int block_in, int block_out, int inputs,
                                    int outputs);

/// The weight format the CPU kernels run for `f` — what verify, profile and validate report, run
/// and predict: NVFP4 with its activations at the dtype (weights decoded on load, as GPUs
/// without fp4 arithmetic run NVFP4 checkpoints: vLLM's Marlin W4A16 path); others unchanged.
WeightFormat kernel_run_format(const WeightFormat& f);
/// What a reader of the results must know about how the CPU kernels run `run` (a
/// kernel_run_format result): a sentence for NVFP4, else empty.
std::string kernel_run_note(const WeightFormat& run);

/// Why a TP split into `num_slices` slices cannot run `spec`'s weight format (a slice boundary
/// inside an fp8 block or a 4-bit group: the expert width / tp must be a multiple of it), or
/// nothing.
std::optional<std::string> weight_slice_violation(const LayerSpec& spec, int num_slices);

/// The first token of the calibration tokens of static activation scales (far from any layer's).
inline constexpr std::int64_t kCalibrationToken = std::int64_t{1} << 32;
inline constexpr int kCalibrationTokens = 16;

/// Tensor ids of the deterministic weight generator.
enum class Tensor : std::uint32_t {
  kRouter = 1,
  kScoreBias = 2,
  kSharedGate = 3,
  kSharedGateProj = 4,
  kSharedUpProj = 5,
  kSharedDownProj = 6,
  kInput = 7,
  kExpertBase = 16,  ///< expert e: 16 + 3e (gate), +1 (up), +2 (down)
};

/// A uniform value in [-1, 1) for (seed, tensor, index): counter-based, so any slice of any
/// tensor is generated independently and identically on every rank.
float uniform_value(std::uint64_t seed, std::uint32_t tensor, std::uint64_t index);

/// Router weight [H][E].
std::vector<float> make_router_weight(const LayerSpec& s);
/// e_score_correction_bias [E] (zeros unless the router uses noaux_tc).
std::vector<float> make_score_bias(const LayerSpec& s);
/// Shared-expert gate vector [H] (empty unless shared_gated).
std::vector<float> make_shared_gate(const LayerSpec& s);
/// Routed expert `e`, columns [slice·I/num_slices, (slice+1)·I/num_slices) of its intermediate.
ExpertWeights make_expert(const LayerSpec& s, int e, int slice, int num_slices);
/// The shared expert's tp-slice (width shared_intermediate / num_slices).
ExpertWeights make_shared_expert(const LayerSpec& s, int slice, int num_slices);
/// Input hidden states [T][H] in [0, 1) (PaddleNLP's check uses rand in [0, 1)), rounded to the
/// dtype; `first_token` offsets the generator so a rank can make its own rows.
std::vector<float> make_input(const LayerSpec& s, std::int64_t first_token, int num_tokens);

}  // namespace moeplan::kernels
