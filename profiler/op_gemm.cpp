// GEMM: the (m, n, k) shapes the cost model asks for, run through the profiled backend's own
// calls — router_logits for the router (n = E, k = H), gemm into fp32 for gate/up
// (n = 2·width, k = H; SiLU·mul rounds their output), and gemm stored in the storage dtype for
// down projections (n = H, k = width; the layer rounds before its TP reduction); and gemm stored
// in the storage dtype for the attention projections and dense MLP layers (weights cold, as
// every layer's stream through the caches; input and output hot, as the ops beside them).
#include <algorithm>
#include <set>
#include <tuple>

#include "kernels/backend.hpp"
#include "kernels/fp8.hpp"
#include "kernels/uninit_vector.hpp"
#include "profiler/op_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

enum class Role { kRouter, kGateUp, kDown, kProjection };

std::string role_kernel(const std::string& backend, Role r) {
  switch (r) {
    case Role::kRouter: return backend + " router_logits (fp32 out)";
    case Role::kGateUp: return backend + " gemm (fp32 out)";
    case Role::kDown: return backend + " gemm (out stored in dtype)";
    case Role::kProjection: return backend + " gemm (projection, out stored in dtype)";
  }
  return "?";
}

/// The weight scales and activation quantization of the sweep's fp8 GEMMs, in words.
std::string fp8_scales_text(const SweepSpec& s) {
  const std::string act = s.fp8_act.kind == kernels::Fp8Act::Kind::kGroups
                              ? "1×" + std::to_string(s.fp8_act.group) + " activation groups"
                              : s.fp8_act.describe() + " activations";
  switch (s.fp8_scheme) {
    case WeightScheme::kFp8Channel: return "per-channel weight scales, " + act;
    case WeightScheme::kFp8Tensor: return "per-tensor weight scales, " + act;
    default:
      return std::to_string(s.fp8_block_out) + "×" + std::to_string(s.fp8_block_in) +
             " weight blocks, " + act;
  }
}

/// The kernel of an fp8 expert GEMM point: gate/up as the layer runs it (two parts, gate and
/// up, each with its own scales), down as one part.
std::string fp8_kernel(const std::string& backend, Role r, const SweepSpec& s) {
  const char* what =
      r == Role::kGateUp ? "gate/up (2 parts)" : (r == Role::kDown ? "down" : "projection");
  return backend + " gemm_fp8 " + what + " (" + fp8_scales_text(s) + ")";
}

/// The scale blocks of one stored part [k][part_cols], as kernels/layer_spec makes an expert's.
std::pair<int, int> fp8_part_blocks(const SweepSpec& s, int k, int part_cols) {
  return kernels::fp8_part_blocks(s.fp8_scheme, s.fp8_block_in, s.fp8_block_out, k, part_cols);
}

/// An fp8 expert GEMM through the backend's gemm_fp8: a [m][k] (quantized by the op as the
/// format says), weights [k][n] as e4m3 codes with fp32 scales (DeepSeek-V3's blocks, per
/// channel or per tensor) — for gate/up two parts of n/2 columns (gate, up), as the layer's MLP
/// calls it.
class Fp8GemmCase final : public OpCase {
 public:
  Fp8GemmCase(int m, int n, int k, Role role, const SweepSpec& s, kernels::Backend& backend)
      : m_(m), n_(n), k_(k), act_(s.fp8_act), backend_(backend) {
    a_ = random_values(DType::kBf16, usz(m) * usz(k), 1);
    // A static scale is calibrated on the input itself (its amax, as a calibration run would).
    if (act_.kind == kernels::Fp8Act::Kind::kStatic) act_.scale = kernels::calibrated_scale(a_);
    const int parts = role == Role::kGateUp ? 2 : 1;
    part_cols_ = n / parts;
    std::tie(block_rows_, block_cols_) = fp8_part_blocks(s, k, part_cols_);
    // Cold weights, as the layer streams every local expert's once per forward (GemmCase).
    // (m, n, k come from the sweep's positive shapes; the count is computed once so that GCC's
    // bounds analysis at -O1 sees one size.)
    const std::size_t elems =
        static_cast<std::size_t>(std::max(k, 0)) * static_cast<std::size_t>(std::max(n, 0));
    const std::size_t copies = cold_copies(elems, 64, s.cold_bytes);
    {
      Weights w;
      w.values = random_values(DType::kBf16, elems, 100, -0.1F, 0.1F);
      w.codes = std::vector<std::uint8_t>(elems);
      w.scales.resize(usz(parts));
      // Each part [k][part_cols] quantized in its scale blocks (the kernels' stored
      // orientation), its values replaced by their exact dequantized values.
      for (int p = 0; p < parts; ++p) {
        kernels::quantize_part(w.values, n, p * part_cols_, k, part_cols_, block_rows_, block_cols_,
                               w.codes, w.scales[usz(p)]);
      }
      pool_.push_back(std::move(w));
    }
    for (std::size_t i = 1; i < copies; ++i) pool_.push_back(pool_.front());  // other addresses
    c_.assign(usz(m) * usz(n), 0.0F);
  }

