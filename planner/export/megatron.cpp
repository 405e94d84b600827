// Megatron-Core: megatron_args.sh, a bash array of parallel arguments for a training script
// (MoE parallel folding), with the environment Megatron asserts.
#include "planner/export/writer.hpp"

namespace moeplan::planner::exports {

// Inside a namespace of its own: the writers share their helpers' names and may be compiled
// as one translation unit (MOEPLAN_UNITY_BUILD).
namespace {
namespace megatron {

constexpr FrameworkVersion kVersions[] = {
    {"0.19.2",
     "PyPI wheel: megatron.training.arguments parse_args, validate_args, "
     "core_transformer_config_from_args (tests/exports)"},
};

std::vector<std::string> cannot_run(const ExportSpec& spec, const Layout& l, std::string_view) {
  std::vector<std::string> out;
  if (mapping_matters(l) && l.mapping == RankMapping::kEpInnermost) {
    out.push_back("Megatron-Core orders expert ranks tp-ep-dp (expert TP innermost), so " +
                  l.shape_name() + " ep_innermost cannot be reproduced");
  }
  if (spec.num_experts % l.ep_size != 0) {
    out.push_back("Megatron-Core has no redundant experts: --num-experts " +
                  std::to_string(spec.num_experts) +
                  " must be a multiple of --expert-model-parallel-size " +
                  std::to_string(l.ep_size) + " (validate_args)");
  }
  if (auto e =
          attention_split_error(spec, l, l.tp_size, "Megatron-Core",
                                "TransformerConfig.__post_init__", KvHeads::kMultipleOrDivisor);
      !e.empty()) {
    out.push_back(e);
  }
  return out;
}

ExportResult write(const ExportSpec& spec, std::string_view version, const ExportOptions&) {
  ExportResult res;
  const Layout& l = spec.chosen.layout;
  std::string dispatcher = "alltoall";
  if (l.dispatcher == Dispatcher::kAllGather) dispatcher = "allgather";
  // Megatron-Core's flex dispatcher runs DeepEP (normal kernels; its low-latency kernels are not
  // a Megatron option).
  const bool flex = models::is_deepep(l.dispatcher) && l.ep_size > 1;
  if (flex) dispatcher = "flex";
  if (l.dispatcher == Dispatcher::kDeepEpLl && l.ep_size > 1) {
    res.warnings.push_back(
        "Megatron-Core's flex dispatcher runs DeepEP's normal kernels, not its low-latency "
        "ones; exported --moe-token-dispatcher-type flex (moeplan's deepep_normal)" +
        same_shape_with(spec, Dispatcher::kDeepEpNormal));
  }
  if (l.tbo) {
    res.warnings.push_back(
        "Megatron-Core has no two-batch overlap of one forward step; exported without it");
  }
  if (l.dispatcher == Dispatcher::kPaddedA2a && l.ep_size > 1) {
    res.warnings.push_back(
        "Megatron-Core pads to a per-expert capacity factor (--moe-expert-capacity-factor), not "
        "to the global maximum; exported the dropless --moe-token-dispatcher-type alltoall "
        "(moeplan's a2av)" +
        same_shape_with(spec, Dispatcher::kA2av));
  }
  if (spec.placement && !is_contiguous(*spec.placement)) {
    res.warnings.push_back(placement_not_exported(spec, "Megatron-Core"));
  }
  const WeightsArgs q = megatron_weights(spec, version);
  res.warnings.insert(res.warnings.end(), q.warnings.begin(), q.warnings.end());
  const int world = l.num_gpus;
  const int data_parallel = world / l.tp_size;
  std::vector<std::string> args = {"--tensor-model-parallel-size " + std::to_string(l.tp_size),
                                   "--pipeline-model-parallel-size 1", "--context-parallel-size 1",
                                   "--expert-model-parallel-size " + std::to_string(l.ep_size),
                                   "--expert-tensor-parallel-size " + std::to_string(l.tp_size)};
  // NOTE: MoELayer.forward raises during training when the attention TP group is > 1 without
  // sequence parallelism (megatron/core/transformer/moe/moe_layer.py); TransformerConfig asks
  // for it when both EP and TP exceed 1.
  if (l.tp_size > 1) args.push_back("--sequence-parallel");
  args.push_back("--num-experts " + std::to_string(spec.num_experts));
  args.push_back("--moe-router-topk " + std::to_string(spec.top_k));
  args.push_back("--moe-token-dispatcher-type " + dispatcher);
  if (flex) args.push_back("--moe-flex-dispatcher-backend deepep");
  args.insert(args.end(), q.args.begin(), q.args.end());
  std::string text = comment_block(spec, "megatron", version, res.warnings);
  text += "# MoE parallel folding: world = TP·CP·DP·PP = " + std::to_string(l.tp_size) + "·1·" +
          std::to_string(data_parallel) + "·1 = ETP·EP·EDP·PP = " + std::to_string(l.tp_size) +
          "·" + std::to_string(l.ep_size) + "·" + std::to_string(l.dp_size) +
          "·1 = " + std::to_string(world) + "\n";
  text +=
      "# source this file, then pass \"${MOEPLAN_PARALLEL_ARGS[@]}\" to the training script "
      "on " +
      std::to_string(world) + " GPUs\n";
  if (l.tp_size > 1) {
    // megatron/training/arguments.py validate_args asserts it when TP or CP > 1.
    text += "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
  }
  text += "MOEPLAN_PARALLEL_ARGS=(\n";
  for (const auto& a : args) text += "  " + a + "\n";
  text += ")\n";
  res.files.push_back({"megatron_args.sh", text});
  return res;
}

}  // namespace megatron
}  // namespace

const FormatWriter kMegatronWriter = {
    ExportFormat::kMegatron, "megatron",      "Megatron-Core", megatron::kVersions,
    megatron::cannot_run,    megatron::write, megatron_weights};

}  // namespace moeplan::planner::exports
