// Exports: plan reading, layout selection, the export spec, one writer per framework, moeplan's
// own layout file and the staged all-or-nothing write.
#include "planner/export.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "models/file_io.hpp"
#include "models/json_reader.hpp"
#include "models/registry.hpp"
#include "models/units.hpp"

namespace moeplan::planner {

namespace {

std::size_t uz(int v) { return static_cast<std::size_t>(v); }

const char* const kParts[] = {"router", "dispatch", "experts", "combine", "tp", "shared"};

CostItem* part(LayerCost& c, int i) {
  CostItem* items[] = {&c.router, &c.dispatch, &c.experts, &c.combine, &c.tp, &c.shared};
  return items[i];
}
const CostItem* part(const LayerCost& c, int i) {
  const CostItem* items[] = {&c.router, &c.dispatch, &c.experts, &c.combine, &c.tp, &c.shared};
  return items[i];
}

std::string label(const Layout& l) { return l.full_name(); }

std::string ms(double seconds) { return format_fixed(seconds * 1e3, 3) + " ms"; }

/// Whether the two mappings are the same GPU assignment (ep or tp is 1).
bool mapping_matters(const Layout& l) { return l.ep_size > 1 && l.tp_size > 1; }

PlannedLayout planned_from(const LayoutCost& c, int rank) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  PlannedLayout p;
  p.rank = rank;
  p.layout = c.layout;
  p.feasible = c.feasible;
  p.per_layer = c.per_layer;
  p.step_seconds = c.step_seconds;
  p.tokens_per_s_per_gpu = c.tokens_per_s_per_gpu;
  p.memory_gib = c.memory.total() / kGiB;
  p.capacity_gib = c.memory_capacity / kGiB;
  return p;
}

Result<PlannedLayout> parse_planned(const nlohmann::json& l, const std::string& source,
                                    const std::string& prefix, int num_gpus) {
  JsonReader r(l, source, prefix);
  PlannedLayout p;
  auto rank = r.integer("rank", 1, 1 << 20);
  if (!rank) return rank.error();
  p.rank = static_cast<int>(*rank);
  auto dp = r.integer_or("dp_size", 1, 1, num_gpus);
  if (!dp) return dp.error();
  auto ep = r.integer("ep_size", 1, num_gpus);
  if (!ep) return ep.error();
  auto tp = r.integer("tp_size", 1, num_gpus);
  if (!tp) return tp.error();
  if (*dp * *ep * *tp != num_gpus) {
    return r.error("tp_size", "expected dp_size·ep_size·tp_size = num_gpus (" +
                                  std::to_string(num_gpus) + "), got " + std::to_string(*dp) + "·" +
                                  std::to_string(*ep) + "·" + std::to_string(*tp));
  }
  p.layout.num_gpus = num_gpus;
  p.layout.dp_size = static_cast<int>(*dp);
  p.layout.ep_size = static_cast<int>(*ep);
  p.layout.tp_size = static_cast<int>(*tp);
  auto disp = r.string("dispatcher");
  if (!disp) return disp.error();
  const auto d = parse_dispatcher(*disp);
  if (!d)
    return r.error("dispatcher", "expected padded_a2a, allgather or a2av, got \"" + *disp + "\"");
  p.layout.dispatcher = *d;
  auto map = r.string("mapping");
  if (!map) return map.error();
  const auto m = models::parse_mapping(*map);
  if (!m) return r.error("mapping", "expected tp_innermost or ep_innermost, got \"" + *map + "\"");
  p.layout.mapping = *m;
  auto feasible = r.boolean_or("feasible", true);
  if (!feasible) return feasible.error();
  p.feasible = *feasible;
  if (!r.has("layer_ms") || !l.at("layer_ms").is_object()) {
    return r.error("layer_ms", "expected an object of per-part milliseconds");
  }
  JsonReader lm(l.at("layer_ms"), source, prefix + "layer_ms.");
  const nlohmann::json none = nlohmann::json::object();
  const nlohmann::json& src =
      l.contains("sources") && l.at("sources").is_object() ? l.at("sources") : none;
  JsonReader sr(src, source, prefix + "sources.");
  for (int i = 0; i < 6; ++i) {
    auto v = lm.number(kParts[i], 0.0, 1e12);
    if (!v) return v.error();
    part(p.per_layer, i)->seconds = *v / 1e3;
    auto s = sr.string_or(kParts[i], "");
    if (!s) return s.error();
    part(p.per_layer, i)->source = *s;
  }
  auto step = r.number("step_ms", 0.0, 1e15);
  if (!step) return step.error();
  p.step_seconds = *step / 1e3;
  auto tps = r.number_or("tokens_per_s_per_gpu", 0.0, 0.0, 1e15);
  if (!tps) return tps.error();
  p.tokens_per_s_per_gpu = *tps;
  if (r.has("memory_gib")) {
    if (!l.at("memory_gib").is_object()) return r.error("memory_gib", "expected an object");
    JsonReader mr(l.at("memory_gib"), source, prefix + "memory_gib.");
    auto total = mr.number_or("total", 0.0, 0.0, 1e12);
    if (!total) return total.error();
    auto cap = mr.number_or("capacity", 0.0, 0.0, 1e12);
    if (!cap) return cap.error();
    p.memory_gib = *total;
    p.capacity_gib = *cap;
  }
  return p;
}

Result<nlohmann::json> object_at(const nlohmann::json& j, const JsonReader& r,
                                 const std::string& key, const std::string& what) {
  if (!r.has(key) || !j.at(key).is_object()) return r.error(key, "expected an object with " + what);
  return j.at(key);
}

// ---- what each framework can express ------------------------------------------------------

/// Structural reasons `format` cannot run layout `l` as planned (empty: it can).
std::vector<std::string> structural_errors(ExportFormat format, const Layout& l) {
  std::vector<std::string> out;
  const std::string shape = l.shape_name();
  const std::string replicas =
      std::to_string(l.dp_size) + " independent MoE replicas (dp" + std::to_string(l.dp_size) + ")";
  switch (format) {
    case ExportFormat::kSglang:
      if (l.dp_size > 1) {
        out.push_back(
            "SGLang runs one expert-parallel group per launch (--ep-size divides "
            "--tp-size, every attention-DP rank joins it), so " +
            replicas + " cannot be expressed");
      }
      if (mapping_matters(l) && l.mapping == RankMapping::kEpInnermost) {
        out.push_back(
            "SGLang numbers MoE ranks TP-innermost (moe_ep_rank = tp_rank / moe_tp_size)"
            ", so " +
            shape + " ep_innermost cannot be reproduced");
      }
      break;
    case ExportFormat::kVllm:
      if (l.dp_size > 1) {
        out.push_back(
            "vLLM puts every data-parallel rank into one expert-parallel group "
            "(EP size = TP × DP), so " +
            replicas + " cannot be expressed");
      }
      if (l.ep_size > 1 && l.tp_size > 1) {
        out.push_back(
            "vLLM shards experts either by TP (--tensor-parallel-size, no EP) or by EP "
            "over all TP × DP ranks (--enable-expert-parallel), never TP inside EP, so " +
            shape + " cannot be expressed");
      }
      break;
    case ExportFormat::kTrtllm:
      if (l.dp_size > 1) {
        out.push_back("TensorRT-LLM spans one MoE group over tensor_parallel_size GPUs, so " +
                      replicas + " cannot be expressed");
      }
      if (mapping_matters(l) && l.mapping == RankMapping::kTpInnermost) {
        out.push_back(
            "TensorRT-LLM numbers MoE ranks EP-innermost (moe_ep_rank = tp_rank % "
            "moe_expert_parallel_size), so " +
            shape +
            " tp_innermost cannot be "
            "reproduced");
      }
      break;
    case ExportFormat::kMegatron:
      if (mapping_matters(l) && l.mapping == RankMapping::kEpInnermost) {
        out.push_back("Megatron-Core orders expert ranks tp-ep-dp (expert TP innermost), so " +
                      shape + " ep_innermost cannot be reproduced");
      }
      break;
    case ExportFormat::kPaddle:
      if (l.dp_size > 1) {
        out.push_back(
            "PaddleNLP's expert-parallel group is its data-parallel group "
            "(expert_parallel_degree = data-parallel degree = GPUs / "
            "tensor_parallel_degree), so " +
            replicas + " cannot be expressed");
      }
      if (mapping_matters(l) && l.mapping == RankMapping::kEpInnermost) {
        out.push_back("PaddleNLP puts the model-parallel (tp) rank innermost, so " + shape +
                      " ep_innermost cannot be reproduced");
      }
      break;
    case ExportFormat::kJson: break;
  }
  return out;
}

/// "nearest expressible layout in the plan: rank 3: … (--layout 3)", or that there is none.
/// Nearest means: the same shape and dispatcher (another mapping), else the same shape, else the
/// best-ranked layout the framework can run.
std::string nearest_layout(const ExportSpec& spec, ExportFormat format) {
  const Layout& c = spec.chosen.layout;
  auto same_shape = [&c](const Layout& a) {
    return a.dp_size == c.dp_size && a.ep_size == c.ep_size && a.tp_size == c.tp_size;
  };
  const std::function<bool(const Layout&)> tiers[] = {
      [&](const Layout& a) { return same_shape(a) && a.dispatcher == c.dispatcher; }, same_shape,
      [](const Layout&) { return true; }};
  for (const auto& tier : tiers) {
    for (const auto& alt : spec.alternatives) {
      if (tier(alt.layout) && structural_errors(format, alt.layout).empty()) {
        return "nearest expressible layout in the plan: " + alt.describe() + " (--layout " +
               std::to_string(alt.rank) + ")";
      }
    }
  }
  return "no layout of the plan can be expressed in " + export_format_name(format);
}

/// A plan layout of the same shape and mapping with dispatcher `d`, described, or "".
std::string same_shape_with(const ExportSpec& spec, Dispatcher d) {
  for (const auto& alt : spec.alternatives) {
    const Layout& a = alt.layout;
    const Layout& c = spec.chosen.layout;
    if (a.dp_size == c.dp_size && a.ep_size == c.ep_size && a.tp_size == c.tp_size &&
        a.mapping == c.mapping && a.dispatcher == d) {
      return "; the plan costs it as " + alt.describe() + " (--layout " + std::to_string(alt.rank) +
             ")";
    }
  }
  return "";
}

bool is_contiguous(const Placement& p) {
  if (p.num_slots != p.num_experts) return false;
  for (const auto& row : p.physical_to_logical) {
    for (int s = 0; s < p.num_slots; ++s) {
      if (row[uz(s)] != s) return false;
    }
  }
  return true;
}

/// vLLM's round_robin: local slot i of rank r holds expert r + i·ep.
bool is_round_robin(const Placement& p) {
  if (p.num_slots != p.num_experts) return false;
  const int per = p.slots_per_rank();
  for (const auto& row : p.physical_to_logical) {
    for (int s = 0; s < p.num_slots; ++s) {
      if (row[uz(s)] != s / per + (s % per) * p.ep_size) return false;
    }
  }
  return true;
}

int redundant_slots(const ExportSpec& spec) {
  return spec.placement ? spec.placement->num_slots - spec.num_experts : 0;
}

// ---- shared text --------------------------------------------------------------------------

std::vector<std::string> header_lines(const ExportSpec& spec, ExportFormat format) {
  const auto& c = spec.chosen;
  std::vector<std::string> h;
  h.push_back("moeplan export (" + export_format_name(format) + "): " + spec.model + " on " +
              spec.cluster + ", " + std::to_string(c.layout.num_gpus) + " × " + spec.device);
  h.push_back("layout" + (c.rank > 0 ? " rank " + std::to_string(c.rank) : std::string()) + ": " +
              label(c.layout) + "; " + phase_name(spec.workload.phase) + ", " +
              std::to_string(spec.workload.tokens_per_gpu) + " tokens per GPU");
  h.push_back("predicted (" + spec.cost_source + ", placement " + spec.cost_placement +
              "): " + ms(c.step_seconds) + " per step over the MoE layers, " +
              format_fixed(c.tokens_per_s_per_gpu, 0) + " tokens/s/GPU, " +
              format_fixed(c.memory_gib, 2) + " GiB of " + format_fixed(c.capacity_gib, 2) +
              " GiB per GPU" + (c.feasible ? "" : " (does not fit)"));
  h.push_back("model " + spec.model_fingerprint + ", cluster " + spec.cluster_fingerprint);
  if (spec.placement) {
    h.push_back("placement: " + spec.placement->policy + ", " +
                std::to_string(spec.placement->num_slots) + " slots per MoE layer (" +
                std::to_string(redundant_slots(spec)) + " redundant)");
  }
  return h;
}

std::string comment_block(const ExportSpec& spec, ExportFormat format,
                          const std::vector<std::string>& warnings) {
  std::string out;
  for (const auto& line : header_lines(spec, format)) out += "# " + line + "\n";
  for (const auto& w : warnings) out += "# warning: " + w + "\n";
  return out;
}

/// `name value` lines of a shell command, continued with backslashes.
std::string shell_command(const std::string& program, const std::vector<std::string>& args) {
  std::string out = program;
  for (const auto& a : args) out += " \\\n  " + a;
  return out + "\n";
}

std::string model_path_line(const ExportSpec& spec) {
  return "MODEL_PATH=\"${MODEL_PATH:?set MODEL_PATH to the " + spec.model + " checkpoint}\"\n";
}

std::string int_row(const std::vector<int>& row) {
  std::string s = "[";
  for (std::size_t i = 0; i < row.size(); ++i) s += (i ? ", " : "") + std::to_string(row[i]);
  return s + "]";
}

// ---- SGLang -------------------------------------------------------------------------------

ExportResult write_sglang(const ExportSpec& spec) {
  ExportResult res;
  const Layout& l = spec.chosen.layout;
  const int world = l.ep_size * l.tp_size;
  std::vector<std::string> args = {"--model-path \"$MODEL_PATH\"",
                                   "--tp-size " + std::to_string(world),
                                   "--ep-size " + std::to_string(l.ep_size)};
  if (l.ep_size > 1) {
    // NOTE: moeplan's cost model gives each EP rank its own tokens with attention TP = tp inside
    // it: SGLang's DP attention with dp-size = ep (attention TP = tp-size / dp-size = tp).
    args.push_back("--enable-dp-attention");
    args.push_back("--dp-size " + std::to_string(l.ep_size));
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
      case Dispatcher::kPaddedA2a:
        backend = l.tp_size == 1 ? "deepep" : "none";
        res.warnings.push_back(
            "SGLang has no padded equal-split all-to-all; exported as --moe-a2a-backend " +
            backend + " (moeplan's " + (l.tp_size == 1 ? "a2av" : "allgather") + ")" +
            same_shape_with(spec, l.tp_size == 1 ? Dispatcher::kA2av : Dispatcher::kAllGather));
        break;
    }
  }
  if (l.ep_size > 1) args.push_back("--moe-a2a-backend " + backend);
  if (backend == "deepep") {
    args.push_back(std::string("--deepep-mode ") +
                   (spec.workload.phase == Phase::kDecode ? "low_latency" : "normal"));
  }
  if (spec.placement) {
    args.push_back("--ep-num-redundant-experts " + std::to_string(redundant_slots(spec)));
    args.push_back("--init-expert-location \"$HERE/sglang_expert_location.json\"");
  }
  const int nodes = spec.num_nodes();
  std::string env = model_path_line(spec);
  if (nodes > 1) {
    env += "NODE_RANK=\"${NODE_RANK:?set NODE_RANK to this node's index, 0.." +
           std::to_string(nodes - 1) + "}\"\n";
    env += "DIST_INIT_ADDR=\"${DIST_INIT_ADDR:?set DIST_INIT_ADDR to host:port of node 0}\"\n";
    args.push_back("--nnodes " + std::to_string(nodes));
    args.push_back("--node-rank \"$NODE_RANK\"");
    args.push_back("--dist-init-addr \"$DIST_INIT_ADDR\"");
  }
  std::string script =
      "#!/usr/bin/env bash\n" + comment_block(spec, ExportFormat::kSglang, res.warnings);
  script +=
      "set -euo pipefail\n" + env + "HERE=\"$(cd \"$(dirname \"${BASH_SOURCE[0]}\")\" && pwd)\"\n";
  script += shell_command("python3 -m sglang.launch_server", args);
  res.files.push_back({"sglang_launch.sh", script});
  if (spec.placement) {
    // SGLang sizes the map by every hidden layer; dense layers keep the trivial map (slot p
    // holds expert p mod E), as SGLang's own init_trivial builds it.
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
    json += "]}\n";
    res.files.push_back({"sglang_expert_location.json", json});
  }
  return res;
}

