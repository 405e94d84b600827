// Serving plans (issue 20): disaggregated prefill/decode pools against aggregated serving. The
// figures are checked against their definitions and against the instance plans they come from;
// targets bind; impossible ones and bad requests say what to change.
#include <gtest/gtest.h>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

#include "models/registry.hpp"
#include "planner/costs/cost_model.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/serving.hpp"
#include "planner/topology/local_cluster.hpp"

namespace moeplan::planner {
namespace test_serving {
namespace {

struct Fixture {
  models::MoeModel model = models::load_model("qwen3-30b-a3b").value();
  Cluster cluster = load_cluster("1x-hgx-h200").value();
  RooflineCosts costs{cluster};
  ServingRequest request() const {
    ServingRequest r;
    r.base.workload.phase = Phase::kDecode;
    r.base.workload.isl = 1024;
    r.base.workload.osl = 256;
    return r;
  }
};

const LayoutCost& recommended_of(const Plan& p) {
  return p.layouts[static_cast<std::size_t>(p.recommended)];
}

TEST(Serving, FiguresFollowTheirDefinitionsAndTheInstancePlans) {
  const Fixture f;
  const ServingRequest req = f.request();
  auto s = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(s->disaggregated.has_value());
  ASSERT_TRUE(s->aggregated.has_value());
  EXPECT_EQ(s->gpu_budget, 8);
  EXPECT_GT(s->plans_costed, 0);

  const DisaggServing& d = *s->disaggregated;
  EXPECT_EQ(d.gpus_used, d.prefill_instances * d.prefill.gpus + d.decode_instances * d.decode.gpus);
  EXPECT_LE(d.gpus_used, 8);
  EXPECT_GE(d.prefill_instances, 1);
  EXPECT_GE(d.decode_instances, 1);
  // No target and no offered rate: the deployment runs at the slower pool's rate.
  const double saturation = std::min(d.prefill_instances * d.prefill.requests_per_s,
                                     d.decode_instances * d.decode.requests_per_s);
  EXPECT_NEAR(d.requests_per_s, saturation, 1e-12 * saturation);
  // The prefill queue: each instance an M/D/1 queue of D = step / prompts at ρ = λ·D / x.
  const double per_prompt = d.prefill.step_s / d.prefill.batch;
  EXPECT_NEAR(d.prefill_utilization, d.requests_per_s * per_prompt / d.prefill_instances, 1e-12);
  EXPECT_LE(d.prefill_utilization, 1.0);
  EXPECT_DOUBLE_EQ(d.ttft_wait_s, md1_wait_seconds(d.prefill_utilization, per_prompt));
  // The decode slots: each instance an M/D/c queue of GPUs × sequences slots held osl·TPOT.
  EXPECT_NEAR(d.decode_utilization,
              d.requests_per_s / (d.decode_instances * d.decode.requests_per_s), 1e-12);
  EXPECT_DOUBLE_EQ(
      d.decode_slot_wait_s,
      mdc_wait_seconds(d.decode_utilization, static_cast<double>(d.decode.gpus) * d.decode.batch,
                       256 * d.decode.step_s));
  EXPECT_DOUBLE_EQ(d.ttft_s,
                   d.ttft_wait_s + d.prefill.step_s + d.kv_transfer_s + d.decode_slot_wait_s);
  // At the slower pool's capacity its queue grows without bound: no finite mean TTFT.
  EXPECT_TRUE(d.prefill_utilization == 1.0 || d.decode_utilization == 1.0);
  EXPECT_TRUE(std::isinf(d.ttft_s));
  EXPECT_DOUBLE_EQ(d.tpot_s, d.decode.step_s);
  EXPECT_DOUBLE_EQ(d.tokens_per_s_per_gpu, d.requests_per_s * 256 / 8);
  EXPECT_DOUBLE_EQ(d.tokens_per_s_per_user, 1.0 / d.tpot_s);
  // The KV cache of a request: 1024 tokens × K and V of 4 heads × 128 × bf16 × 48 layers.
  EXPECT_DOUBLE_EQ(d.kv_bytes_per_request, 1024.0 * 2 * 4 * 128 * 2 * 48);
  // Sent over NVLink (450 GB/s per GPU, each prefill GPU its share): at least bytes / (p · bw).
  EXPECT_GE(d.kv_transfer_s, d.prefill.batch * d.kv_bytes_per_request / (d.prefill.gpus * 450e9));
  // Each pool's instance is its own plan's recommendation.
  PlanRequest pre = req.base;
  pre.workload.phase = Phase::kPrefill;
  pre.workload.tokens_per_gpu = (d.prefill.batch * 1024 + d.prefill.gpus - 1) / d.prefill.gpus;
  pre.num_gpus = d.prefill.gpus;
  auto pp = make_plan(f.model, f.cluster, f.costs, pre);
  ASSERT_TRUE(pp.ok());
  EXPECT_DOUBLE_EQ(recommended_of(*pp).step_seconds, d.prefill.step_s);
  EXPECT_DOUBLE_EQ(d.prefill.requests_per_s, d.prefill.batch / d.prefill.step_s);
  PlanRequest dec = req.base;
  dec.workload.tokens_per_gpu = d.decode.batch;
  dec.num_gpus = d.decode.gpus;
  auto dp = make_plan(f.model, f.cluster, f.costs, dec);
  ASSERT_TRUE(dp.ok());
  EXPECT_DOUBLE_EQ(recommended_of(*dp).step_seconds, d.decode.step_s);
  EXPECT_DOUBLE_EQ(d.decode.requests_per_s,
                   d.decode.gpus * static_cast<double>(d.decode.batch) / (256 * d.decode.step_s));

  // Aggregated, chunked prefill: decode passes (the decode plan's step at the batch) and mixed
  // passes carrying c = c_bal·2^k prompt tokens per GPU, c_bal = b·isl/osl, a share
  // x = c_bal / c of them; the mean pass is the TPOT.
  const AggServing& a = *s->aggregated;
  const int g = a.instance.gpus, b = a.instance.batch;
  PlanRequest agg_dec = req.base;
  agg_dec.workload.tokens_per_gpu = b;
  agg_dec.num_gpus = g;
  auto adp = make_plan(f.model, f.cluster, f.costs, agg_dec);
  ASSERT_TRUE(adp.ok());
  EXPECT_DOUBLE_EQ(a.decode_pass_s, recommended_of(*adp).step_seconds);
  const double c_bal = 4.0 * b;  // 1024 / 256 prompt tokens per decoded token
  EXPECT_DOUBLE_EQ(a.mixed_share, c_bal / a.chunk_tokens_per_gpu);
  const double k = std::log2(a.chunk_tokens_per_gpu / c_bal);
  EXPECT_DOUBLE_EQ(k, std::round(k));
  EXPECT_GE(k, 0.0);
  EXPECT_LE(k, 3.0);
  // The mixed pass: the MoE blocks and dense MLPs over c + b rows, each layer's attention block
  // over the chunk and the decode rows in one batch, the head with every decode row's logits.
  Workload mixed = req.base.workload;
  mixed.phase = Phase::kPrefill;
  mixed.tokens_per_gpu = static_cast<int>(a.chunk_tokens_per_gpu) + b;
  const ExpertLoad uniform = ExpertLoad::uniform(f.model.num_moe_layers(), f.model.num_experts);
  const CostContext mixed_ctx{f.model, f.cluster, f.costs, mixed, uniform, nullptr};
  auto rows = cost_layout(mixed_ctx, a.instance.layout.layout);
  auto attn = cost_mixed_attention(mixed_ctx, a.instance.layout.layout, a.chunk_tokens_per_gpu, b);
  auto head = cost_mixed_head(mixed_ctx, a.instance.layout.layout, a.chunk_tokens_per_gpu, b);
  ASSERT_TRUE(rows.ok() && attn.ok() && head.ok());
  const double layers = f.model.num_hidden_layers;
  EXPECT_NEAR(a.mixed_pass_s,
              rows->step_seconds + layers * (attn->seconds - rows->dense.attention.seconds) +
                  (head->seconds - rows->dense.head.seconds),
              1e-12 * a.mixed_pass_s);
  EXPECT_GT(head->seconds, rows->dense.head.seconds);  // b more rows of logits
  EXPECT_GT(a.mixed_pass_s, a.decode_pass_s);          // the chunk adds work to the decode rows
  EXPECT_DOUBLE_EQ(a.tpot_s,
                   a.mixed_share * a.mixed_pass_s + (1.0 - a.mixed_share) * a.decode_pass_s);
  // The prompt-token queue: D = t_m·isl / (g·c); no target: ρ is the batch's, min(1, λ_sat·D).
  const double d_prompt = a.mixed_pass_s * 1024 / (g * a.chunk_tokens_per_gpu);
  EXPECT_DOUBLE_EQ(a.prefill_s, d_prompt);
  const double lambda_sat = g * static_cast<double>(b) / (256 * a.tpot_s);
  EXPECT_NEAR(a.prefill_utilization, std::min(1.0, lambda_sat * d_prompt), 1e-12);
  EXPECT_NEAR(a.requests_per_s, a.prefill_utilization / d_prompt * a.instances,
              1e-12 * a.requests_per_s);
  EXPECT_DOUBLE_EQ(a.ttft_wait_s,
                   md1_wait_seconds(a.prefill_utilization, d_prompt) + a.decode_pass_s / 2);
  // The g·b sequence slots, each held osl·t̄: at the batch's saturation rate, utilisation 1.
  EXPECT_NEAR(a.slot_utilization, a.requests_per_s / a.instances / lambda_sat, 1e-12);
  EXPECT_DOUBLE_EQ(a.slot_utilization, 1.0);
  EXPECT_DOUBLE_EQ(a.slot_wait_s, mdc_wait_seconds(a.slot_utilization, g * static_cast<double>(b),
                                                   256 * a.tpot_s));
  EXPECT_DOUBLE_EQ(a.ttft_s, std::max(d_prompt, a.mixed_pass_s) + a.ttft_wait_s + a.slot_wait_s);
  EXPECT_TRUE(std::isinf(a.ttft_s));
  EXPECT_EQ(a.instances, 8 / a.instance.gpus);
  EXPECT_DOUBLE_EQ(a.tokens_per_s_per_gpu, a.requests_per_s * 256 / 8);

  // The recommendation is the deployment with more requests/s.
  EXPECT_EQ(s->recommended, d.requests_per_s >= a.requests_per_s ? "disaggregated" : "aggregated");
  const auto j = serving_to_json(*s);
  EXPECT_EQ(j.at("recommended"), s->recommended);
  EXPECT_TRUE(j.at("disaggregated").at("ttft_ms").is_null());  // unbounded
  EXPECT_DOUBLE_EQ(j.at("disaggregated").at("decode_utilization").get<double>(),
                   d.decode_utilization);
  EXPECT_DOUBLE_EQ(j.at("aggregated").at("slot_utilization").get<double>(), a.slot_utilization);
  EXPECT_DOUBLE_EQ(j.at("disaggregated").at("prefill_utilization").get<double>(),
                   d.prefill_utilization);
  EXPECT_TRUE(j.at("arrival_rate").is_null());
  EXPECT_EQ(j.at("aggregated").at("instance").at("sequences_per_gpu"), a.instance.batch);
}

TEST(Serving, TargetsBindBothDeployments) {
  const Fixture f;
  auto free_plan = plan_serving(f.model, f.cluster, f.costs, f.request());
  ASSERT_TRUE(free_plan.ok());
  ASSERT_TRUE(free_plan->disaggregated && free_plan->aggregated);
  // Targets tighter than the unconstrained answers (whose mean TTFT is unbounded: a pool at its
  // capacity): the new answers meet them. The TTFT target: twice the free split's bare prefill
  // step and KV transfer.
  ServingRequest req = f.request();
  req.tpot_target_s = 0.8 * free_plan->disaggregated->tpot_s;
  req.ttft_target_s =
      2.0 * (free_plan->disaggregated->prefill.step_s + free_plan->disaggregated->kv_transfer_s);
  auto s = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_TRUE(s.ok());
  if (s->disaggregated) {
    EXPECT_LE(s->disaggregated->tpot_s, req.tpot_target_s);
    EXPECT_LE(s->disaggregated->requests_per_s, free_plan->disaggregated->requests_per_s);
  }
  // At the boundary the mean TTFT is the target itself: a few ulps of rounding apart.
  constexpr double kUlps = 1e-12;
  if (s->disaggregated) {
    EXPECT_LE(s->disaggregated->ttft_s, req.ttft_target_s * (1.0 + kUlps));
    EXPECT_LT(s->disaggregated->decode_utilization, 1.0);
    EXPECT_LT(s->disaggregated->prefill_utilization, 1.0);
  }
  if (s->aggregated) {
    EXPECT_LE(s->aggregated->tpot_s, req.tpot_target_s * (1.0 + kUlps));
    EXPECT_LE(s->aggregated->ttft_s, req.ttft_target_s * (1.0 + kUlps));
  }
  // Impossible targets: nothing recommended, and the reason says what to change.
  req.tpot_target_s = 1e-6;
  auto none = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->disaggregated.has_value());
  EXPECT_FALSE(none->aggregated.has_value());
  EXPECT_EQ(none->recommended, "");
  ASSERT_EQ(none->reasons.size(), 1U);
  EXPECT_NE(none->reasons[0].find("meets the targets"), std::string::npos) << none->reasons[0];
  // The inputs by the library's names, which each front end spells its own way; the JSON as
  // the CLI's flags.
  EXPECT_NE(none->reasons[0].find("relax {ttft_ms}/{tpot_ms}, shorten {isl}/{osl}"),
            std::string::npos)
      << none->reasons[0];
  const auto j = serving_to_json(*none);
  EXPECT_NE(j.at("reasons").at(0).get<std::string>().find(
                "relax --ttft-ms/--tpot-ms, shorten --isl/--osl"),
            std::string::npos)
      << j.dump();
}

// A TTFT target bounds the queue: the prefill pool runs below its capacity, at the utilisation
// whose M/D/1 wait fills the slack the step and the transfer leave.
TEST(Serving, TtftTargetHoldsThePrefillQueueBelowCapacity) {
  const Fixture f;
  ServingRequest req = f.request();
  req.instance_gpus = {1, 2, 4};
  req.prefill_prompts = {8};  // one prompt count: the pool's step is fixed
  auto free_plan = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_TRUE(free_plan.ok() && free_plan->disaggregated);
  const DisaggServing& fd = *free_plan->disaggregated;
  // A target halfway between the bare service (step + transfer) and the free plan's mean.
  const double service = fd.prefill.step_s + fd.kv_transfer_s;
  req.ttft_target_s = service + 0.25 * fd.prefill.step_s / fd.prefill.batch;
  auto s = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_TRUE(s.ok() && s->disaggregated) << (s.ok() ? s->reasons[0] : s.error().message);
  const DisaggServing& d = *s->disaggregated;
  const double per_prompt = d.prefill.step_s / d.prefill.batch;
  const double slack = req.ttft_target_s - d.prefill.step_s - d.kv_transfer_s;
  ASSERT_GE(slack, 0.0);
  EXPECT_LE(d.prefill_utilization, 2.0 * slack / (per_prompt + 2.0 * slack) * (1.0 + 1e-12));
  EXPECT_LT(d.prefill_utilization, 1.0);
  EXPECT_LE(d.ttft_s, req.ttft_target_s * (1.0 + 1e-12));
  EXPECT_LE(d.requests_per_s,
            d.prefill_instances * d.prefill_utilization / per_prompt * (1.0 + 1e-12));
  // A target under every size's bare step of 8 prompts: no disaggregated deployment.
  double fastest = fd.prefill.step_s;
  for (const int p : req.instance_gpus) {
    PlanRequest pre = req.base;
    pre.workload.phase = Phase::kPrefill;
    pre.workload.tokens_per_gpu = (8 * 1024 + p - 1) / p;
    pre.num_gpus = p;
    auto pp = make_plan(f.model, f.cluster, f.costs, pre);
    ASSERT_TRUE(pp.ok());
    if (pp->recommended >= 0) fastest = std::min(fastest, recommended_of(*pp).step_seconds);
  }
  req.ttft_target_s = 0.99 * fastest;
  auto none = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->disaggregated.has_value());
}

// An offered rate: the fewest GPUs that serve it. Every pool has the capacity, the prefill queue
// is stable, and a higher rate never needs fewer GPUs.
TEST(Serving, OfferedRateIsServedOnTheFewestGpus) {
  const Fixture f;
  auto free_plan = plan_serving(f.model, f.cluster, f.costs, f.request());
  ASSERT_TRUE(free_plan.ok() && free_plan->disaggregated && free_plan->aggregated);
  const double most =
      std::max(free_plan->disaggregated->requests_per_s, free_plan->aggregated->requests_per_s);
  int last_gpus = 0;
  for (const double share : {0.05, 0.25, 0.6}) {
    ServingRequest req = f.request();
    req.arrival_rate = share * most;
    auto s = plan_serving(f.model, f.cluster, f.costs, req);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_FALSE(s->recommended.empty()) << s->reasons[0];
    int gpus = 8;
    if (s->disaggregated) {
      const DisaggServing& d = *s->disaggregated;
      EXPECT_DOUBLE_EQ(d.requests_per_s, req.arrival_rate);
      EXPECT_LT(d.prefill_utilization, 1.0);
      EXPECT_GE(d.decode_instances * d.decode.requests_per_s, req.arrival_rate);
      EXPECT_LT((d.decode_instances - 1) * d.decode.requests_per_s, req.arrival_rate);
      EXPECT_DOUBLE_EQ(d.tokens_per_s_per_gpu, req.arrival_rate * 256 / d.gpus_used);
      EXPECT_TRUE(std::isfinite(d.ttft_s));
      gpus = std::min(gpus, d.gpus_used);
    }
    if (s->aggregated) {
      const AggServing& a = *s->aggregated;
      EXPECT_NEAR(a.requests_per_s, req.arrival_rate, 1e-12 * req.arrival_rate);
      EXPECT_NEAR(a.prefill_utilization, req.arrival_rate / a.instances * a.prefill_s, 1e-12);
      EXPECT_LT(a.prefill_utilization, 1.0);
      gpus = std::min(gpus, a.gpus_used);
    }
    const int rec =
        s->recommended == "disaggregated" ? s->disaggregated->gpus_used : s->aggregated->gpus_used;
    EXPECT_EQ(rec, gpus);
    EXPECT_GE(gpus, last_gpus) << req.arrival_rate << " requests/s";
    last_gpus = gpus;
    EXPECT_NEAR(serving_to_json(*s).at("arrival_rate").get<double>(), req.arrival_rate, 0.0);
  }
  // More than the budget serves: nothing, and the reason says what to change.
  ServingRequest req = f.request();
  req.arrival_rate = 2.0 * most;
  auto none = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->recommended, "");
  ASSERT_EQ(none->reasons.size(), 1U);
  EXPECT_NE(none->reasons[0].find("lower {rate}"), std::string::npos) << none->reasons[0];
  // A rate far past any instance count an int holds: the same answer, no overflow.
  req.arrival_rate = 1e15;
  auto far = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_TRUE(far.ok());
  EXPECT_EQ(far->recommended, "");
  req.arrival_rate = -1.0;
  auto bad = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().input, "rate");
  req.arrival_rate = 0.0;
  req.ttft_target_s = std::numeric_limits<double>::infinity();
  bad = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().input, "ttft-ms");
}

