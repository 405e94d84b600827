// The MoE kernels: storage conversion, the fused router, align/permute, row gather, SiLU-and-mul,
// combine and the shared-expert gate. Per-element routing math comes from router_math.hpp, the
// same code the CPU backend runs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <stdexcept>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_params.hpp"
#include "kernels/cuda/moe_kernels.hpp"

namespace moeplan::kernels::cuda {

namespace {

constexpr unsigned kFullMask = 0xffffffffU;

template <class T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>{}) with T the device storage type of `dtype`.
template <class F>
void dispatch_storage(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFp32: f(Tag<float>{}); return;
    case DType::kBf16: f(Tag<__nv_bfloat16>{}); return;
    case DType::kFp16: f(Tag<__half>{}); return;
    case DType::kFp8: break;
  }
  throw std::invalid_argument("CUDA kernels: fp8 is not a storage dtype of the CUDA backend");
}

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }

template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}

// v rounded to the nearest value of storage type T.
template <class T>
__device__ __forceinline__ float round_to_storage(float v) {
  return to_f32(from_f32<T>(v));
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, off));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}

// ---- storage conversion ----------------------------------------------------------------------

template <class T>
__global__ void to_storage_kernel(const float* __restrict__ src, std::size_t n,
                                  T* __restrict__ dst) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    dst[i] = from_f32<T>(src[i]);
  }
}

template <class T>
__global__ void from_storage_kernel(const T* __restrict__ src, std::size_t n,
                                    float* __restrict__ dst) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    dst[i] = to_f32(src[i]);
  }
}

// splitmix64 of (seed, index) → [-scale, scale).
template <class T>
__global__ void fill_uniform_kernel(T* __restrict__ dst, std::size_t n, float scale,
                                    unsigned seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    unsigned long long z = (static_cast<unsigned long long>(seed) << 40) ^ i;
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * (1.0F / 16777216.0F);  // [0, 1)
    dst[i] = from_f32<T>((2.0F * u - 1.0F) * scale);
  }
}

// ---- router ----------------------------------------------------------------------------------

// One warp per token; lane l holds experts l, l + 32, … (kSlots of them) in registers. Grouped
// routers stage the biased scores in shared memory for the per-group scores (one lane per
// group, group_score) and the group pick (lane 0, select_groups).
template <int kSlots>
__global__ void __launch_bounds__(kRouterWarpsPerBlock* kWarpSize)
    route_warp_kernel(RouterParams p, const float* __restrict__ logits,
                      const float* __restrict__ bias, int num_tokens, int num_experts, int top_k,
                      int* __restrict__ ids, float* __restrict__ weights) {
  extern __shared__ float router_shared[];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int row = static_cast<int>(blockIdx.x) * kRouterWarpsPerBlock + warp;
  if (row >= num_tokens) return;  // whole warps leave together; no block barrier follows
  const float* l = logits + static_cast<std::size_t>(row) * static_cast<std::size_t>(num_experts);

  float score[kSlots];
  float choice[kSlots];
#pragma unroll
  for (int i = 0; i < kSlots; ++i) {
    const int e = lane + kWarpSize * i;
    score[i] = e < num_experts ? l[e] : -INFINITY;
  }
  if (p.softmax) {
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < kSlots; ++i) mx = fmaxf(mx, score[i]);
    mx = warp_max(mx);
    float sum = 0.0F;
#pragma unroll
    for (int i = 0; i < kSlots; ++i) {
      score[i] = lane + kWarpSize * i < num_experts ? expf(score[i] - mx) : 0.0F;
      sum += score[i];
    }
    sum = warp_sum(sum);
#pragma unroll
    for (int i = 0; i < kSlots; ++i) score[i] /= sum;
  } else {
#pragma unroll
    for (int i = 0; i < kSlots; ++i) {
      score[i] = lane + kWarpSize * i < num_experts ? sigmoid_score(score[i]) : 0.0F;
    }
  }
