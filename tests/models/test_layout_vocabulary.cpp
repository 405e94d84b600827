// The shared layout vocabulary: names and parsing round trips, rank arithmetic of both mappings,
// the legality rules' first broken rule, and how errors name their input.
#include <gtest/gtest.h>

#include <string>

#include "models/layout.hpp"
#include "models/result.hpp"

namespace moeplan::models {
namespace test_layout_vocabulary {
namespace {

TEST(LayoutVocabulary, NamesRoundTrip) {
  for (const Dispatcher d : kAllDispatchers) EXPECT_EQ(*parse_dispatcher(dispatcher_name(d)), d);
  for (const RankMapping m : kAllMappings) EXPECT_EQ(*parse_mapping(mapping_name(m)), m);
  EXPECT_EQ(dispatcher_name(Dispatcher::kAllGather), "allgather");
  EXPECT_EQ(mapping_name(RankMapping::kTpInnermost), "tp_innermost");
  EXPECT_EQ(parse_dispatcher("deepep").error().message,
            "unknown dispatcher 'deepep': expected padded_a2a, allgather, a2av, deepep_normal or "
            "deepep_ll");
  EXPECT_FALSE(parse_mapping("tp-inner").ok());
}

TEST(LayoutVocabulary, ShortAndShapeNames) {
  Layout l = Layout::of(8, 2, RankMapping::kEpInnermost, Dispatcher::kPaddedA2a);
  EXPECT_EQ(l.num_gpus, 16);
  EXPECT_EQ(l.short_name(), "8x2");
  EXPECT_EQ(l.shape_name(), "ep8×tp2");
  EXPECT_EQ(l.full_name(), "ep8×tp2 padded_a2a ep_innermost");
  l.tbo = true;
  EXPECT_EQ(l.full_name(), "ep8×tp2 padded_a2a ep_innermost tbo");
  l.tbo = false;
  l.dp_size = 2;
  l.num_gpus = 32;
  EXPECT_EQ(l.shape_name(), "dp2×ep8×tp2");
  auto parsed = parse_layout("4x2");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->ep_size, 4);
  EXPECT_EQ(parsed->tp_size, 2);
  EXPECT_EQ(parsed->num_gpus, 8);
  for (const char* bad : {"4", "x2", "4x", "4x2x", "0x2", "-1x2", "ax2", "4x2 "}) {
    EXPECT_FALSE(parse_layout(bad).ok()) << bad;
  }
}

TEST(LayoutVocabulary, RankArithmeticOfBothMappings) {
  // tp_innermost: rank = ep_rank·tp + tp_rank; ep_innermost: rank = tp_rank·ep + ep_rank.
  const Layout tp_inner = Layout::of(4, 2, RankMapping::kTpInnermost);
  const Layout ep_inner = Layout::of(4, 2, RankMapping::kEpInnermost);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(tp_inner.gpu(0, tp_inner.ep_rank(r), tp_inner.tp_rank(r)), r);
    EXPECT_EQ(ep_inner.gpu(0, ep_inner.ep_rank(r), ep_inner.tp_rank(r)), r);
  }
  EXPECT_EQ(tp_inner.ep_rank(5), 2);
  EXPECT_EQ(tp_inner.tp_rank(5), 1);
  EXPECT_EQ(ep_inner.ep_rank(5), 1);
  EXPECT_EQ(ep_inner.tp_rank(5), 1);
  EXPECT_EQ(tp_inner.tp_groups().front(), (std::vector<int>{0, 1}));
  EXPECT_EQ(ep_inner.ep_groups().front(), (std::vector<int>{0, 1, 2, 3}));
}

TEST(LayoutVocabulary, FirstBrokenRule) {
  const LayoutDims qwen15{60, 1408, 5632};
  EXPECT_FALSE(layout_violation(qwen15, 4, 2).has_value());
  auto v = layout_violation(qwen15, 8, 1);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rule, LayoutViolation::Rule::kExperts);
  EXPECT_EQ(v->rule_text(), "num_experts % ep_size == 0: 60 % 8 = 4");
  v = layout_violation(qwen15, 1, 3);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rule_text(), "moe_intermediate_size % tp_size == 0: 1408 % 3 = 1");
  // A shared width of 5630 (5630 % 4 = 2) breaks only the third rule at tp 4.
  v = layout_violation({60, 1408, 5630}, 1, 4);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rule, LayoutViolation::Rule::kSharedWidth);
  EXPECT_EQ(v->rule_text(), "shared expert width % tp_size == 0: 5630 % 4 = 2");
}