// The queueing formulas against simulations of the queues they stand for. Poisson arrivals,
// mean of the simulated TTFT with its standard error from 40 batch means; the check is 5
// standard errors wide (a fixed seed: the run is the same every time).
struct Sim {
  double mean = 0.0;
  double standard_error = 0.0;
};
Sim batch_means(std::vector<double> v) {
  v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 20));  // warm-up
  constexpr std::size_t kBatches = 40;
  const std::size_t per = v.size() / kBatches;
  std::vector<double> means;
  for (std::size_t b = 0; b < kBatches; ++b) {
    double sum = 0.0;
    for (std::size_t i = b * per; i < (b + 1) * per; ++i) sum += v[i];
    means.push_back(sum / static_cast<double>(per));
  }
  double mean = 0.0, var = 0.0;
  for (const double m : means) mean += m / kBatches;
  for (const double m : means) var += (m - mean) * (m - mean) / (kBatches - 1);
  return {mean, std::sqrt(var / kBatches)};
}

/// Poisson arrival times at `rate`, from a fixed seed.
std::vector<double> poisson_arrivals(double rate, std::size_t count) {
  std::mt19937_64 rng(20261205);
  std::exponential_distribution<double> gap(rate);
  std::vector<double> t(count);
  double now = 0.0;
  for (double& x : t) x = now += gap(rng);
  return t;
}

