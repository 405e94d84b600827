// Serving plans (issue 20): disaggregated prefill/decode pools against aggregated serving. The
// figures are checked against their definitions and against the instance plans they come from;
// targets bind; impossible ones and bad requests say what to change.
#include <gtest/gtest.h>

#include <cmath>

#include "models/registry.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/serving.hpp"
#include "planner/topology/local_cluster.hpp"

namespace moeplan::planner {
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
  EXPECT_DOUBLE_EQ(d.requests_per_s, std::min(d.prefill_instances * d.prefill.requests_per_s,
                                              d.decode_instances * d.decode.requests_per_s));
  EXPECT_DOUBLE_EQ(d.ttft_s, d.prefill.step_s + d.kv_transfer_s);
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

  // Aggregated: the steady state λ = A / (1 + A·t_p) per instance, decode stretched by 1 − f.
  const AggServing& a = *s->aggregated;
  const double big_a =
      a.instance.gpus * static_cast<double>(a.instance.batch) / (256 * a.instance.step_s);
  const double lambda = big_a / (1.0 + big_a * a.prefill_s);
  EXPECT_NEAR(a.requests_per_s, lambda * a.instances, 1e-9 * a.requests_per_s);
  EXPECT_NEAR(a.prefill_share, lambda * a.prefill_s, 1e-12);
  EXPECT_DOUBLE_EQ(a.tpot_s, a.instance.step_s / (1.0 - a.prefill_share));
  EXPECT_EQ(a.instances, 8 / a.instance.gpus);
  EXPECT_DOUBLE_EQ(a.tokens_per_s_per_gpu, a.requests_per_s * 256 / 8);

  // The recommendation is the deployment with more requests/s.
  EXPECT_EQ(s->recommended, d.requests_per_s >= a.requests_per_s ? "disaggregated" : "aggregated");
  const auto j = serving_to_json(*s);
  EXPECT_EQ(j.at("recommended"), s->recommended);
  EXPECT_DOUBLE_EQ(j.at("disaggregated").at("ttft_ms").get<double>(), d.ttft_s * 1e3);
  EXPECT_EQ(j.at("aggregated").at("instance").at("sequences_per_gpu"), a.instance.batch);
}

TEST(Serving, TargetsBindBothDeployments) {
  const Fixture f;
  auto free_plan = plan_serving(f.model, f.cluster, f.costs, f.request());
  ASSERT_TRUE(free_plan.ok());
  ASSERT_TRUE(free_plan->disaggregated && free_plan->aggregated);
  // Targets tighter than the unconstrained answers: the new answers meet them.
  ServingRequest req = f.request();
  req.tpot_target_s = 0.8 * free_plan->disaggregated->tpot_s;
  req.ttft_target_s =
      0.8 * std::max(free_plan->disaggregated->ttft_s, free_plan->aggregated->ttft_s);
  auto s = plan_serving(f.model, f.cluster, f.costs, req);
  ASSERT_TRUE(s.ok());
  if (s->disaggregated) {
    EXPECT_LE(s->disaggregated->tpot_s, req.tpot_target_s);
    EXPECT_LE(s->disaggregated->ttft_s, req.ttft_target_s);
    EXPECT_LE(s->disaggregated->requests_per_s, free_plan->disaggregated->requests_per_s);
  }
  if (s->aggregated) {
    EXPECT_LE(s->aggregated->tpot_s, req.tpot_target_s);
    EXPECT_LE(s->aggregated->ttft_s, req.ttft_target_s);
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
  EXPECT_NE(none->reasons[0].find("relax --ttft-ms/--tpot-ms"), std::string::npos);
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
}  // namespace moeplan::planner
