// The calibrated roofline: the bundled calibrations load with their provenance, the C++ forms
// give what scripts/aiconfigurator/fit_calibration.py computes, each answer says whether it is
// calibrated, what the calibration lacks keeps the plain formula, and the cost model books the
// fused MoE kernel once.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "models/registry.hpp"
#include "planner/costs/calibration.hpp"
#include "planner/costs/cost_model.hpp"
#include "planner/costs/roofline_costs.hpp"

namespace moeplan::planner {
namespace test_roofline_calibrated {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<const Calibration> calibration(const std::string& device) {
  auto c = load_calibration(device);
  EXPECT_TRUE(c.ok()) << c.error().message;
  if (!c.ok() || !*c) return nullptr;
  return std::make_shared<const Calibration>(std::move(**c));
}

Cluster cluster(const std::string& name) {
  auto c = load_cluster(name);
  EXPECT_TRUE(c.ok()) << c.error().message;
  return *c;
}

MoeFusedQuery fused(double tokens, double hidden, double inter, int top_k, int experts, int tp,
                    int ep, DType dtype = DType::kBf16, const std::string& format = "") {
  MoeFusedQuery q;
  q.tokens = tokens;
  q.hidden = hidden;
  q.inter = inter;
  q.top_k = top_k;
  q.num_experts = experts;
  q.tp_size = tp;
  q.ep_size = ep;
  q.dtype = dtype;
  q.format = format;
  return q.balanced();
}

TEST(Calibration, BundledDevicesLoadWithProvenance) {
  for (const char* device : {"h100", "h200", "b200_sxm"}) {
    const auto c = calibration(device);
    ASSERT_NE(c, nullptr) << device;
    EXPECT_EQ(c->device, device);
    EXPECT_EQ(c->provenance, "aiconfigurator-core 0.12.0, trtllm 1.3.0rc20");
    for (const char* dt : {"bf16", "fp8", "fp8_block"}) {
      EXPECT_EQ(c->moe.count(dt), 1U) << device << " " << dt;
      EXPECT_EQ(c->gemm.count(dt), 1U) << device << " " << dt;
    }
    for (const char* op : {"all_reduce", "all_gather", "all_to_all"}) {
      for (const int g : {2, 4, 8}) {
        EXPECT_EQ(c->collectives.count({op, g}), 1U) << device << " " << op << "/" << g;
        EXPECT_EQ(c->collectives_held_out.count({op, g}), 1U);
      }
    }
  }
  // The GB200 NVL72 GPU has no fit (b200_sxm is the HGX B200); local devices never have one.
  EXPECT_EQ(calibration("b200"), nullptr);
  auto local = load_calibration("cpu:AMD EPYC/ranks=2");
  ASSERT_TRUE(local.ok());
  EXPECT_FALSE(local->has_value());
}

TEST(Calibration, FormsMatchTheFitScript) {
  // Reference values: fit_calibration.py's calibrated_moe / calibrated_gemm / calibrated_coll
  // with the parameters of resources/devices/calibration/h200.json.
  const auto cal = calibration("h200");
  ASSERT_NE(cal, nullptr);
  const Cluster c = cluster("1x-hgx-h200");
  const RooflineCosts rc(c, cal);
  auto near = [](double got, double want) { EXPECT_NEAR(got / want, 1.0, 1e-9) << got; };
  near(rc.moe_fused(fused(512, 2048, 768, 8, 128, 1, 8))->seconds, 6.596444340753113e-05);
  near(rc.moe_fused(fused(4096, 7168, 2048, 8, 256, 2, 4, DType::kFp8, "fp8_block"))->seconds,
       0.0010410592407355417);
  near(rc.moe_fused(fused(8, 4096, 14336, 2, 8, 8, 1))->seconds, 0.00011040004311343355);
  // Half a row per slot (groups non-empty with probability 1/2) and 1,024 rows per slot (8 row
  // tiles each) at width 96: the two ends of the per-tile count.
  near(rc.moe_fused(fused(8, 2048, 768, 8, 128, 1, 8))->seconds, 4.231604188898553e-05);
  near(rc.moe_fused(fused(16384, 2048, 768, 8, 128, 8, 1))->seconds, 0.001167854750616443);
  near(rc.gemm({64, 4096, 7168, DType::kBf16})->seconds, 1.935271647976341e-05);
  near(rc.collective(
             {CollectiveOp::kAllReduce, {{0, 1, 2, 3, 4, 5, 6, 7}}, 1048576, {}, DType::kBf16})
           ->seconds,
       2.8378414250679137e-05);
}

TEST(Calibration, AnswersSayWhetherTheyAreCalibrated) {
  const auto cal = calibration("h200");
  ASSERT_NE(cal, nullptr);
  const Cluster two = cluster("2x-hgx-h200");
  const RooflineCosts plain(two);
  const RooflineCosts rc(two, cal);
  EXPECT_EQ(plain.name(), "roofline");
  EXPECT_EQ(rc.name(), "roofline-calibrated (aiconfigurator-core 0.12.0, trtllm 1.3.0rc20)");
  EXPECT_EQ(rc.gemm({64, 4096, 7168, DType::kBf16})->source, kSourceCalibrated);
  EXPECT_EQ(plain.gemm({64, 4096, 7168, DType::kBf16})->source, kSourceRoofline);
  // fp16 and fp32 have no fit: the plain formula, said so.
  const auto fp32 = rc.gemm({64, 4096, 7168, DType::kFp32});
  EXPECT_EQ(fp32->source, kSourceRoofline);
  EXPECT_DOUBLE_EQ(fp32->seconds, plain.gemm({64, 4096, 7168, DType::kFp32})->seconds);
  EXPECT_EQ(rc.elementwise({"stage", 1e6, DType::kBf16})->source, kSourceCalibrated);
  // Grouped GEMMs stay plain (calibrated only inside the fused kernel).
  EXPECT_DOUBLE_EQ(rc.grouped_gemm({{4, 8}, 256, 2048, DType::kBf16})->seconds,
                   plain.grouped_gemm({{4, 8}, 256, 2048, DType::kBf16})->seconds);
  EXPECT_TRUE(rc.has_fused_moe("bf16"));
  EXPECT_FALSE(rc.has_fused_moe("fp16"));
  EXPECT_FALSE(plain.has_fused_moe("bf16"));

  // Inside one node: the NCCL curve; across the two nodes: routed over the graph with the NIC
  // links at the DeepEP-fitted efficiency (below 1: slower than the plain routing).
  const CollectiveQuery inside{CollectiveOp::kAllToAll, {{0, 1, 2, 3}}, 1 << 20, {}, DType::kBf16};
  const CollectiveQuery across{CollectiveOp::kAllToAll, {{6, 7, 8, 9}}, 1 << 20, {}, DType::kBf16};
  EXPECT_EQ(rc.collective(inside)->source, kSourceCalibrated);
  EXPECT_EQ(rc.collective(across)->source, kSourceCalibrated);
  EXPECT_GT(rc.collective(across)->seconds, plain.collective(across)->seconds);
  // 16 GPUs: no NCCL table of that size; across the two nodes, the NIC-calibrated routing.
  CollectiveQuery sixteen{CollectiveOp::kAllReduce, {{}}, 1 << 20, {}, DType::kBf16};
  for (int g = 0; g < 16; ++g) sixteen.groups[0].push_back(g);
  EXPECT_EQ(rc.collective(sixteen)->source, kSourceCalibrated);
  EXPECT_EQ(plain.collective(sixteen)->source, kSourceRoofline);
  // An -v collective with an even matrix is the even curve (the routed ratio is 1).
  CollectiveQuery v = inside;
  v.op = CollectiveOp::kAllToAllV;
  v.matrix.assign(4, std::vector<double>(4, (1 << 20) / 4.0));
  EXPECT_NEAR(rc.collective(v)->seconds, rc.collective(inside)->seconds, 1e-15);
  EXPECT_EQ(rc.collective(v)->source, kSourceCalibrated);
  // Trivial answers.
  EXPECT_EQ(rc.gemm({0, 4096, 7168, DType::kBf16})->seconds, 0.0);
  EXPECT_EQ(rc.collective({CollectiveOp::kAllReduce, {{3}}, 1 << 20, {}, DType::kBf16})->seconds,
            0.0);
}

TEST(Calibration, FusedFormFollowsTheRowsOfTheRank) {
  const auto cal = calibration("h200");
  const Cluster c = cluster("1x-hgx-h200");
  const RooflineCosts rc(c, cal);
  MoeFusedQuery q = fused(4096, 2048, 768, 8, 128, 1, 8);
  const double balanced = rc.moe_fused(q)->seconds;
  // The same pairs on half the slots: fewer, fuller groups read half the weights.
  MoeFusedQuery half = q;
  for (std::size_t i = 0; i < half.rows.size(); ++i) half.rows[i] = i % 2 == 0 ? 2 * q.rows[i] : 0;
  EXPECT_LT(rc.moe_fused(half)->seconds, balanced);
  // Twice the rows per slot cost more.
  MoeFusedQuery twice = q;
  for (double& r : twice.rows) r *= 2;
  EXPECT_GT(rc.moe_fused(twice)->seconds, balanced);
  MoeFusedQuery negative = q;
  negative.tokens = -1;
  EXPECT_FALSE(rc.moe_fused(negative).ok());
  // Fewer rows through the kernel (an all-to-all dispatch's own rows) cost less.
  MoeFusedQuery own = q;
  own.rows_in = 512;
  EXPECT_LT(rc.moe_fused(own)->seconds, balanced);
  // Without a fit for the dtype: the plain parts the cost model books without one.
  const RooflineCosts plain(c);
  const auto p = plain.moe_fused(q);
  EXPECT_EQ(p->source, kSourceRoofline);
  const double pairs = 4096 * 8 / 8.0;
  const double want = plain.grouped_gemm({q.rows, 2 * 768, 2048, DType::kBf16})->seconds +
                      plain.elementwise({"silu_mul", 3 * pairs * 768 * 2, DType::kBf16})->seconds +
                      plain.grouped_gemm({q.rows, 2048, 768, DType::kBf16})->seconds +
                      plain.elementwise({"permute", 2 * pairs * 2048 * 2, DType::kBf16})->seconds;
  EXPECT_NEAR(p->seconds, want, 1e-15);
}

/// Forwards to a source and counts what the cost model asks.
class Recorder final : public CostSource {
 public:
  explicit Recorder(const CostSource& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  Result<CostEstimate> gemm(const GemmQuery& q) const override { return inner_.gemm(q); }
  Result<CostEstimate> grouped_gemm(const GroupedGemmQuery& q) const override {
    ++grouped;
    return inner_.grouped_gemm(q);
  }
  Result<CostEstimate> elementwise(const ElementwiseQuery& q) const override {
    ++ops[q.op];
    return inner_.elementwise(q);
  }
  Result<CostEstimate> collective(const CollectiveQuery& q) const override {
    return inner_.collective(q);
  }
  Result<CostEstimate> attention(const AttentionQuery& q) const override {
    return inner_.attention(q);
  }
  bool has_fused_moe(const std::string& dt) const override { return inner_.has_fused_moe(dt); }
  Result<CostEstimate> moe_fused(const MoeFusedQuery& q) const override {
    ++fused_calls;
    last = q;
    return inner_.moe_fused(q);
  }
  mutable std::map<std::string, int> ops;
  mutable int grouped = 0;
  mutable int fused_calls = 0;
  mutable MoeFusedQuery last;

 private:
  const CostSource& inner_;
};

TEST(Calibration, CostModelBooksTheFusedKernelOnce) {
  auto model = models::load_model("qwen3-30b-a3b");
  ASSERT_TRUE(model.ok());
  const Cluster c = cluster("1x-hgx-h200");
  const auto load = ExpertLoad::uniform(model->num_moe_layers(), model->num_experts);
  for (const Dispatcher disp :
       {Dispatcher::kA2av, Dispatcher::kAllGather, Dispatcher::kPaddedA2a}) {
    const Layout layout = Layout::of(4, 2, RankMapping::kTpInnermost, disp);
    const RooflineCosts plain(c);
    const RooflineCosts calibrated(c, calibration("h200"));
    const Recorder p(plain), k(calibrated);
    auto lp = cost_layout({*model, c, p, {Phase::kPrefill, 512}, load, nullptr}, layout);
    auto lk = cost_layout({*model, c, k, {Phase::kPrefill, 512}, load, nullptr}, layout);
    ASSERT_TRUE(lp.ok()) << lp.error().message;
    ASSERT_TRUE(lk.ok()) << lk.error().message;
    // Plain: grouped GEMMs, SiLU, the dispatch permute and the combine's weighted sum.
    EXPECT_EQ(p.fused_calls, 0);
    EXPECT_GT(p.grouped, 0);
    EXPECT_GT(p.ops["permute"], 0);
    EXPECT_GT(p.ops["combine_sum"], 0);
    EXPECT_EQ(lp->per_layer.experts.source, kSourceRoofline);
    // Calibrated: one fused answer per EP rank for the experts and the permute of their rows;
    // the weighted sum where each token lives stays in combine.
    EXPECT_EQ(k.fused_calls, 4);
    EXPECT_EQ(k.grouped, 0);
    EXPECT_EQ(k.ops["permute"], 0);
    EXPECT_EQ(k.ops["combine_sum"], p.ops["combine_sum"]);
    EXPECT_EQ(k.ops["silu_mul"], 0);
    // All-gather hands the kernel every token; an all-to-all only the rank's rows.
    if (disp == Dispatcher::kAllGather) {
      EXPECT_EQ(k.last.rows_in, 0.0);
    } else {
      double rows = 0.0;
      for (const double r : k.last.rows) rows += r;
      EXPECT_DOUBLE_EQ(k.last.rows_in, rows);
    }
    EXPECT_EQ(lk->per_layer.experts.source, kSourceCalibrated);
    // The query: every EP rank's tokens (ep · tp · tokens per GPU) and the rank's slot rows.
    EXPECT_DOUBLE_EQ(k.last.tokens, 4 * 2 * 512.0);
    EXPECT_EQ(k.last.tp_size, 2);
    EXPECT_EQ(k.last.ep_size, 4);
    EXPECT_EQ(k.last.rows.size(), 32U);
    if (disp != Dispatcher::kPaddedA2a) {
      EXPECT_DOUBLE_EQ(k.last.rows[0], 4 * 2 * 512.0 * 8 / 128);
    }
  }
}

TEST(Calibration, BadFileIsOneErrorNamingFileAndKey) {
  const fs::path dir = fs::temp_directory_path() / "moeplan_calibration_test";
  fs::create_directories(dir);
  const fs::path p = dir / "x.json";
  std::ofstream(p) << R"({"device": "x", "moe_grouped_ffn": {}})";
  auto r = load_calibration_file(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(p.string()), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("device_figures"), std::string::npos) << r.error().message;
  std::ofstream(p) << R"({"device": "x", "device_figures": {"peak_bf16_flops": 1e15,
      "peak_fp8_flops": 2e15, "hbm_bandwidth_bytes_per_s": 4e12},
      "moe_grouped_ffn": {"bf16": {"parameters": {"gemm_max_efficiency": "high"}}}})";
  r = load_calibration_file(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("moe_grouped_ffn.bf16.parameters.gemm_max_efficiency"),
            std::string::npos)
      << r.error().message;
  // A file of the earlier form (per_group_s, no per-tile cost) names the key it lacks; a tile of
  // a fractional number of rows is refused.
  const std::string params =
      R"("gemm_max_efficiency": 1.0, "rows_half": 30, "cols_half": 500, "depth_half": 400,
         "hbm_efficiency": 0.9, "fixed_s": 2e-5, "fixed_per_hidden_s": 3e-9,
         "permute_factor": 1.0, "blend_exponent": 2.0)";
  const std::string head = R"({"device": "x", "device_figures": {"peak_bf16_flops": 1e15,
      "peak_fp8_flops": 2e15, "hbm_bandwidth_bytes_per_s": 4e12}, "moe_grouped_ffn": {"bf16":
      {"parameters": {)";
  std::ofstream(p) << head << params << R"(, "per_group_s": 1e-9}}}})";
  r = load_calibration_file(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("moe_grouped_ffn.bf16.parameters.per_tile_s"), std::string::npos)
      << r.error().message;
  std::ofstream(p) << head << params
                   << R"(, "per_tile_s": 1e-9, "tile_rows": 128.5, "tile_cols": 128}}}})";
  r = load_calibration_file(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("moe_grouped_ffn.bf16.parameters.tile_rows"), std::string::npos)
      << r.error().message;
  std::ofstream(p) << head << params
                   << R"(, "per_tile_s": 1e-9, "tile_rows": 64, "tile_cols": 256}}}})";
  r = load_calibration_file(p);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->moe.at("bf16").tile_rows, 64.0);
  EXPECT_EQ(r->moe.at("bf16").tile_cols, 256.0);
  EXPECT_EQ(r->moe.at("bf16").fixed_per_hidden_s, 3e-9);
  std::ofstream(p) << "{";
  EXPECT_FALSE(load_calibration_file(p).ok());
  fs::remove_all(dir);
}

