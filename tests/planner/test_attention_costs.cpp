// The decoder outside its MoE blocks (issue 20): the attention core's roofline, the queries the
// cost model asks for MHA/GQA and MLA in both phases, and the latency targets of a plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "models/registry.hpp"
#include "planner/costs/cost_model.hpp"
#include "planner/costs/measured_costs.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/plan.hpp"
#include "planner/plan_request.hpp"
#include "tests/planner/roofline_recorder.hpp"

namespace moeplan::planner {
namespace test_attention_costs {
namespace {

models::MoeModel model(const std::string& name) { return models::load_model(name).value(); }
Cluster cluster(const std::string& name) { return load_cluster(name).value(); }

using Recorder = RooflineRecorder;

Layout layout(int ep, int tp) {
  Layout l;
  l.num_gpus = ep * tp;
  l.ep_size = ep;
  l.tp_size = tp;
  l.dispatcher = Dispatcher::kA2av;
  return l;
}

// Decode of a GQA model reads its KV cache: memory-bound, the KV bytes at 85% of the HBM; a
// long prefill is compute-bound at the GEMM efficiency of its prompt's rows.
TEST(AttentionRoofline, DecodeReadsTheKvCachePrefillComputes) {
  const auto c = cluster("1x-hgx-h200");
  const RooflineCosts roof(c);
  const auto& dev = c.device();
  // Qwen3-30B-A3B on one GPU: 32 query heads over 4 KV heads of 128; 128 sequences at 4096.
  AttentionQuery d;
  d.decode = true;
  d.tokens = 128;
  d.context = 4096;
  d.heads = 32;
  d.kv_heads = 4;
  d.qk_dim = 128;
  d.v_dim = 128;
  d.kv_bytes_per_token = 2.0 * 4 * 128 * 2;  // K and V of 4 heads, bf16
  const double kv = 128.0 * 4096 * 2048;
  const double qo = 128.0 * 32 * 256 * 2;
  EXPECT_DOUBLE_EQ(d.bytes(), kv + qo);
  EXPECT_DOUBLE_EQ(d.flops(), 2.0 * 32 * 256 * 128 * 4096);
  auto t = roof.attention(d);
  ASSERT_TRUE(t.ok());
  EXPECT_NEAR(t->seconds, (kv + qo) / (dev.hbm_bandwidth * kHbmEfficiency) + kKernelLaunchSeconds,
              1e-12);
  EXPECT_EQ(t->source, "roofline");
  // Twice the context, twice the KV read (and nearly twice the time).
  AttentionQuery d2 = d;
  d2.context = 8192;
  EXPECT_GT(roof.attention(d2)->seconds, 1.9 * (t->seconds - kKernelLaunchSeconds));

  // Prefill of two 4096-token prompts: causal, each token sees (4096 + 1) / 2 keys on average.
  AttentionQuery p = d;
  p.decode = false;
  p.tokens = 8192;
  EXPECT_DOUBLE_EQ(p.flops(), 2.0 * 32 * 256 * 8192 * 2048.5);
  auto tp = roof.attention(p);
  ASSERT_TRUE(tp.ok());
  EXPECT_NEAR(tp->seconds,
              p.flops() / (dev.peak_bf16_flops * gemm_efficiency(4096)) + kKernelLaunchSeconds,
              1e-12);
  AttentionQuery bad = d;
  bad.context = -1;
  EXPECT_FALSE(roof.attention(bad).ok());
}

// A cost database has no attention: the roofline answers, labelled and listed as a miss.
TEST(AttentionRoofline, MeasuredSourceFallsBackAndSaysSo) {
  const auto c = cluster("1x-hgx-h200");
  MeasuredCosts mc({}, c, "measured:test", CostStatistic::kMedian, nullptr);
  AttentionQuery q;
  q.decode = true;
  q.tokens = 8;
  q.context = 1024;
  q.heads = 8;
  q.kv_heads = 8;
  q.qk_dim = 64;
  q.v_dim = 64;
  q.kv_bytes_per_token = 2048;
  auto r = mc.attention(q);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, kSourceMiss);
  EXPECT_DOUBLE_EQ(r->seconds, RooflineCosts(c).attention(q)->seconds);
  ASSERT_EQ(mc.misses().size(), 1U);
  EXPECT_EQ(mc.misses()[0], "attention decode dtype=bf16 heads=8 kv_heads=8 qk=64 v=64");
}

CostPoint attention_point(bool decode, int tokens, int context, double seconds,
                          const std::string& backend = "cpu") {
  CostPoint p;
  p.device = "cpu:test";
  p.backend = backend;
  p.op = "attention";
  p.dtype = "bf16";
  p.shape = std::string("decode=") + (decode ? "1" : "0") + ",tokens=" + std::to_string(tokens) +
            ",context=" + std::to_string(context) + ",heads=8,kv_heads=2,qk=64,v=64";
  p.m = tokens;
  p.n = context;
  p.k = 8;
  p.median_s = seconds;
  return p;
}

// Profiled attention points answer the cost model's queries of the same per-rank shape. Decode:
// one curve in sequences × context (the cached K/V it streams), exact, log-log between points,
// the roofline's ratio beyond; prefill: per measured context a curve in tokens, log-log between
// contexts. Another head shape is a miss.
TEST(AttentionMeasured, ExactInterpolatedAndExtrapolated) {
  const auto c = cluster("1x-hgx-h200");
  const std::vector<CostPoint> pts = {
      attention_point(true, 1, 1024, 1e-4),     attention_point(true, 8, 1024, 8e-4),
      attention_point(true, 1, 4096, 4e-4),     attention_point(true, 8, 4096, 3.2e-3),
      attention_point(false, 1024, 1024, 2e-2), attention_point(false, 4096, 4096, 3.2e-1)};
  MeasuredCosts mc(pts, c, "measured:test", CostStatistic::kMedian, nullptr);
  const RooflineCosts roof(c);
  AttentionQuery q;
  q.decode = true;
  q.heads = 8;
  q.kv_heads = 2;
  q.qk_dim = 64;
  q.v_dim = 64;
  q.kv_bytes_per_token = 2.0 * 2 * 64 * 2;
  q.tokens = 8;
  q.context = 4096;
  auto r = mc.attention(q);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, kSourceExact);
  EXPECT_DOUBLE_EQ(r->seconds, 3.2e-3);
  // The same pairs from another batch and context: 2 sequences of 2048 = 1 of 4096.
  q.tokens = 2;
  q.context = 2048;
  r = mc.attention(q);
  EXPECT_EQ(r->source, kSourceExact);
  EXPECT_DOUBLE_EQ(r->seconds, 4e-4);
  // Between 1024 and 4096 pairs, log-log: 2 sequences of 1024 → 2e-4.
  q.context = 1024;
  r = mc.attention(q);
  EXPECT_EQ(r->source, kSourceInterp);
  EXPECT_NEAR(r->seconds, 2e-4, 1e-15);
  // Beyond the most pairs measured: the last point scaled by the roofline's ratio.
  q.tokens = 8;
  q.context = 16384;
  r = mc.attention(q);
  EXPECT_EQ(r->source, kSourceExtrap);
  AttentionQuery edge = q;
  edge.tokens = 2;  // 32768 pairs at this context
  EXPECT_NEAR(r->seconds, 3.2e-3 * roof.attention(q)->seconds / roof.attention(edge)->seconds,
              1e-12);
  // Prefill: a measured prompt exactly; a prompt between two measured contexts is the log-log
  // mean of the two contexts' answers (each scaled to the tokens by the roofline).
  AttentionQuery pf = q;
  pf.decode = false;
  pf.tokens = 1024;
  pf.context = 1024;
  r = mc.attention(pf);
  EXPECT_EQ(r->source, kSourceExact);
  EXPECT_DOUBLE_EQ(r->seconds, 2e-2);
  pf.tokens = 2048;
  pf.context = 2048;
  r = mc.attention(pf);
  EXPECT_EQ(r->source, kSourceExtrap);
  const auto at = [&](double tokens, double context) {
    AttentionQuery x = pf;
    x.tokens = tokens;
    x.context = context;
    return roof.attention(x)->seconds;
  };
  const double t1 = 2e-2 * at(2048, 1024) / at(1024, 1024);
  const double t2 = 3.2e-1 * at(2048, 4096) / at(4096, 4096);
  EXPECT_NEAR(r->seconds, std::sqrt(t1 * t2), 1e-12);
  EXPECT_TRUE(mc.misses().empty());
  // Heads the profile never ran (another tp): a miss, answered by the roofline.
  q.heads = 4;
  q.kv_heads = 1;
  r = mc.attention(q);
  EXPECT_EQ(r->source, kSourceMiss);
  EXPECT_EQ(mc.misses().size(), 1U);
}

// A GPU's decode points (imported tables, a CUDA profile) are not one curve in sequences ×
// context: a few long sequences leave SMs idle that many short ones fill. They are curves in
// sequences per context, log-log between contexts, as prefill's.
TEST(AttentionMeasured, GpuDecodeByContext) {
  const auto c = cluster("1x-hgx-h200");
  const std::vector<CostPoint> pts = {attention_point(true, 1, 1024, 1e-5, "trtllm"),
                                      attention_point(true, 8, 1024, 2e-5, "trtllm"),
                                      attention_point(true, 1, 4096, 3e-5, "trtllm"),
                                      attention_point(true, 8, 4096, 8e-5, "trtllm")};
  MeasuredCosts mc(pts, c, "measured:test", CostStatistic::kMedian, nullptr);
  AttentionQuery q;
  q.decode = true;
  q.heads = 8;
  q.kv_heads = 2;
  q.qk_dim = 64;
  q.v_dim = 64;
  q.kv_bytes_per_token = 2.0 * 2 * 64 * 2;
  q.tokens = 8;
  q.context = 1024;
  auto r = mc.attention(q);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, kSourceExact);
  EXPECT_DOUBLE_EQ(r->seconds, 2e-5);
  // 2 sequences of 4096 are 8192 pairs, as 8 of 1024; but not the same time on a GPU: the
  // 4096 curve at 2 sequences (log-log between 1 and 8), not the 1024 curve's 8.
  q.tokens = 2;
  q.context = 4096;
  r = mc.attention(q);
  EXPECT_EQ(r->source, kSourceInterp);
  EXPECT_NEAR(r->seconds, 3e-5 * std::pow(8e-5 / 3e-5, std::log(2.0) / std::log(8.0)), 1e-15);
  // Between contexts, log-log: 8 sequences of 2048 → √(2e-5 · 8e-5).
  q.tokens = 8;
  q.context = 2048;
  r = mc.attention(q);
  EXPECT_EQ(r->source, kSourceInterp);
  EXPECT_NEAR(r->seconds, std::sqrt(2e-5 * 8e-5), 1e-15);
  EXPECT_TRUE(mc.misses().empty());
}