// ---- vLLM ---------------------------------------------------------------------------------

ExportResult write_vllm(const ExportSpec& spec) {
  ExportResult res;
  const Layout& l = spec.chosen.layout;
  std::vector<std::string> args;
  if (l.ep_size == 1) {
    args.push_back("--tensor-parallel-size " + std::to_string(l.tp_size));
  } else {
    // tp == 1 here: EP over data-parallel ranks, each with its own tokens (attention TP 1).
    args.push_back("--tensor-parallel-size 1");
    args.push_back("--data-parallel-size " + std::to_string(l.ep_size));
    args.push_back("--enable-expert-parallel");
    std::string backend;
    switch (l.dispatcher) {
      case Dispatcher::kAllGather: backend = "allgather_reducescatter"; break;
      case Dispatcher::kA2av:
        backend =
            spec.workload.phase == Phase::kDecode ? "deepep_low_latency" : "deepep_high_throughput";
        break;
      case Dispatcher::kPaddedA2a:
        backend =
            spec.workload.phase == Phase::kDecode ? "deepep_low_latency" : "deepep_high_throughput";
        res.warnings.push_back(
            "vLLM has no padded equal-split all-to-all; exported as "
            "--all2all-backend " +
            backend + " (moeplan's a2av)" + same_shape_with(spec, Dispatcher::kA2av));
        break;
    }
    args.push_back("--all2all-backend " + backend);
  }
  if (spec.placement) {
    const Placement& p = *spec.placement;
    const int redundant = redundant_slots(spec);
    if (is_contiguous(p)) {
      // vLLM's default linear placement.
    } else if (is_round_robin(p)) {
      args.push_back("--expert-placement-strategy round_robin");
    } else {
      res.warnings.push_back(
          "vLLM cannot load an explicit expert placement (only --expert-placement-strategy "
          "linear|round_robin); placement '" +
          p.policy + "' is not exported, " +
          (redundant > 0 ? std::string("its EPLB starts from linear and rebalances at run time")
                         : std::string("nearest: the linear (contiguous) placement")));
    }
    if (redundant > 0) {
      args.push_back("--enable-eplb");
      args.push_back(
          "--eplb-config '{\"window_size\":1000,\"step_interval\":3000,"
          "\"num_redundant_experts\":" +
          std::to_string(redundant) + "}'");
    }
  }
  std::string script =
      "#!/usr/bin/env bash\n" + comment_block(spec, ExportFormat::kVllm, res.warnings);
  if (spec.num_nodes() > 1) {
    script += "# spans " + std::to_string(spec.num_nodes()) +
              " nodes: add vLLM's multi-node data-parallel arguments on each node\n";
  }
  script += "set -euo pipefail\n" + model_path_line(spec);
  script += shell_command("vllm serve \"$MODEL_PATH\"", args);
  res.files.push_back({"vllm_serve.sh", script});
  return res;
}

