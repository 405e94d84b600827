// Serving plans: disaggregated prefill/decode pools against aggregated serving.
#include "planner/serving.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>

#include <boost/math/special_functions/gamma.hpp>

#include "models/units.hpp"
#include "planner/costs/cost_model.hpp"

namespace moeplan::planner {

namespace {

/// Plans of one request shape, made once each: (phase, GPUs, tokens per GPU) → plan or the
/// reason it has none.
class PlanCache {
 public:
  PlanCache(const models::MoeModel& model, const Cluster& cluster, const CostSource& costs,
            const PlanRequest& base)
      : model_(model), cluster_(cluster), costs_(costs), base_(base) {}

  /// The plan, or null with `why` set when the instance cannot be planned.
  const Plan* get(Phase phase, int gpus, int tokens_per_gpu, std::string* why) {
    const auto key = std::make_tuple(phase == Phase::kDecode, gpus, tokens_per_gpu);
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      PlanRequest r = base_;
      r.workload.phase = phase;
      r.workload.tokens_per_gpu = tokens_per_gpu;
      r.num_gpus = gpus;
      r.step_target_s = 0.0;  // the serving targets are checked here (TTFT with the KV transfer)
      ++made_;
      it = plans_.emplace(key, make_plan(model_, cluster_, costs_, r)).first;
    }
    if (!it->second) {
      if (why != nullptr) *why = it->second.error().message;
      return nullptr;
    }
    return &*it->second;
  }
  int made() const { return made_; }