// The queries per attention type: GQA splits the heads over TP and replicates KV heads past
// their count; MLA's decode attends to the shared latent (absorbed), its prefill to per-head
// keys and values expanded from it.
TEST(AttentionCost, QueriesFollowTheAttentionType) {
  {
    const auto m = model("qwen3-30b-a3b");  // 32 heads, 4 KV heads of 128
    const auto c = cluster("1x-hgx-h200");
    Recorder rec(c);
    const ExpertLoad load = ExpertLoad::uniform(1, m.num_experts);
    Workload w{Phase::kDecode, 64};
    w.isl = 1000;
    w.osl = 200;
    const CostContext ctx{m, c, rec, w, load, nullptr};
    ASSERT_TRUE(cost_layout(ctx, layout(1, 8)).ok());
    ASSERT_EQ(rec.attention_queries.size(), 1U);
    const auto& q = rec.attention_queries[0];
    EXPECT_TRUE(q.decode);
    EXPECT_DOUBLE_EQ(q.tokens, 8.0 * 64);  // the TP group's sequences
    EXPECT_DOUBLE_EQ(q.context, 1100.0);   // isl + osl / 2
    EXPECT_DOUBLE_EQ(q.heads, 4.0);        // 32 / 8
    EXPECT_DOUBLE_EQ(q.kv_heads, 1.0);     // 4 KV heads over 8 ranks: one each, replicated
    EXPECT_DOUBLE_EQ(q.kv_bytes_per_token, 2.0 * 128 * 2);
  }
  {
    const auto m = model("deepseek-v3");  // MLA: 128 heads, latent 512 + rope 64
    const auto c = cluster("1x-hgx-h200");
    for (const Phase phase : {Phase::kDecode, Phase::kPrefill}) {
      Recorder rec(c);
      const ExpertLoad load = ExpertLoad::uniform(1, m.num_experts);
      const Workload w{phase, phase == Phase::kDecode ? 32 : 2048};
      const CostContext ctx{m, c, rec, w, load, nullptr};
      ASSERT_TRUE(cost_layout(ctx, layout(4, 2)).ok());
      ASSERT_EQ(rec.attention_queries.size(), 1U);
      const auto& q = rec.attention_queries[0];
      EXPECT_DOUBLE_EQ(q.heads, 64.0);
      EXPECT_DOUBLE_EQ(q.context, kDefaultAttentionContext);  // no isl given
      if (phase == Phase::kDecode) {
        EXPECT_DOUBLE_EQ(q.kv_heads, 1.0);
        EXPECT_DOUBLE_EQ(q.qk_dim, 512.0 + 64.0);
        EXPECT_DOUBLE_EQ(q.v_dim, 512.0);
        EXPECT_DOUBLE_EQ(q.kv_bytes_per_token, (512.0 + 64.0) * 2);  // on every TP rank
      } else {
        EXPECT_DOUBLE_EQ(q.kv_heads, 64.0);
        EXPECT_DOUBLE_EQ(q.qk_dim, 128.0 + 64.0);
        EXPECT_DOUBLE_EQ(q.v_dim, 128.0);
      }
    }
  }
}