#pragma unroll
  for (int i = 0; i < kSlots; ++i) {
    const int e = lane + kWarpSize * i;
    choice[i] = e < num_experts ? score[i] + (p.biased ? bias[e] : 0.0F) : -INFINITY;
  }

  if (p.grouped()) {
    const std::size_t per_warp_floats =
        router_shared_per_warp(num_experts, p.num_groups) / sizeof(float);
    float* c = router_shared + static_cast<std::size_t>(warp) * per_warp_floats;
    float* gs = c + num_experts;
    bool* keep = reinterpret_cast<bool*>(gs + p.num_groups);
#pragma unroll
    for (int i = 0; i < kSlots; ++i) {
      const int e = lane + kWarpSize * i;
      if (e < num_experts) c[e] = choice[i];
    }
    __syncwarp();
    const int per_group = num_experts / p.num_groups;
    for (int g = lane; g < p.num_groups; g += kWarpSize) {
      gs[g] = group_score(c + g * per_group, per_group, p.method);
      keep[g] = false;
    }
    __syncwarp();
    if (lane == 0) select_groups(gs, p.num_groups, p.topk_groups, keep);
    __syncwarp();
#pragma unroll
    for (int i = 0; i < kSlots; ++i) {
      const int e = lane + kWarpSize * i;
      if (e < num_experts && !keep[e / per_group]) choice[i] = -INFINITY;
    }
  }

  unsigned taken = 0;
#pragma unroll
  for (int i = 0; i < kSlots; ++i) {
    if (lane + kWarpSize * i >= num_experts) taken |= 1U << i;
  }
  float sum = 0.0F;
  int my_id = 0;
  float my_score = 0.0F;
  for (int j = 0; j < top_k; ++j) {
    float best = -INFINITY;
    int best_id = INT_MAX;
    float best_score = 0.0F;
#pragma unroll
    for (int i = 0; i < kSlots; ++i) {
      const int e = lane + kWarpSize * i;
      if (((taken >> i) & 1U) == 0 && ranks_before(choice[i], e, best, best_id)) {
        best = choice[i];
        best_id = e;
        best_score = score[i];
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      const float ov = __shfl_xor_sync(kFullMask, best, off);
      const int oi = __shfl_xor_sync(kFullMask, best_id, off);
      const float os = __shfl_xor_sync(kFullMask, best_score, off);
      if (ranks_before(ov, oi, best, best_id)) {
        best = ov;
        best_id = oi;
        best_score = os;
      }
    }
    if (best_id % kWarpSize == lane) taken |= 1U << (best_id / kWarpSize);
    sum += best_score;  // every lane sums in selection order, as route_token_core does
    if (lane == j) {
      my_id = best_id;
      my_score = best_score;
    }
  }
  if (lane < top_k) {
    const std::size_t at = static_cast<std::size_t>(row) * static_cast<std::size_t>(top_k) +
                           static_cast<std::size_t>(lane);
    ids[at] = my_id;
    weights[at] = final_weight(p, my_score, sum);
  }
}

// Fallback above kRouterMaxSlots · 32 experts: one thread per token runs the CPU's code.
__global__ void route_thread_kernel(RouterParams p, const float* __restrict__ logits,
                                    const float* __restrict__ bias, int num_tokens, int num_experts,
                                    int top_k, int* __restrict__ ids, float* __restrict__ weights) {
  const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (row >= num_tokens) return;
  const auto r = static_cast<std::size_t>(row);
  route_token_core(p, logits + r * static_cast<std::size_t>(num_experts), bias, num_experts, top_k,
                   ids + r * static_cast<std::size_t>(top_k),
                   weights + r * static_cast<std::size_t>(top_k));
}

// ---- align / permute ---------------------------------------------------------------------------

__device__ __forceinline__ int local_expert(const int* pair_experts, int i, int num_pairs,
                                            int first_expert, int num_local) {
  if (i >= num_pairs) return -2;
  const int local = pair_experts[i] - first_expert;
  return local >= 0 && local < num_local ? local : -1;
}

// counts[e][b]: pairs of block b routed to local expert e.
__global__ void __launch_bounds__(kPermuteBlock)
    permute_count_kernel(const int* __restrict__ pair_experts, int num_pairs, int first_expert,
                         int num_local, int* __restrict__ counts) {
  extern __shared__ int hist[];
  for (int e = static_cast<int>(threadIdx.x); e < num_local; e += kPermuteBlock) hist[e] = 0;
  __syncthreads();
  const int i = static_cast<int>(blockIdx.x) * kPermuteBlock + static_cast<int>(threadIdx.x);
  const int local = local_expert(pair_experts, i, num_pairs, first_expert, num_local);
  if (local >= 0) atomicAdd(&hist[local], 1);
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < num_local; e += kPermuteBlock) {
    counts[static_cast<std::size_t>(e) * gridDim.x + blockIdx.x] = hist[e];
  }
}