TEST(Calibration, OutputTilesCountTheGroupsOfARank) {
  MoeCalibration c;  // 128 x 128 tiles
  // Expected groups of half a row count half a tile; 1 row or 128 rows one tile, 129 rows two;
  // an empty group none. Width 192 is two column tiles, 128 one.
  EXPECT_DOUBLE_EQ(c.output_tiles({0.5, 0.5, 0.0, 1.0, 128.0, 129.0}, 192.0),
                   (0.5 + 0.5 + 1.0 + 1.0 + 2.0) * 2.0);
  EXPECT_DOUBLE_EQ(c.output_tiles({300.0}, 128.0), 3.0);
  c.tile_rows = 64.0;
  c.tile_cols = 256.0;
  EXPECT_DOUBLE_EQ(c.output_tiles({300.0}, 2048.0), 5.0 * 8.0);
  EXPECT_DOUBLE_EQ(c.output_tiles({}, 2048.0), 0.0);
}

// A slot's rows under independent routing are a Poisson count: non-empty with probability
// 1 − e^{−m}; the counts themselves (even routing, a measured step, padded buffers): min(1, m).
TEST(Calibration, OccupancyOfCountsAndOfExpectedCounts) {
  EXPECT_EQ(group_occupancy(0.0, false), 0.0);
  EXPECT_EQ(group_occupancy(0.0, true), 0.0);
  EXPECT_DOUBLE_EQ(group_occupancy(0.5, false), 0.5);
  EXPECT_DOUBLE_EQ(group_occupancy(3.0, false), 1.0);
  EXPECT_DOUBLE_EQ(group_occupancy(1.0, true), 1.0 - std::exp(-1.0));
  EXPECT_DOUBLE_EQ(group_occupancy(0.5, true), 1.0 - std::exp(-0.5));
  EXPECT_DOUBLE_EQ(group_occupancy(50.0, true), 1.0);
  MoeCalibration c;  // 128 x 128 tiles
  // Expected counts: a group of mean 1 is one tile with probability 1 − e^{−1}; of mean 200,
  // two tiles (its 200 rows).
  EXPECT_DOUBLE_EQ(c.output_tiles({1.0, 200.0}, 128.0, true), 1.0 - std::exp(-1.0) + 2.0);
}