// ---- TensorRT-LLM -------------------------------------------------------------------------

ExportResult write_trtllm(const ExportSpec& spec) {
  ExportResult res;
  const Layout& l = spec.chosen.layout;
  const int world = l.ep_size * l.tp_size;
  const bool attention_dp = l.ep_size > 1;
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
  std::string yaml = comment_block(spec, ExportFormat::kTrtllm, res.warnings);
  yaml +=
      "# use: trtllm-serve \"$MODEL_PATH\" --extra_llm_api_options "
      "trtllm_extra_llm_api_options.yaml\n";
  yaml += "tensor_parallel_size: " + std::to_string(world) + "\n";
  yaml += "moe_expert_parallel_size: " + std::to_string(l.ep_size) + "\n";
  yaml += "moe_tensor_parallel_size: " + std::to_string(l.tp_size) + "\n";
  yaml += std::string("enable_attention_dp: ") + (attention_dp ? "true" : "false") + "\n";
  if (spec.placement) {
    yaml += "moe_config:\n  load_balancer: ./moe_load_balancer.yaml\n";
  }
  res.files.push_back({"trtllm_extra_llm_api_options.yaml", yaml});
  if (spec.placement) {
    const Placement& p = *spec.placement;
    std::string lb = comment_block(spec, ExportFormat::kTrtllm, {});
    lb +=
        "# static: layer_updates_per_iter 0 keeps this placement; keys are hidden-layer "
        "indices\n";
    lb += "num_slots: " + std::to_string(p.num_slots) + "\n";
    lb += "layer_updates_per_iter: 0\n";
    lb += "initial_global_assignments:\n";
    for (std::size_t m = 0; m < spec.moe_layer_ids.size(); ++m) {
      lb += "  " + std::to_string(spec.moe_layer_ids[m]) + ": " +
            int_row(p.physical_to_logical[m]) + "\n";
    }
    res.files.push_back({"moe_load_balancer.yaml", lb});
  }
  return res;
}