// One block: counts[e][b] → first row of block b's pairs of expert e; offsets = prefix sum of
// the per-expert totals.
__global__ void __launch_bounds__(1024)
    permute_scan_kernel(int* __restrict__ counts, int num_blocks, int num_local,
                        int* __restrict__ offsets) {
  __shared__ int total[kMaxExperts];
  __shared__ int scan[kMaxExperts];
  for (int e = static_cast<int>(threadIdx.x); e < num_local; e += blockDim.x) {
    int* c = counts + static_cast<std::size_t>(e) * static_cast<std::size_t>(num_blocks);
    int run = 0;
    for (int b = 0; b < num_blocks; ++b) {
      const int n = c[b];
      c[b] = run;
      run += n;
    }
    total[e] = run;
    scan[e] = run;
  }
  __syncthreads();
  // Inclusive Hillis–Steele scan over the experts.
  for (int off = 1; off < num_local; off *= 2) {
    int add[kMaxExperts / 1024];
    int n_mine = 0;
    for (int e = static_cast<int>(threadIdx.x); e < num_local; e += blockDim.x) {
      add[n_mine++] = e >= off ? scan[e - off] : 0;
    }
    __syncthreads();
    n_mine = 0;
    for (int e = static_cast<int>(threadIdx.x); e < num_local; e += blockDim.x) {
      scan[e] += add[n_mine++];
    }
    __syncthreads();
  }
  for (int e = static_cast<int>(threadIdx.x); e < num_local; e += blockDim.x) {
    const int first = scan[e] - total[e];
    offsets[e] = first;
    int* c = counts + static_cast<std::size_t>(e) * static_cast<std::size_t>(num_blocks);
    for (int b = 0; b < num_blocks; ++b) c[b] += first;
    if (e == num_local - 1) offsets[num_local] = scan[e];
  }
}

// Stable scatter: a pair's row = its block's base for the expert + the pairs of that expert in
// earlier warps of the block + those in earlier lanes of its warp (__match_any_sync).
__global__ void __launch_bounds__(kPermuteBlock)
    permute_scatter_kernel(const int* __restrict__ pair_experts, int num_pairs, int first_expert,
                           int num_local, const int* __restrict__ bases, int* __restrict__ order,
                           int* __restrict__ pair_row) {
  extern __shared__ int warp_counts[];  // [kPermuteWarps][num_local]
  for (int i = static_cast<int>(threadIdx.x); i < kPermuteWarps * num_local; i += kPermuteBlock) {
    warp_counts[i] = 0;
  }
  __syncthreads();
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int i = static_cast<int>(blockIdx.x) * kPermuteBlock + static_cast<int>(threadIdx.x);
  const int local = local_expert(pair_experts, i, num_pairs, first_expert, num_local);
  const unsigned peers = __match_any_sync(kFullMask, local);
  const unsigned lower = peers & ((1U << lane) - 1U);
  if (local >= 0 && lower == 0) warp_counts[warp * num_local + local] = __popc(peers);
  __syncthreads();
  if (local >= 0) {
    int row = bases[static_cast<std::size_t>(local) * gridDim.x + blockIdx.x] + __popc(lower);
    for (int w = 0; w < warp; ++w) row += warp_counts[w * num_local + local];
    order[row] = i;
    pair_row[i] = row;
  } else if (local == -1) {
    pair_row[i] = -1;
  }
}

// ---- gather, SiLU-and-mul, combine, gate --------------------------------------------------------

template <class V>
__global__ void gather_rows_kernel(const V* __restrict__ x, const int* __restrict__ order,
                                   int num_rows, int top_k, int vecs_per_row,
                                   V* __restrict__ rows) {
  const std::size_t n = static_cast<std::size_t>(num_rows) * static_cast<std::size_t>(vecs_per_row);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::size_t r = i / static_cast<std::size_t>(vecs_per_row);
    const std::size_t c = i % static_cast<std::size_t>(vecs_per_row);
    const auto token = static_cast<std::size_t>(order[r] / top_k);
    rows[i] = x[token * static_cast<std::size_t>(vecs_per_row) + c];
  }
}

// One block per (query row, head): the keys it sees in tiles of kAttnThreads, one thread per key
// for the score; an online softmax (running max and sum in fp32, the probabilities rounded to the
// storage dtype before P·V, as flash kernels feed their second GEMM); each thread accumulates its
// columns of the output in shared memory. A plain kernel, not a flash kernel: what moeplan's own
// layer runs, timed as such.
constexpr int kAttnThreads = 128;