TEST(LayoutVocabulary, RedundantSlotsMakeEpSizesLegal) {
  // DeepSeek-V3's published decode deployment: 256 experts + 32 redundant on EP144.
  LayoutDims dsv3{256, 2048, 2048};
  auto v = layout_violation(dsv3, 144, 1);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rule_text(), "num_experts % ep_size == 0: 256 % 144 = 112");
  dsv3.redundant = 32;
  EXPECT_FALSE(layout_violation(dsv3, 144, 1).has_value());
  EXPECT_FALSE(layout_violation(dsv3, 32, 1).has_value());  // prefill: EP32, 9 per GPU
  dsv3.redundant = 30;
  v = layout_violation(dsv3, 144, 1);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rule_text(), "(num_experts + redundant) % ep_size == 0: (256 + 30) % 144 = 142");

  EXPECT_EQ(Redundancy::per_rank(2).redundant_at(256, 16), 32);
  EXPECT_EQ(Redundancy::total(32).redundant_at(256, 144), 32);
  EXPECT_EQ(Redundancy::total(32).redundant_at(256, 16), 32);
  // auto: the fewest slots that make the EP size legal (fewer than one per rank).
  EXPECT_EQ(Redundancy::automatic().redundant_at(256, 144), 32);
  EXPECT_EQ(Redundancy::automatic().redundant_at(256, 16), 0);
  EXPECT_EQ(Redundancy::automatic().redundant_at(256, 9), 5);
  EXPECT_EQ(Redundancy::automatic().redundant_at(60, 8), 4);
  EXPECT_TRUE(Redundancy{}.none());
  EXPECT_TRUE(Redundancy::total(0).none());
  EXPECT_FALSE(Redundancy::automatic().none());

  EXPECT_EQ(parse_redundancy("3", 16, 100).value().text(), "3");
  EXPECT_EQ(parse_redundancy("total:32", 16, 100).value().describe(), "32 in all");
  EXPECT_EQ(parse_redundancy("auto", 16, 100).value().kind, Redundancy::Kind::kAuto);
  EXPECT_EQ(parse_redundancy("17", 16, 100).error().message,
            "'17': expected N (0..16 redundant slots per EP rank), total:R (0..100 redundant "
            "slots in all) or auto");
  EXPECT_FALSE(parse_redundancy("total:101", 16, 100).ok());
  EXPECT_TRUE(parse_redundancy("total:100", 16, 100).ok());
  for (const char* bad : {"", "-1", "total:", "total:x", "2.5", "Auto", "1e3", "9999999999"}) {
    EXPECT_FALSE(parse_redundancy(bad, 16, 100).ok()) << bad;
  }
}

TEST(ErrorInput, FrontEndsNameTheInputTheirWay) {
  const Error e = input_error("max_tokens", ": expected at most 1048576, got 2");
  EXPECT_EQ(e.input, "max_tokens");
  EXPECT_EQ(e.message, "max_tokens: expected at most 1048576, got 2");
  const auto flag = [](const std::string& in) { return "--" + in; };
  EXPECT_EQ(render_error(e, flag), "--max_tokens: expected at most 1048576, got 2");
  // Other inputs named inside the message as {name}; text braces that are not names stay.
  const Error hint{"cluster 'x' has 72 GPUs: use {gpus} 64 or {a-b} {}", "cluster"};
  EXPECT_EQ(render_error(hint, flag), "--cluster 'x' has 72 GPUs: use --gpus 64 or {a-b} {}");
  const Error file_error{"config.json: key 'x': expected a number"};
  EXPECT_EQ(render_error(file_error, flag), "config.json: key 'x': expected a number");
  // The same input under another name (plan --export takes export's --format).
  const Error renamed = with_input(input_error("format", ": expected sglang"), "export");
  EXPECT_EQ(renamed.message, "export: expected sglang");
  EXPECT_EQ(renamed.input, "export");
  // The command line's spelling, which the CLI and the JSON outputs use.
  EXPECT_EQ(cli_flag("ll_max_tokens"), "--ll-max-tokens");
  EXPECT_EQ(cli_flag("gpus"), "--gpus");
  EXPECT_EQ(render_flags("raise {ll_max_tokens}, or use more GPUs ({gpus}); {a-b} stays"),
            "raise --ll-max-tokens, or use more GPUs (--gpus); {a-b} stays");
}

}  // namespace
}  // namespace test_layout_vocabulary
}  // namespace moeplan::models
