// One rank's attention block — and with the MoE layer after it, the whole decoder layer — run
// by the backend's ops as one measured case: what `validate --attention --scope block|layer`
// compares with the planner's attention block (cost_dense_parts) and decoder layer.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/communicator.hpp"
#include "kernels/layer_spec.hpp"
#include "models/moe_model.hpp"
#include "profiler/harness.hpp"

namespace moeplan::profiler {

/// Why `model`'s attention block cannot be run as a block ("" when it can): a model without
/// attention heads, or without an even number of rope dims to rotate.
std::string decoder_block_problem(const models::MoeModel& model);

struct DecoderCaseShape {
  bool decode = false;
  int tokens = 0;   ///< prefill: one prompt's tokens (= context); decode: sequences
  int context = 0;  ///< keys the last token sees
};

/// The block on one rank of attention TP 1. MLA (DeepSeek-V2/V3): decoder_block.cpp's MlaCase,
/// prefill expanded and decode absorbed as the cost model prices them. GQA/MHA, in the order a
/// decoder layer runs it: input RMSNorm; the fused q/k/v projection (stored in the dtype); RoPE on
/// q and k read from it (decode: the new key appended to each sequence's cache of context − 1
/// tokens); Qwen3's q/k RMSNorms (after RoPE here: the same two passes); the attention core; the
/// output projection; the post-attention RMSNorm. With `moe` (the model's MoE layer, ep 1 × tp 1 on
/// `world`, one rank) the normed output goes through the MoE layer: the whole decoder layer.
/// Residual adds and the q/k/v bias are left out (the frameworks fuse them into the norms and the
/// GEMM). verify() checks every op on the inputs it got against its reference and bound (check_ops
/// of 8 rows each: norms, RoPE, GEMM rows, attention rows, the MoE layer's tokens). One op of a
/// decoder case compared with its reference on the inputs it got.
struct OpCheck {
  std::string op;              ///< "input norm", "q/k/v projection", "RoPE q", … "MoE layer"
  long checked = 0;            ///< values compared
  double max_abs_diff = 0.0;   ///< largest |kernel − reference|
  double max_bound_use = 0.0;  ///< largest |diff| / its derived bound (≤ 1: within the bound)
  bool passed = true;
  std::string detail;  ///< the first value past its bound
};

class DecoderCase : public OpCase {
 public:
  /// The MoE layer's routed (token, expert) pairs per expert on the block's output of the last
  /// run (empty before the first run or without the MoE layer).
  virtual std::vector<double> routed_counts() const = 0;
  /// Runs the case once and compares every op with its reference: `rows` rows spread over
  /// each op's output (0: every row; verify() checks 8). GEMM rows are checked whole.
  virtual std::vector<OpCheck> check_ops(long rows) = 0;
  /// The bytes of the case's own buffers one run reads: weights, KV cache, activations, and the
  /// MoE layer's expert weights when it has one — what a rotation of copies must exceed to run
  /// cold (op_common.hpp's cold_copies).
  virtual std::size_t footprint_bytes() const = 0;
};

/// Copies of one decoder case run in turn, so that each run finds its weights and KV cache out
/// of the caches as a step of a many-layer model does (the layers before it have streamed
/// theirs): enough copies that their footprints exceed the rotation (the profile's
/// SweepSpec::cold_bytes; one when a case alone does,
/// as the whole layer with its MoE weights). verify() verifies every copy; routed_counts() and
/// check_ops() are the first copy's.
class RotatingDecoderCase final : public DecoderCase {
 public:
  explicit RotatingDecoderCase(std::vector<std::unique_ptr<DecoderCase>> copies);
  void run() override;
  Check verify() override;
  std::vector<double> routed_counts() const override;
  std::vector<OpCheck> check_ops(long rows) override;
  std::size_t footprint_bytes() const override;
  std::size_t copies() const { return copies_.size(); }

 private:
  std::vector<std::unique_ptr<DecoderCase>> copies_;
  std::size_t next_ = 0;
};

/// make_decoder_case's case in as many copies as together exceed `cold_bytes`
/// (RotatingDecoderCase).
Result<std::unique_ptr<RotatingDecoderCase>> make_cold_decoder_case(
    const models::MoeModel& model, DType dtype, const DecoderCaseShape& shape,
    const kernels::LayerSpec* moe, kernels::Communicator* world, kernels::Backend& backend,
    std::size_t cold_bytes);

/// `world` must outlive the case (used only with `moe`). Errors: decoder_block_problem, a shape
/// out of range.
Result<std::unique_ptr<DecoderCase>> make_decoder_case(const models::MoeModel& model, DType dtype,
                                                       const DecoderCaseShape& shape,
                                                       const kernels::LayerSpec* moe,
                                                       kernels::Communicator* world,
                                                       kernels::Backend& backend);

}  // namespace moeplan::profiler
