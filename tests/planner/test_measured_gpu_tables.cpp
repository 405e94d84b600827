// MeasuredCosts on imported GPU tables: the committed fixture (real aiconfigurator-core 0.12.0
// h200_sxm rows, tests/data/aiconfigurator/, loaded from its SQL dump so no pyarrow is needed)
// answers fused MoE, GEMM and NCCL queries exactly on the grid, interpolated or extrapolated off
// it, and says when it falls back to the roofline; a database of another device is one error.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <filesystem>

#include "models/file_io.hpp"
#include "models/registry.hpp"
#include "planner/costs/cost_setup.hpp"
#include "planner/plan.hpp"

namespace moeplan::planner {
namespace test_measured_gpu_tables {
namespace {

namespace fs = std::filesystem;

/// A cost database built from the fixture's SQL dump, in a fresh temporary file.
std::string fixture_db() {
  const std::string name = std::string("moeplan_gpu_fixture_") +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db";
  const fs::path path = fs::temp_directory_path() / name;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path.string() + suffix);
  auto sql = read_text_file(fs::path(MOEPLAN_TEST_DATA_DIR) / "aiconfigurator" /
                            "h200_sxm_trtllm_fixture.sql");
  EXPECT_TRUE(sql.ok()) << sql.error().message;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql->c_str(), nullptr, nullptr, &err), SQLITE_OK)
      << (err != nullptr ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
  return path.string();
}

Cluster cluster(const std::string& name) {
  auto c = load_cluster(name);
  EXPECT_TRUE(c.ok()) << c.error().message;
  return *c;
}

std::shared_ptr<const Calibration> h200_calibration() {
  auto c = load_calibration("h200");
  EXPECT_TRUE(c.ok() && c->has_value());
  return std::make_shared<const Calibration>(**c);
}

MoeFusedQuery qwen3_30b(double tokens, int tp, int ep) {
  MoeFusedQuery q;
  q.tokens = tokens;
  q.hidden = 2048;
  q.inter = 768;
  q.top_k = 8;
  q.num_experts = 128;
  q.tp_size = tp;
  q.ep_size = ep;
  return q.balanced();
}

/// The fixture's balanced fused-MoE time of (tp, ep, tokens), read from the database itself.
double table_time(const CostDb& db, int tp, int ep, int tokens) {
  auto pts = db.points_of("h200", {"moe_fused"});
  EXPECT_TRUE(pts.ok());
  const std::string shape = "tokens=" + std::to_string(tokens) +
                            ",hidden=2048,inter=768,topk=8,experts=128,tp=" + std::to_string(tp) +
                            ",ep=" + std::to_string(ep) +
                            ",dist=balanced,kernel=moe_torch_flow_cutlass";
  for (const auto& p : *pts) {
    if (p.shape == shape) return p.median_s;
  }
  ADD_FAILURE() << "no fixture row " << shape;
  return 0.0;
}

TEST(GpuTables, FixtureAnswersFromTheTables) {
  const std::string path = fixture_db();
  auto db = CostDb::open(path, false);
  ASSERT_TRUE(db.ok()) << db.error().message;
  EXPECT_EQ((*db)->schema_version(), kCostDbSchemaVersion);
  auto all = (*db)->points();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 148U);
  for (const auto& p : *all) {
    EXPECT_TRUE(is_imported(p.provenance)) << p.provenance;
    EXPECT_NE(p.detail.find("source=aiconfigurator-core 0.12.0"), std::string::npos);
  }
  const Cluster c = cluster("1x-hgx-h200");
  const auto cal = h200_calibration();
  auto mc = MeasuredCosts::load(**db, c, "", CostStatistic::kMedian, cal);
  ASSERT_TRUE(mc.ok()) << mc.error().message;
  const MeasuredCosts& m = **mc;
  EXPECT_EQ(m.device(), "h200");
  EXPECT_TRUE(m.has_fused_moe("bf16"));

