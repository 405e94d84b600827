// Layer shapes and deterministic weights.
#include "kernels/layer_spec.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "kernels/dtype_convert.hpp"
#include "kernels/four_bit.hpp"
#include "kernels/fp8.hpp"
#include "kernels/layer_ops.hpp"

namespace moeplan::kernels {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Fills [rows][cols] of a logical [total_rows][total_cols] tensor starting at (r0, c0), scaled by
// `scale`, rounded to the dtype, into dst with row stride `ld` at column offset `dst_c0`.
void fill_block(const LayerSpec& s, std::uint32_t tensor, std::int64_t total_cols, int r0, int rows,
                int c0, int cols, float scale, float* dst, int ld, int dst_c0) {
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const auto index = static_cast<std::uint64_t>((r0 + r) * total_cols + (c0 + c));
      dst[static_cast<std::size_t>(r) * static_cast<std::size_t>(ld) +
          static_cast<std::size_t>(dst_c0 + c)] =
          round_to(s.dtype, scale * uniform_value(s.seed, tensor, index));
    }
  }
}

// Uniform[-a, a) with a = sqrt(3 / fan_in): unit variance inputs keep unit-scale outputs.
float init_scale(int fan_in) { return std::sqrt(3.0F / static_cast<float>(fan_in)); }

// Replaces the [rows][cols] part at column `c0` of `values` (row stride `ld`; rows are inputs)
// by its 4-bit form decoded in the dtype: W4A16 int4 groups, MXFP4 or NVFP4 (whose global scale
// comes from `tensor_amax`), `group` inputs each.
void four_bit_part(const LayerSpec& s, std::vector<float>& values, int ld, int c0, int rows,
                   int cols, float tensor_amax) {
  const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  std::vector<float> part(n);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      part[static_cast<std::size_t>(r * cols + c)] =
          values[static_cast<std::size_t>(r) * static_cast<std::size_t>(ld) +
                 static_cast<std::size_t>(c0 + c)];
    }
  }
  if (s.four_bit == WeightScheme::kMxfp4) {
    dequantize_mxfp4(quantize_mxfp4(part, rows, cols, s.four_bit_group), s.dtype, part);
  } else if (s.four_bit == WeightScheme::kNvfp4) {
    dequantize_nvfp4(quantize_nvfp4(part, rows, cols, s.four_bit_group, tensor_amax), s.dtype,
                     part);
  } else {
    dequantize_int4_groups(
        quantize_int4_groups(part, rows, cols, s.four_bit_group, s.four_bit_zero_points), s.dtype,
        part);
  }
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      values[static_cast<std::size_t>(r) * static_cast<std::size_t>(ld) +
             static_cast<std::size_t>(c0 + c)] = part[static_cast<std::size_t>(r * cols + c)];
    }
  }
}

// Whether a matrix's scales are taken over all of it (per tensor — NVFP4's global scale too —
// or per output channel whose inputs a tp-slice splits), so a slice is cut from the full
// expert rather than made alone.
bool whole_matrix_scales(const LayerSpec& s) {
  return s.fp8_scheme == WeightScheme::kFp8Channel || s.fp8_scheme == WeightScheme::kFp8Tensor ||
         (s.fp8() && s.fp8_act.kind == Fp8Act::Kind::kStatic) || s.four_bit == WeightScheme::kNvfp4;
}

