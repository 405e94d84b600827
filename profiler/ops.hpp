// The op tables, one per file (op_*.cpp); all_ops() lists them in profiling order.
#pragma once

#include "profiler/harness.hpp"

namespace moeplan::profiler {

OpTable gemm_op();
/// One projection GEMM point of gemm_op (weights cold, output stored in `dtype`), as its sweep
/// makes them for `backend` (the machine's pace probe, pace.hpp).
OpPoint projection_gemm_point(const std::string& backend, DType dtype, int m, int n, int k);
OpTable router_topk_op();
OpTable permute_op();
OpTable stage_op();
OpTable silu_mul_op();
OpTable sigmoid_gate_op();
OpTable combine_sum_op();
OpTable attention_op();
OpTable norm_op();  ///< RMSNorm over hidden-wide rows (op_norm_rope.cpp)
OpTable rope_op();  ///< RoPE over a fused projection's q and k heads
/// An attention point's shape text: decode, tokens (prompt tokens or sequences), context, heads,
/// kv_heads, qk, v.
std::string attention_point_shape(const AttentionSweepShape& a, int tokens, int context);
OpTable quantize_fp8_op();
OpTable dequantize_fp8_op();
OpTable combine_reduce_op();
OpTable all_to_all_op();
OpTable all_to_all_v_op();
OpTable all_gather_op();
OpTable all_gather_v_op();
OpTable all_reduce_op();
OpTable reduce_scatter_op();

}  // namespace moeplan::profiler
