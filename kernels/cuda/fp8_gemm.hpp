// The fp8 scaled GEMM on the device: activations quantized to e4m3 on the fly (1 × group,
// per token or static, kernels/fp8.hpp's Fp8Act), weights in e4m3 with block, channel or tensor
// scales (kernels/backend.hpp's Fp8Part), through cuBLASLt's fp8 matmul with the matching scale
// modes (weights BLK128x128 / OUTER_VEC / SCALAR, activations VEC128 / OUTER_VEC / SCALAR; sm_90
// and later). A format or shape cuBLASLt has no algorithm for is computed by emulation instead —
// both operands decoded to fp32 and an fp32 GEMM, the CPU backend's arithmetic — and counted as
// such (Fp8Gemm::calls), never silently mistaken for the fp8 tensor-core path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "kernels/backend.hpp"
#include "kernels/fp8.hpp"

namespace moeplan::kernels::cuda {

class ExpertFfn;

enum class Fp8Path : std::uint8_t {
  kCublasLt,  ///< cuBLASLt fp8 matmul with scale modes (fp8 tensor cores)
  kEmulated,  ///< decoded to fp32, fp32 GEMM
};

/// One weight part [k][cols] on the device, ready for run(): its codes and row-major block
/// scales as given, and, where the format has a cuBLASLt scale mode, the codes K-major
/// ([cols][k], as cuBLASLt's fp8 matmul reads its A operand transposed) and the scales in that
/// mode's layout.
struct Fp8Weight {
  const std::uint8_t* codes = nullptr;  ///< [k][cols]
  const float* scales = nullptr;        ///< row-major by block, as Fp8Part
  int k = 0;
  int cols = 0;
  int block_rows = 0;
  int block_cols = 0;
  int lt_mode = -1;                      ///< cublasLtMatmulMatrixScale_t, or −1: emulated only
  const std::uint8_t* kmajor = nullptr;  ///< [cols][k] where lt_mode ≥ 0
  const float* lt_scales = nullptr;      ///< lt_mode's layout
};

/// An activation [m][k] quantized on the device: codes [m][k] and scales (group > 0: one per
/// 1 × group of a row, scales[g · m + r]; group = 0: the static scale, one value).
struct Fp8DeviceAct {
  const std::uint8_t* codes = nullptr;
  const float* scales = nullptr;
  int m = 0;
  int k = 0;
  int group = 0;
  float static_scale = 0.0F;
};

/// One expert's fp8 weights on the device and how its two GEMMs quantize their inputs.
struct Fp8Expert {
  Fp8Weight gate, up, down;
  Fp8Act input_act;
  Fp8Act mid_act;
};

/// mlp()'s device scratch for `rows` rows: gate/up [rows][2w] in fp32 and in the dtype, the
/// activation [rows][w] in the dtype and in fp32.
struct Fp8MlpBuffers {
  float* gate_up = nullptr;
  void* gate_up_stored = nullptr;
  void* act_stored = nullptr;
  float* act = nullptr;
};

class Fp8Gemm {
 public:
  /// `fp32` runs the emulated path's GEMMs; both enqueue on `stream`.
  Fp8Gemm(cudaStream_t stream, ExpertFfn& fp32);
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  /// Starts a new call: the buffers of earlier prepare() and quantize() results are reused.
  void reset();
  /// Uploads the part (its codes from host memory, k rows) and lays it out for run().
  Fp8Weight prepare(const Fp8Part& part, int k);
  /// The same for codes already on the device ([k][cols], row-major), scales on the host.
  Fp8Weight prepare_device(const std::uint8_t* codes, int k, int cols, int block_rows,
                           int block_cols, const float* host_scales);
  /// Grows quantize()'s buffers for up to m × k values in groups of 16 or more beforehand, so
  /// that no allocation (which synchronizes the device) falls inside a timed region.
  void reserve(int m, int k);
  /// The same for mlp() over rows grouped by `offsets` (the largest group) and widths up to k.
  void reserve_for(std::span<const int> offsets, int k);
  /// Quantizes x (device fp32 [m][k]) to e4m3 as `act` says (the CPU's arithmetic, bit for bit).
  Fp8DeviceAct quantize(const float* x, int m, int k, const Fp8Act& act);
  /// c[r][c_col + j] (device fp32, row stride ldc) = Σ_i deq(a)[r][i] · deq(w)[i][j], fp32
  /// accumulation of the scaled block products, unrounded.
  Fp8Path run(const Fp8DeviceAct& a, const Fp8Weight& w, float* c, int ldc, int c_col);
  /// The fp8 expert MLP (the CPU backend's mlp_fp8) over device rows [total][H] grouped by
  /// `offsets` (host, experts + 1): per expert its rows quantized, gate and up (fp32 out),
  /// SiLU·mul in `dtype`, the activation quantized, down; out [total][H] fp32, unrounded.
  void mlp(std::span<const int> offsets, std::span<const Fp8Expert> experts, int hidden, int width,
           DType dtype, const float* rows, float* out, const Fp8MlpBuffers& buf);

  /// Calls run so far by path.
  struct Calls {
    std::uint64_t cublaslt = 0;
    std::uint64_t emulated = 0;
    std::string refusal;  ///< the last matmul cuBLASLt refused after its heuristic offered it
  };
  Calls calls() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moeplan::kernels::cuda
