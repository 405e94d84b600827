// Load readers on every format (SGLang JSON, CSV, .npy, traces), malformed inputs, the bundled
// measured loads, and synthetic specs.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "models/registry.hpp"
#include "models/resources.hpp"
#include "planner/placement/load_io.hpp"

namespace moeplan::planner {
namespace test_load_io {
namespace {

// A .npy file image: version 1.0 header padded to 64 bytes, then the raw values.
template <typename T>
std::string npy(const std::string& descr, const std::string& shape, const std::vector<T>& v,
                const std::string& extra_header = "") {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", " +
                     extra_header + "}";
  std::size_t total = 10 + dict.size() + 1;
  dict += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xFFU);
  out += static_cast<char>((dict.size() >> 8U) & 0xFFU);
  out += dict;
  const auto* bytes = reinterpret_cast<const char*>(v.data());
  out.append(bytes, v.size() * sizeof(T));
  return out;
}

std::string err(const Result<LoadData>& r) { return r.ok() ? "(ok)" : r.error().message; }

TEST(LoadJson, SglangTwoAndThreeDims) {
  auto a = parse_load_json(R"({"logical_count": [[1, 2, 3], [4, 5, 6]]})", "a.json");
  ASSERT_TRUE(a.ok()) << err(a);
  EXPECT_EQ(a->load.num_experts, 3);
  EXPECT_EQ(a->load.counts, (std::vector<std::vector<double>>{{1, 2, 3}, {4, 5, 6}}));
  EXPECT_TRUE(a->steps.empty());
  auto b = parse_load_json(R"({"logical_count": [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]})", "b.json");
  ASSERT_TRUE(b.ok()) << err(b);
  EXPECT_EQ(b->load.counts, (std::vector<std::vector<double>>{{6, 8}, {10, 12}}));
  ASSERT_EQ(b->steps.size(), 2U);
  EXPECT_EQ(b->steps[1][0], (std::vector<double>{5, 6}));
}

TEST(LoadJson, MalformedInputsGiveOneLine) {
  EXPECT_EQ(err(parse_load_json(R"({"logical_count": [[1, 2], [3]]})", "r.json")),
            "r.json: row 1 has 1 values, expected 2 like the rows before it");
  EXPECT_EQ(err(parse_load_json(R"({"logical_count": [[1, -2]]})", "n.json")),
            "n.json: row 0, expert 1: expected a finite count ≥ 0, got -2");
  EXPECT_EQ(err(parse_load_json("  ", "e.json")), "e.json: empty file, expected a JSON document");
  EXPECT_EQ(err(parse_load_json(R"({"counts": []})", "k.json")),
            "k.json: key 'logical_count': missing, expected [layers][experts] or "
            "[steps][layers][experts] counts (or 'topk_ids' for a trace)");
  EXPECT_EQ(err(parse_load_json(R"({"logical_count": [[1, "x"]]})", "s.json")),
            "s.json: key 'logical_count': row 0, expert 1 expected a number, got string \"x\"");
  EXPECT_EQ(err(parse_load_json(R"({"logical_count": []})", "z.json")),
            "z.json: key 'logical_count': expected a non-empty array, got array []");
  EXPECT_EQ(err(parse_load_json(R"({"logical_count": [[[1, 2]], [[1, 2], [3, 4]]]})", "t.json")),
            "t.json: step 1 has 2 layer rows, expected 1 like step 0");
  EXPECT_EQ(err(parse_load_json("[1]", "x.json")),
            "x.json: expected a JSON object with 'logical_count' or 'topk_ids', got array [1]");
}

TEST(LoadJson, ModelAlignsHiddenOrMoeRows) {
  auto m = models::load_model("deepseek-v2-lite");
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->num_hidden_layers, 27);
  ASSERT_EQ(m->num_moe_layers(), 26);
  // One row per hidden layer: the dense first layer's row is empty.
  std::string json = R"({"logical_count": [[])";
  for (int l = 1; l < 27; ++l) {
    json += ", [";
    for (int e = 0; e < 64; ++e) json += (e ? "," : "") + std::to_string(l + e);
    json += "]";
  }
  json += "]}";
  auto a = parse_load_json(json, "h.json", &*m);
  ASSERT_TRUE(a.ok()) << err(a);
  EXPECT_EQ(a->load.num_layers(), 26);
  EXPECT_EQ(a->layer_ids.front(), 1);
  EXPECT_EQ(a->load.counts[0][0], 1.0);
  // Wrong expert count against the model.
  EXPECT_EQ(err(parse_load_json(R"({"logical_count": [[1, 2, 3]]})", "w.json", &*m)),
            "w.json: has 1 layer rows, expected 26 (MoE layers of deepseek-v2-lite) or 27 "
            "(hidden layers)");
  std::string short_rows = R"({"logical_count": [)";
  for (int l = 0; l < 26; ++l) short_rows += std::string(l ? "," : "") + "[1,2,3]";
  short_rows += "]}";
  EXPECT_EQ(err(parse_load_json(short_rows, "w.json", &*m)),
            "w.json: row 0 has 3 values, expected 64 (the experts of deepseek-v2-lite)");
  // A dense layer with counts is rejected.
  std::string dense = json;
  dense.replace(dense.find("[[]"), 3, "[[5]");
  EXPECT_EQ(err(parse_load_json(dense, "d.json", &*m)),
            "d.json: row 0 is a dense layer of deepseek-v2-lite, expected it empty or zero");
}

TEST(LoadCsv, RowsCommentsAndErrors) {
  auto a = parse_load_csv("# layer rows\n1,2,3\r\n4, 5 ,6\n\n", "a.csv");
  ASSERT_TRUE(a.ok()) << err(a);
  EXPECT_EQ(a->load.counts, (std::vector<std::vector<double>>{{1, 2, 3}, {4, 5, 6}}));
  EXPECT_EQ(err(parse_load_csv("1,2,3\n4,5\n", "r.csv")),
            "r.csv: row 1 has 2 values, expected 3 like the rows before it");
  EXPECT_EQ(err(parse_load_csv("1,x,3\n", "x.csv")),
            "x.csv: line 1, column 2: expected a number, got 'x'");
  EXPECT_EQ(err(parse_load_csv("1,,3\n", "x.csv")),
            "x.csv: line 1, column 2: expected a number, got ''");
  EXPECT_EQ(err(parse_load_csv("# nothing\n", "e.csv")),
            "e.csv: empty file, expected a row of counts per layer");
  EXPECT_EQ(err(parse_load_csv("1,nan\n", "n.csv")),
            "n.csv: row 0, expert 1: expected a finite count ≥ 0, got nan");
}

TEST(LoadNpy, EveryDtypeAndThreeDims) {
  auto i4 = parse_load_npy(npy<std::int32_t>("<i4", "(2, 3)", {1, 2, 3, 4, 5, 6}), "a.npy");
  ASSERT_TRUE(i4.ok()) << err(i4);
  EXPECT_EQ(i4->load.counts, (std::vector<std::vector<double>>{{1, 2, 3}, {4, 5, 6}}));
  auto i8 = parse_load_npy(npy<std::int64_t>("<i8", "(1, 2)", {7, 9}), "b.npy");
  ASSERT_TRUE(i8.ok()) << err(i8);
  EXPECT_EQ(i8->load.counts[0], (std::vector<double>{7, 9}));
  auto f4 = parse_load_npy(npy<float>("<f4", "(1, 2)", {0.5F, 1.5F}), "c.npy");
  ASSERT_TRUE(f4.ok()) << err(f4);
  EXPECT_EQ(f4->load.counts[0], (std::vector<double>{0.5, 1.5}));
  auto f8 = parse_load_npy(npy<double>("<f8", "(2, 1, 2)", {1, 2, 3, 4}), "d.npy");
  ASSERT_TRUE(f8.ok()) << err(f8);
  EXPECT_EQ(f8->load.counts[0], (std::vector<double>{4, 6}));
  EXPECT_EQ(f8->steps.size(), 2U);
}

TEST(LoadNpy, StrictHeader) {
  const std::vector<std::int32_t> v{1, 2};
  EXPECT_EQ(err(parse_load_npy("", "e.npy")), "e.npy: empty file, expected a NumPy .npy array");
  EXPECT_EQ(err(parse_load_npy("NUMPY....", "m.npy")),
            "m.npy: npy header: expected the magic \\x93NUMPY at the start");
  EXPECT_EQ(err(parse_load_npy(npy<std::int32_t>(">i4", "(1, 2)", v), "b.npy")),
            "b.npy: npy header: dtype '>i4' not supported, expected <i4, <i8, <f4 or <f8");
  EXPECT_EQ(err(parse_load_npy(npy<std::int32_t>("<i4", "(1, 3)", v), "s.npy")),
            "s.npy: npy header: shape and dtype give 12 data bytes, the file has 8");
  EXPECT_EQ(err(parse_load_npy(npy<std::int32_t>("<i4", "(2,)", v), "d.npy")),
            "d.npy: expected a 2-D [layers, experts] or 3-D [steps, layers, experts] array, got "
            "1 dimensions");
  EXPECT_EQ(err(parse_load_npy(npy<std::int32_t>("<i4", "(1, 2)", v, "'extra': 1, "), "k.npy")),
            "k.npy: npy header: unexpected key 'extra', expected descr, fortran_order, shape");
  EXPECT_EQ(err(parse_load_npy(npy<std::int32_t>("<i4", "(1, -2)", v), "n.npy")),
            "n.npy: npy header: key 'shape': expected non-negative integers");
  EXPECT_EQ(err(parse_load_npy(npy<std::int32_t>("<i4", "(0, 2)", {}), "z.npy")),
            "z.npy: empty array, expected expert counts");
  EXPECT_EQ(err(parse_load_npy(npy<std::int32_t>("<i4", "(1, 2)", {3, -1}), "v.npy")),
            "v.npy: row 0, expert 1: expected a finite count ≥ 0, got -1");
  std::string fortran = npy<std::int32_t>("<i4", "(1, 2)", v);
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_EQ(err(parse_load_npy(fortran, "f.npy")),
            "f.npy: npy header: fortran_order is True, expected C order (False)");
  std::string version = npy<std::int32_t>("<i4", "(1, 2)", v);
  version[6] = '\x04';
  EXPECT_EQ(err(parse_load_npy(version, "v.npy")),
            "v.npy: npy header: expected format version 1.0, 2.0 or 3.0, got 4.0");
  std::string length = npy<std::int32_t>("<i4", "(1, 2)", v);
  length[8] = '\xff';
  length[9] = '\xff';
  EXPECT_EQ(err(parse_load_npy(length, "l.npy")),
            "l.npy: npy header: header length 65535 exceeds the file");
  // Every truncation of a valid file is an error, never a crash.
  const std::string good = npy<std::int32_t>("<i4", "(1, 2)", v);
  for (std::size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(parse_load_npy(good.substr(0, n), "t.npy").ok()) << n;
  }
}

TEST(Trace, JsonAndNpy) {
  auto t =
      parse_load_json(R"({"topk_ids": [[[0, 1], [1, 2], [0, 2]]], "num_experts": 4})", "t.json");
  ASSERT_TRUE(t.ok()) << err(t);
  ASSERT_TRUE(t->trace.has_value());
  EXPECT_EQ(t->trace->top_k, 2);
  EXPECT_EQ(t->load.num_experts, 4);
  EXPECT_EQ(t->load.counts[0], (std::vector<double>{2, 2, 2, 0}));
  const auto c = t->trace->coactivation();
  EXPECT_EQ(c.pairs[0][0 * 4 + 1], 1.0);
  EXPECT_EQ(c.pairs[0][1 * 4 + 0], 1.0);
  EXPECT_EQ(c.pairs[0][0 * 4 + 3], 0.0);
  EXPECT_EQ(err(parse_load_json(R"({"topk_ids": [[[0, 1], [2]]]})", "r.json")),
            "r.json: layer 0, token 1 has 1 expert ids, expected 2 (top-k) like the tokens "
            "before it");
  EXPECT_EQ(err(parse_load_json(R"({"topk_ids": [[[0, 0]]]})", "d.json")),
            "d.json: layer 0, token 0 names expert 0 twice, expected distinct top-k ids");
  EXPECT_EQ(err(parse_load_json(R"({"topk_ids": [[[0, 5]]], "num_experts": 4})", "o.json")),
            "o.json: expert id 5 out of range, expected [0, 3]");
  EXPECT_EQ(err(parse_load_json(R"({"topk_ids": [[[0, 4611686018427387904]]]})", "h.json")),
            "h.json: expert id 4611686018427387904 out of range, expected < 1048576");
  EXPECT_EQ(err(parse_load_json(R"({"logical_count": [[1e308, 1e308]]})", "i.json")),
            "i.json: row 0: counts too large, expected a finite total");

  const auto path = std::filesystem::temp_directory_path() / "moeplan_trace_test.npy";
  std::ofstream(path, std::ios::binary)
      << npy<std::int64_t>("<i8", "(2, 2, 2)", {0, 1, 2, 3, 3, 0, 1, 2});
  auto n = read_trace_file(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(n.ok()) << err(n);
  EXPECT_EQ(n->format, "trace-npy");
  EXPECT_EQ(n->load.num_experts, 4);
  EXPECT_EQ(n->trace->num_tokens(1), 2);
  EXPECT_EQ(n->load.counts[1], (std::vector<double>{1, 1, 1, 1}));
}

TEST(LoadFile, BundledMeasuredLoadsAgreeWithTheirModels) {
  const auto dir = resource_dir() / "loads";
  auto m = models::load_model("qwen3-30b-a3b");
  ASSERT_TRUE(m.ok());
  auto q = read_load_file(dir / "qwen3_30b_a3b_mbolt.json", &*m);
  ASSERT_TRUE(q.ok()) << err(q);
  EXPECT_EQ(q->load.num_layers(), 48);
  EXPECT_EQ(q->load.num_experts, 128);
  auto d = models::load_model("deepseek-v2-lite");
  ASSERT_TRUE(d.ok());
  auto e = read_load_file(dir / "dsv2lite_esft.json", &*d);
  ASSERT_TRUE(e.ok()) << err(e);
  EXPECT_EQ(e->load.num_layers(), 26);
  EXPECT_EQ(e->layer_ids.front(), 1);  // the first hidden layer is dense
  // Every shipped sample reads without a model.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".md") continue;
    auto r = read_load_file(entry.path());
    EXPECT_TRUE(r.ok()) << err(r);
    ++files;
  }
  EXPECT_GE(files, 8);
  EXPECT_EQ(err(read_load_file(dir / "missing.json")),
            (dir / "missing.json").string() + ": file not found");
}

TEST(Synthetic, SpecsAndValidation) {
  auto u = synthetic_load("uniform:layers=2,experts=4,tokens=400");
  ASSERT_TRUE(u.ok()) << err(u);
  EXPECT_EQ(u->load.counts[1], (std::vector<double>{100, 100, 100, 100}));
  auto p = synthetic_load("powerlaw:alpha=1,experts=3,tokens=11");
  ASSERT_TRUE(p.ok()) << err(p);
  // 1 : 1/2 : 1/3 of 11 = 6 : 3 : 2.
  EXPECT_NEAR(p->load.counts[0][0], 6.0, 1e-12);
  EXPECT_NEAR(p->load.counts[0][1], 3.0, 1e-12);
  EXPECT_NEAR(p->load.counts[0][2], 2.0, 1e-12);
  auto h = synthetic_load("hot:n=2,share=0.5,experts=6,tokens=100");
  ASSERT_TRUE(h.ok()) << err(h);
  EXPECT_EQ(h->load.counts[0], (std::vector<double>{25, 25, 12.5, 12.5, 12.5, 12.5}));
  auto s1 = synthetic_load("powerlaw:alpha=1.2,experts=16,layers=3,shuffle=1,seed=4");
  auto s2 = synthetic_load("powerlaw:alpha=1.2,experts=16,layers=3,shuffle=1,seed=4");
  ASSERT_TRUE(s1.ok() && s2.ok());
  EXPECT_EQ(s1->load.counts, s2->load.counts);
  EXPECT_NE(s1->load.counts[0], s1->load.counts[1]);  // each layer its own order
  auto m = models::load_model("deepseek-v3");
  ASSERT_TRUE(m.ok());
  auto dm = synthetic_load("uniform", &*m);
  ASSERT_TRUE(dm.ok());
  EXPECT_EQ(dm->load.num_layers(), 58);
  EXPECT_EQ(dm->layer_ids.front(), 3);

  EXPECT_EQ(
      err(synthetic_load("zipf")),
      "synthetic load 'zipf': unknown kind 'zipf', expected uniform, powerlaw, hot or routed");
  EXPECT_EQ(err(synthetic_load("uniform")), "synthetic load 'uniform': key 'experts' missing");
  EXPECT_EQ(err(synthetic_load("powerlaw:experts=8")),
            "synthetic load 'powerlaw:experts=8': key 'alpha' missing");
  EXPECT_EQ(err(synthetic_load("powerlaw:alpha=-1,experts=8")),
            "synthetic load 'powerlaw:alpha=-1,experts=8': key 'alpha': expected a number in "
            "[0, 10], got '-1'");
  EXPECT_EQ(err(synthetic_load("hot:n=2,experts=8,share=0.5,alpha=1")),
            "synthetic load 'hot:n=2,experts=8,share=0.5,alpha=1': unknown key 'alpha' for hot, "
            "expected one of layers, experts, tokens, seed, n, share, shuffle");
  EXPECT_EQ(err(synthetic_load("uniform:experts")),
            "synthetic load 'uniform:experts': expected key=value, got 'experts'");
  EXPECT_EQ(err(synthetic_load("uniform:experts=8,layers=2.5")),
            "synthetic load 'uniform:experts=8,layers=2.5': key 'layers': expected an integer, "
            "got '2.5'");
  EXPECT_EQ(
      err(synthetic_load("uniform:experts=8", &*m)),
      "synthetic load 'uniform:experts=8': key 'experts': deepseek-v3 has 256 experts, got 8");
}

// A --load value with no path separator or known extension is a synthetic spec, unless it names
// something on disk that is no synthetic kind: then it is read as a file and its error names it.
TEST(Synthetic, ABareNameOnDiskIsReadAsAFile) {
  const auto dir = std::filesystem::temp_directory_path() / "moeplan_bare_name";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "loads");
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  {
    std::ofstream f("myload");
    f << "1,2,3,4\n";
  }
  auto file = load_file_or_spec("myload");
  ASSERT_TRUE(file.ok()) << err(file);
  EXPECT_EQ(file->load.counts, (std::vector<std::vector<double>>{{1, 2, 3, 4}}));
  EXPECT_EQ(file->load.source, "myload");
  const std::string dir_error = err(load_file_or_spec("loads"));
  EXPECT_NE(dir_error.find("loads: expected a file, got a directory"), std::string::npos)
      << dir_error;
  // Not on disk: a synthetic kind, misspelt or not.
  EXPECT_EQ(
      err(load_file_or_spec("zipf")),
      "synthetic load 'zipf': unknown kind 'zipf', expected uniform, powerlaw, hot or routed");
  // A synthetic kind wins over a file of that name.
  {
    std::ofstream f("uniform");
    f << "5,5\n";
  }
  EXPECT_EQ(err(load_file_or_spec("uniform")), "synthetic load 'uniform': key 'experts' missing");
  std::filesystem::current_path(cwd);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace test_load_io
}  // namespace moeplan::planner
