// The grouped expert FFN: cuBLAS grouped GEMM or a cuBLASLt loop, with the SiLU-and-mul kernel
// between the two GEMMs.
#include "kernels/cuda/expert_ffn.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_params.hpp"
#include "kernels/cuda/moe_kernels.hpp"

namespace moeplan::kernels::cuda {

namespace {

constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;  // 32 MiB, as cuBLAS on Hopper

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kFp32: return CUDA_R_32F;
    case DType::kBf16: return CUDA_R_16BF;
    case DType::kFp16: return CUDA_R_16F;
    case DType::kFp8: break;
  }
  throw std::invalid_argument("CUDA backend: fp8 is not a storage dtype");
}

const char* byte_ptr(const void* p, std::size_t off) { return static_cast<const char*>(p) + off; }
char* byte_ptr(void* p, std::size_t off) { return static_cast<char*>(p) + off; }

}  // namespace

std::string ffn_algo_name(FfnAlgo a) { return a == FfnAlgo::kGrouped ? "grouped" : "lt_loop"; }

struct ExpertFfn::Impl {
  // One cuBLASLt matmul shape: descriptors and the heuristic's best algorithm.
  struct LtPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using LtKey = std::tuple<int, int, int, int, int>;  // m, n, k, in type, out type

  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  DeviceBuffer lt_workspace;
  // The grouped GEMM's A, B, C pointer arrays travel through two pinned host slots used in
  // turn: a pageable copy would synchronise the stream before each GEMM, pinned ones stay
  // asynchronous. A slot is rewritten only after its previous copy has run (its event).
  struct PointerSlot {
    void* host = nullptr;
    std::size_t bytes = 0;
    cudaEvent_t copied = nullptr;
    DeviceBuffer device;
  };
  PointerSlot slots[2];
  int next_slot = 0;
  std::map<LtKey, LtPlan> lt_plans;
  std::map<std::tuple<int, int, int, int, int>, FfnAlgo> picked;
  cudaEvent_t start = nullptr, stop = nullptr;

  ~Impl() {
    clear_plans();
    for (PointerSlot& slot : slots) {
      if (slot.copied != nullptr) cudaEventDestroy(slot.copied);
      if (slot.host != nullptr) cudaFreeHost(slot.host);
    }
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    if (lt != nullptr) cublasLtDestroy(lt);
    if (blas != nullptr) cublasDestroy(blas);
  }

  void clear_plans() {
    for (auto& [key, p] : lt_plans) {
      cublasLtMatrixLayoutDestroy(p.a);
      cublasLtMatrixLayoutDestroy(p.b);
      cublasLtMatrixLayoutDestroy(p.c);
      cublasLtMatmulDescDestroy(p.desc);
    }
    lt_plans.clear();
  }