// ---- Megatron-Core ------------------------------------------------------------------------

std::string placement_not_exported(const ExportSpec& spec, const std::string& framework) {
  return framework + " places experts contiguously (rank r owns experts [r·E/ep, (r+1)·E/ep)) " +
         "and has no redundant experts; placement '" + spec.placement->policy + "' (" +
         std::to_string(spec.placement->num_slots) +
         " slots) is not exported, nearest: the contiguous placement";
}

ExportResult write_megatron(const ExportSpec& spec) {
  ExportResult res;
  const Layout& l = spec.chosen.layout;
  std::string dispatcher = "alltoall";
  if (l.dispatcher == Dispatcher::kAllGather) dispatcher = "allgather";
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
  const int world = l.num_gpus;
  const int data_parallel = world / l.tp_size;
  std::vector<std::string> args = {"--tensor-model-parallel-size " + std::to_string(l.tp_size),
                                   "--pipeline-model-parallel-size 1", "--context-parallel-size 1",
                                   "--expert-model-parallel-size " + std::to_string(l.ep_size),
                                   "--expert-tensor-parallel-size " + std::to_string(l.tp_size)};
  if (l.tp_size > 1 && l.ep_size > 1) args.push_back("--sequence-parallel");
  args.push_back("--num-experts " + std::to_string(spec.num_experts));
  args.push_back("--moe-router-topk " + std::to_string(spec.top_k));
  args.push_back("--moe-token-dispatcher-type " + dispatcher);
  std::string text = comment_block(spec, ExportFormat::kMegatron, res.warnings);
  text += "# MoE parallel folding: world = TP·CP·DP·PP = " + std::to_string(l.tp_size) + "·1·" +
          std::to_string(data_parallel) + "·1 = ETP·EP·EDP·PP = " + std::to_string(l.tp_size) +
          "·" + std::to_string(l.ep_size) + "·" + std::to_string(l.dp_size) +
          "·1 = " + std::to_string(world) + "\n";
  text +=
      "# source this file, then pass \"${MOEPLAN_PARALLEL_ARGS[@]}\" to the training script "
      "on " +
      std::to_string(world) + " GPUs\n";
  text += "MOEPLAN_PARALLEL_ARGS=(\n";
  for (const auto& a : args) text += "  " + a + "\n";
  text += ")\n";
  res.files.push_back({"megatron_args.sh", text});
  return res;
}

// ---- PaddleNLP ----------------------------------------------------------------------------

ExportResult write_paddle(const ExportSpec& spec) {
  ExportResult res;
  const Layout& l = spec.chosen.layout;
  if (l.ep_size == 1) {
    // No expert parallelism: no dispatch to choose.
  } else if (l.dispatcher == Dispatcher::kA2av) {
    res.warnings.push_back(
        "PaddleNLP #9368 dispatches with a padded equal-split all-to-all (capacity = global "
        "max); a2av (variable all-to-all) depends on the PaddleNLP version you run" +
        same_shape_with(spec, Dispatcher::kPaddedA2a));
  } else if (l.dispatcher == Dispatcher::kAllGather) {
    res.warnings.push_back(
        "PaddleNLP has no all-gather token dispatch; it runs its padded all-to-all "
        "(moeplan's padded_a2a)" +
        same_shape_with(spec, Dispatcher::kPaddedA2a));
  }
  if (spec.placement && !is_contiguous(*spec.placement)) {
    res.warnings.push_back(placement_not_exported(spec, "PaddleNLP"));
  }
  nlohmann::ordered_json j;
  j["tensor_parallel_degree"] = l.tp_size;
  j["expert_parallel_degree"] = l.ep_size;
  j["pipeline_parallel_degree"] = 1;
  j["sharding_parallel_degree"] = 1;
  res.files.push_back({"paddle_args.json", j.dump(2) + "\n"});
  return res;
}

// ---- moeplan's own layout file ------------------------------------------------------------

/// 12 significant digits: milliseconds converted from seconds and back are then written the
/// same way every time (x·1e3/1e3 is not always x in binary floating point).
double sig12(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.12g", x);
  return std::strtod(buf, nullptr);
}

constexpr const char* kMapMarker = "@physical_to_logical_map@";
constexpr const char* kLayerIdsMarker = "@moe_layer_ids@";