// The projections profile measures (dense_gemm_shapes) are every GEMM the attention block and
// the dense MLP ask for, whatever the attention type, tp and phase (the LM head aside); RoPE and
// the norms are priced as their own elementwise passes.
TEST(AttentionCost, ProjectionShapesCoverTheBlocksGemms) {
  const auto c = cluster("1x-hgx-h200");
  for (const std::string name :
       {"qwen3-30b-a3b", "qwen2-57b-a14b", "deepseek-v3", "deepseek-v2-lite", "mixtral-8x7b"}) {
    const auto m = model(name);
    for (const int tp : {1, 2, 8}) {
      const auto shapes = dense_gemm_shapes(m, tp);
      const double head_n = std::ceil(static_cast<double>(m.vocab_size) / tp);
      for (const Phase phase : {Phase::kPrefill, Phase::kDecode}) {
        SCOPED_TRACE(name + " tp " + std::to_string(tp) + " " + phase_name(phase));
        Recorder rec(c);
        const ExpertLoad load = ExpertLoad::uniform(1, m.num_experts);
        const CostContext ctx{m, c, rec, Workload{phase, 16}, load, nullptr};
        ASSERT_TRUE(cost_dense_parts(ctx, layout(8 / tp, tp)).ok());
        int checked = 0;
        for (const auto& q : rec.gemms) {
          if (q.n == head_n && q.k == static_cast<double>(m.hidden_size)) continue;  // LM head
          const std::pair<int, int> nk{static_cast<int>(std::lround(q.n)),
                                       static_cast<int>(std::lround(q.k))};
          EXPECT_NE(std::find(shapes.begin(), shapes.end(), nk), shapes.end())
              << "gemm n=" << q.n << " k=" << q.k << " not in dense_gemm_shapes";
          ++checked;
        }
        EXPECT_GE(checked, 2);
        int rope = 0, norm = 0;
        for (const auto& e : rec.elementwise_ops) {
          rope += e.op == "rope" ? 1 : 0;
          norm += e.op == "norm" ? 1 : 0;
        }
        EXPECT_EQ(rope, 1);
        // Layer norms (one query for both) and the final norm; MLA's latent norm (and its q
        // LoRA's), Qwen3's q/k norms (one query for both).
        const int expected = 2 + (m.attention.mla ? 1 + (m.attention.q_lora_rank > 0 ? 1 : 0) : 0) +
                             (m.attention.qk_norm ? 1 : 0);
        EXPECT_EQ(norm, expected);
      }
    }
  }
}