  void run() override {
    last_ = next_;
    next_ = (next_ + 1) % pool_.size();
    const Weights& w = pool_[last_];
    std::vector<kernels::Fp8Part> parts;
    for (std::size_t p = 0; p < w.scales.size(); ++p) {
      parts.push_back({w.codes.data(), n_, static_cast<int>(p) * part_cols_, part_cols_,
                       w.scales[p].data(), block_rows_, block_cols_});
    }
    backend_.gemm_fp8(kernels::OpContext{}, a_, m_, k_, act_, parts, c_);
    if (fault_) c_[c_.size() / 2] += 1.0F;
  }

  Check verify() override {
    run();
    const Weights& w = pool_[last_];
    // The reference quantizes the rows with the same function (identical inputs, identical
    // codes) and multiplies the weights' exact dequantized values in double: what is left is
    // the fp32 accumulation error.
    std::vector<float> aq = a_;
    kernels::fake_quantize_activations(aq.data(), m_, k_, act_);
    const long size = static_cast<long>(c_.size());
    for (long s = 0; s < std::min<long>(65, size); ++s) {
      const long idx = s == 0 ? size / 2 : (s * 7919L) % size;
      const long i = idx / n_, j = idx % n_;
      double ref = 0.0, abs_sum = 0.0;
      for (int p = 0; p < k_; ++p) {
        const double t = static_cast<double>(aq[usz(i * k_ + p)]) * w.values[usz(p * n_ + j)];
        ref += t;
        abs_sum += std::abs(t);
      }
      const double tol = sum_tolerance(DType::kFp32, k_, abs_sum, ref);
      if (!(std::abs(c_[usz(idx)] - ref) <= tol)) {
        return {false, "C[" + std::to_string(i) + "," + std::to_string(j) +
                           "] = " + std::to_string(c_[usz(idx)]) + ", expected " +
                           std::to_string(ref) + " ± " + std::to_string(tol)};
      }
    }
    return {};
  }

 private:
  struct Weights {
    std::vector<float> values;  ///< the exact dequantized values (the reference's)
    std::vector<std::uint8_t> codes;
    std::vector<std::vector<float>> scales;  ///< per part
  };
  int m_, n_, k_;
  kernels::Fp8Act act_;
  int part_cols_ = 0;
  int block_rows_ = 0, block_cols_ = 0;
  kernels::Backend& backend_;
  std::vector<float> a_;
  std::vector<float> c_;
  std::vector<Weights> pool_;
  std::size_t next_ = 0, last_ = 0;
};

class GemmCase final : public OpCase {
 public:
  GemmCase(int m, int n, int k, DType dtype, Role role, std::size_t cold_bytes,
           kernels::Backend& backend)
      : m_(m), n_(n), k_(k), dtype_(dtype), role_(role), backend_(backend) {
    a_ = random_values(dtype, usz(m) * usz(k), 1);
    // NOTE: the layer streams every local expert's weights once per forward, so a weight matrix
    // is cold when its GEMM starts. Rotating over copies that together exceed the per-core
    // caches measures that; the router's weight is reused by every row and stays hot.
    const std::size_t b_bytes = usz(k) * usz(n) * sizeof(float);
    const std::size_t copies = role == Role::kRouter ? 1 : cold_copies(b_bytes, 64, cold_bytes);
    // Copies of one matrix at other addresses are as cold as distinct values, and copying is
    // far cheaper than generating 256 MiB of values per point.
    b_pool_.push_back(random_values(dtype, usz(k) * usz(n), 100));
    for (std::size_t i = 1; i < copies; ++i) b_pool_.push_back(b_pool_.front());
    // NOTE: so are the activations at the ends of the expert MLP: the rows a gate/up GEMM reads
    // were unpacked before the previous experts' weights went through the caches, and a down
    // GEMM writes into the layer's output buffer, which the combine reads long after. The
    // middle (gate/up output → SiLU·mul → down input) stays hot, as in the layer. Rotating the
    // cold ends too moved the TP layouts' expert time from 10–20% under the layer's to within
    // the run-to-run spread (docs/BENCHMARKS.md).
    const std::size_t a_copies =
        role == Role::kGateUp ? cold_copies(a_.size() * 4, 64, cold_bytes) : 1;
    for (std::size_t i = 1; i < a_copies; ++i) a_pool_.push_back(a_);
    const std::size_t c_copies =
        role == Role::kDown ? cold_copies(usz(m) * usz(n) * sizeof(float), 64, cold_bytes) : 1;
    c_pool_.assign(c_copies, std::vector<float>(usz(m) * usz(n), 0.0F));
  }

