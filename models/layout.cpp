// The layout vocabulary: names, parsing, rank arithmetic and legality rules.
#include "models/layout.hpp"

#include <algorithm>
#include <exception>

namespace moeplan::models {

std::string dispatcher_name(Dispatcher d) {
  switch (d) {
    case Dispatcher::kPaddedA2a: return "padded_a2a";
    case Dispatcher::kAllGather: return "allgather";
    case Dispatcher::kA2av: return "a2av";
    case Dispatcher::kDeepEpNormal: return "deepep_normal";
    case Dispatcher::kDeepEpLl: return "deepep_ll";
  }
  return "?";
}

bool is_deepep(Dispatcher d) {
  return d == Dispatcher::kDeepEpNormal || d == Dispatcher::kDeepEpLl;
}

std::string mapping_name(RankMapping m) {
  return m == RankMapping::kTpInnermost ? "tp_innermost" : "ep_innermost";
}

Result<Dispatcher> parse_dispatcher(const std::string& name) {
  for (const Dispatcher d : kAllDispatchers) {
    if (dispatcher_name(d) == name) return d;
  }
  return Error{"unknown dispatcher '" + name +
               "': expected padded_a2a, allgather, a2av, deepep_normal or deepep_ll"};
}

Result<RankMapping> parse_mapping(const std::string& name) {
  for (const RankMapping m : kAllMappings) {
    if (mapping_name(m) == name) return m;
  }
  return Error{"unknown rank mapping '" + name + "': expected tp_innermost or ep_innermost"};
}

Layout Layout::of(int ep_size, int tp_size, RankMapping mapping, Dispatcher dispatcher) {
  Layout l;
  l.num_gpus = ep_size * tp_size;
  l.ep_size = ep_size;
  l.tp_size = tp_size;
  l.mapping = mapping;
  l.dispatcher = dispatcher;
  return l;
}

int Layout::ep_rank(int r) const {
  return mapping == RankMapping::kTpInnermost ? r / tp_size : r % ep_size;
}

int Layout::tp_rank(int r) const {
  return mapping == RankMapping::kTpInnermost ? r % tp_size : r / ep_size;
}

int Layout::gpu(int replica, int ep_rank_, int tp_rank_) const {
  const int base = replica * ep_size * tp_size;
  return base + (mapping == RankMapping::kTpInnermost ? ep_rank_ * tp_size + tp_rank_
                                                      : tp_rank_ * ep_size + ep_rank_);
}

std::vector<std::vector<int>> Layout::ep_groups() const {
  std::vector<std::vector<int>> out;
  for (int r = 0; r < dp_size; ++r) {
    for (int t = 0; t < tp_size; ++t) {
      std::vector<int> g;
      for (int e = 0; e < ep_size; ++e) g.push_back(gpu(r, e, t));
      out.push_back(std::move(g));
    }
  }
  return out;
}

std::vector<std::vector<int>> Layout::tp_groups() const {
  std::vector<std::vector<int>> out;
  for (int r = 0; r < dp_size; ++r) {
    for (int e = 0; e < ep_size; ++e) {
      std::vector<int> g;
      for (int t = 0; t < tp_size; ++t) g.push_back(gpu(r, e, t));
      out.push_back(std::move(g));
    }
  }
  return out;
}

std::string Layout::shape_name() const {
  std::string s = "ep" + std::to_string(ep_size) + "×tp" + std::to_string(tp_size);
  return dp_size > 1 ? "dp" + std::to_string(dp_size) + "×" + s : s;
}

std::string Layout::short_name() const {
  return std::to_string(ep_size) + "x" + std::to_string(tp_size);
}

std::string Layout::full_name() const {
  return shape_name() + " " + dispatcher_name(dispatcher) + " " + mapping_name(mapping) +
         (tbo ? " tbo" : "");
}

Result<Layout> parse_layout(const std::string& text) {
  const auto x = text.find('x');
  const auto bad = Error{"layout '" + text + "': expected EPxTP with positive integers, e.g. 4x2"};
  if (x == std::string::npos || x == 0 || x + 1 == text.size()) return bad;
  int ep = 0;
  int tp = 0;
  try {
    std::size_t used = 0;
    ep = std::stoi(text.substr(0, x), &used);
    if (used != x) return bad;
    tp = std::stoi(text.substr(x + 1), &used);
    if (used != text.size() - x - 1) return bad;
  } catch (const std::exception&) {
    return bad;
  }
  if (ep < 1 || tp < 1) return bad;
  return Layout::of(ep, tp);
}

std::int64_t Redundancy::redundant_at(std::int64_t num_experts, int ep_size) const {
  switch (kind) {
    case Kind::kPerRank: return static_cast<std::int64_t>(count) * ep_size;
    case Kind::kTotal: return count;
    case Kind::kAuto: return ep_size > 0 ? (ep_size - num_experts % ep_size) % ep_size : 0;
  }
  return 0;
}

std::string Redundancy::text() const {
  switch (kind) {
    case Kind::kPerRank: return std::to_string(count);
    case Kind::kTotal: return "total:" + std::to_string(count);
    case Kind::kAuto: return "auto";
  }
  return "?";
}

std::string Redundancy::describe() const {
  switch (kind) {
    case Kind::kPerRank: return std::to_string(count) + " per EP rank";
    case Kind::kTotal: return std::to_string(count) + " in all";
    case Kind::kAuto: return "auto (the fewest that make each EP size legal)";
  }
  return "?";
}

Result<Redundancy> parse_redundancy(const std::string& text, int max_per_rank, int max_total) {
  if (text == "auto") return Redundancy::automatic();
  const bool total = text.rfind("total:", 0) == 0;
  const std::string digits = total ? text.substr(6) : text;
  const auto bad = Error{"'" + text + "': expected N (0.." + std::to_string(max_per_rank) +
                         " redundant slots per EP rank), total:R (0.." + std::to_string(max_total) +
                         " redundant slots in all) or auto"};
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return bad;
  }
  const long long n = std::stoll(digits);
  if (n > (total ? max_total : max_per_rank)) return bad;
  return total ? Redundancy::total(static_cast<int>(n)) : Redundancy::per_rank(static_cast<int>(n));
}

