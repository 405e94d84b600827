// The sharded layer as an OpCase.
#include "profiler/layer_bench.hpp"

#include <cmath>

#include "kernels/reference.hpp"
#include "profiler/op_common.hpp"

namespace moeplan::profiler {

namespace {

class LayerCase final : public OpCase {
 public:
  LayerCase(kernels::Communicator& world, const kernels::LayerSpec& spec,
            const kernels::Layout& layout, int num_tokens, const kernels::DispatchOptions& dispatch,
            kernels::Backend* backend, std::size_t cold_bytes)
      : spec_(spec),
        layout_(layout),
        tokens_(num_tokens),
        dispatch_(dispatch),
        owned_(backend == nullptr ? kernels::make_cpu_backend() : nullptr),
        backend_(backend == nullptr ? owned_.get() : backend),
        groups_(kernels::make_groups(world, layout, dispatch.ranks_per_node)) {
    // The weights cold at every run, as in a step of a model of many layers (and as the
    // profile's expert GEMM points): copies taken in turn (one suffices where the layer's
    // weights alone outgrow the caches; a device backend keeps its weights on the device).
    weights_.push_back(kernels::make_rank_weights(spec, layout, world.rank()));
    const std::size_t copies = backend_->device_seconds()
                                   ? 1
                                   : cold_copies(weight_bytes(weights_.front()), 64, cold_bytes);
    while (weights_.size() < copies) weights_.push_back(weights_.front());
    const kernels::TokenRange tr =
        kernels::token_range(num_tokens, layout.ep_size, layout.ep_rank(world.rank()));
    count_ = tr.count;
    x_ = kernels::make_input(spec, tr.first, tr.count);
  }

  void run() override {
    out_ = kernels::moe_forward(*backend_, groups_, spec_, layout_, weights_[next_], x_, tokens_,
                                &phases_, dispatch_);
    next_ = (next_ + 1) % weights_.size();
    if (fault_ && !out_.empty()) out_[out_.size() / 2] += 1.0F;
  }

  int copies() const { return static_cast<int>(weights_.size()); }

  Check verify() override {
    run();
    // This rank's tokens against the dense reference and its derived bound (docs/VERIFY.md).
    const kernels::ReferenceOutput ref =
        kernels::reference_forward(spec_, x_, count_,
                                   {kernels::sends_fp8(spec_, layout_.dispatcher),
                                    kernels::ref_tp_slices(spec_, layout_.tp_size),
                                    kernels::fp8_accumulation_of(*backend_, spec_)});
    const std::vector<float>& expected = kernels::reference_of(ref, spec_, layout_.dispatcher);
    const std::vector<float>& bound = kernels::bound_of(ref, spec_, layout_.dispatcher);
    for (std::size_t i = 0; i < out_.size(); ++i) {
      const double diff = std::fabs(static_cast<double>(out_[i]) - expected[i]);
      if (!(diff <= bound[i])) {
        return {false, "output " + std::to_string(i) + " differs from the dense reference by " +
                           std::to_string(diff) + " > bound " + std::to_string(bound[i])};
      }
    }
    return {};
  }

  const kernels::PhaseTimes& phases() const { return phases_; }
  const kernels::Backend& backend() const { return *backend_; }

 private:
  kernels::LayerSpec spec_;
  kernels::Layout layout_;
  int tokens_;
  kernels::DispatchOptions dispatch_;
  int count_ = 0;
  std::unique_ptr<kernels::Backend> owned_;
  kernels::Backend* backend_;
  kernels::RankGroups groups_;
  std::vector<kernels::RankWeights> weights_;  ///< identical copies, taken in turn
  std::size_t next_ = 0;
  std::vector<float> x_, out_;
  kernels::PhaseTimes phases_;
};

}  // namespace

std::size_t weight_bytes(const kernels::RankWeights& w) {
  const auto floats = [](const std::vector<float>& v) { return v.size() * sizeof(float); };
  const auto expert = [&](const kernels::ExpertWeights& e) {
    std::size_t b = floats(e.gate_up) + floats(e.down);
    for (const auto& f : e.fp8) {
      b += f.gate_up.size() + f.down.size() + floats(f.gate_scales) + floats(f.up_scales) +
           floats(f.down_scales);
    }
    return b;
  };
  std::size_t n =
      floats(w.router) + floats(w.score_bias) + floats(w.shared_gate) + expert(w.shared);
  for (const auto& e : w.experts) n += expert(e);
  return n;
}

std::vector<double> routed_counts(const kernels::LayerSpec& spec, int num_tokens) {
  return routed_counts_of(spec, kernels::make_input(spec, 0, num_tokens), num_tokens);
}

std::vector<double> routed_counts_of(const kernels::LayerSpec& spec, std::span<const float> x,
                                     int num_tokens) {
  auto be = kernels::make_cpu_backend();
  const std::vector<float> w = kernels::make_router_weight(spec);
  const std::vector<float> bias = kernels::make_score_bias(spec);
  std::vector<float> logits(static_cast<std::size_t>(num_tokens) *
                            static_cast<std::size_t>(spec.num_experts));
  be->router_logits(kernels::OpContext{}, x, num_tokens, spec.hidden, w, spec.num_experts, logits);
  std::vector<int> ids(static_cast<std::size_t>(num_tokens) * static_cast<std::size_t>(spec.top_k));
  std::vector<float> weights(ids.size());
  be->route(kernels::OpContext{}, spec.router, logits, bias, num_tokens, spec.num_experts,
            spec.top_k, ids, weights);
  std::vector<double> counts(static_cast<std::size_t>(spec.num_experts), 0.0);
  for (const int id : ids) counts[static_cast<std::size_t>(id)] += 1.0;
  return counts;
}

LayerMeasurement measure_layer(kernels::Communicator& world, const kernels::LayerSpec& spec,
                               const kernels::Layout& layout, int num_tokens,
                               const HarnessOptions& options, bool inject_fault,
                               const kernels::DispatchOptions& dispatch, kernels::Backend* backend,
                               std::size_t cold_bytes) {
  LayerCase c(world, spec, layout, num_tokens, dispatch, backend, cold_bytes);
  if (inject_fault) c.inject_fault();
  HarnessOptions o = options;
  if (backend != nullptr && backend->device_seconds()) o.device_clock = backend;
  LayerMeasurement out;
  const StandInWatch watch(c.backend());
  out.measurement = measure(c, world.size() > 1 ? &world : nullptr, o);
  out.phases = c.phases();
  out.stand_in = watch.reason();
  out.copies = c.copies();
  return out;
}

}  // namespace moeplan::profiler
