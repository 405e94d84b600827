// Quantized weight formats in the cost model: memory per GPU against DeepSeek-V3's checkpoint,
// weight-read bytes at the format's size, fp8 compute, fp8 dispatch with scales and bf16 combine.
#include <gtest/gtest.h>

#include <cmath>

#include "models/registry.hpp"
#include "planner/costs/cost_model.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "tests/models/dsv3_checkpoint.hpp"
#include "tests/planner/roofline_recorder.hpp"

namespace moeplan::planner {
namespace test_quantized_costs {
namespace {

using Recorder = RooflineRecorder;

models::MoeModel model(const std::string& name, const std::string& weights = "") {
  auto m = models::load_model(name);
  EXPECT_TRUE(m.ok());
  EXPECT_TRUE(models::apply_weights_choice(*m, weights).ok());
  return *m;
}

Cluster cluster(const std::string& name) {
  auto c = load_cluster(name);
  EXPECT_TRUE(c.ok());
  return std::move(c).value();
}

Layout layout(int ep, int tp, Dispatcher d) {
  Layout l;
  l.num_gpus = ep * tp;
  l.ep_size = ep;
  l.tp_size = tp;
  l.dispatcher = d;
  return l;
}

LayoutCost cost(const models::MoeModel& m, const Cluster& c, const CostSource& cs, const Layout& l,
                Phase phase, int tokens) {
  const ExpertLoad load = ExpertLoad::uniform(1, m.num_experts);
  const CostContext ctx{m, c, cs, {phase, tokens}, load, nullptr};
  auto r = cost_layout(ctx, l);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : LayoutCost{};
}

TEST(QuantizedCosts, DeepSeekV3MemoryMatchesItsCheckpointSplitByTheLayout) {
  const auto m = model("deepseek-v3");
  const auto c = cluster("16x-hgx-h200");
  const RooflineCosts rc(c);
  const auto ckpt = testing::dsv3_checkpoint();
  // Each GPU holds E/ep routed experts at 1/tp of their width, the routers and norms whole, and
  // 1/tp of the rest (attention, dense and shared MLPs, embeddings and head).
  for (const auto& [ep, tp] : {std::pair{128, 1}, {64, 2}, {32, 4}, {16, 8}, {8, 16}, {32, 1}}) {
    const auto l = cost(m, c, rc, layout(ep, tp, Dispatcher::kA2av), Phase::kPrefill, 1024);
    const double planned = l.memory.experts + l.memory.shared + l.memory.dense;
    const double checkpoint = ckpt.routed / (ep * tp) + ckpt.replicated + ckpt.split / tp;
    EXPECT_NEAR(planned / checkpoint, 1.0, 0.03) << ep << "x" << tp;  // the target
    // The one difference: the planner splits the two latent norms (q_a_layernorm 1536 and
    // kv_a_layernorm 512 bf16 values, 4096 bytes a layer) over TP with the attention.
    EXPECT_NEAR(planned, checkpoint - 61.0 * 4096 * (1.0 - 1.0 / tp), 1.0) << ep << "x" << tp;
    // Routed experts alone are exact (DeepSeek's widths are whole 128-blocks at tp ≤ 16).
    EXPECT_NEAR(l.memory.experts, ckpt.routed / (ep * tp), 1.0) << ep << "x" << tp;
  }
  // What moeplan planned before it read quantization_config: about twice the bytes.
  const auto bf16 = model("deepseek-v3", "bf16");
  const auto old = cost(bf16, c, rc, layout(32, 1, Dispatcher::kA2av), Phase::kPrefill, 1024);
  const auto now = cost(m, c, rc, layout(32, 1, Dispatcher::kA2av), Phase::kPrefill, 1024);
  EXPECT_GT(old.memory.experts / now.memory.experts, 1.99);
  EXPECT_LT(old.memory.experts / now.memory.experts, 2.0);
}

TEST(QuantizedCosts, ExpertGemmsRunAtFp8AndReadTheFormatsBytes) {
  const auto m = model("deepseek-v3");
  const auto c = cluster("1x-hgx-h200");
  const Recorder rec(c);
  cost(m, c, rec, layout(8, 1, Dispatcher::kA2av), Phase::kDecode, 64);
  ASSERT_FALSE(rec.grouped.empty());
  const double fp8_block = m.expert_weight_bytes() / (3.0 * 7168 * 2048);
  for (const auto& q : rec.grouped) {
    EXPECT_EQ(q.dtype, DType::kFp8);
    EXPECT_DOUBLE_EQ(q.weight_bytes, fp8_block);
  }
  // The router and the LM head stay bf16; the shared expert (gate/up, down), the attention's
  // projections (MLA decode: q down and up, KV down, q_nope into the latent, the latent out to
  // V, o_proj) and the dense MLP (gate/up, down) are fp8 like the routed experts: the
  // checkpoint stores them so.
  int fp8_gemms = 0, bf16_gemms = 0;
  for (const auto& q : rec.gemms) (q.dtype == DType::kFp8 ? fp8_gemms : bf16_gemms) += 1;
  EXPECT_EQ(fp8_gemms, 2 + 6 + 2);
  EXPECT_EQ(bf16_gemms, 2);

  // Decode is bound by reading weights: one token through an expert's gate+up reads the fp8
  // values and scales, not bf16's two bytes.
  const RooflineCosts rc(c);
  auto t = rc.gemm({1.0, 2.0 * 2048, 7168, DType::kFp8, fp8_block});
  ASSERT_TRUE(t.ok());
  const double bytes = (7168.0 + 2.0 * 2048) * 1.0 + 7168.0 * 2.0 * 2048 * fp8_block;
  EXPECT_DOUBLE_EQ(t->seconds, bytes / (4800e9 * kHbmEfficiency) + kKernelLaunchSeconds);
  // W4A16 computes in bf16 and reads about half a byte per weight.
  const auto w4 = model("deepseek-v3", "w4a16");
  const Recorder rec4(c);
  cost(w4, c, rec4, layout(8, 1, Dispatcher::kA2av), Phase::kDecode, 64);
  ASSERT_FALSE(rec4.grouped.empty());
  EXPECT_EQ(rec4.grouped.front().dtype, DType::kBf16);
  EXPECT_DOUBLE_EQ(rec4.grouped.front().weight_bytes, 0.5 + 2.0 / 128);
}

TEST(QuantizedCosts, DecodeExpertTimeFollowsTheWeightBytes) {
  const auto c = cluster("1x-hgx-h200");
  const RooflineCosts rc(c);
  const auto fp8 =
      cost(model("deepseek-v3"), c, rc, layout(8, 1, Dispatcher::kA2av), Phase::kDecode, 16);
  const auto bf16 = cost(model("deepseek-v3", "bf16"), c, rc, layout(8, 1, Dispatcher::kA2av),
                         Phase::kDecode, 16);
  // Memory-bound: close to half the time (launch and activation bytes keep it above 0.5).
  const double ratio = fp8.per_layer.experts.seconds / bf16.per_layer.experts.seconds;
  EXPECT_GT(ratio, 0.5);
  EXPECT_LT(ratio, 0.6);
}

TEST(QuantizedCosts, Fp8DispatchCarriesScalesAndCombineIsBf16) {
  const auto m = model("deepseek-v3");
  const auto c = cluster("1x-hgx-h200");
  for (const Dispatcher d : {Dispatcher::kA2av, Dispatcher::kAllGather, Dispatcher::kPaddedA2a}) {
    const Recorder rec(c);
    cost(m, c, rec, layout(8, 1, d), Phase::kPrefill, 256);
    // The dispatch exchange (the collective carrying rows before the experts) and the combine
    // (the last one): fp8 rows of H + 4·H/128 bytes out, bf16 rows of 2·H back.
    std::vector<const CollectiveQuery*> rows;
    for (const auto& q : rec.collectives) {
      if (q.bytes > m.num_experts * 4.0) rows.push_back(&q);
    }
    ASSERT_EQ(rows.size(), 2U) << dispatcher_name(d);
    const double per_row_out = 7168.0 + 4.0 * 56;
    const double per_row_back = 2.0 * 7168;
    if (d == Dispatcher::kAllGather) {
      // All-gather: every rank's 256 tokens out at fp8; outputs back (all-gather-v) at bf16.
      EXPECT_DOUBLE_EQ(rows[0]->bytes, 8.0 * 256 * per_row_out);
      EXPECT_DOUBLE_EQ(rows[1]->bytes, 7.0 * 2048 * per_row_back);  // 2048 pairs a rank
    } else {
      EXPECT_DOUBLE_EQ(rows[0]->bytes / per_row_out, rows[1]->bytes / per_row_back)
          << dispatcher_name(d);
    }
    // Each token is quantized once before it is sent, and the received rows are dequantized
    // for the experts (the kernels' fp8 payload), as the profiler's ops count the bytes.
    bool quantized = false, dequantized = false;
    for (const auto& e : rec.elementwise_ops) {
      if (e.op == "quantize_fp8") {
        quantized = true;
        EXPECT_DOUBLE_EQ(e.bytes, 256.0 * (2.0 * 7168 + per_row_out));
      }
      if (e.op == "dequantize_fp8") {
        dequantized = true;
        EXPECT_DOUBLE_EQ(std::fmod(e.bytes, per_row_out + 2.0 * 7168), 0.0) << e.bytes;
        if (d == Dispatcher::kAllGather) {
          EXPECT_DOUBLE_EQ(e.bytes, 8.0 * 256 * (per_row_out + 2.0 * 7168));
        }
      }
    }
    EXPECT_TRUE(quantized) << dispatcher_name(d);
    EXPECT_TRUE(dequantized) << dispatcher_name(d);
  }
  // A plain model sends and receives bf16 and quantizes nothing.
  const auto plain = model("deepseek-v3", "bf16");
  const Recorder rec(c);
  cost(plain, c, rec, layout(8, 1, Dispatcher::kA2av), Phase::kPrefill, 256);
  for (const auto& e : rec.elementwise_ops) {
    EXPECT_NE(e.op, "quantize_fp8");
    EXPECT_NE(e.op, "dequantize_fp8");
  }
}

TEST(QuantizedCosts, TableDtypes) {
  EXPECT_EQ(moe_table_dtype(model("deepseek-v3").weights), "fp8_block");
  EXPECT_EQ(moe_table_dtype(model("deepseek-v3", "bf16").weights), "bf16");
  EXPECT_EQ(moe_table_dtype(model("deepseek-v3", "fp8-channel").weights), "fp8");
  EXPECT_EQ(moe_table_dtype(model("deepseek-v3", "mxfp4").weights), "w4a16_mxfp4");
  EXPECT_EQ(moe_table_dtype(model("deepseek-v3", "w4a16").weights), "int4_wo");
}

}  // namespace
}  // namespace test_quantized_costs
}  // namespace moeplan::planner
