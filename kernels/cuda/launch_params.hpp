// Launch parameters and argument checks of the CUDA MoE kernels, as plain C++ (no CUDA headers):
// the backend checks arguments here before any launch, and CPU tests cover both.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/router_math.hpp"

namespace moeplan::kernels::cuda {

/// One launch: grid and block sizes and dynamic shared memory.
struct LaunchDims {
  int grid = 0;
  int block = 0;
  std::size_t shared_bytes = 0;
};

inline constexpr int kWarpSize = 32;
/// Router: one warp per token, this many warps per block (the vLLM/SGLang fused top-k design).
inline constexpr int kRouterWarpsPerBlock = 4;
/// Largest per-lane expert slots of the warp router (16 · 32 = 512 experts); above it a thread
/// per token runs route_token_core.
inline constexpr int kRouterMaxSlots = 16;
/// Permute: threads per block, one pair each.
inline constexpr int kPermuteBlock = 256;
inline constexpr int kPermuteWarps = kPermuteBlock / kWarpSize;
/// Element-wise kernels: threads per block and a cap on the grid (grid-stride loops).
inline constexpr int kElementwiseBlock = 256;
inline constexpr int kElementwiseMaxGrid = 8192;

inline int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

/// Per-lane expert slots of the warp router for `num_experts` (1, 2, 4, 8, 16), or 0 when the
/// thread-per-token fallback runs.
inline int router_slots(int num_experts) {
  for (int slots = 1; slots <= kRouterMaxSlots; slots *= 2) {
    if (num_experts <= slots * kWarpSize) return slots;
  }
  return 0;
}

/// Shared bytes one router warp needs: the biased scores [E] and group scores [G] as floats,
/// then G keep flags, rounded up to 4 bytes (only grouped routers use it).
MOEPLAN_HD inline std::size_t router_shared_per_warp(int num_experts, int num_groups) {
  const std::size_t flags = (static_cast<std::size_t>(num_groups) + 3) / 4 * 4;
  return static_cast<std::size_t>(num_experts + num_groups) * sizeof(float) + flags;
}

inline LaunchDims router_launch(int num_tokens, int num_experts, const RouterParams& p) {
  if (router_slots(num_experts) == 0) {
    return {std::max(1, ceil_div(num_tokens, 64)), 64, 0};
  }
  const std::size_t shared =
      p.grouped() ? kRouterWarpsPerBlock * router_shared_per_warp(num_experts, p.num_groups) : 0;
  return {std::max(1, ceil_div(num_tokens, kRouterWarpsPerBlock)), kRouterWarpsPerBlock * kWarpSize,
          shared};
}

/// Blocks of the permute's count and scatter kernels (one pair per thread).
inline int permute_blocks(int num_pairs) { return std::max(1, ceil_div(num_pairs, kPermuteBlock)); }

/// Device scratch of the permute: per-block per-expert counts, then bases.
inline std::size_t permute_scratch_bytes(int num_pairs, int num_local) {
  return static_cast<std::size_t>(permute_blocks(num_pairs)) * static_cast<std::size_t>(num_local) *
         sizeof(int);
}

/// Dynamic shared bytes of the scatter kernel: per-warp per-expert counts.
inline std::size_t permute_scatter_shared(int num_local) {
  return static_cast<std::size_t>(kPermuteWarps) * static_cast<std::size_t>(num_local) *
         sizeof(int);
}

inline LaunchDims elementwise_launch(std::size_t n) {
  const long long blocks = (static_cast<long long>(n) + kElementwiseBlock - 1) / kElementwiseBlock;
  return {static_cast<int>(std::clamp<long long>(blocks, 1, kElementwiseMaxGrid)),
          kElementwiseBlock, 0};
}

/// Empty when route arguments are valid, else what is wrong.
inline std::string check_route_args(const RouterParams& p, int num_tokens, int num_experts,
                                    int top_k) {
  if (num_tokens < 0) return "route: num_tokens < 0";
  if (num_experts < 1 || num_experts > kMaxExperts) {
    return "route: num_experts=" + std::to_string(num_experts) + ", expected 1.." +
           std::to_string(kMaxExperts);
  }
  if (top_k < 1 || top_k > kMaxTopK || top_k > num_experts) {
    return "route: top_k=" + std::to_string(top_k) + ", expected 1..min(" +
           std::to_string(kMaxTopK) + ", num_experts)";
  }
  if (p.grouped()) {
    if (p.num_groups > num_experts || num_experts % p.num_groups != 0) {
      return "route: num_groups=" + std::to_string(p.num_groups) +
             " does not divide num_experts=" + std::to_string(num_experts);
    }
    if (p.topk_groups < 1 || p.topk_groups > p.num_groups) {
      return "route: topk_groups=" + std::to_string(p.topk_groups) + ", expected 1..num_groups";
    }
  }
  return {};
}

/// Empty when permute arguments are valid.
inline std::string check_permute_args(int num_pairs, int first_expert, int num_local) {
  if (num_pairs < 0) return "permute: num_pairs < 0";
  if (first_expert < 0) return "permute: first_expert < 0";
  if (num_local < 1 || num_local > kMaxExperts) {
    return "permute: num_local=" + std::to_string(num_local) + ", expected 1.." +
           std::to_string(kMaxExperts);
  }
  return {};
}

/// The problems of a grouped GEMM out[rows_e][n_out] = in[rows_e][k_in] · W_e[k_in][n_out] over
/// experts (row-major), as cuBLAS column-major problems: m = n_out, n = rows_e, k = k_in, with
/// lda = n_out, ldb = k_in, ldc = n_out. Experts without rows are left out; consecutive experts
/// with the same row count share a group.
struct GemmGroups {
  std::vector<int> m, n, k, lda, ldb, ldc, group_size;
  std::vector<int> experts;  ///< the expert of each problem, in problem order
};

inline GemmGroups make_gemm_groups(const int* offsets, int num_experts, int n_out, int k_in) {
  GemmGroups g;
  for (int e = 0; e < num_experts; ++e) {
    const int rows = offsets[e + 1] - offsets[e];
    if (rows <= 0) continue;
    g.experts.push_back(e);
    if (!g.n.empty() && g.n.back() == rows) {
      ++g.group_size.back();
      continue;
    }
    g.m.push_back(n_out);
    g.n.push_back(rows);
    g.k.push_back(k_in);
    g.lda.push_back(n_out);
    g.ldb.push_back(k_in);
    g.ldc.push_back(n_out);
    g.group_size.push_back(1);
  }
  return g;
}

/// Empty when the expert FFN arguments are valid: offsets non-decreasing from 0, one width.
inline std::string check_ffn_args(const int* offsets, int num_experts, int hidden,
                                  const int* widths, std::size_t rows_floats,
                                  std::size_t out_floats) {
  if (hidden < 1) return "expert_ffn: hidden < 1";
  if (num_experts < 0) return "expert_ffn: num_experts < 0";
  if (offsets[0] != 0) return "expert_ffn: offsets[0] != 0";
  for (int e = 0; e < num_experts; ++e) {
    if (offsets[e + 1] < offsets[e])
      return "expert_ffn: offsets decrease at expert " + std::to_string(e);
    if (widths[e] != widths[0] || widths[e] < 1) {
      return "expert_ffn: expert " + std::to_string(e) + " has width " + std::to_string(widths[e]) +
             ", expected every expert to have width " + std::to_string(widths[0]);
    }
  }
  const std::size_t need =
      static_cast<std::size_t>(offsets[num_experts]) * static_cast<std::size_t>(hidden);
  if (rows_floats < need || out_floats < need) {
    return "expert_ffn: rows/out hold fewer than offsets[E]·hidden = " + std::to_string(need) +
           " values";
  }
  return {};
}

}  // namespace moeplan::kernels::cuda