TEST(ServingQueue, Md1WaitIsThePollaczekKhinchineMean) {
  EXPECT_DOUBLE_EQ(md1_wait_seconds(0.0, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(md1_wait_seconds(0.5, 2.0), 1.0);  // 0.5·2 / (2·0.5)
  EXPECT_TRUE(std::isinf(md1_wait_seconds(1.0, 1.0)));
}

// Erlang's C against its definition: ρ at one server (M/M/1 waits with probability ρ), 1/3 at two
// servers and one Erlang, and the textbook recursion of Erlang's B at 1,000 servers.
TEST(ServingQueue, ErlangCAgainstItsDefinition) {
  for (const double rho : {0.1, 0.5, 0.9}) EXPECT_NEAR(erlang_c(1.0, rho), rho, 1e-12);
  EXPECT_NEAR(erlang_c(2.0, 0.5), 1.0 / 3.0, 1e-12);
  for (const double rho : {0.9, 0.97, 0.995}) {
    const int c = 1000;
    const double a = rho * c;
    double b = 1.0;  // B(0) = 1, B(k) = a·B(k − 1) / (k + a·B(k − 1))
    for (int k = 1; k <= c; ++k) b = a * b / (k + a * b);
    const double exact = c * b / (c - a * (1.0 - b));
    EXPECT_NEAR(erlang_c(c, rho), exact, 1e-9 * exact) << "ρ " << rho;
  }
  EXPECT_EQ(erlang_c(64.0, 0.0), 0.0);
  EXPECT_EQ(erlang_c(64.0, 1.0), 1.0);
}

// The wait for a free decode slot (M/D/c: c slots, each held S) against a simulation of the FIFO
// queue (deterministic service: a request starts when it arrives or when the request c places
// ahead of it ends). The mean is Cosmetatos' approximation, reported within a few percent of the
// exact M/D/c wait (Tijms, A First Course in Stochastic Models, 5.2): the check allows 3% plus
// 5 standard errors of the batch means. It is exact at one slot (M/D/1). The quantile from the
// M/M/c tail is never below the simulated one (exponential service waits longer).
TEST(ServingQueue, MdcWaitAgainstASimulation) {
  EXPECT_DOUBLE_EQ(mdc_wait_seconds(0.7, 1.0, 2.0), md1_wait_seconds(0.7, 2.0));
  EXPECT_TRUE(std::isinf(mdc_wait_seconds(1.0, 8.0, 1.0)));
  EXPECT_EQ(mdc_wait_seconds(0.0, 8.0, 1.0), 0.0);
  constexpr double kS = 1.0;
  for (const double c : {1.0, 8.0, 64.0}) {
    for (const double rho : {0.8, 0.9, 0.95}) {
      const std::vector<double> arrival = poisson_arrivals(rho * c / kS, 400000);
      const auto ahead = static_cast<std::size_t>(c);
      std::vector<double> start(arrival.size()), wait(arrival.size());
      for (std::size_t i = 0; i < arrival.size(); ++i) {
        start[i] = i >= ahead ? std::max(arrival[i], start[i - ahead] + kS) : arrival[i];
        wait[i] = start[i] - arrival[i];
      }
      std::vector<double> sorted(wait.begin() + static_cast<std::ptrdiff_t>(wait.size() / 20),
                                 wait.end());
      const Sim sim = batch_means(wait);
      const double model = mdc_wait_seconds(rho, c, kS);
      EXPECT_NEAR(model, sim.mean, 0.03 * sim.mean + 5.0 * sim.standard_error)
          << "c " << c << " ρ " << rho;
      std::sort(sorted.begin(), sorted.end());
      for (const double p : {0.9, 0.99}) {
        const double simulated =
            sorted[static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1))];
        EXPECT_GE(mdc_wait_quantile(rho, c, kS, p), simulated) << "c " << c << " ρ " << rho;
      }
    }
  }
}

