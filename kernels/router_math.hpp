// Per-token routing math shared by every backend: scoring (softmax or sigmoid in fp32),
// group-limited or bias-corrected selection, top-k, renormalisation and scaling — the semantics
// of Qwen2/Qwen3/Mixtral (softmax, greedy), DeepSeek-V2 (group_limited_greedy) and DeepSeek-V3
// (sigmoid, noaux_tc). Ties go to the lower expert index. The core is `MOEPLAN_HD`
// (__host__ __device__ under nvcc) and depends on nothing but <math.h>, so the CUDA router
// kernels run the same per-element code that the CPU backend and its tests run.
#pragma once

#include <math.h>  // expf, fmaxf: the same names on host and device

#if defined(__CUDACC__)
#define MOEPLAN_HD __host__ __device__
#else
#define MOEPLAN_HD
#endif

namespace moeplan::kernels {

/// Largest expert count routed with scratch space on the stack.
inline constexpr int kMaxExperts = 1024;
/// Largest top-k (one warp lane per selected expert in the CUDA router).
inline constexpr int kMaxTopK = 32;

/// The router semantics as plain values (models::RouterSpec without its dependencies).
struct RouterParams {
  enum Method : int { kGreedy = 0, kGroupLimitedGreedy = 1, kNoauxTc = 2 };
  bool softmax = true;       ///< softmax scoring, else sigmoid
  int method = kGreedy;      ///< top-k method
  int num_groups = 1;        ///< n_group
  int topk_groups = 1;       ///< topk_group
  bool normalise = false;    ///< renormalise the k weights (norm_topk_prob with k > 1)
  bool scale = true;         ///< multiply by routed_scaling_factor
  float scaling_factor = 1;  ///< routed_scaling_factor
  bool biased = false;       ///< noaux_tc with an e_score_correction_bias

