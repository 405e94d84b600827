// The CPU side of the CUDA backend: launch parameters, argument checks, the grouped-GEMM problem
// lists and the __host__ __device__ routing pieces the router kernels run — all on the host, so
// they are tested on every machine.
#include <gtest/gtest.h>

#include <cmath>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/fp8_layout.hpp"
#include "kernels/cuda/launch_params.hpp"
#include "kernels/router_math.hpp"

namespace moeplan::kernels::cuda {
namespace test_cuda_host {
namespace {

// Device memory exhausted is a std::bad_alloc, so a profile marks the shape "not supported" and
// goes on (profiler/profile.cpp); every other CUDA or cuBLAS failure stays a runtime_error.
TEST(CudaCheck, OutOfDeviceMemoryIsABadAllocNamingTheCall) {
  try {
    MOEPLAN_CUDA_CHECK(cudaErrorMemoryAllocation);
    ADD_FAILURE() << "no exception";
  } catch (const std::bad_alloc& e) {
    EXPECT_NE(std::string(e.what()).find("cudaErrorMemoryAllocation"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("test_cuda_host.cpp"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MOEPLAN_CUBLAS_CHECK(CUBLAS_STATUS_ALLOC_FAILED), std::bad_alloc);
  EXPECT_THROW(MOEPLAN_CUDA_CHECK(cudaErrorInvalidValue), std::runtime_error);
  EXPECT_THROW(MOEPLAN_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE), std::runtime_error);
  EXPECT_NO_THROW(MOEPLAN_CUDA_CHECK(cudaSuccess));
}

// The fp8 GEMM's cuBLASLt scale modes: DeepSeek-V3's 128×128 weight blocks with 1×128
// activation groups, channel scales with per-token activations, a tensor scale with a static
// one; anything else (other blocks or groups, K or cols off the 16-byte grid) is emulated (−1).
TEST(CudaFp8Layout, ScaleModesOfEachFormat) {
  EXPECT_EQ(fp8_weight_scale_mode(7168, 2048, 128, 128),
            CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F);
  EXPECT_EQ(fp8_weight_scale_mode(896, 256, 896, 1), CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F);
  EXPECT_EQ(fp8_weight_scale_mode(896, 256, 896, 256), CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);
  EXPECT_EQ(fp8_weight_scale_mode(896, 256, 64, 64), -1);
  EXPECT_EQ(fp8_weight_scale_mode(200, 256, 128, 128), -1);  // K not a multiple of 16
  EXPECT_EQ(fp8_weight_scale_mode(256, 200, 128, 128), -1);  // nor the output rows
  EXPECT_EQ(fp8_act_scale_mode(7168, 128), CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
  EXPECT_EQ(fp8_act_scale_mode(7168, 7168), CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F);
  EXPECT_EQ(fp8_act_scale_mode(128, 128), CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F);
  EXPECT_EQ(fp8_act_scale_mode(7168, 0), CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);
  EXPECT_EQ(fp8_act_scale_mode(7168, 64), -1);
}

// 128×128 block scales from the checkpoint's row-major [K-blocks][column blocks] to BLK128x128's
// [column blocks][K-blocks padded to 4]: K 640 (5 blocks, padded to 8) × 300 columns (3 blocks,
// the last partial): each scale lands at kb + cb·8, the padding is zero.
TEST(CudaFp8Layout, BlockScalesTransposedWithPaddedKBlocks) {
  const int k = 640, cols = 300, kb = 5, cb = 3;
  const auto value = [](int i, int j) { return static_cast<float>(10 * i + j + 1); };
  std::vector<float> s(static_cast<std::size_t>(kb * cb));
  for (int i = 0; i < kb; ++i) {
    for (int j = 0; j < cb; ++j) s[static_cast<std::size_t>(i * cb + j)] = value(i, j);
  }
  const std::vector<float> out = blk128_scales(s.data(), k, cols);
  ASSERT_EQ(out.size(), 8U * 3U);
  for (int j = 0; j < cb; ++j) {
    for (int i = 0; i < 8; ++i) {
      const float want = i < kb ? value(i, j) : 0.0F;
      EXPECT_EQ(out[static_cast<std::size_t>(j * 8 + i)], want) << "kb " << i << " cb " << j;
    }
  }
}

TEST(CudaLaunchParams, RouterSlotsCoverEveryWidthAndFallBackAbove512) {
  EXPECT_EQ(router_slots(1), 1);
  EXPECT_EQ(router_slots(8), 1);
  EXPECT_EQ(router_slots(32), 1);
  EXPECT_EQ(router_slots(33), 2);
  EXPECT_EQ(router_slots(64), 2);   // Qwen2-57B
  EXPECT_EQ(router_slots(128), 4);  // Qwen3-30B
  EXPECT_EQ(router_slots(160), 8);  // DeepSeek-V2
  EXPECT_EQ(router_slots(256), 8);  // DeepSeek-V3
  EXPECT_EQ(router_slots(512), 16);
  EXPECT_EQ(router_slots(513), 0);  // thread-per-token fallback
  EXPECT_EQ(router_slots(kMaxExperts), 0);
}

TEST(CudaLaunchParams, RouterLaunchOneWarpPerToken) {
  RouterParams greedy;
  const LaunchDims d = router_launch(1000, 64, greedy);
  EXPECT_EQ(d.block, kRouterWarpsPerBlock * kWarpSize);
  EXPECT_EQ(d.grid, 250);  // 4 tokens per block
  EXPECT_EQ(d.shared_bytes, 0U);
  EXPECT_EQ(router_launch(1001, 64, greedy).grid, 251);
  EXPECT_EQ(router_launch(0, 64, greedy).grid, 1);

  RouterParams v3;
  v3.softmax = false;
  v3.method = RouterParams::kNoauxTc;
  v3.num_groups = 8;
  v3.topk_groups = 4;
  // Per warp: 256 biased scores + 8 group scores (floats) + 8 keep flags.
  EXPECT_EQ(router_shared_per_warp(256, 8), (256U + 8U) * 4U + 8U);
  EXPECT_EQ(router_shared_per_warp(256, 3), (256U + 3U) * 4U + 4U);
  EXPECT_EQ(router_launch(10, 256, v3).shared_bytes, 4U * ((256U + 8U) * 4U + 8U));

  const LaunchDims fallback = router_launch(1000, 640, greedy);
  EXPECT_EQ(fallback.block, 64);
  EXPECT_EQ(fallback.grid, 16);
}

TEST(CudaLaunchParams, PermuteAndElementwiseSizes) {
  EXPECT_EQ(permute_blocks(0), 1);
  EXPECT_EQ(permute_blocks(256), 1);
  EXPECT_EQ(permute_blocks(257), 2);
  EXPECT_EQ(permute_scratch_bytes(4096 * 8, 64), 128U * 64U * sizeof(int));
  EXPECT_EQ(permute_scatter_shared(1024), 8U * 1024U * sizeof(int));
  EXPECT_LE(permute_scatter_shared(kMaxExperts), 48U * 1024U);  // no opt-in needed
  EXPECT_EQ(elementwise_launch(1).grid, 1);
  EXPECT_EQ(elementwise_launch(257).grid, 2);
  EXPECT_EQ(elementwise_launch(std::size_t{1} << 40).grid, kElementwiseMaxGrid);
}

TEST(CudaLaunchParams, GemmGroupsMergeEqualRowCountsAndSkipEmptyExperts) {
  const std::vector<int> offsets = {0, 40, 40, 71, 102, 230, 231};
  const GemmGroups g = make_gemm_groups(offsets.data(), 6, 384, 256);
  EXPECT_EQ(g.experts, (std::vector<int>{0, 2, 3, 4, 5}));
  EXPECT_EQ(g.n, (std::vector<int>{40, 31, 128, 1}));  // experts 2 and 3 share a group
  EXPECT_EQ(g.group_size, (std::vector<int>{1, 2, 1, 1}));
  EXPECT_EQ(g.m, std::vector<int>(4, 384));
  EXPECT_EQ(g.k, std::vector<int>(4, 256));
  EXPECT_EQ(g.lda, std::vector<int>(4, 384));
  EXPECT_EQ(g.ldb, std::vector<int>(4, 256));
  EXPECT_EQ(g.ldc, std::vector<int>(4, 384));

  const std::vector<int> padded = {0, 64, 128, 192};  // padded_a2a: one group of three
  const GemmGroups p = make_gemm_groups(padded.data(), 3, 10, 20);
  EXPECT_EQ(p.group_size, (std::vector<int>{3}));
  const std::vector<int> none = {0, 0, 0};
  EXPECT_TRUE(make_gemm_groups(none.data(), 2, 10, 20).group_size.empty());
}

TEST(CudaLaunchParams, ArgumentChecksNameTheProblem) {
  RouterParams p;
  EXPECT_EQ(check_route_args(p, 10, 64, 8), "");
  EXPECT_NE(check_route_args(p, 10, 64, 0).find("top_k=0"), std::string::npos);
  EXPECT_NE(check_route_args(p, 10, 4, 8).find("top_k=8"), std::string::npos);
  EXPECT_NE(check_route_args(p, 10, 2000, 8).find("num_experts=2000"), std::string::npos);
  EXPECT_NE(check_route_args(p, 10, 64, 33).find("top_k=33"), std::string::npos);
  p.method = RouterParams::kGroupLimitedGreedy;
  p.num_groups = 7;
  p.topk_groups = 3;
  EXPECT_NE(check_route_args(p, 10, 64, 8).find("num_groups=7"), std::string::npos);
  p.num_groups = 8;
  p.topk_groups = 9;
  EXPECT_NE(check_route_args(p, 10, 64, 8).find("topk_groups=9"), std::string::npos);

  EXPECT_EQ(check_permute_args(100, 0, 64), "");
  EXPECT_NE(check_permute_args(100, 0, 0).find("num_local=0"), std::string::npos);
  EXPECT_NE(check_permute_args(-1, 0, 4).find("num_pairs"), std::string::npos);

  const std::vector<int> offsets = {0, 3, 5};
  const std::vector<int> widths = {16, 16};
  EXPECT_EQ(check_ffn_args(offsets.data(), 2, 8, widths.data(), 40, 40), "");
  EXPECT_NE(check_ffn_args(offsets.data(), 2, 8, widths.data(), 39, 40).find("fewer"),
            std::string::npos);
  const std::vector<int> down = {0, 3, 2};
  EXPECT_NE(check_ffn_args(down.data(), 2, 8, widths.data(), 40, 40).find("decrease"),
            std::string::npos);
  const std::vector<int> mixed = {16, 8};
  EXPECT_NE(check_ffn_args(offsets.data(), 2, 8, mixed.data(), 40, 40).find("width 8"),
            std::string::npos);
}

// The pieces the warp router calls, on the host.
TEST(RouterMathCore, GroupScoreSelectAndFinalWeight) {
  const float c[] = {0.1F, 0.7F, 0.3F, 0.6F};
  EXPECT_FLOAT_EQ(group_score(c, 4, RouterParams::kGroupLimitedGreedy), 0.7F);
  EXPECT_FLOAT_EQ(group_score(c, 4, RouterParams::kNoauxTc), 0.7F + 0.6F);
  EXPECT_FLOAT_EQ(group_score(c, 1, RouterParams::kNoauxTc), 0.1F);

  const float gs[] = {0.5F, 0.9F, 0.9F, 0.2F};
  bool keep[4] = {};
  select_groups(gs, 4, 2, keep);
  EXPECT_FALSE(keep[0]);
  EXPECT_TRUE(keep[1]);  // the tie goes to the lower group index first
  EXPECT_TRUE(keep[2]);
  EXPECT_FALSE(keep[3]);

  RouterParams p;
  p.normalise = true;
  p.scale = true;
  p.scaling_factor = 2.5F;
  EXPECT_FLOAT_EQ(final_weight(p, 0.25F, 0.5F), 1.25F);
  p.normalise = false;
  p.scale = false;
  EXPECT_FLOAT_EQ(final_weight(p, 0.25F, 0.5F), 0.25F);

  EXPECT_TRUE(ranks_before(1.0F, 5, 0.5F, 0));
  EXPECT_TRUE(ranks_before(1.0F, 2, 1.0F, 3));
  EXPECT_FALSE(ranks_before(1.0F, 3, 1.0F, 2));
  EXPECT_TRUE(ranks_before(-INFINITY, 7, -INFINITY, 1 << 30));  // a real expert beats "none"
  EXPECT_FLOAT_EQ(sigmoid_score(0.0F), 0.5F);
}

TEST(RouterMathCore, RouterParamsFollowTheModelSpec) {
  models::RouterSpec v2;
  v2.topk_method = models::TopkMethod::kGroupLimitedGreedy;
  v2.num_groups = 8;
  v2.topk_groups = 3;
  v2.routed_scaling_factor = 16.0;
  v2.scale_after_norm = false;
  RouterParams p = router_params(v2, 6, true);
  EXPECT_TRUE(p.softmax);
  EXPECT_EQ(p.method, RouterParams::kGroupLimitedGreedy);
  EXPECT_TRUE(p.grouped());
  EXPECT_FALSE(p.normalise);
  EXPECT_TRUE(p.scale);    // no renormalisation: V2 scales
  EXPECT_FALSE(p.biased);  // only noaux_tc reads the bias
  v2.norm_topk_prob = true;
  p = router_params(v2, 6, true);
  EXPECT_TRUE(p.normalise);
  EXPECT_FALSE(p.scale);                                // V2 with renormalisation skips the scaling
  EXPECT_FALSE(router_params(v2, 1, false).normalise);  // k = 1: nothing to renormalise

  models::RouterSpec v3;
  v3.scoring = models::ScoringFunc::kSigmoid;
  v3.topk_method = models::TopkMethod::kNoauxTc;
  v3.num_groups = 8;
  v3.topk_groups = 4;
  v3.norm_topk_prob = true;
  v3.routed_scaling_factor = 2.5;
  p = router_params(v3, 8, true);
  EXPECT_FALSE(p.softmax);
  EXPECT_TRUE(p.biased);
  EXPECT_TRUE(p.normalise && p.scale);
  EXPECT_FLOAT_EQ(p.scaling_factor, 2.5F);
  EXPECT_FALSE(router_params(v3, 8, false).biased);
}

// The warp router's selection rule — best (choice, index) under ranks_before among untaken
// experts, k times — picks what route_token_core's scan picks, whatever the lane layout.
TEST(RouterMathCore, RankOrderSelectionEqualsSequentialScan) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> coarse(0, 6);  // many ties
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + trial % 300;
    const int k = std::min(n, 1 + trial % 9);
    std::vector<float> logits(static_cast<std::size_t>(n));
    for (auto& l : logits) l = static_cast<float>(coarse(rng)) * 0.5F;
    RouterParams p;
    p.softmax = false;
    std::vector<int> ids(static_cast<std::size_t>(k));
    std::vector<float> w(ids.size());
    route_token_core(p, logits.data(), nullptr, n, k, ids.data(), w.data());
    // Lane-strided argmax as the kernel does it: per lane over its slots, then across lanes.
    std::vector<bool> taken(static_cast<std::size_t>(n), false);
    for (int j = 0; j < k; ++j) {
      float best = -INFINITY;
      int best_id = 1 << 30;
      for (int lane = 0; lane < kWarpSize; ++lane) {
        float lb = -INFINITY;
        int li = 1 << 30;
        for (int e = lane; e < n; e += kWarpSize) {
          const float v = sigmoid_score(logits[static_cast<std::size_t>(e)]);
          if (!taken[static_cast<std::size_t>(e)] && ranks_before(v, e, lb, li)) {
            lb = v;
            li = e;
          }
        }
        if (ranks_before(lb, li, best, best_id)) {
          best = lb;
          best_id = li;
        }
      }
      taken[static_cast<std::size_t>(best_id)] = true;
      ASSERT_EQ(best_id, ids[static_cast<std::size_t>(j)]) << "n=" << n << " pick " << j;
    }
  }
}

}  // namespace
}  // namespace test_cuda_host
}  // namespace moeplan::kernels::cuda
