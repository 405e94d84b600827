// The fp8 scaled GEMM: cuBLASLt's fp8 matmul with per-operand scale modes, or the emulated
// fp32 path where cuBLASLt has no algorithm (fp8_gemm.hpp).
//
// cuBLASLt is column-major and its fp8 matmul takes both operands K-major ("TN"), so the
// row-major product c[m][cols] = a[m][k] · w[k][cols] is run as cᵀ = wᵀ · aᵀ: operand A is the
// weight part, stored [cols][k] (transposed once in prepare) and read with op T; operand B is
// the activation [m][k] as it is, op N; D is cᵀ, cols × m column-major with leading dimension
// ldc. The scale modes and layouts: fp8_layout.hpp.
#include "kernels/cuda/fp8_gemm.hpp"

#include <cublasLt.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/expert_ffn.hpp"
#include "kernels/cuda/fp8_kernels.hpp"
#include "kernels/cuda/fp8_layout.hpp"
#include "kernels/cuda/moe_kernels.hpp"
#include "models/index.hpp"

namespace moeplan::kernels::cuda {

namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// The largest power of two (up to 256, cuBLASLt's default assumption) dividing the address.
int alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  int align = 1;
  while (align < 256 && a % static_cast<std::uintptr_t>(2 * align) == 0) align *= 2;
  return align;
}

}  // namespace

struct Fp8Gemm::Impl {
  struct Plan {
    bool ok = false;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  // cols, m, k, weight mode, activation mode, ldd, D's alignment
  using Key = std::tuple<int, int, int, int, int, int, int>;

  cudaStream_t stream = nullptr;
  ExpertFfn* fp32 = nullptr;
  cublasLtHandle_t lt = nullptr;
  DeviceBuffer workspace;
  std::map<Key, Plan> plans;
  std::vector<std::unique_ptr<DeviceBuffer>> pool;
  std::size_t next = 0;
  DeviceBuffer act_codes, act_scales, deq_a, deq_w, out_tmp;
  Calls calls;

  ~Impl() {
    clear_plans();
    if (lt != nullptr) cublasLtDestroy(lt);
  }

  DeviceBuffer& slot() {
    if (next == pool.size()) pool.push_back(std::make_unique<DeviceBuffer>());
    return *pool[next++];
  }

  static void destroy(Plan& p) {
    if (p.a != nullptr) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b != nullptr) cublasLtMatrixLayoutDestroy(p.b);
    if (p.d != nullptr) cublasLtMatrixLayoutDestroy(p.d);
    if (p.desc != nullptr) cublasLtMatmulDescDestroy(p.desc);
    p = Plan{};
  }

  void clear_plans() {
    for (auto& [key, p] : plans) destroy(p);
    plans.clear();
  }

  // The plan for this shape and these modes; `ok` false where cuBLASLt offers no algorithm
  // (remembered, so the heuristic is asked once per shape). The scale pointers are set before
  // the heuristic is asked (and again by every run); A and B come from cudaMalloc (256-byte
  // aligned), D's alignment is told.
  Plan& plan(int cols, int m, int k, int wmode, int amode, int ldd, int d_align,
             const void* w_scales, const void* a_scales) {
    const Key key{cols, m, k, wmode, amode, ldd, d_align};
    if (auto it = plans.find(key); it != plans.end()) return it->second;
    if (plans.size() > 4096) clear_plans();
    Plan p;
    const auto u = [](int v) { return static_cast<std::uint64_t>(v); };
    MOEPLAN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    MOEPLAN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    MOEPLAN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    const auto wm = static_cast<cublasLtMatmulMatrixScale_t>(wmode);
    const auto am = static_cast<cublasLtMatmulMatrixScale_t>(amode);
    MOEPLAN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &wm, sizeof(wm)));
    MOEPLAN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &am, sizeof(am)));
    set_scales(p, w_scales, a_scales);
    MOEPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, u(k), u(cols), k));
    MOEPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, u(k), u(m), k));
    MOEPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, u(cols), u(m), ldd));
    cublasLtMatmulPreference_t pref = nullptr;
    MOEPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::size_t ws = kWorkspaceBytes;
    MOEPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    const auto align = static_cast<std::uint32_t>(d_align);
    MOEPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof(align)));
    MOEPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof(align)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s == CUBLAS_STATUS_SUCCESS && found > 0) {
      p.ok = true;
      p.algo = result.algo;
    } else {
      destroy(p);  // no algorithm for this format and shape: the emulated path runs it
    }
    return plans.emplace(key, p).first->second;
  }

  static void set_scales(Plan& p, const void* w_scales, const void* a_scales) {
    MOEPLAN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales, sizeof(w_scales)));
    MOEPLAN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scales, sizeof(a_scales)));
  }

  Fp8Path emulate(const Fp8DeviceAct& a, const Fp8Weight& w, float* c, int ldc, int c_col) {
    float* da = deq_a.reserve_as<float>(uz(a.m) * uz(a.k));
    launch_dequantize_e4m3(a.codes, a.scales, a.m, a.k, a.group, a.static_scale, da, stream);
    float* dw = deq_w.reserve_as<float>(uz(w.k) * uz(w.cols));
    launch_dequantize_e4m3_part(w.codes, w.cols, 0, w.k, w.cols, w.block_rows, w.block_cols,
                                w.scales, dw, stream);
    float* tmp = out_tmp.reserve_as<float>(uz(a.m) * uz(w.cols));
    fp32->gemm(DType::kFp32, DType::kFp32, a.m, w.cols, a.k, da, dw, tmp);
    MOEPLAN_CUDA_CHECK(cudaMemcpy2DAsync(c + c_col, uz(ldc) * sizeof(float), tmp,
                                         uz(w.cols) * sizeof(float), uz(w.cols) * sizeof(float),
                                         uz(a.m), cudaMemcpyDeviceToDevice, stream));
    ++calls.emulated;
    return Fp8Path::kEmulated;
  }
};

