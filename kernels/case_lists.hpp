// The lists `verify` and `validate` (and the GUI's Profiling view) take as text: layouts,
// dispatchers, token counts and storage dtypes, parsed and checked against a layer and a world
// size in one place. Errors name the input ("layouts", "tokens", ...).
#pragma once

#include <string>
#include <vector>

#include "kernels/moe_layer.hpp"
#include "models/dtype.hpp"
#include "models/result.hpp"

namespace moeplan::kernels {

/// "all" (every legal ep × tp on `world` ranks, ep descending; with `both_mappings` each
/// ep, tp > 1 layout also in the ep_innermost mapping) or a list "4x1,2x2" of EPxTP, each
/// checked against `spec` and `world` (check_layout). `model_name` is for the messages.
Result<std::vector<Layout>> parse_layout_list(const std::string& text, const LayerSpec& spec,
                                              int world, bool both_mappings,
                                              const std::string& model_name);

/// "all" (every dispatcher the sharded layer implements: the five of models::kAllDispatchers) or
/// a list of dispatcher names.
Result<std::vector<Dispatcher>> parse_dispatcher_list(const std::string& text);

/// A list of token counts in [1, max_tokens], each divisible by `divisor` (the ranks a count is
/// split over; 1: any).
Result<std::vector<int>> parse_token_list(const std::string& text, long max_tokens, int divisor);

/// A list of the CPU backend's storage dtypes (fp32, fp16, bf16); input `input` ("dtype").
Result<std::vector<DType>> parse_storage_dtype_list(const std::string& text);

}  // namespace moeplan::kernels
