// SGLang: sglang_launch.sh (python3 -m sglang.launch_server) and, with a placement,
// sglang_expert_location.json for --init-expert-location.
#include "models/index.hpp"
#include "planner/export/writer.hpp"

namespace moeplan::planner::exports {

// Inside a namespace of its own: the writers share their helpers' names and may be compiled
// as one translation unit (MOEPLAN_UNITY_BUILD).
namespace {
namespace sglang {

constexpr FrameworkVersion kVersions[] = {
    {"0.5.23",
     "PyPI wheel: prepare_server_args, ServerArgs.resolve_once, check_server_args "
     "(tests/exports)"},
    {"0.5.22", "first release with --attn-dp-size (arg_groups/fields/parallel.py of its wheel)"},
    {"0.5.21",
     "PyPI wheel: the same parser checks; --enable-dp-attention --dp-size (no --attn-dp-size)"},
};

/// Releases before 0.5.22 spell attention DP as --enable-dp-attention --dp-size N.
bool has_attn_dp_size(std::string_view version) { return version != "0.5.21"; }

std::vector<std::string> cannot_run(const ExportSpec& spec, const Layout& l, std::string_view) {
  std::vector<std::string> out;
  // Attention TP = tp-size / attention-DP size = tp.
  if (auto e = attention_split_error(spec, l, l.tp_size, "SGLang",
                                     "its attention layers assert it at model load, e.g. "
                                     "models/qwen2_moe.py",
                                     KvHeads::kMultipleOrDivisor);
      !e.empty()) {
    out.push_back(e);
  }
  if (l.dp_size > 1) {
    out.push_back(
        "SGLang runs one expert-parallel group per launch (--ep-size divides "
        "--tp-size, every attention-DP rank joins it), so " +
        replicas_text(l) + " cannot be expressed");
  }
  if (mapping_matters(l) && l.mapping == RankMapping::kEpInnermost) {
    out.push_back(
        "SGLang numbers MoE ranks TP-innermost (moe_ep_rank = tp_rank / moe_tp_size), so " +
        l.shape_name() + " ep_innermost cannot be reproduced");
  }
  return out;
}

/// The expert-location file: SGLang sizes the map by every hidden layer; dense layers keep the
/// trivial map (slot p holds expert p mod E), as SGLang's own init_trivial builds it.
std::string expert_location_json(const ExportSpec& spec) {
  const Placement& p = *spec.placement;
  std::vector<std::vector<int>> rows(uz(spec.num_hidden_layers));
  for (int h = 0; h < spec.num_hidden_layers; ++h) {
    for (int s = 0; s < p.num_slots; ++s) rows[uz(h)].push_back(s % spec.num_experts);
  }
  for (std::size_t m = 0; m < spec.moe_layer_ids.size(); ++m) {
    rows[uz(spec.moe_layer_ids[m])] = p.physical_to_logical[m];
  }
  std::string json = "{\"physical_to_logical_map\": [\n";
  for (std::size_t h = 0; h < rows.size(); ++h) {
    json += "  " + int_row(rows[h]) + (h + 1 < rows.size() ? ",\n" : "\n");
  }
  return json + "]}\n";
}

ExportResult write(const ExportSpec& spec, std::string_view version, const ExportOptions&) {
  ExportResult res;
  const Layout& l = spec.chosen.layout;
  const int world = l.ep_size * l.tp_size;
  std::vector<std::string> args = {"--model-path \"$MODEL_PATH\"",
                                   "--tp-size " + std::to_string(world),
                                   "--ep-size " + std::to_string(l.ep_size)};
  if (l.ep_size > 1) {
    // NOTE: moeplan's cost model gives each EP rank its own tokens with attention TP = tp inside
    // it: SGLang's attention data parallelism over ep groups (attention TP = tp-size / ep = tp).
    if (has_attn_dp_size(version)) {
      args.push_back("--attn-dp-size " + std::to_string(l.ep_size));
    } else {
      args.push_back("--enable-dp-attention");
      args.push_back("--dp-size " + std::to_string(l.ep_size));
    }
  }
  std::string backend = "none";
  // NOTE: with ep 1 no token leaves its GPU group; the dispatcher has nothing to choose.
  if (l.ep_size > 1) {
    switch (l.dispatcher) {
      case Dispatcher::kA2av:
        if (l.tp_size == 1) {
          backend = "deepep";
        } else {
          res.warnings.push_back(
              "SGLang's DeepEP all-to-all needs --ep-size = --tp-size (no TP inside experts); "
              "a2av with tp " +
              std::to_string(l.tp_size) +
              " is exported as --moe-a2a-backend none (all-gather / all-reduce, moeplan's "
              "allgather)" +
              same_shape_with(spec, Dispatcher::kAllGather));
        }
        break;
      case Dispatcher::kAllGather: break;
      case Dispatcher::kDeepEpNormal:
      case Dispatcher::kDeepEpLl: backend = "deepep"; break;  // tp 1 by legality
      case Dispatcher::kPaddedA2a:
        backend = l.tp_size == 1 ? "deepep" : "none";
        res.warnings.push_back(
            "SGLang has no padded equal-split all-to-all; exported as --moe-a2a-backend " +
            backend + " (moeplan's " + (l.tp_size == 1 ? "a2av" : "allgather") + ")" +
            same_shape_with(spec, l.tp_size == 1 ? Dispatcher::kA2av : Dispatcher::kAllGather));
        break;
    }
    args.push_back("--moe-a2a-backend " + backend);
  }
  if (backend == "deepep") {
    // NOTE: a2av has no mode of its own: SGLang's DeepEP runs normal kernels for prefill and
    // low-latency ones for decode; the DeepEP dispatchers name theirs.
    std::string mode = spec.workload.phase == Phase::kDecode ? "low_latency" : "normal";
    if (l.dispatcher == Dispatcher::kDeepEpNormal) mode = "normal";
    if (l.dispatcher == Dispatcher::kDeepEpLl) mode = "low_latency";
    args.push_back("--deepep-mode " + mode);
  }
  if (l.tbo) {
    if (backend == "deepep") {
      args.push_back("--enable-two-batch-overlap");
    } else {
      res.warnings.push_back(
          "SGLang's two-batch overlap runs with its DeepEP backend only; this layout is exported "
          "without --enable-two-batch-overlap");
    }
  }
  const WeightsArgs q = sglang_weights(spec, version);
  args.insert(args.end(), q.args.begin(), q.args.end());
  if (spec.workload.counts_kv()) {
    // The plan's context and memory share: SGLang sizes its KV pool from the static fraction.
    args.push_back("--context-length " + std::to_string(spec.workload.isl + spec.workload.osl));
    args.push_back("--mem-fraction-static " + fraction_text(spec.workload.mem_fraction));
  }
  if (spec.placement) {
    args.push_back("--ep-num-redundant-experts " + std::to_string(redundant_slots(spec)));
    args.push_back("--init-expert-location \"$HERE/sglang_expert_location.json\"");
  }
  const int nodes = spec.num_nodes();
  std::string env = model_path_line(spec);
  if (nodes > 1) {
    env +=
        required_variable("NODE_RANK", "the index of this node, 0.." + std::to_string(nodes - 1));
    env += required_variable("DIST_INIT_ADDR", "host:port of node 0");
    args.push_back("--nnodes " + std::to_string(nodes));
    args.push_back("--node-rank \"$NODE_RANK\"");
    args.push_back("--dist-init-addr \"$DIST_INIT_ADDR\"");
  }
  std::string script =
      "#!/usr/bin/env bash\n" + comment_block(spec, "sglang", version, res.warnings);
  script +=
      "set -euo pipefail\n" + env + "HERE=\"$(cd \"$(dirname \"${BASH_SOURCE[0]}\")\" && pwd)\"\n";
  script += shell_command("python3 -m sglang.launch_server", args);
  res.files.push_back({"sglang_launch.sh", script});
  if (spec.placement)
    res.files.push_back({"sglang_expert_location.json", expert_location_json(spec)});
  return res;
}

}  // namespace sglang
}  // namespace

const FormatWriter kSglangWriter = {ExportFormat::kSglang, "sglang",           "SGLang",
                                    sglang::kVersions,     sglang::cannot_run, sglang::write,
                                    sglang_weights};

}  // namespace moeplan::planner::exports
