// Plan: enumerate, cost, rank, recommend; the plan JSON written and read back; layout choice.
#include "planner/plan.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include "models/json_reader.hpp"
#include "models/units.hpp"

namespace moeplan::planner {

namespace {

std::string ms(double seconds) { return format_fixed(seconds * 1e3, 3) + " ms"; }

std::string layout_label(const Layout& l) { return l.full_name(); }

/// Equal step times up to rounding (relative 1e-9): a tie, not a win.
bool same_time(const LayoutCost& a, const LayoutCost& b) {
  return std::abs(a.step_seconds - b.step_seconds) <=
         1e-9 * std::max(a.step_seconds, b.step_seconds);
}

/// "256 sequences of 4096 + 1024 tokens per TP group of 2" (decode) or "the step's 1 prompt of
/// 8192 tokens per GPU" (prefill).
std::string kv_batch_text(const Workload& w, int tp_size) {
  const std::string group =
      tp_size > 1 ? " per TP group of " + std::to_string(tp_size) : " per GPU";
  const auto tokens = static_cast<std::int64_t>(w.tokens_per_gpu) * tp_size;
  if (w.phase == Phase::kDecode) {
    return std::to_string(tokens) + " sequences of " + std::to_string(w.isl) + " + " +
           std::to_string(w.osl) + " tokens" + group;
  }
  const std::int64_t prompts = (tokens + w.isl - 1) / w.isl;
  return "the step's " + std::to_string(prompts) + " prompt" + (prompts == 1 ? "" : "s") + " of " +
         std::to_string(w.isl) + " tokens" + group;
}

// The EP sizes a total redundant count leaves out that are legal without it (a deployment's
// count fits some GPU counts only: DeepSeek's 256 + 32 slots divide over 144 ranks, not 128); ""
// when there are none. Per-rank and automatic counts leave none out.
std::string left_out_by_redundancy(const Plan& plan) {
  if (plan.redundancy.kind != Redundancy::Kind::kTotal || plan.redundancy.count == 0 ||
      plan.num_experts < 1) {
    return {};
  }
  const std::int64_t slots = plan.num_experts + plan.redundancy.count;
  std::string shapes;
  std::vector<int> eps;
  for (const auto& e : plan.excluded) {
    if (!e.legal_without_redundancy) continue;
    Layout l;
    l.dp_size = e.dp_size;
    l.ep_size = e.ep_size;
    l.tp_size = e.tp_size;
    shapes += (shapes.empty() ? "" : ", ") + l.shape_name();
    if (std::find(eps.begin(), eps.end(), e.ep_size) == eps.end()) eps.push_back(e.ep_size);
  }
  if (shapes.empty()) return {};
  std::string sizes;
  for (std::size_t i = 0; i < eps.size(); ++i) {
    sizes += (i == 0 ? "" : i + 1 == eps.size() ? " or " : ", ") + std::to_string(eps[i]);
  }
  return shapes + " left out: " + std::to_string(plan.num_experts) + " experts + " +
         std::to_string(plan.redundancy.count) + " redundant slots (" + std::to_string(slots) +
         ") do not divide evenly over " + sizes + " EP ranks ({redundant} " +
         plan.redundancy.text() +
         "); they are legal without redundant slots, and a count per EP rank ({redundant} N) "
         "or {redundant} auto keeps them";
}

std::vector<std::string> recommend_reasons(const Plan& plan) {
  std::vector<std::string> reasons;
  const auto& layouts = plan.layouts;
  const Workload& w = plan.workload;
  if (plan.recommended < 0 && plan.step_target_s > 0.0) {
    // Layouts that would run but for the latency target: name the fastest.
    const LayoutCost* fastest = nullptr;
    const std::string what = w.phase == Phase::kPrefill ? "TTFT" : "TPOT";
    for (const auto& l : layouts) {
      if (l.meets_target || l.memory.total() > l.memory_limit) continue;
      // Its only reason is the target's (make_plan appends it after any other).
      if (l.infeasible_reason.rfind(what, 0) != 0) continue;
      if (fastest == nullptr || l.step_seconds < fastest->step_seconds) fastest = &l;
    }
    if (fastest != nullptr) {
      const bool prefill = w.phase == Phase::kPrefill;
      reasons.push_back(std::string("no layout meets the ") +
                        (prefill ? "time-to-first-token" : "time-per-output-token") +
                        " target of " + ms(plan.step_target_s) + ": the fastest that fits, " +
                        layout_label(fastest->layout) + ", takes " + ms(fastest->step_seconds) +
                        (prefill ? " for its step's prompts" : " per output token") + "; raise " +
                        (prefill ? "{ttft_ms}" : "{tpot_ms}") + ", lower the " +
                        (prefill ? "tokens per step" : "batch") +
                        " ({tokens}), or use more GPUs ({gpus})");
      return reasons;
    }
  }
  if (plan.recommended < 0) {
    const LayoutCost* smallest = layouts.empty() ? nullptr : &layouts.front();
    for (const auto& l : layouts) {
      if (l.memory.total() < smallest->memory.total()) smallest = &l;
    }
    if (smallest != nullptr && w.counts_kv() &&
        smallest->memory.total() - smallest->memory.kv_cache <= smallest->memory_limit) {
      // The weights fit; the batch's KV cache does not.
      reasons.push_back(
          "no layout holds the batch's KV cache in " + format_fixed(w.mem_fraction, 2) +
          " of the " + plan.device + "'s " + format_bytes(smallest->memory_capacity) +
          " per GPU (" + format_bytes(smallest->memory_limit) + "): the smallest, " +
          smallest->layout.shape_name() + ", needs " + format_bytes(smallest->memory.total()) +
          ", " + format_bytes(smallest->memory.kv_cache) + " of it KV cache for " +
          kv_batch_text(w, smallest->layout.tp_size) + ", and holds at most " +
          format_fixed(smallest->max_sequences_per_gpu, 1) + " sequences of " +
          std::to_string(w.isl + w.osl) + " tokens per GPU; lower the batch ({tokens}), " +
          "the context ({isl}, {osl}), raise {mem_fraction}, or use more GPUs ({gpus})");
      return reasons;
    }
    reasons.push_back("no layout fits in " +
                      (w.counts_kv() ? format_fixed(w.mem_fraction, 2) + " of the " : "the ") +
                      plan.device + "'s " +
                      format_bytes(smallest == nullptr ? 0.0 : smallest->memory_capacity) +
                      " per GPU: the smallest needs " +
                      format_bytes(smallest == nullptr ? 0.0 : smallest->memory.total()) +
                      "; use more GPUs ({gpus}) or a larger cluster");
    return reasons;
  }
  const LayoutCost& best = layouts[static_cast<std::size_t>(plan.recommended)];
  std::string r = "fastest feasible layout: " + ms(best.step_seconds) +
                  " per step of the whole model (" + ms(best.moe_seconds) + " in its " +
                  std::to_string(plan.num_moe_layers) + " MoE layers), " +
                  format_fixed(best.tokens_per_s_per_gpu, 0) + " tokens/s/GPU" +
                  (w.phase == Phase::kDecode
                       ? ", " + format_fixed(best.tokens_per_s_per_user, 1) + " tokens/s/user"
                       : std::string());
  if (layouts.size() > 1 && layouts[1].feasible) {
    const double gain = layouts[1].step_seconds / best.step_seconds - 1.0;
    r += same_time(best, layouts[1]) ? "; tied with " + layout_label(layouts[1].layout) +
                                           " (listed first by enumeration order)"
                                     : "; " + format_fixed(gain * 100.0, 1) + "% ahead of " +
                                           layout_label(layouts[1].layout);
  }
  reasons.push_back(r);
  const LayerCost& c = best.per_layer;
  const auto top = std::max_element(
      std::begin(kLayerCostParts), std::end(kLayerCostParts),
      [&c](const auto& a, const auto& b) { return (c.*a.second).seconds < (c.*b.second).seconds; });
  const double top_seconds = (c.*top->second).seconds;
  reasons.push_back("largest part of its layer: " + std::string(top->first) + " " +
                    ms(top_seconds) + " of " + ms(c.total()) + " (" +
                    format_fixed(100.0 * top_seconds / c.total(), 0) + "%)");
  std::string others;
  bool all_slower = true;
  for (const auto& l : layouts) {
    if (l.layout.ep_size == best.layout.ep_size && l.layout.tp_size == best.layout.tp_size &&
        l.layout.dp_size == best.layout.dp_size && l.layout.mapping == best.layout.mapping &&
        l.layout.tbo == best.layout.tbo && l.layout.dispatcher != best.layout.dispatcher) {
      others += (others.empty() ? "" : ", ") + dispatcher_name(l.layout.dispatcher) + " " +
                ms(l.step_seconds) + (l.feasible ? "" : " (infeasible)");
      all_slower = all_slower && !same_time(best, l);
    }
  }
  if (!others.empty()) {
    reasons.push_back("dispatcher " + dispatcher_name(best.layout.dispatcher) +
                      (all_slower ? " beats" : " is at least as fast as") +
                      " the others on the same layout: " + others + " per step");
  }
  for (const auto& l : layouts) {
    if (l.layout.ep_size == best.layout.ep_size && l.layout.tp_size == best.layout.tp_size &&
        l.layout.dp_size == best.layout.dp_size && l.layout.dispatcher == best.layout.dispatcher &&
        l.layout.tbo == best.layout.tbo && l.layout.mapping != best.layout.mapping) {
      reasons.push_back(same_time(best, l) ? "rank mappings " + mapping_name(best.layout.mapping) +
                                                 " and " + mapping_name(l.layout.mapping) +
                                                 " cost the same here (their groups use the "
                                                 "same kinds of links)"
                                           : "rank mapping " + mapping_name(best.layout.mapping) +
                                                 " beats " + mapping_name(l.layout.mapping) + " (" +
                                                 ms(l.step_seconds) + " per step)");
    }
  }
  for (const auto& l : layouts) {
    if (l.layout.ep_size == best.layout.ep_size && l.layout.tp_size == best.layout.tp_size &&
        l.layout.dp_size == best.layout.dp_size && l.layout.dispatcher == best.layout.dispatcher &&
        l.layout.mapping == best.layout.mapping && l.layout.tbo != best.layout.tbo) {
      reasons.push_back(std::string(best.layout.tbo ? "two-batch overlap hides " +
                                                          ms(best.per_layer.overlap_hidden) +
                                                          " per layer; without it "
                                                    : "without two-batch overlap; with it ") +
                        ms(l.step_seconds) + " per step");
    }
  }
  if (best.imbalance > 1.0 + 1e-9 || best.expert_rows > best.useful_rows * (1.0 + 1e-9)) {
    reasons.push_back("its slowest rank computes " + format_fixed(best.expert_rows, 0) +
                      " rows for " + format_fixed(best.useful_rows, 0) + " routed pairs (load " +
                      "imbalance " + format_fixed(best.imbalance, 2) + ")");
  }
  if (w.counts_kv()) {
    reasons.push_back(
        "memory " + format_bytes(best.memory.total()) + " of " + format_bytes(best.memory_limit) +
        " per GPU (" + format_fixed(w.mem_fraction, 2) + " of " +
        format_bytes(best.memory_capacity) + "), " + format_bytes(best.memory.kv_cache) +
        " of it KV cache for " + kv_batch_text(w, best.layout.tp_size) + "; room for " +
        format_fixed(best.max_sequences_per_gpu, 1) + " sequences of " +
        std::to_string(w.isl + w.osl) + " tokens per GPU");
  } else {
    reasons.push_back("memory " + format_bytes(best.memory.total()) + " of " +
                      format_bytes(best.memory_capacity) + " per GPU");
  }
  const auto cannot_run = std::count_if(layouts.begin(), layouts.end(), [](const LayoutCost& l) {
    return !l.infeasible_reason.empty();
  });
  const auto infeasible = std::count_if(layouts.begin(), layouts.end(), [](const LayoutCost& l) {
    return !l.feasible && l.infeasible_reason.empty();
  });
  if (infeasible > 0) {
    reasons.push_back(std::to_string(infeasible) + " of " + std::to_string(layouts.size()) +
                      " legal layouts do not fit in memory" +
                      (w.counts_kv() ? " (KV cache included)" : ""));
  }
  if (cannot_run > 0) {
    reasons.push_back(std::to_string(cannot_run) + " of " + std::to_string(layouts.size()) +
                      " legal layouts cannot run their dispatcher (e.g. " +
                      std::find_if(layouts.begin(), layouts.end(),
                                   [](const LayoutCost& l) { return !l.infeasible_reason.empty(); })
                          ->infeasible_reason +
                      ")");
  }
  if (auto left_out = left_out_by_redundancy(plan); !left_out.empty()) {
    reasons.push_back(left_out);
  }
  return reasons;
}

nlohmann::json cost_item_json(const LayerCost& c) {
  nlohmann::json ms_obj = nlohmann::json::object();
  nlohmann::json src = nlohmann::json::object();
  for (const auto& [name, item] : kLayerCostParts) {
    ms_obj[name] = (c.*item).seconds * 1e3;
    src[name] = (c.*item).source;
  }
  if (c.overlap_hidden > 0.0) ms_obj["overlap_hidden"] = c.overlap_hidden * 1e3;
  ms_obj["total"] = c.total() * 1e3;
  return {{"ms", ms_obj}, {"source", src}};
}

/// When no layout fits in memory only because of the redundant slots asked for (some layout would
/// fit with the fewest slots its EP size allows, ⌈E / ep⌉ per rank): the error naming the most
/// redundancy that fits on the layout with the most room. Nothing otherwise.
std::optional<Error> redundancy_over_memory(const Plan& plan, const models::MoeModel& model) {
  const Redundancy& red = plan.redundancy;
  if (red.none() || red.kind == Redundancy::Kind::kAuto) return std::nullopt;
  // Per layout: the most redundancy (in the user's units) whose slots fit next to the rest.
  const LayoutCost* roomiest = nullptr;
  std::int64_t most = -1;
  for (const LayoutCost& c : plan.layouts) {
    const int ep = c.layout.ep_size;
    const int per_rank = c.num_slots / ep;
    if (per_rank <= 0 || !(c.memory.experts > 0.0)) continue;
    const double per_slot = c.memory.experts / per_rank;
    const auto fit_slots = static_cast<std::int64_t>(
        std::floor((c.memory_limit - (c.memory.total() - c.memory.experts)) / per_slot));
    const std::int64_t allowed = red.kind == Redundancy::Kind::kPerRank
                                     ? fit_slots - (model.num_experts + ep - 1) / ep
                                     : fit_slots * ep - model.num_experts;
    if (allowed > most) {
      most = allowed;
      roomiest = &c;
    }
  }
  if (roomiest == nullptr || most < 0) return std::nullopt;  // too big even without replicas
  const int ep = roomiest->layout.ep_size;
  const std::string limit = red.kind == Redundancy::Kind::kPerRank
                                ? std::to_string(most) + " per EP rank"
                                : "total:" + std::to_string(most);
  return input_error(
      "redundant",
      " " + red.text() + ": " + std::to_string(roomiest->num_slots - model.num_experts) +
          " redundant expert slots (" + std::to_string(roomiest->num_slots / ep) +
          " slots per GPU) need " + format_bytes(roomiest->memory.total()) + " per GPU on " +
          roomiest->layout.shape_name() + " (" + format_bytes(roomiest->memory.experts) +
          " of it expert weights), more than the " + plan.device + "'s " +
          format_bytes(roomiest->memory_limit) +
          (roomiest->memory_limit < roomiest->memory_capacity
               ? " (" + format_fixed(plan.workload.mem_fraction, 2) + " of " +
                     format_bytes(roomiest->memory_capacity) + ")"
               : std::string()) +
          "; expected at most " + limit + " there");
}

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
  p.num_slots = c.num_slots;
  return p;
}

Result<nlohmann::json> object_at(const nlohmann::json& j, const JsonReader& r,
                                 const std::string& key, const std::string& what) {
  if (!r.has(key) || !j.at(key).is_object()) return r.error(key, "expected an object with " + what);
  return j.at(key);
}

/// One entry of `layouts` (docs/PLAN_SCHEMA.md) on a plan of `num_gpus` GPUs.
Result<PlannedLayout> parse_planned(const nlohmann::json& l, const std::string& source,
                                    const std::string& prefix, int num_gpus) {
  JsonReader r(l, source, prefix);
  PlannedLayout p;
  auto rank = r.integer("rank", 1, 1 << 20);
  if (!rank) return rank.error();
  p.rank = static_cast<int>(*rank);
  auto layout = parse_layout_keys(l, source, prefix, num_gpus);
  if (!layout) return layout.error();
  p.layout = *layout;
  auto figures = parse_predicted_figures(l, source, prefix);
  if (!figures) return figures.error();
  p.feasible = figures->feasible;
  p.per_layer = std::move(figures->per_layer);
  p.step_seconds = figures->step_seconds;
  p.tokens_per_s_per_gpu = figures->tokens_per_s_per_gpu;
  auto slots = r.integer_or("num_slots", 0, 0, 1 << 24);
  if (!slots) return slots.error();
  p.num_slots = static_cast<int>(*slots);
  if (p.num_slots > 0 && p.num_slots % p.layout.ep_size != 0) {
    return r.error("num_slots", "expected a multiple of ep_size (" +
                                    std::to_string(p.layout.ep_size) + "), got " +
                                    std::to_string(p.num_slots));
  }
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

}  // namespace

Result<Plan> make_plan(const models::MoeModel& model, const Cluster& cluster,
                       const CostSource& costs, const PlanRequest& request) {
  const int n = request.num_gpus == 0 ? cluster.num_gpus() : request.num_gpus;
  if (n < 1 || n > cluster.num_gpus()) {
    return Error{"GPU count: expected 1.." + std::to_string(cluster.num_gpus()) + " (cluster '" +
                 cluster.name() + "'), got " + std::to_string(n)};
  }
  if (request.workload.tokens_per_gpu <= 0) {
    return Error{"tokens per GPU: expected a positive count, got " +
                 std::to_string(request.workload.tokens_per_gpu)};
  }
  if (request.dispatchers.empty()) return Error{"dispatchers: expected at least one"};
  Plan plan;
  plan.model = model.name;
  plan.model_source = model.source_path;
  plan.weights = model.weights;
  plan.cluster = cluster.name();
  plan.cluster_source = cluster.info().source;
  plan.device = cluster.device().name;
  plan.cost_source = costs.name();
  plan.workload = request.workload;
  plan.num_gpus = n;
  plan.num_moe_layers = model.num_moe_layers();
  plan.num_experts = static_cast<int>(model.num_experts);
  plan.attention_dp = request.attention_dp;
  plan.redundancy = request.redundancy;

  EnumerateOptions opt;
  opt.num_gpus = n;
  opt.attention_dp = request.attention_dp;
  opt.dispatchers = request.dispatchers;
  opt.redundancy = request.redundancy;
  opt.gpus_per_node = cluster.info().gpus_per_node;
  opt.tbo = request.tbo.empty() ? std::vector<bool>{false} : request.tbo;
  Enumeration en = enumerate_layouts(model, opt);
  plan.excluded = std::move(en.excluded);
  if (en.layouts.empty()) {
    std::string msg =
        "model '" + model.name + "' has no legal layout on " + std::to_string(n) + " GPUs: ";
    for (std::size_t i = 0; i < plan.excluded.size() && i < 3; ++i) {
      const auto& e = plan.excluded[i];
      msg += (i == 0 ? "" : "; ") + std::string("ep") + std::to_string(e.ep_size) + "×tp" +
             std::to_string(e.tp_size) + " breaks " + e.rule;
    }
    if (plan.excluded.size() > 3) {
      msg += "; and " + std::to_string(plan.excluded.size() - 3) + " more";
    }
    for (int m = n - 1; m >= 1; --m) {
      EnumerateOptions smaller = opt;
      smaller.num_gpus = m;
      if (!enumerate_layouts(model, smaller).layouts.empty()) {
        msg += " (the largest GPU count below it with a legal layout is " + std::to_string(m) +
               ": {gpus} " + std::to_string(m) + ")";
        break;
      }
    }
    return Error{msg};
  }

  const ExpertLoad load = request.load.num_layers() > 0
                              ? request.load
                              : ExpertLoad::uniform(model.num_moe_layers(), model.num_experts);
  plan.load_source = load.source;
  const CostContext ctx{model, cluster, costs, request.workload, load, request.placement};
  if (request.only_ep_size > 0) {
    std::vector<Layout> kept;
    for (const Layout& l : en.layouts) {
      if (l.ep_size == request.only_ep_size) {
        kept.push_back(l);
        continue;
      }
      const bool listed =
          std::any_of(plan.excluded.begin(), plan.excluded.end(), [&](const auto& e) {
            return e.dp_size == l.dp_size && e.ep_size == l.ep_size && e.tp_size == l.tp_size;
          });
      if (!listed)
        plan.excluded.push_back(
            {l.num_gpus, l.dp_size, l.ep_size, l.tp_size, request.only_ep_rule});
    }
    if (kept.empty()) {
      return Error{"no legal layout of '" + model.name + "' on " + std::to_string(n) +
                   " GPUs has ep_size " + std::to_string(request.only_ep_size) + " (" +
                   request.only_ep_rule + ")"};
    }
    en.layouts = std::move(kept);
  }
  plan.placement_policy = "contiguous";
  if (request.placement) {
    auto p = request.placement(en.layouts.front().ep_size);
    if (!p) return p.error();
    plan.placement_policy = p->policy;
  }
  plan.layouts.reserve(en.layouts.size());
  plan.step_target_s = request.step_target_s;
  for (const Layout& l : en.layouts) {
    auto c = cost_layout(ctx, l);
    if (!c) return c.error();
    if (request.step_target_s > 0.0 && c->step_seconds > request.step_target_s) {
      c->meets_target = false;
      c->feasible = false;
      const std::string what = request.workload.phase == Phase::kPrefill ? "TTFT" : "TPOT";
      const std::string miss = what + " " + ms(c->step_seconds) + " is above the " +
                               ms(request.step_target_s) + " target";
      c->infeasible_reason =
          c->infeasible_reason.empty() ? miss : c->infeasible_reason + "; " + miss;
    }
    plan.layouts.push_back(std::move(*c));
  }
  std::stable_sort(plan.layouts.begin(), plan.layouts.end(),
                   [](const LayoutCost& a, const LayoutCost& b) {
                     if (a.feasible != b.feasible) return a.feasible;
                     if (a.step_seconds != b.step_seconds) return a.step_seconds < b.step_seconds;
                     return a.memory.total() < b.memory.total();
                   });
  plan.recommended = plan.layouts.front().feasible ? 0 : -1;
  if (plan.recommended < 0) {
    if (auto too_many = redundancy_over_memory(plan, model)) return *too_many;
  }
  plan.reasons = recommend_reasons(plan);
  return plan;
}

std::vector<int> default_pareto_batches() {
  std::vector<int> out;
  for (int b = 1; b <= 1024; b *= 2) out.push_back(b);
  return out;
}

Result<std::vector<int>> sweep_batches(std::vector<int> given) {
  if (given.empty()) return default_pareto_batches();
  for (const int b : given) {
    if (b < 1 || b > (1 << 20)) {
      return input_error(
          "batches", ": expected sequences per GPU from 1 to 1048576, got " + std::to_string(b));
    }
  }
  std::sort(given.begin(), given.end());
  given.erase(std::unique(given.begin(), given.end()), given.end());
  return given;
}

Result<std::vector<ParetoPoint>> decode_pareto(const models::MoeModel& model,
                                               const Cluster& cluster, const CostSource& costs,
                                               PlanRequest request,
                                               const std::vector<int>& batches) {
  if (request.workload.phase != Phase::kDecode) {
    return input_error("pareto",
                       ": the front of tokens/s/user against tokens/s/GPU is over "
                       "decode batches; expected {phase} decode");
  }
  std::vector<ParetoPoint> points;
  for (const int b : batches) {
    request.workload.tokens_per_gpu = b;
    auto plan = make_plan(model, cluster, costs, request);
    if (!plan) return plan.error();
    if (plan->recommended < 0) continue;
    ParetoPoint p;
    p.batch_per_gpu = b;
    p.best = plan->layouts[static_cast<std::size_t>(plan->recommended)];
    p.tokens_per_s_per_user = p.best.tokens_per_s_per_user;
    p.tokens_per_s_per_gpu = p.best.tokens_per_s_per_gpu;
    points.push_back(std::move(p));
  }
  mark_pareto_front(points);
  return points;
}

void mark_pareto_front(std::vector<ParetoPoint>& points) {
  for (auto& p : points) {
    p.on_front = std::none_of(points.begin(), points.end(), [&p](const ParetoPoint& q) {
      return q.tokens_per_s_per_user >= p.tokens_per_s_per_user &&
             q.tokens_per_s_per_gpu >= p.tokens_per_s_per_gpu &&
             (q.tokens_per_s_per_user > p.tokens_per_s_per_user ||
              q.tokens_per_s_per_gpu > p.tokens_per_s_per_gpu);
    });
  }
}

nlohmann::json pareto_to_json(const std::vector<ParetoPoint>& points) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : points) {
    out.push_back({{"batch_per_gpu", p.batch_per_gpu},
                   {"dp_size", p.best.layout.dp_size},
                   {"ep_size", p.best.layout.ep_size},
                   {"tp_size", p.best.layout.tp_size},
                   {"dispatcher", dispatcher_name(p.best.layout.dispatcher)},
                   {"mapping", mapping_name(p.best.layout.mapping)},
                   {"tpot_ms", p.best.step_seconds * 1e3},
                   {"tokens_per_s_per_user", p.tokens_per_s_per_user},
                   {"tokens_per_s_per_gpu", p.tokens_per_s_per_gpu},
                   {"on_front", p.on_front}});
  }
  return out;
}