  // Fused MoE: exact on the grid (the balanced row, not the power-law one of the same key).
  auto r = m.moe_fused(qwen3_30b(512, 2, 4));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->source, kSourceExact);
  EXPECT_DOUBLE_EQ(r->seconds, 7.5349330902099611977e-05);
  EXPECT_DOUBLE_EQ(r->seconds, table_time(**db, 2, 4, 512));
  // Between grid points: log-log between 64 and 512 tokens.
  r = m.moe_fused(qwen3_30b(256, 2, 4));
  EXPECT_EQ(r->source, kSourceInterp);
  const double t64 = table_time(**db, 2, 4, 64), t512 = table_time(**db, 2, 4, 512);
  EXPECT_NEAR(r->seconds, t64 * std::pow(t512 / t64, std::log(4.0) / std::log(8.0)), 1e-15);
  // Past the grid: the last point's efficiency held against the calibrated fused form.
  r = m.moe_fused(qwen3_30b(16384, 2, 4));
  EXPECT_EQ(r->source, kSourceExtrap);
  const RooflineCosts roof(c, cal);
  const double t4096 = table_time(**db, 2, 4, 4096);
  EXPECT_NEAR(r->seconds,
              t4096 * roof.moe_fused(qwen3_30b(16384, 2, 4))->seconds /
                  roof.moe_fused(qwen3_30b(4096, 2, 4))->seconds,
              1e-12);
  // A skewed rank: the balanced time scaled by the roofline's ratio (measured efficiency held).
  MoeFusedQuery skewed = qwen3_30b(512, 2, 4);
  for (std::size_t i = 0; i < skewed.rows.size(); ++i) skewed.rows[i] *= i % 2 == 0 ? 1.5 : 0.5;
  r = m.moe_fused(skewed);
  EXPECT_EQ(r->source, kSourceExtrap);
  EXPECT_NEAR(
      r->seconds,
      t512 * roof.moe_fused(skewed)->seconds / roof.moe_fused(qwen3_30b(512, 2, 4))->seconds,
      1e-12);
  // Another number of rows through the kernel (an all-to-all dispatch's own rows): scaled too.
  MoeFusedQuery own = qwen3_30b(512, 2, 4);
  own.rows_in = 256;
  r = m.moe_fused(own);
  EXPECT_EQ(r->source, kSourceExtrap);
  EXPECT_NEAR(r->seconds,
              t512 * roof.moe_fused(own)->seconds / roof.moe_fused(qwen3_30b(512, 2, 4))->seconds,
              1e-12);
  own.rows_in = 512;  // the same rows as measured: exact
  EXPECT_EQ(m.moe_fused(own)->source, kSourceExact);
  // Expected counts (a plan's rows under independent routing) where slots may be empty: the
  // tables' even routing fills every slot, so the measured time is scaled by the roofline's
  // ratio of the expected occupancy to the even one; at 512 tokens (32 rows per slot) no slot
  // is empty and the answer is the table's.
  MoeFusedQuery few = qwen3_30b(64, 2, 4);  // 4 rows per slot
  few.expected = true;
  r = m.moe_fused(few);
  EXPECT_EQ(r->source, kSourceExtrap);
  MoeFusedQuery even = qwen3_30b(64, 2, 4);
  EXPECT_NEAR(
      r->seconds,
      table_time(**db, 2, 4, 64) * roof.moe_fused(few)->seconds / roof.moe_fused(even)->seconds,
      1e-12);
  EXPECT_LT(r->seconds, table_time(**db, 2, 4, 64));
  MoeFusedQuery full = qwen3_30b(512, 2, 4);
  full.expected = true;
  r = m.moe_fused(full);
  EXPECT_EQ(r->source, kSourceExact);
  EXPECT_DOUBLE_EQ(r->seconds, t512);
  // The attention core of Qwen3-30B-A3B on one GPU (32 heads over 4 K/V heads), from the
  // generation table: exact on its rows; 8 sequences of 4096 keys between its batches 1 and 64
  // at that context (log-log), not the pairs of another context.
  const auto attn_time = [&](const std::string& shape) {
    auto pts = (*db)->points_of("h200", {"attention"});
    EXPECT_TRUE(pts.ok());
    for (const auto& p : *pts) {
      if (p.shape == shape) return p.median_s;
    }
    ADD_FAILURE() << "no fixture row " << shape;
    return 0.0;
  };
  AttentionQuery aq;
  aq.decode = true;
  aq.heads = 32;
  aq.kv_heads = 4;
  aq.qk_dim = 128;
  aq.v_dim = 128;
  aq.kv_bytes_per_token = 2.0 * 4 * 128 * 2;
  aq.dtype = DType::kBf16;
  aq.tokens = 64;
  aq.context = 4096;
  auto a = m.attention(aq);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->source, kSourceExact);
  const double g64 = attn_time("decode=1,tokens=64,context=4096,heads=32,kv_heads=4,qk=128,v=128");
  const double g1 = attn_time("decode=1,tokens=1,context=4096,heads=32,kv_heads=4,qk=128,v=128");
  EXPECT_DOUBLE_EQ(a->seconds, g64);
  aq.tokens = 8;
  a = m.attention(aq);
  EXPECT_EQ(a->source, kSourceInterp);
  EXPECT_NEAR(a->seconds, g1 * std::pow(g64 / g1, 0.5), 1e-15);  // 8 = √64: halfway in log
  // Prefill of 8 prompts of 1024: the context table's row.
  aq.decode = false;
  aq.tokens = 8 * 1024;
  aq.context = 1024;
  a = m.attention(aq);
  EXPECT_EQ(a->source, kSourceExact);
  EXPECT_DOUBLE_EQ(a->seconds,
                   attn_time("decode=0,tokens=8192,context=1024,heads=32,kv_heads=4,qk=128,v=128"));
  // A shape the tables lack: the calibrated roofline, said so.
  EXPECT_TRUE(m.misses().empty());
  MoeFusedQuery other = qwen3_30b(512, 2, 4);
  other.hidden = 4096;
  r = m.moe_fused(other);
  EXPECT_EQ(r->source, kSourceMiss);
  EXPECT_DOUBLE_EQ(r->seconds, roof.moe_fused(other)->seconds);
  EXPECT_EQ(m.misses(), std::vector<std::string>{"moe_fused hidden=4096 inter=768 experts=128 "
                                                 "topk=8 tp=2 ep=4 dtype=bf16"});

  // Dense GEMM (n 1536, k 2048 measured at m 1 .. 4096).
  EXPECT_EQ(m.gemm({256, 1536, 2048, DType::kBf16})->source, kSourceExact);
  EXPECT_EQ(m.gemm({100, 1536, 2048, DType::kBf16})->source, kSourceInterp);

  // NCCL inside the node: fp16 curves, answered for bf16 from the same measurement.
  const CollectiveQuery ar8{
      CollectiveOp::kAllReduce, {{0, 1, 2, 3, 4, 5, 6, 7}}, 2.0 * 1048576, {}, DType::kBf16};
  r = m.collective(ar8);
  EXPECT_EQ(r->source, kSourceExact);
  // all_gather_v has no table: the even all_gather curve at the gathered size, shape-scaled.
  CollectiveQuery agv{CollectiveOp::kAllGatherV, {{0, 1}}, 65536, {}, DType::kBf16};
  agv.matrix = {{0, 65536}, {65536, 0}};
  r = m.collective(agv);
  EXPECT_EQ(r->source, kSourceExtrap);
  EXPECT_GT(r->seconds, 0.0);
  // all_to_all was imported in int8 only: a bf16 query misses.
  EXPECT_EQ(m.collective({CollectiveOp::kAllToAll, {{0, 1}}, 65536, {}, DType::kBf16})->source,
            kSourceMiss);
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
}