__device__ float attn_block_reduce(float v, bool is_max, float* red) {
  v = is_max ? warp_max(v) : warp_sum(v);
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < kAttnThreads / kWarpSize; ++w) r = is_max ? fmaxf(r, red[w]) : r + red[w];
  __syncthreads();
  return r;
}

template <class T>
__global__ void __launch_bounds__(kAttnThreads)
    attention_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                     int q_len, int kv_len, int heads, int kv_heads, int qk_dim, int v_dim,
                     float scale, T* __restrict__ out) {
  extern __shared__ float smem[];
  float* qs = smem;               // [qk_dim]
  float* ps = qs + qk_dim;        // [kAttnThreads]
  float* os = ps + kAttnThreads;  // [v_dim]
  __shared__ float red[kAttnThreads / kWarpSize];
  const auto row = static_cast<std::size_t>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const auto b = row / static_cast<std::size_t>(q_len);
  const int t = static_cast<int>(row % static_cast<std::size_t>(q_len));
  const int g = h / (heads / kv_heads);
  const int visible = kv_len - q_len + t + 1;
  const int tid = static_cast<int>(threadIdx.x);
  const T* qr = q + (row * static_cast<std::size_t>(heads) + static_cast<std::size_t>(h)) *
                        static_cast<std::size_t>(qk_dim);
  for (int i = tid; i < qk_dim; i += kAttnThreads) qs[i] = to_f32(qr[i]);
  for (int c = tid; c < v_dim; c += kAttnThreads) os[c] = 0.0F;
  __syncthreads();
  const std::size_t seq = b * static_cast<std::size_t>(kv_len);
  float m = -INFINITY, l = 0.0F;
  for (int j0 = 0; j0 < visible; j0 += kAttnThreads) {
    const int j = j0 + tid;
    float sc = -INFINITY;
    if (j < visible) {
      const T* kr = k + ((seq + static_cast<std::size_t>(j)) * static_cast<std::size_t>(kv_heads) +
                         static_cast<std::size_t>(g)) *
                            static_cast<std::size_t>(qk_dim);
      float d = 0.0F;
      for (int i = 0; i < qk_dim; ++i) d = fmaf(qs[i], to_f32(kr[i]), d);
      sc = d * scale;
    }
    const float m_new = fmaxf(m, attn_block_reduce(sc, true, red));
    const float p = j < visible ? expf(sc - m_new) : 0.0F;
    ps[tid] = round_to_storage<T>(p);
    const float tile_sum = attn_block_reduce(p, false, red);  // also orders ps before its reads
    const float corr = expf(m - m_new);
    l = l * corr + tile_sum;
    m = m_new;
    const int n = min(kAttnThreads, visible - j0);
    for (int c = tid; c < v_dim; c += kAttnThreads) {
      float acc = os[c] * corr;
      for (int jj = 0; jj < n; ++jj) {
        const std::size_t at =
            ((seq + static_cast<std::size_t>(j0 + jj)) * static_cast<std::size_t>(kv_heads) +
             static_cast<std::size_t>(g)) *
                static_cast<std::size_t>(v_dim) +
            static_cast<std::size_t>(c);
        acc = fmaf(ps[jj], to_f32(v[at]), acc);
      }
      os[c] = acc;
    }
    __syncthreads();  // ps is rewritten by the next tile
  }
  T* orow = out + (row * static_cast<std::size_t>(heads) + static_cast<std::size_t>(h)) *
                      static_cast<std::size_t>(v_dim);
  for (int c = tid; c < v_dim; c += kAttnThreads) orow[c] = from_f32<T>(os[c] / l);
}

template <class T>
__global__ void silu_mul_kernel(const T* __restrict__ gate_up, int num_rows, int width,
                                T* __restrict__ act) {
  const std::size_t n = static_cast<std::size_t>(num_rows) * static_cast<std::size_t>(width);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const auto w = static_cast<std::size_t>(width);
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::size_t r = i / w;
    const std::size_t c = i % w;
    const float g = to_f32(gate_up[r * 2 * w + c]);
    const float u = to_f32(gate_up[r * 2 * w + w + c]);
    act[i] = from_f32<T>(__fmul_rn(__fdiv_rn(g, __fadd_rn(1.0F, expf(-g))), u));
  }
}

