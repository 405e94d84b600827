// Device timing for the CUDA kernel benchmark.
#include "benchmarks/cuda/ffn_bench.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/expert_ffn.hpp"
#include "kernels/cuda/fp8_gemm.hpp"
#include "kernels/cuda/fp8_kernels.hpp"
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
  // fp8 FFN: weights (codes per expert: gate, up [H][w], down [w][H]), fp32 rows and scratch.
  std::unique_ptr<Fp8Gemm> fp8;
  std::vector<Fp8Expert> fp8_experts;
  DeviceBuffer fp8_codes, fp8_rows, fp8_gu, fp8_gu_stored, fp8_act_stored, fp8_act, fp8_out;

  void check(std::span<const int> groups) const {
    if (groups.size() != sz(num_experts) + 1 || groups.back() > max_rows) {
      throw std::invalid_argument(
          "FfnBenchmark: offsets must have num_experts + 1 entries and at "
          "most max_rows rows");
    }
  }

  ~Impl() {
    fp8.reset();
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
  m.check(offsets);
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

double FfnBenchmark::time_fp8_ffn(std::span<const int> offsets, int reps, std::uint64_t* emulated) {
  Impl& m = *impl_;
  m.check(offsets);
  const int h = m.hidden;
  const int w = m.width;
  if (!m.fp8) {
    m.fp8 = std::make_unique<Fp8Gemm>(m.stream, *m.ffn);
    const std::size_t part = sz(h) * sz(w);
    auto* codes = static_cast<std::uint8_t*>(m.fp8_codes.reserve(3 * part * sz(m.num_experts)));
    // Random values in [-1, 1) cast to e4m3 with scale 1/448 (codes over the whole range);
    // every block's scale 0.05/448, weights of about ±0.05.
    float* x = m.x32.reserve_as<float>(part);
    std::vector<float> scales(sz((h + 127) / 128) * sz((w + 127) / 128), 0.05F / 448.0F);
    for (int e = 0; e < m.num_experts; ++e) {
      Fp8Expert x8;
      x8.input_act = x8.mid_act = Fp8Act::groups(128);
      Fp8Weight* parts[] = {&x8.gate, &x8.up, &x8.down};
      for (int p = 0; p < 3; ++p) {
        std::uint8_t* c = codes + (3 * sz(e) + sz(p)) * part;
        fill_random(DType::kFp32, x, part, 1.0F, static_cast<std::uint32_t>(100 + 3 * e + p),
                    m.stream);
        launch_quantize_e4m3(x, 1, static_cast<int>(part), 0, 1.0F / 448.0F, c, nullptr, m.stream);
        const int k = p < 2 ? h : w;
        const int cols = p < 2 ? w : h;
        *parts[p] = m.fp8->prepare_device(c, k, cols, 128, 128, scales.data());
      }
      m.fp8_experts.push_back(x8);
    }
    m.fp8_rows.reserve(sz(m.max_rows) * sz(h) * sizeof(float));
    fill_random(DType::kFp32, m.fp8_rows.get(), sz(m.max_rows) * sz(h), 1.0F, 17, m.stream);
    m.fp8_gu.reserve(sz(m.max_rows) * 2 * sz(w) * sizeof(float));
    m.fp8_gu_stored.reserve(sz(m.max_rows) * 2 * sz(w) * dtype_size(m.dtype));
    m.fp8_act_stored.reserve(sz(m.max_rows) * sz(w) * dtype_size(m.dtype));
    m.fp8_act.reserve(sz(m.max_rows) * sz(w) * sizeof(float));
    m.fp8_out.reserve(sz(m.max_rows) * sz(h) * sizeof(float));
    MOEPLAN_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  }
  m.fp8->reserve_for(offsets, std::max(h, w));
  Fp8MlpBuffers buf;
  buf.gate_up = static_cast<float*>(m.fp8_gu.get());
  buf.gate_up_stored = m.fp8_gu_stored.get();
  buf.act_stored = m.fp8_act_stored.get();
  buf.act = static_cast<float*>(m.fp8_act.get());
  const auto before = m.fp8->calls().emulated;
  const float ms = m.ffn->time_ms(
      [&] {
        m.fp8->mlp(offsets, m.fp8_experts, h, w, m.dtype,
                   static_cast<const float*>(m.fp8_rows.get()),
                   static_cast<float*>(m.fp8_out.get()), buf);
      },
      reps);
  if (emulated != nullptr) *emulated = m.fp8->calls().emulated - before;
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
