// `moeplan profile`, `validate` and `plan --costs` as a user runs them: one-line errors before
// any file is written, and a cost database that survives kill -9 at any moment, Ctrl-C, and two
// profiles writing it at once.
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/backends.hpp"
#include "planner/costs/cost_db.hpp"
#include "tests/cli/cli_runner.hpp"

namespace moeplan::cli_test {
namespace test_profile_cli {
namespace {

namespace fs = std::filesystem;

// A small profile: Qwen1.5-MoE at 1/16 width, powers of two, two in-process ranks.
const char* kTinyProfile =
    "profile --model qwen1.5-moe-a2.7b --scale 16 --quick --max-tokens 32 --max-bytes 16384 "
    "--cold-mib 4 "
    "--ranks 2";

class ProfileCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("moeplan_profile_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string db() const { return (dir_ / "p.db").string(); }
  fs::path dir_;
};

void expect_bad_input(const CliResult& r, const std::string& part) {
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("moeplan: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
}

TEST_F(ProfileCli, BadInputIsOneLineAndWritesNothing) {
  expect_bad_input(run_cli("profile --quick"), "--out");
  expect_bad_input(run_cli("profile --cold-mib 0 --out " + db()),
                   "--cold-mib 0: expected 1 to 65536 MiB");
  expect_bad_input(run_cli("profile --cold-mib 65537 --out " + db()), "--cold-mib 65537");
  // A CUDA profile of several ranks is one process per GPU under a launcher (its collectives over
  // NCCL); in-process ranks are refused, saying so. Without a usable device it refuses before
  // touching the file, saying why.
  expect_bad_input(run_cli("profile --backend cuda --ranks 2 --out " + db()),
                   "--backend cuda on 2 in-process ranks: a CUDA profile of collectives runs one "
                   "process per GPU; expected mpirun/srun -np 2 (or one rank)");
  const auto inventory = kernels::backend_inventory();
  if (!inventory[1].usable) {
    expect_bad_input(run_cli("profile --backend cuda --quick --out " + db()),
                     inventory[1].compiled ? "--backend cuda: no usable CUDA device: "
                                           : "--backend cuda: not compiled in");
  }
  expect_bad_input(run_cli("profile --backend tpu --out " + db()), "--backend tpu: expected");
  expect_bad_input(run_cli("profile --dtype fp8 --out " + db()), "--dtype");
  expect_bad_input(run_cli("profile --model qwen1.5-moe-a2.7b --scale 7 --out " + db()),
                   "--scale 7");
  expect_bad_input(run_cli("profile --model nonsense --out " + db()), "nonsense");
  expect_bad_input(run_cli("profile --ops gemm,warp --out " + db()), "'warp'");
  expect_bad_input(run_cli("profile --ops all_reduce --out " + db()), "collectives need");
  expect_bad_input(run_cli("profile --cluster local:4 --out " + db()), "local:1");
  expect_bad_input(run_cli("profile --out " + (dir_ / "missing" / "p.db").string()),
                   "does not exist");
  EXPECT_FALSE(fs::exists(db()));
  // An existing file is never overwritten without --resume.
  { std::ofstream(db()) << "keep"; }
  expect_bad_input(run_cli("profile --quick --out " + db()), "--resume");
  EXPECT_EQ(slurp(db()), "keep");
}

TEST_F(ProfileCli, ValidateAndPlanBadInput) {
  expect_bad_input(run_cli("validate --scale 16 --model qwen1.5-moe-a2.7b"), "--costs");
  expect_bad_input(run_cli("validate --costs " + db()), "no such file");
  { std::ofstream(db()) << "not sqlite"; }
  expect_bad_input(run_cli("validate --model qwen1.5-moe-a2.7b --scale 16 --costs " + db()),
                   "--costs");
  expect_bad_input(run_cli("validate --model qwen1.5-moe-a2.7b --scale 16 --ranks 2 --tokens 33 "
                           "--costs " +
                           db()),
                   "--tokens");
  expect_bad_input(run_cli("validate --model qwen1.5-moe-a2.7b --scale 16 --ranks 2 --layouts 3x1 "
                           "--costs " +
                           db()),
                   "layout 3x1");
  expect_bad_input(run_cli("validate --statistic mean --costs " + db()), "--statistic");
  expect_bad_input(run_cli("validate --backend tpu --costs " + db()),
                   "--backend tpu: expected cpu or cuda");
  expect_bad_input(run_cli("validate --model qwen1.5-moe-a2.7b --scale 16 --ranks 2 --backend "
                           "cuda --costs " +
                           db()),
                   "--backend cuda on 2 ranks: the layer's collectives through NCCL");
  if (!kernels::backend_inventory()[1].usable) {
    expect_bad_input(run_cli("validate --model qwen1.5-moe-a2.7b --scale 16 --ranks 1 --backend "
                             "cuda --costs " +
                             db()),
                     kernels::backend_inventory()[1].compiled ? "--backend cuda: no usable CUDA"
                                                              : "--backend cuda: not compiled in");
  }
  // The weight format: 4-bit groups must divide the widths.
  expect_bad_input(
      run_cli("validate --model qwen1.5-moe-a2.7b --scale 16 --weights nvfp4 --costs " + db()),
      "--weights: nvfp4 groups of 16 inputs do not divide moe_intermediate_size = 88");
  expect_bad_input(
      run_cli("validate --model qwen1.5-moe-a2.7b --scale 16 --weights mxfp4 --costs " + db()),
      "do not divide moe_intermediate_size = 88");
  expect_bad_input(run_cli("plan --cluster local:2"), "--costs");
  expect_bad_input(run_cli("plan --cluster local:zero --costs " + db()), "local:N");
}

TEST_F(ProfileCli, ProfileThenPlanAndValidateFromIt) {
  const auto p = run_cli(std::string(kTinyProfile) + " --out " + db());
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("0 incorrect"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("/ranks=2"), std::string::npos) << p.out;
  // The planner on "this machine with 2 ranks", every figure from the database.
  const auto plan = run_cli(
      "plan --model qwen1.5-moe-a2.7b --cluster local:2 --tokens 32 --costs " + db() + " --json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const auto j = nlohmann::json::parse(plan.out);
  EXPECT_EQ(j.at("cost_source").get<std::string>(), "measured:" + db());
  ASSERT_FALSE(j.at("layouts").empty());
  for (const auto& [part, src] : j.at("layouts").front().at("sources").items()) {
    EXPECT_FALSE(src.get<std::string>().empty()) << part;
  }
  // A model the profile did not measure: the misses are named.
  const auto other = run_cli("plan --model qwen3-30b-a3b --cluster local:2 --costs " + db());
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_NE(other.out.find("missed the cost database"), std::string::npos) << other.out;
  EXPECT_NE(other.out.find("gemm n="), std::string::npos) << other.out;
  // validate: predicted vs measured for one layout and dispatcher.
  const auto v = run_cli(
      "validate --model qwen1.5-moe-a2.7b --scale 16 --ranks 2 --layouts 2x1 "
      "--dispatcher a2av --tokens 32 --max-seconds 0.05 --json --costs " +
      db());
  ASSERT_EQ(v.exit_code, 0) << v.err;
  const auto vj = nlohmann::json::parse(v.out);
  ASSERT_EQ(vj.at("rows").size(), 1U);
  const auto& row = vj.at("rows").front();
  for (const char* key : {"predicted_ms", "roofline_ms", "measured_ms"}) {
    EXPECT_GT(row.at(key).get<double>(), 0.0) << key;
  }
  EXPECT_NEAR(row.at("error").get<double>(),
              (row.at("predicted_ms").get<double>() - row.at("measured_ms").get<double>()) /
                  row.at("measured_ms").get<double>(),
              1e-9);
  EXPECT_TRUE(row.at("verified").get<bool>());
  EXPECT_TRUE(row.at("sources").contains("experts"));
  // The rank's weights (30 experts of 3 × 128 × 88 fp32 and the shared expert, ~4.6 MB) exceed
  // the profile's 4 MiB rotation alone: one copy, where the default 256 MiB would take 59.
  EXPECT_EQ(row.at("copies").get<int>(), 1);
  // A resume with another rotation is refused in one line before anything is measured.
  expect_bad_input(run_cli("profile --model qwen1.5-moe-a2.7b --scale 16 --quick --max-tokens 32 "
                           "--max-bytes 16384 --cold-mib 8 --ranks 2 --resume --out " +
                           db()),
                   "--cold-mib 8: " + db() + " was profiled with a rotation of 4 MiB (run 1)");
  // MXFP4 weights decoded on load (1/4 width: I 352, whole groups of 32): the layer runs and is
  // verified; the prediction prices the same plain GEMMs (the profile is at 1/16: misses).
  const auto q = run_cli(
      "validate --model qwen1.5-moe-a2.7b --scale 4 --weights mxfp4 --ranks 2 --layouts 2x1 "
      "--dispatcher a2av --tokens 32 --max-seconds 0.05 --json --costs " +
      db());
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const auto qj = nlohmann::json::parse(q.out);
  ASSERT_EQ(qj.at("rows").size(), 1U);
  EXPECT_TRUE(qj.at("rows").front().at("verified").get<bool>());
  EXPECT_GT(qj.at("rows").front().at("predicted_ms").get<double>(), 0.0);

  // The DeepEP dispatchers on the 2 ranks as 2 nodes of 1: measured like the others, their
  // fp8 quantize/dequantize and the reductions from the profile's own ops, the hops from its
  // collectives (no DeepEP kernel table in a CPU profile: nothing missed).
  const auto d = run_cli(
      "validate --model qwen1.5-moe-a2.7b --scale 16 --ranks 2 --layouts 2x1 "
      "--dispatcher deepep_normal,deepep_ll --ranks-per-node 1 --tokens 32 --max-seconds 0.05 "
      "--json --costs " +
      db());
  ASSERT_EQ(d.exit_code, 0) << d.err;
  const auto dj = nlohmann::json::parse(d.out);
  ASSERT_EQ(dj.at("rows").size(), 2U);
  EXPECT_EQ(dj.at("rows")[0].at("dispatcher"), "deepep_normal");
  EXPECT_EQ(dj.at("rows")[1].at("dispatcher"), "deepep_ll");
  for (const auto& r : dj.at("rows")) {
    EXPECT_TRUE(r.at("verified").get<bool>());
    EXPECT_GT(r.at("predicted_ms").get<double>(), 0.0);
    const std::string dispatch = r.at("sources").at("dispatch").get<std::string>();
    EXPECT_EQ(dispatch.find("miss"), std::string::npos) << dispatch;
  }
  EXPECT_TRUE(dj.at("cost_source_misses").empty()) << dj.at("cost_source_misses").dump();
  // The attention core at shapes between and beyond the profile's (context 128; decode batches
  // 1 and 8): run, verified, and predicted from the database's attention points (decode by the
  // cached tokens its sequences read).
  const auto a = run_cli(
      "validate --attention --model qwen1.5-moe-a2.7b --tp 2 --contexts 128,256 --batches 4 "
      "--max-seconds 0.05 --json --costs " +
      db());
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto aj = nlohmann::json::parse(a.out);
  EXPECT_EQ(aj.at("part"), "attention");
  ASSERT_EQ(aj.at("rows").size(), 4U);
  const std::vector<std::tuple<std::string, int, int, std::string>> expected = {
      {"prefill", 128, 128, "db-exact"},
      {"prefill", 256, 256, "db-extrap"},
      {"decode", 4, 128, "db-interp"},
      {"decode", 4, 256, "db-exact"}};  // 1024 pairs: the profile's 8 sequences of 128
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& r = aj.at("rows")[i];
    const auto& [phase, tokens, context, source] = expected[i];
    EXPECT_EQ(r.at("phase"), phase) << i;
    EXPECT_EQ(r.at("tokens"), tokens) << i;
    EXPECT_EQ(r.at("context"), context) << i;
    EXPECT_EQ(r.at("source"), source) << i;
    EXPECT_EQ(r.at("heads"), 8) << i;  // 16 heads over tp 2
    EXPECT_TRUE(r.at("verified").get<bool>()) << i;
    EXPECT_GT(r.at("measured_ms").get<double>(), 0.0) << i;
    EXPECT_GT(r.at("predicted_ms").get<double>(), 0.0) << i;
  }
  EXPECT_TRUE(aj.at("cost_source_misses").empty()) << aj.at("cost_source_misses").dump();
  // Heads the profile did not run (tp 4 on a 2-rank profile): answered by the roofline, named.
  const auto miss = run_cli(
      "validate --attention --model qwen1.5-moe-a2.7b --tp 4 --contexts 128 --phases prefill "
      "--max-seconds 0.05 --costs " +
      db());
  ASSERT_EQ(miss.exit_code, 0) << miss.err;
  EXPECT_NE(miss.out.find("attention prefill dtype=bf16 heads=4 kv_heads=4"), std::string::npos)
      << miss.out;
  // The whole attention block (norms, projections, RoPE, core, output projection) of one rank:
  // run, verified op by op, predicted by the cost model's attention block. The profile is at
  // 1/16 width, so the full-width projections miss and are named.
  const auto b = run_cli(
      "validate --attention --scope block --model qwen1.5-moe-a2.7b --contexts 64 --batches 2 "
      "--max-seconds 0.05 --json --costs " +
      db());
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto bj = nlohmann::json::parse(b.out);
  EXPECT_EQ(bj.at("part"), "attention block");
  EXPECT_EQ(bj.at("scope"), "block");
  ASSERT_EQ(bj.at("rows").size(), 2U);
  for (const auto& r : bj.at("rows")) {
    EXPECT_TRUE(r.at("verified").get<bool>()) << r.dump();
    EXPECT_GT(r.at("predicted_ms").get<double>(), 0.0);
    EXPECT_GT(r.at("roofline_ms").get<double>(), 0.0);
    EXPECT_NE(r.at("source").get<std::string>().find("db-"), std::string::npos) << r.dump();
  }
  EXPECT_NE(bj.at("cost_source_misses").dump().find("gemm n=6144 k=2048"), std::string::npos)
      << bj.at("cost_source_misses").dump();
  expect_bad_input(
      run_cli("validate --attention --scope all --model qwen1.5-moe-a2.7b --costs " + db()),
      "--scope: expected core, block or layer, got 'all'");
  expect_bad_input(
      run_cli("validate --attention --scope block --tp 2 --model qwen1.5-moe-a2.7b --costs " +
              db()),
      "--tp 2: --scope block runs one rank of attention TP 1");
  expect_bad_input(
      run_cli("validate --attention --weights mxfp4 --model qwen1.5-moe-a2.7b --costs " + db()),
      "--weights applies to the MoE layer's cases, not to validate --attention (which takes "
      "--scope");
  // validate --attention's own inputs.
  expect_bad_input(
      run_cli("validate --attention --model qwen1.5-moe-a2.7b --contexts 9000 --costs " + db()),
      "--contexts: expected contexts (qwen1.5-moe-a2.7b's max_position_embeddings caps them) "
      "from 1 to 8192, got '9000'");
  expect_bad_input(run_cli("validate --attention --model qwen1.5-moe-a2.7b --tp 0 --costs " + db()),
                   "--tp");
  expect_bad_input(
      run_cli("validate --attention --model qwen1.5-moe-a2.7b --phases both --costs " + db()),
      "--phases: expected prefill and/or decode, got 'both'");
  expect_bad_input(
      run_cli("validate --attention --model qwen1.5-moe-a2.7b --layouts 2x1 --costs " + db()),
      "--layouts applies to the MoE layer's cases");
  expect_bad_input(
      run_cli("validate --attention --model qwen1.5-moe-a2.7b --ranks 2 --costs " + db()),
      "--ranks: validate --attention runs the attention core on one rank");

  // deepep_normal without a node grouping: refused before any work.
  expect_bad_input(run_cli("validate --model qwen1.5-moe-a2.7b --scale 16 --ranks 2 --layouts 2x1 "
                           "--dispatcher deepep_normal --tokens 32 --costs " +
                           db()),
                   "deepep_normal spans at least two nodes");
}

/// Runs one SQL statement on a database file (the test edits what profile recorded).
void edit_db(const std::string& path, const std::string& sql) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(raw);
  sqlite3_close(raw);
}

TEST_F(ProfileCli, ValidateSaysWhenTheMachineNoLongerRunsAtItsProfiledPace) {
  // profile records the machine's pace (its GEMM op at one shape) before the first point and
  // after the last, and says it.
  const auto p = run_cli(
      "profile --model qwen1.5-moe-a2.7b --scale 16 --quick --ops gemm --max-tokens 32 "
      "--cold-mib 4 --out " +
      db());
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("machine pace (bf16 GEMM 256×1024×1024, weights cold): "), std::string::npos)
      << p.out;
  double start = 0.0;
  {
    auto opened = planner::CostDb::open(db(), false);
    ASSERT_TRUE(opened.ok());
    auto runs = (*opened)->runs();
    ASSERT_TRUE(runs.ok());
    ASSERT_EQ(runs->size(), 1U);
    start = runs->front().pace_start.gemm_gflops;
    EXPECT_GT(start, 0.0);
    EXPECT_GT(runs->front().pace_end.gemm_gflops, 0.0);
  }
  const std::string validate =
      "validate --model qwen1.5-moe-a2.7b --scale 16 --layouts 1x1 --dispatcher a2av "
      "--tokens 32 --max-seconds 0.05 --costs " +
      db();
  const auto pace_of = [&](const std::string& extra) {
    const auto v = run_cli(validate + extra + " --json");
    EXPECT_EQ(v.exit_code, 0) << v.err;
    return nlohmann::json::parse(v.out).at("pace");
  };
  // As recorded: validate measures the probe before and after its cases and compares.
  const auto j = pace_of("");
  EXPECT_GT(j.at("before_gflops").get<double>(), 0.0);
  EXPECT_GT(j.at("after_gflops").get<double>(), 0.0);
  // The profile's range spans its start and end figures.
  EXPECT_LE(j.at("profile").at("low_gflops").get<double>(), start);
  EXPECT_GE(j.at("profile").at("high_gflops").get<double>(), start);
  EXPECT_EQ(j.at("tolerance").get<double>(), 0.05);
  // A profile that recorded a pace 100× this machine's: stale, the machine now slower; the run
  // still succeeds (the warning is about what the errors mean).
  edit_db(db(),
          "UPDATE runs SET pace_start_gemm_gflops = pace_start_gemm_gflops * 100, "
          "pace_end_gemm_gflops = pace_end_gemm_gflops * 100");
  const auto slow = pace_of("");
  EXPECT_TRUE(slow.at("stale").get<bool>()) << slow.dump();
  EXPECT_LT(slow.at("drift").get<double>(), -0.9) << slow.dump();
  const auto text = run_cli(validate);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("STALE PROFILE: the machine ran the probe"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("slower than when profiled"), std::string::npos) << text.out;
  // 1/10000 of it: stale the other way (faster now).
  edit_db(db(),
          "UPDATE runs SET pace_start_gemm_gflops = pace_start_gemm_gflops / 10000, "
          "pace_end_gemm_gflops = pace_end_gemm_gflops / 10000");
  const auto fast = pace_of("");
  EXPECT_TRUE(fast.at("stale").get<bool>()) << fast.dump();
  EXPECT_GT(fast.at("drift").get<double>(), 10.0) << fast.dump();
  // A profile from before schema 4 (or imported tables): nothing to compare, and said so.
  edit_db(db(), "UPDATE runs SET pace_start_gemm_gflops = NULL, pace_end_gemm_gflops = NULL");
  const auto none = pace_of("");
  EXPECT_TRUE(none.at("profile").is_null()) << none.dump();
  EXPECT_TRUE(none.at("drift").is_null()) << none.dump();
  EXPECT_FALSE(none.at("stale").get<bool>());
  EXPECT_GT(none.at("before_gflops").get<double>(), 0.0);
  const auto none_text = run_cli(validate);
  EXPECT_NE(none_text.out.find("the profile recorded none"), std::string::npos) << none_text.out;
  // validate --attention measures and compares it too.
  edit_db(db(), "UPDATE runs SET pace_start_gemm_gflops = 1e6, pace_end_gemm_gflops = 1e6");
  const auto a = run_cli(
      "validate --attention --model qwen1.5-moe-a2.7b --contexts 32 --phases prefill "
      "--max-seconds 0.05 --json --costs " +
      db());
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto aj = nlohmann::json::parse(a.out).at("pace");
  EXPECT_TRUE(aj.at("stale").get<bool>()) << aj.dump();
  EXPECT_EQ(aj.at("profile").at("high_gflops").get<double>(), 1e6);
}

pid_t spawn(const std::string& args) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string cmd =
        std::string("exec ") + MOEPLAN_CLI_PATH + " " + args + " >/dev/null 2>/dev/null </dev/null";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

/// Opens the database and checks it: SQLite's integrity check, every point complete, no
/// identity twice. Returns the number of points.
std::size_t check_db(const std::string& path) {
  auto db = planner::CostDb::open(path, false);
  EXPECT_TRUE(db.ok()) << (db.ok() ? "" : db.error().message);
  if (!db.ok()) return 0;
  auto ok = (*db)->integrity_ok();
  EXPECT_TRUE(ok.ok() && *ok);
  auto pts = (*db)->points();
  EXPECT_TRUE(pts.ok());
  std::set<std::tuple<std::string, std::string, std::string, int>> ids;
  for (const auto& p : *pts) {
    EXPECT_GT(p.median_s, 0.0) << p.op << " " << p.shape;
    EXPECT_GT(p.repetitions, 0) << p.op << " " << p.shape;
    EXPECT_EQ(p.disposition, planner::Disposition::kPassed) << p.op << " " << p.shape;
    ids.emplace(p.op, p.dtype, p.shape, p.group_size);
  }
  EXPECT_EQ(ids.size(), pts->size());
  return pts->size();
}

TEST_F(ProfileCli, KillNineAtRandomMomentsThenResume) {
  std::mt19937 rng(
      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uniform_int_distribution<int> delay_ms(50, 700);
  const std::string args = std::string(kTinyProfile) + " --resume --out " + db();
  std::size_t before = 0;
  for (int i = 0; i < 3; ++i) {
    const pid_t pid = spawn(args);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!fs::exists(db())) continue;  // killed before the database was created
    // Killed after SQLite created the file but before the schema's transaction committed: an
    // empty file, or (once the journal mode is set, which writes the file's header) a SQLite
    // database with no table yet. It holds no point and --resume opens it as a new database
    // (the kill -9 loop of scripts/kill-loop.sh accepts it the same way).
    if (fs::file_size(db()) == 0) continue;
    if (const auto opened = planner::CostDb::open(db(), false);
        !opened.ok() && opened.error().message.find(": empty database,") != std::string::npos) {
      continue;
    }
    const std::size_t n = check_db(db());
    EXPECT_GE(n, before);  // committed points are never lost
    before = n;
  }
  const auto r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::size_t total = check_db(db());
  EXPECT_NE(r.out.find(std::to_string(total) + " points"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::to_string(before) + " kept from before"), std::string::npos) << r.out;
}

TEST_F(ProfileCli, CtrlCKeepsWhatWasMeasuredAndTwoWritersShareTheDatabase) {
  const std::string args = std::string(kTinyProfile) + " --resume --out " + db();
  const pid_t pid = spawn(args);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  // 130: stopped cleanly between points; 0: it had already finished.
  EXPECT_TRUE(WEXITSTATUS(status) == 130 || WEXITSTATUS(status) == 0) << WEXITSTATUS(status);
  check_db(db());
  {
    // The pace at the end is measured only by a profile that reached its end.
    auto opened = planner::CostDb::open(db(), false);
    ASSERT_TRUE(opened.ok());
    auto runs = (*opened)->runs();
    ASSERT_TRUE(runs.ok());
    ASSERT_EQ(runs->size(), 1U);
    EXPECT_EQ(runs->front().pace_end.recorded(), WEXITSTATUS(status) == 0);
  }
  // Two profiles at once on the same database: both finish, nothing is duplicated.
  const pid_t a = spawn(args);
  const pid_t b = spawn(args);
  int sa = 0, sb = 0;
  waitpid(a, &sa, 0);
  waitpid(b, &sb, 0);
  EXPECT_TRUE(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
  EXPECT_TRUE(WIFEXITED(sb) && WEXITSTATUS(sb) == 0);
  const std::size_t n = check_db(db());
  const auto r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(std::to_string(n) + " kept from before"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": 0 measured"), std::string::npos) << r.out;
}

/// Sets an environment variable for the commands run in its scope (the tests run serially).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

TEST_F(ProfileCli, MalformedFaultInjectionIsBadInput) {
  ScopedEnv env("MOEPLAN_FAULT_INJECT", "rank=1,mode=crash");
  expect_one_line_error(run_cli("models list"), "MOEPLAN_FAULT_INJECT: expected rank=R");
}

TEST_F(ProfileCli, AllocationFailureMarksThePointNotSupportedAndTheSweepGoesOn) {
  // rank 0 (the writer) or rank 1 cannot allocate the fourth point's buffers.
  for (const int rank : {0, 1}) {
    const std::string path = (dir_ / ("oom" + std::to_string(rank) + ".db")).string();
    ScopedEnv env("MOEPLAN_FAULT_INJECT",
                  "rank=" + std::to_string(rank) + ",after_points=3,mode=oom");
    const auto r = run_cli(std::string(kTinyProfile) + " --out " + path);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(", 1 not supported"), std::string::npos) << r.out;
    auto db = planner::CostDb::open(path, false);
    ASSERT_TRUE(db.ok());
    auto pts = (*db)->points();
    ASSERT_TRUE(pts.ok());
    // Every point of the sweep is there: the one that failed, and all after it.
    EXPECT_NE(r.out.find(std::to_string(pts->size()) +
                         " points: " + std::to_string(pts->size() - 1) + " measured"),
              std::string::npos)
        << r.out;
    std::vector<planner::CostPoint> unsupported;
    for (const auto& p : *pts) {
      if (p.disposition == planner::Disposition::kNotSupported) unsupported.push_back(p);
    }
    ASSERT_EQ(unsupported.size(), 1U);
    const std::string want = rank == 0 ? "out of memory allocating this shape's buffers"
                                       : "another rank could not set this shape up";
    EXPECT_NE(unsupported[0].detail.find(want), std::string::npos) << unsupported[0].detail;
  }
}

TEST_F(ProfileCli, KilledRankKeepsExactlyThePointsCompletedBeforeIt) {
  {
    ScopedEnv env("MOEPLAN_FAULT_INJECT", "rank=1,after_points=5,mode=kill");
    const auto r = run_cli(std::string(kTinyProfile) + " --out " + db());
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("fault injection: rank 1 kills itself"), std::string::npos) << r.err;
  }
  // Rank 0 commits a point before the collective that starts the next one, so the five points
  // before the fault are in the database and nothing else.
  EXPECT_EQ(check_db(db()), 5U);
  const auto r = run_cli(std::string(kTinyProfile) + " --resume --out " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(", 5 kept from before"), std::string::npos) << r.out;
  check_db(db());
}

}  // namespace
}  // namespace test_profile_cli
}  // namespace moeplan::cli_test