template <class T>
__global__ void combine_kernel(bool y_fp32, const void* __restrict__ y,
                               const int* __restrict__ pair_row, const float* __restrict__ weights,
                               const float* __restrict__ shared, int num_tokens, int top_k,
                               int hidden, bool out_fp32, void* __restrict__ out) {
  const auto h = static_cast<std::size_t>(hidden);
  const std::size_t n = static_cast<std::size_t>(num_tokens) * h;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::size_t t = i / h;
    const std::size_t c = i % h;
    float o = 0.0F;
    for (int j = 0; j < top_k; ++j) {
      const std::size_t pair = t * static_cast<std::size_t>(top_k) + static_cast<std::size_t>(j);
      const int row = pair_row[pair];
      if (row < 0) continue;
      const std::size_t at = static_cast<std::size_t>(row) * h + c;
      const float v =
          y_fp32 ? static_cast<const float*>(y)[at] : to_f32(static_cast<const T*>(y)[at]);
      o = __fadd_rn(o, __fmul_rn(weights[pair], v));
    }
    if (shared != nullptr) o = __fadd_rn(o, shared[i]);
    if (out_fp32) {
      static_cast<float*>(out)[i] = round_to_storage<T>(o);
    } else {
      static_cast<T*>(out)[i] = from_f32<T>(o);
    }
  }
}

// One warp per token: z = x[t]·gate, then out[t][:] *= sigmoid(z).
__global__ void shared_gate_kernel(const float* __restrict__ x, const float* __restrict__ gate,
                                   int num_tokens, int hidden, float* __restrict__ out) {
  const int warp = static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize);
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  if (warp >= num_tokens) return;
  const std::size_t base = static_cast<std::size_t>(warp) * static_cast<std::size_t>(hidden);
  float z = 0.0F;
  for (int c = lane; c < hidden; c += kWarpSize)
    z += x[base + static_cast<std::size_t>(c)] * gate[c];
  z = warp_sum(z);
  const float s = 1.0F / (1.0F + expf(-z));
  for (int c = lane; c < hidden; c += kWarpSize) out[base + static_cast<std::size_t>(c)] *= s;
}

/// RMSNorm: one warp per row, the sum of squares in fp32, out = x·w·inv stored in T.
template <class T>
__global__ void rms_norm_kernel(const T* __restrict__ x, int rows, int width, int in_ld,
                                const float* __restrict__ weight, float eps, T* __restrict__ out) {
  const int warp = static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize);
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  if (warp >= rows) return;
  const std::size_t base = static_cast<std::size_t>(warp) * static_cast<std::size_t>(in_ld);
  const std::size_t obase = static_cast<std::size_t>(warp) * static_cast<std::size_t>(width);
  float ss = 0.0F;
  for (int c = lane; c < width; c += kWarpSize) {
    const float v = to_f32(x[base + static_cast<std::size_t>(c)]);
    ss += v * v;
  }
  ss = warp_sum(ss);
  const float inv =
      __fdiv_rn(1.0F, sqrtf(__fadd_rn(__fdiv_rn(ss, static_cast<float>(width)), eps)));
  for (int c = lane; c < width; c += kWarpSize) {
    const auto col = static_cast<std::size_t>(c);
    out[obase + col] = from_f32<T>(__fmul_rn(__fmul_rn(to_f32(x[base + col]), weight[c]), inv));
  }
}

/// NeoX RoPE: one thread per (row, head, pair i < rot_dim/2) and per copied value.
template <class T>
__global__ void rope_kernel(const T* __restrict__ in, int in_ld, int rows, int heads, int head_dim,
                            int rot_dim, const int* __restrict__ positions,
                            const float* __restrict__ cos_sin, T* __restrict__ out) {
  const int half = rot_dim / 2;
  const int per_head = half + (head_dim - rot_dim);
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(heads) *
                        static_cast<std::size_t>(per_head);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t t = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += stride) {
    const int j = static_cast<int>(t % static_cast<std::size_t>(per_head));
    const std::size_t rh = t / static_cast<std::size_t>(per_head);
    const int h = static_cast<int>(rh % static_cast<std::size_t>(heads));
    const std::size_t r = rh / static_cast<std::size_t>(heads);
    const T* x = in + r * static_cast<std::size_t>(in_ld) +
                 static_cast<std::size_t>(h) * static_cast<std::size_t>(head_dim);
    T* o = out + rh * static_cast<std::size_t>(head_dim);
    if (j < half) {
      const float* cs =
          cos_sin + static_cast<std::size_t>(positions[r]) * static_cast<std::size_t>(rot_dim);
      const float c = cs[j], s = cs[half + j];
      const float x1 = to_f32(x[j]), x2 = to_f32(x[half + j]);
      o[j] = from_f32<T>(x1 * c - x2 * s);
      o[half + j] = from_f32<T>(x2 * c + x1 * s);
    } else {
      const int c = rot_dim + (j - half);
      o[c] = x[c];
    }
  }
}

}  // namespace

