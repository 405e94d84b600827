// Checking a plan's choices and building its request.
#include "planner/plan_request.hpp"

#include <algorithm>
#include <tuple>

#include "models/units.hpp"
#include "planner/placement/placement_file.hpp"

namespace moeplan::planner {

namespace {

/// A placement file (`moeplan place --out`) fits one EP size: the plan keeps only those layouts.
Result<PlacementFn> placement_file_fn(const std::string& path, const models::MoeModel& model,
                                      PlanRequest& req) {
  auto file = load_placement_file(path);
  if (!file) return file.error();
  const auto& p = file->result.placement;
  if (p.num_experts != model.num_experts) {
    return Error{path + ": placement has " + std::to_string(p.num_experts) + " experts, expected " +
                 std::to_string(model.num_experts) + " (" + model.name + ")"};
  }
  if (p.num_layers() != 1 && p.num_layers() != model.num_moe_layers()) {
    return Error{path + ": placement has " + std::to_string(p.num_layers()) +
                 " layers, expected 1 or the " + std::to_string(model.num_moe_layers()) +
                 " MoE layers of " + model.name};
  }
  req.only_ep_size = p.ep_size;
  req.redundancy = Redundancy::total(p.num_slots - p.num_experts);
  req.only_ep_rule = "placement file " + path + " is for ep_size " + std::to_string(p.ep_size);
  Placement placement = p;
  placement.policy = path;
  return PlacementFn([placement](int) { return Result<Placement>(placement); });
}

}  // namespace

bool is_placement_file(const std::string& placement) {
  return placement.find('/') != std::string::npos ||
         (placement.size() > 5 && placement.compare(placement.size() - 5, 5, ".json") == 0);
}

Result<Redundancy> parse_plan_redundancy(const std::string& text) {
  auto r = models::parse_redundancy(text, kMaxRedundantPerRank, kMaxRedundantTotal);
  if (!r) return input_error("redundant", " " + r.error().message);
  return r;
}

PolicyFit policy_fit(const models::MoeModel& model, const Cluster& cluster, PlacementPolicy policy,
                     Redundancy redundancy, int tokens_per_gpu) {
  PolicyFit fit;
  fit.policy = policy;
  fit.gpus_per_node = cluster.info().gpus_per_node;
  fit.num_groups = model.router.num_groups;
  fit.redundancy = redundancy;
  fit.pairs_per_step = static_cast<std::int64_t>(tokens_per_gpu) * model.num_experts_per_tok;
  return fit;
}

Result<PlanRequest> make_plan_request(const models::MoeModel& model, const Cluster& cluster,
                                      const PlanChoices& c, ExpertLoad load, bool load_given) {
  PlanRequest req;
  const auto phase = parse_phase(c.phase);
  if (!phase) return input_error("phase", ": expected prefill or decode, got '" + c.phase + "'");
  req.workload.phase = *phase;
  req.workload.tokens_per_gpu =
      *phase == Phase::kPrefill ? kDefaultPrefillTokensPerGpu : kDefaultDecodeBatchPerGpu;
  if (c.tokens_per_gpu) {
    if (*c.tokens_per_gpu <= 0) {
      return input_error("tokens", ": expected a positive number of tokens per GPU, got " +
                                       std::to_string(*c.tokens_per_gpu));
    }
    req.workload.tokens_per_gpu = *c.tokens_per_gpu;
  }
  if (c.num_gpus) {
    if (*c.num_gpus <= 0 || *c.num_gpus > cluster.num_gpus()) {
      return input_error("gpus", ": expected 1.." + std::to_string(cluster.num_gpus()) +
                                     " (the GPUs of cluster '" + cluster.name() + "'), got " +
                                     std::to_string(*c.num_gpus));
    }
    req.num_gpus = *c.num_gpus;
  }
  if (!c.dispatchers.empty()) {
    req.dispatchers.clear();
    for (const auto& name : c.dispatchers) {
      const auto d = parse_dispatcher(name);
      if (!d) {
        return input_error("dispatcher",
                           ": expected padded_a2a, allgather, a2av, deepep_normal or deepep_ll, "
                           "got '" +
                               name + "'");
      }
      if (std::find(req.dispatchers.begin(), req.dispatchers.end(), *d) == req.dispatchers.end()) {
        req.dispatchers.push_back(*d);
      }
    }
  }
  if (c.tbo == "off") {
    req.tbo = {false};
  } else if (c.tbo == "on") {
    req.tbo = {true};
  } else if (c.tbo == "both") {
    req.tbo = {false, true};
  } else {
    return input_error("tbo", ": expected off, on or both, got '" + c.tbo + "'");
  }
  if (c.ll_max_tokens) {
    if (*c.ll_max_tokens <= 0 || *c.ll_max_tokens > kMaxLlTokensPerRank) {
      return input_error("ll-max-tokens", ": expected 1.." + std::to_string(kMaxLlTokensPerRank) +
                                              " tokens per rank, got " +
                                              std::to_string(*c.ll_max_tokens));
    }
    req.workload.ll_max_tokens_per_rank = *c.ll_max_tokens;
  }
  for (const auto& [target, name, phase_needed] :
       {std::tuple{c.ttft_ms, "ttft_ms", Phase::kPrefill},
        std::tuple{c.tpot_ms, "tpot_ms", Phase::kDecode}}) {
    if (!target) continue;
    if (*phase != phase_needed) {
      return input_error(
          name, phase_needed == Phase::kPrefill
                    ? ": a prefill target (time to first token); expected {phase} prefill, or "
                      "{tpot_ms} for decode"
                    : ": a decode target (time per output token); expected {phase} decode, or "
                      "{ttft_ms} for prefill");
    }
    if (!(*target > 0.0 && *target <= 1e7)) {
      return input_error(
          name, ": expected a latency target in (0, 10000000] ms, got " + format_fixed(*target, 3));
    }
    req.step_target_s = *target / 1e3;
  }
  if (!c.isl && (c.osl || c.mem_fraction)) {
    return input_error(c.osl ? "osl" : "mem_fraction",
                       ": needs {isl} (the KV cache is counted for a context of isl + osl "
                       "tokens)");
  }
  if (c.isl) {
    if (*c.isl <= 0) {
      return input_error("isl", ": expected a positive number of input tokens per sequence, got " +
                                    std::to_string(*c.isl));
    }
    const int osl = c.osl.value_or(0);
    if (osl < 0 || (*phase == Phase::kDecode && osl == 0)) {
      return input_error("osl", std::string(": expected ") +
                                    (*phase == Phase::kDecode ? "a positive" : "a non-negative") +
                                    " number of output tokens per sequence" +
                                    (*phase == Phase::kDecode && !c.osl ? " for decode" : "") +
                                    ", got " + std::to_string(osl));
    }
    const std::int64_t context = std::int64_t{*c.isl} + osl;
    if (model.max_context > 0 && context > model.max_context) {
      return input_error("isl", ": a context of " + std::to_string(*c.isl) + " + " +
                                    std::to_string(osl) + " = " + std::to_string(context) +
                                    " tokens exceeds the " + std::to_string(model.max_context) +
                                    " of model '" + model.name + "' (max_position_embeddings in " +
                                    model.source_path + "); lower {isl} or {osl}");
    }
    req.workload.isl = *c.isl;
    req.workload.osl = osl;
    if (c.mem_fraction) {
      if (!(*c.mem_fraction > 0.0 && *c.mem_fraction <= 1.0)) {
        return input_error("mem_fraction",
                           ": expected a share of the GPU's memory in (0, 1], got " +
                               format_fixed(*c.mem_fraction, 3));
      }
      req.workload.mem_fraction = *c.mem_fraction;
    }
  }
  req.attention_dp = c.attention_dp;
  const Redundancy& red = c.redundancy;
  const int max_count =
      red.kind == Redundancy::Kind::kTotal ? kMaxRedundantTotal : kMaxRedundantPerRank;
  if (red.count < 0 || red.count > max_count) {
    return input_error("redundant",
                       ": expected 0.." + std::to_string(max_count) +
                           (red.kind == Redundancy::Kind::kTotal ? " redundant slots in all"
                                                                 : " redundant slots per EP rank") +
                           ", got " + std::to_string(red.count));
  }
  req.load = std::move(load);
  if (is_placement_file(c.placement)) {
    auto fn = placement_file_fn(c.placement, model, req);
    if (!fn) return fn.error();
    req.placement = std::move(*fn);
    return req;
  }
  const auto policy = parse_policy(c.placement);
  if (!policy) {
    return input_error("placement", ": " + policy.error().message + ", or a placement file");
  }
  if (!load_given && (*policy != PlacementPolicy::kContiguous || !red.none())) {
    return input_error(
        "placement", " " + c.placement + " and {redundant} need an expert load ({load} FILE|SPEC)");
  }
  if ((*policy == PlacementPolicy::kContiguous || *policy == PlacementPolicy::kRoundRobin) &&
      !red.none()) {
    return input_error("redundant", " " + red.text() + ": " + c.placement +
                                        " placement has no replicas; expected {placement} eplb "
                                        "or best");
  }
  req.redundancy = red;
  if (*policy != PlacementPolicy::kContiguous) {
    // The same fit everywhere: EP ranks on nodes of the cluster, the model's groups.
    req.placement = policy_placement_fn(
        req.load, policy_fit(model, cluster, *policy, red, req.workload.tokens_per_gpu));
  }
  return req;
}

}  // namespace moeplan::planner
