// Inputs the libFuzzer targets (tests/fuzz) found crashing, kept as regression tests: each file
// in tests/fuzz/regressions/<target>/ goes through its target's parser and must come back as
// one error line naming the source, never a crash or an exception.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "models/json_reader.hpp"
#include "models/moe_model.hpp"
#include "planner/export.hpp"
#include "planner/placement/load_io.hpp"
#include "planner/placement/placement_file.hpp"

namespace moeplan::planner {
namespace test_fuzz_regressions {
namespace {

namespace fs = std::filesystem;

const fs::path kRegressions = fs::path(MOEPLAN_TEST_DATA_DIR) / ".." / "fuzz" / "regressions";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The parser each target drives; returns the error message ("" when the input parsed).
using Parser = std::function<std::string(const std::string&)>;

template <typename R>
std::string message(const R& r) {
  return r ? std::string() : r.error().message;
}

const std::map<std::string, Parser>& parsers() {
  static const std::map<std::string, Parser> p = {
      {"fuzz_model_config",
       [](const std::string& t) { return message(models::parse_model_config(t, "in", "in")); }},
      {"fuzz_cluster",
       [](const std::string& t) {
         auto j = parse_json(t, "in");
         return j ? message(parse_cluster(*j, "in")) : j.error().message;
       }},
      {"fuzz_load_json", [](const std::string& t) { return message(parse_load_json(t, "in")); }},
      {"fuzz_load_csv", [](const std::string& t) { return message(parse_load_csv(t, "in")); }},
      {"fuzz_load_npy",
       [](const std::string& t) {
         // The target feeds both readers of .npy files: counts and top-k traces.
         const std::string trace = message(parse_trace_npy(t, "in"));
         return trace.empty() ? message(parse_load_npy(t, "in")) : trace;
       }},
      {"fuzz_placement",
       [](const std::string& t) { return message(parse_placement_file(t, "in")); }},
      {"fuzz_plan",
       [](const std::string& t) {
         auto j = parse_json(t, "in");
         return j ? message(parse_plan_json(*j, "in")) : j.error().message;
       }},
      {"fuzz_layout", [](const std::string& t) { return message(parse_layout_file(t, "in")); }},
  };
  return p;
}

TEST(FuzzRegressions, EveryFoundInputIsAOneLineError) {
  ASSERT_TRUE(fs::is_directory(kRegressions)) << kRegressions;
  int checked = 0;
  for (const auto& dir : fs::directory_iterator(kRegressions)) {
    const std::string target = dir.path().filename().string();
    const auto it = parsers().find(target);
    ASSERT_NE(it, parsers().end()) << "no parser for " << dir.path();
    for (const auto& file : fs::directory_iterator(dir.path())) {
      SCOPED_TRACE(file.path().string());
      std::string msg;
      EXPECT_NO_THROW(msg = it->second(slurp(file.path())));
      EXPECT_EQ(msg.rfind("in: ", 0), 0U) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      ++checked;
    }
  }
  EXPECT_GE(checked, 4);
}

// The first finding (fuzz_model_config, and then every JSON target): a number literal past
// double's range made nlohmann::json throw out_of_range, which nothing caught.
TEST(FuzzRegressions, NumberPastDoubleRangeIsAnError) {
  for (const char* text : {"1e400", "{\"hidden_size\": 1e51643}", "[-1e309]"}) {
    auto j = parse_json(text, "f.json");
    ASSERT_FALSE(j) << text;
    EXPECT_EQ(j.error().message.rfind("f.json: invalid JSON: number overflow parsing '", 0), 0U)
        << j.error().message;
    EXPECT_NE(j.error().message.find("expected numbers within ±1.8e308"), std::string::npos);
  }
}

}  // namespace
}  // namespace test_fuzz_regressions
}  // namespace moeplan::planner