void launch_rms_norm(DType dtype, const void* x, int rows, int width, int in_ld,
                     const float* weight, float eps, void* out, cudaStream_t stream) {
  if (rows == 0) return;
  constexpr int kBlock = 256;
  const int grid = ceil_div(static_cast<long long>(rows) * kWarpSize, kBlock);
  dispatch_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    rms_norm_kernel<T><<<grid, kBlock, 0, stream>>>(static_cast<const T*>(x), rows, width, in_ld,
                                                    weight, eps, static_cast<T*>(out));
  });
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

void launch_rope(DType dtype, const void* in, int in_ld, int rows, int heads, int head_dim,
                 int rot_dim, const int* positions, const float* cos_sin, void* out,
                 cudaStream_t stream) {
  if (rows == 0) return;
  const LaunchDims d =
      elementwise_launch(static_cast<std::size_t>(rows) * static_cast<std::size_t>(heads) *
                         static_cast<std::size_t>(head_dim - rot_dim / 2));
  dispatch_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    rope_kernel<T><<<d.grid, d.block, 0, stream>>>(static_cast<const T*>(in), in_ld, rows, heads,
                                                   head_dim, rot_dim, positions, cos_sin,
                                                   static_cast<T*>(out));
  });
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

void launch_to_storage(DType dtype, const float* src, std::size_t n, void* dst,
                       cudaStream_t stream) {
  if (n == 0) return;
  const LaunchDims d = elementwise_launch(n);
  dispatch_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    to_storage_kernel<T><<<d.grid, d.block, 0, stream>>>(src, n, static_cast<T*>(dst));
  });
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

void launch_from_storage(DType dtype, const void* src, std::size_t n, float* dst,
                         cudaStream_t stream) {
  if (n == 0) return;
  const LaunchDims d = elementwise_launch(n);
  dispatch_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    from_storage_kernel<T><<<d.grid, d.block, 0, stream>>>(static_cast<const T*>(src), n, dst);
  });
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

void launch_fill_uniform(DType dtype, void* dst, std::size_t n, float scale, unsigned seed,
                         cudaStream_t stream) {
  if (n == 0) return;
  const LaunchDims d = elementwise_launch(n);
  dispatch_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_uniform_kernel<T><<<d.grid, d.block, 0, stream>>>(static_cast<T*>(dst), n, scale, seed);
  });
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