// MLA's RoPE and the copies between its ops are priced as its CPU block runs them
// (profiler/decoder_block.cpp's MlaCase, validated by `validate --attention --scope block`):
// RoPE writes the rank's query heads whole and the rope key; prefill assembles every head's key
// and value and stores the latent cache; decode moves the per-head GEMMs' inputs and outputs and
// appends to the cache. GQA has no such copies.
TEST(AttentionCost, MlaRopeAndCopiesAreWhatItsBlockMoves) {
  const auto c = cluster("1x-hgx-h200");
  const auto m = model("deepseek-v3");
  const auto& a = m.attention;
  const double nope = a.qk_nope_head_dim, rope = a.qk_rope_head_dim, v = a.v_head_dim;
  const double lora = a.kv_lora_rank;
  const double b = dtype_bytes(m.dtype);
  for (const int tp : {1, 8}) {
    for (const Phase phase : {Phase::kPrefill, Phase::kDecode}) {
      SCOPED_TRACE("tp " + std::to_string(tp) + " " + phase_name(phase));
      Recorder rec(c);
      const CostContext ctx{
          m, c, rec, Workload{phase, 16}, ExpertLoad::uniform(1, m.num_experts), nullptr};
      ASSERT_TRUE(cost_dense_parts(ctx, layout(8 / tp, tp)).ok());
      const double t = 16.0 * tp;  // the TP group's tokens
      const double heads = 128.0 / tp;
      const double copied = phase == Phase::kDecode
                                ? t * (heads * (nope + 2 * lora + rope + v) + 2 * lora + rope)
                                : t * (heads * (nope + rope + v) + lora + rope);
      int stages = 0, ropes = 0;
      for (const auto& e : rec.elementwise_ops) {
        if (e.op == "stage") {
          ++stages;
          EXPECT_DOUBLE_EQ(e.bytes, 2.0 * copied * b);
        }
        if (e.op == "rope") {
          ++ropes;
          EXPECT_DOUBLE_EQ(e.bytes, 2.0 * t * (heads * (nope + rope) + rope) * b);
        }
      }
      EXPECT_EQ(stages, 1);
      EXPECT_EQ(ropes, 1);
    }
  }
  Recorder gqa(c);
  const auto q = model("qwen3-30b-a3b");
  const CostContext ctx{q,      c, gqa, Workload{Phase::kDecode, 16}, ExpertLoad::uniform(1, 128),
                        nullptr};
  ASSERT_TRUE(cost_dense_parts(ctx, layout(8, 1)).ok());
  for (const auto& e : gqa.elementwise_ops) EXPECT_NE(e.op, "stage");
}