std::vector<std::string> rendered_reasons(const std::vector<std::string>& reasons) {
  std::vector<std::string> out;
  out.reserve(reasons.size());
  for (const auto& r : reasons) out.push_back(render_flags(r));
  return out;
}

nlohmann::json plan_to_json(const Plan& plan, int top, bool include_excluded) {
  nlohmann::json j;
  j["schema_version"] = 1;
  j["model"] = {
      {"name", plan.model}, {"source", plan.model_source}, {"weights", plan.weights.to_json()}};
  j["cluster"] = {{"name", plan.cluster}, {"source", plan.cluster_source}, {"device", plan.device}};
  j["num_gpus"] = plan.num_gpus;
  j["num_moe_layers"] = plan.num_moe_layers;
  j["attention_dp"] = plan.attention_dp;
  j["workload"] = {{"phase", phase_name(plan.workload.phase)},
                   {"tokens_per_gpu", plan.workload.tokens_per_gpu}};
  if (plan.workload.counts_kv()) {
    j["workload"]["isl"] = plan.workload.isl;
    j["workload"]["osl"] = plan.workload.osl;
    j["workload"]["mem_fraction"] = plan.workload.mem_fraction;
  }
  j["workload"]["attention_context"] = attention_context(plan.workload);
  if (plan.step_target_s > 0.0) {
    j["workload"][plan.workload.phase == Phase::kPrefill ? "ttft_target_ms" : "tpot_target_ms"] =
        plan.step_target_s * 1e3;
  }
  j["cost_source"] = plan.cost_source;
  j["expert_load"] = plan.load_source;
  j["placement"] = plan.placement_policy;
  if (!plan.redundancy.none()) j["redundant"] = plan.redundancy.text();
  nlohmann::json layouts = nlohmann::json::array();
  const std::size_t count =
      top > 0 ? std::min(plan.layouts.size(), static_cast<std::size_t>(top)) : plan.layouts.size();
  for (std::size_t i = 0; i < count; ++i) {
    const LayoutCost& c = plan.layouts[i];
    nlohmann::json l;
    l["rank"] = i + 1;
    l["legal"] = true;
    l["dp_size"] = c.layout.dp_size;
    l["ep_size"] = c.layout.ep_size;
    l["tp_size"] = c.layout.tp_size;
    l["dispatcher"] = dispatcher_name(c.layout.dispatcher);
    l["mapping"] = mapping_name(c.layout.mapping);
    if (!plan.redundancy.none()) l["num_slots"] = c.num_slots;
    if (c.layout.tbo) l["two_batch_overlap"] = true;
    l["feasible"] = c.feasible;
    if (plan.step_target_s > 0.0) l["meets_target"] = c.meets_target;
    if (!c.infeasible_reason.empty()) l["infeasible_reason"] = render_flags(c.infeasible_reason);
    const auto items = cost_item_json(c.per_layer);
    l["layer_ms"] = items.at("ms");
    l["sources"] = items.at("source");
    l["step_ms"] = c.step_seconds * 1e3;
    l["moe_ms"] = c.moe_seconds * 1e3;
    l["attention_ms"] = {{"ms", c.dense.attention.seconds * 1e3},
                         {"source", c.dense.attention.source}};
    l["dense_mlp_ms"] = {{"ms", c.dense.dense_mlp.seconds * 1e3},
                         {"source", c.dense.dense_mlp.source}};
    l["head_ms"] = {{"ms", c.dense.head.seconds * 1e3}, {"source", c.dense.head.source}};
    l[plan.workload.phase == Phase::kPrefill ? "ttft_ms" : "tpot_ms"] = c.step_seconds * 1e3;
    l["tokens_per_s_per_gpu"] = c.tokens_per_s_per_gpu;
    if (plan.workload.phase == Phase::kDecode) {
      l["tokens_per_s_per_user"] = c.tokens_per_s_per_user;
    }
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    l["memory_gib"] = {{"experts", c.memory.experts / kGiB},
                       {"shared", c.memory.shared / kGiB},
                       {"dense", c.memory.dense / kGiB},
                       {"buffers", c.memory.buffers / kGiB},
                       {"activations", c.memory.activations / kGiB},
                       {"total", c.memory.total() / kGiB},
                       {"capacity", c.memory_capacity / kGiB}};
    if (plan.workload.counts_kv()) {
      l["memory_gib"]["kv_cache"] = c.memory.kv_cache / kGiB;
      l["memory_gib"]["limit"] = c.memory_limit / kGiB;
      l["max_sequences_per_gpu"] = c.max_sequences_per_gpu;
    }
    l["balance"] = {
        {"imbalance", c.imbalance}, {"expert_rows", c.expert_rows}, {"useful_rows", c.useful_rows}};
    if (!c.layers.empty()) {
      nlohmann::json per_layer = nlohmann::json::array();
      for (std::size_t li = 0; li < c.layers.size(); ++li) {
        per_layer.push_back({{"layer_ms", c.layers[li].total() * 1e3},
                             {"experts_ms", c.layers[li].experts.seconds * 1e3},
                             {"imbalance", c.layer_imbalance[li]}});
      }
      l["per_layer"] = per_layer;
    }
    layouts.push_back(std::move(l));
  }
  if (include_excluded) {
    for (const auto& e : plan.excluded) {
      layouts.push_back({{"legal", false},
                         {"dp_size", e.dp_size},
                         {"ep_size", e.ep_size},
                         {"tp_size", e.tp_size},
                         {"dispatcher", "any"},
                         {"mapping", "any"},
                         {"feasible", false},
                         {"rule", e.rule}});
    }
  }
  j["layouts"] = std::move(layouts);
  j["recommendation"] = {{"rank", plan.recommended < 0 ? nlohmann::json(nullptr)
                                                       : nlohmann::json(plan.recommended + 1)},
                         {"reasons", rendered_reasons(plan.reasons)}};
  return j;
}

