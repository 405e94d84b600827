// What each framework needs to run the plan's weight format: the serving frameworks (SGLang,
// vLLM, TensorRT-LLM) load the checkpoint's own format from its quantization_config and can
// produce some formats from a plain checkpoint online; the training frameworks (Megatron-Core,
// PaddleNLP) train from high-precision master weights, where the format is the GEMMs' recipe.
// Every rule cites the framework source it was read from (docs/EXPORT.md, "Weight formats").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "planner/export/spec.hpp"

namespace moeplan::planner::exports {

/// A framework's arguments for the plan's weight format, or why it cannot run it.
struct WeightsArgs {
  std::vector<std::string> args;      ///< launch arguments ("--quantization fp8_per_block")
  std::vector<std::string> warnings;  ///< what the export could not express
  std::string error;                  ///< non-empty: the framework cannot run the format
};

/// Whether the plan's format is the checkpoint's own (same scheme, blocks, groups and dtype).
bool weights_from_checkpoint(const ExportSpec& spec);
/// The checkpoint's quant_method ("fp8", "fbgemm_fp8", …), "" for a plain checkpoint.
std::string checkpoint_method(const ExportSpec& spec);
/// The header line: "weights: fp8-block (…), the checkpoint's (quantization_config (fp8))".
std::string weights_line(const ExportSpec& spec);

WeightsArgs sglang_weights(const ExportSpec& spec, std::string_view version);
WeightsArgs vllm_weights(const ExportSpec& spec, std::string_view version);
WeightsArgs trtllm_weights(const ExportSpec& spec, std::string_view version);
WeightsArgs megatron_weights(const ExportSpec& spec, std::string_view version);
WeightsArgs paddle_weights(const ExportSpec& spec, std::string_view version);

}  // namespace moeplan::planner::exports