  void run() override {
    last_ = next_;
    next_ = (next_ + 1) % b_pool_.size();
    const std::vector<float>& b = b_pool_[last_];
    last_a_ = next_a_;
    next_a_ = (next_a_ + 1) % (a_pool_.size() + 1);
    const float* a = last_a_ == 0 ? a_.data() : a_pool_[last_a_ - 1].data();
    last_c_ = next_c_;
    next_c_ = (next_c_ + 1) % c_pool_.size();
    std::vector<float>& c_out = c_pool_[last_c_];
    const std::span<const float> a_span(a, usz(m_) * usz(k_));
    if (role_ == Role::kRouter) {
      backend_.router_logits(kernels::OpContext{}, a_span, m_, k_, b, n_, c_out);
    } else if (role_ == Role::kGateUp) {
      // The backend's MLP allocates its gate/up output for every expert: so does this GEMM.
      kernels::UninitVector<float> gu(usz(m_) * usz(n_));
      backend_.gemm(kernels::OpContext{}, a_span, m_, k_, b, n_, dtype_, DType::kFp32, gu);
      fresh_ = std::move(gu);
    } else {  // down and projections: stored in the dtype
      backend_.gemm(kernels::OpContext{}, a_span, m_, k_, b, n_, dtype_, dtype_, c_out);
    }
    if (fault_) out()[c_out.size() / 2] += 1.0F;
  }

  float* out() { return role_ == Role::kGateUp ? fresh_.data() : c_pool_[last_c_].data(); }

  Check verify() override {
    run();
    const std::vector<float>& b_ = b_pool_[last_];
    // Sampled entries against a double-precision dot product; the bound is the fp32
    // accumulation error plus the storage rounding of a down projection.
    const long size = static_cast<long>(c_pool_.front().size());
    for (long s = 0; s < std::min<long>(65, size); ++s) {
      const long idx = s == 0 ? size / 2 : (s * 7919L) % size;
      const long i = idx / n_, j = idx % n_;
      double ref = 0.0, abs_sum = 0.0;
      for (int p = 0; p < k_; ++p) {
        const double t = static_cast<double>(a_[usz(i * k_ + p)]) * b_[usz(p * n_ + j)];
        ref += t;
        abs_sum += std::abs(t);
      }
      const DType out_dtype =
          role_ == Role::kDown || role_ == Role::kProjection ? dtype_ : DType::kFp32;
      const double tol = sum_tolerance(out_dtype, k_, abs_sum, ref);
      const double got = out()[usz(idx)];
      if (!(std::abs(got - ref) <= tol)) {
        return {false, "C[" + std::to_string(i) + "," + std::to_string(j) +
                           "] = " + std::to_string(got) + ", expected " + std::to_string(ref) +
                           " ± " + std::to_string(tol)};
      }
    }
    return {};
  }

 private:
  int m_, n_, k_;
  DType dtype_;
  Role role_;
  kernels::Backend& backend_;
  std::vector<float> a_;
  std::vector<std::vector<float>> a_pool_;  ///< further copies of a_ (gate/up: cold input)
  std::vector<std::vector<float>> c_pool_;  ///< output buffers (down: cold output)
  kernels::UninitVector<float> fresh_;
  std::vector<std::vector<float>> b_pool_;
  std::size_t next_ = 0, last_ = 0, next_a_ = 0, last_a_ = 0, next_c_ = 0, last_c_ = 0;
};

/// A GEMM point of plain (not fp8) weights in the role's kernel.
OpPoint plain_point(const std::string& backend, Role role, DType dt, int m, int n, int k) {
  OpPoint p;
  p.op = "gemm";
  p.dtype = dt;
  p.m = m;
  p.n = n;
  p.k = k;
  p.shape = shape_text({{"m", m}, {"n", n}, {"k", k}});
  p.flops = 2.0 * m * n * static_cast<double>(k);
  p.bytes = (static_cast<double>(m) * k + static_cast<double>(k) * n + static_cast<double>(m) * n) *
            dtype_bytes(dt);
  p.kernel = role_kernel(backend, role);
  return p;
}

