// The parts of a decoder outside its MoE blocks, per GPU and step: each layer's attention block
// (norms, projections, the attention core, the output projection and its TP all-reduce), the
// dense MLP layers, and the embeddings and LM head. Every time is a CostSource query, as the MoE
// layer's are.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "planner/costs/cost_model.hpp"
#include "planner/costs/cost_model_parts.hpp"

namespace moeplan::planner {

double attention_context(const Workload& w) {
  if (w.phase == Phase::kPrefill) {
    return w.isl > 0 ? static_cast<double>(w.isl) : static_cast<double>(kDefaultAttentionContext);
  }
  return w.isl > 0 ? w.isl + 0.5 * w.osl : static_cast<double>(kDefaultAttentionContext);
}

AttentionQuery attention_core_query(const models::MoeModel& m, int tp_size, bool decode,
                                    double tokens, double context) {
  const auto& a = m.attention;
  const int tp = std::max(1, tp_size);
  AttentionQuery q;
  q.decode = decode;
  q.tokens = tokens;
  q.context = context;
  q.heads = std::ceil(static_cast<double>(a.num_heads) / tp);
  q.dtype = m.dtype;
  if (a.mla) {
    if (decode) {
      // Absorbed (FlashMLA, SGLang's and vLLM's decode): every head attends to the cached
      // latent and rope key, shared as one K/V head.
      q.kv_heads = 1.0;
      q.qk_dim = static_cast<double>(a.kv_lora_rank) + a.qk_rope_head_dim;
      q.v_dim = a.kv_lora_rank;
    } else {
      // Prefill expands the latent into the rank's heads' keys and values.
      q.kv_heads = q.heads;
      q.qk_dim = static_cast<double>(a.qk_nope_head_dim) + a.qk_rope_head_dim;
      q.v_dim = a.v_head_dim;
    }
  } else {
    q.kv_heads = m.kv_heads_per_rank(tp);
    q.qk_dim = a.head_dim;
    q.v_dim = a.head_dim;
  }
  q.kv_bytes_per_token = m.kv_cache_bytes_per_token(tp);
  return q;
}

std::vector<std::pair<int, int>> dense_gemm_shapes(const models::MoeModel& m, int tp_size) {
  const auto& a = m.attention;
  const int tp = std::max(1, tp_size);
  const int h = static_cast<int>(m.hidden_size);
  const int heads = (a.num_heads + tp - 1) / tp;
  std::vector<std::pair<int, int>> out;
  auto add_shape = [&](double n, double k) {
    const std::pair<int, int> s{static_cast<int>(std::lround(n)), static_cast<int>(std::lround(k))};
    if (s.first > 0 && s.second > 0 && std::find(out.begin(), out.end(), s) == out.end()) {
      out.push_back(s);
    }
  };
  if (a.num_heads > 0) {
    if (a.mla) {
      const int qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
      if (a.q_lora_rank > 0) {
        add_shape(a.q_lora_rank, h);
        add_shape(static_cast<double>(heads) * qk, a.q_lora_rank);
      } else {
        add_shape(static_cast<double>(heads) * qk, h);
      }
      add_shape(a.kv_lora_rank + a.qk_rope_head_dim, h);
      add_shape(static_cast<double>(heads) * a.kv_lora_rank, a.qk_nope_head_dim);  // decode W_UK
      add_shape(static_cast<double>(heads) * a.v_head_dim, a.kv_lora_rank);        // decode W_UV
      add_shape(static_cast<double>(heads) * (a.qk_nope_head_dim + a.v_head_dim),
                a.kv_lora_rank);  // prefill kv_b_proj
      add_shape(h, static_cast<double>(heads) * a.v_head_dim);
    } else {
      add_shape((heads + 2.0 * m.kv_heads_per_rank(tp)) * a.head_dim, h);
      add_shape(h, static_cast<double>(heads) * a.head_dim);
    }
  }
  if (m.num_dense_layers() > 0 && m.dense_intermediate_size > 0) {
    const double width = std::floor(static_cast<double>(m.dense_intermediate_size) / tp);
    add_shape(2.0 * width, h);
    add_shape(h, width);
  }
  return out;
}

namespace {

using detail::add;

/// Bytes per weight element of a [rows × cols] linear layer of the model (scales included).
double per_element(const models::MoeModel& m, std::int64_t rows, std::int64_t cols,
                   bool quantized) {
  const double n = static_cast<double>(rows) * static_cast<double>(cols);
  return n > 0.0 ? m.linear_bytes(rows, cols, quantized) / n : 0.0;
}

/// A GEMM of `tokens` rows through a linear layer's tp-slice [out × in] of the full
/// [full_out × full_in] matrix (its bytes per element).
Status linear(const CostSource& cs, const models::MoeModel& m, DType dtype, bool quantized,
              double tokens, double out, double in, std::int64_t full_out, std::int64_t full_in,
              CostItem& item) {
  if (!(out > 0.0) || !(in > 0.0)) return Status::Ok();
  return add(item, cs.gemm({tokens, out, in, dtype, per_element(m, full_out, full_in, quantized)}));
}

/// RMSNorm (the layer norms, MLA's latent norm, Qwen3's q/k norms) over `elements`
/// activations: read and written once.
Status norm(const CostSource& cs, double elements, DType dtype, CostItem& item) {
  return add(item, cs.elementwise({"norm", 2.0 * elements * dtype_bytes(dtype), dtype}));
}

/// RoPE over `elements` query and key values: read (from the fused projection) and written.
Status rope_pass(const CostSource& cs, double elements, DType dtype, CostItem& item) {
  return add(item, cs.elementwise({"rope", 2.0 * elements * dtype_bytes(dtype), dtype}));
}

/// MLA's copies between its ops over `values` activations, each read and written once: priced
/// as the `stage` pass (a copy into a fresh buffer) of the same bytes.
Status mla_copies(const CostSource& cs, double values, DType dtype, CostItem& item) {
  return add(item, cs.elementwise({"stage", 2.0 * values * dtype_bytes(dtype), dtype}));
}

/// One decoder layer's attention block over `pre` prompt tokens (prefill, at `pre_context`) and
/// `dec` decode sequences (at `dec_context`) of the TP group in one batch: the norms, the
/// projections, RoPE and the all-reduce over all pre + dec rows (each weight read once); each
/// attention core — and MLA's phase-specific parts: prefill's kv_b expansion, decode's absorbed
/// W_UK / W_UV — over its own rows. A pure prefill or decode step has one of them zero.
Status attention_block(const CostContext& ctx, const Layout& layout, double pre, double dec,
                       double pre_context, double dec_context, CostItem& at) {
  const models::MoeModel& m = ctx.model;
  const CostSource& cs = ctx.costs;
  const auto& a = m.attention;
  const int tp = std::max(1, layout.tp_size);
  const double tokens = pre + dec;
  const double h = static_cast<double>(m.hidden_size);
  const DType act = m.dtype;
  const bool aq = m.weights.attention_quantized;
  const DType adt = aq ? m.weights.compute_dtype() : m.dtype;

  // Input norm before attention, post-attention norm before the MLP or MoE block.
  MOEPLAN_TRY_STATUS(norm(cs, 2.0 * tokens * h, act, at));
  const AttentionQuery q_pre = attention_core_query(m, tp, false, pre, pre_context);
  const AttentionQuery q_dec = attention_core_query(m, tp, true, dec, dec_context);
  const double heads = q_pre.heads;
  if (a.mla) {
    const double nope = a.qk_nope_head_dim, rope = a.qk_rope_head_dim, v = a.v_head_dim;
    const double lora = a.kv_lora_rank;
    const std::int64_t qk = std::int64_t{a.qk_nope_head_dim} + a.qk_rope_head_dim;
    const std::int64_t all_heads = a.num_heads;
    // The query: down (replicated on every TP rank), its norm, up to this rank's heads; or
    // straight up where the model has no q LoRA (DeepSeek-V2-Lite).
    if (a.q_lora_rank > 0) {
      MOEPLAN_TRY_STATUS(
          linear(cs, m, adt, aq, tokens, a.q_lora_rank, h, a.q_lora_rank, m.hidden_size, at));
      MOEPLAN_TRY_STATUS(norm(cs, tokens * a.q_lora_rank, act, at));
      MOEPLAN_TRY_STATUS(linear(cs, m, adt, aq, tokens, heads * (nope + rope), a.q_lora_rank,
                                all_heads * qk, a.q_lora_rank, at));
    } else {
      MOEPLAN_TRY_STATUS(linear(cs, m, adt, aq, tokens, heads * (nope + rope), h, all_heads * qk,
                                m.hidden_size, at));
    }
    // The compressed KV and rope key (replicated); the latent's norm; RoPE on the rope key and
    // on this rank's query heads, written whole (the frameworks' in-place rope of the rope
    // part plus their copy of it into the attention's query move as much).
    MOEPLAN_TRY_STATUS(linear(cs, m, adt, aq, tokens, lora + rope, h,
                              std::int64_t{a.kv_lora_rank} + a.qk_rope_head_dim, m.hidden_size,
                              at));
    MOEPLAN_TRY_STATUS(norm(cs, tokens * lora, act, at));
    MOEPLAN_TRY_STATUS(rope_pass(cs, tokens * (heads * (nope + rope) + rope), act, at));
    const std::int64_t kv_b_out = all_heads * (std::int64_t{a.qk_nope_head_dim} + a.v_head_dim);
    if (dec > 0.0) {
      // Absorbed (FlashMLA, SGLang's and vLLM's decode): q_nope through W_UK into the latent,
      // attention over the cached latent + rope key shared by every head, out through W_UV.
      MOEPLAN_TRY_STATUS(
          linear(cs, m, adt, aq, dec, heads * lora, nope, kv_b_out, a.kv_lora_rank, at));
      MOEPLAN_TRY_STATUS(add(at, cs.attention(q_dec)));
      MOEPLAN_TRY_STATUS(
          linear(cs, m, adt, aq, dec, heads * v, lora, kv_b_out, a.kv_lora_rank, at));
      // The copies around the per-head GEMMs: the nope queries in, the latent queries out
      // beside the rope queries, the attention's latent rows in, the values out, and the new
      // token's latent and rope key appended to the cache (K) and latent (V).
      MOEPLAN_TRY_STATUS(mla_copies(
          cs, dec * (heads * (nope + 2.0 * lora + rope + v) + 2.0 * lora + rope), act, at));
    }
    if (pre > 0.0) {
      // Prefill expands the latent into this rank's heads' keys and values (kv_b_proj), then
      // runs multi-head attention.
      MOEPLAN_TRY_STATUS(
          linear(cs, m, adt, aq, pre, heads * (nope + v), lora, kv_b_out, a.kv_lora_rank, at));
      // Every head's key assembled (rope key | nope key), its value gathered, and the latent
      // and rope key stored as the KV cache.
      MOEPLAN_TRY_STATUS(mla_copies(cs, pre * (heads * (nope + rope + v) + lora + rope), act, at));
      MOEPLAN_TRY_STATUS(add(at, cs.attention(q_pre)));
    }
    MOEPLAN_TRY_STATUS(
        linear(cs, m, adt, aq, tokens, h, heads * v, m.hidden_size, all_heads * a.v_head_dim, at));
  } else {
    const double hd = a.head_dim;
    const double kv_heads = m.kv_heads_per_rank(tp);
    const std::int64_t qd = std::int64_t{a.num_heads} * a.head_dim;
    const std::int64_t kvd = std::int64_t{a.num_kv_heads} * a.head_dim;
    // q, k and v of this rank's heads in one GEMM (k and v replicated when tp exceeds the KV
    // heads), RoPE (and Qwen3's q/k norms) on q and k.
    const double n_qkv = (heads + 2.0 * kv_heads) * hd;
    const double full = static_cast<double>(qd + 2 * kvd);
    MOEPLAN_TRY_STATUS(
        add(at, cs.gemm({tokens, n_qkv, h, adt,
                         full > 0.0 ? (m.linear_bytes(qd, m.hidden_size, aq) +
                                       2.0 * m.linear_bytes(kvd, m.hidden_size, aq)) /
                                          (full * h)
                                    : 0.0})));
    MOEPLAN_TRY_STATUS(rope_pass(cs, tokens * (heads + kv_heads) * hd, act, at));
    if (a.qk_norm) MOEPLAN_TRY_STATUS(norm(cs, tokens * (heads + kv_heads) * hd, act, at));
    if (pre > 0.0) MOEPLAN_TRY_STATUS(add(at, cs.attention(q_pre)));
    if (dec > 0.0) MOEPLAN_TRY_STATUS(add(at, cs.attention(q_dec)));
    MOEPLAN_TRY_STATUS(linear(cs, m, adt, aq, tokens, h, heads * hd, m.hidden_size, qd, at));
  }
  if (tp > 1) {
    MOEPLAN_TRY_STATUS(add(at, cs.collective({CollectiveOp::kAllReduce,
                                              layout.tp_groups(),
                                              tokens * h * dtype_bytes(act),
                                              {},
                                              act})));
  }
  return Status::Ok();
}

/// Once per step of `tokens` rows (the TP group's): the embedding lookup (each rank gathers the
/// rows of the tokens), the final norm, and the LM head over this rank's vocabulary slice, in
/// torch_dtype, on the `logits_rows` that produce a next token.
Status head_block(const CostContext& ctx, int tp, double tokens, double logits_rows,
                  CostItem& head) {
  const models::MoeModel& m = ctx.model;
  const CostSource& cs = ctx.costs;
  const double h = static_cast<double>(m.hidden_size);
  const DType act = m.dtype;
  MOEPLAN_TRY_STATUS(
      add(head, cs.elementwise({"embedding", 2.0 * tokens * h * dtype_bytes(act), act})));
  MOEPLAN_TRY_STATUS(norm(cs, tokens * h, act, head));
  const double vocab = std::ceil(static_cast<double>(m.vocab_size) / tp);
  return add(head, cs.gemm({logits_rows, vocab, h, act, 0.0}));
}

}  // namespace

Result<DenseCost> cost_dense_parts(const CostContext& ctx, const Layout& layout) {
  const models::MoeModel& m = ctx.model;
  const CostSource& cs = ctx.costs;
  const int tp = std::max(1, layout.tp_size);
  const double tokens = static_cast<double>(tp) * ctx.workload.tokens_per_gpu;  // the TP group's
  const double h = static_cast<double>(m.hidden_size);
  const DType act = m.dtype;
  const bool decode = ctx.workload.phase == Phase::kDecode;
  const auto tp_groups = layout.tp_groups();

  DenseCost out;
  out.context = attention_context(ctx.workload);
  MOEPLAN_TRY_STATUS(attention_block(ctx, layout, decode ? 0.0 : tokens, decode ? tokens : 0.0,
                                     out.context, out.context, out.attention));
  const double row_bytes = tokens * h * dtype_bytes(act);

  // A dense MLP layer: gate and up, SiLU·mul, down, the TP all-reduce.
  if (m.num_dense_layers() > 0 && m.dense_intermediate_size > 0) {
    CostItem& mlp = out.dense_mlp;
    const DType mdt = m.weights.compute_dtype();
    const double width = std::floor(static_cast<double>(m.dense_intermediate_size) / tp);
    MOEPLAN_TRY_STATUS(linear(cs, m, mdt, true, tokens, 2.0 * width, h, m.dense_intermediate_size,
                              m.hidden_size, mlp));
    MOEPLAN_TRY_STATUS(
        add(mlp, cs.elementwise({"silu_mul", 3.0 * tokens * width * dtype_bytes(act), act})));
    MOEPLAN_TRY_STATUS(
        linear(cs, m, mdt, true, tokens, h, width, m.hidden_size, m.dense_intermediate_size, mlp));
    if (tp > 1) {
      MOEPLAN_TRY_STATUS(
          add(mlp, cs.collective({CollectiveOp::kAllReduce, tp_groups, row_bytes, {}, act})));
    }
  }

  // Once per step: the embedding lookup, the final norm and the LM head (head_block); logits for
  // every decode sequence and the last token of each prefill prompt.
  const double logits_rows = decode ? tokens : std::ceil(tokens / std::max(1.0, out.context));
  MOEPLAN_TRY_STATUS(head_block(ctx, tp, tokens, logits_rows, out.head));
  return out;
}

Result<CostItem> cost_mixed_head(const CostContext& ctx, const Layout& layout, double chunk_per_gpu,
                                 double decode_per_gpu) {
  if (chunk_per_gpu < 0.0 || decode_per_gpu < 0.0) {
    return Error{"mixed head: expected non-negative chunk and decode rows"};
  }
  const int tp = std::max(1, layout.tp_size);
  Workload pre = ctx.workload;
  pre.phase = Phase::kPrefill;
  // The chunk's prompts end at the rate of one per `context` prompt tokens, as a prefill step's
  // (cost_dense_parts); every decode row produces a token.
  const double chunk = tp * chunk_per_gpu, decode = tp * decode_per_gpu;
  const double logits_rows = decode + std::ceil(chunk / std::max(1.0, attention_context(pre)));
  CostItem head;
  MOEPLAN_TRY_STATUS(head_block(ctx, tp, chunk + decode, logits_rows, head));
  return head;
}

Result<CostItem> cost_mixed_attention(const CostContext& ctx, const Layout& layout,
                                      double chunk_per_gpu, double decode_per_gpu) {
  if (chunk_per_gpu < 0.0 || decode_per_gpu < 0.0) {
    return Error{"mixed attention: expected non-negative chunk and decode rows"};
  }
  const double tp = std::max(1, layout.tp_size);
  Workload pre = ctx.workload;
  pre.phase = Phase::kPrefill;
  Workload dec = ctx.workload;
  dec.phase = Phase::kDecode;
  CostItem at;
  MOEPLAN_TRY_STATUS(attention_block(ctx, layout, tp * chunk_per_gpu, tp * decode_per_gpu,
                                     attention_context(pre), attention_context(dec), at));
  return at;
}

}  // namespace moeplan::planner
