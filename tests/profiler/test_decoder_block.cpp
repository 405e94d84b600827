// The attention block and the whole decoder layer as measured cases (validate --attention
// --scope block|layer): the ops they run through the backend, every op checked against its
// reference (and a wrong result caught), the MoE layer's routed load, and what is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "kernels/backend.hpp"
#include "kernels/communicator.hpp"
#include "kernels/layer_spec.hpp"
#include "models/registry.hpp"
#include "profiler/decoder_block.hpp"
#include "profiler/op_common.hpp"
#include "profiler/validate.hpp"
#include "profiler/validate_attention.hpp"
#include "tests/profiler/profile_fixtures.hpp"
#include "tests/profiler/recording_backend.hpp"

namespace moeplan::profiler {
namespace test_decoder_block {
namespace {

/// Qwen3-30B-A3B's architecture (GQA with q/k norms) at a test's size: 4 query heads over 2
/// K/V heads of 32, hidden 128, 8 experts of 64, top-2.
models::MoeModel tiny_qwen3() {
  auto m = models::load_model("qwen3-30b-a3b").value();
  m.hidden_size = 128;
  m.attention.num_heads = 4;
  m.attention.num_kv_heads = 2;
  m.attention.head_dim = 32;
  m.num_experts = 8;
  m.num_experts_per_tok = 2;
  m.moe_intermediate_size = 64;
  return m;
}

/// DeepSeek's MLA at a test's size: 4 heads of nope 16 + rope 8 (v 16) over a latent of 32,
/// hidden 128; q through a LoRA of 48 (DeepSeek-V3) or straight up (`q_lora` 0: V2-Lite); 8
/// experts of 64, top-2, one shared expert of 64, no expert groups.
models::MoeModel tiny_mla(int q_lora) {
  auto m = models::load_model(q_lora > 0 ? "deepseek-v3" : "deepseek-v2-lite").value();
  m.hidden_size = 128;
  auto& a = m.attention;
  a.num_heads = 4;
  a.num_kv_heads = 4;
  a.q_lora_rank = q_lora;
  a.kv_lora_rank = 32;
  a.qk_nope_head_dim = 16;
  a.qk_rope_head_dim = 8;
  a.v_head_dim = 16;
  a.head_dim = 24;
  m.num_experts = 8;
  m.num_experts_per_tok = 2;
  m.num_shared_experts = 1;
  m.moe_intermediate_size = 64;
  m.shared_expert_intermediate_size = 64;
  m.router.num_groups = 1;
  m.router.topk_groups = 1;
  return m;
}

using fixtures::fast;

TEST(DecoderBlock, RunsTheBlocksOpsAndVerifiesEach) {
  const auto m = tiny_qwen3();
  for (const DecoderCaseShape shape : {DecoderCaseShape{false, 40, 40}, {true, 3, 50}}) {
    for (const DType dt : {DType::kBf16, DType::kFp32}) {
      SCOPED_TRACE(std::string(shape.decode ? "decode" : "prefill") + " " +
                   std::string(dtype_name(dt)));
      for (const bool fault : {false, true}) {
        RecordingBackend backend;
        auto c = make_decoder_case(m, dt, shape, nullptr, nullptr, backend);
        ASSERT_TRUE(c.ok()) << c.error().message;
        if (fault) (*c)->inject_fault();
        const Measurement meas = measure(**c, nullptr, fast());
        EXPECT_EQ(meas.disposition,
                  fault ? planner::Disposition::kIncorrect : planner::Disposition::kPassed)
            << meas.detail;
        if (fault) {
          EXPECT_NE(meas.detail.find("post-attention norm"), std::string::npos) << meas.detail;
          continue;
        }
        // Per run: the input, q, k and post-attention norms; RoPE on q and on k; the q/k/v and
        // output projections; one attention core; no MoE layer.
        const int runs = backend.calls[kernels::BackendOp::kAttention];
        ASSERT_GE(runs, 3);  // warm-up, verification, two timed
        EXPECT_EQ(backend.calls[kernels::BackendOp::kRmsNorm], 4 * runs);
        EXPECT_EQ(backend.calls[kernels::BackendOp::kRope], 2 * runs);
        EXPECT_EQ(backend.calls[kernels::BackendOp::kGemm], 2 * runs);
        EXPECT_EQ(backend.calls[kernels::BackendOp::kExpertFfn], 0);
        EXPECT_TRUE((*c)->routed_counts().empty());
      }
    }
  }
}

// validate's block runs cold: copies of the case in turn, as many as make their footprints
// exceed the profile's rotation (kColdBytes by default; at most 64), each run by its turn; the
// footprint counts the KV cache; a wrong copy fails verification whichever it is.
TEST(DecoderBlock, ColdCaseRunsCopiesInTurnThatTogetherOutgrowTheCaches) {
  const auto m = tiny_qwen3();
  RecordingBackend backend;
  auto shorter = make_decoder_case(m, DType::kBf16, {true, 3, 32}, nullptr, nullptr, backend);
  auto longer = make_decoder_case(m, DType::kBf16, {true, 3, 64}, nullptr, nullptr, backend);
  ASSERT_TRUE(shorter.ok() && longer.ok());
  // 32 more cached tokens of 3 sequences: 2 K/V heads of 32, keys and values, fp32 at least.
  EXPECT_GE((*longer)->footprint_bytes() - (*shorter)->footprint_bytes(),
            std::size_t{3} * 32 * 2 * 32 * 2 * sizeof(float));
  const std::size_t one = (*shorter)->footprint_bytes();
  auto cold =
      make_cold_decoder_case(m, DType::kBf16, {true, 3, 32}, nullptr, nullptr, backend, kColdBytes);
  ASSERT_TRUE(cold.ok()) << cold.error().message;
  EXPECT_EQ((*cold)->copies(), std::min<std::size_t>(64, kColdBytes / one + 1));
  EXPECT_EQ((*cold)->footprint_bytes(), (*cold)->copies() * one);
  EXPECT_EQ(measure(**cold, nullptr, fast()).disposition, planner::Disposition::kPassed);
  // A profile of a smaller rotation (profile --cold-mib): as many copies as exceed it.
  auto small =
      make_cold_decoder_case(m, DType::kBf16, {true, 3, 32}, nullptr, nullptr, backend, 2 * one);
  ASSERT_TRUE(small.ok()) << small.error().message;
  EXPECT_EQ((*small)->copies(), 3U);

  // Three copies on their own backends: six runs are two of each, in turn.
  for (const int faulty : {-1, 0, 2}) {
    std::vector<RecordingBackend> backends(3);
    std::vector<std::unique_ptr<DecoderCase>> copies;
    for (auto& b : backends) {
      auto c = make_decoder_case(m, DType::kBf16, {true, 3, 32}, nullptr, nullptr, b);
      ASSERT_TRUE(c.ok());
      copies.push_back(std::move(*c));
    }
    if (faulty >= 0) copies[static_cast<std::size_t>(faulty)]->inject_fault();
    RotatingDecoderCase rotating(std::move(copies));
    EXPECT_EQ(rotating.footprint_bytes(), 3 * one);
    for (int i = 0; i < 6; ++i) {
      rotating.run();
      for (std::size_t b = 0; b < backends.size(); ++b) {
        EXPECT_EQ(backends[b].calls[kernels::BackendOp::kAttention],
                  (i + 3 - static_cast<int>(b)) / 3)
            << "after run " << i << ", copy " << b;
      }
    }
    EXPECT_EQ(rotating.verify().passed, faulty < 0) << faulty;
  }
}

TEST(DecoderBlock, WholeLayerRunsTheMoeLayerOnTheBlocksOutput) {
  const auto m = tiny_qwen3();
  auto spec = kernels::LayerSpec::from_model(m, 1, DType::kBf16, 5);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  for (const bool fault : {false, true}) {
    kernels::run_in_process(1, [&](kernels::Communicator& world) {
      RecordingBackend backend;
      auto c = make_decoder_case(m, DType::kBf16, {false, 24, 24}, &*spec, &world, backend);
      ASSERT_TRUE(c.ok()) << c.error().message;
      if (fault) (*c)->inject_fault();
      const Measurement meas = measure(**c, nullptr, fast());
      EXPECT_EQ(meas.disposition,
                fault ? planner::Disposition::kIncorrect : planner::Disposition::kPassed)
          << meas.detail;
      if (fault) return;
      EXPECT_GE(backend.calls[kernels::BackendOp::kRoute], 1);  // the MoE layer ran
      const auto counts = (*c)->routed_counts();
      ASSERT_EQ(counts.size(), 8U);
      EXPECT_DOUBLE_EQ(std::accumulate(counts.begin(), counts.end(), 0.0), 24.0 * 2);
    });
  }
}

TEST(DecoderBlock, CheckOpsComparesEveryOpOnEveryRow) {
  const auto m = tiny_qwen3();
  auto spec = kernels::LayerSpec::from_model(m, 1, DType::kBf16, 5);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  kernels::run_in_process(1, [&](kernels::Communicator& world) {
    auto backend = kernels::make_cpu_backend();
    auto c = make_decoder_case(m, DType::kBf16, {true, 3, 20}, &*spec, &world, *backend);
    ASSERT_TRUE(c.ok()) << c.error().message;
    const auto ops = (*c)->check_ops(0);
    // op, values compared on every row: 3 tokens of hidden 128; q/k/v 3 × (4 + 2·2) × 32; q
    // heads 4 and K/V heads 2 of 32; the attention core's 3 × 4 heads × 32; the MoE layer's
    // 3 tokens × 128.
    const std::vector<std::pair<std::string, long>> expected = {
        {"input norm", 3 * 128},          {"q/k/v projection", 3 * 8 * 32},
        {"RoPE q", 3 * 4 * 32},           {"RoPE k", 3 * 2 * 32},
        {"q norm", 3 * 4 * 32},           {"k norm", 3 * 2 * 32},
        {"attention core", 3 * 4 * 32},   {"output projection", 3 * 128},
        {"post-attention norm", 3 * 128}, {"MoE layer", 3 * 128}};
    ASSERT_EQ(ops.size(), expected.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      EXPECT_EQ(ops[i].op, expected[i].first);
      EXPECT_EQ(ops[i].checked, expected[i].second) << ops[i].op;
      EXPECT_TRUE(ops[i].passed) << ops[i].detail;
      EXPECT_GE(ops[i].max_bound_use, 0.0);
      EXPECT_LE(ops[i].max_bound_use, 1.0) << ops[i].op;
    }
    // A wrong result: the op it entered fails, with the value named; the ops before pass.
    (*c)->inject_fault();
    const auto bad = (*c)->check_ops(0);
    for (const auto& op : bad) {
      EXPECT_EQ(op.passed, op.op != "post-attention norm") << op.op;
    }
    EXPECT_NE(bad[8].detail.find("post-attention norm row 0 value 64"), std::string::npos)
        << bad[8].detail;
    EXPECT_GT(bad[8].max_bound_use, 1.0);
  });
}

TEST(DecoderBlock, MlaRunsItsOpsAndVerifiesEach) {
  // Prefill expanded (kv up projection, multi-head attention), decode absorbed (a W_UK and a
  // W_UV GEMM per head around the attention over the latent), with and without the q LoRA.
  for (const int q_lora : {0, 48}) {
    const auto m = tiny_mla(q_lora);
    for (const DecoderCaseShape shape : {DecoderCaseShape{false, 40, 40}, {true, 3, 50}}) {
      for (const DType dt : {DType::kBf16, DType::kFp32}) {
        SCOPED_TRACE("q_lora " + std::to_string(q_lora) + " " +
                     (shape.decode ? "decode " : "prefill ") + std::string(dtype_name(dt)));
        for (const bool fault : {false, true}) {
          RecordingBackend backend;
          auto c = make_decoder_case(m, dt, shape, nullptr, nullptr, backend);
          ASSERT_TRUE(c.ok()) << c.error().message;
          if (fault) (*c)->inject_fault();
          const Measurement meas = measure(**c, nullptr, fast());
          EXPECT_EQ(meas.disposition,
                    fault ? planner::Disposition::kIncorrect : planner::Disposition::kPassed)
              << meas.detail;
          if (fault) {
            EXPECT_NE(meas.detail.find("post-attention norm"), std::string::npos) << meas.detail;
            continue;
          }
          // Per run: the input, kv latent and post-attention norms (and the q latent norm);
          // RoPE on the rope key and the query; the q projection (down and up with a LoRA),
          // kv down, then kv up (prefill) or W_UK and W_UV per head (decode), and the output.
          const int runs = backend.calls[kernels::BackendOp::kAttention];
          ASSERT_GE(runs, 3);
          const int lora = q_lora > 0 ? 1 : 0;
          EXPECT_EQ(backend.calls[kernels::BackendOp::kRmsNorm], (3 + lora) * runs);
          EXPECT_EQ(backend.calls[kernels::BackendOp::kRope], 2 * runs);
          const int middle = shape.decode ? 2 * m.attention.num_heads : 1;
          EXPECT_EQ(backend.calls[kernels::BackendOp::kGemm], (3 + lora + middle) * runs);
        }
      }
    }
  }
}

TEST(DecoderBlock, MlaCheckOpsComparesEveryOpOnEveryRow) {
  const auto m = tiny_mla(48);
  auto spec = kernels::LayerSpec::from_model(m, 1, DType::kBf16, 5);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  kernels::run_in_process(1, [&](kernels::Communicator& world) {
    auto backend = kernels::make_cpu_backend();
    // op, values compared on every row of 3 sequences (decode): hidden 128; the q LoRA 48; 4
    // heads of 24; kv down 32 + 8; the latent 32; the rope key 8; per head the latent 32
    // (W_UK) and the value 16 (W_UV); the attention over the latent, 3 × 4 heads × 32.
    const std::vector<std::pair<std::string, long>> decode = {{"input norm", 3 * 128},
                                                              {"q down projection", 3 * 48},
                                                              {"q latent norm", 3 * 48},
                                                              {"q up projection", 3 * 4 * 24},
                                                              {"kv down projection", 3 * 40},
                                                              {"kv latent norm", 3 * 32},
                                                              {"RoPE k", 3 * 8},
                                                              {"RoPE q", 3 * 4 * 24},
                                                              {"q through W_UK", 4 * 3 * 32},
                                                              {"attention core", 3 * 4 * 32},
                                                              {"latent through W_UV", 4 * 3 * 16},
                                                              {"output projection", 3 * 128},
                                                              {"post-attention norm", 3 * 128},
                                                              {"MoE layer", 3 * 128}};
    // Prefill of 5 tokens: kv up to 4 heads of 16 + 16, multi-head attention 5 × 4 × 16.
    const std::vector<std::pair<std::string, long>> prefill = {{"input norm", 5 * 128},
                                                               {"q down projection", 5 * 48},
                                                               {"q latent norm", 5 * 48},
                                                               {"q up projection", 5 * 4 * 24},
                                                               {"kv down projection", 5 * 40},
                                                               {"kv latent norm", 5 * 32},
                                                               {"RoPE k", 5 * 8},
                                                               {"RoPE q", 5 * 4 * 24},
                                                               {"kv up projection", 5 * 4 * 32},
                                                               {"attention core", 5 * 4 * 16},
                                                               {"output projection", 5 * 128},
                                                               {"post-attention norm", 5 * 128},
                                                               {"MoE layer", 5 * 128}};
    for (const auto& [shape, expected] : {std::pair{DecoderCaseShape{true, 3, 20}, decode},
                                          {DecoderCaseShape{false, 5, 5}, prefill}}) {
      SCOPED_TRACE(shape.decode ? "decode" : "prefill");
      auto c = make_decoder_case(m, DType::kBf16, shape, &*spec, &world, *backend);
      ASSERT_TRUE(c.ok()) << c.error().message;
      const auto ops = (*c)->check_ops(0);
      ASSERT_EQ(ops.size(), expected.size());
      for (std::size_t i = 0; i < ops.size(); ++i) {
        EXPECT_EQ(ops[i].op, expected[i].first);
        EXPECT_EQ(ops[i].checked, expected[i].second) << ops[i].op;
        EXPECT_TRUE(ops[i].passed) << ops[i].detail;
        EXPECT_LE(ops[i].max_bound_use, 1.0) << ops[i].op;
      }
      const auto counts = (*c)->routed_counts();
      ASSERT_EQ(counts.size(), 8U);
      EXPECT_DOUBLE_EQ(std::accumulate(counts.begin(), counts.end(), 0.0), shape.tokens * 2.0);
      (*c)->inject_fault();
      const auto bad = (*c)->check_ops(0);
      for (const auto& op : bad) EXPECT_EQ(op.passed, op.op != "post-attention norm") << op.op;
    }
  });
}

TEST(DecoderBlock, RefusesWhatItCannotRun) {
  auto backend = kernels::make_cpu_backend();
  EXPECT_TRUE(decoder_block_problem(tiny_mla(0)).empty());
  auto odd = tiny_mla(0);
  odd.attention.qk_rope_head_dim = 7;  // no whole pairs to rotate
  auto c = make_decoder_case(odd, DType::kBf16, {false, 8, 8}, nullptr, nullptr, *backend);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("qk_rope_head_dim 7"), std::string::npos) << c.error().message;
  auto odd_head = tiny_qwen3();
  odd_head.attention.head_dim = 33;
  EXPECT_NE(decoder_block_problem(odd_head).find("head_dim 33"), std::string::npos);
  EXPECT_FALSE(decoder_block_problem(tiny_qwen3()).size() > 0);
  // A prompt is as long as its context; decode needs sequences.
  EXPECT_FALSE(
      make_decoder_case(tiny_qwen3(), DType::kBf16, {false, 8, 16}, nullptr, nullptr, *backend)
          .ok());
  EXPECT_FALSE(
      make_decoder_case(tiny_qwen3(), DType::kBf16, {true, 0, 16}, nullptr, nullptr, *backend)
          .ok());
  // The MoE layer's hidden size must be the block's.
  auto wide = kernels::LayerSpec::from_model(models::load_model("qwen3-30b-a3b").value(), 8,
                                             DType::kBf16, 1);  // hidden 256
  ASSERT_TRUE(wide.ok());
  kernels::run_in_process(1, [&](kernels::Communicator& world) {
    auto w = make_decoder_case(tiny_qwen3(), DType::kBf16, {false, 8, 8}, &*wide, &world, *backend);
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.error().message.find("hidden"), std::string::npos) << w.error().message;
  });
}

TEST(DecoderBlock, ValidateRequestOfEachScope) {
  AttentionValidateOptions o;
  o.model = "qwen3-30b-a3b";
  o.costs = "unused.db";
  o.contexts = "64";
  o.batches = "2";
  o.scope = "block";
  auto r = make_attention_validate_request(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->scope, AttentionScope::kBlock);
  EXPECT_FALSE(r->moe.has_value());
  ASSERT_EQ(r->cases.size(), 2U);  // prefill 64, decode 2 × 64
  o.scope = "layer";
  r = make_attention_validate_request(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->moe.has_value());
  EXPECT_EQ(r->moe->hidden, 2048);
  EXPECT_EQ(r->moe->num_experts, 128);
  o.tp = "2";
  r = make_attention_validate_request(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().input, "tp");
  o.tp = "1";
  o.scope = "nope";
  EXPECT_FALSE(make_attention_validate_request(o).ok());
  o.scope = "block";
  o.weights = "mxfp4";
  r = make_attention_validate_request(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().input, "weights");
}

// validate's errors leave out a case timed over a stand-in (its time is not the kernels') and
// one that failed verification, count the stand-ins, and say when no case is left to compare.
TEST(Validate, CasesTimedOverAStandInAreLeftOutOfTheErrors) {
  const auto row = [](double measured, double predicted, double roofline, std::string stand_in) {
    ValidateRow r;
    r.measured_s = measured;
    r.predicted.experts.seconds = predicted;
    r.roofline.experts.seconds = roofline;
    r.stand_in = std::move(stand_in);
    return r;
  };
  std::vector<ValidateRow> rows = {row(1.0, 1.1, 2.0, ""), row(1.0, 1.3, 3.0, ""),
                                   row(1.0, 9.0, 9.0, "fp8 GEMM emulated")};
  ValidateSummary s = summarize(rows);
  EXPECT_EQ(s.compared, 2);
  EXPECT_EQ(s.stand_in_cases, 1);
  EXPECT_TRUE(s.all_verified);
  EXPECT_NEAR(s.worst_abs_error, 0.3, 1e-12);  // 8.0 (the stand-in's) left out
  EXPECT_NEAR(s.median_abs_error, 0.2, 1e-12);
  EXPECT_NEAR(s.roofline_worst_abs_error, 2.0, 1e-12);
  // A case that failed verification is not compared either (and the summary says so).
  rows.push_back(row(1.0, 5.0, 5.0, ""));
  rows.back().verified = false;
  s = summarize(rows);
  EXPECT_EQ(s.compared, 2);
  EXPECT_FALSE(s.all_verified);
  EXPECT_NEAR(s.worst_abs_error, 0.3, 1e-12);
  rows = {row(1.0, 9.0, 9.0, "fp8 GEMM emulated")};
  s = summarize(rows);
  EXPECT_EQ(s.compared, 0);
  EXPECT_EQ(s.stand_in_cases, 1);
  // The attention rows: the same rule.
  AttentionValidateRow a;
  a.measured_s = 1.0;
  a.predicted.seconds = 1.5;
  a.roofline.seconds = 2.0;
  std::vector<AttentionValidateRow> attention = {a, a};
  attention[1].predicted.seconds = 7.0;
  attention[1].stand_in = "fp8 GEMM emulated";
  s = summarize(attention);
  EXPECT_EQ(s.compared, 1);
  EXPECT_EQ(s.stand_in_cases, 1);
  EXPECT_NEAR(s.worst_abs_error, 0.5, 1e-12);
}

// A case whose samples had not settled is measured again after the others; the steadier
// measurement is kept only when it is verified, on the backend's own kernels and spread less.
TEST(Validate, TheSteadierOfTwoMeasurementsIsKept) {
  const auto row = [](double median, double p10, double p90) {
    ValidateRow r;
    r.measured_s = median;
    r.p10_s = p10;
    r.p90_s = p90;
    return r;
  };
  const ValidateRow first = row(10.0, 9.0, 11.0);  // spread 20%
  EXPECT_DOUBLE_EQ(case_spread(first), 0.2);
  EXPECT_TRUE(unsettled(first, 0.05));
  EXPECT_FALSE(unsettled(first, 0.25));
  ValidateRow stand_in = first;
  stand_in.stand_in = "emulated";
  EXPECT_FALSE(unsettled(stand_in, 0.05));  // not the kernels' time: not measured again
  ValidateRow kept = first;
  keep_steadier(kept, row(8.0, 7.9, 8.1));  // spread 2.5%: replaces
  EXPECT_TRUE(kept.second_look.done);
  EXPECT_TRUE(kept.second_look.replaced);
  EXPECT_DOUBLE_EQ(kept.measured_s, 8.0);
  EXPECT_DOUBLE_EQ(kept.second_look.other_s, 10.0);
  EXPECT_DOUBLE_EQ(kept.second_look.other_spread, 0.2);
  ValidateRow noisier = first;
  keep_steadier(noisier, row(12.0, 9.0, 15.0));  // spread 50%: the first stays
  EXPECT_TRUE(noisier.second_look.done);
  EXPECT_FALSE(noisier.second_look.replaced);
  EXPECT_DOUBLE_EQ(noisier.measured_s, 10.0);
  EXPECT_DOUBLE_EQ(noisier.second_look.other_s, 12.0);
  ValidateRow wrong = first;
  ValidateRow unverified = row(8.0, 7.9, 8.1);
  unverified.verified = false;
  keep_steadier(wrong, unverified);
  EXPECT_FALSE(wrong.second_look.replaced);
  EXPECT_TRUE(wrong.verified);
  const auto s = summarize(std::vector<ValidateRow>{kept, noisier, first});
  EXPECT_EQ(s.remeasured, 2);
  EXPECT_EQ(s.replaced, 1);
}

// validate --attention measures each unsettled case again (every case here: a negative spread
// target), on the same backend, and keeps a verified measurement either way.
TEST(Validate, AttentionCasesThatHadNotSettledAreMeasuredAgain) {
  AttentionValidateOptions o;
  o.model = "qwen1.5-moe-a2.7b";
  o.costs = "unused.db";
  o.contexts = "32";
  o.batches = "2";
  o.max_seconds = 0.05;
  auto r = make_attention_validate_request(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  r->harness.target_spread = -1.0;
  std::vector<std::string> progress;
  const auto rows = run_attention_validate(
      *r, [&](int, int, const std::string& what) { progress.push_back(what); });
  ASSERT_EQ(rows.size(), r->cases.size());
  for (const auto& row : rows) {
    EXPECT_TRUE(row.verified) << row.verify_detail;
    EXPECT_TRUE(row.second_look.done);
    EXPECT_GT(row.measured_s, 0.0);
    EXPECT_GT(row.second_look.other_s, 0.0);
  }
  // Each case once, then each again, said on the progress line.
  ASSERT_EQ(progress.size(), 2 * rows.size());
  EXPECT_EQ(progress[rows.size()].rfind("measured again (had not settled): ", 0), 0U)
      << progress[rows.size()];
}

// Under a launcher only rank 0 reads the cost database: run_validate_cases hands the profile's
// rotation to the other ranks, whose requests hold the default (kColdBytes: 59 copies of a rank's
// ~4.6 MB of weights at 1/16 width) until told.
TEST(Validate, EveryRankTakesRankZerosColdRotation) {
  ValidateOptions o;
  o.model = "qwen1.5-moe-a2.7b";
  o.scale = 16;
  o.costs = "read by rank 0 only";
  o.layouts = "2x1";
  o.dispatchers = "a2av";
  o.tokens = "32";
  o.max_seconds = 0.05;
  auto req = make_validate_request(o, 2);
  ASSERT_TRUE(req.ok()) << req.error().message;
  std::vector<int> copies(2, 0);
  kernels::run_in_process(2, [&](kernels::Communicator& world) {
    ValidateRequest mine = *req;
    if (world.rank() == 0) mine.cold_bytes = std::size_t{1} << 20;  // a rank's weights exceed it
    const auto rows = run_validate_cases(world, mine, {}, {});
    ASSERT_EQ(rows.size(), 1U);
    EXPECT_TRUE(rows.front().verified) << rows.front().verify_detail;
    copies[static_cast<std::size_t>(world.rank())] = rows.front().copies;
  });
  EXPECT_EQ(copies, (std::vector<int>{1, 1}));
}

}  // namespace
}  // namespace test_decoder_block
}  // namespace moeplan::profiler