nlohmann::ordered_json layout_json(const ExportSpec& spec) {
  const auto& c = spec.chosen;
  nlohmann::ordered_json j;
  j["format"] = kLayoutFormat;
  j["version"] = kLayoutVersion;
  j["model"] = {{"name", spec.model},
                {"source", spec.model_source},
                {"fingerprint", spec.model_fingerprint},
                {"num_hidden_layers", spec.num_hidden_layers},
                {"moe_layer_ids", kLayerIdsMarker},
                {"num_experts", spec.num_experts},
                {"top_k", spec.top_k}};
  j["cluster"] = {{"name", spec.cluster},
                  {"source", spec.cluster_source},
                  {"fingerprint", spec.cluster_fingerprint},
                  {"device", spec.device},
                  {"gpus_per_node", spec.gpus_per_node}};
  j["plan"] = {{"source", spec.plan_source},
               {"rank", c.rank},
               {"cost_source", spec.cost_source},
               {"expert_load", spec.load_source},
               {"placement", spec.cost_placement}};
  j["workload"] = {{"phase", phase_name(spec.workload.phase)},
                   {"tokens_per_gpu", spec.workload.tokens_per_gpu}};
  j["layout"] = {{"num_gpus", c.layout.num_gpus},
                 {"dp_size", c.layout.dp_size},
                 {"ep_size", c.layout.ep_size},
                 {"tp_size", c.layout.tp_size},
                 {"dispatcher", dispatcher_name(c.layout.dispatcher)},
                 {"mapping", mapping_name(c.layout.mapping)}};
  nlohmann::ordered_json layer_ms, sources;
  double total = 0.0;
  for (int i = 0; i < 6; ++i) {
    const double v = sig12(part(c.per_layer, i)->seconds * 1e3);
    layer_ms[kParts[i]] = v;
    total += v;
    sources[kParts[i]] = part(c.per_layer, i)->source;
  }
  // The sum of the written parts, so that reading the file back and writing it again agrees.
  layer_ms["total"] = sig12(total);
  j["predicted"] = {{"feasible", c.feasible},
                    {"layer_ms", layer_ms},
                    {"sources", sources},
                    {"step_ms", sig12(c.step_seconds * 1e3)},
                    {"tokens_per_s_per_gpu", c.tokens_per_s_per_gpu},
                    {"memory_gib", c.memory_gib},
                    {"capacity_gib", c.capacity_gib}};
  if (spec.placement) {
    const Placement& p = *spec.placement;
    j["placement"] = {{"policy", p.policy},
                      {"num_slots", p.num_slots},
                      {"layer_ids", kLayerIdsMarker},
                      {"physical_to_logical_map", kMapMarker}};
  } else {
    j["placement"] = nullptr;
  }
  return j;
}

ExportResult write_json(const ExportSpec& spec) {
  ExportResult res;
  // One row of the map per line keeps the file readable and diffable.
  std::string text = layout_json(spec).dump(2);
  const std::string ids = std::string("\"") + kLayerIdsMarker + "\"";
  for (auto pos = text.find(ids); pos != std::string::npos; pos = text.find(ids)) {
    text.replace(pos, ids.size(), int_row(spec.moe_layer_ids));
  }
  if (spec.placement) {
    const auto& rows = spec.placement->physical_to_logical;
    std::string map = "[\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      map += "        " + int_row(rows[i]) + (i + 1 < rows.size() ? ",\n" : "\n");
    }
    map += "      ]";
    const std::string marker = std::string("\"") + kMapMarker + "\"";
    text.replace(text.find(marker), marker.size(), map);
  }
  res.files.push_back({"moeplan_layout.json", text + "\n"});
  return res;
}

}  // namespace

// ---- public API ---------------------------------------------------------------------------

std::string export_format_name(ExportFormat format) {
  switch (format) {
    case ExportFormat::kSglang: return "sglang";
    case ExportFormat::kVllm: return "vllm";
    case ExportFormat::kTrtllm: return "trtllm";
    case ExportFormat::kMegatron: return "megatron";
    case ExportFormat::kPaddle: return "paddle";
    case ExportFormat::kJson: return "json";
  }
  return "?";
}

Result<ExportFormat> parse_export_format(const std::string& name) {
  for (const ExportFormat f : kAllExportFormats) {
    if (export_format_name(f) == name) return f;
  }
  return input_error(
      "format", ": expected sglang, vllm, trtllm, megatron, paddle or json, got '" + name + "'");
}

std::string PlannedLayout::describe() const {
  return "rank " + std::to_string(rank) + ": " + label(layout) + ", " + ms(step_seconds) +
         " per step";
}

PlanSummary summarize_plan(const Plan& plan) {
  PlanSummary s;
  s.model = plan.model;
  s.model_source = plan.model_source;
  s.cluster = plan.cluster;
  s.cluster_source = plan.cluster_source;
  s.device = plan.device;
  s.cost_source = plan.cost_source;
  s.load_source = plan.load_source;
  s.placement_policy = plan.placement_policy;
  s.num_gpus = plan.num_gpus;
  s.workload = plan.workload;
  for (std::size_t i = 0; i < plan.layouts.size(); ++i) {
    s.layouts.push_back(planned_from(plan.layouts[i], static_cast<int>(i) + 1));
  }
  s.recommended = plan.recommended;
  return s;
}