// A chunked-prefill pass runs its chunk and its decode rows as one batch: every projection,
// norm and the all-reduce over both (each weight read once), each attention core over its own
// rows at its own context, MLA's prefill expansion over the chunk and its absorbed decode GEMMs
// over the decode rows. With either part empty it is that phase's block exactly.
TEST(AttentionCost, MixedPassSharesTheProjections) {
  const auto c = cluster("1x-hgx-h200");
  for (const std::string name : {"qwen3-30b-a3b", "deepseek-v3"}) {
    const auto m = model(name);
    const auto& a = m.attention;
    const ExpertLoad load = ExpertLoad::uniform(1, m.num_experts);
    for (const int tp : {1, 2}) {
      SCOPED_TRACE(name + " tp " + std::to_string(tp));
      Workload w{Phase::kPrefill, 80};
      w.isl = 1000;
      w.osl = 200;
      const double chunk = 64.0, dec = 16.0;
      Recorder rec(c);
      const CostContext ctx{m, c, rec, w, load, nullptr};
      auto mixed = cost_mixed_attention(ctx, layout(8 / tp, tp), chunk, dec);
      ASSERT_TRUE(mixed.ok()) << mixed.error().message;
      ASSERT_EQ(rec.attention_queries.size(), 2U);
      for (const auto& q : rec.attention_queries) {
        EXPECT_DOUBLE_EQ(q.tokens, tp * (q.decode ? dec : chunk));
        EXPECT_DOUBLE_EQ(q.context, q.decode ? 1100.0 : 1000.0);
      }
      EXPECT_NE(rec.attention_queries[0].decode, rec.attention_queries[1].decode);
      const double heads = std::ceil(static_cast<double>(a.num_heads) / tp);
      for (const auto& g : rec.gemms) {
        const int n = static_cast<int>(std::lround(g.n)), k = static_cast<int>(std::lround(g.k));
        double rows = tp * (chunk + dec);
        if (a.mla && n == heads * (a.qk_nope_head_dim + a.v_head_dim) && k == a.kv_lora_rank) {
          rows = tp * chunk;  // prefill's kv_b expansion
        } else if (a.mla && ((n == heads * a.kv_lora_rank && k == a.qk_nope_head_dim) ||
                             (n == heads * a.v_head_dim && k == a.kv_lora_rank))) {
          rows = tp * dec;  // decode's absorbed W_UK, W_UV
        }
        EXPECT_DOUBLE_EQ(g.m, rows) << "gemm n=" << g.n << " k=" << g.k;
      }
      if (tp > 1) {
        ASSERT_EQ(rec.collectives.size(), 1U);
        EXPECT_DOUBLE_EQ(
            rec.collectives[0].bytes,
            tp * (chunk + dec) * static_cast<double>(m.hidden_size) * dtype_bytes(m.dtype));
      }
      // Each weight read once: below the two blocks run apart.
      const RooflineCosts roof(c);
      auto block = [&](Phase phase, double tokens) {
        Workload pw = w;
        pw.phase = phase;
        pw.tokens_per_gpu = static_cast<int>(tokens);
        return cost_dense_parts({m, c, roof, pw, load, nullptr}, layout(8 / tp, tp))
            .value()
            .attention.seconds;
      };
      const CostContext rctx{m, c, roof, w, load, nullptr};
      EXPECT_LT(mixed->seconds, block(Phase::kPrefill, chunk) + block(Phase::kDecode, dec));
      EXPECT_EQ(cost_mixed_attention(rctx, layout(8 / tp, tp), chunk, 0.0)->seconds,
                block(Phase::kPrefill, chunk));
      EXPECT_EQ(cost_mixed_attention(rctx, layout(8 / tp, tp), 0.0, dec)->seconds,
                block(Phase::kDecode, dec));
    }
  }
  const auto m = model("qwen3-30b-a3b");
  const ExpertLoad load = ExpertLoad::uniform(1, m.num_experts);
  const RooflineCosts roof(c);
  const CostContext ctx{m, c, roof, Workload{Phase::kPrefill, 16}, load, nullptr};
  EXPECT_FALSE(cost_mixed_attention(ctx, layout(8, 1), -1.0, 4.0).ok());
}

