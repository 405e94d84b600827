// router_topk: scoring, top-k selection and weights of T tokens over E fp32 logits — the
// profiled backend's route(). Bytes as the cost model counts them: T·E·4 (logits) + T·k·8 (ids,
// weights).
#include <algorithm>

#include "kernels/backend.hpp"
#include "profiler/op_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

double router_token_bytes(const SweepSpec& s, DType) { return s.num_experts * 4.0 + s.top_k * 8.0; }

class RouterCase final : public OpCase {
 public:
  RouterCase(const SweepSpec& s, int tokens, kernels::Backend& backend)
      : s_(s), t_(tokens), backend_(backend) {
    logits_ = random_values(DType::kFp32, usz(tokens) * usz(s.num_experts), 3, -4.0F, 4.0F);
    bias_.assign(usz(s.num_experts), 0.0F);
    ids_.assign(usz(tokens) * usz(s.top_k), 0);
    weights_.assign(ids_.size(), 0.0F);
  }

  void run() override {
    backend_.route(kernels::OpContext{}, s_.router, logits_, bias_, t_, s_.num_experts, s_.top_k,
                   ids_, weights_);
    if (fault_) ids_[0] = (ids_[0] + 1) % s_.num_experts;
  }

  Check verify() override {
    run();
    const auto e = usz(s_.num_experts), k = usz(s_.top_k);
    // Independent checks of every token: k distinct experts in range, finite positive weights,
    // and (for greedy top-k, where scores are monotone in the logits) no unselected expert with
    // a larger logit than a selected one.
    for (std::size_t t = 0; t < usz(t_); ++t) {
      std::vector<bool> chosen(e, false);
      float min_chosen = 0.0F;
      for (std::size_t j = 0; j < k; ++j) {
        const int id = ids_[t * k + j];
        const float w = weights_[t * k + j];
        if (id < 0 || id >= s_.num_experts || chosen[usz(id)]) {
          return {false, "token " + std::to_string(t) + ": expert id " + std::to_string(id) +
                             " out of range or repeated"};
        }
        if (!(w > 0.0F) || !std::isfinite(w)) {
          return {false, "token " + std::to_string(t) + ": weight " + std::to_string(w) +
                             ", expected finite and positive"};
        }
        chosen[usz(id)] = true;
        const float l = logits_[t * e + usz(id)];
        min_chosen = j == 0 ? l : std::min(min_chosen, l);
      }
      if (s_.router.topk_method != models::TopkMethod::kGreedy) continue;
      for (std::size_t x = 0; x < e; ++x) {
        if (!chosen[x] && logits_[t * e + x] > min_chosen) {
          return {false, "token " + std::to_string(t) + ": expert " + std::to_string(x) +
                             " has a larger logit than a selected one"};
        }
      }
    }
    return {};
  }

 private:
  SweepSpec s_;
  int t_;
  kernels::Backend& backend_;
  std::vector<float> logits_, bias_, weights_;
  std::vector<int> ids_;
};

}  // namespace

OpTable router_topk_op() {
  OpTable t;
  t.name = "router_topk";
  t.sweep = [](const SweepSpec& s) {
    return byte_sweep(s, router_token_bytes, [&](DType dt, long tokens) {
      OpPoint p;
      p.op = "router_topk";
      p.dtype = dt;
      p.bytes = static_cast<double>(tokens) * router_token_bytes(s, dt);
      p.m = p.bytes;
      p.shape = shape_text({{"bytes", p.bytes},
                            {"tokens", static_cast<double>(tokens)},
                            {"experts", s.num_experts},
                            {"top_k", s.top_k}});
      p.kernel = s.backend + " route (" + models::scoring_name(s.router.scoring) + ", " +
                 models::topk_method_name(s.router.topk_method) + ")";
      return p;
    });
  };
  t.init = [](const OpPoint& p, const SweepSpec& s, kernels::Communicator*,
              kernels::Backend& backend) -> Result<std::unique_ptr<OpCase>> {
    MOEPLAN_TRY_STATUS(backend_supports(backend, kernels::BackendOp::kRoute, p.dtype));
    const int tokens = static_cast<int>(std::lround(p.bytes / router_token_bytes(s, p.dtype)));
    return std::unique_ptr<OpCase>(std::make_unique<RouterCase>(s, tokens, backend));
  };
  return t;
}

}  // namespace moeplan::profiler