// Static activation scales of a whole expert (its fp8 form in f, its dequantized values in w):
// kCalibrationTokens tokens through gate/up (inputs quantized with the calibrated input scale),
// SiLU·up stored in the dtype, as the layer computes them; amax / 448 of each GEMM's input.
void calibrate(const LayerSpec& s, const ExpertWeights& w, Fp8ExpertWeights& f) {
  const int h = s.hidden;
  const int width = w.width;
  std::vector<float> x = make_input(s, kCalibrationToken, kCalibrationTokens);
  f.input_scale = calibrated_scale(x);
  fake_quantize_activations(x.data(), kCalibrationTokens, h, Fp8Act::fixed(f.input_scale));
  std::vector<float> act(static_cast<std::size_t>(kCalibrationTokens) *
                         static_cast<std::size_t>(width));
  std::vector<float> gu(static_cast<std::size_t>(kCalibrationTokens) *
                        static_cast<std::size_t>(2 * width));
  for (int t = 0; t < kCalibrationTokens; ++t) {
    std::vector<double> sum(static_cast<std::size_t>(2 * width), 0.0);
    for (int k = 0; k < h; ++k) {
      const double xv = x[static_cast<std::size_t>(t) * static_cast<std::size_t>(h) +
                          static_cast<std::size_t>(k)];
      const float* row = w.gate_up.data() + static_cast<std::ptrdiff_t>(k) * 2 * width;
      for (int c = 0; c < 2 * width; ++c) sum[static_cast<std::size_t>(c)] += xv * row[c];
    }
    std::copy(sum.begin(), sum.end(),
              gu.begin() + static_cast<std::ptrdiff_t>(t) * static_cast<std::ptrdiff_t>(2 * width));
  }
  silu_mul_rows(gu.data(), kCalibrationTokens, width, s.dtype, act.data());
  f.mid_scale = calibrated_scale(act);
}

// The scales of a tp-slice of a stored part cut along its rows: block rows [row0 / block_rows,
// …) (row0 on a block boundary, or one block row spanning every row).
std::vector<float> slice_block_rows(const std::vector<float>& scales, int rows, int cols,
                                    int block_rows, int block_cols, int row0, int height) {
  const int bc = (cols + block_cols - 1) / block_cols;
  const int br = (rows + block_rows - 1) / block_rows;
  MOEPLAN_ASSERT(row0 % block_rows == 0 || br == 1, "slice_block_rows: a slice inside a block");
  const int first = row0 / block_rows;
  const int n = (height + block_rows - 1) / block_rows;
  const auto begin = scales.begin() + static_cast<std::ptrdiff_t>(first) * bc;
  return {begin, begin + static_cast<std::ptrdiff_t>(n) * bc};
}

// The scales of a tp-slice of one stored part: block columns [col0 / block_cols, …) of every
// block row (col0 on a block boundary, or one block spanning every column).
std::vector<float> slice_block_cols(const std::vector<float>& scales, int rows, int cols,
                                    int block_rows, int block_cols, int col0, int width) {
  const int bc = (cols + block_cols - 1) / block_cols;
  const int br = (rows + block_rows - 1) / block_rows;
  MOEPLAN_ASSERT(col0 % block_cols == 0 || bc == 1, "slice_block_cols: a slice inside a block");
  const int first = col0 / block_cols;
  const int n = (width + block_cols - 1) / block_cols;
  std::vector<float> out;
  for (int r = 0; r < br; ++r) {
    for (int c = 0; c < n; ++c) out.push_back(scales[static_cast<std::size_t>(r * bc + first + c)]);
  }
  return out;
}

// Slice `slice` of `num_slices` of an expert made whole (num_slices 1): gate and up columns and
// down rows [slice·width, (slice+1)·width), values and fp8 form; the scales stay the whole
// matrix's (a per-channel down scale spans every input of the channel, a tensor scale all).
ExpertWeights slice_expert(const ExpertWeights& full, int slice, int num_slices, int h) {
  ExpertWeights w;
  w.width = full.width / num_slices;
  const int c0 = slice * w.width;
  const auto fw = static_cast<std::size_t>(full.width);
  const auto wd = static_cast<std::size_t>(w.width);
  const auto hs = static_cast<std::size_t>(h);
  const auto cut = [&](const auto& gate_up, const auto& down, auto& gu_out, auto& down_out) {
    gu_out.resize(hs * 2 * wd);
    for (std::size_t r = 0; r < hs; ++r) {
      for (std::size_t c = 0; c < wd; ++c) {
        gu_out[r * 2 * wd + c] = gate_up[r * 2 * fw + static_cast<std::size_t>(c0) + c];
        gu_out[r * 2 * wd + wd + c] = gate_up[r * 2 * fw + fw + static_cast<std::size_t>(c0) + c];
      }
    }
    const auto first =
        down.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(c0) * hs);
    down_out.assign(first, first + static_cast<std::ptrdiff_t>(wd * hs));
  };
  cut(full.gate_up, full.down, w.gate_up, w.down);
  if (!full.fp8.empty()) {
    const Fp8ExpertWeights& f = full.fp8.front();
    Fp8ExpertWeights g = f;
    cut(f.gate_up, f.down, g.gate_up, g.down);
    g.gate_scales = slice_block_cols(f.gate_scales, h, full.width, f.gate_up_block_rows,
                                     f.gate_up_block_cols, c0, w.width);
    g.up_scales = slice_block_cols(f.up_scales, h, full.width, f.gate_up_block_rows,
                                   f.gate_up_block_cols, c0, w.width);
    g.down_scales = slice_block_rows(f.down_scales, full.width, h, f.down_block_rows,
                                     f.down_block_cols, c0, w.width);
    w.fp8.push_back(std::move(g));
  }
  return w;
}