Result<Layout> parse_layout_keys(const nlohmann::json& object, const std::string& source,
                                 const std::string& prefix, int num_gpus) {
  JsonReader r(object, source, prefix);
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
  Layout l;
  l.num_gpus = num_gpus;
  l.dp_size = static_cast<int>(*dp);
  l.ep_size = static_cast<int>(*ep);
  l.tp_size = static_cast<int>(*tp);
  auto disp = r.string("dispatcher");
  if (!disp) return disp.error();
  const auto d = parse_dispatcher(*disp);
  if (!d) {
    return r.error(
        "dispatcher",
        "expected padded_a2a, allgather, a2av, deepep_normal or deepep_ll, got \"" + *disp + "\"");
  }
  l.dispatcher = *d;
  auto tbo = r.boolean_or("two_batch_overlap", false);
  if (!tbo) return tbo.error();
  l.tbo = *tbo;
  auto map = r.string("mapping");
  if (!map) return map.error();
  const auto m = models::parse_mapping(*map);
  if (!m) return r.error("mapping", "expected tp_innermost or ep_innermost, got \"" + *map + "\"");
  l.mapping = *m;
  return l;
}

Result<PredictedFigures> parse_predicted_figures(const nlohmann::json& object,
                                                 const std::string& source,
                                                 const std::string& prefix) {
  JsonReader r(object, source, prefix);
  PredictedFigures f;
  auto feasible = r.boolean_or("feasible", true);
  if (!feasible) return feasible.error();
  f.feasible = *feasible;
  auto costs = parse_layer_ms(object, source, prefix);
  if (!costs) return costs.error();
  f.per_layer = std::move(*costs);
  auto step = r.number("step_ms", 0.0, 1e15);
  if (!step) return step.error();
  f.step_seconds = *step / 1e3;
  auto tps = r.number_or("tokens_per_s_per_gpu", 0.0, 0.0, 1e15);
  if (!tps) return tps.error();
  f.tokens_per_s_per_gpu = *tps;
  return f;
}

