// The measurement harness: statistics, verification before recording, dispositions, and every
// registered op's verification catching a wrong result.
#include <gtest/gtest.h>

#include <set>

#include <map>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "kernels/communicator.hpp"
#include "models/registry.hpp"
#include "profiler/harness.hpp"
#include "profiler/layer_bench.hpp"
#include "profiler/op_common.hpp"
#include "profiler/pace.hpp"
#include "profiler/profile.hpp"
#include "profiler/sweep.hpp"
#include "tests/profiler/profile_fixtures.hpp"
#include "tests/profiler/queued_device_comm.hpp"
#include "tests/profiler/recording_backend.hpp"

namespace moeplan::profiler {
namespace test_harness {
namespace {

// The layer the whole-layer tests run: Qwen1.5-MoE-A2.7B at 1/16 width, bf16, seed 7.
Result<kernels::LayerSpec> small_layer_spec() {
  auto model = models::load_model("qwen1.5-moe-a2.7b");
  if (!model) return model.error();
  return kernels::LayerSpec::from_model(*model, 16, DType::kBf16, 7);
}

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

using fixtures::fast;
using fixtures::tiny_sweep;

// measure_layer of `spec` on one in-process rank (ep 1 × tp 1, a2av, 32 tokens) on `backend`.
LayerMeasurement measure_one_rank(const kernels::LayerSpec& spec, kernels::Backend& backend,
                                  std::size_t cold_bytes = kColdBytes) {
  LayerMeasurement out;
  kernels::run_in_process(1, [&](kernels::Communicator& world) {
    out = measure_layer(
        world, spec,
        kernels::Layout::of(1, 1, kernels::RankMapping::kTpInnermost, kernels::Dispatcher::kA2av),
        32, fast(), false, {}, &backend, cold_bytes);
  });
  return out;
}

TEST(Harness, SweepDerivedFromModelAndWorld) {
  const SweepSpec s = tiny_sweep(2);
  EXPECT_EQ(s.hidden, 2048 / 16);
  EXPECT_EQ(s.intermediate, 1408 / 16);
  EXPECT_EQ(s.group_sizes, (std::vector<int>{2}));
  EXPECT_EQ(s.tp_sizes, (std::vector<int>{1, 2}));
  auto pts = sweep_points(s, {"gemm"});
  ASSERT_TRUE(pts.ok());
  // The attention projections of each tp (16 heads of 128, as many K/V heads; widths not
  // scaled, the hidden size is): fused q/k/v and output.
  EXPECT_EQ(s.projections, (std::vector<std::pair<int, int>>{
                               {48 * 128, 128}, {128, 16 * 128}, {24 * 128, 128}, {128, 8 * 128}}));
  EXPECT_EQ(s.rope_heads, 32);
  EXPECT_EQ(s.rope_head_dim, 128);
  EXPECT_EQ(s.rope_rot_dim, 128);
  EXPECT_DOUBLE_EQ(s.rope_theta, 1e6);
  // router (E,H); gate/up and down at tp 1 and 2; shared gate/up and down at tp 1 and 2; the 4
  // projections → 13 shapes × rows 1, 2, 4, 8.
  EXPECT_EQ(pts->size(), 13U * 4U);
  EXPECT_FALSE(sweep_points(s, {"gemm", "nonsense"}).ok());
}

// The attention core's shapes are the cost model's per rank: MLA prefill expanded into the
// rank's heads, MLA decode absorbed over one latent (kv_lora_rank + rope wide, V the latent);
// GQA with its K/V heads split over tp and replicated once tp exceeds them.
TEST(Harness, AttentionShapesPerTp) {
  auto v3 = models::load_model("deepseek-v3");
  ASSERT_TRUE(v3.ok());
  SweepRequest r;
  r.scale = 8;
  r.world_size = 2;
  r.quick = true;
  r.dtypes = {DType::kBf16};
  auto s = make_sweep(*v3, r);
  ASSERT_TRUE(s.ok()) << s.error().message;
  const float scale = 1.0F / std::sqrt(192.0F);
  EXPECT_EQ(s->attention, (std::vector<AttentionSweepShape>{{false, 128, 128, 192, 128, scale},
                                                            {true, 128, 1, 576, 512, scale},
                                                            {false, 64, 64, 192, 128, scale},
                                                            {true, 64, 1, 576, 512, scale}}));
  auto pts = sweep_points(*s, {"attention"});
  ASSERT_TRUE(pts.ok());
  // Quick: contexts 128 and 512; prefill one prompt each, decode batches 1 and 8.
  EXPECT_EQ(pts->size(), 2U * (2U + 2U * 2U));
  EXPECT_EQ(pts->front().second.shape,
            "decode=0,tokens=128,context=128,heads=128,kv_heads=128,qk=192,v=128");

  auto qwen = models::load_model("qwen2-57b-a14b");  // 28 heads over 4 K/V heads
  ASSERT_TRUE(qwen.ok());
  r.scale = 1;
  r.world_size = 8;
  s = make_sweep(*qwen, r);
  ASSERT_TRUE(s.ok()) << s.error().message;
  std::vector<std::pair<int, int>> heads;
  for (const auto& a : s->attention) {
    if (!a.decode) heads.emplace_back(a.heads, a.kv_heads);
  }
  EXPECT_EQ(heads, (std::vector<std::pair<int, int>>{{28, 4}, {14, 2}, {7, 1}, {4, 1}}));
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
  // 7 of the layer, the attention core, norm, rope, 3 of the DeepEP dispatchers
  EXPECT_EQ(checked, 13);
}

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
  // → 4 fp8 shapes; the attention projections and dense MLP layers (fp8 too: DeepSeek-V3
  // quantizes them) add theirs, once each; rows 1, 2, 4, 8.
  std::set<std::pair<int, int>> fp8_shapes = {{512, 896}, {896, 256}, {256, 896}, {896, 128}};
  for (const auto& nk : s->projections) fp8_shapes.insert(nk);
  EXPECT_GE(s->projections.size(), 14U);  // MLA's 7 at tp 1, 5 more at tp 2; dense MLP's
  EXPECT_EQ(plain, 4);
  EXPECT_EQ(fp8, 4 * static_cast<int>(fp8_shapes.size()));
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
      {"attention", kernels::BackendOp::kAttention},
      {"norm", kernels::BackendOp::kRmsNorm},
      {"rope", kernels::BackendOp::kRope},
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

// Every collective, run by 2 in-process ranks on host memory and on device memory (a stand-in
// device communicator, the device case of the op, whose results exist only once waited for):
// passes, and a fault on one rank fails both.
TEST(HarnessOps, EveryCollectiveVerifiesAndCatchesAFault) {
  const SweepSpec s = tiny_sweep(2);
  const auto backend = kernels::make_cpu_backend();
  int checked = 0;
  for (const auto& table : all_ops()) {
    if (!table.collective) continue;
    const auto pts = table.sweep(s);
    ASSERT_FALSE(pts.empty()) << table.name;
    for (const bool on_device : {false, true}) {
      for (const bool fault : {false, true}) {
        std::atomic<int> incorrect{0}, passed{0}, device_cases{0};
        kernels::run_in_process(2, [&](kernels::Communicator& world) {
          std::unique_ptr<kernels::Communicator> group = world.split(0, world.rank());
          if (on_device) group = std::make_unique<fixtures::QueuedDeviceComm>(std::move(group));
          auto c = table.init(pts.back(), s, group.get(), *backend);
          ASSERT_TRUE(c.ok()) << c.error().message;
          if (fault && world.rank() == 1) (*c)->inject_fault();
          const Measurement m = measure(**c, &world, fast());
          (m.disposition == planner::Disposition::kIncorrect ? incorrect : passed)++;
          if (on_device) {
            const auto& dev = static_cast<fixtures::QueuedDeviceComm&>(*group).device();
            if (dev.allocations > 0 && dev.collectives_run > 0) ++device_cases;
          }
        });
        EXPECT_EQ(fault ? incorrect.load() : passed.load(), 2) << table.name << " " << on_device;
        EXPECT_EQ(device_cases.load(), on_device ? 2 : 0) << table.name;
      }
    }
    EXPECT_DOUBLE_EQ(table.bus_factor(2), table.name == "all_reduce" ? 1.0 : 0.5);
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

TEST(HarnessOps, WholeLayerVerifiedAgainstTheDenseReference) {
  const auto spec = small_layer_spec();
  ASSERT_TRUE(spec.ok()) << spec.error().message;
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

// A profile records the rotation its points read their operands cold through (profile
// --cold-mib), validate reads it back for the profile's device (profiled_cold_bytes), and a
// resume with another rotation is refused before it measures anything, naming both.
TEST(Profile, RecordsItsColdRotationAndResumesOnlyWithIt) {
  const auto path =
      (std::filesystem::temp_directory_path() / "moeplan_profile_rotation.db").string();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  ProfileRequest req;
  req.sweep = tiny_sweep(1);
  req.sweep.cold_bytes = std::size_t{3} << 20;
  req.ops = {"silu_mul"};
  req.harness = fast();
  req.out_path = path;
  const auto run = [&](const ProfileRequest& r) {
    Result<ProfileSummary> out = Error{"not run"};
    kernels::run_in_process(
        1, [&](kernels::Communicator& world) { out = run_profile(world, r, {}, {}); });
    return out;
  };
  auto first = run(req);
  ASSERT_TRUE(first.ok()) << first.error().message;
  req.resume = true;
  ProfileRequest other = req;
  other.sweep.cold_bytes = std::size_t{5} << 20;
  auto refused = run(other);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().input, "cold_mib");
  EXPECT_NE(refused.error().message.find("5: " + path + " was profiled with a rotation of 3 MiB"),
            std::string::npos)
      << refused.error().message;
  auto same = run(req);
  ASSERT_TRUE(same.ok()) << same.error().message;
  EXPECT_EQ(same->skipped, same->total);
  {
    auto db = planner::CostDb::open(path, false);
    ASSERT_TRUE(db.ok());
    auto runs = (*db)->runs();
    ASSERT_TRUE(runs.ok());
    ASSERT_EQ(runs->size(), 2U);  // the refused resume added no run
    for (const auto& r : *runs) EXPECT_EQ(r.cold_bytes, std::int64_t{3} << 20);
  }
  auto setup = planner::make_cost_setup("local:1", path, planner::CostStatistic::kMedian);
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  auto cold = profiled_cold_bytes(*setup);
  ASSERT_TRUE(cold.ok());
  EXPECT_EQ(*cold, std::size_t{3} << 20);
  // A run that recorded none was profiled before schema 5, with kColdBytes.
  planner::RunInfo old;
  EXPECT_EQ(recorded_cold_bytes(old), kColdBytes);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

// A CPU whose last-level cache is over 1/8 of the rotation is told, with the rotation that is
// not; a rotation of 8 times the cache or more, or an unknown cache, says nothing.
TEST(Profile, ColdRotationNoteNamesTheRotationThatIsNot) {
  const std::size_t mib = std::size_t{1} << 20;
  EXPECT_EQ(cold_rotation_note(32 * mib, kColdBytes), "");
  EXPECT_EQ(cold_rotation_note(0, mib), "");
  const std::string note = cold_rotation_note(260 * mib, kColdBytes);
  EXPECT_NE(note.find("last-level cache is 260 MiB and the operand rotation 256 MiB"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("--cold-mib 2080 "), std::string::npos) << note;
  EXPECT_NE(cold_rotation_note(33 * mib, kColdBytes), "");
}

// A device clock (the CUDA backend's events) times the backend's calls, not the wall: a case
// whose run sleeps 3 ms around one 1 ms "kernel" measures 1 ms, and the wall time it spends
// still bounds the repetitions.
class SleepingCase final : public OpCase {
 public:
  explicit SleepingCase(kernels::Backend& backend) : backend_(backend) {}
  void run() override {
    backend_.silu_mul(kernels::OpContext{}, gate_up_, 1, 2, DType::kBf16, act_);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  Check verify() override {
    run();
    return {};
  }

 private:
  kernels::Backend& backend_;
  std::vector<float> gate_up_ = {0.5F, -1.0F, 2.0F, 0.25F};
  std::vector<float> act_ = std::vector<float>(2);
};

TEST(Harness, DeviceClockTimesTheKernelsNotTheWall) {
  RecordingBackend gpu(1e-3);
  SleepingCase c(gpu);
  HarnessOptions o;
  o.min_sample_s = 0.0;
  o.min_reps = 3;
  o.max_reps = 60;
  o.max_seconds = 0.05;
  o.device_clock = &gpu;
  const Measurement m = measure(c, nullptr, o);
  ASSERT_EQ(m.disposition, planner::Disposition::kPassed) << m.detail;
  EXPECT_NEAR(m.stats.median_s, 1e-3, 1e-12);
  EXPECT_NEAR(m.stats.p90_s, 1e-3, 1e-12);
  EXPECT_EQ(m.stats.repetitions, 3);  // identical samples: stable at once
  // Never stable: the wall time (≥ 3 ms a sample) ends it within 0.05 s, long before the
  // 0.05 s of device time (50 samples) or max_reps would.
  o.target_spread = -1.0;
  const Measurement w = measure(c, nullptr, o);
  EXPECT_LE(w.stats.repetitions, 18);
  EXPECT_GE(w.stats.repetitions, 3);
  // Without a device clock the same case is timed by the wall: the sleep included.
  RecordingBackend host;
  SleepingCase h(host);
  o.target_spread = 0.05;
  o.device_clock = &host;
  EXPECT_GE(measure(h, nullptr, o).stats.median_s, 3e-3);
}

// A device profile: the backend's calls timed by its clock, named after its device; host code
// of the layer (staging, packing rows) is not a kernel of the backend and is left out, saying
// so.
TEST(Profile, DeviceProfileTimesTheBackendAndLeavesHostOpsOut) {
  const auto path = (std::filesystem::temp_directory_path() / "moeplan_profile_device.db").string();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  constexpr double kTick = 2.5e-4;
  ProfileRequest req;
  req.sweep = tiny_sweep(1);
  req.ops = {"gemm", "silu_mul", "stage", "permute"};
  req.harness = fast();
  req.out_path = path;
  req.backend = std::make_shared<RecordingBackend>(kTick);
  kernels::run_in_process(1, [&](kernels::Communicator& world) {
    auto s = run_profile(world, req, {}, {});
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s->device, "fakegpu:Fake GPU 80GB/ranks=1");
    EXPECT_EQ(s->incorrect, 0);
    EXPECT_GT(s->measured, 0);
    EXPECT_GT(s->not_supported, 0);
  });
  const auto written = fixtures::read_profile_db(path);
  ASSERT_EQ(written.runs.size(), 1U);
  EXPECT_EQ(written.runs.front().backend, "fakegpu");
  std::map<std::string, int> seen;
  for (const auto& p : written.points) {
    ++seen[p.op];
    EXPECT_EQ(p.backend, "fakegpu");
    EXPECT_EQ(p.device, "fakegpu:Fake GPU 80GB/ranks=1");
    if (p.op == "stage" || p.op == "permute") {
      EXPECT_EQ(p.disposition, planner::Disposition::kNotSupported) << p.op;
      EXPECT_NE(p.detail.find("host code in moeplan's layer"), std::string::npos) << p.detail;
    } else {
      // One backend call per run: exactly one tick, whatever the wall time of the CPU work.
      EXPECT_EQ(p.disposition, planner::Disposition::kPassed) << p.op << " " << p.detail;
      EXPECT_NEAR(p.median_s, kTick, 1e-12) << p.op << " " << p.shape;
    }
  }
  EXPECT_EQ(seen.size(), 4U);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

// A backend that ran a stand-in for an op's kernel (the CUDA fp8 GEMM emulated in fp32) gives a
// right result in the wrong time: the point is recorded without a time, saying why, and the
// other ops are measured as usual.
TEST(Profile, AStandInForTheKernelIsRecordedWithoutATime) {
  const auto path =
      (std::filesystem::temp_directory_path() / "moeplan_profile_standin.db").string();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  ProfileRequest req;
  req.sweep = tiny_sweep(1);
  req.ops = {"gemm", "silu_mul"};
  req.harness = fast();
  req.out_path = path;
  auto backend = std::make_shared<RecordingBackend>(2.5e-4);
  backend->stand_in = kernels::BackendOp::kGemm;
  req.backend = backend;
  kernels::run_in_process(1, [&](kernels::Communicator& world) {
    auto s = run_profile(world, req, {}, {});
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_GT(s->measured, 0);
    EXPECT_GT(s->not_supported, 0);
  });
  auto db = planner::CostDb::open(path, false);
  ASSERT_TRUE(db.ok());
  auto pts = (*db)->points();
  ASSERT_TRUE(pts.ok());
  // The gemm op's router-logit points run another backend op (measured); its GEMMs ran the
  // stand-in (no time).
  int stood_in = 0, router = 0;
  for (const auto& p : *pts) {
    if (p.op == "gemm" && p.disposition == planner::Disposition::kNotSupported) {
      ++stood_in;
      EXPECT_NE(p.detail.find("stand-in ran for this op (test)"), std::string::npos) << p.detail;
    } else if (p.op == "gemm") {
      ++router;
      EXPECT_EQ(p.disposition, planner::Disposition::kPassed) << p.shape;
      EXPECT_NE(p.detail.find("router_logits"), std::string::npos) << p.detail;
    } else {
      EXPECT_EQ(p.disposition, planner::Disposition::kPassed) << p.op << " " << p.detail;
    }
  }
  EXPECT_GT(stood_in, 0);
  EXPECT_GT(router, 0);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

// The whole layer on a backend with a device clock: its time and its phases are the backend's
// kernel time (what validate --backend cuda compares with the prediction).
TEST(HarnessOps, LayerTimedByTheDeviceClock) {
  const auto spec = small_layer_spec();
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  constexpr double kTick = 1e-3;
  RecordingBackend gpu(kTick);
  const LayerMeasurement lm = measure_one_rank(*spec, gpu);
  ASSERT_EQ(lm.measurement.disposition, planner::Disposition::kPassed) << lm.measurement.detail;
  const double calls = lm.measurement.stats.median_s / kTick;
  // Router logits, route, permute, the grouped FFN, the shared expert, combine: whole ticks.
  EXPECT_NEAR(calls, std::round(calls), 1e-9);
  EXPECT_GE(std::round(calls), 5.0);
  EXPECT_NEAR(lm.phases.total, lm.measurement.stats.median_s, 1e-12);
  EXPECT_NEAR(lm.phases.experts, kTick, 1e-12);  // one grouped-FFN call
  EXPECT_NEAR(lm.phases.shared, kTick, 1e-12);
  const auto& ph = lm.phases;
  EXPECT_NEAR(ph.router + ph.dispatch + ph.experts + ph.tp + ph.shared + ph.combine, ph.total,
              1e-12);
}

// The layer reads its weights cold at every run on the CPU: copies of them taken in turn, as
// many as exceed the rotation (kColdBytes by default; at most 64); a device backend keeps one
// copy (on the device).
TEST(HarnessOps, LayerTakesCopiesOfItsWeightsInTurnOnTheCpu) {
  const auto spec = small_layer_spec();
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  const kernels::RankWeights one = kernels::make_rank_weights(*spec, kernels::Layout::of(1, 1), 0);
  const std::size_t bytes = weight_bytes(one);
  // Every expert's gate, up and down matrices in fp32, and the router.
  EXPECT_GE(
      bytes,
      (std::size_t{3} * static_cast<std::size_t>(spec->num_experts) *
           static_cast<std::size_t>(spec->hidden) * static_cast<std::size_t>(spec->intermediate) +
       static_cast<std::size_t>(spec->hidden) * static_cast<std::size_t>(spec->num_experts)) *
          sizeof(float));
  RecordingBackend cpu;
  const LayerMeasurement lm = measure_one_rank(*spec, cpu);
  EXPECT_EQ(lm.measurement.disposition, planner::Disposition::kPassed) << lm.measurement.detail;
  EXPECT_EQ(lm.copies, static_cast<int>(std::min<std::size_t>(64, kColdBytes / bytes + 1)));
  EXPECT_GT(lm.copies, 1);
  // The rotation of a profile made with a smaller --cold-mib: as many copies as exceed it.
  EXPECT_EQ(measure_one_rank(*spec, cpu, 2 * bytes).copies, 3);
  RecordingBackend gpu(1e-3);
  EXPECT_EQ(measure_one_rank(*spec, gpu).copies, 1);
}

// A stand-in for one of the layer's kernels while it is timed (the CUDA fp8 GEMM emulated in
// fp32) is said with the measurement, with the backend's reason; a layer that ran the backend's
// own kernels says nothing.
TEST(HarnessOps, LayerMeasuredOverAStandInSaysSo) {
  const auto spec = small_layer_spec();
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  for (const bool stand_in : {false, true}) {
    RecordingBackend gpu(1e-3);
    if (stand_in) gpu.stand_in = kernels::BackendOp::kExpertFfn;
    const LayerMeasurement lm = measure_one_rank(*spec, gpu);
    EXPECT_EQ(lm.measurement.disposition, planner::Disposition::kPassed) << lm.measurement.detail;
    EXPECT_EQ(lm.stand_in, stand_in ? "stand-in ran for this op (test)" : "");
  }
}

// A full profile measures its unsettled points again after the sweep and keeps the steadier
// measurement; each point stays one row, the replaced ones say so. Every point counts as
// unsettled here (a negative spread target), so each is measured twice.
TEST(Profile, UnsettledPointsAreMeasuredAgainAfterTheSweep) {
  const auto path = (std::filesystem::temp_directory_path() / "moeplan_profile_again.db").string();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  ProfileRequest req;
  req.sweep = tiny_sweep(2);
  req.ops = {"gemm", "all_reduce"};
  req.harness = fast();
  req.harness.target_spread = -1.0;
  req.out_path = path;
  req.remeasure_unsettled = true;
  ProfileSummary sum;
  int writes = 0;
  kernels::run_in_process(2, [&](kernels::Communicator& world) {
    auto s = run_profile(world, req, {}, {}, [&](const planner::CostPoint&) { ++writes; });
    ASSERT_TRUE(s.ok()) << s.error().message;
    if (world.rank() == 0) sum = *s;
  });
  EXPECT_EQ(sum.measured, sum.total);
  EXPECT_EQ(sum.remeasured, sum.measured);
  EXPECT_EQ(writes, sum.total + sum.remeasured);  // a point measured again is shown again
  auto db = planner::CostDb::open(path, false);
  ASSERT_TRUE(db.ok());
  auto pts = (*db)->points();
  ASSERT_TRUE(pts.ok());
  ASSERT_EQ(static_cast<int>(pts->size()), sum.total);
  int noted = 0;
  int kept = 0;
  for (const auto& p : *pts) {
    EXPECT_GT(p.median_s, 0.0);
    if (p.detail.find("; measured again after the sweep, first kept (again: median ") !=
        std::string::npos) {
      ++kept;
    }
    if (p.detail.find("; re-measured after the sweep (first: median ") != std::string::npos) {
      ++noted;
      // The kept measurement spread less than the first (the note's percentage).
      const auto at = p.detail.find("spread ");
      ASSERT_NE(at, std::string::npos) << p.detail;
      EXPECT_LT((p.p90_s - p.p10_s) / p.median_s,
                std::stod(p.detail.substr(at + 7)) / 100.0 + 0.005)
          << p.detail;
    }
  }
  EXPECT_EQ(noted, sum.replaced);
  EXPECT_EQ(kept, sum.remeasured - sum.replaced);
  // Samples that settle (a device clock's: every sample exactly its tick) are measured once.
  req.backend = std::make_shared<RecordingBackend>(2.5e-4);
  req.harness = fast();
  req.ops = {"gemm"};
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  kernels::run_in_process(1, [&](kernels::Communicator& world) {
    req.sweep = tiny_sweep(1);
    auto s = run_profile(world, req, {}, {});
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_GT(s->measured, 0);
    EXPECT_EQ(s->remeasured, 0);
  });
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

// A profile that ended before its second look (interrupted, or quick) and is resumed as a full
// one: the earlier run's unsettled points are measured again too, once; settled ones are not.
TEST(Profile, AResumedProfileGivesEarlierUnsettledPointsTheirSecondLook) {
  const auto path = (std::filesystem::temp_directory_path() / "moeplan_profile_look.db").string();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  ProfileRequest req;
  req.sweep = tiny_sweep(2);
  req.ops = {"gemm", "all_reduce"};
  req.harness = fast();
  req.harness.target_spread = -1.0;  // no point settles
  req.out_path = path;
  const auto profile = [&] {
    ProfileSummary sum;
    kernels::run_in_process(2, [&](kernels::Communicator& world) {
      auto s = run_profile(world, req, {}, {});
      ASSERT_TRUE(s.ok()) << s.error().message;
      if (world.rank() == 0) sum = *s;
    });
    return sum;
  };
  const ProfileSummary first = profile();  // no second look asked for
  ASSERT_GT(first.measured, 0);
  EXPECT_EQ(first.remeasured, 0);
  auto db = planner::CostDb::open(path, false);
  ASSERT_TRUE(db.ok());
  const auto before = (*db)->points();
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(static_cast<int>(before->size()), first.total);

  req.resume = true;
  req.remeasure_unsettled = true;
  req.harness.target_spread = 1e9;  // every stored point settled: none measured again
  ProfileSummary settled = profile();
  EXPECT_EQ(settled.skipped, settled.total);
  EXPECT_EQ(settled.remeasured, 0);

  req.harness.target_spread = -1.0;
  const ProfileSummary resumed = profile();
  EXPECT_EQ(resumed.skipped, resumed.total);
  EXPECT_EQ(resumed.measured, 0);
  EXPECT_EQ(resumed.remeasured, resumed.total);
  auto runs = (*db)->runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 3U);
  const std::int64_t first_run = runs->front().id;
  const std::int64_t last_run = runs->back().id;
  const auto after = (*db)->points();
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), before->size());
  int replaced = 0;
  for (std::size_t i = 0; i < after->size(); ++i) {
    const auto& p = (*after)[i];
    const auto& old = (*before)[i];
    ASSERT_EQ(p.shape, old.shape);
    if (p.detail.find("; re-measured after the sweep (first: median ") != std::string::npos) {
      ++replaced;
      EXPECT_EQ(p.run_id, last_run) << p.detail;
    } else {
      // The first measurement kept: its run, time and figures, with the second look noted.
      EXPECT_NE(p.detail.find("; measured again after the sweep, first kept (again: median "),
                std::string::npos)
          << p.detail;
      EXPECT_EQ(p.run_id, first_run);
      EXPECT_EQ(p.measured_at, old.measured_at);
      EXPECT_EQ(p.median_s, old.median_s);
      EXPECT_EQ(p.detail.substr(0, old.detail.size()), old.detail);
    }
  }
  EXPECT_EQ(replaced, resumed.replaced);

  // Each point has had its second look: resuming again measures nothing.
  const ProfileSummary again = profile();
  EXPECT_EQ(again.skipped, again.total);
  EXPECT_EQ(again.remeasured, 0);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

}  // namespace
}  // namespace test_harness
}  // namespace moeplan::profiler
