// Every CLI command given each class of bad input: missing, unreadable, empty, truncated, wrong
// type, out of range, inconsistent with the model or cluster, huge. Each answers with one line
// naming the file and what was expected, exit 2, and leaves no output file behind (or an
// existing one unchanged). The table in docs/RELIABILITY.md lists these cases by test name.
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>
#include <nlohmann/json.hpp>

#include "planner/costs/cost_db.hpp"
#include "tests/cli/cli_runner.hpp"

namespace moeplan::cli_test {
namespace test_cli_bad_input {
namespace {

namespace fs = std::filesystem;

class CliBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("moeplan_bad_input_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::create_directories(dir_ / "a_directory.json");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& content) const {
    std::ofstream(path(name), std::ios::binary) << content;
    return path(name);
  }
  /// A file of `bytes` zero bytes that takes no disk space (sparse).
  std::string sparse(const std::string& name, std::uintmax_t bytes) const {
    std::ofstream(path(name)).close();
    fs::resize_file(path(name), bytes);
    return path(name);
  }
  static std::string resource(const std::string& rel) {
    return (moeplan::resource_dir() / rel).string();
  }
  /// The first half of a bundled file: what an interrupted copy leaves.
  std::string truncated(const std::string& name, const std::string& rel) const {
    const std::string full = slurp(resource(rel));
    return write(name, full.substr(0, full.size() / 2));
  }
  /// Runs `args`; expects one error line naming `part`, exit 2, and no file at `out` (when
  /// given) afterwards.
  void bad(const std::string& args, const std::string& part, const std::string& out = "") const {
    SCOPED_TRACE(args);
    const auto r = run_cli(args);
    // MOEPLAN_PRINT_ERRORS=1 prints each case and its message (for docs/RELIABILITY.md).
    if (const char* p = std::getenv("MOEPLAN_PRINT_ERRORS"); p != nullptr && p[0] == '1') {
      std::printf("CASE %s\n  => exit %d: %s", args.c_str(), r.exit_code, r.err.c_str());
    }
    expect_one_line_error(r, part);
    if (!out.empty()) {
      EXPECT_FALSE(fs::exists(out)) << out << " was written";
    }
  }