// Expected counts price what random routing costs on average. A decode step of 16 tokens, each
// routed to 8 distinct experts drawn uniformly from 128, gives a rank of 16 slots one row per
// slot on average: the expected-count query is the mean over such steps of the realized counts'
// time (memory-bound here, so the time is affine in each non-empty group's rows and the
// expectation is exact under Poisson counts; the draws are binomial, whose occupancy the test
// computes to bound the difference), while the counts-as-given query prices all 16 slots busy.
TEST(Calibration, ExpectedRowsPriceTheEmptySlotsOfRandomRouting) {
  const Cluster c = cluster("1x-hgx-h200");
  const RooflineCosts plain(c);
  const RooflineCosts calibrated(c, calibration("h200"));
  const int experts = 128, top_k = 8, tokens = 16, slots = 16;
  const double mean_rows = static_cast<double>(tokens) * top_k / experts;
  for (const RooflineCosts* rc : {&plain, &calibrated}) {
    MoeFusedQuery q = fused(tokens, 4096, 1536, top_k, experts, 1, experts / slots);
    ASSERT_EQ(q.rows.size(), static_cast<std::size_t>(slots));
    ASSERT_DOUBLE_EQ(q.rows[0], mean_rows);
    const double busy = rc->moe_fused(q)->seconds;
    q.expected = true;
    const double predicted = rc->moe_fused(q)->seconds;
    // Each slot's weights read with probability 1 − e^{−1}, its rows and fixed costs as before.
    EXPECT_LT(predicted, busy);
    EXPECT_GT(predicted, group_occupancy(mean_rows, true) * busy);
    std::mt19937_64 rng(7);
    std::vector<int> order(experts);
    const int draws = 4000;
    double sum = 0.0, sum2 = 0.0;
    for (int d = 0; d < draws; ++d) {
      MoeFusedQuery realized = q;
      realized.expected = false;
      std::fill(realized.rows.begin(), realized.rows.end(), 0.0);
      for (int t = 0; t < tokens; ++t) {
        std::iota(order.begin(), order.end(), 0);
        for (int j = 0; j < top_k; ++j) {  // k distinct experts: a partial Fisher–Yates shuffle
          std::uniform_int_distribution<int> pick(j, experts - 1);
          std::swap(order[static_cast<std::size_t>(j)], order[static_cast<std::size_t>(pick(rng))]);
          if (order[static_cast<std::size_t>(j)] < slots) {
            realized.rows[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])] += 1.0;
          }
        }
      }
      const double t = rc->moe_fused(realized)->seconds;
      sum += t;
      sum2 += t * t;
    }
    const double mean = sum / draws;
    const double sd = std::sqrt(std::max(0.0, sum2 / draws - mean * mean));
    // A slot is empty with probability (1 − k/E)^N under these draws, e^{−m} under Poisson
    // counts: the weights' share of the time moves by at most that relative difference.
    const double p_binomial = 1.0 - std::pow(1.0 - static_cast<double>(top_k) / experts, tokens);
    const double p_poisson = group_occupancy(mean_rows, true);
    const double occupancy_gap = std::abs(p_binomial - p_poisson) / p_poisson;
    EXPECT_NEAR(mean, predicted, occupancy_gap * predicted + 4.0 * sd / std::sqrt(draws))
        << rc->name();
  }
}