 private:
  const models::MoeModel& model_;
  const Cluster& cluster_;
  const CostSource& costs_;
  PlanRequest base_;
  std::map<std::tuple<bool, int, int>, Result<Plan>> plans_;
  int made_ = 0;
};

const LayoutCost* recommended(const Plan* p) {
  if (p == nullptr || p->recommended < 0) return nullptr;
  return &p->layouts[static_cast<std::size_t>(p->recommended)];
}

/// The KV cache of one request sent from prefill instance GPUs [0, p) to the decode instance
/// starting at GPU `decode_first` (d GPUs): prefill GPU i sends its 1/p share to decode GPU
/// i mod d, routed on the cluster. A step of n prompts sends n times the bytes on the same
/// paths: n · (the busiest link's time) + the longest path latency.
struct KvRoute {
  double busiest_s_per_request = 0.0;
  double latency_s = 0.0;
  double seconds(int prompts) const {
    return busiest_s_per_request > 0.0 ? prompts * busiest_s_per_request + latency_s : 0.0;
  }
};
KvRoute kv_route(const Cluster& cluster, double bytes, int p, int decode_first, int d) {
  if (!(bytes > 0.0)) return {};
  std::vector<Flow> flows;
  for (int i = 0; i < p; ++i) flows.push_back({i, decode_first + i % d, bytes / p});
  const LinkLoad load = cluster.route(flows);
  return {load.busiest_seconds, load.max_path_latency};
}

/// A request's mean latency: its TTFT and the osl − 1 tokens after the first.
template <class Deployment>
double request_seconds(const Deployment& s, int osl) {
  return s.ttft_s + (osl - 1) * s.tpot_s;
}

/// The request latency without the waits that are unbounded (a pool at its capacity): what
/// still tells two deployments at their capacity apart.
double bounded_seconds(const DisaggServing& s, int osl) {
  const auto finite = [](double v) { return std::isfinite(v) ? v : 0.0; };
  return s.prefill.step_s + s.kv_transfer_s + finite(s.ttft_wait_s) + finite(s.decode_slot_wait_s) +
         (osl - 1) * s.tpot_s;
}
double bounded_seconds(const AggServing& s, int osl) {
  const auto finite = [](double v) { return std::isfinite(v) ? v : 0.0; };
  return std::max(s.prefill_s, s.mixed_pass_s) + finite(s.ttft_wait_s) + finite(s.slot_wait_s) +
         (osl - 1) * s.tpot_s;
}

/// Is `s` a better deployment than `cur`? For an offered rate: fewer GPUs, then the shorter
/// request latency; otherwise: more requests/s, then fewer GPUs, then the shorter latency (its
/// bounded part where both are unbounded).
template <class Deployment>
bool better(bool offered, int osl, const Deployment& s, const std::optional<Deployment>& cur) {
  if (!cur) return true;
  if (!offered) {
    if (s.requests_per_s > cur->requests_per_s * (1.0 + 1e-12)) return true;
    if (s.requests_per_s < cur->requests_per_s * (1.0 - 1e-12)) return false;
  }
  if (s.gpus_used != cur->gpus_used) return s.gpus_used < cur->gpus_used;
  const double a = request_seconds(s, osl), b = request_seconds(*cur, osl);
  if (a != b) return a < b;
  return bounded_seconds(s, osl) < bounded_seconds(*cur, osl);
}

/// The most utilisation in [0, cap] whose wait(ρ) is within `slack` (wait increasing in ρ),
/// by bisection; 0 when even an idle queue's wait exceeds it.
template <class Wait>
double max_utilization(const Wait& wait, double slack, double cap) {
  if (wait(cap) <= slack) return cap;
  if (wait(0.0) > slack) return 0.0;
  double lo = 0.0, hi = cap;
  for (int i = 0; i < 80; ++i) {
    const double mid = 0.5 * (lo + hi);
    (wait(mid) <= slack ? lo : hi) = mid;
  }
  return lo;
}

/// The largest rate in (0, bound] at which `fits` holds (`fits` true below some rate, false
/// above it), by bisection; `bound` itself when it fits, 0 when nothing does.
template <class Fits>
double max_rate(const Fits& fits, double bound) {
  if (fits(bound)) return bound;
  double lo = 0.0, hi = bound;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

/// A decode-slot queue: M/D/c of `slots` servers held `hold` seconds each, at utilisation ρ.
struct SlotQueue {
  double rho = 0.0, slots = 1.0, hold = 0.0;
  double wait_probability() const { return erlang_c(slots, rho); }
  double quantile(double p) const { return mdc_wait_quantile(rho, slots, hold, p); }
};

/// A bound on the p-quantile of a request's wait A (the prompt's queue; `qa` its quantile
/// function) plus its wait B for a decode slot: P(A + B > a + b) ≤ P(A > a) + P(B > b), whatever
/// the two's dependence. With π = P(B > 0) below 1 − p, b = 0 and a at level 1 − (1 − p − π);
/// else both at level 1 − (1 − p)/2; the smaller of the two.
template <class QuantileA>
double two_queue_quantile(const QuantileA& qa, const SlotQueue& b, double p) {
  const double tail = 1.0 - p;
  const double pi = b.wait_probability();
  double best = std::numeric_limits<double>::infinity();
  if (pi < tail) best = qa(1.0 - (tail - pi));
  const double half = 1.0 - 0.5 * tail;
  return std::min(best, qa(half) + b.quantile(half));
}

/// The most utilisation whose M/D/1 wait's p-quantile is within `slack` per unit of D (the wait
/// scales with D): a table of the quantile over ρ = 1 − e^(−z), z uniform in [0, 20], made once
/// per plan, read by binary search and linear interpolation (kept only when the quantile there
/// is within the slack; else the table point below: never above the target).
class Md1QuantileTable {
 public:
  explicit Md1QuantileTable(double p) : p_(p) {
    if (!(p > 0.0)) return;
    for (int i = 0; i < kPoints; ++i) {
      rho_.push_back(-std::expm1(-20.0 * i / (kPoints - 1)));
      wait_.push_back(md1_wait_quantile(rho_.back(), 1.0, p));
    }
  }
  double max_rho(double slack_per_d) const {
    if (!(slack_per_d >= 0.0)) return 0.0;
    const auto it = std::upper_bound(wait_.begin(), wait_.end(), slack_per_d);
    if (it == wait_.begin()) return 0.0;
    const auto i = static_cast<std::size_t>(it - wait_.begin()) - 1;
    if (i + 1 == wait_.size()) return rho_[i];
    const double f = (slack_per_d - wait_[i]) / (wait_[i + 1] - wait_[i]);
    const double r = rho_[i] + f * (rho_[i + 1] - rho_[i]);
    return md1_wait_quantile(r, 1.0, p_) <= slack_per_d ? r : rho_[i];
  }

 private:
  static constexpr int kPoints = 4096;
  double p_ = 0.0;
  std::vector<double> rho_, wait_;
};

/// Milliseconds with `decimals`, or "unbounded".
std::string ms_text(double seconds, int decimals) {
  return std::isfinite(seconds) ? format_fixed(seconds * 1e3, decimals) + " ms" : "unbounded";
}

}  // namespace

Result<ServingPlan> plan_serving(const models::MoeModel& model, const Cluster& cluster,
                                 const CostSource& costs, const ServingRequest& req) {
  const Workload& w = req.base.workload;
  if (w.isl < 1 || w.osl < 1) {
    return input_error("isl",
                       ": a serving plan needs the input and output lengths; expected "
                       "{isl} N and {osl} M");
  }
  const int budget = req.gpu_budget > 0 ? req.gpu_budget : cluster.num_gpus();
  if (cluster.num_gpus() < 2) {
    return input_error("gpus", ": a disaggregated deployment needs at least 2 GPUs; " +
                                   cluster.name() + " has " + std::to_string(cluster.num_gpus()));
  }
  if (budget < 2 || budget > cluster.num_gpus()) {
    return input_error("gpus", ": a disaggregated deployment needs 2 to " +
                                   std::to_string(cluster.num_gpus()) + " GPUs of " +
                                   cluster.name() + ", got " + std::to_string(budget));
  }
  if (!(req.ttft_target_s >= 0.0) || !(req.tpot_target_s >= 0.0) ||
      !std::isfinite(req.ttft_target_s) || !std::isfinite(req.tpot_target_s)) {
    return input_error("ttft-ms", ": expected positive latency targets");
  }
  if (!(req.arrival_rate >= 0.0) || !std::isfinite(req.arrival_rate)) {
    return input_error("rate", ": expected a positive number of requests per second");
  }
  if (!(req.ttft_percentile >= 0.0 && req.ttft_percentile < 1.0)) {
    return input_error("ttft-percentile",
                       ": expected a percentile between 0 and 100 (exclusive), e.g. 90 or 99");
  }
  const bool offered = req.arrival_rate > 0.0;
  const double rate = req.arrival_rate;
  const double pct = req.ttft_percentile;
  std::vector<int> sizes = req.instance_gpus;
  if (sizes.empty()) {
    for (int s = 1; s <= budget; s *= 2) sizes.push_back(s);
    if (sizes.back() != budget) sizes.push_back(budget);
  }
  auto swept = sweep_batches(req.decode_batches);  // empty: the default sweep
  if (!swept) return swept.error();
  const std::vector<int> batches = std::move(*swept);
  const std::vector<int> prompts =
      req.prefill_prompts.empty() ? std::vector<int>{1, 2, 4, 8, 16, 32, 64} : req.prefill_prompts;

  ServingPlan out;
  out.model = model.name;
  out.cluster = cluster.name();
  out.cost_source = costs.name();
  out.gpu_budget = budget;
  out.isl = w.isl;
  out.osl = w.osl;
  out.ttft_target_s = req.ttft_target_s;
  out.tpot_target_s = req.tpot_target_s;
  out.arrival_rate = rate;
  out.ttft_percentile = pct;
  PlanCache cache(model, cluster, costs, req.base);
  const Md1QuantileTable quantile_table(pct);
  std::string first_error;
  const auto note = [&](const std::string& why) {
    if (first_error.empty()) first_error = why;
  };
  const double kv_bytes_per_request = static_cast<double>(w.isl) *
                                      model.kv_cache_bytes_per_token(1) *
                                      static_cast<double>(model.num_hidden_layers);

  // Prefill instances: per size, every prompt count that fits, by requests/s per GPU.
  std::map<int, std::vector<PoolInstance>> prefill;
  for (const int p : sizes) {
    if (p < 1 || p >= budget) continue;  // a decode instance needs a GPU too
    for (const int n : prompts) {
      const long tokens = (static_cast<long>(n) * w.isl + p - 1) / p;
      if (tokens > (1 << 20)) continue;
      std::string why;
      const LayoutCost* best =
          recommended(cache.get(Phase::kPrefill, p, static_cast<int>(tokens), &why));
      if (best == nullptr) {
        note(why.empty() ? "no prefill layout on " + std::to_string(p) + " GPUs fits" : why);
        continue;
      }
      prefill[p].push_back({p, *best, n, best->step_seconds, n / best->step_seconds});
    }
    std::sort(prefill[p].begin(), prefill[p].end(),
              [](const auto& a, const auto& b) { return a.requests_per_s > b.requests_per_s; });
  }
  // A decode instance of d GPUs at b sequences per GPU: its plan's recommendation, TPOT = its
  // step, d·b / (osl·TPOT) requests/s; none when nothing fits (`why` says what).
  const auto decode_instance = [&](int d, int b, std::string* why) -> std::optional<PoolInstance> {
    const LayoutCost* best = recommended(cache.get(Phase::kDecode, d, b, why));
    if (best == nullptr) return std::nullopt;
    return PoolInstance{d, *best, b, best->step_seconds,
                        d * static_cast<double>(b) / (w.osl * best->step_seconds)};
  };
  // Decode instances: per size, the batch with the most requests/s within the TPOT target.
  std::map<int, PoolInstance> decode;
  std::map<int, std::vector<PoolInstance>> decode_all;  // every fitting batch (aggregated)
  for (const int d : sizes) {
    if (d < 1 || d >= budget) continue;
    for (const int b : batches) {
      std::string why;
      const auto found = decode_instance(d, b, &why);
      if (!found) {
        note(why.empty() ? "no decode layout on " + std::to_string(d) + " GPUs fits " +
                               std::to_string(b) + " sequences per GPU"
                         : why);
        continue;
      }
      const PoolInstance& inst = *found;
      decode_all[d].push_back(inst);
      if (req.tpot_target_s > 0.0 && inst.step_s > req.tpot_target_s) continue;
      auto it = decode.find(d);
      if (it == decode.end() || inst.requests_per_s > it->second.requests_per_s) decode[d] = inst;
    }
  }

  // The split: x prefill and y decode instances within the budget. Per prompt count, the
  // prefill pool is x M/D/1 queues (D = step / prompts, each instance a share λ/x of the
  // requests, ρ_p = λ·D/x) and the decode pool y M/D/c queues of c = GPUs × sequences per GPU
  // slots held osl·TPOT each (ρ_d = λ / (y·its rate)): the mean TTFT is the prefill wait + the
  // step + the KV transfer + the slot wait. Without a target (and no offered rate) the
  // deployment runs at the slower pool's capacity, whose queue grows without bound; a TTFT
  // target holds λ at the most whose wait fits the slack the step and the transfer leave.
  const auto disagg_at = [&](const PoolInstance& pre, const PoolInstance& dec, int x, int y,
                             double kv, double lambda) {
    DisaggServing s;
    const double per_prompt = pre.step_s / pre.batch;
    const double slots = static_cast<double>(dec.gpus) * dec.batch;
    s.prefill = pre;
    s.decode = dec;
    s.prefill_instances = x;
    s.decode_instances = y;
    s.kv_transfer_s = kv;
    s.kv_bytes_per_request = kv_bytes_per_request;
    // At a pool's capacity its utilisation is 1 exactly (not 1 − ε from rounding).
    const double prefill_cap = x / per_prompt, decode_cap = y * dec.requests_per_s;
    s.prefill_utilization = lambda >= prefill_cap ? 1.0 : lambda * per_prompt / x;
    s.decode_utilization = lambda >= decode_cap ? 1.0 : lambda / decode_cap;
    s.ttft_wait_s = md1_wait_seconds(s.prefill_utilization, per_prompt);
    s.decode_slot_wait_s = mdc_wait_seconds(s.decode_utilization, slots, w.osl * dec.step_s);
    s.ttft_s = pre.step_s + kv + s.ttft_wait_s + s.decode_slot_wait_s;
    if (pct > 0.0) {
      s.ttft_quantile_s = pre.step_s + kv +
                          two_queue_quantile(
                              [&](double level) {
                                return md1_wait_quantile(s.prefill_utilization, per_prompt, level);
                              },
                              SlotQueue{s.decode_utilization, slots, w.osl * dec.step_s}, pct);
    }
    s.tpot_s = dec.step_s;
    s.requests_per_s = lambda;
    s.gpus_used = x * pre.gpus + y * dec.gpus;
    s.tokens_per_s_per_gpu = lambda * w.osl / (offered ? s.gpus_used : budget);
    s.tokens_per_s_per_user = 1.0 / dec.step_s;
    return s;
  };
  // The TTFT's wait at rate λ (the mean, or the bound on the requested percentile).
  const auto disagg_wait = [&](const DisaggServing& s) {
    return (pct > 0.0 ? s.ttft_quantile_s : s.ttft_s) - s.prefill.step_s - s.kv_transfer_s;
  };
  for (const auto& [p, candidates] : prefill) {
    for (const auto& decode_entry : decode) {
      // Named, not a structured binding: clang 14 (Debian 12) cannot capture a binding.
      const int d = decode_entry.first;
      const auto& dec = decode_entry.second;
      // With an offered rate: at least the decode instances whose slots keep up (ρ_d < 1).
      int y_least = 1;
      if (offered) {
        const double needed = std::max(1.0, std::ceil(rate / dec.requests_per_s));
        if (needed * d > budget) continue;  // the decode pool alone exceeds the budget
        y_least = static_cast<int>(needed);
        if (!(rate < y_least * dec.requests_per_s)) ++y_least;
      }
      if (y_least * d > budget) continue;
      for (int x = 1; x * p + y_least * d <= budget; ++x) {
        const int y_most = (budget - x * p) / d;
        const KvRoute route = kv_route(cluster, kv_bytes_per_request, p, x * p, d);
        for (const PoolInstance& pre : candidates) {
          const double kv = route.seconds(pre.batch);
          const double service = pre.step_s + kv;
          const double per_prompt = pre.step_s / pre.batch;
          const double slack = req.ttft_target_s > 0.0 ? req.ttft_target_s - service : 0.0;
          if (req.ttft_target_s > 0.0 && slack < 0.0) continue;
          const auto fits = [&](const DisaggServing& s) {
            return req.ttft_target_s <= 0.0 || disagg_wait(s) <= slack;
          };
          std::optional<DisaggServing> found;
          if (offered) {
            if (!(rate * per_prompt / x < 1.0)) continue;
            // The fewest decode instances that meet the target (the wait falls as y grows).
            if (!fits(disagg_at(pre, dec, x, y_most, kv, rate))) continue;
            int lo = y_least, hi = y_most;
            while (lo < hi) {
              const int mid = lo + (hi - lo) / 2;
              if (fits(disagg_at(pre, dec, x, mid, kv, rate))) {
                hi = mid;
              } else {
                lo = mid + 1;
              }
            }
            found = disagg_at(pre, dec, x, lo, kv, rate);
          } else {
            const int y = y_most;
            const double cap = std::min(x / per_prompt, y * dec.requests_per_s);
            double lambda = cap;
            if (req.ttft_target_s > 0.0) {
              // The prefill queue alone bounds λ (closed form; the slot wait only adds): a
              // split that cannot beat the best found even so is not refined.
              const double rho_p = pct > 0.0 ? quantile_table.max_rho(slack / per_prompt)
                                             : 2.0 * slack / (per_prompt + 2.0 * slack);
              const double bound = std::min(cap, x * rho_p / per_prompt);
              if (!(bound > 0.0)) continue;
              const auto& cur = out.disaggregated;
              if (cur && bound < cur->requests_per_s * (1.0 - 1e-12)) continue;
              lambda =
                  max_rate([&](double l) { return fits(disagg_at(pre, dec, x, y, kv, l)); }, bound);
              if (!(lambda > 0.0)) continue;
            }
            found = disagg_at(pre, dec, x, y, kv, lambda);
          }
          if (found && better(offered, w.osl, *found, out.disaggregated)) out.disaggregated = found;
        }
      }
    }
  }

  // Aggregated: every instance size and decode batch b per GPU on the decode plan's layout
  // shape, chunked prefill as SGLang, vLLM and TensorRT-LLM run it: a pass is either a decode
  // pass (the b sequences' rows, t_d: the decode plan's step) or a mixed pass (those rows and a
  // chunk of c prompt tokens per GPU, t_m: the MoE blocks and dense MLPs over c + b rows with
  // the shape's fastest dispatcher there, each layer's attention block for the chunk — prefill
  // at the prompt's context — and the decode rows in one batch, and the head: embedding and norm
  // over c + b rows, logits for the b decode rows and the prompts the chunk completes:
  // cost_mixed_attention, cost_mixed_head). With the batch full, a share
  // x = c_bal / c of the passes is mixed, c_bal = b·isl/osl; the mean pass t̄ = x·t_m +
  // (1 − x)·t_d is the TPOT and λ_sat = g·b / (osl·t̄). Prompt tokens queue for the chunks: a
  // prompt's work D = t_m·isl / (g·c), ρ = λ·D; while none waits the instance runs decode passes
  // (vacations), so the mean wait is ρ·D / (2·(1 − ρ)) + t_d / 2 (M/D/1 with vacations,
  // Fuhrmann–Cooper) and the mean TTFT that + max(D, t_m). Chunks c = c_bal·2^k, k = 0..3
  // (c_bal itself: every pass mixed, ρ = 1 at saturation).
  const ExpertLoad load = req.base.load.num_layers() > 0
                              ? req.base.load
                              : ExpertLoad::uniform(model.num_moe_layers(), model.num_experts);
  int mixed_costed = 0;
  const double layers = model.num_hidden_layers;
  if (std::find(sizes.begin(), sizes.end(), budget) != sizes.end() &&
      decode_all.find(budget) == decode_all.end()) {
    for (const int b : batches) {
      if (auto inst = decode_instance(budget, b, nullptr)) decode_all[budget].push_back(*inst);
    }
  }
  // Every instance's rate is at most g·b / (osl·t_d) (t̄ ≥ t_d): the candidates in the order of
  // that bound, and none costed once it cannot beat the best found (most requests/s; with an
  // offered rate, fewest GPUs).
  struct AggCandidate {
    double bound = 0.0;  ///< requests/s over the budget, or GPUs needed (offered)
    const PoolInstance* inst = nullptr;
  };
  std::vector<AggCandidate> agg_candidates;
  for (const auto& [g, list] : decode_all) {
    if (g < 1 || g > budget) continue;
    for (const PoolInstance& inst : list) {
      if (req.tpot_target_s > 0.0 && inst.step_s > req.tpot_target_s) continue;  // t̄ ≥ t_d
      const double lambda_ub = inst.requests_per_s;  // g·b / (osl·t_d)
      agg_candidates.push_back(
          {offered ? g * std::ceil(rate / lambda_ub) : (budget / g) * lambda_ub, &inst});
    }
  }
  std::stable_sort(agg_candidates.begin(), agg_candidates.end(),
                   [&](const AggCandidate& a, const AggCandidate& b) {
                     return offered ? a.bound < b.bound : a.bound > b.bound;
                   });
  for (const AggCandidate& cand : agg_candidates) {
    const auto& cur = out.aggregated;
    if (cur && (offered ? cand.bound > cur->gpus_used
                        : cand.bound < cur->requests_per_s * (1.0 - 1e-12))) {
      break;
    }
    const PoolInstance& inst = *cand.inst;
    const int g = inst.gpus;
    const double t_d = inst.step_s;
    const Layout& shape = inst.layout.layout;
    const int b = inst.batch;
    const Plan* dec_plan = cache.get(Phase::kDecode, g, b, nullptr);
    const double c_bal = std::ceil(static_cast<double>(b) * w.isl / w.osl);
    for (int k = 0; k < 4; ++k) {
      const double chunk = c_bal * (1 << k);
      if (k > 0 && chunk > 16384.0) break;
      Workload mixed_w = w;
      mixed_w.phase = Phase::kPrefill;
      mixed_w.tokens_per_gpu = static_cast<int>(chunk) + b;
      const CostContext mixed_ctx{model, cluster, costs, mixed_w, load, req.base.placement};
      // The pass's attention blocks: the chunk's and the decode rows' in one batch.
      auto mixed_attention = cost_mixed_attention(mixed_ctx, shape, chunk, b);
      if (!mixed_attention) continue;
      // Its logits: every decode row's and those of the prompts the chunk completes.
      auto mixed_head = cost_mixed_head(mixed_ctx, shape, chunk, b);
      if (!mixed_head) continue;
      double t_m = 0.0;
      Layout pass_layout = shape;
      for (const LayoutCost& l : dec_plan->layouts) {  // the shape's dispatchers
        if (l.layout.dp_size != shape.dp_size || l.layout.ep_size != shape.ep_size ||
            l.layout.tp_size != shape.tp_size || l.layout.mapping != shape.mapping) {
          continue;
        }
        ++mixed_costed;
        auto rows = cost_layout(mixed_ctx, l.layout);
        if (!rows || !rows->infeasible_reason.empty()) continue;
        const double t = rows->step_seconds -
                         layers * (rows->dense.attention.seconds - mixed_attention->seconds) -
                         (rows->dense.head.seconds - mixed_head->seconds);
        if (t_m == 0.0 || t < t_m) {
          t_m = t;
          pass_layout = l.layout;
        }
      }
      if (!(t_m > 0.0)) continue;
      const double x = c_bal / chunk;
      const double pass = x * t_m + (1.0 - x) * t_d;
      if (req.tpot_target_s > 0.0 && pass > req.tpot_target_s) continue;
      const double lambda_sat = g * static_cast<double>(b) / (w.osl * pass);  // per instance
      const double per_prompt = t_m * w.isl / (g * chunk);
      const double service = std::max(per_prompt, t_m);
      const double slots = static_cast<double>(g) * b;
      // The prompt-token queue's most utilisation, the batch's: λ_sat·D = b·isl / (osl·c) ·
      // t_m / t̄, written so that a batch whose passes are all mixed (x = 1, c = b·isl/osl)
      // gives exactly 1 — the queue at its capacity — not 1 − ε.
      const double rho_batch = std::min(
          1.0,
          x * t_m / pass * (b * static_cast<double>(w.isl) / (static_cast<double>(w.osl) * c_bal)));
      // n instances at λ requests/s each: the prompt tokens' queue at ρ = λ·D (decode passes
      // as vacations) and the g·b sequence slots, each held osl·t̄, at λ / λ_sat.
      const auto agg_at = [&](int n, double lambda) {
        AggServing s;
        s.instance = inst;
        s.instance.layout.layout = pass_layout;
        s.instance.step_s = pass;
        s.instance.requests_per_s = lambda_sat;
        s.chunk_tokens_per_gpu = chunk;
        s.mixed_pass_s = t_m;
        s.decode_pass_s = t_d;
        s.mixed_share = x;
        s.prefill_s = per_prompt;
        s.instances = n;
        s.prefill_utilization = lambda == lambda_sat ? rho_batch : lambda * per_prompt;
        s.slot_utilization = std::min(1.0, lambda / lambda_sat);
        s.ttft_wait_s = md1_wait_seconds(s.prefill_utilization, per_prompt) + 0.5 * t_d;
        s.slot_wait_s = mdc_wait_seconds(s.slot_utilization, slots, w.osl * pass);
        s.ttft_s = service + s.ttft_wait_s + s.slot_wait_s;
        if (pct > 0.0) {
          s.ttft_quantile_s =
              service + two_queue_quantile(
                            [&](double level) {
                              return md1_vacation_wait_quantile(s.prefill_utilization, per_prompt,
                                                                t_d, level);
                            },
                            SlotQueue{s.slot_utilization, slots, w.osl * pass}, pct);
        }
        s.tpot_s = pass;
        s.requests_per_s = lambda * n;
        s.gpus_used = n * g;
        s.tokens_per_s_per_gpu = s.requests_per_s * w.osl / (offered ? s.gpus_used : budget);
        s.tokens_per_s_per_user = 1.0 / s.tpot_s;
        return s;
      };
      const auto fits = [&](const AggServing& s) {
        return req.ttft_target_s <= 0.0 ||
               (pct > 0.0 ? s.ttft_quantile_s : s.ttft_s) <= req.ttft_target_s;
      };
      // The prompt-token queue alone bounds the rate a TTFT target allows (the slot wait only
      // adds): the mean's closed form, or the percentile's bisection.
      double rho_bound = rho_batch;
      if (req.ttft_target_s > 0.0) {
        const double slack = req.ttft_target_s - service;
        if (pct > 0.0) {
          const auto wait = [&](double r) {
            return md1_vacation_wait_quantile(r, per_prompt, t_d, pct);
          };
          rho_bound = max_utilization(wait, slack, rho_bound);
          if (wait(rho_bound) > slack) continue;
        } else {
          const double s_md1 = slack - 0.5 * t_d;  // the M/D/1 part's share
          if (s_md1 < 0.0) continue;
          rho_bound = std::min(rho_bound, 2.0 * s_md1 / (per_prompt + 2.0 * s_md1));
        }
      }
      if (!(rho_bound > 0.0)) continue;
      std::optional<AggServing> found;
      if (offered) {
        // The fewest instances whose rate each keeps the slots below saturation and meets
        // the target (the wait falls as instances are added).
        const int most = budget / g;
        const double needed = std::max(1.0, std::ceil(rate / lambda_sat));
        if (needed > most) continue;
        int least = static_cast<int>(needed);
        if (!(rate / least < lambda_sat)) ++least;
        if (least > most || !fits(agg_at(most, rate / most))) continue;
        int lo = least, hi = most;
        while (lo < hi) {
          const int mid = lo + (hi - lo) / 2;
          if (fits(agg_at(mid, rate / mid))) {
            hi = mid;
          } else {
            lo = mid + 1;
          }
        }
        found = agg_at(lo, rate / lo);
      } else {
        const int n = budget / g;
        const double bound = rho_bound == rho_batch ? lambda_sat : rho_bound / per_prompt;
        if (cur && n * bound < cur->requests_per_s * (1.0 - 1e-12)) continue;
        const double lambda = req.ttft_target_s > 0.0
                                  ? max_rate([&](double l) { return fits(agg_at(n, l)); }, bound)
                                  : lambda_sat;
        if (!(lambda > 0.0)) continue;
        found = agg_at(n, lambda);
      }
      if (better(offered, w.osl, *found, out.aggregated)) out.aggregated = found;
    }
  }
  out.plans_costed = cache.made();
  out.mixed_passes_costed = mixed_costed;

  // The recommendation.
  const auto describe_disagg = [&](const DisaggServing& s) {
    return "disaggregated: " + std::to_string(s.prefill_instances) + " prefill × " +
           std::to_string(s.prefill.gpus) + " GPUs (" + s.prefill.layout.layout.shape_name() + " " +
           dispatcher_name(s.prefill.layout.layout.dispatcher) + ", " +
           std::to_string(s.prefill.batch) + " prompts per step at " +
           format_fixed(100.0 * s.prefill_utilization, 1) + "% utilisation, mean TTFT " +
           (std::isfinite(s.ttft_s)
                ? ms_text(s.ttft_s, 1) + ": " + ms_text(s.ttft_wait_s, 1) + " queueing, " +
                      ms_text(s.decode_slot_wait_s, 2) + " waiting for a decode slot, "
                : std::string(s.prefill_utilization >= 1.0
                                  ? "unbounded — the prefill pool runs at its capacity and its "
                                    "queue grows without bound; set --ttft-ms or --rate — "
                                  : "unbounded — the decode pool's slots run at their capacity "
                                    "and requests wait for one without bound; set --ttft-ms or "
                                    "--rate — ")) +
           ms_text(s.prefill.step_s, 1) + " prefill step, " + ms_text(s.kv_transfer_s, 2) +
           " KV transfer) + " + std::to_string(s.decode_instances) + " decode × " +
           std::to_string(s.decode.gpus) + " GPUs (" + s.decode.layout.layout.shape_name() + " " +
           dispatcher_name(s.decode.layout.layout.dispatcher) + ", " +
           std::to_string(s.decode.batch) + " sequences per GPU at " +
           format_fixed(100.0 * s.decode_utilization, 1) + "% slot utilisation, TPOT " +
           format_fixed(s.tpot_s * 1e3, 2) + " ms): " + format_fixed(s.tokens_per_s_per_gpu, 1) +
           " tokens/s/GPU, " + format_fixed(s.tokens_per_s_per_user, 1) + " tokens/s/user, " +
           std::to_string(s.gpus_used) + " of " + std::to_string(budget) + " GPUs used";
  };
  const auto describe_agg = [&](const AggServing& s) {
    return "aggregated: " + std::to_string(s.instances) + " × " + std::to_string(s.instance.gpus) +
           " GPUs (" + s.instance.layout.layout.shape_name() + " " +
           dispatcher_name(s.instance.layout.layout.dispatcher) + ", " +
           std::to_string(s.instance.batch) + " sequences per GPU; " +
           format_fixed(100.0 * s.mixed_share, 1) + "% of the passes mixed with " +
           format_fixed(s.chunk_tokens_per_gpu, 0) + " prompt tokens per GPU (" +
           ms_text(s.mixed_pass_s, 2) + " against " + ms_text(s.decode_pass_s, 2) +
           " decode), prefill at " + format_fixed(100.0 * s.prefill_utilization, 1) +
           "%, sequence slots at " + format_fixed(100.0 * s.slot_utilization, 1) + "%, mean TTFT " +
           (std::isfinite(s.ttft_s)
                ? ms_text(s.ttft_s, 1) + ": " + ms_text(s.ttft_wait_s, 1) + " queueing, " +
                      ms_text(s.slot_wait_s, 2) + " waiting for a sequence slot, "
                : std::string(s.prefill_utilization >= 1.0
                                  ? "unbounded — the chunks run at their capacity and the "
                                    "prompts' queue grows without bound; set --ttft-ms or --rate "
                                    "— "
                                  : "unbounded — the sequence slots run at their capacity and "
                                    "requests wait for one without bound; set --ttft-ms or "
                                    "--rate — ")) +
           ms_text(s.prefill_s, 1) + " per prompt's tokens; TPOT " + ms_text(s.tpot_s, 2) +
           "): " + format_fixed(s.tokens_per_s_per_gpu, 1) + " tokens/s/GPU, " +
           format_fixed(s.tokens_per_s_per_user, 1) + " tokens/s/user";
  };

  // With a percentile the reasons give it before the mean.
  const auto with_quantile = [&](std::string text, double quantile_s) {
    if (!(pct > 0.0)) return text;
    const auto at = text.find("mean TTFT ");
    if (at == std::string::npos) return text;
    return text.insert(at, percentile_name(pct) + " TTFT " + ms_text(quantile_s, 1) + ", ");
  };
  if (out.disaggregated) {
    out.reasons.push_back(
        with_quantile(describe_disagg(*out.disaggregated), out.disaggregated->ttft_quantile_s));
  }
  if (out.aggregated) {
    out.reasons.push_back(
        with_quantile(describe_agg(*out.aggregated), out.aggregated->ttft_quantile_s));
  }
  if (out.disaggregated && out.aggregated && offered) {
    const DisaggServing& d = *out.disaggregated;
    const AggServing& a = *out.aggregated;
    const double dl = request_seconds(d, w.osl), al = request_seconds(a, w.osl);
    const bool disagg = d.gpus_used < a.gpus_used || (d.gpus_used == a.gpus_used && dl <= al);
    out.recommended = disagg ? "disaggregated" : "aggregated";
    const int fewer = std::abs(d.gpus_used - a.gpus_used);
    out.reasons.push_back(
        fewer > 0 ? out.recommended + " serves " + format_fixed(rate, 2) + " requests/s on " +
                        std::to_string(fewer) + " fewer GPUs"
                  : out.recommended + " serves " + format_fixed(rate, 2) +
                        " requests/s on as many GPUs with a request latency (TTFT + (osl − 1) " +
                        "× TPOT) of " + ms_text(std::min(dl, al), 0) + " against " +
                        ms_text(std::max(dl, al), 0));
  } else if (out.disaggregated && out.aggregated) {
    const double d = out.disaggregated->requests_per_s, a = out.aggregated->requests_per_s;
    out.recommended = d >= a ? "disaggregated" : "aggregated";
    out.reasons.push_back(out.recommended + " serves " +
                          format_fixed(100.0 * (std::max(d, a) / std::min(d, a) - 1.0), 1) +
                          "% more tokens/s on the " + std::to_string(budget) + " GPUs");
  } else if (out.disaggregated || out.aggregated) {
    out.recommended = out.disaggregated ? "disaggregated" : "aggregated";
    out.reasons.push_back(std::string("no ") +
                          (out.disaggregated ? "aggregated" : "disaggregated") +
                          " deployment meets the targets");
  } else {
    std::string why = "no deployment of " + std::to_string(budget) + " GPUs";
    if (offered) why += " serves " + format_fixed(rate, 2) + " requests/s";
    if (req.ttft_target_s > 0.0 || req.tpot_target_s > 0.0)
      why += offered ? " within the targets" : " meets the targets";
    else if (!offered)
      why += " fits";
    if (!first_error.empty()) why += " (" + first_error + ")";
    why += offered ? "; lower {rate}, relax {ttft_ms}/{tpot_ms}, shorten {isl}/{osl}, or add GPUs"
                   : "; relax {ttft_ms}/{tpot_ms}, shorten {isl}/{osl}, or add GPUs";
    out.reasons.push_back(why);
  }
  return out;
}

namespace {
nlohmann::json instance_json(const PoolInstance& p, bool decode) {
  return {{"gpus", p.gpus},
          {"dp_size", p.layout.layout.dp_size},
          {"ep_size", p.layout.layout.ep_size},
          {"tp_size", p.layout.layout.tp_size},
          {"dispatcher", dispatcher_name(p.layout.layout.dispatcher)},
          {"mapping", mapping_name(p.layout.layout.mapping)},
          {decode ? "sequences_per_gpu" : "prompts_per_step", p.batch},
          {decode ? "tpot_ms" : "step_ms", p.step_s * 1e3},
          {"requests_per_s", p.requests_per_s}};
}
/// The figures both deployments report.
nlohmann::json ms_or_null(double seconds) {
  return std::isfinite(seconds) ? nlohmann::json(seconds * 1e3) : nlohmann::json(nullptr);
}
template <class Deployment>
void add_figures(nlohmann::json& j, const Deployment& s) {
  j["ttft_ms"] = ms_or_null(s.ttft_s);
  j["ttft_wait_ms"] = ms_or_null(s.ttft_wait_s);
  j["ttft_quantile_ms"] =
      s.ttft_quantile_s > 0.0 ? ms_or_null(s.ttft_quantile_s) : nlohmann::json(nullptr);
  j["tpot_ms"] = s.tpot_s * 1e3;
  j["requests_per_s"] = s.requests_per_s;
  j["gpus_used"] = s.gpus_used;
  j["tokens_per_s_per_gpu"] = s.tokens_per_s_per_gpu;
  j["tokens_per_s_per_user"] = s.tokens_per_s_per_user;
}
}  // namespace

double md1_wait_seconds(double rho, double d) {
  if (!(rho < 1.0)) return std::numeric_limits<double>::infinity();
  return rho > 0.0 ? rho * d / (2.0 * (1.0 - rho)) : 0.0;
}

double erlang_c(double servers, double rho) {
  if (!(rho > 0.0)) return 0.0;
  if (!(rho < 1.0)) return 1.0;
  const double c = servers;
  const double a = rho * c;  // offered load, Erlangs
  // Erlang B = P(Poisson(a) = c) / P(Poisson(a) ≤ c); then C = c·B / (c − a·(1 − B)).
  using namespace boost::math::policies;
  using Quiet = policy<underflow_error<ignore_error>, overflow_error<ignore_error>,
                       evaluation_error<ignore_error>>;
  const double pmf = boost::math::gamma_p_derivative(c + 1.0, a, Quiet());
  const double cdf = boost::math::gamma_q(c + 1.0, a, Quiet());
  if (!(cdf > 0.0) || !std::isfinite(pmf)) return 1.0;
  const double b = std::clamp(pmf / cdf, 0.0, 1.0);
  return std::clamp(c * b / (c - a * (1.0 - b)), 0.0, 1.0);
}

double mdc_wait_seconds(double rho, double servers, double service) {
  if (!(rho < 1.0)) return std::numeric_limits<double>::infinity();
  if (!(rho > 0.0) || !(service > 0.0)) return 0.0;
  const double c = servers;
  const double mmc = erlang_c(c, rho) * service / (c * (1.0 - rho));
  const double f = (1.0 - rho) * (c - 1.0) * (std::sqrt(4.0 + 5.0 * c) - 2.0) / (16.0 * rho * c);
  return 0.5 * (1.0 + f) * mmc;
}

double mdc_wait_quantile(double rho, double servers, double service, double p) {
  if (!(rho > 0.0) || !(service > 0.0)) return 0.0;
  if (!(rho < 1.0)) return std::numeric_limits<double>::infinity();
  const double wait_probability = erlang_c(servers, rho);
  if (wait_probability <= 1.0 - p) return 0.0;
  return service * std::log(wait_probability / (1.0 - p)) / (servers * (1.0 - rho));
}

namespace {
/// The M/D/1 wait's tail, P(W > y) ≈ C·e^(−θ·y) for y ≥ 0 (Cramér–Lundberg): θ = u / D with u
/// the positive root of ρ·(e^u − 1) = u, C = (1 − ρ) / (ρ·e^u − 1); capped at P(W > 0) = ρ.
struct Md1Tail {
  double rho = 0.0, theta = 0.0, c = 0.0;
  Md1Tail(double r, double d) : rho(r) {
    // f(u) = ρ(e^u − 1) − u is convex, f(0) = 0 and f'(0) = ρ − 1 < 0: one root u > 0.
    double lo = 0.0, hi = 1.0;
    while (rho * std::expm1(hi) - hi < 0.0) hi *= 2.0;
    for (int i = 0; i < 200 && hi - lo > 1e-15 * hi; ++i) {
      const double mid = 0.5 * (lo + hi);
      (rho * std::expm1(mid) - mid < 0.0 ? lo : hi) = mid;
    }
    const double u = 0.5 * (lo + hi);
    theta = u / d;
    c = (1.0 - rho) / (rho * std::exp(u) - 1.0);
  }
  double operator()(double y) const {
    return y < 0.0 ? 1.0 : std::min(rho, c * std::exp(-theta * y));
  }
  /// The y ≥ 0 below which the cap ρ holds: C·e^(−θ·y0) = ρ.
  double cap_end() const { return c > rho ? std::log(c / rho) / theta : 0.0; }
};
}  // namespace

std::string percentile_name(double fraction) {
  std::string v = format_fixed(100.0 * fraction, 2);
  while (v.back() == '0') v.pop_back();
  if (v.back() == '.') v.pop_back();
  return "p" + v;
}

namespace {
/// Erlang's M/D/1 waiting-time distribution (D = 1): P(W ≤ t) = (1 − ρ)·Σ_{k ≤ t} (ρ(k − t))^k /
/// k!·e^(ρ(t − k)). An alternating sum whose terms grow to about e^(ρt): in long double (64-bit
/// significand) its cancellation costs at most e^(ρt)·2^−64, under 10^−13 at the t ≤ 12 it is
/// used for.
double md1_exact_cdf(double rho, double t) {
  if (t < 0.0) return 0.0;
  const long double r = rho;
  const long double step = std::exp(-r);  // e^(−ρ), one factor per k
  long double e = std::exp(r * t);        // e^(ρ(t − k)) at k = 0
  long double sum = 0.0L, fact = 1.0L;
  for (int k = 0; k <= static_cast<int>(std::floor(t)); ++k) {
    if (k > 0) {
      fact *= k;
      e *= step;
    }
    const long double x = r * (static_cast<long double>(k) - t);
    long double power = 1.0L;
    for (int i = 0; i < k; ++i) power *= x;
    sum += power / fact * e;
  }
  return static_cast<double>((1.0L - r) * sum);
}
/// The exact sum is used where the quantile's search range, [0, 2·y + D] with y the asymptote's
/// answer, ends within 12 D: past a few D the asymptote has converged (its error in probability
/// under 3·10^−3 at ρ 0.1 and y 6 D, under 2·10^−5 from ρ 0.3), and the sum's terms grow with t.
constexpr double kExactRangeD = 12.0;
}  // namespace

double md1_wait_quantile(double rho, double d, double p) {
  if (!(rho > 0.0) || p <= 1.0 - rho) return 0.0;  // P(W = 0) = 1 − ρ
  if (!(rho < 1.0)) return std::numeric_limits<double>::infinity();
  const Md1Tail tail(rho, d);
  const double asymptote = std::max(0.0, std::log(tail.c / (1.0 - p)) / tail.theta);
  const double hi = 2.0 * asymptote / d + 1.0;  // in units of D
  if (hi > kExactRangeD || md1_exact_cdf(rho, hi) < p) return asymptote;
  double lo = 0.0, up = hi;
  while (up - lo > 1e-10 * up) {
    const double mid = 0.5 * (lo + up);
    (md1_exact_cdf(rho, mid) < p ? lo : up) = mid;
  }
  return up * d;
}

double md1_vacation_wait_quantile(double rho, double d, double vacation, double p) {
  if (!(vacation > 0.0)) return md1_wait_quantile(rho, d, p);
  if (!(rho < 1.0)) return std::numeric_limits<double>::infinity();
  // P(W + U·V > t) = (1/V)·∫_0^V P(W > t − v) dv, piecewise: 1 where t − v < 0, ρ up to the
  // cap's end y0, C·e^(−θ(t − v)) beyond it.
  if (!(rho > 0.0)) return vacation * (1.0 - p);  // W = 0: the uniform residual alone
  const Md1Tail tail(rho, d);
  const double y0 = tail.cap_end();
  const auto exceed = [&](double t) {
    const double a_len = std::max(0.0, vacation - std::max(t, 0.0));
    const double b_lo = std::clamp(t - y0, 0.0, vacation), b_hi = std::clamp(t, 0.0, vacation);
    double sum = a_len + rho * std::max(0.0, b_hi - b_lo);
    const double c_hi = std::min(vacation, t - y0);
    if (c_hi > 0.0) {
      sum += tail.c / tail.theta * (std::exp(-tail.theta * (t - c_hi)) - std::exp(-tail.theta * t));
    }
    return sum / vacation;
  };
  double lo = 0.0, hi = md1_wait_quantile(rho, d, p) + vacation;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (exceed(mid) > 1.0 - p ? lo : hi) = mid;
  }
  return hi;
}

