// MeasuredCosts: exact hits, log-space interpolation, efficiency-held extrapolation, explicit
// misses that fall back to the roofline and say so; the local cluster form; padded capacity.
#include <gtest/gtest.h>

#include <cmath>

#include "planner/costs/cost_model.hpp"
#include "planner/costs/measured_costs.hpp"
#include "planner/topology/local_cluster.hpp"

namespace moeplan::planner {
namespace test_measured_costs {
namespace {

double linear_roof(const void*, double x) { return 2.0 * x; }
double flat_roof(const void*, double) { return 0.0; }

CostCurve curve() { return {{1.0, 4.0, 16.0}, {1.0, 16.0, 32.0}}; }

TEST(CurveLookup, ExactInterpolatedExtrapolated) {
  std::string src;
  EXPECT_DOUBLE_EQ(curve_lookup(curve(), 4.0, linear_roof, nullptr, &src), 16.0);
  EXPECT_EQ(src, kSourceExact);
  // log t linear in log x between (1, 1) and (4, 16): t = x² → 4 at x = 2.
  EXPECT_NEAR(curve_lookup(curve(), 2.0, linear_roof, nullptr, &src), 4.0, 1e-12);
  EXPECT_EQ(src, kSourceInterp);
  // Between (4, 16) and (16, 32): t = 8·√x → 8·√8 at x = 8.
  EXPECT_NEAR(curve_lookup(curve(), 8.0, linear_roof, nullptr, &src), 8.0 * std::sqrt(8.0), 1e-9);
  // Above the range: the last point's efficiency (roofline 32 / measured 32) held: 2·64 / 1.
  EXPECT_NEAR(curve_lookup(curve(), 64.0, linear_roof, nullptr, &src), 128.0, 1e-9);
  EXPECT_EQ(src, kSourceExtrap);
  // Below: the first point's efficiency (2 / 1): roofline 1 at x = 0.5 → 0.5.
  EXPECT_NEAR(curve_lookup(curve(), 0.5, linear_roof, nullptr, &src), 0.5, 1e-12);
  // Without a roofline figure the end point scales linearly with size.
  EXPECT_NEAR(curve_lookup(curve(), 32.0, flat_roof, nullptr, &src), 64.0, 1e-9);
}

Cluster test_cluster(int n) {
  DeviceSpec d;
  d.name = "cpu:test";
  d.peak_bf16_flops = d.peak_fp32_flops = d.peak_fp8_flops = 1e11;
  d.hbm_bandwidth = 1e10;
  d.hbm_bytes = 1e12;
  d.nvlink_bandwidth = 5e9;
  auto c = local_cluster(n, d, 2e-6);
  EXPECT_TRUE(c.ok());
  return *c;
}

CostPoint point(const std::string& op, const std::string& dtype, double m, double n, double k,
                double seconds, int group = 1) {
  CostPoint p;
  p.device = "cpu:test";
  p.backend = "cpu";
  p.op = op;
  p.dtype = dtype;
  p.m = m;
  p.n = n;
  p.k = k;
  p.group_size = group;
  p.bytes = m;
  p.flops = 2.0 * m * n * k;
  p.median_s = seconds;
  return p;
}

TEST(MeasuredCosts, AnswersNameTheirSource) {
  const Cluster cl = test_cluster(2);
  std::vector<CostPoint> pts = {point("gemm", "bf16", 1, 64, 32, 1e-6),
                                point("gemm", "bf16", 4, 64, 32, 4e-6),
                                point("permute", "bf16", 1024, 0, 0, 1e-5),
                                point("permute", "bf16", 4096, 0, 0, 4e-5),
                                point("all_to_all", "bf16", 1024, 1, 0, 2e-5, 2),
                                point("all_to_all", "bf16", 4096, 1, 0, 5e-5, 2)};
  CostPoint wrong = point("gemm", "bf16", 2, 64, 32, 1.0);
  wrong.disposition = Disposition::kIncorrect;  // never used
  pts.push_back(wrong);
  const MeasuredCosts mc(pts, cl, "measured:test.db");
  EXPECT_EQ(mc.name(), "measured:test.db");

  auto g = mc.gemm({4, 64, 32, DType::kBf16});
  ASSERT_TRUE(g.ok());
  EXPECT_DOUBLE_EQ(g->seconds, 4e-6);
  EXPECT_EQ(g->source, kSourceExact);
  g = mc.gemm({2, 64, 32, DType::kBf16});
  EXPECT_NEAR(g->seconds, 2e-6, 1e-15);  // log-log between (1, 1 µs) and (4, 4 µs)
  EXPECT_EQ(g->source, kSourceInterp);
  g = mc.gemm({8, 64, 32, DType::kBf16});
  EXPECT_EQ(g->source, kSourceExtrap);
  RooflineCosts roof(cl);
  const double r8 = roof.gemm({8, 64, 32, DType::kBf16})->seconds;
  const double r4 = roof.gemm({4, 64, 32, DType::kBf16})->seconds;
  EXPECT_NEAR(g->seconds, 4e-6 * r8 / r4, 1e-15);

  // A GEMM width the profile never measured, and another dtype: explicit misses.
  EXPECT_TRUE(mc.misses().empty());
  g = mc.gemm({4, 128, 32, DType::kBf16});
  EXPECT_EQ(g->source, kSourceMiss);
  EXPECT_DOUBLE_EQ(g->seconds, roof.gemm({4, 128, 32, DType::kBf16})->seconds);
  EXPECT_EQ(mc.gemm({4, 64, 32, DType::kFp16})->source, kSourceMiss);
  EXPECT_EQ(mc.misses(),
            (std::vector<std::string>{"gemm n=128 k=32 dtype=bf16", "gemm n=64 k=32 dtype=fp16"}));

  // Grouped GEMM: one GEMM per non-empty group, the worst source named.
  auto gg = mc.grouped_gemm({{1, 0, 4}, 64, 32, DType::kBf16});
  EXPECT_DOUBLE_EQ(gg->seconds, 5e-6);
  EXPECT_EQ(gg->source, kSourceExact);
  EXPECT_EQ(mc.grouped_gemm({{1, 2}, 64, 32, DType::kBf16})->source, kSourceInterp);

  auto e = mc.elementwise({"permute", 2048, DType::kBf16});
  EXPECT_NEAR(e->seconds, 2e-5, 1e-15);
  EXPECT_EQ(e->source, kSourceInterp);
  EXPECT_EQ(mc.elementwise({"stage", 2048, DType::kBf16})->source, kSourceMiss);

  auto c = mc.collective({CollectiveOp::kAllToAll, {{0, 1}}, 4096, {}, DType::kBf16});
  EXPECT_DOUBLE_EQ(c->seconds, 5e-5);
  EXPECT_EQ(c->source, kSourceExact);
  c = mc.collective({CollectiveOp::kAllToAll, {{0}, {1}}, 4096, {}, DType::kBf16});
  EXPECT_EQ(c->source, kSourceTrivial);
  EXPECT_DOUBLE_EQ(c->seconds, 0.0);
  EXPECT_EQ(mc.collective({CollectiveOp::kAllReduce, {{0, 1}}, 4096, {}, DType::kBf16})->source,
            kSourceMiss);
  EXPECT_FALSE(mc.collective({CollectiveOp::kAllToAll, {{0, 5}}, 4096, {}, DType::kBf16}).ok());
}

TEST(MeasuredCosts, AnswersWithTheChosenStatistic) {
  const Cluster cl = test_cluster(2);
  CostPoint p = point("gemm", "bf16", 4, 64, 32, 4e-6);
  p.p10_s = 3e-6;
  const MeasuredCosts median({p}, cl, "m");
  const MeasuredCosts p10({p}, cl, "m", CostStatistic::kP10);
  EXPECT_DOUBLE_EQ(median.gemm({4, 64, 32, DType::kBf16})->seconds, 4e-6);
  EXPECT_DOUBLE_EQ(p10.gemm({4, 64, 32, DType::kBf16})->seconds, 3e-6);
  EXPECT_EQ(parse_statistic("p10"), CostStatistic::kP10);
  EXPECT_FALSE(parse_statistic("mean").has_value());
  EXPECT_EQ(statistic_name(CostStatistic::kMedian), "median");
}

TEST(MeasuredCosts, DerivedDeviceSpecIsThePeaksOfTheProfile) {
  std::vector<CostPoint> pts = {
      point("gemm", "bf16", 4, 64, 32, 1e-6), point("gemm", "bf16", 64, 64, 32, 4e-6),
      point("stage", "bf16", 4096, 0, 0, 1e-6), point("all_to_all", "bf16", 4096, 1, 0, 1e-5, 2)};
  pts.back().bus_bandwidth = 2e8;
  const DeviceSpec d = derive_device_spec(pts, "cpu:test", 1e9);
  EXPECT_DOUBLE_EQ(d.peak_fp32_flops, 2.0 * 64 * 64 * 32 / 4e-6);
  EXPECT_DOUBLE_EQ(d.peak_bf16_flops, d.peak_fp32_flops);
  EXPECT_DOUBLE_EQ(d.hbm_bandwidth, 4096 / 1e-6);
  EXPECT_DOUBLE_EQ(d.nvlink_bandwidth, 2e8);
  EXPECT_DOUBLE_EQ(d.hbm_bytes, 1e9);
  EXPECT_DOUBLE_EQ(derive_link_latency(pts, "cpu:test"), 1e-5);
  EXPECT_EQ(point_devices(pts), (std::vector<std::string>{"cpu:test"}));
  // An attention point faster than every GEMM and elementwise op raises both peaks.
  CostPoint attn = point("attention", "bf16", 8, 1024, 8, 1e-6);
  attn.flops = 1e12 * 1e-6;
  attn.bytes = 1e10 * 1e-6;
  pts.push_back(attn);
  const DeviceSpec a = derive_device_spec(pts, "cpu:test", 1e9);
  EXPECT_DOUBLE_EQ(a.peak_fp32_flops, 1e12);
  EXPECT_DOUBLE_EQ(a.hbm_bandwidth, 1e10);
}

TEST(LocalCluster, ParsesAndBuilds) {
  EXPECT_FALSE(parse_local_cluster("2x-hgx-h200").has_value());
  ASSERT_TRUE(parse_local_cluster("local:4").has_value());
  EXPECT_EQ((*parse_local_cluster("local:4"))->num_ranks(), 4);
  for (const char* bad : {"local:", "local:0", "local:x2", "local:99999", "local:-1"}) {
    const auto r = parse_local_cluster(bad);
    ASSERT_TRUE(r.has_value()) << bad;
    EXPECT_FALSE(r->ok()) << bad;
  }
  const Cluster c = test_cluster(4);
  EXPECT_EQ(c.num_gpus(), 4);
  EXPECT_EQ(c.name(), "local:4");
  EXPECT_EQ(c.path(0, 3).size(), 2U);  // rank → shared memory → rank
  EXPECT_NEAR(c.path_latency(0, 3), 2e-6, 1e-15);
}

TEST(PaddedCapacity, LargestPerSourceCount) {
  // One source: the capacity is the largest slot count itself.
  EXPECT_DOUBLE_EQ(padded_capacity({10, 40, 25}, 1), 40.0);
  // Two sources: μ = 20, σ = √(20·½) ≈ 3.162, Blom z(2) = Φ⁻¹(1.625/2.25) ≈ 0.5895 → 21.86 → 22.
  EXPECT_DOUBLE_EQ(padded_capacity({10, 40, 25}, 2), 22.0);
  EXPECT_DOUBLE_EQ(padded_capacity({0, 0}, 4), 0.0);
}

}  // namespace
}  // namespace test_measured_costs
}  // namespace moeplan::planner