Result<PlanSummary> parse_plan_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) {
    return Error{source + ": expected a plan (moeplan plan --json), got " + describe_json(j)};
  }
  JsonReader r(j, source);
  auto version = r.integer("schema_version", 1, 1);
  if (!version) return version.error();
  PlanSummary s;
  s.source = source;
  auto model = object_at(j, r, "model", "name and source");
  if (!model) return model.error();
  JsonReader mr(*model, source, "model.");
  auto mname = mr.string("name");
  if (!mname) return mname.error();
  auto msrc = mr.string("source");
  if (!msrc) return msrc.error();
  s.model = *mname;
  s.model_source = *msrc;
  auto cluster = object_at(j, r, "cluster", "name, source and device");
  if (!cluster) return cluster.error();
  JsonReader cr(*cluster, source, "cluster.");
  auto cname = cr.string("name");
  if (!cname) return cname.error();
  auto csrc = cr.string("source");
  if (!csrc) return csrc.error();
  auto dev = cr.string_or("device", "");
  if (!dev) return dev.error();
  s.cluster = *cname;
  s.cluster_source = *csrc;
  s.device = *dev;
  auto gpus = r.integer("num_gpus", 1, 1 << 20);
  if (!gpus) return gpus.error();
  s.num_gpus = static_cast<int>(*gpus);
  auto work = object_at(j, r, "workload", "phase and tokens_per_gpu");
  if (!work) return work.error();
  JsonReader wr(*work, source, "workload.");
  auto phase = wr.string("phase");
  if (!phase) return phase.error();
  const auto ph = parse_phase(*phase);
  if (!ph) return wr.error("phase", "expected prefill or decode, got \"" + *phase + "\"");
  s.workload.phase = *ph;
  auto tokens = wr.integer("tokens_per_gpu", 1, 1 << 30);
  if (!tokens) return tokens.error();
  s.workload.tokens_per_gpu = static_cast<int>(*tokens);
  auto cost = r.string("cost_source");
  if (!cost) return cost.error();
  s.cost_source = *cost;
  auto load = r.string_or("expert_load", "uniform");
  if (!load) return load.error();
  s.load_source = *load;
  auto placement = r.string_or("placement", "contiguous");
  if (!placement) return placement.error();
  s.placement_policy = *placement;
  if (!r.has("layouts") || !j.at("layouts").is_array()) {
    return r.error("layouts", "expected an array of ranked layouts");
  }
  const auto& layouts = j.at("layouts");
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    const auto& l = layouts[i];
    const std::string prefix = "layouts[" + std::to_string(i) + "].";
    if (!l.is_object()) {
      return r.error("layouts", "expected objects, got " + describe_json(l) + " at index " +
                                    std::to_string(i));
    }
    JsonReader lr(l, source, prefix);
    auto legal = lr.boolean_or("legal", true);
    if (!legal) return legal.error();
    if (!*legal) continue;
    auto p = parse_planned(l, source, prefix, s.num_gpus);
    if (!p) return p.error();
    if (!s.layouts.empty() && p->rank <= s.layouts.back().rank) {
      return lr.error("rank", "expected ranks in increasing order, got " + std::to_string(p->rank) +
                                  " after " + std::to_string(s.layouts.back().rank));
    }
    s.layouts.push_back(std::move(*p));
  }
  if (s.layouts.empty()) return r.error("layouts", "expected at least one legal layout");
  if (r.has("recommendation")) {
    const auto& rec = j.at("recommendation");
    if (!rec.is_object()) return r.error("recommendation", "expected an object");
    if (rec.contains("rank") && !rec.at("rank").is_null()) {
      JsonReader rr(rec, source, "recommendation.");
      auto rank = rr.integer("rank", 1, 1 << 20);
      if (!rank) return rank.error();
      for (std::size_t i = 0; i < s.layouts.size(); ++i) {
        if (s.layouts[i].rank == *rank) s.recommended = static_cast<int>(i);
      }
      if (s.recommended < 0) {
        return rr.error("rank",
                        "expected the rank of a listed layout, got " + std::to_string(*rank));
      }
    }
  }
  return s;
}

Result<PlanSummary> load_plan_file(const std::filesystem::path& path) {
  auto j = load_json_file(path);
  if (!j) return j.error();
  return parse_plan_json(*j, path.string());
}

Result<PlannedLayout> select_layout(const PlanSummary& plan, const std::string& selector) {
  if (plan.layouts.empty()) return Error{"plan " + plan.source + ": no legal layouts"};
  if (selector.empty()) {
    return plan.layouts[uz(plan.recommended >= 0 ? plan.recommended : 0)];
  }
  const bool digits = std::all_of(selector.begin(), selector.end(), [](char ch) {
    return std::isdigit(static_cast<unsigned char>(ch));
  });
  if (digits && selector.size() < 8) {
    const int rank = std::stoi(selector);
    for (const auto& l : plan.layouts) {
      if (l.rank == rank) return l;
    }
    return input_error("layout", " " + selector + ": expected a rank the plan lists (" +
                                     std::to_string(plan.layouts.front().rank) + ".." +
                                     std::to_string(plan.layouts.back().rank) + ")");
  }
  std::vector<int> parts;
  std::string cur;
  for (char ch : selector + "x") {
    if (ch == 'x' || ch == 'X') {
      if (cur.empty() || cur.size() > 7 || !std::all_of(cur.begin(), cur.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c));
          })) {
        parts.clear();
        break;
      }
      parts.push_back(std::stoi(cur));
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (parts.size() != 2 && parts.size() != 3) {
    return input_error(
        "layout",
        " '" + selector + "': expected a rank (e.g. 3) or a shape EPxTP or DPxEPxTP (e.g. 8x2)");
  }
  const int dp = parts.size() == 3 ? parts[0] : 1;
  const int ep = parts[parts.size() - 2];
  const int tp = parts.back();
  for (const auto& l : plan.layouts) {
    if (l.layout.dp_size == dp && l.layout.ep_size == ep && l.layout.tp_size == tp) return l;
  }
  std::string shapes;
  for (const auto& l : plan.layouts) {
    const std::string s = l.layout.shape_name();
    if (shapes.find(s) == std::string::npos) shapes += (shapes.empty() ? "" : ", ") + s;
  }
  return input_error(
      "layout", " " + selector + ": the plan has no legal layout of that shape; it has " + shapes);
}

Result<std::string> file_fingerprint(const std::filesystem::path& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  std::uint64_t h = 1469598103934665603ULL;
  for (const char ch : *text) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return "fnv1a64:" + std::string(buf);
}

int ExportSpec::num_nodes() const {
  const int g = std::max(1, gpus_per_node);
  return (chosen.layout.num_gpus + g - 1) / g;
}