  fs::path dir_;
};

// ---- model config.json: models show, plan, place, verify, profile, validate ----------------

TEST_F(CliBadInput, ModelConfigEveryClass) {
  const std::string out = path("out.json");
  const std::string db = path("p.db");
  const std::string empty = write("empty.json", "");
  const std::string cut = truncated("cut.json", "models/qwen1.5-moe-a2.7b.json");
  auto edit = [&](const std::string& name, const std::string& key, const nlohmann::json& v) {
    auto j = nlohmann::json::parse(slurp(resource("models/qwen1.5-moe-a2.7b.json")));
    j[key] = v;
    return write(name, j.dump());
  };
  const std::string type = edit("type.json", "num_experts", "60");
  const std::string range = edit("range.json", "num_hidden_layers", 1e308);
  const std::string topk = edit("topk.json", "num_experts_per_tok", 61);
  const std::string huge = sparse("huge.json", (std::uintmax_t{256} << 20) + 1);
  const std::string dir = path("a_directory.json");
  // Each command that takes --model (or a model argument), with each class.
  const std::pair<std::string, std::string> cases[] = {
      {"/nonexistent/config.json", "/nonexistent/config.json: file not found"},
      {dir, "a_directory.json: expected a file, got a directory"},
      {empty, "empty.json: empty file, expected a JSON document"},
      {cut, "cut.json: invalid JSON at byte"},
      {type, "type.json: key 'num_experts': expected an integer in [1, 65536], got string \"60\""},
      {range, "range.json: key 'num_hidden_layers': expected an integer"},
      {topk, "topk.json: key 'num_experts_per_tok': expected an integer in [1, 60], got 61"},
      {huge,
       "huge.json: 268435457 bytes, expected at most 268435456 (moeplan's limit on input files, "
       "256 MiB)"},
  };
  for (const auto& [file, part] : cases) {
    bad("models show " + file, part);
    bad("plan --model " + file + " -o " + out, part, out);
    bad("place --synthetic uniform --gpus 2 --model " + file + " --out " + out, part, out);
    bad("verify --model " + file, part);
    bad("profile --model " + file + " --out " + db, part, db);
    bad("validate --model " + file + " --costs " + write("junk.db", "x"), part);
  }
}

// ---- cluster JSON (both forms): clusters show, plan -------------------------------------

TEST_F(CliBadInput, ClusterFileEveryClass) {
  const std::string out = path("out.json");
  auto edit = [&](const std::string& name, const std::string& key, const nlohmann::json& v) {
    auto j = nlohmann::json::parse(slurp(resource("clusters/2x-hgx-h200.json")));
    j[key] = v;
    return write(name, j.dump());
  };
  const std::pair<std::string, std::string> cases[] = {
      {"/nonexistent/cluster.json", "/nonexistent/cluster.json: file not found"},
      {path("a_directory.json"), "a_directory.json: expected a file, got a directory"},
      {write("empty.json", ""), "empty.json: empty file, expected a JSON document"},
      {truncated("cut.json", "clusters/2x-hgx-h200.json"), "cut.json: invalid JSON at byte"},
      {edit("type.json", "nodes", "2"), "type.json: key 'nodes': expected an integer"},
      {edit("range.json", "nodes", 100000),
       "range.json: key 'nodes': expected an integer in [1, 4096], got 100000"},
      {edit("domain.json", "nvlink_domain_gpus", 12), "domain.json: key 'nvlink_domain_gpus'"},
      {write("explicit.json", R"({"name": "x", "device": "h100",
          "vertices": [{"name": "a", "kind": "gpu"}, {"name": "b", "kind": "gpu"}],
          "edges": [{"from": "a", "to": "c", "bandwidth_gb_per_s": 100, "latency_us": 1}]})"),
       "explicit.json: key 'edges[0].to'"},
      {sparse("huge.json", std::uintmax_t{1} << 30),
       "huge.json: 1073741824 bytes, expected at most 268435456"},
  };
  for (const auto& [file, part] : cases) {
    bad("clusters show " + file, part);
    bad("plan --cluster " + file + " -o " + out, part, out);
  }
}

// ---- expert loads (JSON, CSV, .npy) and traces: place, plan -----------------------------

std::string npy_header(const std::string& descr, const std::string& shape) {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(h.size() & 0xFF);
  out += static_cast<char>(h.size() >> 8);
  return out + h;
}

TEST_F(CliBadInput, LoadFilesEveryClass) {
  const std::string out = path("out.json");
  const std::string plan_out = path("plan.json");
  const std::string model = " --model qwen3-30b-a3b";
  std::string npy_ok = npy_header("<i8", "2, 4");
  npy_ok += std::string(64, '\x01');
  const std::pair<std::string, std::string> cases[] = {
      {"/nonexistent/load.json", "/nonexistent/load.json: file not found"},
      {path("a_directory.json"), "a_directory.json: expected a file, got a directory"},
      {write("empty.json", ""), "empty.json: empty file, expected a JSON document"},
      {write("empty.csv", ""), "empty.csv: empty file, expected a row of counts per layer"},
      {write("empty.npy", ""), "empty.npy: empty file, expected a NumPy .npy array"},
      {truncated("cut.json", "loads/qwen3_30b_a3b_mbolt.json"), "cut.json: invalid JSON at byte"},
      {write("cut.npy", npy_ok.substr(0, npy_ok.size() - 5)),
       "cut.npy: npy header: shape and dtype give 64 data bytes, the file has 59"},
      {write("type.json", R"({"logical_count": "many"})"), "type.json: key 'logical_count'"},
      {write("type.csv", "1,2,x,4\n"), "type.csv: line 1, column 3: expected a number, got 'x'"},
      {write("type.npy", npy_header("<c16", "1, 4") + std::string(64, '\0')),
       "type.npy: npy header: dtype '<c16' not supported, expected <i4, <i8, <f4 or <f8"},
      {write("range.json", R"({"logical_count": [[1, -3, 2, 2]]})"),
       "range.json: row 0, expert 1: expected a finite count ≥ 0, got -3"},
      {write("range.csv", "1,-3,2,2\n"),
       "range.csv: row 0, expert 1: expected a finite count ≥ 0, got -3"},
      {write("overflow.csv", "1,2,1e400,4\n"),
       "overflow.csv: line 1, column 3: expected a number, got '1e400'"},
      {write("inconsistent.csv", "1,2,3,4\n"), "inconsistent.csv: has 1 layer rows, expected 48"},
      {write("huge.npy", npy_header("<f8", "1152921504606846976, 4")),
       "huge.npy: npy header: shape too large"},
      {sparse("huge.csv", (std::uintmax_t{256} << 20) + 4096),
       "huge.csv: 268439552 bytes, expected at most 268435456"},
  };
  for (const auto& [file, part] : cases) {
    bad("place --load " + file + " --gpus 2" + model + " --out " + out, part, out);
    bad("plan --load " + file + model + " -o " + plan_out, part, plan_out);
  }
  // Traces: wrong type (counts where ids are expected) and out of range (id ≥ experts).
  bad("place --trace " +
          write("trace_f.npy", npy_header("<f4", "1, 2, 2") + std::string(16, '\0')) +
          " --gpus 2 --out " + out,
      "trace_f.npy: expected integer expert ids (<i4 or <i8)", out);
  bad("place --trace " + write("trace_id.json", R"({"topk_ids": [[[0, 200]]]})") + model +
          " --gpus 2 --out " + out,
      "trace_id.json", out);
  // /dev/zero never ends: refused at the limit instead of filling memory.
  bad("place --load /dev/zero --gpus 2 --out " + out,
      "/dev/zero: more than 268435456 bytes, expected at most 268435456", out);
}

// ---- placement files: plan --placement, export --placement --------------------------------

TEST_F(CliBadInput, PlacementFileEveryClass) {
  const std::string plan = path("plan.json");
  ASSERT_EQ(run_cli("plan --model qwen1.5-moe-a2.7b --json -o " + plan).exit_code, 0);
  const std::string good = path("place.json");
  ASSERT_EQ(run_cli("place --synthetic uniform --model qwen1.5-moe-a2.7b --gpus 4 --out " + good)
                .exit_code,
            0);
  auto edit = [&](const std::string& name, const std::string& key, const nlohmann::json& v) {
    auto j = nlohmann::json::parse(slurp(good));
    j[key] = v;
    return write(name, j.dump());
  };
  const std::string full = slurp(good);
  const std::pair<std::string, std::string> cases[] = {
      {"/nonexistent/place.json", "/nonexistent/place.json: file not found"},
      {path("a_directory.json"), "a_directory.json: expected a file, got a directory"},
      {write("empty.json", ""), "empty.json: empty file, expected a JSON document"},
      {write("cut.json", full.substr(0, full.size() / 2)), "cut.json: invalid JSON at byte"},
      {edit("type.json", "num_gpus", "4"), "type.json: key 'num_gpus': expected an integer"},
      {edit("range.json", "num_gpus", 1e308), "range.json: key 'num_gpus': expected an integer"},
      {edit("experts.json", "num_experts", 64), "experts.json: key"},
  };
  const std::string out = path("out");
  for (const auto& [file, part] : cases) {
    bad("plan --model qwen1.5-moe-a2.7b --load uniform --placement " + file + " -o " +
            path("p2.json"),
        part, path("p2.json"));
    bad("export --plan " + plan + " --format sglang --placement " + file + " --out " + out, part,
        out);
  }
  // Inconsistent with the model: a placement for qwen1.5 (60 experts) given to DeepSeek-V3.
  bad("plan --model deepseek-v3 --cluster 16x-hgx-h200 --load uniform --placement " + good,
      "place.json");
}

// ---- plan JSON (export --plan) and layout files (plan --layout-file) ----------------------

TEST_F(CliBadInput, PlanAndLayoutFilesEveryClass) {
  const std::string plan = path("plan.json");
  ASSERT_EQ(run_cli("plan --model qwen1.5-moe-a2.7b --json -o " + plan).exit_code, 0);
  const std::string layout = path("layout");
  ASSERT_EQ(run_cli("export --plan " + plan + " --format json --out " + layout).exit_code, 0);
  const std::string layout_file = (fs::path(layout) / "moeplan_layout.json").string();
  ASSERT_TRUE(fs::exists(layout_file));
  const std::string plan_text = slurp(plan);
  const std::string layout_text = slurp(layout_file);
  auto edit = [&](const std::string& text, const std::string& name,
                  const nlohmann::json::json_pointer& key, const nlohmann::json& v) {
    auto j = nlohmann::json::parse(text);
    j[key] = v;
    return write(name, j.dump());
  };
  const std::string out = path("out");
  const std::pair<std::string, std::string> plans[] = {
      {"/nonexistent/plan.json", "/nonexistent/plan.json: file not found"},
      {path("a_directory.json"), "a_directory.json: expected a file, got a directory"},
      {write("empty.json", ""), "empty.json: empty file, expected a JSON document"},
      {write("cut.json", plan_text.substr(0, plan_text.size() / 2)), "cut.json: invalid JSON"},
      {edit(plan_text, "type.json", "/num_gpus"_json_pointer, "16"), "type.json: key 'num_gpus'"},
      {edit(plan_text, "range.json", "/num_gpus"_json_pointer, -16), "range.json: key 'num_gpus'"},
      {edit(plan_text, "other.json", "/model/source"_json_pointer,
            resource("models/deepseek-v3.json")),
       "other.json: model 'deepseek-v3' ("},
  };
  for (const auto& [file, part] : plans) {
    bad("export --plan " + file + " --format sglang --out " + out, part, out);
  }
  const std::pair<std::string, std::string> layouts[] = {
      {"/nonexistent/layout.json", "/nonexistent/layout.json: file not found"},
      {path("a_directory.json"), "a_directory.json: expected a file, got a directory"},
      {write("empty.json", ""), "empty.json: empty file, expected a JSON document"},
      {write("cut.json", layout_text.substr(0, layout_text.size() / 2)), "cut.json: invalid JSON"},
      {edit(layout_text, "type.json", "/version"_json_pointer, "1"), "type.json: key 'version'"},
      {edit(layout_text, "range.json", "/version"_json_pointer, 99), "range.json: key 'version'"},
  };
  for (const auto& [file, part] : layouts) {
    bad("plan --layout-file " + file, part);
  }
}

// ---- the cost database: plan --costs, validate --costs ------------------------------------

/// A cost database with one GEMM point for each of `devices`.
void make_db(const std::string& file, const std::vector<std::string>& devices) {
  auto db = planner::CostDb::open(file, true);
  ASSERT_TRUE(db) << db.error().message;
  auto run = (*db)->add_run({});
  ASSERT_TRUE(run);
  for (const auto& d : devices) {
    planner::CostPoint p;
    p.run_id = *run;
    p.device = d;
    p.backend = "cpu";
    p.op = "gemm";
    p.dtype = "bf16";
    p.shape = "m=64,n=64,k=64";
    p.m = p.n = p.k = 64;
    p.median_s = p.p10_s = p.p90_s = 1e-5;
    p.repetitions = 3;
    ASSERT_TRUE((*db)->add_point(p));
  }
}

TEST_F(CliBadInput, CostDatabaseEveryClass) {
  const std::string good = path("good.db");
  make_db(good, {"cpu:test/ranks=1", "cpu:test/ranks=2"});
  const std::string bytes = slurp(good);
  const std::string out = path("plan.json");
  const std::pair<std::string, std::string> cases[] = {
      {path("missing.db"), "missing.db: no such file; expected a cost database"},
      {path("a_directory.json"),
       "a_directory.json: expected a cost database file written by moeplan profile, got a "
       "directory"},
      {"/dev/null",
       "/dev/null: expected a cost database file written by moeplan profile, got a "
       "device or other special file"},
      {write("empty.db", ""), "empty.db: empty database, expected a moeplan cost database"},
      {write("cut.db", bytes.substr(0, bytes.size() / 2)), "cut.db"},
      {write("type.db", R"({"not": "a database"})"), "type.db: not a moeplan cost database"},
  };
  for (const auto& [file, part] : cases) {
    bad("plan --costs " + file + " -o " + out, part, out);
    bad("validate --model qwen1.5-moe-a2.7b --scale 16 --costs " + file, part);
  }
  // A database from a newer moeplan: refused, not migrated down.
  const std::string newer = path("newer.db");
  make_db(newer, {"cpu:test/ranks=1"});
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(newer.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "UPDATE moeplan_schema SET version = 99", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  bad("plan --costs " + newer + " -o " + out,
      "newer.db: schema version 99 is newer than this moeplan's", out);
  // Inconsistent with the cluster: no profile of 4 ranks in a database of 1 and 2.
  bad("plan --cluster local:4 --costs " + good + " -o " + out,
      "no profile of 4 ranks; expected a device ending in '/ranks=4'", out);
  // Out of range: more ranks than the local cluster allows.
  bad("plan --cluster local:100000 --costs " + good + " -o " + out,
      "expected local:N with N the number of ranks (1 to 4096)", out);
}

// ---- outputs: nothing half-written, an existing file unchanged ----------------------------

TEST_F(CliBadInput, FailedRunsLeaveOutputsAlone) {
  // An existing output is unchanged when the run fails before writing.
  const std::string keep = write("keep.json", "keep");
  bad("plan --model /nonexistent.json -o " + keep, "/nonexistent.json");
  EXPECT_EQ(slurp(keep), "keep");
  bad("place --load /nonexistent.json --gpus 2 --out " + keep, "/nonexistent.json");
  EXPECT_EQ(slurp(keep), "keep");
  // An output where a directory stands, or in a folder that does not exist.
  bad("plan -o " + path("a_directory.json"), "a_directory.json");
  EXPECT_TRUE(fs::is_directory(path("a_directory.json")));
  bad("plan -o " + path("no/such/dir/plan.json"), "no/such/dir/plan.json", path("no"));
  // export --out naming a file: refused, the file unchanged.
  const std::string plan = path("plan.json");
  ASSERT_EQ(run_cli("plan --model qwen1.5-moe-a2.7b --json -o " + plan).exit_code, 0);
  bad("export --plan " + plan + " --format sglang --out " + keep, "keep.json");
  EXPECT_EQ(slurp(keep), "keep");
  // profile never overwrites an existing file without --resume.
  bad("profile --quick --out " + keep, "--resume");
  EXPECT_EQ(slurp(keep), "keep");
  // No temporary files are left next to the outputs.
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

// ---- command-line numbers: huge, wrong type ----------------------------------------------

TEST_F(CliBadInput, HugeAndMistypedNumbersOnTheCommandLine) {
  const std::string out = path("out.json");
  const std::pair<std::string, std::string> cases[] = {
      {"plan --tokens 99999999999999999999 -o " + out,
       "Could not convert: --tokens = 99999999999999999999 (see moeplan --help)"},
      {"plan --tokens 1e308 -o " + out, "Could not convert: --tokens = 1e308"},
      {"plan --tokens many -o " + out, "Could not convert: --tokens = many"},
      {"plan --gpus -5 -o " + out,
       "--gpus: expected 1..16 (the GPUs of cluster '2x-hgx-h200'), got -5"},
      {"place --synthetic uniform --gpus 99999999999 --out " + out,
       "Could not convert: --gpus = 99999999999"},
      {"place --synthetic uniform:experts=8,layers=100000000 --gpus 8 --out " + out,
       "key 'layers': expected a number in [1, 4096], got '100000000'"},
      {"verify --tokens 4294967297 --scale 64",
       "--tokens: expected a comma-separated list of positive integers, got '4294967297'"},
      {"profile --max-tokens 1e30 --out " + path("p.db"), "Could not convert: --max-tokens = 1e30"},
      {"verify --seed many --scale 64", "Could not convert: --seed = many"},
  };
  for (const auto& [args, part] : cases) bad(args, part, out);
  EXPECT_FALSE(fs::exists(path("p.db")));
}

// ---- unreadable: permissions (meaningless as root, where chmod 000 does not block reads) ---

TEST_F(CliBadInput, UnreadableFile) {
  if (::geteuid() == 0) {
    GTEST_SKIP() << "running as root: chmod 000 does not block reads (the directory cases in "
                    "the other tests cover 'unreadable')";
  }
  const std::string file = write("locked.json", slurp(resource("models/qwen1.5-moe-a2.7b.json")));
  ASSERT_EQ(::chmod(file.c_str(), 0), 0);
  bad("models show " + file, "locked.json: cannot be read: Permission denied");
  bad("plan --cluster " + file, "locked.json: cannot be read: Permission denied");
  bad("place --load " + file + " --gpus 2", "locked.json: cannot be read: Permission denied");
}

}  // namespace
}  // namespace test_cli_bad_input
}  // namespace moeplan::cli_test