  const LtPlan& lt_plan(int m, int n, int k, DType in, DType out) {
    const LtKey key{m, n, k, static_cast<int>(in), static_cast<int>(out)};
    if (auto it = lt_plans.find(key); it != lt_plans.end()) return it->second;
    if (lt_plans.size() > 4096) clear_plans();
    LtPlan p;
    MOEPLAN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const auto u = [](int v) { return static_cast<std::uint64_t>(v); };
    MOEPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, cuda_type(in), u(m), u(k), m));
    MOEPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, cuda_type(in), u(k), u(n), k));
    MOEPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, cuda_type(out), u(m), u(n), m));
    cublasLtMatmulPreference_t pref = nullptr;
    MOEPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::size_t ws = kLtWorkspaceBytes;
    MOEPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
      cublasLtMatrixLayoutDestroy(p.a);
      cublasLtMatrixLayoutDestroy(p.b);
      cublasLtMatrixLayoutDestroy(p.c);
      cublasLtMatmulDescDestroy(p.desc);
      MOEPLAN_CUBLAS_CHECK(s == CUBLAS_STATUS_SUCCESS ? CUBLAS_STATUS_NOT_SUPPORTED : s);
    }
    p.algo = result.algo;
    return lt_plans.emplace(key, p).first->second;
  }

  // Column-major C[m][n] = A[m][k] · B[k][n] (row-major out[n][m] = in[n][k] · W[k][m]).
  void lt_matmul(DType in, DType out, int m, int n, int k, const void* a, const void* b, void* c) {
    const LtPlan& p = lt_plan(m, n, k, in, out);
    const float alpha = 1.0F;
    const float beta = 0.0F;
    MOEPLAN_CUBLAS_CHECK(cublasLtMatmul(lt, p.desc, &alpha, a, p.a, b, p.b, &beta, c, p.c, c, p.c,
                                        &p.algo, lt_workspace.get(), kLtWorkspaceBytes, stream));
  }

  // One grouped GEMM over the experts: out_e = in_e · W_e, W_e at weights[e] + w_offset.
  void grouped_gemm(const FfnArgs& a, const GemmGroups& g, int n_out, int k_in, const void* in,
                    void* out, bool gate_up_stage) {
    const std::size_t es = dtype_size(a.dtype);
    const std::size_t problems = g.experts.size();
    std::vector<void*> host(3 * problems);  // A, B, C pointer arrays (cuBLAS only reads A, B)
    for (std::size_t p = 0; p < problems; ++p) {
      const int e = g.experts[p];
      const auto row0 = static_cast<std::size_t>(a.offsets[e]);
      const DeviceExpert& w = a.experts[e];
      host[p] = const_cast<void*>(gate_up_stage ? w.gate_up : w.down);
      host[problems + p] =
          const_cast<char*>(byte_ptr(in, row0 * static_cast<std::size_t>(k_in) * es));
      host[2 * problems + p] = byte_ptr(out, row0 * static_cast<std::size_t>(n_out) * es);
    }
    void** dev = stage_pointers(host);
    const std::size_t groups = g.group_size.size();
    const std::vector<cublasOperation_t> op(groups, CUBLAS_OP_N);
    const std::vector<float> alpha(groups, 1.0F);
    const std::vector<float> beta(groups, 0.0F);
    const cudaDataType_t t = cuda_type(a.dtype);
    MOEPLAN_CUBLAS_CHECK(cublasGemmGroupedBatchedEx(
        blas, op.data(), op.data(), g.m.data(), g.n.data(), g.k.data(), alpha.data(), dev, t,
        g.lda.data(), dev + problems, t, g.ldb.data(), beta.data(), dev + 2 * problems, t,
        g.ldc.data(), static_cast<int>(groups), g.group_size.data(), CUBLAS_COMPUTE_32F));
  }

  // Copies the pointer arrays to the device through the next pinned slot; returns the device
  // copy. The device array of a slot is rewritten by a copy enqueued after the GEMM that read
  // it, so stream order keeps it intact while in use.
  void** stage_pointers(const std::vector<void*>& host) {
    PointerSlot& slot = slots[next_slot];
    next_slot ^= 1;
    const std::size_t bytes = host.size() * sizeof(void*);
    if (slot.copied == nullptr) {
      MOEPLAN_CUDA_CHECK(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming));
    } else {
      MOEPLAN_CUDA_CHECK(cudaEventSynchronize(slot.copied));
    }
    if (slot.bytes < bytes) {
      if (slot.host != nullptr) MOEPLAN_CUDA_CHECK(cudaFreeHost(slot.host));
      slot.host = nullptr;
      slot.bytes = 0;
      MOEPLAN_CUDA_CHECK(cudaMallocHost(&slot.host, bytes));
      slot.bytes = bytes;
    }
    std::memcpy(slot.host, host.data(), bytes);
    auto** dev = static_cast<void**>(slot.device.reserve(bytes));
    MOEPLAN_CUDA_CHECK(cudaMemcpyAsync(dev, slot.host, bytes, cudaMemcpyHostToDevice, stream));
    MOEPLAN_CUDA_CHECK(cudaEventRecord(slot.copied, stream));
    return dev;
  }
};

ExpertFfn::ExpertFfn(cudaStream_t stream) : impl_(std::make_unique<Impl>()) {
  impl_->stream = stream;
  MOEPLAN_CUBLAS_CHECK(cublasCreate(&impl_->blas));
  MOEPLAN_CUBLAS_CHECK(cublasSetStream(impl_->blas, stream));
  // Pure fp32 arithmetic for fp32 data: no TF32 unless asked for.
  MOEPLAN_CUBLAS_CHECK(cublasSetMathMode(impl_->blas, CUBLAS_DEFAULT_MATH));
  MOEPLAN_CUBLAS_CHECK(cublasLtCreate(&impl_->lt));
  impl_->lt_workspace.reserve(kLtWorkspaceBytes);
  MOEPLAN_CUDA_CHECK(cudaEventCreate(&impl_->start));
  MOEPLAN_CUDA_CHECK(cudaEventCreate(&impl_->stop));
}