void launch_route(const RouterParams& p, const float* logits, const float* bias, int num_tokens,
                  int num_experts, int top_k, int* ids, float* weights, cudaStream_t stream) {
  if (num_tokens == 0) return;
  const LaunchDims d = router_launch(num_tokens, num_experts, p);
  switch (router_slots(num_experts)) {
    case 1:
      route_warp_kernel<1><<<d.grid, d.block, d.shared_bytes, stream>>>(
          p, logits, bias, num_tokens, num_experts, top_k, ids, weights);
      break;
    case 2:
      route_warp_kernel<2><<<d.grid, d.block, d.shared_bytes, stream>>>(
          p, logits, bias, num_tokens, num_experts, top_k, ids, weights);
      break;
    case 4:
      route_warp_kernel<4><<<d.grid, d.block, d.shared_bytes, stream>>>(
          p, logits, bias, num_tokens, num_experts, top_k, ids, weights);
      break;
    case 8:
      route_warp_kernel<8><<<d.grid, d.block, d.shared_bytes, stream>>>(
          p, logits, bias, num_tokens, num_experts, top_k, ids, weights);
      break;
    case 16:
      route_warp_kernel<16><<<d.grid, d.block, d.shared_bytes, stream>>>(
          p, logits, bias, num_tokens, num_experts, top_k, ids, weights);
      break;
    default:
      route_thread_kernel<<<d.grid, d.block, 0, stream>>>(p, logits, bias, num_tokens, num_experts,
                                                          top_k, ids, weights);
      break;
  }
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

void launch_permute(const int* pair_experts, int num_pairs, int first_expert, int num_local,
                    int* offsets, int* order, int* pair_row, void* scratch, cudaStream_t stream) {
  const int blocks = permute_blocks(num_pairs);
  int* counts = static_cast<int*>(scratch);
  permute_count_kernel<<<blocks, kPermuteBlock, static_cast<std::size_t>(num_local) * sizeof(int),
                         stream>>>(pair_experts, num_pairs, first_expert, num_local, counts);
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
  permute_scan_kernel<<<1, 1024, 0, stream>>>(counts, blocks, num_local, offsets);
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
  permute_scatter_kernel<<<blocks, kPermuteBlock, permute_scatter_shared(num_local), stream>>>(
      pair_experts, num_pairs, first_expert, num_local, counts, order, pair_row);
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

void launch_gather_rows(DType dtype, const void* x, const int* order, int num_rows, int top_k,
                        int hidden, void* rows, cudaStream_t stream) {
  if (num_rows == 0) return;
  const std::size_t row_bytes = static_cast<std::size_t>(hidden) * dtype_size(dtype);
  auto run = [&](auto tag) {
    using V = typename decltype(tag)::type;
    const int vecs = static_cast<int>(row_bytes / sizeof(V));
    const LaunchDims d =
        elementwise_launch(static_cast<std::size_t>(num_rows) * static_cast<std::size_t>(vecs));
    gather_rows_kernel<V><<<d.grid, d.block, 0, stream>>>(static_cast<const V*>(x), order, num_rows,
                                                          top_k, vecs, static_cast<V*>(rows));
  };
  if (row_bytes % sizeof(uint4) == 0) {
    run(Tag<uint4>{});
  } else if (row_bytes % sizeof(unsigned) == 0) {
    run(Tag<unsigned>{});
  } else {
    run(Tag<unsigned short>{});
  }
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

void launch_silu_mul(DType dtype, const void* gate_up, int num_rows, int width, void* act,
                     cudaStream_t stream) {
  if (num_rows == 0) return;
  const LaunchDims d =
      elementwise_launch(static_cast<std::size_t>(num_rows) * static_cast<std::size_t>(width));
  dispatch_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    silu_mul_kernel<T><<<d.grid, d.block, 0, stream>>>(static_cast<const T*>(gate_up), num_rows,
                                                       width, static_cast<T*>(act));
  });
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

void launch_combine(DType dtype, bool y_fp32, const void* y, const int* pair_row,
                    const float* weights, const float* shared, int num_tokens, int top_k,
                    int hidden, bool out_fp32, void* out, cudaStream_t stream) {
  if (num_tokens == 0) return;
  const LaunchDims d =
      elementwise_launch(static_cast<std::size_t>(num_tokens) * static_cast<std::size_t>(hidden));
  dispatch_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    combine_kernel<T><<<d.grid, d.block, 0, stream>>>(y_fp32, y, pair_row, weights, shared,
                                                      num_tokens, top_k, hidden, out_fp32, out);
  });
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

void launch_attention(DType dtype, long q_rows, int q_len, int kv_len, int heads, int kv_heads,
                      int qk_dim, int v_dim, float scale, const void* q, const void* k,
                      const void* v, void* out, cudaStream_t stream) {
  if (q_rows == 0) return;
  const std::size_t smem =
      (static_cast<std::size_t>(qk_dim) + kAttnThreads + static_cast<std::size_t>(v_dim)) *
      sizeof(float);
  const dim3 grid(static_cast<unsigned>(q_rows), static_cast<unsigned>(heads));
  dispatch_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (smem > 48 * 1024) {
      MOEPLAN_CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<T>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(smem)));
    }
    attention_kernel<T><<<grid, kAttnThreads, smem, stream>>>(
        static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), q_len, kv_len,
        heads, kv_heads, qk_dim, v_dim, scale, static_cast<T*>(out));
  });
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

void launch_shared_gate(const float* x, const float* gate, int num_tokens, int hidden, float* out,
                        cudaStream_t stream) {
  if (num_tokens == 0) return;
  constexpr int kBlock = 256;
  const int grid = ceil_div(static_cast<long long>(num_tokens) * kWarpSize, kBlock);
  shared_gate_kernel<<<grid, kBlock, 0, stream>>>(x, gate, num_tokens, hidden, out);
  MOEPLAN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moeplan::kernels::cuda
