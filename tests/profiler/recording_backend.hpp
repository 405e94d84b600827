// A test backend: the CPU backend with every call counted by op and, optionally, a fake device
// clock (what the CUDA backend's events give the profiler), for the harness, profile and layer
// tests that need no GPU.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "kernels/backend.hpp"

namespace moeplan::profiler {

/// The CPU backend with every call counted by op, and fp8 refused as the CPU backend does.
class RecordingBackend final : public kernels::Backend {
 public:
  /// With a tick, a device clock too: every call adds `tick` seconds of "kernel" time, so a
  /// harness timing by the device clock must see exactly calls × tick, whatever the wall time.
  explicit RecordingBackend(double tick = 0.0) : tick_(tick) {}
  std::string name() const override { return tick_ > 0.0 ? "fakegpu" : "recording"; }
  std::string device_name() const override { return tick_ > 0.0 ? "Fake GPU 80GB" : ""; }
  std::optional<double> device_seconds() const override {
    if (!(tick_ > 0.0)) return std::nullopt;
    const std::lock_guard<std::mutex> lock(mutex_);
    return device_s_;
  }
  Status can_implement(const kernels::OpQuery& q) const override { return cpu_->can_implement(q); }
  void router_logits(const kernels::OpContext& c, std::span<const float> x, int t, int h,
                     std::span<const float> w, int e, std::span<float> l) override {
    record(kernels::BackendOp::kRouterLogits);
    cpu_->router_logits(c, x, t, h, w, e, l);
  }
  void route(const kernels::OpContext& c, const models::RouterSpec& r, std::span<const float> l,
             std::span<const float> b, int t, int e, int k, std::span<int> ids,
             std::span<float> w) override {
    record(kernels::BackendOp::kRoute);
    cpu_->route(c, r, l, b, t, e, k, ids, w);
  }
  kernels::Permutation permute(const kernels::OpContext& c, std::span<const int> p, int f,
                               int n) override {
    record(kernels::BackendOp::kPermute);
    return cpu_->permute(c, p, f, n);
  }
  void expert_ffn(const kernels::OpContext& c, std::span<const float> r, std::span<const int> o,
                  std::span<const kernels::ExpertWeights> e, int h, DType d,
                  std::span<float> out) override {
    record(kernels::BackendOp::kExpertFfn);
    cpu_->expert_ffn(c, r, o, e, h, d, out);
  }
  void gemm(const kernels::OpContext& c, std::span<const float> a, int m, int k,
            std::span<const float> b, int n, DType d, DType od, std::span<float> out) override {
    record(kernels::BackendOp::kGemm);
    cpu_->gemm(c, a, m, k, b, n, d, od, out);
  }
  void gemm_fp8(const kernels::OpContext& c, std::span<const float> a, int m, int k,
                const kernels::Fp8Act& g, std::span<const kernels::Fp8Part> parts,
                std::span<float> out) override {
    record(kernels::BackendOp::kGemmFp8Block);
    cpu_->gemm_fp8(c, a, m, k, g, parts, out);
  }
  void silu_mul(const kernels::OpContext& c, std::span<const float> gu, int r, int w, DType d,
                std::span<float> a) override {
    record(kernels::BackendOp::kSiluMul);
    cpu_->silu_mul(c, gu, r, w, d, a);
  }
  void attention(const kernels::OpContext& c, const kernels::AttentionShape& s,
                 std::span<const float> q, std::span<const float> k, std::span<const float> v,
                 DType d, std::span<float> out) override {
    record(kernels::BackendOp::kAttention);
    cpu_->attention(c, s, q, k, v, d, out);
  }
  void rms_norm(const kernels::OpContext& c, std::span<const float> x, int r, int w, int ld,
                std::span<const float> g, float eps, DType d, std::span<float> out) override {
    record(kernels::BackendOp::kRmsNorm);
    cpu_->rms_norm(c, x, r, w, ld, g, eps, d, out);
  }
  void rope(const kernels::OpContext& c, std::span<const float> in, int ld, int r, int h, int hd,
            int rd, std::span<const int> pos, std::span<const float> cs, DType d,
            std::span<float> out) override {
    record(kernels::BackendOp::kRope);
    cpu_->rope(c, in, ld, r, h, hd, rd, pos, cs, d, out);
  }
  void sigmoid_gate(const kernels::OpContext& c, std::span<const float> x, int t, int h,
                    std::span<const float> g, std::span<float> out) override {
    record(kernels::BackendOp::kSigmoidGate);
    cpu_->sigmoid_gate(c, x, t, h, g, out);
  }
  void combine(const kernels::OpContext& c, std::span<const float> y, std::span<const int> pr,
               std::span<const float> w, std::span<const float> sh, int t, int k, int h, DType d,
               std::span<float> out) override {
    record(kernels::BackendOp::kCombine);
    cpu_->combine(c, y, pr, w, sh, t, k, h, d, out);
  }
  void shared_expert(const kernels::OpContext& c, std::span<const float> x, int t, int h,
                     const kernels::ExpertWeights& w, std::span<const float> g, DType d,
                     std::span<float> out) override {
    record(kernels::BackendOp::kSharedExpert);
    cpu_->shared_expert(c, x, t, h, w, g, d, out);
  }
  Fallbacks fallbacks() const override { return {stand_ins_, "stand-in ran for this op (test)"}; }
  std::map<kernels::BackendOp, int> calls;
  int total_calls = 0;
  /// An op this backend says it ran a stand-in for (Backend::fallbacks), as the CUDA
  /// backend says of an fp8 GEMM emulated in fp32.
  std::optional<kernels::BackendOp> stand_in;

 private:
  // (Ranks of one in-process profile share the backend: counted under a lock.)
  void record(kernels::BackendOp op) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (stand_in && op == *stand_in) ++stand_ins_;
    ++calls[op];
    ++total_calls;
    device_s_ += tick_;
  }
  double tick_;
  mutable std::mutex mutex_;
  double device_s_ = 0.0;
  std::uint64_t stand_ins_ = 0;
  std::unique_ptr<kernels::Backend> cpu_ = kernels::make_cpu_backend();
};

}  // namespace moeplan::profiler
