// PaddleNLP: paddle_args.json, the parallel keys of its TrainingArguments.
#include "planner/export/writer.hpp"

#include <nlohmann/json.hpp>

namespace moeplan::planner::exports {

// Inside a namespace of its own: the writers share their helpers' names and may be compiled
// as one translation unit (MOEPLAN_UNITY_BUILD).
namespace {
namespace paddle {

constexpr const char* kWithEp = "3.0.0b4";
constexpr FrameworkVersion kVersions[] = {
    {kWithEp,
     "PyPI wheel: PdArgumentParser(TrainingArguments).parse_json_file and __post_init__ with "
     "the layout's world size (tests/exports)"},
    {"2.8.1",
     "PyPI wheel, the same checks: no expert_parallel_degree (no expert parallelism), so only "
     "layouts with ep 1"},
};

std::vector<std::string> cannot_run(const ExportSpec& spec, const Layout& l,
                                    std::string_view version) {
  std::vector<std::string> out;
  if (auto e = attention_split_error(spec, l, l.tp_size, "PaddleNLP",
                                     "its attention layers assert it at model load, e.g. "
                                     "transformers/qwen2_moe/modeling.py",
                                     KvHeads::kMultiple);
      !e.empty()) {
    out.push_back(e);
  }
  if (version != kWithEp && l.ep_size > 1) {
    out.push_back("PaddleNLP " + std::string(version) +
                  " has no expert parallelism (its TrainingArguments has no "
                  "expert_parallel_degree; {framework_version} " +
                  kWithEp + " has), so " + l.shape_name() + " cannot run");
  }
  if (mapping_matters(l) && l.mapping == RankMapping::kEpInnermost) {
    out.push_back("PaddleNLP puts the model-parallel (tp) rank innermost, so " + l.shape_name() +
                  " ep_innermost cannot be reproduced");
  }
  return out;
}

ExportResult write(const ExportSpec& spec, std::string_view version, const ExportOptions&) {
  ExportResult res;
  const Layout& l = spec.chosen.layout;
  if (l.ep_size == 1) {
    // No expert parallelism: no dispatch to choose.
  } else if (l.dispatcher == Dispatcher::kA2av) {
    res.warnings.push_back(
        "PaddleNLP #9368 dispatches with a padded equal-split all-to-all (capacity = global "
        "max); a2av (variable all-to-all) depends on the PaddleNLP version you run" +
        same_shape_with(spec, Dispatcher::kPaddedA2a));
  } else if (models::is_deepep(l.dispatcher)) {
    res.warnings.push_back(
        "PaddleNLP #9368 dispatches with a padded equal-split all-to-all, not DeepEP's kernels; "
        "it runs moeplan's padded_a2a" +
        same_shape_with(spec, Dispatcher::kPaddedA2a));
  } else if (l.dispatcher == Dispatcher::kAllGather) {
    res.warnings.push_back(
        "PaddleNLP has no all-gather token dispatch; it runs its padded all-to-all "
        "(moeplan's padded_a2a)" +
        same_shape_with(spec, Dispatcher::kPaddedA2a));
  }
  if (l.tbo) {
    res.warnings.push_back("PaddleNLP has no two-batch overlap; exported without it");
  }
  if (l.ep_size > 1 && l.tp_size > 1) {
    res.warnings.push_back(
        "PaddleNLP " + std::string(version) +
        " requires expert_tensor_parallel_degree 1 (training_args.py); what its MoE layers do "
        "with tensor_parallel_degree " +
        std::to_string(l.tp_size) + " was not verified: the experts may not be split into tp " +
        std::to_string(l.tp_size) + " as planned");
  }
  if (spec.placement && !is_contiguous(*spec.placement)) {
    res.warnings.push_back(placement_not_exported(spec, "PaddleNLP"));
  }
  const WeightsArgs q = paddle_weights(spec, version);
  res.warnings.insert(res.warnings.end(), q.warnings.begin(), q.warnings.end());
  nlohmann::ordered_json j;
  j["tensor_parallel_degree"] = l.tp_size;
  if (version == kWithEp) j["expert_parallel_degree"] = l.ep_size;
  j["pipeline_parallel_degree"] = 1;
  if (l.ep_size > 1) {
    // NOTE: PaddleNLP builds its expert-parallel groups inside the sharding group, as
    // consecutive blocks of ep ranks (TrainingArguments.add_moe_comm_group), and refuses EP
    // with plain data parallelism: sharding spans the dp·ep ranks of one tp rank (tp innermost).
    j["sharding"] = "stage1";
    j["sharding_parallel_degree"] = l.dp_size * l.ep_size;
  } else {
    j["sharding_parallel_degree"] = 1;
  }
  res.files.push_back({"paddle_args.json", j.dump(2) + "\n"});
  return res;
}

}  // namespace paddle
}  // namespace

const FormatWriter kPaddleWriter = {ExportFormat::kPaddle, "paddle",           "PaddleNLP",
                                    paddle::kVersions,     paddle::cannot_run, paddle::write,
                                    paddle_weights};

}  // namespace moeplan::planner::exports
