// `verify`: every requested layout × dispatcher × dtype × token count of the sharded MoE layer
// against the single-device dense reference with identical weights — the precision check of
// PaddleNLP #9368, over real token sweeps and every layout.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/communicator.hpp"
#include "kernels/moe_layer.hpp"

namespace moeplan::kernels {

struct VerifyRequest {
  models::MoeModel model;
  int scale = 1;
  std::vector<int> token_counts;
  std::vector<DType> dtypes;
  std::vector<Layout> layouts;  ///< each with ep·tp = the world size; dispatchers below
  std::vector<Dispatcher> dispatchers;
  std::uint64_t seed = 20241120;  ///< PaddleNLP #9368's merge date
  std::string backend = "cpu";    ///< compute backend of the sharded layer: cpu or cuda
  int device = 0;                 ///< CUDA device of the cuda backend
  DispatchOptions dispatch;       ///< ranks per node (deepep_normal), ll buffer (deepep_ll)
  /// The (layout, dispatcher) pairs left out, each with why (a DeepEP dispatcher on a layout
  /// with tp > 1, deepep_normal without two nodes, ...): cases runs() refuses.
  std::vector<std::string> skipped;
};

struct VerifyRow {
  Layout layout;  ///< with the dispatcher of this row
  DType dtype = DType::kFp32;
  int num_tokens = 0;
  double max_abs_diff = 0.0;   ///< max |sharded − reference|
  double max_rel_diff = 0.0;   ///< max |diff| / max |reference|
  double max_bound_use = 0.0;  ///< max |diff| / bound (≤ 1 passes)
  double max_abs_ref = 0.0;
  bool passed = false;
  double layer_ms = 0.0;  ///< the slowest rank's forward time
};

/// verify's settings as the front ends take them (lists comma-separated).
struct VerifyOptions {
  std::string model;  ///< bundled name or config.json path
  std::string tokens = "1024";
  std::string dtypes = "fp32,fp16,bf16";
  std::string layouts = "all";  ///< "all" (both rank mappings) or EPxTP list
  std::string dispatchers = "all";
  int scale = 1;
  std::uint64_t seed = 20241120;
  std::string backend = "cpu";
  int ranks_per_node = 0;  ///< group the ranks into nodes of this many (0: one node)
  int ll_max_tokens = 0;   ///< deepep_ll's buffer, tokens per rank (0: the largest rank's)
  /// Weight format (models::weight_format_names); empty: the model's own (DeepSeek-V3: its
  /// fp8 128×128 blocks). The kernels run plain, fp8-block, fp8-channel, fp8-tensor, and w4a16,
  /// mxfp4 or nvfp4 decoded on load.
  std::string weights;
};

/// The most tokens one verify case may have.
inline constexpr long kMaxVerifyTokens = 1L << 24;

/// The request for `world_size` ranks, checked (check_request); errors name the input.
Result<VerifyRequest> make_verify_request(const VerifyOptions& options, int world_size);

/// Checks every layout against the model and the world size before any work.
Status check_request(const VerifyRequest& request, int world_size);

/// The layer the request verifies at storage dtype `dtype`: the model scaled by the request's
/// scale, with the model's weight format (plain or fp8 blocks).
Result<LayerSpec> verify_spec(const VerifyRequest& request, DType dtype);

/// Whether the request runs `layout` with dispatcher `d` on `tokens` tokens
/// (kernel_dispatch_violation).
bool runs(const VerifyRequest& request, const Layout& layout, Dispatcher d, int tokens);

/// Cases a request runs: the pairs of layouts × dispatchers that runs() × dtypes × token counts.
int case_count(const VerifyRequest& request);

/// Runs the request collectively on `world` (every rank calls it). Rank 0 returns the rows;
/// other ranks return an empty vector. `progress(done, total, row)` runs on rank 0 after each
/// case with its row (the CLI prints it, so a job stopped part-way keeps what was checked).
std::vector<VerifyRow> run_verify(
    Communicator& world, const VerifyRequest& request,
    const std::function<void(int done, int total, const VerifyRow& row)>& progress = {});

}  // namespace moeplan::kernels
