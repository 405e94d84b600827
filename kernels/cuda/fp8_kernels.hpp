// Device-pointer launchers of the fp8 e4m3 kernels the scaled GEMMs need: dynamic activation
// quantization (kernels/fp8.hpp's arithmetic exactly: scale = amax / 448, code = e4m3(v / scale)
// rounded to nearest even and saturating), decoding, and the weight transpose that makes a
// [k][cols] part K-major for cuBLASLt's fp8 matmul.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace moeplan::kernels::cuda {

/// Quantizes x [rows][k] (fp32) to e4m3 codes [rows][k]. With `group` > 0 each row is cut into
/// 1 × group groups (group = k: one scale per row) and scale of group g of row r is written to
/// scales[g · rows + r] (outer-dimension major, as cuBLASLt's VEC128 and OUTER_VEC scales are
/// laid out); with `group` = 0 every value uses `static_scale` and nothing is written to scales.
void launch_quantize_e4m3(const float* x, int rows, int k, int group, float static_scale,
                          std::uint8_t* codes, float* scales, cudaStream_t stream);

/// The inverse: out[r][c] = e4m3(codes[r][c]) · its scale (launch_quantize_e4m3's layout).
void launch_dequantize_e4m3(const std::uint8_t* codes, const float* scales, int rows, int k,
                            int group, float static_scale, float* out, cudaStream_t stream);

/// The [k × cols] part at column c0 of codes (row stride ld) transposed: out[c][r] (K-major).
void launch_transpose_e4m3(const std::uint8_t* codes, int ld, int c0, int k, int cols,
                           std::uint8_t* out, cudaStream_t stream);

/// The same part decoded: out[r][c] (row stride cols) = e4m3(codes) · the scale of its
/// [block_rows × block_cols] block, scales row-major by block over the part.
void launch_dequantize_e4m3_part(const std::uint8_t* codes, int ld, int c0, int k, int cols,
                                 int block_rows, int block_cols, const float* scales, float* out,
                                 cudaStream_t stream);

}  // namespace moeplan::kernels::cuda
