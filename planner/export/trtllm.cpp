// TensorRT-LLM: trtllm_extra_llm_api_options.yaml for trtllm-serve --extra_llm_api_options,
// with a static MoE load balancer when there is a placement (inline, or for releases that only
// open a path, moe_load_balancer.yaml).
#include "planner/export/writer.hpp"

#include <filesystem>

namespace moeplan::planner::exports {

// Inside a namespace of its own: the writers share their helpers' names and may be compiled
// as one translation unit (MOEPLAN_UNITY_BUILD).
namespace {
namespace trtllm {

constexpr const char* kMain = "main@0004396720";
constexpr FrameworkVersion kVersions[] = {
    {kMain,
     "declarations recorded from tensorrt_llm/llmapi/llm_args.py at commit "
     "0004396720054fd8e205cbf616f21f0b57c6b412 (tests/exports/trtllm_llm_args.json): "
     "moe_config.load_balancer may be a mapping (MoeLoadBalancerConfig(**dict))"},
    {"1.3",
     "API reference 1.3.0rc27: MoeConfig.load_balancer is `object | str`, only a path is "
     "loaded: the balancer is its own file"},
};

std::vector<std::string> cannot_run(const ExportSpec&, const Layout& l, std::string_view) {
  std::vector<std::string> out;
  if (l.dp_size > 1) {
    out.push_back("TensorRT-LLM spans one MoE group over tensor_parallel_size GPUs, so " +
                  replicas_text(l) + " cannot be expressed");
  }
  if (mapping_matters(l) && l.mapping == RankMapping::kTpInnermost) {
    out.push_back(
        "TensorRT-LLM numbers MoE ranks EP-innermost (moe_ep_rank = tp_rank % "
        "moe_expert_parallel_size), so " +
        l.shape_name() + " tp_innermost cannot be reproduced");
  }
  return out;
}

/// The static balancer's keys, each line indented by `indent`.
std::string balancer_yaml(const ExportSpec& spec, const std::string& indent) {
  const Placement& p = *spec.placement;
  std::string lb = indent + "num_slots: " + std::to_string(p.num_slots) + "\n";
  lb += indent + "layer_updates_per_iter: 0\n";
  lb += indent + "initial_global_assignments:\n";
  for (std::size_t m = 0; m < spec.moe_layer_ids.size(); ++m) {
    lb += indent + "  " + std::to_string(spec.moe_layer_ids[m]) + ": " +
          int_row(p.physical_to_logical[m]) + "\n";
  }
  return lb;
}

constexpr const char* kBalancerNote =
    "# static balancer: layer_updates_per_iter 0 keeps this placement; keys are hidden-layer "
    "indices\n";

ExportResult write(const ExportSpec& spec, std::string_view version, const ExportOptions& options) {
  ExportResult res;
  const Layout& l = spec.chosen.layout;
  const int world = l.ep_size * l.tp_size;
  const bool attention_dp = l.ep_size > 1;
  if (spec.workload.counts_kv()) {
    res.warnings.push_back(
        "the plan's context (" + std::to_string(spec.workload.isl + spec.workload.osl) +
        " tokens) and memory fraction are not exported for TensorRT-LLM: its max_seq_len and "
        "kv_cache_config are not among the llm_args declarations moeplan checks its files "
        "against (tests/exports/trtllm_llm_args.json)");
  }
  if (l.ep_size > 1 && l.tp_size > 1) {
    res.warnings.push_back(
        "TensorRT-LLM's attention is TP over all " + std::to_string(world) +
        " GPUs or DP over all of them, not TP " + std::to_string(l.tp_size) +
        " inside each EP rank; exported enable_attention_dp: true (each EP rank still receives " +
        "tp × tokens_per_gpu tokens), attention weights are then replicated on every GPU, so " +
        "memory per GPU exceeds the prediction");
  }
  if (l.dispatcher == Dispatcher::kPaddedA2a && l.ep_size > 1) {
    res.warnings.push_back(
        "TensorRT-LLM has no padded equal-split all-to-all; it picks its own dropless "
        "dispatch at run time (all-to-all with attention DP)" +
        same_shape_with(spec, Dispatcher::kA2av));
  }
  if (models::is_deepep(l.dispatcher) && l.ep_size > 1) {
    res.warnings.push_back(
        "TensorRT-LLM picks its own all-to-all kernels at run time (its wide-EP path); "
        "moeplan's " +
        dispatcher_name(l.dispatcher) + " is not a setting it takes");
  }
  if (l.tbo) {
    res.warnings.push_back(
        "two-batch overlap is not an extra_llm_api_options key moeplan writes; exported "
        "without it");
  }
  const bool inline_balancer = version == kMain;
  std::string yaml = comment_block(spec, "trtllm", version, res.warnings);
  yaml +=
      "# use: trtllm-serve \"$MODEL_PATH\" --extra_llm_api_options "
      "trtllm_extra_llm_api_options.yaml\n";
  std::string balancer_path;
  if (spec.placement && !inline_balancer) {
    // NOTE: TensorRT-LLM opens a load_balancer path as given (TorchLlmArgs
    // .validate_load_balancer), relative to the directory trtllm-serve starts in.
    if (!options.out_dir.empty()) {
      std::error_code ec;
      auto dir = std::filesystem::absolute(options.out_dir, ec);
      balancer_path = ((ec ? std::filesystem::path(options.out_dir) : dir.lexically_normal()) /
                       "moe_load_balancer.yaml")
                          .string();
    } else {
      balancer_path = "./moe_load_balancer.yaml";
      yaml += "# TensorRT-LLM " + std::string(version) +
              " opens load_balancer relative to the directory trtllm-serve starts in: start it in "
              "the folder of these files (or export with --out DIR for an absolute path)\n";
    }
  }
  yaml += "tensor_parallel_size: " + std::to_string(world) + "\n";
  yaml += "moe_expert_parallel_size: " + std::to_string(l.ep_size) + "\n";
  yaml += "moe_tensor_parallel_size: " + std::to_string(l.tp_size) + "\n";
  yaml += std::string("enable_attention_dp: ") + (attention_dp ? "true" : "false") + "\n";
  if (spec.placement) {
    if (inline_balancer) {
      yaml += "moe_config:\n  " + std::string(kBalancerNote);
      yaml += "  load_balancer:\n" + balancer_yaml(spec, "    ");
    } else {
      std::string quoted;
      for (const char ch : balancer_path) {
        if (ch == '"' || ch == '\\') quoted += '\\';
        quoted += ch;
      }
      yaml += "moe_config:\n  load_balancer: \"" + quoted + "\"\n";
    }
  }
  res.files.push_back({"trtllm_extra_llm_api_options.yaml", yaml});
  if (spec.placement && !inline_balancer) {
    std::string lb = comment_block(spec, "trtllm", version, {});
    lb += kBalancerNote + balancer_yaml(spec, "");
    res.files.push_back({"moe_load_balancer.yaml", lb});
  }
  return res;
}

}  // namespace trtllm
}  // namespace

const FormatWriter kTrtllmWriter = {ExportFormat::kTrtllm, "trtllm",           "TensorRT-LLM",
                                    trtllm::kVersions,     trtllm::cannot_run, trtllm::write,
                                    trtllm_weights};

}  // namespace moeplan::planner::exports
