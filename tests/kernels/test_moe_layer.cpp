// The sharded MoE layer on in-process ranks: every legal layout of small models, both rank
// mappings and all three dispatchers match the dense reference within the derived bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>

#include "kernels/moe_layer.hpp"
#include "kernels/reference.hpp"
#include "kernels/verify.hpp"
#include "models/registry.hpp"

namespace moeplan::kernels {
namespace test_moe_layer {
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
  // Plain weights: at this scale an expert is 16 wide, and fp8's 128 blocks cannot be split
  // over tp 2 (DeepSeekV3Fp8BlockWeights runs the fp8 path at a scale that can).
  ASSERT_TRUE(models::apply_weights_choice(req.model, "bf16").ok());
  req.scale = 128;  // H 56, I 16, 256 experts, noaux_tc 4 of 8 groups, shared expert
  req.token_counts = {48};
  req.dtypes = {DType::kFp32, DType::kBf16};
  req.layouts = {Layout::of(4, 1, RankMapping::kTpInnermost),
                 Layout::of(2, 2, RankMapping::kTpInnermost)};
  req.dispatchers = {std::begin(kKernelDispatchers), std::end(kKernelDispatchers)};
  expect_all_pass(run(req, 4), 2 * 2 * 3);
}

// fp8 block-scaled weights (DeepSeek-V3's own format, and Qwen2-57B-A14B with --weights
// fp8-block): e4m3 weights in 128 × 128 blocks, activations quantized in 1 × 128 groups before
// each GEMM, every dispatcher on every layout whose TP slices hold whole blocks, within the
// bound derived for it (docs/VERIFY.md).
TEST(MoeLayer, Fp8BlockWeightsOnEveryLayoutAndDispatcher) {
  {
    VerifyRequest req;
    req.model = model("deepseek-v3");
    ASSERT_TRUE(req.model.weights.quantized());
    // 32 of the 256 experts (4 in each of the 8 routing groups): what is checked is the block
    // scales on every layout and dispatcher, and generating 256 experts' weights per case was
    // nearly all of this test's time (20× more under ThreadSanitizer).
    req.model.num_experts = 32;
    req.scale = 8;  // H 896 (7 blocks), I 256 (2 blocks), shared 256
    req.token_counts = {40};
    req.dtypes = {DType::kFp32, DType::kBf16};
    req.layouts = {Layout::of(4, 1, RankMapping::kTpInnermost),
                   Layout::of(2, 2, RankMapping::kTpInnermost),
                   Layout::of(2, 2, RankMapping::kEpInnermost)};
    req.dispatchers = {std::begin(kKernelDispatchers), std::end(kKernelDispatchers)};
    req.dispatchers.push_back(Dispatcher::kDeepEpLl);
    std::size_t cases = 0;
    for (const auto& l : req.layouts) {
      for (const auto d : req.dispatchers) cases += runs(req, l, d, 40) ? 1U : 0U;
    }
    expect_all_pass(run(req, 4), cases * 2);
    // 1x4 splits the 256-wide experts into 64-wide slices: refused before any work.
    req.layouts = {Layout::of(1, 4, RankMapping::kTpInnermost)};
    EXPECT_FALSE(check_request(req, 4).ok());
  }
  {
    VerifyRequest req;
    req.model = model("qwen2-57b-a14b");
    ASSERT_TRUE(models::apply_weights_choice(req.model, "fp8-block").ok());
    req.scale = 8;  // H 448 (3.5 blocks: a partial edge block), I 320 (2.5 blocks)
    req.token_counts = {24};
    req.dtypes = {DType::kBf16};
    req.layouts = {Layout::of(2, 1, RankMapping::kTpInnermost)};
    req.dispatchers = {std::begin(kKernelDispatchers), std::end(kKernelDispatchers)};
    expect_all_pass(run(req, 2), 3);
  }
}

TEST(MoeLayer, Fp8WeightsSendFp8OnEveryDispatcher) {
  // With fp8 weights every dispatcher sends the tokens as fp8 values and one fp32 scale per 128
  // — the bytes the planner prices (WeightFormat::dispatch_row_bytes) — and matches the
  // reference on fp8 inputs; plain weights send the dtype.
  auto m = model("deepseek-v3");
  m.num_experts = 32;  // 4 per routing group, as in the test above
  const int tokens = 24;
  for (const bool fp8 : {true, false}) {
    SCOPED_TRACE(fp8 ? "fp8-block" : "bf16");
    models::MoeModel mm = m;
    if (!fp8) {
      ASSERT_TRUE(models::apply_weights_choice(mm, "bf16").ok());
    }
    auto spec = LayerSpec::from_model(mm, 8, DType::kBf16, 3);  // H 896
    ASSERT_TRUE(spec.ok());
    ASSERT_TRUE(apply_weight_format(*spec, mm.weights).ok());
    ASSERT_EQ(spec->fp8(), fp8);
    const std::size_t expected_row =
        fp8 ? static_cast<std::size_t>(mm.weights.dispatch_row_bytes(spec->hidden)) : 2U * 896U;
    if (fp8) {
      EXPECT_EQ(expected_row, 896U + 4U * 7U);
    }
    const std::vector<float> x = make_input(*spec, 0, tokens);
    const ReferenceOutput ref = reference_forward(*spec, x, tokens, {fp8});
    for (const Dispatcher d : kKernelDispatchers) {
      SCOPED_TRACE(dispatcher_name(d));
      EXPECT_EQ(sends_fp8(*spec, d), fp8);
      std::vector<float> got;
      std::size_t row_bytes = 0;
      run_in_process(2, [&](Communicator& world) {
        auto be = make_cpu_backend();
        const Layout l = Layout::of(2, 1, RankMapping::kTpInnermost, d);
        const RankGroups g = make_groups(world, l, 0);
        const TokenRange tr = token_range(tokens, 2, world.rank());
        PhaseTimes times;
        auto o = moe_forward(*be, g, *spec, l, make_rank_weights(*spec, l, world.rank()),
                             make_input(*spec, tr.first, tr.count), tokens, &times, {});
        if (world.rank() == 0) {
          got = o;
          row_bytes = times.dispatch_row_bytes;
        }
      });
      EXPECT_EQ(row_bytes, expected_row);
      const std::vector<float>& want = reference_of(ref, *spec, d);
      const std::vector<float>& bound = bound_of(ref, *spec, d);
      std::size_t within = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        within += std::fabs(got[i] - want[i]) <= bound[i] ? 1U : 0U;
      }
      EXPECT_EQ(within, got.size());
    }
  }
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

// DeepEP's two dispatchers on 4 ranks grouped as 2 nodes of 2 (and 8 ranks as 4 × 2, 2 × 4):
// the two-hop normal mode (per-node dedup, the forwarder's reduction before the inter-node hop)
// and the low-latency mode (fp8 e4m3 payload with per-128 scales, fixed buffer), each within its
// derived bound (docs/VERIFY.md).
TEST(MoeLayer, DeepEpDispatchersOnRanksGroupedIntoNodes) {
  for (const char* name : {"qwen2-57b-a14b", "deepseek-v3", "mixtral-8x7b"}) {
    VerifyRequest req;
    req.model = model(name);
    req.scale = name == std::string("qwen2-57b-a14b") ? 64 : 128;
    req.token_counts = {37, 128};
    req.dtypes = {DType::kFp32, DType::kBf16, DType::kFp16};
    req.layouts = {Layout::of(4, 1)};
    req.dispatchers = {Dispatcher::kDeepEpNormal, Dispatcher::kDeepEpLl};
    req.dispatch.ranks_per_node = 2;
    SCOPED_TRACE(name);
    ASSERT_EQ(case_count(req), 2 * 3 * 2);
    expect_all_pass(run(req, 4), 2 * 3 * 2);
  }
  VerifyRequest req;
  req.model = model("qwen2-57b-a14b");
  req.scale = 64;
  req.token_counts = {5, 200};  // 5 tokens over 8 ranks: some ranks send nothing
  req.dtypes = {DType::kBf16};
  req.layouts = {Layout::of(8, 1)};
  req.dispatchers = {Dispatcher::kDeepEpNormal, Dispatcher::kDeepEpLl};
  for (const int per_node : {2, 4}) {
    req.dispatch.ranks_per_node = per_node;
    SCOPED_TRACE(per_node);
    expect_all_pass(run(req, 8), 2 * 2);
  }
}

TEST(MoeLayer, DeepEpLegalityAndTheLowLatencyBuffer) {
  const Layout ep4 = Layout::of(4, 1, RankMapping::kTpInnermost, Dispatcher::kDeepEpNormal);
  // One node (no grouping, or all 4 ranks in one): deepep_normal does not run.
  EXPECT_TRUE(kernel_dispatch_violation(ep4, 64, {}).has_value());
  EXPECT_TRUE(kernel_dispatch_violation(ep4, 64, {4, 0}).has_value());
  EXPECT_FALSE(kernel_dispatch_violation(ep4, 64, {2, 0}).has_value());
  EXPECT_TRUE(
      kernel_dispatch_violation(
          Layout::of(2, 2, RankMapping::kTpInnermost, Dispatcher::kDeepEpNormal), 64, {1, 0})
          ->find("tp_size 1") != std::string::npos);
  // deepep_ll: 130 tokens over ep 4 put 33 on the largest rank.
  const Layout ll = Layout::of(4, 1, RankMapping::kTpInnermost, Dispatcher::kDeepEpLl);
  EXPECT_FALSE(kernel_dispatch_violation(ll, 130, {0, 33}).has_value());
  const auto over = kernel_dispatch_violation(ll, 130, {0, 32});
  ASSERT_TRUE(over.has_value());
  EXPECT_NE(over->find("33 on the largest EP rank; expected ll-max-tokens ≥ 33"), std::string::npos)
      << *over;
  // A buffer larger than needed is what deployments configure: the layer runs in it.
  VerifyRequest req;
  req.model = model("qwen2-57b-a14b");
  req.scale = 64;
  req.token_counts = {130};
  req.dtypes = {DType::kBf16};
  req.layouts = {Layout::of(4, 1)};
  req.dispatchers = {Dispatcher::kDeepEpLl};
  req.dispatch.ll_max_tokens = 64;
  expect_all_pass(run(req, 4), 1);
}

TEST(MoeLayer, DeepEpSendsFp8AndALostPairIsCaught) {
  auto m = model("qwen2-57b-a14b");
  const LayerSpec spec = *LayerSpec::from_model(m, 64, DType::kFp32, 7);
  const int tokens = 16;
  const int h = spec.hidden;
  const std::vector<float> x = make_input(spec, 0, tokens);
  const ReferenceOutput ref = reference_forward(spec, x, tokens, {true});
  ASSERT_EQ(ref.output_fp8_inputs.size(), ref.output.size());
  for (std::size_t i = 0; i < ref.output.size(); ++i) {
    EXPECT_GE(ref.bound_fp8_inputs_prereduced[i], ref.bound_fp8_inputs[i]);
  }
  // Rank 0's tokens through the DeepEP dispatchers (2 nodes of 2) and through a2av (the same
  // layer, fp32 payload).
  std::map<Dispatcher, std::vector<float>> out;
  run_in_process(4, [&](Communicator& world) {
    auto be = make_cpu_backend();
    const TokenRange tr = token_range(tokens, 4, world.rank());
    const std::vector<float> xr = make_input(spec, tr.first, tr.count);
    for (const Dispatcher d :
         {Dispatcher::kDeepEpLl, Dispatcher::kDeepEpNormal, Dispatcher::kA2av}) {
      const Layout l = Layout::of(4, 1, RankMapping::kTpInnermost, d);
      const RankGroups g = make_groups(world, l, 2);
      auto o = moe_forward(*be, g, spec, l, make_rank_weights(spec, l, world.rank()), xr, tokens,
                           nullptr, {2, 0});
      if (world.rank() == 0) out[d] = o;
    }
  });
  const std::vector<float>& a2av = out[Dispatcher::kA2av];
  ASSERT_EQ(a2av.size(), static_cast<std::size_t>(tokens / 4 * h));
  std::size_t a2av_fp32 = 0;
  for (std::size_t i = 0; i < a2av.size(); ++i) {
    a2av_fp32 += std::fabs(a2av[i] - ref.output[i]) <= ref.bound[i] ? 1U : 0U;
  }
  EXPECT_EQ(a2av_fp32, a2av.size());
  // The DeepEP ones match the reference on fp8 inputs, and not the one on fp32 inputs: they
  // really send fp8.
  for (const Dispatcher d : {Dispatcher::kDeepEpLl, Dispatcher::kDeepEpNormal}) {
    const std::vector<float>& got = out[d];
    ASSERT_EQ(got.size(), a2av.size());
    const std::vector<float>& bound = bound_of(ref, spec, d);
    std::size_t as_fp8 = 0, as_fp32 = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      as_fp8 += std::fabs(got[i] - ref.output_fp8_inputs[i]) <= bound[i] ? 1U : 0U;
      as_fp32 += std::fabs(got[i] - ref.output[i]) <= ref.bound[i] ? 1U : 0U;
    }
    EXPECT_EQ(as_fp8, got.size()) << dispatcher_name(d);
    EXPECT_LT(as_fp32, got.size() / 2) << dispatcher_name(d) << "'s experts read fp8 inputs";
  }

  // A dispatcher that lost token 0's first pair would be off by weight · that expert's output,
  // far outside the bound: verify fails it.
  auto be = make_cpu_backend();
  std::vector<float> logits(static_cast<std::size_t>(tokens * spec.num_experts));
  be->router_logits(OpContext{}, x, tokens, h, make_router_weight(spec), spec.num_experts, logits);
  std::vector<int> ids(static_cast<std::size_t>(tokens * spec.top_k));
  std::vector<float> weights(ids.size());
  be->route(OpContext{}, spec.router, logits, make_score_bias(spec), tokens, spec.num_experts,
            spec.top_k, ids, weights);
  const MlpReference y = mlp_reference(std::span(x).first(static_cast<std::size_t>(h)), 1, h,
                                       make_expert(spec, ids[0], 0, 1), spec.dtype);
  std::size_t caught = 0;
  for (int c = 0; c < h; ++c) {
    const auto i = static_cast<std::size_t>(c);
    caught += std::fabs(weights[0] * y.y[i]) > ref.bound_fp8_inputs_prereduced[i] ? 1U : 0U;
  }
  EXPECT_GT(caught, static_cast<std::size_t>(h) / 2);
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
}  // namespace test_moe_layer
}  // namespace moeplan::kernels
