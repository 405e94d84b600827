// The layout vocabulary every module shares: dispatchers, rank mappings, the layout
// (dp × ep × tp on a number of GPUs, a dispatcher and a rank mapping) with its rank arithmetic and
// names, and the legality rules of ep × tp for a model's widths. The planner enumerates and costs
// layouts, the kernels run them, the profiler measures them, the exporters write them: all with
// these definitions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/result.hpp"

namespace moeplan::models {

/// How tokens reach their experts and come back (ARCHITECTURE.md).
enum class Dispatcher : std::uint8_t {
  kPaddedA2a,  ///< PaddleNLP #9368: capacity = global max, equal-split all-to-all, padded compute
  kAllGather,  ///< sglang-jax #349: all-gather tokens, local filter, TP all-reduce, all-gather-v
  kA2av,       ///< dropless variable all-to-all after a count exchange (DeepEP-style)
  /// DeepEP normal mode: each token once per destination node (fp8 values + one fp32 scale per
  /// 128 + metadata) over RDMA to the same-rail GPU, which forwards it over NVLink to the GPUs
  /// holding its experts; combine (bf16) reversed, reduced before the inter-node hop. Whole nodes
  /// only (ep_size a multiple of the ranks per node, at least two nodes), tp_size 1.
  kDeepEpNormal,
  /// DeepEP low-latency mode: every (token, expert) pair sent directly as fp8 values + one fp32
  /// scale per 128 + metadata into a fixed per-rank buffer (max tokens per rank); bf16 combine.
  /// tp_size 1.
  kDeepEpLl,
};
inline constexpr Dispatcher kAllDispatchers[] = {Dispatcher::kPaddedA2a, Dispatcher::kAllGather,
                                                 Dispatcher::kA2av, Dispatcher::kDeepEpNormal,
                                                 Dispatcher::kDeepEpLl};

/// Which GPU (rank) holds which (ep_rank, tp_rank) inside one replica.
enum class RankMapping : std::uint8_t {
  kTpInnermost,  ///< rank = ep_rank · tp + tp_rank (both seeds): TP groups are neighbours
  kEpInnermost,  ///< rank = tp_rank · ep + ep_rank: EP groups are neighbours
};
inline constexpr RankMapping kAllMappings[] = {RankMapping::kTpInnermost,
                                               RankMapping::kEpInnermost};

/// "padded_a2a", "allgather", "a2av", "deepep_normal", "deepep_ll".
std::string dispatcher_name(Dispatcher d);
/// True for the two DeepEP dispatchers (tokens of whole EP ranks, tp_size 1).
bool is_deepep(Dispatcher d);
std::string mapping_name(RankMapping m);  ///< "tp_innermost", "ep_innermost"
/// Parses a dispatcher name; the error lists the names.
Result<Dispatcher> parse_dispatcher(const std::string& name);
/// Parses a mapping name; the error lists the names.
Result<RankMapping> parse_mapping(const std::string& name);

/// dp × ep × tp on `num_gpus` GPUs (dp · ep · tp = num_gpus), a dispatcher and a rank mapping.
struct Layout {
  int num_gpus = 1;  ///< GPUs (ranks) the layout uses: 0..num_gpus-1
  int dp_size = 1;   ///< attention data-parallel replicas of the MoE group (1 unless asked)
  int ep_size = 1;
  int tp_size = 1;
  Dispatcher dispatcher = Dispatcher::kA2av;
  RankMapping mapping = RankMapping::kTpInnermost;
  /// Two-batch overlap (SGLang --enable-two-batch-overlap, DeepSeek's pipeline): the step runs
  /// as two micro-batches, the dispatch and combine of one under the compute of the other.
  bool tbo = false;

  /// A single replica of ep × tp on ep · tp ranks.
  static Layout of(int ep_size, int tp_size, RankMapping mapping = RankMapping::kTpInnermost,
                   Dispatcher dispatcher = Dispatcher::kA2av);