nlohmann::json serving_to_json(const ServingPlan& plan) {
  nlohmann::json j = {
      {"model", plan.model},
      {"cluster", plan.cluster},
      {"cost_source", plan.cost_source},
      {"gpu_budget", plan.gpu_budget},
      {"isl", plan.isl},
      {"osl", plan.osl},
      {"ttft_target_ms", plan.ttft_target_s > 0.0 ? nlohmann::json(plan.ttft_target_s * 1e3)
                                                  : nlohmann::json(nullptr)},
      {"tpot_target_ms", plan.tpot_target_s > 0.0 ? nlohmann::json(plan.tpot_target_s * 1e3)
                                                  : nlohmann::json(nullptr)},
      {"recommended",
       plan.recommended.empty() ? nlohmann::json(nullptr) : nlohmann::json(plan.recommended)},
      {"arrival_rate",
       plan.arrival_rate > 0.0 ? nlohmann::json(plan.arrival_rate) : nlohmann::json(nullptr)},
      {"ttft_percentile", plan.ttft_percentile > 0.0 ? nlohmann::json(100.0 * plan.ttft_percentile)
                                                     : nlohmann::json(nullptr)},
      {"reasons", rendered_reasons(plan.reasons)},
      {"plans_costed", plan.plans_costed},
      {"mixed_passes_costed", plan.mixed_passes_costed}};
  if (plan.disaggregated) {
    const auto& s = *plan.disaggregated;
    j["disaggregated"] = {{"prefill", instance_json(s.prefill, false)},
                          {"decode", instance_json(s.decode, true)},
                          {"prefill_instances", s.prefill_instances},
                          {"decode_instances", s.decode_instances},
                          {"kv_bytes_per_request", s.kv_bytes_per_request},
                          {"kv_transfer_ms", s.kv_transfer_s * 1e3},
                          {"prefill_utilization", s.prefill_utilization},
                          {"decode_utilization", s.decode_utilization},
                          {"decode_slot_wait_ms", ms_or_null(s.decode_slot_wait_s)}};
    add_figures(j["disaggregated"], s);
  } else {
    j["disaggregated"] = nullptr;
  }
  if (plan.aggregated) {
    const auto& s = *plan.aggregated;
    j["aggregated"] = {{"instance", instance_json(s.instance, true)},
                       {"instances", s.instances},
                       {"chunk_tokens_per_gpu", s.chunk_tokens_per_gpu},
                       {"mixed_pass_ms", s.mixed_pass_s * 1e3},
                       {"decode_pass_ms", s.decode_pass_s * 1e3},
                       {"mixed_share", s.mixed_share},
                       {"prefill_ms_per_prompt", s.prefill_s * 1e3},
                       {"prefill_utilization", s.prefill_utilization},
                       {"slot_utilization", s.slot_utilization},
                       {"slot_wait_ms", ms_or_null(s.slot_wait_s)}};
    add_figures(j["aggregated"], s);
  } else {
    j["aggregated"] = nullptr;
  }
  return j;
}

}  // namespace moeplan::planner