// Routed shapes are cached by a hash of a sample of the query (sizes, first group, each group's
// first GPU, the matrix's first row and diagonal) and compared whole: queries that agree on that
// sample and differ elsewhere must each get their own answer, the one a fresh source gives.
TEST(Calibration, RoutedShapesAreCachedByTheWholeQuery) {
  const Cluster two = cluster("2x-hgx-h200");  // 2 nodes of 8
  const auto cal = calibration("h200");
  ASSERT_NE(cal, nullptr);
  const auto fresh = [&](const CollectiveQuery& q) {
    const RooflineCosts rc(two, cal);
    auto c = rc.collective(q);
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? c->seconds : -1.0;
  };
  const RooflineCosts shared(two, cal);
  const auto cached = [&](const CollectiveQuery& q) {
    auto c = shared.collective(q);
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? c->seconds : -1.0;
  };
  // The second group's second GPU within the node, then across it.
  CollectiveQuery within{CollectiveOp::kAllToAll, {{0, 1}, {2, 3}}, 1 << 24, {}, DType::kBf16};
  CollectiveQuery across = within;
  across.groups[1][1] = 9;
  // The same first row and diagonal; the second row sends 1 byte, then 3 bytes in 4.
  CollectiveQuery even{CollectiveOp::kAllToAllV, {{0, 9}}, 1 << 24, {}, DType::kBf16};
  even.matrix = {{0.0, 1 << 22}, {1 << 22, 0.0}};
  CollectiveQuery skewed = even;
  skewed.matrix[1][0] = 3 << 22;
  for (const auto* q : {&within, &across, &even, &skewed, &within, &skewed}) {
    EXPECT_EQ(cached(*q), fresh(*q));
  }
  EXPECT_GT(cached(across), cached(within));
  EXPECT_GT(cached(skewed), cached(even));
  // A query scaled by 4 (bytes and matrix) is the same shape: 4 times the bandwidth term.
  CollectiveQuery big = skewed;
  big.bytes *= 4;
  for (auto& row : big.matrix) {
    for (double& v : row) v *= 4;
  }
  EXPECT_EQ(cached(big), fresh(big));

  // The DeepEP kernels' hops likewise (scaled by the first hop's bytes).
  EpKernelQuery ll;
  ll.mode = EpKernelMode::kLowLatency;
  ll.phase = EpKernelPhase::kDispatch;
  ll.hidden = 7168;
  ll.top_k = 8;
  ll.num_experts = 256;
  ll.num_nodes = 2;
  ll.ep_size = 16;
  ll.tokens = 64;
  ll.hops = {within};
  EpKernelQuery ll_across = ll;
  ll_across.hops = {across};
  const RooflineCosts ep_shared(two, cal);
  const auto ep = [](const RooflineCosts& rc, const EpKernelQuery& q) {
    auto c = rc.ep_kernel(q);
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? c->seconds : -1.0;
  };
  for (const auto* q : {&ll, &ll_across, &ll}) {
    EXPECT_EQ(ep(ep_shared, *q), ep(RooflineCosts(two, cal), *q));
  }
  EXPECT_GT(ep(ep_shared, ll_across), ep(ep_shared, ll));
}