Result<LayerCost> parse_layer_ms(const nlohmann::json& object, const std::string& source,
                                 const std::string& prefix) {
  JsonReader r(object, source, prefix);
  if (!r.has("layer_ms") || !object.at("layer_ms").is_object()) {
    return r.error("layer_ms", "expected an object of per-part milliseconds");
  }
  JsonReader lm(object.at("layer_ms"), source, prefix + "layer_ms.");
  const nlohmann::json none = nlohmann::json::object();
  const nlohmann::json& src =
      object.contains("sources") && object.at("sources").is_object() ? object.at("sources") : none;
  JsonReader sr(src, source, prefix + "sources.");
  LayerCost c;
  for (const auto& [name, item] : kLayerCostParts) {
    auto v = lm.number(name, 0.0, 1e12);
    if (!v) return v.error();
    (c.*item).seconds = *v / 1e3;
    auto s = sr.string_or(name, "");
    if (!s) return s.error();
    (c.*item).source = *s;
  }
  auto hidden = lm.number_or("overlap_hidden", 0.0, 0.0, 1e12);
  if (!hidden) return hidden.error();
  c.overlap_hidden = *hidden / 1e3;
  return c;
}

std::string PlannedLayout::describe() const {
  return "rank " + std::to_string(rank) + ": " + layout.full_name() + ", " + ms(step_seconds) +
         " per step";
}