TEST(GpuTables, CollectivesAcrossNodesAreMisses) {
  const std::string path = fixture_db();
  auto db = CostDb::open(path, false);
  ASSERT_TRUE(db.ok());
  const Cluster c = cluster("2x-hgx-h200");
  auto mc = MeasuredCosts::load(**db, c, "", CostStatistic::kMedian, h200_calibration());
  ASSERT_TRUE(mc.ok()) << mc.error().message;
  const CollectiveQuery inside{CollectiveOp::kAllReduce, {{0, 1}, {8, 9}}, 8192, {}, DType::kBf16};
  const CollectiveQuery across{CollectiveOp::kAllReduce, {{0, 8}, {1, 9}}, 8192, {}, DType::kBf16};
  EXPECT_EQ((*mc)->collective(inside)->source, kSourceExact);
  const auto r = (*mc)->collective(across);
  EXPECT_EQ(r->source, kSourceMiss);
  const RooflineCosts roof(c, h200_calibration());
  EXPECT_DOUBLE_EQ(r->seconds, roof.collective(across)->seconds);
  ASSERT_EQ((*mc)->misses().size(), 1U);
  EXPECT_NE((*mc)->misses()[0].find("across NVLink domains"), std::string::npos);
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
}

TEST(GpuTables, DatabaseOfAnotherDeviceIsOneError) {
  const std::string path = fixture_db();
  auto db = CostDb::open(path, false);
  ASSERT_TRUE(db.ok());
  const Cluster h100 = cluster("4x-hgx-h100");
  auto mc = MeasuredCosts::load(**db, h100);
  ASSERT_FALSE(mc.ok());
  const std::string& msg = mc.error().message;
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("device 'h200'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'4x-hgx-h100' is of device 'h100'"), std::string::npos) << msg;
  db->reset();
  // Through the set-up every front end uses: an error about the costs input.
  auto s = make_cost_setup("4x-hgx-h100", path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().input, "costs");
  EXPECT_NE(s.error().message.find("expected a database of 'h100'"), std::string::npos);
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
}

