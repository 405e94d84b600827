// Device timing for the CUDA kernel benchmark.
#include "benchmarks/cuda/ffn_bench.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/expert_ffn.hpp"
#include "kernels/cuda/launch_params.hpp"
#include "kernels/cuda/moe_kernels.hpp"

namespace moeplan::kernels::cuda {

namespace {

std::size_t sz(int v) { return static_cast<std::size_t>(v); }

// Uniform values in [-a, a) on the device, in `dtype`.
void fill_random(DType dtype, void* dst, std::size_t n, float a, std::uint32_t seed,
                 cudaStream_t stream) {
  launch_fill_uniform(dtype, dst, n, a, seed, stream);
}

}  // namespace

struct FfnBenchmark::Impl {
  DType dtype;
  int hidden, width, num_experts, max_rows;
  cudaStream_t stream = nullptr;
  std::unique_ptr<ExpertFfn> ffn;
  DeviceBuffer weights, rows, gate_up, act, out;
  std::vector<DeviceExpert> experts;
  // Router + permute buffers.
  DeviceBuffer x32, tokens, router_w, logits, ids, route_w, offsets, order, pair_row, scratch,
      gathered;

  ~Impl() {
    ffn.reset();
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

FfnBenchmark::FfnBenchmark(DType dtype, int hidden, int width, int num_experts, int max_rows)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.dtype = dtype;
  m.hidden = hidden;
  m.width = width;
  m.num_experts = num_experts;
  m.max_rows = max_rows;
  MOEPLAN_CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
  m.ffn = std::make_unique<ExpertFfn>(m.stream);
  const std::size_t es = dtype_size(dtype);
  const std::size_t gu = sz(hidden) * 2 * sz(width);
  const std::size_t dn = sz(width) * sz(hidden);
  char* w = static_cast<char*>(m.weights.reserve((gu + dn) * es * sz(num_experts)));
  for (int e = 0; e < num_experts; ++e) {
    char* g = w + (gu + dn) * es * sz(e);
    fill_random(dtype, g, gu, 0.02F, static_cast<std::uint32_t>(2 * e + 1), m.stream);
    fill_random(dtype, g + gu * es, dn, 0.02F, static_cast<std::uint32_t>(2 * e + 2), m.stream);
    m.experts.push_back({g, g + gu * es});
  }
  m.rows.reserve(sz(max_rows) * sz(hidden) * es);
  fill_random(dtype, m.rows.get(), sz(max_rows) * sz(hidden), 1.0F, 7, m.stream);
  m.gate_up.reserve(sz(max_rows) * 2 * sz(width) * es);
  m.act.reserve(sz(max_rows) * sz(width) * es);
  m.out.reserve(sz(max_rows) * sz(hidden) * es);
  MOEPLAN_CUDA_CHECK(cudaStreamSynchronize(m.stream));
}

FfnBenchmark::~FfnBenchmark() = default;

double FfnBenchmark::time_ffn(std::span<const int> offsets, BenchAlgo algo, int reps) {
  Impl& m = *impl_;
  if (offsets.size() != sz(m.num_experts) + 1 || offsets.back() > m.max_rows) {
    throw std::invalid_argument(
        "FfnBenchmark: offsets must have num_experts + 1 entries and at "
        "most max_rows rows");
  }
  const int total = offsets.back();
  float ms = 0.0F;
  if (algo == BenchAlgo::kDense) {
    const void* w1 = m.experts[0].gate_up;
    const void* w2 = m.experts[0].down;
    ms = m.ffn->time_ms(
        [&] {
          m.ffn->gemm(m.dtype, m.dtype, total, 2 * m.width, m.hidden, m.rows.get(), w1,
                      m.gate_up.get());
          launch_silu_mul(m.dtype, m.gate_up.get(), total, m.width, m.act.get(), m.stream);
          m.ffn->gemm(m.dtype, m.dtype, total, m.hidden, m.width, m.act.get(), w2, m.out.get());
        },
        reps);
  } else {
    FfnArgs a;
    a.dtype = m.dtype;
    a.hidden = m.hidden;
    a.width = m.width;
    a.num_experts = m.num_experts;
    a.offsets = offsets.data();
    a.experts = m.experts.data();
    a.rows = m.rows.get();
    a.gate_up = m.gate_up.get();
    a.act = m.act.get();
    a.out = m.out.get();
    const FfnAlgo f = algo == BenchAlgo::kGrouped ? FfnAlgo::kGrouped : FfnAlgo::kLtLoop;
    ms = m.ffn->time_ms([&] { m.ffn->run(f, a); }, reps);
  }
  return static_cast<double>(ms) * 1e-3;
}

double FfnBenchmark::time_router_permute(int num_tokens, int total_experts, int top_k, int reps) {
  Impl& m = *impl_;
  const std::size_t es = dtype_size(m.dtype);
  float* x = m.x32.reserve_as<float>(sz(num_tokens) * sz(m.hidden));
  fill_random(DType::kFp32, x, sz(num_tokens) * sz(m.hidden), 1.0F, 11, m.stream);
  float* w = m.router_w.reserve_as<float>(sz(m.hidden) * sz(total_experts));
  fill_random(DType::kFp32, w, sz(m.hidden) * sz(total_experts), 0.05F, 12, m.stream);
  float* logits = m.logits.reserve_as<float>(sz(num_tokens) * sz(total_experts));
  const std::size_t pairs = sz(num_tokens) * sz(top_k);
  int* ids = m.ids.reserve_as<int>(pairs);
  float* rw = m.route_w.reserve_as<float>(pairs);
  int* offsets = m.offsets.reserve_as<int>(sz(total_experts) + 1);
  int* order = m.order.reserve_as<int>(pairs);
  int* pair_row = m.pair_row.reserve_as<int>(pairs);
  void* scratch = m.scratch.reserve(permute_scratch_bytes(static_cast<int>(pairs), total_experts));
  void* gathered = m.gathered.reserve(pairs * sz(m.hidden) * es);
  void* xs = m.tokens.reserve(sz(num_tokens) * sz(m.hidden) * es);
  fill_random(m.dtype, xs, sz(num_tokens) * sz(m.hidden), 1.0F, 13, m.stream);
  RouterParams p;  // softmax, greedy
  // NOTE: the gather copies every pair's row (all experts local), an upper bound on the
  // per-rank permute traffic.
  const float ms = m.ffn->time_ms(
      [&] {
        m.ffn->gemm(DType::kFp32, DType::kFp32, num_tokens, total_experts, m.hidden, x, w, logits);
        launch_route(p, logits, nullptr, num_tokens, total_experts, top_k, ids, rw, m.stream);
        launch_permute(ids, static_cast<int>(pairs), 0, total_experts, offsets, order, pair_row,
                       scratch, m.stream);
        launch_gather_rows(m.dtype, xs, order, static_cast<int>(pairs), top_k, m.hidden, gathered,
                           m.stream);
      },
      reps);
  return static_cast<double>(ms) * 1e-3;
}

}  // namespace moeplan::kernels::cuda