// A mixed pass's head: embedding and norm over the chunk and the decode rows, logits for every
// decode row and for the prompts the chunk completes (one per isl prompt tokens); the two ends
// are a prefill step's and a decode step's head exactly.
TEST(AttentionCost, MixedHeadHasTheDecodeRowsLogits) {
  const auto c = cluster("1x-hgx-h200");
  const auto m = model("deepseek-v3");
  const ExpertLoad load = ExpertLoad::uniform(1, m.num_experts);
  for (const int tp : {1, 2}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    Workload w{Phase::kPrefill, 80};
    w.isl = 1000;
    w.osl = 200;
    const double chunk = 2500.0, dec = 16.0;
    Recorder rec(c);
    const CostContext ctx{m, c, rec, w, load, nullptr};
    auto head = cost_mixed_head(ctx, layout(8 / tp, tp), chunk, dec);
    ASSERT_TRUE(head.ok()) << head.error().message;
    ASSERT_EQ(rec.gemms.size(), 1U);
    // 16 decode rows and ceil(2500 / 1000) = 3 prompts' last tokens per GPU of the TP group.
    EXPECT_DOUBLE_EQ(rec.gemms[0].m, tp * dec + std::ceil(tp * chunk / 1000.0));
    EXPECT_DOUBLE_EQ(rec.gemms[0].n, std::ceil(static_cast<double>(m.vocab_size) / tp));
    const RooflineCosts roof(c);
    const CostContext rctx{m, c, roof, w, load, nullptr};
    auto step_head = [&](Phase phase, double tokens) {
      Workload pw = w;
      pw.phase = phase;
      pw.tokens_per_gpu = static_cast<int>(tokens);
      return cost_dense_parts({m, c, roof, pw, load, nullptr}, layout(8 / tp, tp))
          .value()
          .head.seconds;
    };
    EXPECT_EQ(cost_mixed_head(rctx, layout(8 / tp, tp), chunk, 0.0)->seconds,
              step_head(Phase::kPrefill, chunk));
    EXPECT_EQ(cost_mixed_head(rctx, layout(8 / tp, tp), 0.0, dec)->seconds,
              step_head(Phase::kDecode, dec));
    // Above the head a prefill step of c + b rows prices (a row in isl makes a token there).
    EXPECT_GT(cost_mixed_head(rctx, layout(8 / tp, tp), chunk, dec)->seconds,
              step_head(Phase::kPrefill, chunk + dec));
  }
  const RooflineCosts roof(c);
  const CostContext ctx{m, c, roof, Workload{Phase::kPrefill, 16}, load, nullptr};
  EXPECT_FALSE(cost_mixed_head(ctx, layout(8, 1), 4.0, -1.0).ok());
}