Fp8Gemm::Fp8Gemm(cudaStream_t stream, ExpertFfn& fp32) : impl_(std::make_unique<Impl>()) {
  impl_->stream = stream;
  impl_->fp32 = &fp32;
  MOEPLAN_CUBLAS_CHECK(cublasLtCreate(&impl_->lt));
  impl_->workspace.reserve(kWorkspaceBytes);
}

Fp8Gemm::~Fp8Gemm() = default;

void Fp8Gemm::reset() { impl_->next = 0; }

Fp8Gemm::Calls Fp8Gemm::calls() const { return impl_->calls; }

Fp8Weight Fp8Gemm::prepare(const Fp8Part& part, int k) {
  Impl& s = *impl_;
  auto* codes = static_cast<std::uint8_t*>(s.slot().reserve(uz(k) * uz(part.cols)));
  if (k > 0 && part.cols > 0) {
    MOEPLAN_CUDA_CHECK(cudaMemcpy2DAsync(codes, uz(part.cols), part.codes + part.c0, uz(part.ld),
                                         uz(part.cols), uz(k), cudaMemcpyHostToDevice, s.stream));
  }
  return prepare_device(codes, k, part.cols, part.block_rows, part.block_cols, part.scales);
}

Fp8Weight Fp8Gemm::prepare_device(const std::uint8_t* codes, int k, int cols, int block_rows,
                                  int block_cols, const float* host_scales) {
  Impl& s = *impl_;
  Fp8Weight w;
  w.k = k;
  w.cols = cols;
  w.block_rows = block_rows;
  w.block_cols = block_cols;
  w.codes = codes;
  const int kb = ceil_div(k, block_rows);
  const int cb = ceil_div(cols, block_cols);
  float* scales = s.slot().reserve_as<float>(uz(kb) * uz(cb));
  MOEPLAN_CUDA_CHECK(cudaMemcpyAsync(scales, host_scales, uz(kb) * uz(cb) * sizeof(float),
                                     cudaMemcpyHostToDevice, s.stream));
  w.scales = scales;
  w.lt_mode = fp8_weight_scale_mode(k, cols, block_rows, block_cols);
  if (w.lt_mode < 0) return w;
  auto* kmajor = static_cast<std::uint8_t*>(s.slot().reserve(uz(k) * uz(cols)));
  launch_transpose_e4m3(codes, cols, 0, k, cols, kmajor, s.stream);
  w.kmajor = kmajor;
  w.lt_scales = scales;  // OUTER_VEC (one per column) and SCALAR keep the part's layout
  if (w.lt_mode == CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F) {
    const std::vector<float> blk = blk128_scales(host_scales, k, cols);
    float* lt_scales = s.slot().reserve_as<float>(blk.size());
    // NOTE: a pageable source: the copy has been staged when cudaMemcpyAsync returns.
    MOEPLAN_CUDA_CHECK(cudaMemcpyAsync(lt_scales, blk.data(), blk.size() * sizeof(float),
                                       cudaMemcpyHostToDevice, s.stream));
    w.lt_scales = lt_scales;
  }
  return w;
}

