// The sharded MoE layer on in-process ranks: every legal layout of small models, both rank
// mappings and all three dispatchers match the dense reference within the derived bound.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/moe_layer.hpp"
#include "kernels/reference.hpp"
#include "kernels/verify.hpp"
#include "models/registry.hpp"

namespace moeplan::kernels {
namespace {

models::MoeModel model(const std::string& name) {
  auto m = models::load_model(name);
  EXPECT_TRUE(m.ok());
  return *m;
}

void expect_all_pass(const std::vector<VerifyRow>& rows, std::size_t expected_rows) {
  ASSERT_EQ(rows.size(), expected_rows);
  for (const auto& r : rows) {
    EXPECT_TRUE(r.passed) << r.layout.short_name() << " " << dispatcher_name(r.layout.dispatcher)
                          << " " << dtype_name(r.dtype) << " T=" << r.num_tokens
                          << " max|diff|=" << r.max_abs_diff << " bound use " << r.max_bound_use;
    EXPECT_LE(r.max_bound_use, 1.0);
    EXPECT_GT(r.max_abs_ref, 0.0);  // a non-trivial output
  }
}

std::vector<VerifyRow> run(const VerifyRequest& req, int ranks) {
  EXPECT_TRUE(check_request(req, ranks).ok());
  std::vector<VerifyRow> rows;
  run_in_process(ranks, [&](Communicator& world) {
    auto r = run_verify(world, req);
    if (world.rank() == 0) rows = std::move(r);
  });
  return rows;
}

// Qwen2-57B-A14B at 1/64 width: 64 experts, top-8, gated shared expert (widths 56/40/320).
TEST(MoeLayer, Qwen2EveryLayoutOfFourRanksAllDispatchersAllDtypes) {
  VerifyRequest req;
  req.model = model("qwen2-57b-a14b");
  req.scale = 64;
  req.token_counts = {37, 128};
  req.dtypes = {DType::kFp32, DType::kBf16, DType::kFp16};
  const LayerSpec spec = *LayerSpec::from_model(req.model, req.scale, DType::kFp32, 1);
  req.layouts = legal_layouts(spec, 4);
  ASSERT_EQ(req.layouts.size(), 3U);  // 4x1, 2x2, 1x4
  req.dispatchers = {std::begin(kKernelDispatchers), std::end(kKernelDispatchers)};
  expect_all_pass(run(req, 4), 2 * 3 * 3 * 3);
}

TEST(MoeLayer, EpInnermostMappingAndEightRanks) {
  VerifyRequest req;
  req.model = model("qwen2-57b-a14b");
  req.scale = 64;
  req.token_counts = {64};
  req.dtypes = {DType::kBf16};
  req.layouts = {Layout::of(2, 4, RankMapping::kEpInnermost),
                 Layout::of(8, 1, RankMapping::kTpInnermost),
                 Layout::of(4, 2, RankMapping::kEpInnermost)};
  req.dispatchers = {std::begin(kKernelDispatchers), std::end(kKernelDispatchers)};
  expect_all_pass(run(req, 8), 3 * 3);
}

TEST(MoeLayer, DeepSeekV3GroupLimitedSigmoidRouting) {
  VerifyRequest req;
  req.model = model("deepseek-v3");
  req.scale = 128;  // H 56, I 16, 256 experts, noaux_tc 4 of 8 groups, shared expert
  req.token_counts = {48};
  req.dtypes = {DType::kFp32, DType::kBf16};
  req.layouts = {Layout::of(4, 1, RankMapping::kTpInnermost),
                 Layout::of(2, 2, RankMapping::kTpInnermost)};
  req.dispatchers = {std::begin(kKernelDispatchers), std::end(kKernelDispatchers)};
  expect_all_pass(run(req, 4), 2 * 2 * 3);
}

TEST(MoeLayer, MixtralAndQwen3OnTwoRanks) {
  for (const char* name : {"mixtral-8x7b", "qwen3-30b-a3b", "qwen1.5-moe-a2.7b"}) {
    VerifyRequest req;
    req.model = model(name);
    req.scale = name == std::string("mixtral-8x7b") ? 128 : 32;
    req.token_counts = {33};
    req.dtypes = {DType::kFp16};
    const LayerSpec spec = *LayerSpec::from_model(req.model, req.scale, DType::kFp32, 1);
    req.layouts = legal_layouts(spec, 2);
    req.dispatchers = {std::begin(kKernelDispatchers), std::end(kKernelDispatchers)};
    SCOPED_TRACE(name);
    expect_all_pass(run(req, 2), req.layouts.size() * 3);
  }
}

TEST(MoeLayer, CorruptedOutputIsCaught) {
  // The check must be able to fail: perturb one sharded output element by more than its bound.
  auto m = model("qwen2-57b-a14b");
  const LayerSpec spec = *LayerSpec::from_model(m, 64, DType::kBf16, 7);
  const int tokens = 16;
  const std::vector<float> x = make_input(spec, 0, tokens);
  const ReferenceOutput ref = reference_forward(spec, x, tokens);
  std::vector<float> out;
  run_in_process(1, [&](Communicator& world) {
    const Layout l = Layout::of(1, 1, RankMapping::kTpInnermost, Dispatcher::kA2av);
    const RankGroups g = make_groups(world, l);
    auto be = make_cpu_backend();
    out = moe_forward(*be, g, spec, l, make_rank_weights(spec, l, 0), x, tokens);
  });
  ASSERT_EQ(out.size(), ref.output.size());
  std::size_t within = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    within += std::fabs(out[i] - ref.output[i]) <= ref.bound[i] ? 1U : 0U;
  }
  EXPECT_EQ(within, out.size());
  out[5] += 3.0F * ref.bound[5] + 1e-3F;
  EXPECT_GT(std::fabs(out[5] - ref.output[5]), ref.bound[5]);
}

TEST(MoeLayer, LayoutRulesRejectedBeforeWork) {
  auto m = model("qwen1.5-moe-a2.7b");  // 60 experts, I 1408, shared 5632
  const LayerSpec spec = *LayerSpec::from_model(m, 1, DType::kFp32, 1);
  EXPECT_EQ(check_layout(spec, Layout::of(8, 1), 8).error().message,
            "layout 8x1: num_experts=60 % ep=8 != 0; expected ep to divide the expert count");
  EXPECT_NE(check_layout(spec, Layout::of(1, 3), 3)
                .error()
                .message.find("moe_intermediate_size=1408 % tp=3"),
            std::string::npos);
  EXPECT_NE(
      check_layout(spec, Layout::of(2, 2), 8).error().message.find("expected ep·tp = rank count"),
      std::string::npos);
  EXPECT_TRUE(check_layout(spec, Layout::of(6, 1), 6).ok());
  std::vector<int> eps;
  for (const auto& l : legal_layouts(spec, 60)) eps.push_back(l.ep_size);
  // tp = 60/ep must divide 1408 = 2^7·11 and 5632: tp ∈ {1, 2, 4}.
  EXPECT_EQ(eps, (std::vector<int>{60, 30, 15}));
}

TEST(MoeLayer, ParseLayoutAndDispatcher) {
  EXPECT_EQ(parse_layout("4x2")->ep_size, 4);
  EXPECT_EQ(parse_layout("4x2")->tp_size, 2);
  EXPECT_FALSE(parse_layout("4").ok());
  EXPECT_FALSE(parse_layout("x2").ok());
  EXPECT_FALSE(parse_layout("4x0").ok());
  EXPECT_FALSE(parse_layout("4x2x1").ok());
  EXPECT_EQ(*parse_dispatcher("allgather"), Dispatcher::kAllGather);
  EXPECT_FALSE(parse_dispatcher("ring").ok());
}

}  // namespace
}  // namespace moeplan::kernels