// The caches hold every query's matrix; a search that costs many different loads must not grow
// them without bound. Past kMaxCachedCells a cache starts over, and an answer recomputed after
// that is the answer given before.
TEST(Calibration, RoutedShapeCachesStayBounded) {
  const Cluster two = cluster("2x-hgx-h200");  // 16 GPUs: a 16 × 16 matrix per query
  const RooflineCosts rc(two);
  CollectiveQuery q{CollectiveOp::kAllToAllV, {{}}, 0.0, {}, DType::kBf16};
  for (int g = 0; g < 16; ++g) q.groups[0].push_back(g);
  const auto query = [&](int i) {
    CollectiveQuery v = q;
    v.matrix.assign(16, std::vector<double>(16, 1024.0));
    v.matrix[static_cast<std::size_t>(i % 16)][0] += static_cast<double>(i);  // distinct shapes
    v.bytes = 0.0;
    for (const auto& row : v.matrix) {
      for (const double b : row) v.bytes += b;
    }
    return v;
  };
  const auto first = rc.routed_collective(query(1));
  ASSERT_TRUE(first.ok()) << first.error().message;
  // Each entry holds 1 + 16 + 256 cells: enough queries to pass the bound once.
  const int n = static_cast<int>(RooflineCosts::kMaxCachedCells / 273) + 100;
  std::size_t most = 0;
  for (int i = 2; i < n; ++i) {
    ASSERT_TRUE(rc.routed_collective(query(i)).ok());
    most = std::max(most, rc.cached_cells());
  }
  EXPECT_LE(most, RooflineCosts::kMaxCachedCells);
  EXPECT_GT(most, RooflineCosts::kMaxCachedCells - 273);  // it did fill up
  EXPECT_LT(rc.cached_cells(), 200U * 273U);              // and started over
  const auto again = rc.routed_collective(query(1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->seconds, first->seconds);
}

TEST(CalibrationNic, BundledCurvesWithTheirProvenance) {
  for (const char* device : {"h100", "h200"}) {
    const auto c = calibration(device);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->nic_bandwidth, 50e9) << device;
    for (const char* mode : {"normal", "ll"}) {
      for (const char* phase : {"dispatch", "combine"}) {
        for (const int nodes : {2, 4, 8}) {
          const NicCalibration* curve = c->nic_curve(mode, phase, nodes);
          ASSERT_NE(curve, nullptr) << device << " " << mode << "/" << phase << "/" << nodes;
          EXPECT_GT(curve->max_bytes, curve->min_bytes);
          EXPECT_EQ(c->nic_held_out.count({mode, phase, nodes}), 1U);
        }
      }
    }
  }
  // h200's DeepEP rows are H100's: the provenance says borrowed; h100's are its own.
  EXPECT_EQ(calibration("h200")->nic_provenance, "ll borrowed; normal borrowed");
  EXPECT_EQ(calibration("h100")->nic_provenance, "ll measured; normal measured");
  // No multi-node tables for B200: no curves, no efficiency.
  const auto b200 = calibration("b200_sxm");
  EXPECT_TRUE(b200->nic.empty());
  EXPECT_FALSE(b200->nic_efficiency(1e6, 2).has_value());
}