// A prefill instance: it runs what waits, up to n prompts a step, the step's time D per prompt
// (work-conserving: the work in it moves as an M/D/1 queue's). A prompt's TTFT is the work ahead
// (the M/D/1 wait) + its step: between W + D and W + n·D — the plan prices the upper end.
TEST(ServingQueue, PrefillInstanceLiesBetweenItsBounds) {
  constexpr double kD = 1.0;
  constexpr int kN = 8;
  for (const double rho : {0.3, 0.7, 0.9}) {
    const std::vector<double> arrival = poisson_arrivals(rho / kD, 400000);
    std::vector<double> ttft;
    double free_at = 0.0;
    for (std::size_t i = 0; i < arrival.size();) {
      const double start = std::max(free_at, arrival[i]);
      std::size_t j = i;  // the step: the prompts waiting at its start, up to n
      while (j < arrival.size() && j - i < kN && arrival[j] <= start) ++j;
      free_at = start + static_cast<double>(j - i) * kD;
      for (; i < j; ++i) ttft.push_back(free_at - arrival[i]);
    }
    const Sim sim = batch_means(ttft);
    const double w = md1_wait_seconds(rho, kD);
    EXPECT_GE(sim.mean, w + kD - 5.0 * sim.standard_error) << "ρ " << rho;
    EXPECT_LE(sim.mean, w + kN * kD + 5.0 * sim.standard_error) << "ρ " << rho;
  }
}