std::vector<OpPoint> gemm_sweep(const SweepSpec& s) {
  // (n, k, role) of every GEMM the cost model issues for the legal layouts.
  std::vector<std::tuple<int, int, Role>> shapes;
  std::set<std::pair<int, int>> seen;
  const bool fp8 = s.fp8_scheme != WeightScheme::kPlain;
  // fp8 expert GEMMs are points of their own dtype: a shape equal to the router's (E, H) is
  // still measured (with plain weights the two share one point).
  std::set<std::pair<int, int>> seen_fp8;
  auto add = [&](int n, int k, Role r) {
    auto& set = fp8 && r != Role::kRouter ? seen_fp8 : seen;
    if (n > 0 && k > 0 && set.insert({n, k}).second) shapes.emplace_back(n, k, r);
  };
  add(s.num_experts, s.hidden, Role::kRouter);
  for (const int tp : s.tp_sizes) {
    add(2 * s.intermediate / tp, s.hidden, Role::kGateUp);
    add(s.hidden, s.intermediate / tp, Role::kDown);
    if (s.shared_width > 0) {
      add(2 * s.shared_width / tp, s.hidden, Role::kGateUp);
      add(s.hidden, s.shared_width / tp, Role::kDown);
    }
  }
  for (const auto& [n, k] : s.projections) add(n, k, Role::kProjection);
  std::vector<OpPoint> out;
  for (const DType dt : s.dtypes) {
    for (const auto& [n, k, role] : shapes) {
      // fp8 weights: the expert GEMMs are fp8 ones, measured once below.
      if (fp8 && role != Role::kRouter) continue;
      for (const int m : row_counts(s.max_rows, !s.quick)) {
        out.push_back(plain_point(s.backend, role, dt, m, n, k));
      }
    }
  }
  if (fp8) {
    for (const auto& [n, k, role] : shapes) {
      if (role == Role::kRouter) continue;
      for (const int m : row_counts(s.max_rows, !s.quick)) {
        OpPoint p;
        p.op = "gemm";
        p.dtype = DType::kFp8;
        p.m = m;
        p.n = n;
        p.k = k;
        p.shape = shape_text({{"m", m}, {"n", n}, {"k", k}});
        p.flops = 2.0 * m * n * static_cast<double>(k);
        // fp8 weights with their fp32 scales, fp32 activations in and out (quantized inside).
        const int parts = role == Role::kGateUp ? 2 : 1;
        const auto [br, bc] = fp8_part_blocks(s, k, n / parts);
        const double scales =
            static_cast<double>(parts) * ((k + br - 1) / br) * ((n / parts + bc - 1) / bc);
        p.bytes = static_cast<double>(k) * n + 4.0 * scales +
                  (static_cast<double>(m) * k + static_cast<double>(m) * n) * 4.0;
        p.kernel = fp8_kernel(s.backend, role, s);
        out.push_back(std::move(p));
      }
    }
  }
  return out;
}

}  // namespace

OpPoint projection_gemm_point(const std::string& backend, DType dtype, int m, int n, int k) {
  return plain_point(backend, Role::kProjection, dtype, m, n, k);
}

OpTable gemm_op() {
  OpTable t;
  t.name = "gemm";
  t.sweep = gemm_sweep;
  t.init = [](const OpPoint& p, const SweepSpec& s, kernels::Communicator*,
              kernels::Backend& backend) -> Result<std::unique_ptr<OpCase>> {
    const int n = static_cast<int>(p.n), k = static_cast<int>(p.k);
    for (const Role r : {Role::kGateUp, Role::kDown, Role::kProjection}) {
      if (s.fp8_scheme != WeightScheme::kPlain && p.kernel == fp8_kernel(s.backend, r, s)) {
        MOEPLAN_TRY_STATUS(backend_supports(backend, kernels::BackendOp::kGemmFp8Block, p.dtype));
        return std::unique_ptr<OpCase>(
            std::make_unique<Fp8GemmCase>(static_cast<int>(p.m), n, k, r, s, backend));
      }
    }
    Role role = Role::kGateUp;
    for (const Role r : {Role::kRouter, Role::kGateUp, Role::kDown, Role::kProjection}) {
      if (p.kernel == role_kernel(s.backend, r)) role = r;
    }
    MOEPLAN_TRY_STATUS(backend_supports(
        backend,
        role == Role::kRouter ? kernels::BackendOp::kRouterLogits : kernels::BackendOp::kGemm,
        p.dtype));
    return std::unique_ptr<OpCase>(std::make_unique<GemmCase>(static_cast<int>(p.m), n, k, p.dtype,
                                                              role, s.cold_bytes, backend));
  };
  return t;
}

}  // namespace moeplan::profiler