TEST(CalibrationNic, EfficiencyByMessageSizeAndNodes) {
  Calibration c;
  c.nic_bandwidth = 50e9;
  NicCalibration two{10e-6, 0.9, 1e6, 1.0, 1e3, 1e9};
  NicCalibration eight{20e-6, 0.5, 1e6, 1.0, 1e3, 1e9};
  c.nic[{"normal", "dispatch", 2}] = two;
  c.nic[{"normal", "dispatch", 8}] = eight;
  // eta(S) = max / (1 + S_h / S): half the maximum at S = S_h, the maximum for large S.
  EXPECT_DOUBLE_EQ(two.efficiency(1e6), 0.45);
  EXPECT_NEAR(two.efficiency(1e12), 0.9, 1e-6);
  EXPECT_DOUBLE_EQ(two.seconds(1e6, 50e9), 10e-6 + 1e6 / (0.45 * 50e9));
  EXPECT_EQ(two.efficiency(0.0), 0.0);
  bool extrapolated = true;
  EXPECT_DOUBLE_EQ(*c.nic_efficiency(1e6, 2, "normal", "dispatch", &extrapolated), 0.45);
  EXPECT_FALSE(extrapolated);
  // 4 nodes lies halfway between 2 and 8 in log(nodes).
  EXPECT_NEAR(*c.nic_efficiency(1e6, 4), 0.5 * 0.45 + 0.5 * 0.25, 1e-12);
  // Beyond the largest fitted count its curve holds, said so; one node crosses no NIC; a phase
  // without curves has no answer.
  EXPECT_DOUBLE_EQ(*c.nic_efficiency(1e6, 64, "normal", "dispatch", &extrapolated), 0.25);
  EXPECT_TRUE(extrapolated);
  EXPECT_FALSE(c.nic_efficiency(1e6, 1).has_value());
  EXPECT_FALSE(c.nic_efficiency(1e6, 2, "normal", "combine").has_value());
  EXPECT_FALSE(c.nic_efficiency(1e6, 2, "ll", "dispatch").has_value());
}

