// The measurement harness: statistics, verification before recording, dispositions, and every
// registered op's verification catching a wrong result.
#include <gtest/gtest.h>

#include <map>

#include <atomic>
#include <filesystem>

#include "kernels/communicator.hpp"
#include "models/registry.hpp"
#include "profiler/harness.hpp"
#include "profiler/layer_bench.hpp"
#include "profiler/profile.hpp"
#include "profiler/sweep.hpp"

namespace moeplan::profiler {
namespace {

TEST(HarnessStats, MedianAndPercentilesInterpolate) {
  const Stats s = summarize({10, 1, 9, 2, 8, 3, 7, 4, 6, 5});
  EXPECT_DOUBLE_EQ(s.median_s, 5.5);
  EXPECT_DOUBLE_EQ(s.p10_s, 1.9);
  EXPECT_DOUBLE_EQ(s.p90_s, 9.1);
  EXPECT_EQ(s.repetitions, 10);
  const Stats one = summarize({3.0});
  EXPECT_DOUBLE_EQ(one.median_s, 3.0);
  EXPECT_DOUBLE_EQ(one.p10_s, 3.0);
  EXPECT_EQ(summarize({}).repetitions, 0);
}

TEST(HarnessStats, SizeSequences) {
  EXPECT_EQ(powers_of_two(256, 4096), (std::vector<double>{256, 512, 1024, 2048, 4096}));
  EXPECT_EQ(row_counts(16, false), (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_EQ(row_counts(16, true), (std::vector<int>{1, 2, 3, 4, 6, 8, 12, 16}));
}

/// A case whose verdict is given and which counts its runs.
class CountingCase final : public OpCase {
 public:
  explicit CountingCase(bool correct) : correct_(correct) {}
  void run() override { ++runs; }
  Check verify() override {
    run();
    return correct_ && !fault_ ? Check{} : Check{false, "wrong on purpose"};
  }
  int runs = 0;

 private:
  bool correct_;
};

TEST(Harness, RepeatsWithinBoundsAndRecordsPassed) {
  CountingCase c(true);
  HarnessOptions o;
  o.warmup = 2;
  o.min_reps = 4;
  o.max_reps = 12;
  o.min_sample_s = 0.0;
  const Measurement m = measure(c, nullptr, o);
  EXPECT_EQ(m.disposition, planner::Disposition::kPassed);
  EXPECT_GE(m.stats.repetitions, 4);
  EXPECT_LE(m.stats.repetitions, 12);
  EXPECT_LE(m.stats.p10_s, m.stats.median_s);
  EXPECT_LE(m.stats.median_s, m.stats.p90_s);
  // warm-up + verification + probe + the timed samples, each one run.
  EXPECT_EQ(c.runs, 2 + 1 + 1 + m.stats.repetitions);
}

TEST(Harness, IncorrectIsNotTimed) {
  CountingCase c(false);
  const Measurement m = measure(c, nullptr, HarnessOptions{});
  EXPECT_EQ(m.disposition, planner::Disposition::kIncorrect);
  EXPECT_EQ(m.detail, "wrong on purpose");
  EXPECT_EQ(m.stats.repetitions, 0);
}

SweepSpec tiny_sweep(int world) {
  auto model = models::load_model("qwen1.5-moe-a2.7b");
  EXPECT_TRUE(model.ok());
  SweepRequest r;
  r.scale = 16;
  r.world_size = world;
  r.dtypes = {DType::kBf16};
  r.quick = true;
  r.max_tokens = 8;
  r.max_bytes = 4096;
  auto s = make_sweep(*model, r);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return *s;
}

HarnessOptions fast() {
  HarnessOptions o;
  o.warmup = 1;
  o.min_reps = 2;
  o.max_reps = 2;
  o.min_sample_s = 0.0;
  return o;
}

TEST(Harness, SweepDerivedFromModelAndWorld) {
  const SweepSpec s = tiny_sweep(2);
  EXPECT_EQ(s.hidden, 2048 / 16);
  EXPECT_EQ(s.intermediate, 1408 / 16);
  EXPECT_EQ(s.group_sizes, (std::vector<int>{2}));
  EXPECT_EQ(s.tp_sizes, (std::vector<int>{1, 2}));
  auto pts = sweep_points(s, {"gemm"});
  ASSERT_TRUE(pts.ok());
  // router (E,H); gate/up and down at tp 1 and 2; shared gate/up and down at tp 1 and 2 → 9
  // shapes × rows 1, 2, 4, 8.
  EXPECT_EQ(pts->size(), 9U * 4U);
  EXPECT_FALSE(sweep_points(s, {"gemm", "nonsense"}).ok());
}

TEST(Harness, BadSweepInputs) {
  auto model = models::load_model("qwen1.5-moe-a2.7b");
  ASSERT_TRUE(model.ok());
  SweepRequest r;
  r.scale = 7;  // does not divide 2048
  EXPECT_FALSE(make_sweep(*model, r).ok());
  r.scale = 1;
  r.dtypes = {DType::kFp8};
  EXPECT_FALSE(make_sweep(*model, r).ok());
  r.dtypes = {};
  r.world_size = 7;  // 60 experts: no ep divides, 1408 % 7 != 0
  EXPECT_FALSE(make_sweep(*model, r).ok());
}

// Every compute op passes on its own data and is caught when its result is made wrong.
TEST(HarnessOps, EveryComputeOpVerifiesAndCatchesAFault) {
  const SweepSpec s = tiny_sweep(1);
  const auto backend = kernels::make_cpu_backend();
  int checked = 0;
  for (const auto& table : all_ops()) {
    if (table.collective) continue;
    auto pts = table.sweep(s);
    ASSERT_FALSE(pts.empty()) << table.name;
    for (const bool fault : {false, true}) {
      auto c = table.init(pts.back(), s, nullptr, *backend);
      ASSERT_TRUE(c.ok()) << table.name;
      if (fault) (*c)->inject_fault();
      const Measurement m = measure(**c, nullptr, fast());
      EXPECT_EQ(m.disposition,
                fault ? planner::Disposition::kIncorrect : planner::Disposition::kPassed)
          << table.name << ": " << m.detail;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 10);  // 7 of the layer, 3 of the DeepEP dispatchers
}

/// The CPU backend with every call counted by op, and fp8 refused as the CPU backend does.
class RecordingBackend final : public kernels::Backend {
 public:
  std::string name() const override { return "recording"; }
  Status can_implement(const kernels::OpQuery& q) const override { return cpu_->can_implement(q); }
  void router_logits(const kernels::OpContext& c, std::span<const float> x, int t, int h,
                     std::span<const float> w, int e, std::span<float> l) override {
    ++calls[kernels::BackendOp::kRouterLogits];
    cpu_->router_logits(c, x, t, h, w, e, l);
  }
  void route(const kernels::OpContext& c, const models::RouterSpec& r, std::span<const float> l,
             std::span<const float> b, int t, int e, int k, std::span<int> ids,
             std::span<float> w) override {
    ++calls[kernels::BackendOp::kRoute];
    cpu_->route(c, r, l, b, t, e, k, ids, w);
  }
  kernels::Permutation permute(const kernels::OpContext& c, std::span<const int> p, int f,
                               int n) override {
    ++calls[kernels::BackendOp::kPermute];
    return cpu_->permute(c, p, f, n);
  }
  void expert_ffn(const kernels::OpContext& c, std::span<const float> r, std::span<const int> o,
                  std::span<const kernels::ExpertWeights> e, int h, DType d,
                  std::span<float> out) override {
    ++calls[kernels::BackendOp::kExpertFfn];
    cpu_->expert_ffn(c, r, o, e, h, d, out);
  }
  void gemm(const kernels::OpContext& c, std::span<const float> a, int m, int k,
            std::span<const float> b, int n, DType d, DType od, std::span<float> out) override {
    ++calls[kernels::BackendOp::kGemm];
    cpu_->gemm(c, a, m, k, b, n, d, od, out);
  }
  void gemm_fp8(const kernels::OpContext& c, std::span<const float> a, int m, int k,
                const kernels::Fp8Act& g, std::span<const kernels::Fp8Part> parts,
                std::span<float> out) override {
    ++calls[kernels::BackendOp::kGemmFp8Block];
    cpu_->gemm_fp8(c, a, m, k, g, parts, out);
  }
  void silu_mul(const kernels::OpContext& c, std::span<const float> gu, int r, int w, DType d,
                std::span<float> a) override {
    ++calls[kernels::BackendOp::kSiluMul];
    cpu_->silu_mul(c, gu, r, w, d, a);
  }
  void sigmoid_gate(const kernels::OpContext& c, std::span<const float> x, int t, int h,
                    std::span<const float> g, std::span<float> out) override {
    ++calls[kernels::BackendOp::kSigmoidGate];
    cpu_->sigmoid_gate(c, x, t, h, g, out);
  }
  void combine(const kernels::OpContext& c, std::span<const float> y, std::span<const int> pr,
               std::span<const float> w, std::span<const float> sh, int t, int k, int h, DType d,
               std::span<float> out) override {
    ++calls[kernels::BackendOp::kCombine];
    cpu_->combine(c, y, pr, w, sh, t, k, h, d, out);
  }
  void shared_expert(const kernels::OpContext& c, std::span<const float> x, int t, int h,
                     const kernels::ExpertWeights& w, std::span<const float> g, DType d,
                     std::span<float> out) override {
    ++calls[kernels::BackendOp::kSharedExpert];
    cpu_->shared_expert(c, x, t, h, w, g, d, out);
  }
  std::map<kernels::BackendOp, int> calls;

 private:
  std::unique_ptr<kernels::Backend> cpu_ = kernels::make_cpu_backend();
};

// fp8 block weights (DeepSeek-V3's own format): the expert GEMMs are measured as gemm_fp8
// points of dtype fp8 — the op the layer's MLP calls — verified against a reference on the
// dequantized weights and caught when wrong; the router stays a plain GEMM.
TEST(Harness, Fp8WeightsMeasureTheFp8Gemm) {
  auto model = models::load_model("deepseek-v3");
  ASSERT_TRUE(model.ok());
  SweepRequest r;
  r.scale = 8;  // H 896, I 256
  r.world_size = 2;
  r.quick = true;
  r.max_tokens = 8;
  r.max_bytes = 4096;
  auto s = make_sweep(*model, r);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->fp8_block_out, 128);
  auto pts = sweep_points(*s, {"gemm"});
  ASSERT_TRUE(pts.ok());
  int fp8 = 0, plain = 0;
  const OpPoint* down = nullptr;
  for (const auto& [table, p] : *pts) {
    if (p.dtype == DType::kFp8) {
      ++fp8;
      EXPECT_NE(p.kernel.find("gemm_fp8"), std::string::npos) << p.kernel;
      if (p.kernel.find("down") != std::string::npos && p.k == 128) down = &p;
    } else {
      ++plain;
      EXPECT_EQ(p.n, 256);  // the router [H][E]
    }
  }
  // Router: 1 shape; experts: gate/up and down at tp 1 and 2 (the shared expert has the same
  // shapes; gate/up at tp 2, n 256 k 896, is the router's shape, measured as its own fp8 point)
  // → 4 fp8 shapes; rows 1, 2, 4, 8.
  EXPECT_EQ(plain, 4);
  EXPECT_EQ(fp8, 16);
  ASSERT_NE(down, nullptr);
  const OpTable* gemm = pts->front().first;
  RecordingBackend backend;
  for (const bool fault : {false, true}) {
    auto c = gemm->init(*down, *s, nullptr, backend);
    ASSERT_TRUE(c.ok()) << c.error().message;
    if (fault) (*c)->inject_fault();
    const Measurement m = measure(**c, nullptr, fast());
    EXPECT_EQ(m.disposition,
              fault ? planner::Disposition::kIncorrect : planner::Disposition::kPassed)
        << m.detail;
  }
  EXPECT_GE(backend.calls[kernels::BackendOp::kGemmFp8Block], 1);
  EXPECT_EQ(backend.calls[kernels::BackendOp::kGemm], 0);
}

// The compute ops time the profiled backend's own calls (so a backend plugged in is measured by
// the same op table), and a point its can_implement refuses is not set up: not supported.
TEST(HarnessOps, ComputeOpsTimeTheBackendsCalls) {
  SweepSpec s = tiny_sweep(1);
  s.shared_gated = true;
  const std::map<std::string, kernels::BackendOp> expected = {
      {"router_topk", kernels::BackendOp::kRoute},
      {"silu_mul", kernels::BackendOp::kSiluMul},
      {"sigmoid_gate", kernels::BackendOp::kSigmoidGate},
      {"combine_sum", kernels::BackendOp::kCombine},
      {"gemm", kernels::BackendOp::kGemm}};
  for (const auto& [name, op] : expected) {
    const OpTable* table = nullptr;
    for (const auto& t : all_ops()) {
      if (t.name == name) table = &t;
    }
    ASSERT_NE(table, nullptr) << name;
    auto pts = table->sweep(s);
    ASSERT_FALSE(pts.empty()) << name;
    RecordingBackend backend;
    auto c = table->init(pts.back(), s, nullptr, backend);
    ASSERT_TRUE(c.ok()) << name << ": " << c.error().message;
    (*c)->run();
    EXPECT_GE(backend.calls[op], 1) << name;
    // fp8 storage: refused by can_implement, reported as the init error (not supported).
    OpPoint fp8 = pts.back();
    fp8.dtype = DType::kFp8;
    if (op != kernels::BackendOp::kRoute) {
      auto refused = table->init(fp8, s, nullptr, backend);
      ASSERT_FALSE(refused.ok()) << name;
      EXPECT_NE(refused.error().message.find("fp8 is not a storage dtype"), std::string::npos);
    }
  }
}

// Every collective, run by 2 in-process ranks: passes, and a fault on one rank fails both.
TEST(HarnessOps, EveryCollectiveVerifiesAndCatchesAFault) {
  const SweepSpec s = tiny_sweep(2);
  const auto backend = kernels::make_cpu_backend();
  int checked = 0;
  for (const auto& table : all_ops()) {
    if (!table.collective) continue;
    const auto pts = table.sweep(s);
    ASSERT_FALSE(pts.empty()) << table.name;
    for (const bool fault : {false, true}) {
      std::atomic<int> incorrect{0}, passed{0};
      kernels::run_in_process(2, [&](kernels::Communicator& world) {
        auto group = world.split(0, world.rank());
        auto c = table.init(pts.back(), s, group.get(), *backend);
        ASSERT_TRUE(c.ok());
        if (fault && world.rank() == 1) (*c)->inject_fault();
        const Measurement m = measure(**c, &world, fast());
        (m.disposition == planner::Disposition::kIncorrect ? incorrect : passed)++;
      });
      EXPECT_EQ(fault ? incorrect.load() : passed.load(), 2) << table.name;
    }
    EXPECT_DOUBLE_EQ(table.bus_factor(2), table.name == "all_reduce" ? 1.0 : 0.5);
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

TEST(HarnessOps, WholeLayerVerifiedAgainstTheDenseReference) {
  auto model = models::load_model("qwen1.5-moe-a2.7b");
  ASSERT_TRUE(model.ok());
  const auto spec = kernels::LayerSpec::from_model(*model, 16, DType::kBf16, 7);
  ASSERT_TRUE(spec.ok());
  for (const bool fault : {false, true}) {
    std::atomic<int> ok{0};
    kernels::run_in_process(2, [&](kernels::Communicator& world) {
      const auto lm = measure_layer(
          world, *spec,
          kernels::Layout::of(2, 1, kernels::RankMapping::kTpInnermost, kernels::Dispatcher::kA2av),
          32, fast(), fault);
      if (lm.measurement.disposition == planner::Disposition::kPassed) ++ok;
      if (!fault) {
        EXPECT_EQ(lm.measurement.stats.repetitions, 2);
      }
    });
    EXPECT_EQ(ok.load(), fault ? 0 : 2);
  }
  // The load the layer routes: T·k pairs over E experts.
  const auto counts = routed_counts(*spec, 32);
  double total = 0.0;
  for (const double c : counts) total += c;
  EXPECT_DOUBLE_EQ(total, 32.0 * spec->top_k);
}

TEST(Profile, WritesEveryPointOnceAndResumes) {
  const auto path = (std::filesystem::temp_directory_path() / "moeplan_profile_resume.db").string();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  ProfileRequest req;
  req.sweep = tiny_sweep(2);
  req.ops = {"gemm", "all_reduce"};
  req.harness = fast();
  req.out_path = path;
  int first_total = 0;
  kernels::run_in_process(2, [&](kernels::Communicator& world) {
    auto s = run_profile(world, req, {}, {});
    ASSERT_TRUE(s.ok()) << s.error().message;
    if (world.rank() == 0) {
      first_total = s->total;
      EXPECT_EQ(s->measured, s->total);
      EXPECT_EQ(s->device.substr(s->device.size() - 8), "/ranks=2");
    }
  });
  auto db = planner::CostDb::open(path, false);
  ASSERT_TRUE(db.ok());
  auto pts = (*db)->points();
  ASSERT_TRUE(pts.ok());
  EXPECT_EQ(static_cast<int>(pts->size()), first_total);
  for (const auto& p : *pts) {
    EXPECT_GT(p.median_s, 0.0) << p.op << " " << p.shape;
    if (p.op == "all_reduce") {
      EXPECT_EQ(p.group_size, 2);
      EXPECT_NEAR(p.bus_bandwidth, p.bytes / p.median_s * 1.0, 1e-6 * p.bus_bandwidth);
    }
  }
  // --resume measures nothing again; a stop request stops before the next point.
  req.resume = true;
  kernels::run_in_process(2, [&](kernels::Communicator& world) {
    auto s = run_profile(world, req, {}, {});
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->skipped, s->total);
    EXPECT_EQ(s->measured, 0);
  });
  req.resume = false;
  kernels::run_in_process(1, [&](kernels::Communicator& world) {
    ProfileRequest one = req;
    one.sweep = tiny_sweep(1);
    auto s = run_profile(world, one, {}, [] { return true; });
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(s->interrupted);
    EXPECT_EQ(s->measured, 0);
  });
  auto again = (*db)->points();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size(), pts->size());
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

}  // namespace
}  // namespace moeplan::profiler