ExpertFfn::~ExpertFfn() = default;

void ExpertFfn::run(FfnAlgo algo, const FfnArgs& a) {
  const int total = a.offsets[a.num_experts];
  if (total == 0) return;
  const int w2 = 2 * a.width;
  const std::size_t es = dtype_size(a.dtype);
  if (algo == FfnAlgo::kGrouped) {
    const GemmGroups gu = make_gemm_groups(a.offsets, a.num_experts, w2, a.hidden);
    impl_->grouped_gemm(a, gu, w2, a.hidden, a.rows, a.gate_up, true);
    launch_silu_mul(a.dtype, a.gate_up, total, a.width, a.act, impl_->stream);
    const GemmGroups dn = make_gemm_groups(a.offsets, a.num_experts, a.hidden, a.width);
    impl_->grouped_gemm(a, dn, a.hidden, a.width, a.act, a.out, false);
    return;
  }
  for (int e = 0; e < a.num_experts; ++e) {
    const int rows = a.offsets[e + 1] - a.offsets[e];
    if (rows == 0) continue;
    const auto r0 = static_cast<std::size_t>(a.offsets[e]);
    impl_->lt_matmul(a.dtype, a.dtype, w2, rows, a.hidden, a.experts[e].gate_up,
                     byte_ptr(a.rows, r0 * static_cast<std::size_t>(a.hidden) * es),
                     byte_ptr(a.gate_up, r0 * static_cast<std::size_t>(w2) * es));
  }
  launch_silu_mul(a.dtype, a.gate_up, total, a.width, a.act, impl_->stream);
  for (int e = 0; e < a.num_experts; ++e) {
    const int rows = a.offsets[e + 1] - a.offsets[e];
    if (rows == 0) continue;
    const auto r0 = static_cast<std::size_t>(a.offsets[e]);
    impl_->lt_matmul(a.dtype, a.dtype, a.hidden, rows, a.width, a.experts[e].down,
                     byte_ptr(a.act, r0 * static_cast<std::size_t>(a.width) * es),
                     byte_ptr(a.out, r0 * static_cast<std::size_t>(a.hidden) * es));
  }
}

FfnAlgo ExpertFfn::pick(const FfnArgs& a) {
  const int total = a.offsets[a.num_experts];
  const auto bucket = static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(total, 1))));
  const std::tuple<int, int, int, int, int> key{static_cast<int>(a.dtype), a.hidden, a.width,
                                                a.num_experts, bucket};
  if (auto it = impl_->picked.find(key); it != impl_->picked.end()) return it->second;
  const float grouped = time_ms([&] { run(FfnAlgo::kGrouped, a); }, 2);
  const float lt = time_ms([&] { run(FfnAlgo::kLtLoop, a); }, 2);
  const FfnAlgo best = grouped <= lt ? FfnAlgo::kGrouped : FfnAlgo::kLtLoop;
  impl_->picked.emplace(key, best);
  return best;
}

void ExpertFfn::gemm(DType in, DType out, int rows, int n, int k, const void* x, const void* w,
                     void* y) {
  if (rows == 0) return;
  const float alpha = 1.0F;
  const float beta = 0.0F;
  MOEPLAN_CUBLAS_CHECK(cublasGemmEx(impl_->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, rows, k, &alpha, w,
                                    cuda_type(in), n, x, cuda_type(in), k, &beta, y, cuda_type(out),
                                    n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

float ExpertFfn::time_ms(const std::function<void()>& fn, int reps) {
  fn();
  MOEPLAN_CUDA_CHECK(cudaEventRecord(impl_->start, impl_->stream));
  for (int i = 0; i < reps; ++i) fn();
  MOEPLAN_CUDA_CHECK(cudaEventRecord(impl_->stop, impl_->stream));
  MOEPLAN_CUDA_CHECK(cudaEventSynchronize(impl_->stop));
  float ms = 0.0F;
  MOEPLAN_CUDA_CHECK(cudaEventElapsedTime(&ms, impl_->start, impl_->stop));
  return ms / static_cast<float>(reps);
}

}  // namespace moeplan::kernels::cuda