ExpertWeights make_mlp(const LayerSpec& s, std::uint32_t gate_id, std::uint32_t up_id,
                       std::uint32_t down_id, int full_width, int slice, int num_slices) {
  if (num_slices > 1 && whole_matrix_scales(s) && full_width > 0) {
    return slice_expert(make_mlp(s, gate_id, up_id, down_id, full_width, 0, 1), slice, num_slices,
                        s.hidden);
  }
  ExpertWeights w;
  w.width = full_width / num_slices;
  const int c0 = slice * w.width;
  const int h = s.hidden;
  w.gate_up.resize(static_cast<std::size_t>(h) * static_cast<std::size_t>(2 * w.width));
  w.down.resize(static_cast<std::size_t>(w.width) * static_cast<std::size_t>(h));
  const float a1 = init_scale(h);
  fill_block(s, gate_id, full_width, 0, h, c0, w.width, a1, w.gate_up.data(), 2 * w.width, 0);
  fill_block(s, up_id, full_width, 0, h, c0, w.width, a1, w.gate_up.data(), 2 * w.width, w.width);
  fill_block(s, down_id, h, c0, w.width, 0, h, init_scale(full_width), w.down.data(), h, 0);
  if (s.fp8() && w.width > 0) {
    // The checkpoint's scales: gate and up [width][H] (outputs × inputs) are stored here
    // transposed, [H][width], so their blocks are block_in rows × block_out columns; down
    // [H][width] is stored [width][H]: block_in rows (its inputs) × block_out columns. Per
    // output channel: every input of one column; per tensor: the whole part.
    Fp8ExpertWeights f;
    std::tie(f.gate_up_block_rows, f.gate_up_block_cols) =
        fp8_part_blocks(s.fp8_scheme, s.fp8_block_in, s.fp8_block_out, h, w.width);
    std::tie(f.down_block_rows, f.down_block_cols) =
        fp8_part_blocks(s.fp8_scheme, s.fp8_block_in, s.fp8_block_out, w.width, h);
    f.act = s.fp8_act;
    f.gate_up.resize(w.gate_up.size());
    f.down.resize(w.down.size());
    quantize_part(w.gate_up, 2 * w.width, 0, h, w.width, f.gate_up_block_rows, f.gate_up_block_cols,
                  f.gate_up, f.gate_scales);
    quantize_part(w.gate_up, 2 * w.width, w.width, h, w.width, f.gate_up_block_rows,
                  f.gate_up_block_cols, f.gate_up, f.up_scales);
    quantize_part(w.down, h, 0, w.width, h, f.down_block_rows, f.down_block_cols, f.down,
                  f.down_scales);
    if (f.act.kind == Fp8Act::Kind::kStatic) calibrate(s, w, f);
    w.fp8.push_back(std::move(f));
  }
  if (s.four_bit_weights() && w.width > 0) {
    // Groups run along each matrix's inputs: H for gate and up (every slice holds all of it),
    // the width for down (a slice holds whole groups: weight_slice_violation). NVFP4's global
    // scale is the whole matrix's; gate and up share one, as fused checkpoints store them
    // (TensorRT-LLM and vLLM take one weight_scale_2 for w13).
    const auto amax = [](const std::vector<float>& v) {
      float a = 0.0F;
      for (const float x : v) a = std::max(a, std::fabs(x));
      return a;
    };
    const float gate_up_amax = amax(w.gate_up);
    four_bit_part(s, w.gate_up, 2 * w.width, 0, h, w.width, gate_up_amax);
    four_bit_part(s, w.gate_up, 2 * w.width, w.width, h, w.width, gate_up_amax);
    four_bit_part(s, w.down, h, 0, w.width, h, amax(w.down));
  }
  return w;
}

}  // namespace

