// How the fp8 GEMM hands its operands' scales to cuBLASLt (kernels/cuda/fp8_gemm.cpp): which
// scale mode fits a weight part's blocks and an activation's quantization, and the 128×128
// block scales rearranged into cuBLASLt's layout. Host code, tested on every machine.
//
// Layouts (cuBLAS's "scaling factors layout"; PyTorch's _scaled_mm checks the same strides):
// VEC128 — one fp32 per 128 values along K, the outer dimension fastest (scale[kb · outer + o]);
// BLK128x128 — one per 128 × 128 block, K-blocks fastest with their count padded to a multiple
// of 4 (scale[kb + ob · round_up(⌈K/128⌉, 4)]); OUTER_VEC — one per row of the outer dimension;
// SCALAR — one value.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <vector>

namespace moeplan::kernels::cuda {

inline constexpr int kFp8ScaleBlock = 128;

/// The cuBLASLt scale mode of a weight part [k][cols] whose scales cover [block_rows ×
/// block_cols] blocks (inputs × outputs): BLK128x128 for 128 × 128 blocks, OUTER_VEC for one
/// scale per output channel (block_rows ≥ k, block_cols 1), SCALAR for one per part; −1 for
/// other blocks, or where K or cols is not a multiple of 16 (cuBLASLt's fp8 operands are
/// 16-byte aligned along K, and its output rows too).
inline int fp8_weight_scale_mode(int k, int cols, int block_rows, int block_cols) {
  if (k % 16 != 0 || cols % 16 != 0) return -1;
  if (block_rows == kFp8ScaleBlock && block_cols == kFp8ScaleBlock) {
    return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  }
  if (block_rows >= k && block_cols == 1) return CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  if (block_rows >= k && block_cols >= cols) return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  return -1;
}

/// The mode of an activation [m][k] quantized in 1 × group groups (group ≥ k: one scale per
/// row; 0: one static scale): VEC128, OUTER_VEC or SCALAR; −1 for other groups.
inline int fp8_act_scale_mode(int k, int group) {
  if (group == 0) return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  if (group >= k) return CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  if (group == kFp8ScaleBlock) return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  return -1;
}

/// A part's 128 × 128 block scales, row-major [⌈k/128⌉][⌈cols/128⌉] (as the checkpoint and
/// Fp8Part keep them), in BLK128x128's layout for the part read K-major: [⌈cols/128⌉][ld] with
/// ld = ⌈k/128⌉ rounded up to 4, the padding zero.
inline std::vector<float> blk128_scales(const float* scales, int k, int cols) {
  const auto kb = static_cast<std::size_t>((k + kFp8ScaleBlock - 1) / kFp8ScaleBlock);
  const auto cb = static_cast<std::size_t>((cols + kFp8ScaleBlock - 1) / kFp8ScaleBlock);
  const std::size_t ld = (kb + 3) / 4 * 4;
  std::vector<float> out(ld * cb, 0.0F);
  for (std::size_t i = 0; i < kb; ++i) {
    for (std::size_t j = 0; j < cb; ++j) out[j * ld + i] = scales[i * cb + j];
  }
  return out;
}

}  // namespace moeplan::kernels::cuda
