// `moeplan rebalance` as a user runs it: the golden table on the bundled 16-step load, its JSON
// (every scheme with its per-step series), --no-align, and bad inputs (exit 2, one line, no
// output file).
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.hpp"

namespace moeplan::cli_test {
namespace test_cli_rebalance {
namespace {

std::string steps16() {
  return (moeplan::resource_dir() / "loads" / "dsv2lite_esft_steps16.npy").string();
}

const std::string kBase =
    "rebalance --model deepseek-v2-lite --cluster 2x-hgx-h200 --every 2,4 --window 2,4 --load ";

TEST(CliRebalance, TextGolden) {
  const auto r = run_cli(kBase + steps16());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("rebalance_dsv2lite_steps16.txt", r.out);
}

TEST(CliRebalance, JsonHasEverySchemeAndItsSeries) {
  const auto r = run_cli(kBase + steps16() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("layout"), "ep16×tp1");
  EXPECT_EQ(j.at("steps"), 16);
  EXPECT_EQ(j.at("first_scored_step"), 4);
  EXPECT_TRUE(j.at("aligned").get<bool>());
  const auto& schemes = j.at("schemes");
  ASSERT_EQ(schemes.size(), 5U);  // fixed + 2 × 2
  EXPECT_EQ(schemes[0].at("every"), 0);
  const int rec = j.at("recommended");
  for (const auto& s : schemes) {
    EXPECT_EQ(s.at("series").at("moe_ms").size(), 12U);
    EXPECT_EQ(s.at("series").at("move_ms").size(), 12U);
    EXPECT_EQ(s.at("series").at("balancedness").size(), 12U);
    EXPECT_GE(s.at("net_ms_per_step").get<double>(),
              schemes[static_cast<std::size_t>(rec)].at("net_ms_per_step").get<double>());
  }
  // Every 2 steps over 12 scored steps: 5 rebalances; every 4: 2.
  EXPECT_EQ(schemes[1].at("rebalances"), 5);
  EXPECT_EQ(schemes[3].at("rebalances"), 2);
}

TEST(CliRebalance, AligningNeverCopiesMore) {
  const auto a = run_cli(kBase + steps16() + " --json");
  const auto b = run_cli(kBase + steps16() + " --json --no-align");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_FALSE(jb.at("aligned").get<bool>());
  for (std::size_t i = 0; i < ja.at("schemes").size(); ++i) {
    const auto& sa = ja["schemes"][i];
    const auto& sb = jb["schemes"][i];
    EXPECT_LE(sa.at("bytes_moved").get<double>(), sb.at("bytes_moved").get<double>());
    // The same balance either way: alignment only relabels ranks and nodes.
    EXPECT_DOUBLE_EQ(sa.at("mean_balancedness").get<double>(),
                     sb.at("mean_balancedness").get<double>());
  }
}

TEST(CliRebalance, BadInputOneLineExitTwo) {
  const auto out = std::filesystem::temp_directory_path() / "moeplan_rebalance_out.txt";
  std::filesystem::remove(out);
  const std::string no_steps = (moeplan::resource_dir() / "loads" / "dsv2lite_esft.json").string();
  const std::vector<std::pair<std::string, std::string>> cases{
      {"rebalance --model deepseek-v2-lite", "--load: expected a load file with steps"},
      {kBase + no_steps, "has no steps"},
      {kBase + "powerlaw:alpha=1.2", "load 'powerlaw:alpha=1.2' has no steps"},
      {kBase + steps16() + " --window 16", "--window of 16 leaves none to score"},
      {kBase + steps16() + " --every 0", "--every ≥ 1"},
      {kBase + steps16() + " --policy contiguous", "--policy: expected eplb or best"},
      {kBase + steps16() + " --ep 3", "--ep 3 × tp 1 is illegal"},
      {kBase + steps16() + " --tokens 0", "--tokens: expected a positive number"},
      {kBase + steps16() + " --record-steps 0", "--record-steps ≥ 1"},
      {kBase + steps16() + " --dispatcher deepep_normal --tp 2",
       "--dispatcher deepep_normal cannot run"},
      {"rebalance --model mixtral-8x7b --ep 8 --load " + steps16(), "expected 32 (MoE layers"},
  };
  for (const auto& [args, part] : cases) {
    const auto r = run_cli(args + " -o " + out.string());
    expect_one_line_error(r, part);
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
}

}  // namespace
}  // namespace test_cli_rebalance
}  // namespace moeplan::cli_test
