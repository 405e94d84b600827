// attention: the attention core of one rank (softmax(scale · Q·Kᵀ)·V, causal) — the profiled
// backend's attention op — at the model's heads per rank for every tp: prefill one prompt per
// context length, decode batches of sequences of one new token over their cached context. The
// projections around it are GEMM points. Shape: decode, tokens (query tokens: prompt length or
// sequences), context (keys the last token sees), heads, kv_heads, qk, v.
#include <algorithm>

#include "kernels/attention.hpp"
#include "planner/costs/cost_db.hpp"
#include "profiler/op_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

kernels::AttentionShape shape_of(const OpPoint& p, float scale) {
  kernels::AttentionShape s;
  const bool decode = planner::shape_int(p.shape, "decode") != 0;
  const int tokens = static_cast<int>(planner::shape_int(p.shape, "tokens"));
  s.kv_len = static_cast<int>(planner::shape_int(p.shape, "context"));
  s.batch = decode ? tokens : 1;
  s.q_len = decode ? 1 : tokens;
  s.heads = static_cast<int>(planner::shape_int(p.shape, "heads"));
  s.kv_heads = static_cast<int>(planner::shape_int(p.shape, "kv_heads"));
  s.qk_dim = static_cast<int>(planner::shape_int(p.shape, "qk"));
  s.v_dim = static_cast<int>(planner::shape_int(p.shape, "v"));
  s.scale = scale;
  return s;
}

class AttentionCase final : public OpCase {
 public:
  AttentionCase(const kernels::AttentionShape& s, DType dtype, std::size_t cold_bytes,
                kernels::Backend& backend)
      : s_(s), dtype_(dtype), backend_(backend) {
    q_ = random_values(dtype, s.q_size(), 31);
    k_ = random_values(dtype, s.k_size(), 32);
    v_ = random_values(dtype, s.v_size(), 33);
    out_.assign(s.out_size(), 0.0F);
    // Decode reads each sequence's KV cache, cold: between two steps of one layer every other
    // layer's weights and caches stream through. Copies of K and V rotated past the caches, as
    // the GEMMs' weights are (SweepSpec::cold_bytes). Prefill's keys and values are the prompt's
    // own, just written by its projections: warm, one copy. NOTE: with one warm copy
    // DeepSeek-V2-Lite's MLA decode block (16 heads over a latent of 512 + 64, 3–12 sequences of
    // 512 keys: 6.7–27 MiB) measured 5–10% slower in the decoder block than the profile predicted
    // (docs/BENCHMARKS.md, "MLA's attention block").
    const std::size_t copies =
        s.q_len == 1 ? cold_copies((k_.size() + v_.size()) * sizeof(float), 256, cold_bytes) : 1;
    for (std::size_t i = 1; i < copies; ++i) {
      k_pool_.push_back(k_);
      v_pool_.push_back(v_);
    }
  }

  void run() override {
    // Copy 0 is k_/v_ themselves; verify() compares the run with them (every copy is equal).
    const std::size_t c = next_;
    next_ = (next_ + 1) % (k_pool_.size() + 1);
    const std::vector<float>& k = c == 0 ? k_ : k_pool_[c - 1];
    const std::vector<float>& v = c == 0 ? v_ : v_pool_[c - 1];
    backend_.attention(kernels::OpContext{}, s_, q_, k, v, dtype_, out_);
    if (fault_) out_[out_.size() / 2] = -out_[out_.size() / 2] + 1.0F;
  }

  // Checks sampled output rows (first, last and spread query rows, every head pattern) against
  // the double reference: a full reference of a long prompt costs far more than the kernel.
  Check verify() override {
    run();
    std::vector<double> ref(static_cast<std::size_t>(s_.v_dim)), bound(ref.size());
    const long rows = s_.q_rows();
    const long step = std::max(1L, rows / 7);
    for (long r = 0;; r += step) {
      const long row = std::min(r, rows - 1);
      const int b = static_cast<int>(row / s_.q_len), t = static_cast<int>(row % s_.q_len);
      for (int h = 0; h < s_.heads; h += std::max(1, s_.heads / 3)) {
        kernels::attention_reference_row(s_, q_, k_, v_, dtype_, b, t, h, ref, bound);
        const std::size_t at = (static_cast<std::size_t>(row) * static_cast<std::size_t>(s_.heads) +
                                static_cast<std::size_t>(h)) *
                               static_cast<std::size_t>(s_.v_dim);
        for (std::size_t c = 0; c < ref.size(); ++c) {
          const double got = out_[at + c];
          if (!(std::abs(got - ref[c]) <= bound[c])) {
            return {false, "out[row " + std::to_string(row) + ", head " + std::to_string(h) + ", " +
                               std::to_string(c) + "] = " + std::to_string(got) + ", expected " +
                               std::to_string(ref[c]) + " ± " + std::to_string(bound[c])};
          }
        }
      }
      if (row == rows - 1) break;
    }
    return {};
  }