TEST(CalibrationNic, CrossNodeCollectivesUseTheNicEfficiency) {
  const auto cal = calibration("h200");
  ASSERT_NE(cal, nullptr);
  const Cluster two = cluster("2x-hgx-h200");
  const RooflineCosts plain(two);
  const RooflineCosts rc(two, cal);
  CollectiveQuery across{CollectiveOp::kAllToAll, {{}}, 8 << 20, {}, DType::kBf16};
  for (int g = 0; g < 16; ++g) across.groups[0].push_back(g);
  EXPECT_EQ(rc.nodes_spanned(across), 2);
  const auto cal_t = rc.collective(across);
  const auto plain_t = plain.collective(across);
  ASSERT_TRUE(cal_t.ok() && plain_t.ok());
  EXPECT_EQ(cal_t->source, kSourceCalibrated);
  EXPECT_EQ(plain_t->source, kSourceRoofline);
  // The fitted 2-node dispatch efficiency is below 1 at any size: the NIC-bound collective is
  // slower than the plain routing, and never faster than it divided by the maximum efficiency.
  const NicCalibration* d2 = cal->nic_curve("normal", "dispatch", 2);
  ASSERT_NE(d2, nullptr);
  ASSERT_LT(d2->max_efficiency, 1.0);
  EXPECT_GT(cal_t->seconds, plain_t->seconds);
  EXPECT_GE(cal_t->seconds, plain_t->seconds / d2->max_efficiency * (1 - 1e-12));
  // Larger messages reach a larger share of the NIC: the slowdown against plain shrinks.
  CollectiveQuery big = across;
  big.bytes = 512.0 * (1 << 20);
  EXPECT_LT(rc.collective(big)->seconds / plain.collective(big)->seconds,
            cal_t->seconds / plain_t->seconds);
  // An all-reduce reduces at the receiver: the combine curve, not the dispatch one.
  Calibration only_dispatch = *cal;
  for (auto it = only_dispatch.nic.begin(); it != only_dispatch.nic.end();) {
    it = std::get<1>(it->first) == "combine" ? only_dispatch.nic.erase(it) : std::next(it);
  }
  const RooflineCosts rd(two, std::make_shared<const Calibration>(only_dispatch));
  CollectiveQuery ar = across;
  ar.op = CollectiveOp::kAllReduce;
  EXPECT_EQ(rc.collective(ar)->source, kSourceCalibrated);
  EXPECT_EQ(rd.collective(ar)->source, kSourceRoofline);  // no combine curve: plain
  EXPECT_DOUBLE_EQ(rd.collective(ar)->seconds, plain.collective(ar)->seconds);
  // Inside one node nothing crosses a NIC: the NCCL curve as before.
  const CollectiveQuery inside{CollectiveOp::kAllToAll, {{0, 1, 2, 3}}, 1 << 20, {}, DType::kBf16};
  EXPECT_EQ(rc.collective(inside)->seconds, rd.collective(inside)->seconds);
  // A device calibration without NIC curves keeps the plain routing across nodes.
  Calibration no_nic = *cal;
  no_nic.nic.clear();
  const RooflineCosts rn(two, std::make_shared<const Calibration>(no_nic));
  EXPECT_EQ(rn.collective(across)->source, kSourceRoofline);
  EXPECT_DOUBLE_EQ(rn.collective(across)->seconds, plain_t->seconds);
}