// Latency targets: checked against the phase, and a layout slower than its target cannot serve
// it (with the reason); with none left, one reason says what to change.
TEST(AttentionCost, LatencyTargetsRankAndExplain) {
  const auto m = model("qwen3-30b-a3b");
  const auto c = cluster("1x-hgx-h200");
  PlanChoices choices;
  choices.phase = "decode";
  choices.ttft_ms = 100.0;
  auto r = make_plan_request(m, c, choices, {}, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().input, "ttft_ms");
  choices.ttft_ms.reset();
  choices.tpot_ms = -1.0;
  r = make_plan_request(m, c, choices, {}, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().input, "tpot_ms");

  choices.tpot_ms.reset();
  r = make_plan_request(m, c, choices, {}, false);
  ASSERT_TRUE(r.ok());
  const RooflineCosts roof(c);
  auto free_plan = make_plan(m, c, roof, *r);
  ASSERT_TRUE(free_plan.ok());
  std::vector<double> steps;
  for (const auto& l : free_plan->layouts) {
    if (l.feasible) steps.push_back(l.step_seconds);
  }
  ASSERT_GE(steps.size(), 2U);
  std::sort(steps.begin(), steps.end());
  // A target between the two fastest: only the fastest meets it.
  choices.tpot_ms = 0.5 * (steps[0] + steps[1]) * 1e3;
  r = make_plan_request(m, c, choices, {}, false);
  ASSERT_TRUE(r.ok());
  auto plan = make_plan(m, c, roof, *r);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->recommended, 0);
  EXPECT_DOUBLE_EQ(plan->layouts[0].step_seconds, steps[0]);
  EXPECT_TRUE(plan->layouts[0].meets_target);
  int meeting = 0;
  for (const auto& l : plan->layouts) {
    meeting += l.meets_target ? 1 : 0;
    if (!l.meets_target) {
      EXPECT_NE(l.infeasible_reason.find("TPOT"), std::string::npos);
    }
  }
  EXPECT_EQ(meeting, 1);
  // Below the fastest: none, and the reason names the fastest and what to change.
  choices.tpot_ms = 0.5 * steps[0] * 1e3;
  r = make_plan_request(m, c, choices, {}, false);
  plan = make_plan(m, c, roof, *r);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->recommended, -1);
  ASSERT_FALSE(plan->reasons.empty());
  EXPECT_NE(plan->reasons[0].find("no layout meets the time-per-output-token target"),
            std::string::npos)
      << plan->reasons[0];
  EXPECT_NE(plan->reasons[0].find("{tpot_ms}"), std::string::npos);
  const auto j = plan_to_json(*plan, 0, false);
  EXPECT_DOUBLE_EQ(j["workload"]["tpot_target_ms"].get<double>(), 0.5 * steps[0] * 1e3);
  EXPECT_FALSE(j["layouts"][0]["meets_target"].get<bool>());
  EXPECT_NEAR(j["layouts"][0]["tpot_ms"].get<double>(), j["layouts"][0]["step_ms"].get<double>(),
              1e-12);
}