// An aggregated instance: prompts first (each D of chunk work), decode passes (τ each) whenever
// none waits. A prompt's wait is the M/D/1 wait over the prompts + the residual decode pass,
// τ/2 (an M/D/1 queue with vacations: Fuhrmann–Cooper): the plan's ρ·D / (2·(1 − ρ)) + τ/2.
TEST(ServingQueue, AggregatedWaitIsTheQueueWithDecodeVacations) {
  constexpr double kTp = 1.0;
  for (const auto& [f, tau] : {std::pair{0.3, 0.2}, std::pair{0.6, 1.3}, std::pair{0.85, 0.5}}) {
    const std::vector<double> arrival = poisson_arrivals(f / kTp, 400000);
    std::vector<double> wait;
    double clock = 0.0;
    for (std::size_t i = 0; i < arrival.size();) {
      if (arrival[i] > clock) {
        clock += tau;  // no prompt waits: a decode pass
        continue;
      }
      wait.push_back(clock - arrival[i++]);
      clock += kTp;
    }
    const Sim sim = batch_means(wait);
    const double plan = md1_wait_seconds(f, kTp) + tau / 2.0;
    EXPECT_NEAR(sim.mean, plan, 5.0 * sim.standard_error) << "f " << f << ", τ " << tau;
  }
}

