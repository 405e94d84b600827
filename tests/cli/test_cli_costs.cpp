// `moeplan costs import` and `moeplan costs report`, and `plan --costs` on imported GPU tables, as
// a user runs them: the committed fixture (real h200_sxm rows; its SQL dump needs no pyarrow),
// bad input as one line with exit 2, and the full tables when aiconfigurator-core is installed
// (skipped visibly otherwise).
#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "models/file_io.hpp"
#include "tests/cli/cli_runner.hpp"

namespace moeplan::cli_test {
namespace test_cli_costs {
namespace {

namespace fs = std::filesystem;

/// The fixture as a cost database at a relative path (so outputs naming it are portable).
std::string fixture_db(const std::string& name) {
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(name + suffix);
  auto sql = read_text_file(fs::path(MOEPLAN_TEST_DATA_DIR) / "aiconfigurator" /
                            "h200_sxm_trtllm_fixture.sql");
  EXPECT_TRUE(sql.ok());
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(name.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql->c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  return name;
}

void remove_db(const std::string& name) {
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(name + suffix);
}

/// True when `python` imports every module named.
bool python_has(const std::string& python, const std::string& modules) {
  const std::string cmd = python + " -c 'import " + modules + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

/// The interpreter with the importer's packages a user would have: $MOEPLAN_PYTHON, or the
/// venv of `scripts/install-deps.sh --gpu-tables`; "" when neither has them.
std::string full_tables_python() {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("MOEPLAN_PYTHON"); p != nullptr && p[0] != '\0') {
    candidates.emplace_back(p);
  }
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (cache != nullptr && cache[0] != '\0') {
    candidates.push_back(std::string(cache) + "/moeplan/gpu-tables-venv/bin/python");
  } else if (home != nullptr) {
    candidates.push_back(std::string(home) + "/.cache/moeplan/gpu-tables-venv/bin/python");
  }
  for (const auto& c : candidates) {
    if (fs::exists(c) && python_has(c, "pyarrow, aiconfigurator_core")) return c;
  }
  return "";
}

TEST(CliCosts, ImportBadInputIsOneLine) {
  const std::string out = "moeplan_costs_bad_import.db";
  fs::remove(out);
  const std::string base = "costs import aiconfigurator --system h200_sxm --framework trtllm ";
  expect_one_line_error(
      run_cli("costs import nowhere --system h200_sxm --framework trtllm --out " + out), "nowhere");
  expect_one_line_error(run_cli(base + "--out " + out + " --python /nonexistent/python3"),
                        "--python /nonexistent/python3: cannot run it");
  expect_one_line_error(run_cli("costs import aiconfigurator --framework trtllm --out " + out),
                        "--system");
  EXPECT_FALSE(fs::exists(out));
  const std::string data = std::string(" --data-dir ") + MOEPLAN_TEST_DATA_DIR + "/aiconfigurator";
  std::string python = "python3";
  if (!python_has("python3", "pyarrow")) {
    // What a fresh machine sees: the missing package and the command that installs it.
    const auto r = run_cli(base + "--out " + out + " --python python3" + data);
    expect_one_line_error(r, "Python package pyarrow is not installed for python3");
    EXPECT_NE(r.err.find("bash scripts/install-deps.sh --gpu-tables"), std::string::npos);
    EXPECT_NE(r.err.find("python3 -m pip install pyarrow"), std::string::npos);
    EXPECT_FALSE(fs::exists(out));
    python = full_tables_python();
    if (python.empty()) {
      GTEST_SKIP() << "no Python with pyarrow ($MOEPLAN_PYTHON, the --gpu-tables venv, python3): "
                      "the import of the fixture itself is not run";
    }
  }
  // The converter's own errors come back as one line naming the input.
  expect_one_line_error(
      run_cli("costs import aiconfigurator --system nope --framework trtllm --out " + out +
              " --python " + python + data),
      "--system nope: unknown system; expected one of h200_sxm");
  expect_one_line_error(run_cli(base + "--version 9.9 --out " + out + " --python " + python + data),
                        "--version 9.9");
  EXPECT_FALSE(fs::exists(out));
  const auto r = run_cli(base + "--out " + out + " --python " + python + data);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("148 points for device 'h200'"), std::string::npos) << r.out;
  remove_db(out);
}

TEST(CliCosts, ReportOnTheFixtureGolden) {
  const std::string db = fixture_db("moeplan_costs_fixture.db");
  const auto r = run_cli("costs report --costs " + db);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("costs_report_fixture.txt", r.out);
  const auto j = run_cli("costs report --costs " + db + " --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc.at("device").get<std::string>(), "h200");
  // Every fixture point the report judges is answered exactly by the database.
  EXPECT_EQ(doc.at("db_exact_points").get<int>(), doc.at("points").get<int>());
  expect_one_line_error(run_cli("costs report --costs /nonexistent.db"), "--costs /nonexistent.db");
  remove_db(db);
}

TEST(CliCosts, PlanFromImportedTablesGolden) {
  const std::string db = fixture_db("moeplan_costs_plan_fixture.db");
  // 64 tokens per GPU: 512 tokens enter each rank's MoE, a grid point of the fixture.
  const auto r = run_cli("plan --model qwen3-30b-a3b --cluster 1x-hgx-h200 --tokens 64 --costs " +
                         db + " --dispatcher allgather --dispatcher a2av --top 6");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("plan_gpu_tables_fixture.txt", r.out);
  // A database of h200 for a cluster of h100: one line naming the file and both devices.
  const auto bad = run_cli("plan --cluster 4x-hgx-h100 --costs " + db);
  expect_one_line_error(bad, "--costs " + db + ": a cost database of device 'h200'");
  EXPECT_NE(bad.err.find("is of device 'h100'"), std::string::npos) << bad.err;
  remove_db(db);
}

TEST(CliCosts, FullTablesWhenInstalled) {
  const std::string python = full_tables_python();
  if (python.empty()) {
    GTEST_SKIP() << "aiconfigurator-core and pyarrow are not installed for $MOEPLAN_PYTHON or "
                    "~/.cache/moeplan/gpu-tables-venv (bash scripts/install-deps.sh --gpu-tables)";
  }
  const std::string db = "moeplan_costs_full_h200.db";
  remove_db(db);
  const auto r = run_cli(
      "costs import aiconfigurator --system h200_sxm --framework trtllm "
      "--nccl-version 2.29.2 --out " +
      db + " --python " + python);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rep = run_cli("costs report --costs " + db + " --json");
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const auto j = nlohmann::json::parse(rep.out);
  EXPECT_GT(j.at("points").get<int>(), 1000);
  EXPECT_EQ(j.at("db_exact_points").get<int>(), j.at("points").get<int>());  // exact on the grid
  for (const auto& g : j.at("groups")) {
    if (g.at("shape").get<std::string>() != "all") continue;
    const std::string what =
        g.at("kind").get<std::string>() + " " + g.at("dtype").get<std::string>();
    // The targets on the median (worst cases: docs/BENCHMARKS.md).
    EXPECT_LT(g.at("db_leave_one_out").at("median").get<double>(), 0.05) << what;
    EXPECT_LT(g.at("calibrated").at("median").get<double>(), g.at("kind") == "moe" ? 0.10 : 0.15)
        << what;
  }
  // The plan reads it (DeepSeek-V3 on 1,024 GPUs; timed in docs/BENCHMARKS.md).
  const auto plan =
      run_cli("plan --model deepseek-v3 --cluster 128x-hgx-h200 --costs " + db + " --top 1 --json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  remove_db(db);
}

}  // namespace
}  // namespace test_cli_costs
}  // namespace moeplan::cli_test