float uniform_value(std::uint64_t seed, std::uint32_t tensor, std::uint64_t index) {
  const std::uint64_t h =
      splitmix64(seed ^ splitmix64((static_cast<std::uint64_t>(tensor) << 40) ^ index));
  // 24 random bits → [0, 1) exactly representable in fp32, then to [-1, 1).
  return static_cast<float>(h >> 40) * (2.0F / 16777216.0F) - 1.0F;
}

Result<LayerSpec> LayerSpec::from_model(const models::MoeModel& m, int scale, DType dtype,
                                        std::uint64_t seed) {
  if (scale < 1)
    return input_error("scale", ": expected a positive integer, got " + std::to_string(scale));
  struct Dim {
    const char* key;
    std::int64_t value;
  };
  const Dim dims[] = {{"hidden_size", m.hidden_size},
                      {"moe_intermediate_size", m.moe_intermediate_size},
                      {"shared expert width", m.shared_intermediate_total()}};
  for (const auto& d : dims) {
    if (d.value % scale != 0) {
      return Error{m.source_path + ": {scale} " + std::to_string(scale) + " does not divide " +
                       d.key + "=" + std::to_string(d.value) + "; expected a divisor",
                   "scale"};
    }
  }
  LayerSpec s;
  s.hidden = static_cast<int>(m.hidden_size / scale);
  s.intermediate = static_cast<int>(m.moe_intermediate_size / scale);
  s.num_experts = m.num_experts;
  s.top_k = m.num_experts_per_tok;
  s.shared_intermediate = static_cast<int>(m.shared_intermediate_total() / scale);
  s.shared_gated = m.shared_expert_gated;
  s.router = m.router;
  s.dtype = dtype;
  s.seed = seed;
  return s;
}