void Fp8Gemm::mlp(std::span<const int> offsets, std::span<const Fp8Expert> experts, int hidden,
                  int width, DType dtype, const float* rows, float* out, const Fp8MlpBuffers& buf) {
  const std::size_t es = dtype_size(dtype);
  for (std::size_t e = 0; e < experts.size(); ++e) {
    const int r0 = offsets[e];
    const int m = offsets[e + 1] - r0;
    if (m == 0) continue;
    const Fp8Expert& x = experts[e];
    const std::size_t gu_off = uz(r0) * 2 * uz(width);
    const Fp8DeviceAct xq = quantize(rows + uz(r0) * uz(hidden), m, hidden, x.input_act);
    run(xq, x.gate, buf.gate_up + gu_off, 2 * width, 0);
    run(xq, x.up, buf.gate_up + gu_off, 2 * width, width);
    // SiLU·mul on gate and up stored in the dtype, the activation stored in the dtype (the
    // CPU's silu_mul_rows), then quantized for the down GEMM.
    char* gs = static_cast<char*>(buf.gate_up_stored) + gu_off * es;
    char* as = static_cast<char*>(buf.act_stored) + uz(r0) * uz(width) * es;
    launch_to_storage(dtype, buf.gate_up + gu_off, uz(m) * 2 * uz(width), gs, impl_->stream);
    launch_silu_mul(dtype, gs, m, width, as, impl_->stream);
    float* act = buf.act + uz(r0) * uz(width);
    launch_from_storage(dtype, as, uz(m) * uz(width), act, impl_->stream);
    const Fp8DeviceAct aq = quantize(act, m, width, x.mid_act);
    run(aq, x.down, out + uz(r0) * uz(hidden), hidden, 0);
  }
}

void Fp8Gemm::reserve(int m, int k) {
  impl_->act_codes.reserve(uz(m) * uz(k));
  impl_->act_scales.reserve(uz(m) * uz(ceil_div(k, 16)) * sizeof(float));
}

void Fp8Gemm::reserve_for(std::span<const int> offsets, int k) {
  int most = 0;
  for (std::size_t e = 0; e + 1 < offsets.size(); ++e) {
    most = std::max(most, offsets[e + 1] - offsets[e]);
  }
  reserve(most, k);
}

Fp8DeviceAct Fp8Gemm::quantize(const float* x, int m, int k, const Fp8Act& act) {
  Impl& s = *impl_;
  Fp8DeviceAct a;
  a.m = m;
  a.k = k;
  a.group = act.kind == Fp8Act::Kind::kGroups  ? act.group
            : act.kind == Fp8Act::Kind::kToken ? k
                                               : 0;
  a.static_scale = act.kind == Fp8Act::Kind::kStatic ? act.scale : 0.0F;
  auto* codes = s.act_codes.reserve_as<std::uint8_t>(uz(m) * uz(k));
  const int groups = a.group > 0 ? ceil_div(k, a.group) : 1;
  float* scales = s.act_scales.reserve_as<float>(uz(groups) * uz(std::max(m, 1)));
  if (a.group == 0) {
    MOEPLAN_CUDA_CHECK(
        cudaMemcpyAsync(scales, &a.static_scale, sizeof(float), cudaMemcpyHostToDevice, s.stream));
  }
  launch_quantize_e4m3(x, m, k, a.group, a.static_scale, codes, scales, s.stream);
  a.codes = codes;
  a.scales = scales;
  return a;
}

Fp8Path Fp8Gemm::run(const Fp8DeviceAct& a, const Fp8Weight& w, float* c, int ldc, int c_col) {
  Impl& s = *impl_;
  if (a.m == 0 || w.cols == 0) return Fp8Path::kCublasLt;
  const int amode = fp8_act_scale_mode(a.k, a.group);
  if (w.lt_mode < 0 || amode < 0) return s.emulate(a, w, c, ldc, c_col);
  // D straight into c where its columns start 16-byte aligned, else through a scratch copy.
  float* d = c + c_col;
  int ldd = ldc;
  const bool direct = alignment(d) >= 16 && ldc % 4 == 0;
  if (!direct) {
    d = s.out_tmp.reserve_as<float>(uz(a.m) * uz(w.cols));
    ldd = w.cols;
  }
  Impl::Plan& p =
      s.plan(w.cols, a.m, a.k, w.lt_mode, amode, ldd, alignment(d), w.lt_scales, a.scales);
  if (!p.ok) return s.emulate(a, w, c, ldc, c_col);
  Impl::set_scales(p, w.lt_scales, a.scales);
  const float alpha = 1.0F;
  const float beta = 0.0F;
  const cublasStatus_t st =
      cublasLtMatmul(s.lt, p.desc, &alpha, w.kmajor, p.a, a.codes, p.b, &beta, d, p.d, d, p.d,
                     &p.algo, s.workspace.get(), kWorkspaceBytes, s.stream);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE) {
    // The heuristic offered an algorithm the matmul then refused for these operands: this
    // shape runs emulated from now on, and the refusal is kept for the report.
    s.calls.refusal = std::string("cublasLtMatmul: ") + cublasGetStatusName(st);
    p.ok = false;
    return s.emulate(a, w, c, ldc, c_col);
  }
  MOEPLAN_CUBLAS_CHECK(st);
  if (!direct) {
    MOEPLAN_CUDA_CHECK(cudaMemcpy2DAsync(c + c_col, uz(ldc) * sizeof(float), d,
                                         uz(w.cols) * sizeof(float), uz(w.cols) * sizeof(float),
                                         uz(a.m), cudaMemcpyDeviceToDevice, s.stream));
  }
  ++s.calls.cublaslt;
  return Fp8Path::kCublasLt;
}

}  // namespace moeplan::kernels::cuda