Result<ExportSpec> make_export_spec(const PlanSummary& plan, const PlannedLayout& chosen,
                                    const models::MoeModel& model, const Cluster& cluster,
                                    const PlacementFile* placement,
                                    const std::string& placement_source) {
  // A plan read from a file names it: its recorded model or cluster is what disagrees.
  const std::string where = plan.source.empty() ? "" : plan.source + ": ";
  if (model.name != plan.model) {
    return Error{where + "model '" + model.name + "' (" + model.source_path +
                 "): expected the plan's model '" + plan.model + "'"};
  }
  if (cluster.num_gpus() < plan.num_gpus) {
    return Error{where + "cluster '" + cluster.name() + "' has " +
                 std::to_string(cluster.num_gpus()) + " GPUs, the plan needs " +
                 std::to_string(plan.num_gpus)};
  }
  if (auto rule = layout_rule_violation(model, chosen.layout.ep_size, chosen.layout.tp_size)) {
    return Error{"layout " + chosen.layout.shape_name() + " is illegal for '" + model.name +
                 "': " + *rule};
  }
  ExportSpec s;
  s.model = model.name;
  s.model_source = model.source_path;
  auto mf = file_fingerprint(model.source_path);
  if (!mf) return mf.error();
  s.model_fingerprint = *mf;
  s.num_hidden_layers = model.num_hidden_layers;
  for (int h = 0; h < model.num_hidden_layers; ++h) {
    if (model.moe_layers[uz(h)]) s.moe_layer_ids.push_back(h);
  }
  s.num_experts = model.num_experts;
  s.top_k = model.num_experts_per_tok;
  s.cluster = cluster.name();
  s.cluster_source = cluster.info().source;
  auto cf = file_fingerprint(cluster.info().source);
  if (!cf) return cf.error();
  s.cluster_fingerprint = *cf;
  s.device = cluster.device().name;
  s.gpus_per_node = cluster.info().gpus_per_node;
  s.plan_source = plan.source;
  s.cost_source = plan.cost_source;
  s.load_source = plan.load_source;
  s.cost_placement = plan.placement_policy;
  s.workload = plan.workload;
  s.chosen = chosen;
  for (const auto& l : plan.layouts) {
    if (l.rank != chosen.rank) s.alternatives.push_back(l);
  }
  if (placement != nullptr) {
    const Placement& p = placement->result.placement;
    const std::string& src = placement_source;
    if (p.num_experts != model.num_experts) {
      return Error{src + ": key 'num_experts': expected " + std::to_string(model.num_experts) +
                   " (the routed experts of " + model.name + "), got " +
                   std::to_string(p.num_experts)};
    }
    if (p.ep_size != chosen.layout.ep_size) {
      return Error{src + ": key 'num_gpus': the placement is for " + std::to_string(p.ep_size) +
                   " EP ranks, expected " + std::to_string(chosen.layout.ep_size) +
                   " (the EP size of layout " + chosen.layout.shape_name() + ")"};
    }
    const int num_moe = static_cast<int>(s.moe_layer_ids.size());
    Placement full = p;
    if (p.num_layers() == 1) {
      full.physical_to_logical.assign(uz(num_moe), p.physical_to_logical.front());
    } else if (p.num_layers() == num_moe) {
      std::vector<int> rows(uz(num_moe));
      for (int i = 0; i < num_moe; ++i) rows[uz(i)] = i;
      if (placement->layer_ids != s.moe_layer_ids && placement->layer_ids != rows) {
        return Error{src + ": key 'layer_ids': expected the MoE layers of " + model.name + " (" +
                     std::to_string(s.moe_layer_ids.front()) + ".." +
                     std::to_string(s.moe_layer_ids.back()) + ")"};
      }
    } else {
      return Error{src + ": key 'physical_to_logical_map': expected 1 layer or the " +
                   std::to_string(num_moe) + " MoE layers of " + model.name + ", got " +
                   std::to_string(p.num_layers())};
    }
    if (full.policy.empty()) full.policy = src;
    s.placement = std::move(full);
  }
  return s;
}

Result<ExportSpec> export_spec_from_plan(const PlanSummary& plan, const std::string& selector,
                                         const std::string& placement_path) {
  auto chosen = select_layout(plan, selector);
  if (!chosen) return chosen.error();
  std::error_code ec;
  auto model = models::load_model(
      std::filesystem::is_regular_file(plan.model_source, ec) ? plan.model_source : plan.model);
  if (!model) return model.error();
  auto cluster =
      load_cluster(std::filesystem::is_regular_file(plan.cluster_source, ec) ? plan.cluster_source
                                                                             : plan.cluster);
  if (!cluster) return cluster.error();
  if (placement_path.empty()) {
    return make_export_spec(plan, *chosen, *model, *cluster, nullptr, "");
  }
  auto placement = load_placement_file(placement_path);
  if (!placement) return placement.error();
  return make_export_spec(plan, *chosen, *model, *cluster, &*placement, placement_path);
}

Result<ExportResult> export_layout(const ExportSpec& spec, ExportFormat format) {
  const auto errors = structural_errors(format, spec.chosen.layout);
  if (!errors.empty()) {
    return Error{export_format_name(format) + ": layout " + label(spec.chosen.layout) + ": " +
                 errors.front() + "; " + nearest_layout(spec, format)};
  }
  ExportResult res;
  switch (format) {
    case ExportFormat::kSglang: res = write_sglang(spec); break;
    case ExportFormat::kVllm: res = write_vllm(spec); break;
    case ExportFormat::kTrtllm: res = write_trtllm(spec); break;
    case ExportFormat::kMegatron: res = write_megatron(spec); break;
    case ExportFormat::kPaddle: res = write_paddle(spec); break;
    case ExportFormat::kJson: res = write_json(spec); break;
  }
  res.format = format;
  return res;
}

std::string export_to_text(const ExportResult& result) {
  if (result.files.size() == 1) return result.files.front().content;
  std::string out;
  for (std::size_t i = 0; i < result.files.size(); ++i) {
    out += (i ? "\n" : "") + std::string("# ==> ") + result.files[i].name + " <==\n" +
           result.files[i].content;
  }
  return out;
}

Status write_export(const ExportResult& result, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir, ec)) {
    return Error{dir.string() + ": cannot create the output folder" +
                 (ec ? ": " + ec.message() : std::string())};
  }
  std::vector<std::filesystem::path> staged;
  auto unstage = [&] {
    for (const auto& p : staged) std::filesystem::remove(p, ec);
  };
  for (const auto& f : result.files) {
    const auto tmp = dir / (".moeplan-staged-" + f.name);
    if (auto s = write_file_atomic(tmp, f.content); !s.ok()) {
      unstage();
      return s;
    }
    staged.push_back(tmp);
  }
  for (std::size_t i = 0; i < staged.size(); ++i) {
    std::filesystem::rename(staged[i], dir / result.files[i].name, ec);
    if (ec) {
      const std::string why = ec.message();
      for (std::size_t k = 0; k < i; ++k) std::filesystem::remove(dir / result.files[k].name, ec);
      unstage();
      return Error{(dir / result.files[i].name).string() + ": cannot be written: " + why};
    }
  }
  return Status::Ok();
}