TEST(CalibrationNic, BadCurveIsOneErrorNamingFileAndKey) {
  const fs::path dir = fs::temp_directory_path() / "moeplan_calibration_nic_test";
  fs::create_directories(dir);
  const fs::path p = dir / "x.json";
  const std::string head = R"({"device": "x", "device_figures": {"peak_bf16_flops": 1e15,
      "peak_fp8_flops": 2e15, "hbm_bandwidth_bytes_per_s": 4e12}, "collectives_internode": )";
  const std::string params =
      R"({"parameters": {"latency_s": 0, "max_efficiency": 0.9, "half_size_bytes": 1e6,
          "shape_exponent": 1.0}})";
  std::ofstream(p) << head
                   << R"({"nic_bandwidth_bytes_per_s": 5e10, "curves": {"normal/dispatch/1": )"
                   << params << "}}}";
  auto r = load_calibration_file(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(p.string()), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("collectives_internode.curves.normal/dispatch/1"),
            std::string::npos)
      << r.error().message;
  std::ofstream(p) << head << R"({"curves": {"normal/dispatch/2": )" << params << "}}}";
  r = load_calibration_file(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("collectives_internode.nic_bandwidth_bytes_per_s"),
            std::string::npos)
      << r.error().message;
  std::ofstream(p)
      << head << R"({"nic_bandwidth_bytes_per_s": 5e10, "curves": {"ll/combine/4": {"parameters":
      {"latency_s": 0, "max_efficiency": -1, "half_size_bytes": 1e6, "shape_exponent": 1}}}}})";
  r = load_calibration_file(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("collectives_internode.curves.ll/combine/4.parameters."
                                   "max_efficiency"),
            std::string::npos)
      << r.error().message;
  std::ofstream(p) << head << R"({"nic_bandwidth_bytes_per_s": 5e10, "curves": {"ll/combine/4": )"
                   << params << "}}}";
  r = load_calibration_file(p);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_NE(r->nic_curve("ll", "combine", 4), nullptr);
  EXPECT_EQ(r->nic_curve("ll", "combine", 4)->max_efficiency, 0.9);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace test_roofline_calibrated
}  // namespace moeplan::planner