// A CUDA profile (profile --backend cuda) is named after its GPU: it answers for clusters of
// that GPU, chosen among a database's devices, and is refused for another GPU.
TEST(GpuTables, CudaProfileAnswersForItsGpu) {
  const auto known = bundled_device_names();
  EXPECT_EQ(profiled_gpu_device("cuda:NVIDIA H200/ranks=1", known), "h200");
  EXPECT_EQ(profiled_gpu_device("cuda:NVIDIA H100 80GB HBM3/ranks=1", known), "h100");
  EXPECT_EQ(profiled_gpu_device("cuda:NVIDIA B200/ranks=1", known), "b200");
  EXPECT_EQ(profiled_gpu_device("cuda:NVIDIA A100-SXM4-80GB/ranks=1", known), "");
  EXPECT_EQ(profiled_gpu_device("cpu:AMD EPYC/ranks=2", known), "");
  EXPECT_EQ(profiled_gpu_device("h200", known), "");

  const fs::path path = fs::temp_directory_path() / "moeplan_cuda_profile_device.db";
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path.string() + suffix);
  {
    auto db = CostDb::open(path.string(), true);
    ASSERT_TRUE(db.ok()) << db.error().message;
    for (const std::string device :
         {"cpu:AMD EPYC/ranks=1", "cuda:NVIDIA H100 80GB HBM3/ranks=1"}) {
      RunInfo run;
      run.device = device;
      run.backend = device.substr(0, device.find(':'));
      run.world_size = 1;
      auto id = (*db)->add_run(run);
      ASSERT_TRUE(id.ok());
      CostPoint p;
      p.run_id = *id;
      p.device = device;
      p.backend = run.backend;
      p.op = "gemm";
      p.dtype = "bf16";
      p.shape = "m=64,n=512,k=256";
      p.m = 64;
      p.n = 512;
      p.k = 256;
      p.flops = 2.0 * 64 * 512 * 256;
      p.median_s = p.p10_s = p.p90_s = 1e-5;
      p.repetitions = 5;
      ASSERT_TRUE((*db)->add_point(p).ok());
    }
  }
  auto db = CostDb::open(path.string(), false);
  ASSERT_TRUE(db.ok());
  auto mc = MeasuredCosts::load(**db, cluster("4x-hgx-h100"));
  ASSERT_TRUE(mc.ok()) << mc.error().message;
  EXPECT_EQ((*mc)->device(), "cuda:NVIDIA H100 80GB HBM3/ranks=1");
  auto wrong =
      MeasuredCosts::load(**db, cluster("1x-hgx-h200"), "cuda:NVIDIA H100 80GB HBM3/ranks=1");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("a CUDA profile of device 'h100'"), std::string::npos)
      << wrong.error().message;
  EXPECT_NE(wrong.error().message.find("expected a database of 'h200'"), std::string::npos);
  db->reset();
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path.string() + suffix);
}

TEST(GpuTables, PlanBooksEachRanksFusedKernelFromTheTables) {
  const std::string path = fixture_db();
  auto s = make_cost_setup("1x-hgx-h200", path);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_NE(s->calibration, nullptr);
  auto model = models::load_model("qwen3-30b-a3b");
  ASSERT_TRUE(model.ok());
  PlanRequest req;
  req.workload = {Phase::kPrefill, 64};  // 8 GPUs × 64 tokens = 512 tokens entering each rank
  // All-gather dispatch: every token of the EP group passes each rank's kernel, as measured.
  req.dispatchers = {Dispatcher::kAllGather, Dispatcher::kA2av};
  auto plan = make_plan(*model, *s->cluster, s->costs(), req);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  int checked = 0;
  for (const auto& l : plan->layouts) {
    const int tp = l.layout.tp_size, ep = l.layout.ep_size;
    if (!((tp == 1 && ep == 8) || (tp == 2 && ep == 4) || (tp == 8 && ep == 1))) {
      EXPECT_EQ(l.per_layer.experts.source, kSourceMiss);  // not in the fixture
      continue;
    }
    if (l.layout.dispatcher == Dispatcher::kA2av) {
      // An all-to-all hands the kernel the rank's pairs (tokens · k / ep rows): as measured only
      // when ep = k (8 here); otherwise the measured time scaled by the roofline.
      EXPECT_EQ(l.per_layer.experts.source, ep == 8 ? kSourceExact : kSourceExtrap)
          << l.layout.shape_name();
      continue;
    }
    EXPECT_EQ(l.per_layer.experts.source, kSourceExact) << l.layout.shape_name();
    // per layer = the step's sum over 48 layers / 48: equal up to rounding
    EXPECT_NEAR(l.per_layer.experts.seconds / table_time(*s->db, tp, ep, 512), 1.0, 1e-12)
        << l.layout.shape_name();
    ++checked;
  }
  EXPECT_EQ(checked, 4);  // ep4×tp2 under both rank mappings
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
}

}  // namespace
}  // namespace test_measured_gpu_tables
}  // namespace moeplan::planner