// Erlang's exact M/D/1 waiting-time distribution (D = 1): P(W ≤ t) = (1 − ρ) Σ_{k ≤ t}
// (ρ(k − t))^k / k! · e^(ρ(t − k)), an alternating sum, evaluated with 100 digits.
double md1_exact_exceed(double rho, double t) {
  if (t < 0.0) return 1.0;
  using Big = boost::multiprecision::cpp_bin_float_100;
  Big sum = 0, fact = 1;
  for (int k = 0; k <= static_cast<int>(std::floor(t)); ++k) {
    if (k > 0) fact *= k;
    const Big x = Big(rho) * (Big(t) - k);
    const Big term = boost::multiprecision::pow(x, k) / fact * boost::multiprecision::exp(x);
    sum += (k % 2 == 0) ? term : Big(-term);
  }
  return static_cast<double>(1 - (1 - Big(rho)) * sum);
}

// The percentile of the wait against the exact distribution: the probability past it is 1 − p
// within 10^−6 — below ρ·t = 20 it is Erlang's sum itself in long double (cancellation at most
// e^20·2^−64 ≈ 3·10^−11), above it the tail's exponential asymptote, whose error has died out
// at the waits of 10 D and more it is used for; exactly 0 where P(W = 0) = 1 − ρ covers p.
// (Before the exact sum the asymptote alone was 16% off in probability below ρ 0.7.)
TEST(ServingQueue, Md1QuantileAgainstErlangsExactDistribution) {
  for (const double rho : {0.3, 0.5, 0.7, 0.8, 0.9, 0.95}) {
    for (const double p : {0.5, 0.75, 0.9, 0.99, 0.999}) {
      const double q = md1_wait_quantile(rho, 1.0, p);
      if (p <= 1.0 - rho) {
        EXPECT_EQ(q, 0.0) << "ρ " << rho << " p " << p;
        continue;
      }
      EXPECT_NEAR(md1_exact_exceed(rho, q) / (1.0 - p), 1.0, 1e-6) << "ρ " << rho << " p " << p;
      EXPECT_NEAR(md1_wait_quantile(rho, 2.5, p), 2.5 * q, 1e-12 * q);  // scales with D
    }
  }
  EXPECT_TRUE(std::isinf(md1_wait_quantile(1.0, 1.0, 0.9)));
  EXPECT_EQ(percentile_name(0.99), "p99");
  EXPECT_EQ(percentile_name(0.999), "p99.9");
}