Result<ExportSpec> parse_layout_file(const std::string& text, const std::string& source) {
  auto parsed = parse_json(text, source);
  if (!parsed) return parsed.error();
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return Error{source + ": expected a JSON object, got " + describe_json(j)};
  JsonReader r(j, source);
  auto format = r.string("format");
  if (!format) return format.error();
  if (*format != kLayoutFormat) {
    return r.error("format",
                   std::string("expected \"") + kLayoutFormat + "\", got \"" + *format + "\"");
  }
  auto version = r.integer("version", kLayoutVersion, kLayoutVersion);
  if (!version) return version.error();
  ExportSpec s;
  auto model = object_at(j, r, "model", "name, source, fingerprint and layer figures");
  if (!model) return model.error();
  JsonReader mr(*model, source, "model.");
  for (auto [key, dst] : {std::pair{"name", &s.model}, std::pair{"source", &s.model_source},
                          std::pair{"fingerprint", &s.model_fingerprint}}) {
    auto v = mr.string(key);
    if (!v) return v.error();
    *dst = *v;
  }
  auto hidden = mr.integer("num_hidden_layers", 1, 1 << 16);
  if (!hidden) return hidden.error();
  s.num_hidden_layers = static_cast<int>(*hidden);
  auto moe_ids = mr.integer_list_or_empty("moe_layer_ids", 0, *hidden - 1);
  if (!moe_ids) return moe_ids.error();
  if (moe_ids->empty()) return mr.error("moe_layer_ids", "expected at least one MoE layer");
  for (std::size_t i = 0; i < moe_ids->size(); ++i) {
    if (i > 0 && (*moe_ids)[i] <= (*moe_ids)[i - 1]) {
      return mr.error("moe_layer_ids", "expected increasing hidden-layer indices");
    }
    s.moe_layer_ids.push_back(static_cast<int>((*moe_ids)[i]));
  }
  auto experts = mr.integer("num_experts", 1, 1 << 20);
  if (!experts) return experts.error();
  s.num_experts = static_cast<int>(*experts);
  auto top_k = mr.integer("top_k", 1, *experts);
  if (!top_k) return top_k.error();
  s.top_k = static_cast<int>(*top_k);

  auto cluster = object_at(j, r, "cluster", "name, source, fingerprint and device");
  if (!cluster) return cluster.error();
  JsonReader cr(*cluster, source, "cluster.");
  for (auto [key, dst] :
       {std::pair{"name", &s.cluster}, std::pair{"source", &s.cluster_source},
        std::pair{"fingerprint", &s.cluster_fingerprint}, std::pair{"device", &s.device}}) {
    auto v = cr.string(key);
    if (!v) return v.error();
    *dst = *v;
  }
  auto gpn = cr.integer("gpus_per_node", 1, 1 << 16);
  if (!gpn) return gpn.error();
  s.gpus_per_node = static_cast<int>(*gpn);

  auto plan = object_at(j, r, "plan", "source, rank and cost source");
  if (!plan) return plan.error();
  JsonReader pr(*plan, source, "plan.");
  for (auto [key, dst] :
       {std::pair{"source", &s.plan_source}, std::pair{"cost_source", &s.cost_source},
        std::pair{"expert_load", &s.load_source}, std::pair{"placement", &s.cost_placement}}) {
    auto v = pr.string(key);
    if (!v) return v.error();
    *dst = *v;
  }
  auto rank = pr.integer("rank", 0, 1 << 20);
  if (!rank) return rank.error();

  auto work = object_at(j, r, "workload", "phase and tokens_per_gpu");
  if (!work) return work.error();
  JsonReader wr(*work, source, "workload.");
  auto phase = wr.string("phase");
  if (!phase) return phase.error();
  const auto ph = parse_phase(*phase);
  if (!ph) return wr.error("phase", "expected prefill or decode, got \"" + *phase + "\"");
  s.workload.phase = *ph;
  auto tokens = wr.integer("tokens_per_gpu", 1, 1 << 30);
  if (!tokens) return tokens.error();
  s.workload.tokens_per_gpu = static_cast<int>(*tokens);

  auto layout = object_at(j, r, "layout",
                          "num_gpus, dp_size, ep_size, tp_size, dispatcher and "
                          "mapping");
  if (!layout) return layout.error();
  auto predicted = object_at(j, r, "predicted", "the layout's predicted costs");
  if (!predicted) return predicted.error();
  // The plan's per-layout reader checks the shape; feed it the layout and its costs together.
  nlohmann::json merged = *predicted;
  for (const auto& [k, v] : layout->items()) merged[k] = v;
  merged["rank"] = std::max<std::int64_t>(*rank, 1);
  nlohmann::json mem = {{"total", predicted->value("memory_gib", nlohmann::json(0.0))},
                        {"capacity", predicted->value("capacity_gib", nlohmann::json(0.0))}};
  merged["memory_gib"] = mem;
  JsonReader lr(*layout, source, "layout.");
  auto gpus = lr.integer("num_gpus", 1, 1 << 20);
  if (!gpus) return gpus.error();
  auto chosen = parse_planned(merged, source, "", static_cast<int>(*gpus));
  if (!chosen) return chosen.error();
  chosen->rank = static_cast<int>(*rank);
  s.chosen = std::move(*chosen);
  if (s.num_experts % s.chosen.layout.ep_size != 0) {
    return lr.error("ep_size", "expected a divisor of model.num_experts (" +
                                   std::to_string(s.num_experts) + ")");
  }

  if (r.has("placement")) {
    const auto& pj = j.at("placement");
    if (!pj.is_object()) return r.error("placement", "expected an object or null");
    JsonReader plr(pj, source, "placement.");
    Placement p;
    auto policy = plr.string("policy");
    if (!policy) return policy.error();
    p.policy = *policy;
    p.num_experts = s.num_experts;
    p.ep_size = s.chosen.layout.ep_size;
    auto slots = plr.integer("num_slots", s.num_experts, 1 << 24);
    if (!slots) return slots.error();
    p.num_slots = static_cast<int>(*slots);
    auto ids = plr.integer_list_or_empty("layer_ids", 0, *hidden - 1);
    if (!ids) return ids.error();
    if (std::vector<int>(ids->begin(), ids->end()) != s.moe_layer_ids) {
      return plr.error("layer_ids", "expected model.moe_layer_ids");
    }
    const auto& map = pj.contains("physical_to_logical_map") ? pj.at("physical_to_logical_map")
                                                             : nlohmann::json();
    if (!map.is_array() || map.size() != s.moe_layer_ids.size()) {
      return plr.error("physical_to_logical_map",
                       "expected one row of num_slots experts per MoE layer (" +
                           std::to_string(s.moe_layer_ids.size()) + ")");
    }
    for (const auto& row : map) {
      if (!row.is_array()) {
        return plr.error("physical_to_logical_map", "expected rows, got " + describe_json(row));
      }
      std::vector<int> v;
      for (const auto& x : row) {
        if (!x.is_number_integer() || x.get<std::int64_t>() < 0 ||
            x.get<std::int64_t>() >= s.num_experts) {
          return plr.error("physical_to_logical_map", "expected expert ids in [0, " +
                                                          std::to_string(s.num_experts) +
                                                          "), got " + describe_json(x));
        }
        v.push_back(x.get<int>());
      }
      p.physical_to_logical.push_back(std::move(v));
    }
    if (auto st = p.validate(); !st.ok()) {
      return plr.error("physical_to_logical_map", st.error().message);
    }
    s.placement = std::move(p);
  }
  return s;
}

Result<ExportSpec> load_layout_file(const std::filesystem::path& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse_layout_file(*text, path.string());
}

}  // namespace moeplan::planner
