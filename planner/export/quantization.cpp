// The weight-format arguments of each framework (planner/export/quantization.hpp). The source
// lines cited were read in the releases tests/exports checks (docs/EXPORT.md).
#include "planner/export/quantization.hpp"

namespace moeplan::planner::exports {

namespace {

std::string dtype_arg(DType d) { return d == DType::kFp16 ? "float16" : "bfloat16"; }

/// "the checkpoint's fp8-block (quantization_config (fp8))".
std::string checkpoint_text(const ExportSpec& spec) {
  return "the checkpoint's " + spec.checkpoint_weights.name() + " (" +
         spec.checkpoint_weights.source + ")";
}

/// A serving framework loads a quantized checkpoint as it is: a different format asked of it
/// fails ("does not match" in SGLang's and vLLM's ModelConfig._verify_quantization).
std::string loads_checkpoint_error(const ExportSpec& spec, const std::string& framework) {
  return framework + " loads " + checkpoint_text(spec) + " as stored (a different format is " +
         "refused at load) and the plan is costed at " + spec.weights.name() +
         "; plan at the checkpoint's format, or give the config.json of a checkpoint stored as " +
         spec.weights.name();
}

}  // namespace

bool weights_from_checkpoint(const ExportSpec& spec) {
  const WeightFormat& a = spec.weights;
  const WeightFormat& b = spec.checkpoint_weights;
  if (a.scheme != b.scheme) return false;
  if (!a.quantized()) return a.plain == b.plain;
  return a.block_out == b.block_out && a.block_in == b.block_in && a.group_size == b.group_size &&
         a.zero_points == b.zero_points && a.activations == b.activations;
}

std::string checkpoint_method(const ExportSpec& spec) {
  const std::string& s = spec.checkpoint_weights.source;
  const std::string prefix = "quantization_config (";
  if (s.rfind(prefix, 0) != 0 || s.back() != ')') return "";
  return s.substr(prefix.size(), s.size() - prefix.size() - 1);
}

std::string weights_line(const ExportSpec& spec) {
  const std::string what = spec.weights.quantized()
                               ? spec.weights.name() + " (" + spec.weights.describe() + ")"
                               : spec.weights.name();
  if (weights_from_checkpoint(spec)) return "weights: " + what + ", " + checkpoint_text(spec);
  return "weights: " + what + ", a what-if on " + checkpoint_text(spec);
}

WeightsArgs sglang_weights(const ExportSpec& spec, std::string_view /*version*/) {
  WeightsArgs q;
  const std::string framework = "SGLang";
  if (weights_from_checkpoint(spec)) {
    // ModelConfig._verify_quantization takes quant_method from the checkpoint when
    // --quantization is unset (configs/model_config.py); fbgemm_fp8 is neither a choice nor a
    // registered method there (srt/layers/quantization/__init__.py): "Unknown quantization
    // method".
    if (checkpoint_method(spec) == "fbgemm_fp8") {
      q.error = framework +
                " has no fbgemm_fp8 quantization method (its loader raises "
                "'Unknown quantization method: fbgemm_fp8'), so " +
                checkpoint_text(spec) + " cannot be served by it";
    }
    return q;
  }
  if (spec.checkpoint_weights.quantized()) {
    q.error = loads_checkpoint_error(spec, framework);
    return q;
  }
  switch (spec.weights.scheme) {
    case WeightScheme::kPlain: q.args.push_back("--dtype " + dtype_arg(spec.weights.plain)); break;
    case WeightScheme::kFp8Tensor:
      // No quantization config file: get_quant_config returns Fp8Config() (online), one fp8
      // scale per expert matrix (layers/quantization/fp8.py), dynamic activations.
      q.args.push_back("--quantization fp8");
      break;
    default:
      q.error = framework +
                " quantizes a plain checkpoint online only to fp8 with one scale per tensor "
                "(--quantization fp8; its online fp8 has no 128×128 blocks, no per-channel "
                "expert scales and no 4-bit formats), and " +
                checkpoint_text(spec) +
                " is plain; plan with --weights fp8-tensor, or give the "
                "config.json of a checkpoint stored as " +
                spec.weights.name();
  }
  return q;
}

WeightsArgs vllm_weights(const ExportSpec& spec, std::string_view /*version*/) {
  WeightsArgs q;
  const std::string framework = "vLLM";
  if (weights_from_checkpoint(spec)) {
    // config/model.py: fbgemm_fp8 is deprecated and refused unless
    // --allow-deprecated-quantization is given; the other methods load from the checkpoint.
    if (checkpoint_method(spec) == "fbgemm_fp8") {
      q.args.push_back("--allow-deprecated-quantization");
    }
    return q;
  }
  if (spec.checkpoint_weights.quantized()) {
    q.error = loads_checkpoint_error(spec, framework);
    return q;
  }
  // Online quantization of a plain checkpoint (config/quantization.py's shorthands):
  // fp8_per_block = 128×128 weight blocks with dynamic 1×128 activation groups, fp8_per_channel
  // = per-output-channel weights with dynamic per-token activations, fp8_per_tensor.
  switch (spec.weights.scheme) {
    case WeightScheme::kPlain: q.args.push_back("--dtype " + dtype_arg(spec.weights.plain)); break;
    case WeightScheme::kFp8Block:
      if (spec.weights.block_out == 128 && spec.weights.block_in == 128) {
        q.args.push_back("--quantization fp8_per_block");
      } else {
        q.error = framework + " quantizes online in 128×128 blocks only; the plan's blocks are " +
                  std::to_string(spec.weights.block_out) + "×" +
                  std::to_string(spec.weights.block_in);
      }
      break;
    case WeightScheme::kFp8Channel: q.args.push_back("--quantization fp8_per_channel"); break;
    case WeightScheme::kFp8Tensor: q.args.push_back("--quantization fp8_per_tensor"); break;
    default:
      q.error = framework + " quantizes a plain checkpoint online to fp8 (per block, channel or " +
                "tensor) but not to " + spec.weights.name() +
                " as planned (its online mxfp4 also quantizes the activations to 4 bits; "
                "nvfp4 online needs Blackwell; int4 needs a GPTQ/AWQ checkpoint), and " +
                checkpoint_text(spec) +
                " is plain; give the config.json of a checkpoint stored as " + spec.weights.name();
  }
  return q;
}

WeightsArgs trtllm_weights(const ExportSpec& spec, std::string_view /*version*/) {
  WeightsArgs q;
  if (weights_from_checkpoint(spec)) return q;  // read from the checkpoint's quantization config
  // The PyTorch backend's LLM API has no online quantization (quant_config is not an
  // extra_llm_api_options key at main@0004396720: extra="forbid"); a quantized checkpoint is made
  // offline with NVIDIA ModelOpt.
  q.error = "TensorRT-LLM runs the format stored in " + checkpoint_text(spec) +
            " and quantizes nothing at load (quantize offline with "
            "NVIDIA ModelOpt); the plan is costed at " +
            spec.weights.name() + ": give the config.json of a checkpoint stored as " +
            spec.weights.name();
  return q;
}

WeightsArgs megatron_weights(const ExportSpec& spec, std::string_view version) {
  WeightsArgs q;
  // Megatron-Core trains from bf16 master weights; fp8 and fp4 are Transformer Engine recipes of
  // the GEMMs (TransformerConfig fp8 / fp8_recipe / fp4 / fp4_recipe, core/enums.py).
  const std::string framework = "Megatron-Core " + std::string(version);
  switch (spec.weights.scheme) {
    case WeightScheme::kPlain: break;
    case WeightScheme::kFp8Block:
      q.args = {"--fp8-format e4m3", "--fp8-recipe blockwise"};
      if (spec.weights.block_out != 128 || spec.weights.block_in != 128) {
        q.warnings.push_back(framework + "'s blockwise recipe scales 128×128 blocks; the plan's " +
                             "are " + std::to_string(spec.weights.block_out) + "×" +
                             std::to_string(spec.weights.block_in));
      }
      break;
    case WeightScheme::kFp8Tensor: q.args = {"--fp8-format e4m3", "--fp8-recipe tensorwise"}; break;
    case WeightScheme::kNvfp4: {
      const std::string& d = spec.device;
      const bool blackwell = d.rfind("b2", 0) == 0 || d.rfind("b3", 0) == 0 ||
                             d.rfind("gb2", 0) == 0 || d.rfind("gb3", 0) == 0;
      if (blackwell) {
        q.args = {"--fp4-format e2m1", "--fp4-recipe nvfp4"};
      } else {
        q.warnings.push_back(framework + "'s NVFP4 recipe (--fp4-recipe nvfp4) runs on Blackwell " +
                             "GPUs, not " + spec.device +
                             "; exported without it (bf16 GEMMs, not the plan's nvfp4)");
      }
      break;
    }
    default:
      q.warnings.push_back(framework + " has no training recipe for " + spec.weights.name() +
                           " (--fp8-recipe: tensorwise, delayed, mxfp8, blockwise; --fp4-recipe: "
                           "nvfp4); exported without one (bf16 GEMMs, not the plan's format)");
  }
  return q;
}

WeightsArgs paddle_weights(const ExportSpec& spec, std::string_view version) {
  WeightsArgs q;
  if (spec.weights.quantized()) {
    // TrainingArguments has bf16 / fp16 / amp options only (trainer/training_args.py).
    q.warnings.push_back("PaddleNLP " + std::string(version) +
                         "'s TrainingArguments have no fp8 or 4-bit option; exported for its "
                         "bf16/fp16 training, not the plan's " +
                         spec.weights.name());
  }
  return q;
}

}  // namespace moeplan::planner::exports