 private:
  kernels::AttentionShape s_;
  DType dtype_;
  kernels::Backend& backend_;
  std::vector<float> q_, k_, v_, out_;
  std::vector<std::vector<float>> k_pool_, v_pool_;  ///< further copies of k_ and v_ (decode)
  std::size_t next_ = 0;
};

/// Contexts from 256 by factors of 4 up to the sweep's row cap (4096 by default; 128 and 512
/// in a quick sweep).
std::vector<int> contexts(const SweepSpec& s) {
  std::vector<int> out;
  for (int c = s.quick ? 128 : 256; c <= std::max(s.max_rows, 128); c *= 4) out.push_back(c);
  return out;
}

}  // namespace

std::string attention_point_shape(const AttentionSweepShape& a, int tokens, int context) {
  return shape_text({{"decode", a.decode ? 1.0 : 0.0},
                     {"tokens", tokens},
                     {"context", context},
                     {"heads", a.heads},
                     {"kv_heads", a.kv_heads},
                     {"qk", a.qk_dim},
                     {"v", a.v_dim}});
}

OpTable attention_op() {
  OpTable t;
  t.name = "attention";
  t.sweep = [](const SweepSpec& s) {
    std::vector<OpPoint> out;
    const std::vector<int> batches = s.quick ? std::vector<int>{1, 8} : std::vector<int>{1, 8, 32};
    for (const DType dt : s.dtypes) {
      for (const AttentionSweepShape& a : s.attention) {
        for (const int ctx : contexts(s)) {
          for (const int tokens : a.decode ? batches : std::vector<int>{ctx}) {
            OpPoint p;
            p.op = "attention";
            p.dtype = dt;
            p.shape = attention_point_shape(a, tokens, ctx);
            const kernels::AttentionShape sh = shape_of(p, a.scale);
            p.m = tokens;
            p.n = ctx;
            p.k = a.heads;
            p.flops = sh.flops();
            p.bytes = static_cast<double>(sh.q_size() + sh.k_size() + sh.v_size() + sh.out_size()) *
                      dtype_bytes(dt);
            p.kernel = s.backend + " attention";
            out.push_back(std::move(p));
          }
        }
      }
    }
    return out;
  };
  t.init = [](const OpPoint& p, const SweepSpec& s, kernels::Communicator*,
              kernels::Backend& backend) -> Result<std::unique_ptr<OpCase>> {
    MOEPLAN_TRY_STATUS(backend_supports(backend, kernels::BackendOp::kAttention, p.dtype));
    // The scale of the sweep's shape with these heads and dims (1/√qk when the model changed).
    const auto heads = planner::shape_int(p.shape, "heads");
    const auto kv = planner::shape_int(p.shape, "kv_heads");
    const auto qk = planner::shape_int(p.shape, "qk");
    const auto v = planner::shape_int(p.shape, "v");
    const bool decode = planner::shape_int(p.shape, "decode") != 0;
    float scale = 1.0F / std::sqrt(static_cast<float>(std::max<long>(1, qk)));
    for (const auto& a : s.attention) {
      if (a.decode == decode && a.heads == heads && a.kv_heads == kv && a.qk_dim == qk &&
          a.v_dim == v) {
        scale = a.scale;
      }
    }
    const kernels::AttentionShape sh = shape_of(p, scale);
    const std::string problem = sh.problem();
    if (!problem.empty()) return Error{"attention point " + p.shape + ": " + problem};
    return std::unique_ptr<OpCase>(
        std::make_unique<AttentionCase>(sh, p.dtype, s.cold_bytes, backend));
  };
  return t;
}

}  // namespace moeplan::profiler