// The decode Pareto sweep: each batch's fastest layout that fits; the front is the points no
// other beats on both tokens/s/user and tokens/s/GPU.
TEST(AttentionCost, DecodeParetoFront) {
  const auto m = model("deepseek-v3");
  const auto c = cluster("1x-hgx-h200");
  const RooflineCosts roof(c);
  PlanChoices choices;
  choices.phase = "decode";
  choices.isl = 4096;
  choices.osl = 1024;
  auto r = make_plan_request(m, c, choices, {}, false);
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto points = decode_pareto(m, c, roof, *r, default_pareto_batches());
  ASSERT_TRUE(points.ok()) << points.error().message;
  // The KV cache of 4096 + 1024 tokens fits about 72 sequences per GPU: batches 1..64.
  ASSERT_EQ(points->size(), 7U);
  int front = 0;
  for (std::size_t i = 0; i < points->size(); ++i) {
    const auto& p = (*points)[i];
    EXPECT_EQ(p.batch_per_gpu, 1 << i);
    EXPECT_TRUE(p.best.feasible);
    EXPECT_NEAR(p.tokens_per_s_per_gpu, p.batch_per_gpu * p.tokens_per_s_per_user,
                1e-9 * p.tokens_per_s_per_gpu);
    EXPECT_NEAR(p.tokens_per_s_per_user * p.best.step_seconds, 1.0, 1e-12);
    front += p.on_front ? 1 : 0;
    for (const auto& q : *points) {
      const bool dominates = q.tokens_per_s_per_user >= p.tokens_per_s_per_user &&
                             q.tokens_per_s_per_gpu >= p.tokens_per_s_per_gpu &&
                             (q.tokens_per_s_per_user > p.tokens_per_s_per_user ||
                              q.tokens_per_s_per_gpu > p.tokens_per_s_per_gpu);
      if (p.on_front) {
        EXPECT_FALSE(dominates) << p.batch_per_gpu << " by " << q.batch_per_gpu;
      }
    }
  }
  EXPECT_GE(front, 2);
  // The smallest batch serves its users fastest, the largest its GPUs: both are on the front.
  EXPECT_TRUE(points->front().on_front);
  EXPECT_TRUE(points->back().on_front);
  const auto j = pareto_to_json(*points);
  ASSERT_EQ(j.size(), points->size());
  EXPECT_EQ(j[0]["batch_per_gpu"].get<int>(), 1);
  EXPECT_TRUE(j[0]["on_front"].get<bool>());

  // A point another beats on both counts is off the front.
  std::vector<ParetoPoint> crafted(4);
  const double figures[4][2] = {{10, 100}, {20, 200}, {30, 50}, {30, 50}};
  for (std::size_t i = 0; i < 4; ++i) {
    crafted[i].tokens_per_s_per_user = figures[i][0];
    crafted[i].tokens_per_s_per_gpu = figures[i][1];
  }
  mark_pareto_front(crafted);
  EXPECT_FALSE(crafted[0].on_front);  // (20, 200) beats it on both
  EXPECT_TRUE(crafted[1].on_front);
  EXPECT_TRUE(crafted[2].on_front);  // ties are not beaten
  EXPECT_TRUE(crafted[3].on_front);

  // Prefill has no such sweep.
  choices.phase = "prefill";
  choices.osl.reset();
  r = make_plan_request(m, c, choices, {}, false);
  ASSERT_TRUE(r.ok());
  auto bad = decode_pareto(m, c, roof, *r, default_pareto_batches());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().input, "pareto");
}

}  // namespace
}  // namespace test_attention_costs
}  // namespace moeplan::planner