// With decode passes as vacations the wait adds the pass in flight's residual, uniform on
// [0, t_d]: P(W + U·t_d > t) = (1/t_d)·∫ P(W > t − v) dv, from the exact distribution (Simpson's
// rule past the jump at v = t).
TEST(ServingQueue, VacationQuantileAgainstTheExactDistribution) {
  for (const auto& [rho, v] : {std::pair{0.7, 0.5}, std::pair{0.8, 1.0}, std::pair{0.9, 2.0}}) {
    for (const double p : {0.9, 0.99}) {
      const double q = md1_vacation_wait_quantile(rho, 1.0, v, p);
      const double upper = std::min(q, v);
      constexpr int kSteps = 400;
      const double h = upper / kSteps;
      double integral = 0.0;
      for (int i = 0; i <= kSteps; ++i) {
        const double f = md1_exact_exceed(rho, q - i * h);
        integral += f * (i == 0 || i == kSteps ? 1.0 : (i % 2 == 1 ? 4.0 : 2.0));
      }
      integral *= h / 3.0;
      const double exceed = (integral + std::max(0.0, v - q)) / v;
      EXPECT_NEAR(exceed / (1.0 - p), 1.0, 0.025) << "ρ " << rho << " t_d " << v << " p " << p;
      EXPECT_GT(q, md1_wait_quantile(rho, 1.0, p));
      EXPECT_LT(q, md1_wait_quantile(rho, 1.0, p) + v);
    }
  }
}