  /// Ranks of one replica: ep · tp.
  int group_size() const { return ep_size * tp_size; }
  /// EP rank of rank `r` inside its replica (r in [0, ep · tp)).
  int ep_rank(int r) const;
  /// TP rank of rank `r` inside its replica.
  int tp_rank(int r) const;
  /// Global GPU index of (replica, ep_rank, tp_rank).
  int gpu(int replica, int ep_rank, int tp_rank) const;
  /// Every EP group (one per replica and TP rank), each in EP-rank order.
  std::vector<std::vector<int>> ep_groups() const;
  /// Every TP group (one per replica and EP rank), each in TP-rank order.
  std::vector<std::vector<int>> tp_groups() const;
  /// "ep8×tp2" (with "dp2×" in front when dp_size > 1): how plans show a layout.
  std::string shape_name() const;
  /// "8x2": ep × tp as the command lines take it (--layouts, --layout).
  std::string short_name() const;
  /// "ep8×tp2 a2av tp_innermost": shape, dispatcher and mapping (and " tbo" with two-batch
  /// overlap).
  std::string full_name() const;
};

/// Parses "EPxTP" (e.g. "4x2") into a single-replica layout (mapping tp_innermost).
Result<Layout> parse_layout(const std::string& text);

/// The widths the legality rules look at.
struct LayoutDims {
  std::int64_t num_experts = 0;
  std::int64_t expert_width = 0;  ///< moe_intermediate_size
  std::int64_t shared_width = 0;  ///< total shared-expert width (0: none)
  std::int64_t redundant = 0;     ///< redundant expert slots (replicas of hot experts) in all
};

/// How many redundant expert slots (replicas of hot experts, placed by eplb or best) each EP
/// size gets. With R redundant slots an EP size is legal when (E + R) % ep == 0: every EP rank
/// holds (E + R) / ep slots.
struct Redundancy {
  enum class Kind : std::uint8_t {
    kPerRank,  ///< `count` slots per EP rank: R = count · ep (every EP size with E % ep == 0)
    kTotal,    ///< R = `count` at every EP size (DeepSeek's decode deployment: 256 + 32 on 144)
    kAuto,     ///< per EP size, the smallest R ≥ 0 with (E + R) % ep == 0 (under one per rank)
  };
  Kind kind = Kind::kPerRank;
  int count = 0;

  static Redundancy per_rank(int n) { return {Kind::kPerRank, n}; }
  static Redundancy total(int r) { return {Kind::kTotal, r}; }
  static Redundancy automatic() { return {Kind::kAuto, 0}; }
  /// No redundant slots at any EP size.
  bool none() const { return kind != Kind::kAuto && count == 0; }
  /// R for `num_experts` experts on `ep_size` EP ranks.
  std::int64_t redundant_at(std::int64_t num_experts, int ep_size) const;
  /// As --redundant takes it: "2", "total:32", "auto".
  std::string text() const;
  /// For tables: "2 per EP rank", "32 in all", "auto (smallest legal)".
  std::string describe() const;
};

/// Parses --redundant: "N" (per EP rank, N ≤ max_per_rank), "total:R" (R in all at every EP
/// size, R ≤ max_total) or "auto". The error says what was expected (the caller names the input).
Result<Redundancy> parse_redundancy(const std::string& text, int max_per_rank, int max_total);

/// The first rule ep × tp breaks.
struct LayoutViolation {
  enum class Rule : std::uint8_t { kExperts, kExpertWidth, kSharedWidth };
  Rule rule = Rule::kExperts;
  std::int64_t value = 0;      ///< the count or width that does not divide (experts: E + R)
  int divisor = 1;             ///< ep_size or tp_size
  std::int64_t redundant = 0;  ///< kExperts: the R in value = E + R

  /// "num_experts % ep_size == 0: 60 % 8 = 4", with redundant slots
  /// "(num_experts + redundant) % ep_size == 0: (256 + 30) % 144 = 142" (how --explain lists
  /// excluded layouts).
  std::string rule_text() const;
};

/// The first rule (ep, tp) breaks for these widths, or nothing when legal: (E + R) % ep == 0,
/// expert width % tp == 0, shared expert width % tp == 0.
std::optional<LayoutViolation> layout_violation(const LayoutDims& dims, int ep_size, int tp_size);

/// Why dispatcher `d` cannot run ep × tp with `ranks_per_node` ranks per node (0: one node), or
/// nothing when it can: the DeepEP dispatchers need tp_size 1; deepep_normal needs whole nodes,
/// at least two (ep_size a multiple of ranks_per_node, > ranks_per_node).
std::optional<std::string> dispatcher_violation(Dispatcher d, int ep_size, int tp_size,
                                                int ranks_per_node);

}  // namespace moeplan::models