  MOEPLAN_HD bool grouped() const { return method != kGreedy && num_groups > 1; }
};

/// Sigmoid score of one logit (DeepSeek-V3).
MOEPLAN_HD inline float sigmoid_score(float logit) { return 1.0F / (1.0F + expf(-logit)); }

/// (a, ia) ranks before (b, ib): higher value first, ties to the lower index.
MOEPLAN_HD inline bool ranks_before(float a, int ia, float b, int ib) {
  return a > b || (a == b && ia < ib);
}

/// A group's selection score: its maximum (group_limited_greedy) or the sum of its two largest
/// biased scores (noaux_tc; the maximum alone for groups of one).
MOEPLAN_HD inline float group_score(const float* choice, int per_group, int method) {
  if (method == RouterParams::kGroupLimitedGreedy) {
    float mx = -INFINITY;
    for (int i = 0; i < per_group; ++i) mx = fmaxf(mx, choice[i]);
    return mx;
  }
  float a = -INFINITY;
  float b = a;
  for (int i = 0; i < per_group; ++i) {
    if (choice[i] > a) {
      b = a;
      a = choice[i];
    } else if (choice[i] > b) {
      b = choice[i];
    }
  }
  return per_group >= 2 ? a + b : a;
}

/// keep[g] (all false on entry) becomes true for the `topk_groups` best groups, ties to the
/// lower group index.
MOEPLAN_HD inline void select_groups(const float* group_scores, int num_groups, int topk_groups,
                                     bool* keep) {
  for (int pick = 0; pick < topk_groups; ++pick) {
    int best = -1;
    for (int g = 0; g < num_groups; ++g) {
      if (!keep[g] && (best < 0 || group_scores[g] > group_scores[best])) best = g;
    }
    keep[best] = true;
  }
}

/// The final weight of a selected expert from its unbiased score and the sum of the k scores
/// (summed in selection order).
MOEPLAN_HD inline float final_weight(const RouterParams& p, float score, float sum) {
  float w = score;
  if (p.normalise) w /= (sum + 1e-20F);
  if (p.scale) w *= p.scaling_factor;
  return w;
}

/// Routes one token: logits[n]; bias[n] read only when p.biased; ids[k], weights[k] out in
/// order of decreasing selection score. n ≤ kMaxExperts.
MOEPLAN_HD inline void route_token_core(const RouterParams& p, const float* logits,
                                        const float* bias, int n, int top_k, int* ids,
                                        float* weights) {
  float scores[kMaxExperts];
  float choice[kMaxExperts];
  if (p.softmax) {
    float mx = -INFINITY;
    for (int e = 0; e < n; ++e) mx = fmaxf(mx, logits[e]);
    float sum = 0.0F;
    for (int e = 0; e < n; ++e) {
      scores[e] = expf(logits[e] - mx);
      sum += scores[e];
    }
    for (int e = 0; e < n; ++e) scores[e] /= sum;
  } else {
    for (int e = 0; e < n; ++e) scores[e] = sigmoid_score(logits[e]);
  }
  for (int e = 0; e < n; ++e) choice[e] = scores[e] + (p.biased ? bias[e] : 0.0F);

  if (p.grouped()) {
    const int per_group = n / p.num_groups;
    float gs[kMaxExperts];
    for (int g = 0; g < p.num_groups; ++g) {
      gs[g] = group_score(choice + g * per_group, per_group, p.method);
    }
    bool keep[kMaxExperts] = {};
    select_groups(gs, p.num_groups, p.topk_groups, keep);
    for (int g = 0; g < p.num_groups; ++g) {
      if (keep[g]) continue;
      for (int i = 0; i < per_group; ++i) choice[g * per_group + i] = -INFINITY;
    }
  }

  bool taken[kMaxExperts] = {};
  float sum = 0.0F;
  for (int j = 0; j < top_k; ++j) {
    int best = -1;
    for (int e = 0; e < n; ++e) {
      if (!taken[e] && (best < 0 || choice[e] > choice[best])) best = e;
    }
    taken[best] = true;
    ids[j] = best;
    weights[j] = scores[best];
    sum += scores[best];
  }
  for (int j = 0; j < top_k; ++j) weights[j] = final_weight(p, weights[j], sum);
}

}  // namespace moeplan::kernels

#if !defined(__CUDACC__)
// NOTE: the host wrapper takes the model's RouterSpec and spans (C++20); nvcc compiles the
// kernels as C++17 and sees only the core above.
#include <span>

#include "models/moe_model.hpp"

namespace moeplan::kernels {

/// The plain-value router parameters of a model's router for top-k `top_k`.
inline RouterParams router_params(const models::RouterSpec& r, int top_k, bool has_bias) {
  RouterParams p;
  p.softmax = r.scoring == models::ScoringFunc::kSoftmax;
  p.method = r.topk_method == models::TopkMethod::kGreedy ? RouterParams::kGreedy
             : r.topk_method == models::TopkMethod::kGroupLimitedGreedy
                 ? RouterParams::kGroupLimitedGreedy
                 : RouterParams::kNoauxTc;
  p.num_groups = r.num_groups;
  p.topk_groups = r.topk_groups;
  p.normalise = r.norm_topk_prob && top_k > 1;
  p.scale = !p.normalise || r.scale_after_norm;
  p.scaling_factor = static_cast<float>(r.routed_scaling_factor);
  p.biased = p.method == RouterParams::kNoauxTc && has_bias;
  return p;
}

/// Routes one token. logits[E]; bias[E] used only by noaux_tc; ids[k], weights[k] out (in order
/// of decreasing selection score).
inline void route_token(const models::RouterSpec& r, std::span<const float> logits,
                        std::span<const float> bias, int top_k, std::span<int> ids,
                        std::span<float> weights) {
  const RouterParams p = router_params(r, top_k, !bias.empty());
  route_token_core(p, logits.data(), bias.data(), static_cast<int>(logits.size()), top_k,
                   ids.data(), weights.data());
}

}  // namespace moeplan::kernels
#endif
