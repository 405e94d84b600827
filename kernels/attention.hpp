// The attention core on the CPU (the CPU backend's attention op) and its double-precision
// reference with the bound a correct kernel stays within (docs/VERIFY.md, "Attention").
#pragma once

#include <span>
#include <string>
#include <vector>

#include "kernels/backend.hpp"

namespace moeplan::kernels {

/// The CPU backend's attention (Backend::attention): per sequence and K/V head, tiles of query
/// rows (the group's heads of consecutive tokens) against the keys they can see, Eigen GEMMs
/// for Q·Kᵀ and P·V.
void attention_cpu(const AttentionShape& s, std::span<const float> q, std::span<const float> k,
                   std::span<const float> v, DType dtype, std::span<float> out);

/// The reference: scores, softmax and P·V in double from the same inputs, and per output element
/// the largest difference a correct kernel (fp32 scores and softmax, probabilities rounded to
/// `dtype`, fp32 accumulation, output stored in `dtype`) can show.
struct AttentionReference {
  std::vector<double> out;
  std::vector<double> bound;
};
AttentionReference attention_reference(const AttentionShape& s, std::span<const float> q,
                                       std::span<const float> k, std::span<const float> v,
                                       DType dtype);

/// One output row of the reference: sequence b, query token t, head h (v_dim values and
/// bounds): what the profiler checks on samples of a large case.
void attention_reference_row(const AttentionShape& s, std::span<const float> q,
                             std::span<const float> k, std::span<const float> v, DType dtype, int b,
                             int t, int h, std::span<double> out, std::span<double> bound);

}  // namespace moeplan::kernels
