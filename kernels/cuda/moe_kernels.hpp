// Device-pointer launchers of the MoE kernels (DeepEP style: raw pointers, sizes and a stream;
// arguments are checked one level up, in the backend, with launch_params.hpp). Storage buffers
// hold `dtype` values (fp32, bf16 or fp16); arithmetic is fp32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/router_math.hpp"
#include "models/dtype.hpp"

namespace moeplan::kernels::cuda {

/// dst[n] in `dtype` storage = src[n] rounded to nearest even.
void launch_to_storage(DType dtype, const float* src, std::size_t n, void* dst,
                       cudaStream_t stream);
/// dst[n] fp32 = src[n] in `dtype` storage.
void launch_from_storage(DType dtype, const void* src, std::size_t n, float* dst,
                         cudaStream_t stream);

/// dst[n] in `dtype` storage = uniform values in [-scale, scale) from a counter-based hash of
/// (seed, index): test and benchmark data made on the device.
void launch_fill_uniform(DType dtype, void* dst, std::size_t n, float scale, unsigned seed,
                         cudaStream_t stream);

/// Fused scoring, (group-limited / bias-corrected) top-k, renormalisation and scaling:
/// logits[T][E] fp32, bias[E] (read only when p.biased) → ids[T][k], weights[T][k].
void launch_route(const RouterParams& p, const float* logits, const float* bias, int num_tokens,
                  int num_experts, int top_k, int* ids, float* weights, cudaStream_t stream);

/// Align/permute: the pairs whose expert lies in [first_expert, first_expert + num_local) sorted
/// stably by expert. Writes offsets[num_local + 1] (histogram, prefix sum), order[offsets[L]]
/// (pair of each row) and the inverse map pair_row[num_pairs] (−1, the EP sentinel, for pairs of
/// experts outside the rank). `scratch` holds permute_scratch_bytes(num_pairs, num_local).
void launch_permute(const int* pair_experts, int num_pairs, int first_expert, int num_local,
                    int* offsets, int* order, int* pair_row, void* scratch, cudaStream_t stream);

/// Scatter to the expert-contiguous layout: rows[i][H] = x[order[i] / top_k][H] for
/// i < num_rows (storage of `dtype`).
void launch_gather_rows(DType dtype, const void* x, const int* order, int num_rows, int top_k,
                        int hidden, void* rows, cudaStream_t stream);

/// act[r][c] = round(SiLU(gate_up[r][c]) · gate_up[r][width + c]) for r < num_rows, c < width.
void launch_silu_mul(DType dtype, const void* gate_up, int num_rows, int width, void* act,
                     cudaStream_t stream);

/// Weighted unpermute and sum: out[t][h] = round_dtype(Σ_j w[t·k+j]·y[pair_row[t·k+j]][h] +
/// shared[t][h]), fp32 in the order j = 0..k−1 without fused multiply-adds (the CPU backend's
/// arithmetic exactly). y is fp32 when `y_fp32`, else `dtype` storage; pairs with pair_row < 0
/// add nothing; shared may be null; out is fp32 (values of `dtype`) when `out_fp32`, else
/// `dtype` storage.
void launch_combine(DType dtype, bool y_fp32, const void* y, const int* pair_row,
                    const float* weights, const float* shared, int num_tokens, int top_k,
                    int hidden, bool out_fp32, void* out, cudaStream_t stream);

/// RMSNorm of `rows` rows of `width` (kernels/norm_rope.hpp's arithmetic, one warp per row):
/// x (`in_ld` elements between rows) and out (contiguous) in `dtype` storage, weight fp32.
void launch_rms_norm(DType dtype, const void* x, int rows, int width, int in_ld,
                     const float* weight, float eps, void* out, cudaStream_t stream);

/// NeoX RoPE (Backend::rope): in with `in_ld` elements between rows, out contiguous
/// [rows][heads][head_dim], both in `dtype` storage; positions [rows], cos_sin fp32
/// [max_position][rot_dim].
void launch_rope(DType dtype, const void* in, int in_ld, int rows, int heads, int head_dim,
                 int rot_dim, const int* positions, const float* cos_sin, void* out,
                 cudaStream_t stream);

/// Qwen2-MoE's shared-expert gate: out[t][:] *= sigmoid(x[t] · gate), x fp32 [T][H], gate [H].
void launch_shared_gate(const float* x, const float* gate, int num_tokens, int hidden, float* out,
                        cudaStream_t stream);

/// The attention core (Backend::attention) on `dtype` storage: q [q_rows][heads][qk_dim],
/// k [kv_rows][kv_heads][qk_dim], v [kv_rows][kv_heads][v_dim] → out [q_rows][heads][v_dim].
/// One block per query row and head; the shape is checked by the caller
/// (AttentionShape::problem); q_rows = batch · q_len.
void launch_attention(DType dtype, long q_rows, int q_len, int kv_len, int heads, int kv_heads,
                      int qk_dim, int v_dim, float scale, const void* q, const void* k,
                      const void* v, void* out, cudaStream_t stream);

}  // namespace moeplan::kernels::cuda