// A TTFT percentile target: the percentile meets it, and it binds harder than the same target
// on the mean.
TEST(Serving, PercentileTargetBindsThePercentile) {
  const Fixture f;
  ServingRequest req = f.request();
  req.ttft_target_s = 0.3;
  auto mean = plan_serving(f.model, f.cluster, f.costs, req);
  req.ttft_percentile = 0.99;
  auto p99 = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_TRUE(mean.ok() && p99.ok());
  ASSERT_TRUE(mean->disaggregated && p99->disaggregated && p99->aggregated);
  for (const double q : {p99->disaggregated->ttft_quantile_s, p99->aggregated->ttft_quantile_s}) {
    EXPECT_GT(q, 0.0);
    EXPECT_LE(q, 0.3 * (1.0 + 1e-9));
  }
  EXPECT_GT(p99->disaggregated->ttft_quantile_s, p99->disaggregated->ttft_s);
  EXPECT_LE(p99->disaggregated->requests_per_s, mean->disaggregated->requests_per_s);
  EXPECT_EQ(mean->disaggregated->ttft_quantile_s, 0.0);  // not asked
  const auto j = serving_to_json(*p99);
  EXPECT_DOUBLE_EQ(j.at("ttft_percentile").get<double>(), 99.0);
  EXPECT_DOUBLE_EQ(j.at("disaggregated").at("ttft_quantile_ms").get<double>(),
                   p99->disaggregated->ttft_quantile_s * 1e3);
  req.ttft_percentile = 1.0;
  auto bad = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().input, "ttft-percentile");
}

// The decode batches a sweep tries: given ones ascending and once each, the default when none.
TEST(Serving, SweepBatchesAreAscendingUniqueAndBounded) {
  auto given = sweep_batches({384, 64, 384});
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(*given, (std::vector<int>{64, 384}));
  auto none = sweep_batches({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, default_pareto_batches());
  auto zero = sweep_batches({8, 0});
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().input, "batches");
  const Fixture f;
  ServingRequest req = f.request();
  req.decode_batches = {0};
  auto e = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().input, "batches");
}

TEST(Serving, BadRequestsNameTheInput) {
  const Fixture f;
  ServingRequest req = f.request();
  req.base.workload.osl = 0;
  auto e = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().input, "isl");
  req = f.request();
  req.gpu_budget = 16;  // one HGX has 8
  e = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("2 to 8 GPUs"), std::string::npos) << e.error().message;
  req.gpu_budget = 1;
  EXPECT_FALSE(plan_serving(f.model, f.cluster, f.costs, req).ok());
  // A one-GPU cluster (local:1) cannot split into pools: said so, not "2 to 1 GPUs".
  const auto one = local_cluster(1, f.cluster.device(), 2e-6);
  ASSERT_TRUE(one.ok());
  req.gpu_budget = 0;
  e = plan_serving(f.model, *one, RooflineCosts(*one), req);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("needs at least 2 GPUs; local:1 has 1"), std::string::npos)
      << e.error().message;
}

}  // namespace
}  // namespace test_serving
}  // namespace moeplan::planner
