// fp8 e4m3 quantization, decoding and transposition on the device. The arithmetic is the CPU's
// (kernels/fp8.cpp): an exact maximum, one IEEE fp32 division for the scale and one per value
// (nvcc's default -prec-div=true), and the cast with round-to-nearest-even and saturation to
// ±448 (__NV_SATFINITE), so the codes and scales are bit-identical to quantize_blocks's.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/fp8_kernels.hpp"
#include "kernels/cuda/launch_params.hpp"

namespace moeplan::kernels::cuda {

namespace {

constexpr int kQuantThreads = 128;
constexpr int kTile = 32;
constexpr int kTileRows = 8;
constexpr float kE4m3MaxDevice = 448.0F;

__device__ __forceinline__ std::uint8_t to_e4m3(float v) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// Exact: every e4m3 value is a half.
__device__ __forceinline__ float from_e4m3(std::uint8_t code) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3)));
}

// One block per (row, group): the group's amax, its scale, its codes.
__global__ void quantize_groups_kernel(const float* __restrict__ x, int rows, int k, int group,
                                       std::uint8_t* __restrict__ codes,
                                       float* __restrict__ scales) {
  const int r = static_cast<int>(blockIdx.x);
  const int g = static_cast<int>(blockIdx.y);
  const int c0 = g * group;
  const int c1 = min(k, c0 + group);
  const float* xr = x + static_cast<std::size_t>(r) * static_cast<std::size_t>(k);
  float amax = 0.0F;
  for (int c = c0 + static_cast<int>(threadIdx.x); c < c1; c += blockDim.x) {
    amax = fmaxf(amax, fabsf(xr[c]));
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffU, amax, off));
  __shared__ float warp_amax[kQuantThreads / kWarpSize];
  if ((threadIdx.x % kWarpSize) == 0) warp_amax[threadIdx.x / kWarpSize] = amax;
  __syncthreads();
  float m = 0.0F;
#pragma unroll
  for (int w = 0; w < kQuantThreads / kWarpSize; ++w) m = fmaxf(m, warp_amax[w]);
  const float scale = m > 0.0F ? m / kE4m3MaxDevice : 1.0F;
  if (threadIdx.x == 0) scales[static_cast<std::size_t>(g) * rows + r] = scale;
  std::uint8_t* out = codes + static_cast<std::size_t>(r) * static_cast<std::size_t>(k);
  for (int c = c0 + static_cast<int>(threadIdx.x); c < c1; c += blockDim.x) {
    out[c] = to_e4m3(xr[c] / scale);
  }
}

__global__ void quantize_static_kernel(const float* __restrict__ x, std::size_t n, float scale,
                                       std::uint8_t* __restrict__ codes) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    codes[i] = to_e4m3(x[i] / scale);
  }
}

__global__ void dequantize_rows_kernel(const std::uint8_t* __restrict__ codes,
                                       const float* __restrict__ scales, int rows, int k, int group,
                                       float static_scale, float* __restrict__ out) {
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(k);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const auto r = static_cast<int>(i / static_cast<std::size_t>(k));
    const auto c = static_cast<int>(i % static_cast<std::size_t>(k));
    const float s =
        group > 0 ? scales[static_cast<std::size_t>(c / group) * rows + r] : static_scale;
    out[i] = from_e4m3(codes[i]) * s;
  }
}

__global__ void transpose_kernel(const std::uint8_t* __restrict__ in, int ld, int c0, int k,
                                 int cols, std::uint8_t* __restrict__ out) {
  __shared__ std::uint8_t tile[kTile][kTile + 1];
  const int col0 = static_cast<int>(blockIdx.x) * kTile;
  const int row0 = static_cast<int>(blockIdx.y) * kTile;
  const int tx = static_cast<int>(threadIdx.x);
  for (int j = static_cast<int>(threadIdx.y); j < kTile; j += kTileRows) {
    const int r = row0 + j;
    const int c = col0 + tx;
    if (r < k && c < cols) {
      tile[j][tx] = in[static_cast<std::size_t>(r) * static_cast<std::size_t>(ld) +
                       static_cast<std::size_t>(c0 + c)];
    }
  }
  __syncthreads();
  for (int j = static_cast<int>(threadIdx.y); j < kTile; j += kTileRows) {
    const int c = col0 + j;
    const int r = row0 + tx;
    if (r < k && c < cols) {
      out[static_cast<std::size_t>(c) * static_cast<std::size_t>(k) + r] = tile[tx][j];
    }
  }
}

__global__ void dequantize_part_kernel(const std::uint8_t* __restrict__ codes, int ld, int c0,
                                       int k, int cols, int block_rows, int block_cols,
                                       const float* __restrict__ scales, float* __restrict__ out) {
  const std::size_t n = static_cast<std::size_t>(k) * static_cast<std::size_t>(cols);
  const int scale_ld = (cols + block_cols - 1) / block_cols;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const auto r = static_cast<int>(i / static_cast<std::size_t>(cols));
    const auto c = static_cast<int>(i % static_cast<std::size_t>(cols));
    const float s = scales[static_cast<std::size_t>(r / block_rows) * scale_ld + c / block_cols];
    out[i] = from_e4m3(codes[static_cast<std::size_t>(r) * static_cast<std::size_t>(ld) +
                             static_cast<std::size_t>(c0 + c)]) *
             s;
  }
}

}  // namespace

void launch_quantize_e4m3(const float* x, int rows, int k, int group, float static_scale,
                          std::uint8_t* codes, float* scales, cudaStream_t stream) {
  if (rows <= 0 || k <= 0) return;
  if (group > 0) {
    const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>((k + group - 1) / group));
    quantize_groups_kernel<<<grid, kQuantThreads, 0, stream>>>(x, rows, k, group, codes, scales);
  } else {
    const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(k);
    const LaunchDims d = elementwise_launch(n);
    quantize_static_kernel<<<d.grid, d.block, 0, stream>>>(x, n, static_scale, codes);
  }
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

void launch_dequantize_e4m3(const std::uint8_t* codes, const float* scales, int rows, int k,
                            int group, float static_scale, float* out, cudaStream_t stream) {
  if (rows <= 0 || k <= 0) return;
  const LaunchDims d = elementwise_launch(static_cast<std::size_t>(rows) * k);
  dequantize_rows_kernel<<<d.grid, d.block, 0, stream>>>(codes, scales, rows, k, group,
                                                         static_scale, out);
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

void launch_transpose_e4m3(const std::uint8_t* codes, int ld, int c0, int k, int cols,
                           std::uint8_t* out, cudaStream_t stream) {
  if (k <= 0 || cols <= 0) return;
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                  static_cast<unsigned>((k + kTile - 1) / kTile));
  const dim3 block(kTile, kTileRows);
  transpose_kernel<<<grid, block, 0, stream>>>(codes, ld, c0, k, cols, out);
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

void launch_dequantize_e4m3_part(const std::uint8_t* codes, int ld, int c0, int k, int cols,
                                 int block_rows, int block_cols, const float* scales, float* out,
                                 cudaStream_t stream) {
  if (k <= 0 || cols <= 0) return;
  const LaunchDims d = elementwise_launch(static_cast<std::size_t>(k) * cols);
  dequantize_part_kernel<<<d.grid, d.block, 0, stream>>>(codes, ld, c0, k, cols, block_rows,
                                                         block_cols, scales, out);
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moeplan::kernels::cuda
