// Per-token routing math shared by every backend: scoring (softmax or sigmoid in fp32),
// group-limited or bias-corrected selection, top-k, renormalisation and scaling — the semantics
// of Qwen2/Qwen3/Mixtral (softmax, greedy), DeepSeek-V2 (group_limited_greedy) and DeepSeek-V3
// (sigmoid, noaux_tc). Ties go to the lower expert index.
#pragma once

#include <cmath>
#include <limits>
#include <span>

#include "models/moe_model.hpp"

namespace moeplan::kernels {

/// Routes one token. logits[E]; bias[E] used only by noaux_tc; ids[k], weights[k] out (in order
/// of decreasing selection score). Scratch space is on the stack for E ≤ kMaxExperts.
inline constexpr int kMaxExperts = 1024;

inline void route_token(const models::RouterSpec& r, std::span<const float> logits,
                        std::span<const float> bias, int top_k, std::span<int> ids,
                        std::span<float> weights) {
  const int n = static_cast<int>(logits.size());
  float scores[kMaxExperts];
  float choice[kMaxExperts];
  if (r.scoring == models::ScoringFunc::kSoftmax) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int e = 0; e < n; ++e) mx = std::fmax(mx, logits[static_cast<std::size_t>(e)]);
    float sum = 0.0F;
    for (int e = 0; e < n; ++e) {
      scores[e] = std::exp(logits[static_cast<std::size_t>(e)] - mx);
      sum += scores[e];
    }
    for (int e = 0; e < n; ++e) scores[e] /= sum;
  } else {
    for (int e = 0; e < n; ++e)
      scores[e] = 1.0F / (1.0F + std::exp(-logits[static_cast<std::size_t>(e)]));
  }
  const bool biased = r.topk_method == models::TopkMethod::kNoauxTc && !bias.empty();
  for (int e = 0; e < n; ++e)
    choice[e] = scores[e] + (biased ? bias[static_cast<std::size_t>(e)] : 0.0F);

  if (r.topk_method != models::TopkMethod::kGreedy && r.num_groups > 1) {
    const int per_group = n / r.num_groups;
    float group_score[kMaxExperts];
    for (int g = 0; g < r.num_groups; ++g) {
      const float* c = choice + g * per_group;
      if (r.topk_method == models::TopkMethod::kGroupLimitedGreedy) {
        float mx = -std::numeric_limits<float>::infinity();
        for (int i = 0; i < per_group; ++i) mx = std::fmax(mx, c[i]);
        group_score[g] = mx;
      } else {  // noaux_tc: sum of the group's top-2 biased scores
        float a = -std::numeric_limits<float>::infinity();
        float b = a;
        for (int i = 0; i < per_group; ++i) {
          if (c[i] > a) {
            b = a;
            a = c[i];
          } else if (c[i] > b) {
            b = c[i];
          }
        }
        group_score[g] = per_group >= 2 ? a + b : a;
      }
    }
    bool keep[kMaxExperts] = {};
    for (int pick = 0; pick < r.topk_groups; ++pick) {
      int best = -1;
      for (int g = 0; g < r.num_groups; ++g) {
        if (!keep[g] && (best < 0 || group_score[g] > group_score[best])) best = g;
      }
      keep[best] = true;
    }
    for (int g = 0; g < r.num_groups; ++g) {
      if (keep[g]) continue;
      for (int i = 0; i < per_group; ++i)
        choice[g * per_group + i] = -std::numeric_limits<float>::infinity();
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
    ids[static_cast<std::size_t>(j)] = best;
    weights[static_cast<std::size_t>(j)] = scores[best];
    sum += scores[best];
  }
  const bool normalise = r.norm_topk_prob && top_k > 1;
  const bool scale = !normalise || r.scale_after_norm;
  for (int j = 0; j < top_k; ++j) {
    float w = weights[static_cast<std::size_t>(j)];
    if (normalise) w /= (sum + 1e-20F);
    if (scale) w *= static_cast<float>(r.routed_scaling_factor);
    weights[static_cast<std::size_t>(j)] = w;
  }
}

}  // namespace moeplan::kernels
