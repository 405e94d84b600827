// Weight formats: how a checkpoint stores its linear weights (plain dtype, fp8 with block,
// channel or tensor scales, MXFP4, NVFP4, 4-bit integer groups) and the activation format its
// GEMMs run at; read from a config.json's quantization_config or chosen by name (--weights).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/dtype.hpp"
#include "models/result.hpp"

namespace moeplan {

/// How the quantized linear weights are stored.
enum class WeightScheme : std::uint8_t {
  kPlain,       ///< the model's torch_dtype, no scales
  kFp8Block,    ///< fp8 e4m3, one fp32 scale per [block_out × block_in] block (DeepSeek-V3)
  kFp8Channel,  ///< fp8 e4m3, one fp32 scale per output channel (fbgemm_fp8)
  kFp8Tensor,   ///< fp8 e4m3, one fp32 scale per tensor
  kMxfp4,       ///< e2m1 values, one e8m0 (1-byte) scale per 32 inputs (OCP MX; gpt-oss)
  kNvfp4,       ///< e2m1 values, one e4m3 scale per 16 inputs and an fp32 scale per tensor
  kW4A16,       ///< 4-bit integers, one 16-bit scale per group of inputs (GPTQ/AWQ, int4 W4A16)
};

/// The format the GEMM inputs (activations) run at, and what a dispatcher sends.
enum class ActivationScheme : std::uint8_t {
  kPlain,      ///< the model's torch_dtype
  kFp8Group,   ///< fp8 e4m3, dynamic, one fp32 scale per 1 × group inputs (DeepSeek-V3: 128)
  kFp8Token,   ///< fp8 e4m3, dynamic, one fp32 scale per token
  kFp8Tensor,  ///< fp8 e4m3, one fp32 scale per tensor
  kFp4Group,   ///< NVFP4 activations: e2m1, one e4m3 scale per 16 inputs
};

/// The storage of a model's linear weights and the precision its GEMMs run at.
struct WeightFormat {
  WeightScheme scheme = WeightScheme::kPlain;
  ActivationScheme activations = ActivationScheme::kPlain;
  DType plain = DType::kBf16;  ///< torch_dtype: unquantized tensors and dequantized compute
  int block_out = 0;           ///< kFp8Block: rows (output channels) per scale block
  int block_in = 0;            ///< kFp8Block: columns (inputs) per scale block
  int group_size = 0;          ///< kMxfp4 32, kNvfp4 16, kW4A16 the config's group (128)
  int activation_group = 0;    ///< kFp8Group: inputs per activation scale (128)
  bool zero_points = false;    ///< kW4A16: asymmetric, a 4-bit zero point per group
  /// Whether attention projections are quantized (false when the config's
  /// modules_to_not_convert / ignore names self_attn, as gpt-oss does).
  bool attention_quantized = true;
  /// Where this format came from: "quantization_config (fp8)", "torch_dtype", "--weights".
  std::string source = "torch_dtype";

  bool quantized() const { return scheme != WeightScheme::kPlain; }

  /// Bytes of one [rows × cols] linear weight (rows: output channels, cols: inputs) with its
  /// scale tensors. Scales tile with ceil-division, as DeepSeek-V3's checkpoint stores them
  /// (kv_a_proj_with_mqa [576, 7168] has a [5, 56] weight_scale_inv).
  double matrix_bytes(std::int64_t rows, std::int64_t cols) const;
  /// Bytes of the scale tensors alone of that weight.
  double scale_bytes(std::int64_t rows, std::int64_t cols) const;

  /// The dtype the expert GEMMs run at (fp8 for fp8 activations, and for NVFP4 whose fp4 peak no
  /// device spec carries: priced at the fp8 peak), else torch_dtype.
  DType compute_dtype() const;
  /// Bytes per element the GEMMs read for weights, scales excluded (1, 0.5, or torch_dtype's).
  double weight_element_bytes() const;
  /// Bytes one hidden-state row of `hidden` elements takes in a dispatch payload: values plus
  /// scales for fp8 activations (H + 4·⌈H/128⌉ for 1×128 groups, as DeepEP sends), else
  /// torch_dtype. Combine always returns torch_dtype rows.
  double dispatch_row_bytes(std::int64_t hidden) const;
  /// Bytes per element of a GEMM's activation input (1 for fp8 activations, else torch_dtype's).
  double activation_element_bytes() const;

  /// Short name: "bf16", "fp8-block", "fp8-channel", "fp8-tensor", "mxfp4", "nvfp4", "w4a16".
  std::string name() const;
  /// The weight storage in words: "fp8 e4m3, 128×128 blocks, fp32 scales".
  std::string describe() const;
  /// The activation format in words: "fp8 e4m3 dynamic, 1×128 groups, fp32 scales".
  std::string describe_activations() const;
  /// As JSON (plan and model output): name, description, scales, source.
  nlohmann::json to_json() const;
};

/// The names --weights takes, in order: fp8-block, fp8-channel, fp8-tensor, bf16, fp16,
/// mxfp4, nvfp4, w4a16.
const std::vector<std::string>& weight_format_names();

/// The format named `name` (weight_format_names) for a model whose torch_dtype is `plain`, with
/// the published defaults (fp8-block 128×128 with 1×128 activation groups, MXFP4 groups of 32,
/// NVFP4 of 16, W4A16 of 128 with symmetric scales). Errors name the input "weights".
Result<WeightFormat> parse_weight_format(std::string_view name, DType plain);

/// Reads `quantization_config` of a config.json (`qc`, an object) for a model stored in
/// `plain`. Errors name `source` and the key (quantization_config.quant_method, …); an unknown
/// quant_method is an error, never a silent plain format.
Result<WeightFormat> parse_quantization_config(const nlohmann::json& qc, DType plain,
                                               const std::string& source);

}  // namespace moeplan