PlanSummary summarize_plan(const Plan& plan) {
  PlanSummary s;
  s.model = plan.model;
  s.model_source = plan.model_source;
  s.weights = plan.weights.name();
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
  if (mr.has("weights")) {
    const nlohmann::json& w = model->at("weights");
    if (!w.is_object()) return mr.error("weights", "expected an object with the format's name");
    const JsonReader wr(w, source, "model.weights.");
    auto wname = wr.string("name");
    if (!wname) return wname.error();
    s.weights = *wname;
  }
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
  auto isl = wr.integer_or("isl", 0, 1, 1 << 30);
  if (!isl) return isl.error();
  s.workload.isl = static_cast<int>(*isl);
  auto osl = wr.integer_or("osl", 0, 0, 1 << 30);
  if (!osl) return osl.error();
  s.workload.osl = static_cast<int>(*osl);
  auto fraction = wr.number_or("mem_fraction", kDefaultMemFraction, 1e-6, 1.0);
  if (!fraction) return fraction.error();
  s.workload.mem_fraction = *fraction;
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
    return plan.layouts[static_cast<std::size_t>(plan.recommended >= 0 ? plan.recommended : 0)];
  }
  auto all_digits = [](const std::string& t) {
    return std::all_of(t.begin(), t.end(),
                       [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
  };
  if (all_digits(selector) && selector.size() < 8) {
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
      if (cur.empty() || cur.size() > 7 || !all_digits(cur)) {
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

}  // namespace moeplan::planner
