// The CUDA backend: host spans in, device kernels and cuBLAS, host spans out.
#include "kernels/cuda/cuda_backend.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_probe.hpp"
#include "kernels/cuda/expert_ffn.hpp"
#include "kernels/cuda/fp8_gemm.hpp"
#include "kernels/cuda/launch_params.hpp"
#include "kernels/cuda/moe_kernels.hpp"
#include "kernels/router_math.hpp"
#include "models/index.hpp"

namespace moeplan::kernels::cuda {

namespace {

void require(const std::string& problem) {
  if (!problem.empty()) throw std::invalid_argument("CUDA backend: " + problem);
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, FfnChoice choice) : device_(device), choice_(choice) {
    MOEPLAN_CUDA_CHECK(cudaSetDevice(device_));
    MOEPLAN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ffn_ = std::make_unique<ExpertFfn>(stream_);
    fp8_ = std::make_unique<Fp8Gemm>(stream_, *ffn_);
    MOEPLAN_CUDA_CHECK(cudaEventCreate(&kernels_start_));
    MOEPLAN_CUDA_CHECK(cudaEventCreate(&kernels_stop_));
  }
  ~CudaBackend() override {
    fp8_.reset();
    ffn_.reset();
    if (kernels_start_ != nullptr) cudaEventDestroy(kernels_start_);
    if (kernels_stop_ != nullptr) cudaEventDestroy(kernels_stop_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }

  std::string device_name() const override {
    cudaDeviceProp prop{};
    MOEPLAN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    return prop.name;
  }

  std::optional<double> device_seconds() const override { return device_seconds_; }

  Status can_implement(const OpQuery& q) const override {
    if (q.op == BackendOp::kGemmFp8Block) {
      if (q.dtype == DType::kFp8) return Status::Ok();  // fp8_gemm.hpp: cuBLASLt or emulated
      return Error{"cuda backend: gemm_fp8 takes fp8 weights"};
    }
    // Storage in fp32, bf16 or fp16; the router works on fp32 logits.
    if (q.dtype == DType::kFp8 && q.op != BackendOp::kRoute && q.op != BackendOp::kPermute) {
      return Error{"cuda backend: fp8 is not a storage dtype of these ops (fp32, bf16, fp16)"};
    }
    return Status::Ok();
  }

  Fp8Gemm::Calls fp8_calls() const { return fp8_->calls(); }

  Fallbacks fallbacks() const override { return fallbacks_; }

  // cuBLASLt's fp8 matmul on the tensor cores: products exact, sums of about 14 bits
  // (DeepSeek-V3's report measured H800's accumulator; unit 2^-13 covers truncation), promoted
  // to fp32 with the scales every 128 values of K when both operands carry 1 × 128 / 128 × 128
  // scales; with channel or tensor scales the promotion interval is cuBLASLt's own: assume
  // none. The emulated path (fp32 throughout) is within the same bound.
  Fp8Accumulation fp8_accumulation(const Fp8Act& act, int block_rows,
                                   int block_cols) const override {
    const bool blocks = block_rows == 128 && block_cols == 128 &&
                        act.kind == Fp8Act::Kind::kGroups && act.group == 128;
    return {std::ldexp(1.0, -13), blocks ? 128 : 0};
  }

  void gemm_fp8(const OpContext&, std::span<const float> a, int m, int k, const Fp8Act& act,
                std::span<const Fp8Part> parts, std::span<float> c) override {
    enter();
    if (m == 0) return;
    int n = 0;
    for (const Fp8Part& p : parts) n += p.cols;
    fp8_->reset();
    const float* da = upload(a_, a.first(uz(m) * uz(k)));
    std::vector<Fp8Weight> w;
    w.reserve(parts.size());
    for (const Fp8Part& p : parts) w.push_back(fp8_->prepare(p, k));
    float* dc = b_.reserve_as<float>(uz(m) * uz(n));
    fp8_->reserve(m, k);
    // Timed from the quantization of the input (the CPU's gemm_fp8 quantizes a copy too).
    const std::uint64_t emulated = fp8_->calls().emulated;
    begin_kernels();
    const Fp8DeviceAct q = fp8_->quantize(da, m, k, act);
    int col = 0;
    for (const Fp8Weight& part : w) {
      fp8_->run(q, part, dc, n, col);
      col += part.cols;
    }
    end_kernels();
    note_fp8_fallback(emulated);
    download(dc, c.first(uz(m) * uz(n)));
  }

  void gemm(const OpContext&, std::span<const float> a, int m, int k, std::span<const float> b,
            int n, DType dtype, DType out_dtype, std::span<float> c) override {
    enter();
    if (m == 0) return;
    const std::size_t es = dtype_size(dtype);
    void* da = a_.reserve(uz(m) * uz(k) * es);
    to_storage(a.first(uz(m) * uz(k)), dtype, da);
    void* db = b_.reserve(uz(k) * uz(n) * es);
    to_storage(b.first(uz(k) * uz(n)), dtype, db);
    const DType stored = out_dtype == DType::kFp32 ? DType::kFp32 : dtype;
    void* dc = c_.reserve(uz(m) * uz(n) * dtype_size(stored));
    begin_kernels();
    ffn_->gemm(dtype, stored, m, n, k, da, db, dc);
    end_kernels();
    float* dout = d_.reserve_as<float>(uz(m) * uz(n));
    launch_from_storage(stored, dc, uz(m) * uz(n), dout, stream_);
    download(dout, c.first(uz(m) * uz(n)));
  }

  void attention(const OpContext&, const AttentionShape& shape, std::span<const float> q,
                 std::span<const float> k, std::span<const float> v, DType dtype,
                 std::span<float> out) override {
    enter();
    require(shape.problem());
    const std::size_t es = dtype_size(dtype);
    const std::size_t nq = shape.q_size(), nk = shape.k_size();
    const std::size_t nv = shape.v_size(), no = shape.out_size();
    void* dq = a_.reserve(nq * es);
    to_storage(q.first(nq), dtype, dq);
    void* dk = b_.reserve(nk * es);
    to_storage(k.first(nk), dtype, dk);
    void* dv = c_.reserve(nv * es);
    to_storage(v.first(nv), dtype, dv);
    void* dout = d_.reserve(no * es);
    begin_kernels();
    launch_attention(dtype, shape.q_rows(), shape.q_len, shape.kv_len, shape.heads, shape.kv_heads,
                     shape.qk_dim, shape.v_dim, shape.scale, dq, dk, dv, dout, stream_);
    end_kernels();
    float* d32 = e_.reserve_as<float>(no);
    launch_from_storage(dtype, dout, no, d32, stream_);
    download(d32, out.first(no));
  }

  void rms_norm(const OpContext&, std::span<const float> x, int rows, int width, int in_ld,
                std::span<const float> weight, float eps, DType dtype,
                std::span<float> out) override {
    enter();
    if (rows == 0) return;
    const std::size_t n = uz(rows) * uz(width);
    const std::size_t n_in = (uz(rows) - 1) * uz(in_ld) + uz(width);
    const std::size_t es = dtype_size(dtype);
    void* dx = a_.reserve(n_in * es);
    to_storage(x.first(n_in), dtype, dx);
    const float* dw = upload(b_, weight.first(uz(width)));
    void* dout = c_.reserve(n * es);
    begin_kernels();
    launch_rms_norm(dtype, dx, rows, width, in_ld, dw, eps, dout, stream_);
    end_kernels();
    float* d32 = d_.reserve_as<float>(n);
    launch_from_storage(dtype, dout, n, d32, stream_);
    download(d32, out.first(n));
  }

  void rope(const OpContext&, std::span<const float> in, int in_ld, int rows, int heads,
            int head_dim, int rot_dim, std::span<const int> positions,
            std::span<const float> cos_sin, DType dtype, std::span<float> out) override {
    enter();
    if (rows == 0) return;
    const std::size_t n_in = (uz(rows) - 1) * uz(in_ld) + uz(heads) * uz(head_dim);
    const std::size_t n_out = uz(rows) * uz(heads) * uz(head_dim);
    const std::size_t es = dtype_size(dtype);
    void* din = a_.reserve(n_in * es);
    to_storage(in.first(n_in), dtype, din);
    const int* dpos = upload(b_, positions.first(uz(rows)));
    const float* dcs = upload(c_, cos_sin);
    void* dout = d_.reserve(n_out * es);
    begin_kernels();
    launch_rope(dtype, din, in_ld, rows, heads, head_dim, rot_dim, dpos, dcs, dout, stream_);
    end_kernels();
    float* d32 = e_.reserve_as<float>(n_out);
    launch_from_storage(dtype, dout, n_out, d32, stream_);
    download(d32, out.first(n_out));
  }

  void silu_mul(const OpContext&, std::span<const float> gate_up, int rows, int width, DType dtype,
                std::span<float> act) override {
    enter();
    if (rows == 0) return;
    const std::size_t n_in = uz(rows) * 2 * uz(width);
    const std::size_t n_out = uz(rows) * uz(width);
    void* dgu = a_.reserve(n_in * dtype_size(dtype));
    to_storage(gate_up.first(n_in), dtype, dgu);
    void* dact = b_.reserve(n_out * dtype_size(dtype));
    begin_kernels();
    launch_silu_mul(dtype, dgu, rows, width, dact, stream_);
    end_kernels();
    float* dout = c_.reserve_as<float>(n_out);
    launch_from_storage(dtype, dact, n_out, dout, stream_);
    download(dout, act.first(n_out));
  }

  void sigmoid_gate(const OpContext&, std::span<const float> x, int num_tokens, int hidden,
                    std::span<const float> gate, std::span<float> out) override {
    enter();
    if (num_tokens == 0) return;
    const std::size_t n = uz(num_tokens) * uz(hidden);
    const float* dx = upload(a_, x.first(n));
    const float* dg = upload(b_, gate.first(uz(hidden)));
    float* dout = c_.reserve_as<float>(n);
    MOEPLAN_CUDA_CHECK(
        cudaMemcpyAsync(dout, out.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream_));
    begin_kernels();
    launch_shared_gate(dx, dg, num_tokens, hidden, dout, stream_);
    end_kernels();
    download(dout, out.first(n));
  }

  void router_logits(const OpContext&, std::span<const float> x, int num_tokens, int hidden,
                     std::span<const float> w, int num_experts, std::span<float> logits) override {
    enter();
    if (num_tokens == 0) return;
    const float* dx = upload(a_, x.first(uz(num_tokens) * uz(hidden)));
    const float* dw = upload(b_, w.first(uz(hidden) * uz(num_experts)));
    float* dl = c_.reserve_as<float>(uz(num_tokens) * uz(num_experts));
    begin_kernels();
    ffn_->gemm(DType::kFp32, DType::kFp32, num_tokens, num_experts, hidden, dx, dw, dl);
    end_kernels();
    download(dl, logits.first(uz(num_tokens) * uz(num_experts)));
  }

  void route(const OpContext&, const models::RouterSpec& router, std::span<const float> logits,
             std::span<const float> score_bias, int num_tokens, int num_experts, int top_k,
             std::span<int> ids, std::span<float> weights) override {
    enter();
    const RouterParams p = router_params(router, top_k, !score_bias.empty());
    require(check_route_args(p, num_tokens, num_experts, top_k));
    if (num_tokens == 0) return;
    const float* dl = upload(a_, logits.first(uz(num_tokens) * uz(num_experts)));
    const float* db = p.biased ? upload(b_, score_bias.first(uz(num_experts))) : nullptr;
    int* did = c_.reserve_as<int>(uz(num_tokens) * uz(top_k));
    float* dw = d_.reserve_as<float>(uz(num_tokens) * uz(top_k));
    begin_kernels();
    launch_route(p, dl, db, num_tokens, num_experts, top_k, did, dw, stream_);
    end_kernels();
    download(did, ids.first(uz(num_tokens) * uz(top_k)), false);
    download(dw, weights.first(uz(num_tokens) * uz(top_k)));
  }

  Permutation permute(const OpContext&, std::span<const int> pair_experts, int first_expert,
                      int num_local) override {
    enter();
    const int n = static_cast<int>(pair_experts.size());
    require(check_permute_args(n, first_expert, num_local));
    const int* de = upload(a_, pair_experts);
    int* offsets = b_.reserve_as<int>(uz(num_local) + 1);
    int* order = c_.reserve_as<int>(std::max<std::size_t>(pair_experts.size(), 1));
    int* pair_row = d_.reserve_as<int>(std::max<std::size_t>(pair_experts.size(), 1));
    void* scratch = e_.reserve(permute_scratch_bytes(n, num_local));
    begin_kernels();
    launch_permute(de, n, first_expert, num_local, offsets, order, pair_row, scratch, stream_);
    end_kernels();
    Permutation p;
    p.offsets.resize(uz(num_local) + 1);
    download(offsets, std::span<int>(p.offsets));
    p.order.resize(uz(p.offsets.back()));
    download(order, std::span<int>(p.order));
    return p;
  }

  void expert_ffn(const OpContext&, std::span<const float> rows, std::span<const int> offsets,
                  std::span<const ExpertWeights> experts, int hidden, DType dtype,
                  std::span<float> out) override {
    enter();
    const int num_experts = static_cast<int>(experts.size());
    if (offsets.size() != experts.size() + 1) {
      require("expert_ffn: offsets has " + std::to_string(offsets.size()) +
              " entries, expected num_experts + 1 = " + std::to_string(experts.size() + 1));
    }
    if (num_experts == 0 || offsets[experts.size()] == 0) return;
    std::vector<int> widths(experts.size());
    for (std::size_t e = 0; e < experts.size(); ++e) widths[e] = experts[e].width;
    require(check_ffn_args(offsets.data(), num_experts, hidden, widths.data(), rows.size(),
                           out.size()));
    const int width = widths[0];
    const int total = offsets[experts.size()];
    if (!experts[0].fp8.empty()) {
      fp8_experts(rows, offsets, experts, hidden, dtype, out);
      return;
    }
    const std::size_t es = dtype_size(dtype);
    const std::size_t n_rows = uz(total) * uz(hidden);
    const std::size_t gu_elems = uz(hidden) * 2 * uz(width);
    const std::size_t dn_elems = uz(width) * uz(hidden);

    // Weights in the storage dtype, expert after expert (values are representable: exact).
    char* wbuf = static_cast<char*>(weights_.reserve((gu_elems + dn_elems) * es * experts.size()));
    std::vector<DeviceExpert> dev(experts.size());
    for (std::size_t e = 0; e < experts.size(); ++e) {
      char* gu = wbuf + (gu_elems + dn_elems) * es * e;
      char* dn = gu + gu_elems * es;
      to_storage(std::span<const float>(experts[e].gate_up).first(gu_elems), dtype, gu);
      to_storage(std::span<const float>(experts[e].down).first(dn_elems), dtype, dn);
      dev[e] = {gu, dn};
    }
    void* drows = a_.reserve(n_rows * es);
    to_storage(rows.first(n_rows), dtype, drows);
    FfnArgs args;
    args.dtype = dtype;
    args.hidden = hidden;
    args.width = width;
    args.num_experts = num_experts;
    args.offsets = offsets.data();
    args.experts = dev.data();
    args.rows = drows;
    args.gate_up = b_.reserve(uz(total) * 2 * uz(width) * es);
    args.act = c_.reserve(uz(total) * uz(width) * es);
    args.out = d_.reserve(n_rows * es);
    FfnAlgo algo = FfnAlgo::kGrouped;
    if (choice_ == FfnChoice::kLtLoop) algo = FfnAlgo::kLtLoop;
    if (choice_ == FfnChoice::kAuto) algo = ffn_->pick(args);
    begin_kernels();
    ffn_->run(algo, args);
    end_kernels();
    float* dout = e_.reserve_as<float>(n_rows);
    launch_from_storage(dtype, args.out, n_rows, dout, stream_);
    download(dout, out.first(n_rows));
  }

  void combine(const OpContext&, std::span<const float> y, std::span<const int> pair_row,
               std::span<const float> weights, std::span<const float> shared, int num_tokens,
               int top_k, int hidden, DType dtype, std::span<float> out) override {
    enter();
    if (num_tokens == 0) return;
    const std::size_t pairs = uz(num_tokens) * uz(top_k);
    const std::size_t n_out = uz(num_tokens) * uz(hidden);
    const float* dy = upload(a_, y);
    const int* dr = upload(b_, pair_row.first(pairs));
    const float* dw = upload(c_, weights.first(pairs));
    const float* ds = shared.empty() ? nullptr : upload(d_, shared.first(n_out));
    float* dout = e_.reserve_as<float>(n_out);
    begin_kernels();
    launch_combine(dtype, true, dy, dr, dw, ds, num_tokens, top_k, hidden, true, dout, stream_);
    end_kernels();
    download(dout, out.first(n_out));
  }

  void shared_expert(const OpContext&, std::span<const float> x, int num_tokens, int hidden,
                     const ExpertWeights& w, std::span<const float> gate, DType dtype,
                     std::span<float> out) override {
    enter();
    if (num_tokens == 0) return;
    if (!w.fp8.empty()) {
      const int offsets[] = {0, num_tokens};
      fp8_experts(x, offsets, std::span(&w, 1), hidden, dtype, out);
      if (!gate.empty()) sigmoid_gate(OpContext{}, x, num_tokens, hidden, gate, out);
      return;
    }
    const std::size_t es = dtype_size(dtype);
    const int width = w.width;
    const std::size_t n_x = uz(num_tokens) * uz(hidden);
    const std::size_t gu_elems = uz(hidden) * 2 * uz(width);
    const std::size_t dn_elems = uz(width) * uz(hidden);
    char* wbuf = static_cast<char*>(weights_.reserve((gu_elems + dn_elems) * es));
    to_storage(std::span<const float>(w.gate_up).first(gu_elems), dtype, wbuf);
    to_storage(std::span<const float>(w.down).first(dn_elems), dtype, wbuf + gu_elems * es);
    const float* dx32 = upload(f_, x.first(n_x));
    void* dx = a_.reserve(n_x * es);
    launch_to_storage(dtype, dx32, n_x, dx, stream_);
    void* gu = b_.reserve(uz(num_tokens) * 2 * uz(width) * es);
    void* act = c_.reserve(uz(num_tokens) * uz(width) * es);
    float* y = d_.reserve_as<float>(n_x);
    const float* dg = gate.empty() ? nullptr : upload(e_, gate.first(uz(hidden)));
    // Gate and up stored in the dtype, the activation in the dtype, the down projection in fp32
    // (the CPU backend's stores exactly); the caller rounds after the TP sum. Timed from the
    // first GEMM: x arrives in fp32 here but is already in the dtype in a model's layer.
    begin_kernels();
    ffn_->gemm(dtype, dtype, num_tokens, 2 * width, hidden, dx, wbuf, gu);
    launch_silu_mul(dtype, gu, num_tokens, width, act, stream_);
    ffn_->gemm(dtype, DType::kFp32, num_tokens, hidden, width, act, wbuf + gu_elems * es, y);
    if (dg != nullptr) launch_shared_gate(dx32, dg, num_tokens, hidden, y, stream_);
    end_kernels();
    download(y, out.first(n_x));
  }

 private:
  void enter() { MOEPLAN_CUDA_CHECK(cudaSetDevice(device_)); }

  // After an op's fp8 GEMMs: a fallback when any of them ran emulated since `before`.
  void note_fp8_fallback(std::uint64_t before) {
    const Fp8Gemm::Calls c = fp8_->calls();
    if (c.emulated == before) return;
    ++fallbacks_.count;
    fallbacks_.last =
        "fp8 GEMM emulated in fp32: cuBLASLt has no fp8 algorithm for this format or shape" +
        (c.refusal.empty() ? std::string() : " (" + c.refusal + ")") +
        " — not the fp8 kernel's time";
  }

  // The fp8 expert MLP (the CPU backend's mlp_fp8): per expert, its rows quantized as the
  // format says, gate/up through the fp8 GEMM (fp32 out), SiLU·mul in `dtype`, the activation
  // quantized, down through the fp8 GEMM; out [total][H] fp32, unrounded. The weights are
  // uploaded and laid out before the timed region, as a deployment holds them on the device.
  void fp8_experts(std::span<const float> rows, std::span<const int> offsets,
                   std::span<const ExpertWeights> experts, int hidden, DType dtype,
                   std::span<float> out) {
    const int total = offsets[experts.size()];
    const int width = experts[0].width;
    const std::size_t n_rows = uz(total) * uz(hidden);
    fp8_->reset();
    std::vector<Fp8Expert> w(experts.size());
    for (std::size_t e = 0; e < experts.size(); ++e) {
      if (offsets[e + 1] == offsets[e]) continue;
      if (experts[e].fp8.empty() || experts[e].width != width) {
        require("expert_ffn: every expert needs the fp8 form and the same width");
      }
      const Fp8ExpertWeights& f = experts[e].fp8.front();
      w[e].gate = fp8_->prepare({f.gate_up.data(), 2 * width, 0, width, f.gate_scales.data(),
                                 f.gate_up_block_rows, f.gate_up_block_cols},
                                hidden);
      w[e].up = fp8_->prepare({f.gate_up.data(), 2 * width, width, width, f.up_scales.data(),
                               f.gate_up_block_rows, f.gate_up_block_cols},
                              hidden);
      w[e].down = fp8_->prepare({f.down.data(), hidden, 0, hidden, f.down_scales.data(),
                                 f.down_block_rows, f.down_block_cols},
                                width);
      w[e].input_act = f.input_act();
      w[e].mid_act = f.mid_act();
    }
    const float* dx = upload(a_, rows.first(n_rows));
    float* dout = b_.reserve_as<float>(n_rows);
    Fp8MlpBuffers buf;
    buf.gate_up = c_.reserve_as<float>(uz(total) * 2 * uz(width));
    buf.gate_up_stored = d_.reserve(uz(total) * 2 * uz(width) * dtype_size(dtype));
    buf.act_stored = e_.reserve(uz(total) * uz(width) * dtype_size(dtype));
    buf.act = f_.reserve_as<float>(uz(total) * uz(width));
    fp8_->reserve_for(offsets, std::max(hidden, width));
    const std::uint64_t emulated = fp8_->calls().emulated;
    begin_kernels();
    fp8_->mlp(offsets, w, hidden, width, dtype, dx, dout, buf);
    end_kernels();
    note_fp8_fallback(emulated);
    download(dout, out.first(n_rows));
  }

  // Kernel-only time (what the profiler records): events around an op's device work, after its
  // uploads and storage conversions and before its conversion back and download; summed into
  // device_seconds. end_kernels waits for the stop event (the download waits anyway).
  void begin_kernels() { MOEPLAN_CUDA_CHECK(cudaEventRecord(kernels_start_, stream_)); }
  void end_kernels() {
    MOEPLAN_CUDA_CHECK(cudaEventRecord(kernels_stop_, stream_));
    MOEPLAN_CUDA_CHECK(cudaEventSynchronize(kernels_stop_));
    float ms = 0.0F;
    MOEPLAN_CUDA_CHECK(cudaEventElapsedTime(&ms, kernels_start_, kernels_stop_));
    device_seconds_ += static_cast<double>(ms) * 1e-3;
  }

  template <class T>
  const T* upload(DeviceBuffer& buf, std::span<const T> host) {
    T* dev = buf.reserve_as<T>(host.size());
    if (!host.empty()) {
      MOEPLAN_CUDA_CHECK(
          cudaMemcpyAsync(dev, host.data(), host.size_bytes(), cudaMemcpyHostToDevice, stream_));
    }
    return dev;
  }

  // Copies back and (unless `sync` is false: a later download syncs) waits for the stream.
  template <class T>
  void download(const T* dev, std::span<T> host, bool sync = true) {
    if (!host.empty()) {
      MOEPLAN_CUDA_CHECK(
          cudaMemcpyAsync(host.data(), dev, host.size_bytes(), cudaMemcpyDeviceToHost, stream_));
    }
    if (sync) MOEPLAN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // fp32 host values → `dtype` storage at `dst`, through the staging buffer.
  void to_storage(std::span<const float> host, DType dtype, void* dst) {
    if (dtype == DType::kFp32) {
      MOEPLAN_CUDA_CHECK(
          cudaMemcpyAsync(dst, host.data(), host.size_bytes(), cudaMemcpyHostToDevice, stream_));
      return;
    }
    // NOTE: the staging buffer is reused by the next conversion, so wait for this one first.
    const float* staged = upload(staging_, host);
    launch_to_storage(dtype, staged, host.size(), dst, stream_);
    MOEPLAN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  int device_;
  FfnChoice choice_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<ExpertFfn> ffn_;
  std::unique_ptr<Fp8Gemm> fp8_;
  DeviceBuffer a_, b_, c_, d_, e_, f_, staging_, weights_;
  cudaEvent_t kernels_start_ = nullptr;
  cudaEvent_t kernels_stop_ = nullptr;
  double device_seconds_ = 0.0;
  Fallbacks fallbacks_;
};

}  // namespace

std::string cuda_unusable_reason(int device) {
  const CudaProbe p = probe_cuda();
  if (!p.error.empty() && !p.kernel_ran) return p.error;
  if (device < 0 || device >= static_cast<int>(p.devices.size())) {
    return "CUDA device " + std::to_string(device) + " does not exist (" +
           std::to_string(p.devices.size()) + " device(s))";
  }
  return {};
}

std::optional<Fp8PathCounts> fp8_path_counts(const Backend& backend) {
  const auto* cuda = dynamic_cast<const CudaBackend*>(&backend);
  if (cuda == nullptr) return std::nullopt;
  const Fp8Gemm::Calls c = cuda->fp8_calls();
  return Fp8PathCounts{c.cublaslt, c.emulated, c.refusal};
}

Result<std::unique_ptr<Backend>> make_cuda_backend(int device, FfnChoice ffn) {
  const std::string why = cuda_unusable_reason(device);
  if (!why.empty()) return input_error("backend", " cuda: no usable CUDA device: " + why);
  try {
    return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(device, ffn));
  } catch (const std::exception& e) {
    return input_error("backend", std::string(" cuda: ") + e.what());
  }
}

}  // namespace moeplan::kernels::cuda