std::string LayoutViolation::rule_text() const {
  const std::string v = std::to_string(value);
  const std::string d = std::to_string(divisor);
  const std::string rem = std::to_string(value % divisor);
  switch (rule) {
    case Rule::kExperts:
      if (redundant > 0) {
        return "(num_experts + redundant) % ep_size == 0: (" + std::to_string(value - redundant) +
               " + " + std::to_string(redundant) + ") % " + d + " = " + rem;
      }
      return "num_experts % ep_size == 0: " + v + " % " + d + " = " + rem;
    case Rule::kExpertWidth:
      return "moe_intermediate_size % tp_size == 0: " + v + " % " + d + " = " + rem;
    case Rule::kSharedWidth:
      return "shared expert width % tp_size == 0: " + v + " % " + d + " = " + rem;
  }
  return "?";
}

std::optional<LayoutViolation> layout_violation(const LayoutDims& dims, int ep_size, int tp_size) {
  using Rule = LayoutViolation::Rule;
  const std::int64_t slots = dims.num_experts + dims.redundant;
  if (slots % ep_size != 0) return LayoutViolation{Rule::kExperts, slots, ep_size, dims.redundant};
  if (dims.expert_width % tp_size != 0) {
    return LayoutViolation{Rule::kExpertWidth, dims.expert_width, tp_size};
  }
  if (dims.shared_width > 0 && dims.shared_width % tp_size != 0) {
    return LayoutViolation{Rule::kSharedWidth, dims.shared_width, tp_size};
  }
  return std::nullopt;
}

std::optional<std::string> dispatcher_violation(Dispatcher d, int ep_size, int tp_size,
                                                int ranks_per_node) {
  if (!is_deepep(d)) return std::nullopt;
  if (tp_size != 1) {
    return dispatcher_name(d) + " sends whole tokens to EP ranks: expected tp_size 1, got " +
           std::to_string(tp_size);
  }
  if (d == Dispatcher::kDeepEpNormal) {
    if (ranks_per_node <= 0 || ep_size <= ranks_per_node || ep_size % ranks_per_node != 0) {
      return "deepep_normal spans whole nodes: expected ep_size a multiple of the " +
             std::to_string(std::max(ranks_per_node, 1)) +
             " ranks per node and at least two nodes, got ep_size " + std::to_string(ep_size);
    }
  }
  return std::nullopt;
}

}  // namespace moeplan::models
