// Parsing and checking of verify's and validate's case lists.
#include "kernels/case_lists.hpp"

#include <algorithm>
#include <exception>
#include <iterator>

#include "models/units.hpp"

namespace moeplan::kernels {

Result<std::vector<Layout>> parse_layout_list(const std::string& text, const LayerSpec& spec,
                                              int world, bool both_mappings,
                                              const std::string& model_name) {
  std::vector<Layout> layouts;
  if (text == "all") {
    for (const auto& l : legal_layouts(spec, world)) {
      layouts.push_back(l);
      if (both_mappings && l.ep_size > 1 && l.tp_size > 1) {
        layouts.push_back(Layout::of(l.ep_size, l.tp_size, RankMapping::kEpInnermost));
      }
    }
    if (layouts.empty()) {
      return input_error("layouts", " all: no legal layout of " + model_name + " on " +
                                        std::to_string(world) + " ranks");
    }
    return layouts;
  }
  for (const auto& item : split_list(text)) {
    auto l = parse_layout(item);
    if (!l) return input_error("layouts", ": " + l.error().message);
    MOEPLAN_TRY_STATUS(check_layout(spec, *l, world));
    layouts.push_back(*l);
  }
  if (layouts.empty()) return input_error("layouts", ": expected all or a list such as 4x1,2x2");
  return layouts;
}

Result<std::vector<Dispatcher>> parse_dispatcher_list(const std::string& text) {
  if (text == "all") {
    return std::vector<Dispatcher>(std::begin(kAllDispatchers), std::end(kAllDispatchers));
  }
  std::vector<Dispatcher> out;
  for (const auto& item : split_list(text)) {
    auto d = parse_dispatcher(item);
    if (!d) return input_error("dispatcher", ": " + d.error().message);
    out.push_back(*d);
  }
  if (out.empty()) return input_error("dispatcher", ": expected all or a list of dispatchers");
  return out;
}

Result<std::vector<int>> parse_token_list(const std::string& text, long max_tokens, int divisor) {
  std::vector<int> tokens;
  for (const auto& t : split_list(text)) {
    std::size_t used = 0;
    long v = 0;
    try {
      v = std::stol(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != t.size() || v < 1 || v > max_tokens || v % divisor != 0) {
      const std::string what = divisor > 1 ? "positive token counts divisible by the " +
                                                 std::to_string(divisor) +
                                                 " ranks (tokens per rank = count / ranks)"
                                           : "a comma-separated list of positive integers";
      return input_error("tokens", ": expected " + what + ", got '" + t + "'");
    }
    tokens.push_back(static_cast<int>(v));
  }
  if (tokens.empty()) return input_error("tokens", ": expected at least one token count");
  return tokens;
}

Result<std::vector<DType>> parse_storage_dtype_list(const std::string& text) {
  std::vector<DType> out;
  for (const auto& d : split_list(text)) {
    const auto dt = parse_dtype(d);
    if (!dt || *dt == DType::kFp8) {
      return input_error("dtype", ": expected fp32, fp16 or bf16, got '" + d + "'");
    }
    out.push_back(*dt);
  }
  if (out.empty()) return input_error("dtype", ": expected fp32, fp16 or bf16");
  return out;
}

}  // namespace moeplan::kernels