Status apply_weight_format(LayerSpec& spec, const WeightFormat& f) {
  spec.fp8_scheme = WeightScheme::kPlain;
  spec.fp8_block_out = spec.fp8_block_in = 0;
  spec.fp8_act = Fp8Act{};
  spec.four_bit = WeightScheme::kPlain;
  spec.four_bit_group = 0;
  spec.four_bit_zero_points = false;
  if (f.scheme == WeightScheme::kPlain) return Status::Ok();
  if (f.scheme == WeightScheme::kW4A16 || f.scheme == WeightScheme::kMxfp4 ||
      f.scheme == WeightScheme::kNvfp4) {
    if (f.group_size <= 0) {
      return input_error("weights", ": " + f.name() + " (" + f.describe() +
                                        ") has no CPU kernel; groups of a positive size run");
    }
    // Every matrix's inputs in whole groups (int4 words pack 8 inputs, fp4 bytes 2).
    const int pack = f.scheme == WeightScheme::kW4A16 ? 8 : 2;
    for (const auto& [key, width] : {std::pair{"hidden_size", spec.hidden},
                                     std::pair{"moe_intermediate_size", spec.intermediate},
                                     std::pair{"shared expert width", spec.shared_intermediate}}) {
      if (width != 0 && (width % f.group_size != 0 || width % pack != 0)) {
        return input_error("weights", ": " + f.name() + " groups of " +
                                          std::to_string(f.group_size) + " inputs do not divide " +
                                          key + " = " + std::to_string(width) +
                                          " (after --scale); expected a multiple of " +
                                          std::to_string(std::max(f.group_size, pack)) +
                                          " (checkpoints have no partial groups)");
      }
    }
    spec.four_bit = f.scheme;
    spec.four_bit_group = f.group_size;
    spec.four_bit_zero_points = f.scheme == WeightScheme::kW4A16 && f.zero_points;
    return Status::Ok();
  }
  const bool fp8_weights = f.scheme == WeightScheme::kFp8Block ||
                           f.scheme == WeightScheme::kFp8Channel ||
                           f.scheme == WeightScheme::kFp8Tensor;
  if (!fp8_weights) {
    return input_error("weights",
                       ": the CPU kernels run plain, fp8-block, fp8-channel, fp8-tensor, w4a16, "
                       "mxfp4 and nvfp4 weights; " +
                           f.name() + " (" + f.describe() + ") has no kernel yet");
  }
  Fp8Act act;
  switch (f.activations) {
    case ActivationScheme::kFp8Group:
      // DeepSeek-V3: dynamic 1 × 128 groups (the block's inputs when the format names none).
      act = Fp8Act::groups(f.activation_group > 0 ? f.activation_group : f.block_in);
      break;
    case ActivationScheme::kFp8Token: act = Fp8Act::token(); break;
    // Per tensor: static scales, calibrated (the input_scale per-tensor checkpoints ship).
    case ActivationScheme::kFp8Tensor: act = Fp8Act::fixed(0.0F); break;
    case ActivationScheme::kPlain:
    case ActivationScheme::kFp4Group:
      return input_error("weights", ": " + f.name() + " with activations " +
                                        f.describe_activations() +
                                        " has no kernel yet (the CPU fp8 GEMMs take fp8 "
                                        "activations: 1×128 groups, per token or per tensor)");
  }
  if (f.scheme == WeightScheme::kFp8Block && (f.block_out <= 0 || f.block_in <= 0)) {
    return input_error("weights", ": fp8-block needs positive block sizes, got " +
                                      std::to_string(f.block_out) + " × " +
                                      std::to_string(f.block_in));
  }
  if (act.kind == Fp8Act::Kind::kGroups && act.group <= 0) {
    return input_error("weights", ": fp8 activation groups need a positive size, got " +
                                      std::to_string(act.group));
  }
  spec.fp8_scheme = f.scheme;
  if (f.scheme == WeightScheme::kFp8Block) {
    spec.fp8_block_out = f.block_out;
    spec.fp8_block_in = f.block_in;
  }
  spec.fp8_act = act;
  return Status::Ok();
}

std::pair<int, int> fp8_part_blocks(WeightScheme scheme, int block_in, int block_out, int inputs,
                                    int outputs) {
  switch (scheme) {
    case WeightScheme::kFp8Channel: return {inputs, 1};
    case WeightScheme::kFp8Tensor: return {inputs, outputs};
    default: return {block_in, block_out};
  }
}

WeightFormat kernel_run_format(const WeightFormat& f) {
  if (f.scheme != WeightScheme::kNvfp4 || f.activations == ActivationScheme::kPlain) return f;
  WeightFormat run = f;
  run.activations = ActivationScheme::kPlain;
  run.source +=
      " (run as W4A16: the CPU kernels decode NVFP4 weights on load; fp4 activations "
      "have no kernel)";
  return run;
}

std::string kernel_run_note(const WeightFormat& run) {
  if (run.scheme != WeightScheme::kNvfp4) return {};
  return "nvfp4 runs as W4A16 here: weights decoded on load, GEMMs at the dtype (fp4 "
         "activations have no CPU kernel)";
}

std::optional<std::string> weight_slice_violation(const LayerSpec& spec, int num_slices) {
  if (num_slices <= 1) return std::nullopt;
  for (const auto& [name, width] : {std::pair{"expert", spec.intermediate},
                                    std::pair{"shared expert", spec.shared_intermediate}}) {
    if (width == 0) continue;
    const int slice = width / num_slices;
    const auto where = std::string(" do not divide the ") + name +
                       " width / tp = " + std::to_string(width) + " / " +
                       std::to_string(num_slices) + " = " + std::to_string(slice);
    // Per-channel and per-tensor scales are the whole matrix's on every slice; per-token
    // activation scales are each rank's own (what the frameworks do), static ones fixed.
    const int act_group = spec.fp8_act.kind == Fp8Act::Kind::kGroups ? spec.fp8_act.group : 1;
    if (spec.fp8_scheme == WeightScheme::kFp8Block &&
        (slice % spec.fp8_block_out != 0 || slice % spec.fp8_block_in != 0 ||
         slice % act_group != 0)) {
      const int b = std::max({spec.fp8_block_out, spec.fp8_block_in, act_group});
      return std::string("fp8 blocks of ") + std::to_string(spec.fp8_block_out) + "×" +
             std::to_string(spec.fp8_block_in) + where +
             " (frameworks refuse such a split; expected a multiple of " + std::to_string(b) + ")";
    }
    if (spec.four_bit_weights() && slice % spec.four_bit_group != 0) {
      const char* format = spec.four_bit == WeightScheme::kMxfp4   ? "mxfp4"
                           : spec.four_bit == WeightScheme::kNvfp4 ? "nvfp4"
                                                                   : "w4a16";
      return std::string(format) + " groups of " + std::to_string(spec.four_bit_group) + " inputs" +
             where +
             " (a group of the down projection would span two ranks; expected a multiple of " +
             std::to_string(spec.four_bit_group) + ")";
    }
  }
  return std::nullopt;
}

std::vector<float> make_router_weight(const LayerSpec& s) {
  std::vector<float> w(static_cast<std::size_t>(s.hidden) *
                       static_cast<std::size_t>(s.num_experts));
  // Larger than unit scale so the router's scores are spread, as trained routers' are.
  fill_block(s, static_cast<std::uint32_t>(Tensor::kRouter), s.num_experts, 0, s.hidden, 0,
             s.num_experts, 4.0F * init_scale(s.hidden), w.data(), s.num_experts, 0);
  return w;
}

std::vector<float> make_score_bias(const LayerSpec& s) {
  std::vector<float> b(static_cast<std::size_t>(s.num_experts), 0.0F);
  if (!s.router.has_score_correction_bias) return b;
  for (int e = 0; e < s.num_experts; ++e) {
    // fp32 like the real e_score_correction_bias; small enough to reorder, not to dominate.
    b[static_cast<std::size_t>(e)] =
        0.1F * uniform_value(s.seed, static_cast<std::uint32_t>(Tensor::kScoreBias),
                             static_cast<std::uint64_t>(e));
  }
  return b;
}

std::vector<float> make_shared_gate(const LayerSpec& s) {
  if (!s.shared_gated || s.shared_intermediate == 0) return {};
  std::vector<float> g(static_cast<std::size_t>(s.hidden));
  fill_block(s, static_cast<std::uint32_t>(Tensor::kSharedGate), 1, 0, s.hidden, 0, 1,
             init_scale(s.hidden), g.data(), 1, 0);
  return g;
}

ExpertWeights make_expert(const LayerSpec& s, int e, int slice, int num_slices) {
  const auto base =
      static_cast<std::uint32_t>(Tensor::kExpertBase) + 3U * static_cast<std::uint32_t>(e);
  return make_mlp(s, base, base + 1, base + 2, s.intermediate, slice, num_slices);
}

ExpertWeights make_shared_expert(const LayerSpec& s, int slice, int num_slices) {
  return make_mlp(s, static_cast<std::uint32_t>(Tensor::kSharedGateProj),
                  static_cast<std::uint32_t>(Tensor::kSharedUpProj),
                  static_cast<std::uint32_t>(Tensor::kSharedDownProj), s.shared_intermediate, slice,
                  num_slices);
}

std::vector<float> make_input(const LayerSpec& s, std::int64_t first_token, int num_tokens) {
  std::vector<float> x(static_cast<std::size_t>(num_tokens) * static_cast<std::size_t>(s.hidden));
  for (int t = 0; t < num_tokens; ++t) {
    for (int h = 0; h < s.hidden; ++h) {
      const auto index = static_cast<std::uint64_t>((first_token + t) * s.hidden + h);
      const float u =
          0.5F * (uniform_value(s.seed, static_cast<std::uint32_t>(Tensor::kInput), index) + 1.0F);
      x[static_cast<std::size_t>(t) * static_cast<std::size_t>(s.hidden) +
        static_cast<std::size_t>(h)] = round_to(s.dtype, u);
    }
  }
  return x;
}

}  // namespace moeplan::kernels
