// The cost database: schema creation and versioning, points round-trip, uniqueness (resume),
// and clear errors for files that are not cost databases.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <sqlite3.h>

#include <filesystem>
#include <fstream>

#include "planner/costs/cost_db.hpp"

namespace moeplan::planner {
namespace test_cost_db {
namespace {

namespace fs = std::filesystem;

class CostDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() /
             ("moeplan_costdb_" +
              std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".db"))
                .string();
    remove_all();
  }
  void TearDown() override { remove_all(); }
  void remove_all() {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path_ + suffix);
  }
  static CostPoint point(const std::string& op, double m) {
    CostPoint p;
    p.device = "cpu:test";
    p.backend = "cpu";
    p.op = op;
    p.dtype = "bf16";
    p.shape = "m=" + std::to_string(static_cast<int>(m)) + ",n=64,k=32";
    p.m = m;
    p.n = 64;
    p.k = 32;
    p.flops = 2 * m * 64 * 32;
    p.median_s = 1e-6 * m;
    p.p10_s = 0.9e-6 * m;
    p.p90_s = 1.1e-6 * m;
    p.repetitions = 9;
    p.measured_at = "2026-12-02T00:00:00Z";
    return p;
  }
  /// A run of `device` on one rank that started at `pace`, added to `db`; its id.
  static std::int64_t add_test_run(CostDb& db, const std::string& device, MachinePace pace = {}) {
    RunInfo run;
    run.started_at = "2026-12-06T00:00:00Z";
    run.device = device;
    run.backend = "cpu";
    run.pace_start = pace;
    auto id = db.add_run(run);
    EXPECT_TRUE(id.ok());
    return id.ok() ? *id : 0;
  }
  std::string path_;
};

TEST_F(CostDbTest, CreatesRoundTripsAndKeepsPointsUnique) {
  auto db = CostDb::open(path_, true);
  ASSERT_TRUE(db.ok()) << db.error().message;
  EXPECT_EQ((*db)->schema_version(), kCostDbSchemaVersion);
  RunInfo run;
  run.started_at = "2026-12-02T00:00:00Z";
  run.device = "cpu:test";
  run.backend = "cpu";
  run.world_size = 2;
  auto id = (*db)->add_run(run);
  ASSERT_TRUE(id.ok());
  CostPoint p = point("gemm", 16);
  p.run_id = *id;
  EXPECT_TRUE(*(*db)->add_point(p));
  EXPECT_FALSE(*(*db)->add_point(p));  // same identity: kept once
  p = point("gemm", 4);
  p.run_id = *id;
  EXPECT_TRUE(*(*db)->add_point(p));
  p.detail = "first: 4 rows";
  EXPECT_FALSE(*(*db)->add_point(p));  // an existing identity keeps its first measurement
  auto found = (*db)->find_point("cpu:test", "cpu", "gemm", "bf16", "m=4,n=64,k=32", 1);
  ASSERT_TRUE(found.ok()) << found.error().message;
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->run_id, *id);
  EXPECT_DOUBLE_EQ((*found)->median_s, 4e-6);
  EXPECT_DOUBLE_EQ((*found)->p10_s, 3.6e-6);
  EXPECT_DOUBLE_EQ((*found)->p90_s, 4.4e-6);
  EXPECT_EQ((*found)->detail, "");
  auto missing = (*db)->find_point("cpu:test", "cpu", "gemm", "fp16", "m=4,n=64,k=32", 1);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  missing = (*db)->find_point("cpu:test", "cpu", "gemm", "bf16", "m=4,n=64,k=32", 2);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  db->reset();
  auto again = CostDb::open(path_, false);
  ASSERT_TRUE(again.ok()) << again.error().message;
  auto pts = (*again)->points("gemm");
  ASSERT_TRUE(pts.ok());
  ASSERT_EQ(pts->size(), 2U);
  EXPECT_DOUBLE_EQ((*pts)[0].m, 4.0);  // ordered by m
  EXPECT_DOUBLE_EQ((*pts)[1].median_s, 16e-6);
  EXPECT_EQ((*pts)[1].repetitions, 9);
  EXPECT_EQ((*pts)[1].disposition, Disposition::kPassed);
  EXPECT_TRUE(*(*again)->integrity_ok());
  auto runs = (*again)->runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1U);
  EXPECT_EQ((*runs)[0].world_size, 2);
}

TEST_F(CostDbTest, MissingFileWithoutCreate) {
  auto db = CostDb::open(path_, false);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.error().message, path_ + ": cost database not found");
}

TEST_F(CostDbTest, ArbitraryFileIsRejected) {
  std::ofstream(path_) << "this is not a database, just text that is long enough to look like one";
  auto db = CostDb::open(path_, false);
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.error().message.find("not a moeplan cost database"), std::string::npos)
      << db.error().message;
}

TEST_F(CostDbTest, ForeignSqliteDatabaseIsRejected) {
  {
    auto db = CostDb::open(path_, true);
    ASSERT_TRUE(db.ok());
  }
  remove_all();
  // A SQLite file with someone else's tables.
  std::ofstream(path_).close();
  fs::remove(path_);
  {
    auto db = CostDb::open(path_, true);  // creates our schema
    ASSERT_TRUE(db.ok());
  }
  auto db = CostDb::open(path_, false);
  EXPECT_TRUE(db.ok());
}

TEST_F(CostDbTest, VersionOneDatabaseIsMigratedAndStaysReadable) {
  // A database as moeplan wrote it before schema 2 (migration 1 verbatim, one profiled point).
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &raw), SQLITE_OK);
    const char* v1 = R"sql(
CREATE TABLE moeplan_schema(version INTEGER NOT NULL);
INSERT INTO moeplan_schema VALUES(1);
CREATE TABLE runs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  started_at TEXT NOT NULL, host TEXT, cpu_model TEXT, device TEXT NOT NULL,
  backend TEXT NOT NULL, communicator TEXT, compiler TEXT, cuda TEXT, nccl TEXT, mpi TEXT,
  moeplan_version TEXT, world_size INTEGER NOT NULL, command TEXT);
CREATE TABLE points(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  device TEXT NOT NULL, backend TEXT NOT NULL, op TEXT NOT NULL, dtype TEXT NOT NULL,
  shape TEXT NOT NULL, m REAL NOT NULL, n REAL NOT NULL, k REAL NOT NULL,
  group_size INTEGER NOT NULL, bytes REAL NOT NULL, flops REAL NOT NULL,
  median_s REAL NOT NULL, p10_s REAL NOT NULL, p90_s REAL NOT NULL, repetitions INTEGER NOT NULL,
  bus_bandwidth REAL NOT NULL, disposition TEXT NOT NULL, detail TEXT, measured_at TEXT NOT NULL,
  UNIQUE(device, backend, op, dtype, shape, group_size));
CREATE INDEX points_by_op ON points(op, dtype, group_size, m);
INSERT INTO runs VALUES(1, '2026-12-01T00:00:00Z', 'h', 'c', 'cpu:test', 'cpu', 'mpi', '', '', '',
  '', '', 2, 'moeplan profile');
INSERT INTO points VALUES(1, 1, 'cpu:test', 'cpu', 'gemm', 'bf16', 'm=4,n=64,k=32', 4, 64, 32, 1,
  0, 16384, 4e-6, 3e-6, 5e-6, 9, 0, 'passed', '', '2026-12-01T00:00:00Z');
)sql";
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(raw, v1, nullptr, nullptr, &err), SQLITE_OK) << err;
    sqlite3_close(raw);
  }
  auto db = CostDb::open(path_, false);
  ASSERT_TRUE(db.ok()) << db.error().message;
  EXPECT_EQ((*db)->schema_version(), kCostDbSchemaVersion);
  auto pts = (*db)->points();
  ASSERT_TRUE(pts.ok()) << pts.error().message;
  ASSERT_EQ(pts->size(), 1U);
  EXPECT_DOUBLE_EQ((*pts)[0].median_s, 4e-6);
  EXPECT_EQ((*pts)[0].provenance, kProvenanceProfiled);  // every old point was profiled
  EXPECT_FALSE(is_imported((*pts)[0].provenance));
  // New points keep their provenance; the filtered read sees both.
  CostPoint p = point("gemm", 16);
  p.run_id = 1;
  p.provenance = std::string(kProvenanceImported) + "measured";
  EXPECT_TRUE(*(*db)->add_point(p));
  db->reset();
  auto again = CostDb::open(path_, false);
  ASSERT_TRUE(again.ok()) << again.error().message;
  auto mine = (*again)->points_of("cpu:test", {"gemm"});
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 2U);
  int imported = 0;
  for (const auto& q : *mine) imported += is_imported(q.provenance) ? 1 : 0;
  EXPECT_EQ(imported, 1);
  EXPECT_EQ(*(*again)->devices(), std::vector<std::string>{"cpu:test"});
  EXPECT_TRUE((*again)->points_of("other", {"gemm"})->empty());
}

TEST_F(CostDbTest, NewerSchemaIsRefused) {
  {
    auto db = CostDb::open(path_, true);
    ASSERT_TRUE(db.ok());
  }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "UPDATE moeplan_schema SET version = 99", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  auto db = CostDb::open(path_, false);
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.error().message.find("schema version 99 is newer"), std::string::npos);
}

TEST_F(CostDbTest, DirectoryIsRejected) {
  fs::create_directories(path_);
  auto db = CostDb::open(path_, true);
  fs::remove_all(path_);
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.error().message.find("got a directory"), std::string::npos);
}

TEST_F(CostDbTest, RecordsNodesAndWhereEveryRankRan) {
  auto db = CostDb::open(path_, true);
  ASSERT_TRUE(db.ok()) << db.error().message;
  RunInfo run;
  run.started_at = "2026-12-03T00:00:00Z";
  run.device = "cpu:test/ranks=4/nodes=2";
  run.backend = "cpu";
  run.world_size = 4;
  run.nodes = 2;
  run.ranks = {
      {0, "vm", "nodeA", 0}, {1, "vm", "nodeA", 0}, {2, "vm", "nodeB", 2}, {3, "vm", "nodeB", 2}};
  auto id = (*db)->add_run(run);
  ASSERT_TRUE(id.ok()) << id.error().message;
  RunInfo one;
  one.started_at = "2026-12-03T00:01:00Z";
  one.device = "cpu:test/ranks=1";
  one.backend = "cpu";
  auto id1 = (*db)->add_run(one);  // nothing recorded about its ranks: nodes NULL
  ASSERT_TRUE(id1.ok());
  db->reset();
  auto again = CostDb::open(path_, false);
  ASSERT_TRUE(again.ok());
  auto runs = (*again)->runs();
  ASSERT_TRUE(runs.ok()) << runs.error().message;
  ASSERT_EQ(runs->size(), 2U);
  const RunInfo& r = (*runs)[0];
  EXPECT_EQ(r.id, *id);
  EXPECT_EQ(r.nodes, 2);
  ASSERT_EQ(r.ranks.size(), 4U);
  EXPECT_EQ(r.ranks[2].rank, 2);
  EXPECT_EQ(r.ranks[2].host, "vm");
  EXPECT_EQ(r.ranks[2].node, "nodeB");
  EXPECT_EQ(r.ranks[2].shm_domain, 2);
  EXPECT_EQ(describe_ranks(r.ranks), "4 ranks on 2 nodes (nodeA: 0-1; nodeB: 2-3)");
  EXPECT_EQ(count_domains(r.ranks), 2);
  EXPECT_EQ((*runs)[1].nodes, 0);
  EXPECT_TRUE((*runs)[1].ranks.empty());
}

TEST_F(CostDbTest, DescribesRanksByNode) {
  EXPECT_EQ(describe_ranks({{0, "vm", "vm", 0}}), "1 rank on one node (vm: 0)");
  EXPECT_EQ(describe_ranks({{0, "a", "a", 0},
                            {1, "b", "b", 1},
                            {2, "a", "a", 0},
                            {3, "b", "b", 1},
                            {4, "a", "a", 0}}),
            "5 ranks on 2 nodes (a: 0,2,4; b: 1,3)");
  EXPECT_EQ(count_domains({}), 1);
}

TEST_F(CostDbTest, AVersionOneDatabaseIsMigratedAndKeepsItsPoints) {
  // A database as moeplan wrote it at schema 1 (the version 1 DDL, verbatim), migrated to the
  // current version: its run reads as "ranks not recorded", new runs record them.
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &raw), SQLITE_OK);
    const char* v1 = R"sql(
CREATE TABLE moeplan_schema(version INTEGER NOT NULL);
INSERT INTO moeplan_schema VALUES(1);
CREATE TABLE runs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  started_at TEXT NOT NULL, host TEXT, cpu_model TEXT, device TEXT NOT NULL,
  backend TEXT NOT NULL, communicator TEXT, compiler TEXT, cuda TEXT, nccl TEXT, mpi TEXT,
  moeplan_version TEXT, world_size INTEGER NOT NULL, command TEXT);
CREATE TABLE points(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  device TEXT NOT NULL, backend TEXT NOT NULL, op TEXT NOT NULL, dtype TEXT NOT NULL,
  shape TEXT NOT NULL, m REAL NOT NULL, n REAL NOT NULL, k REAL NOT NULL,
  group_size INTEGER NOT NULL, bytes REAL NOT NULL, flops REAL NOT NULL,
  median_s REAL NOT NULL, p10_s REAL NOT NULL, p90_s REAL NOT NULL, repetitions INTEGER NOT NULL,
  bus_bandwidth REAL NOT NULL, disposition TEXT NOT NULL, detail TEXT, measured_at TEXT NOT NULL,
  UNIQUE(device, backend, op, dtype, shape, group_size));
CREATE INDEX points_by_op ON points(op, dtype, group_size, m);
INSERT INTO runs(started_at, host, device, backend, world_size, command)
  VALUES('2026-12-01T00:00:00Z', 'vm', 'cpu:test/ranks=2', 'cpu', 2, 'moeplan profile');
INSERT INTO points(run_id, device, backend, op, dtype, shape, m, n, k, group_size, bytes, flops,
  median_s, p10_s, p90_s, repetitions, bus_bandwidth, disposition, detail, measured_at)
  VALUES(1, 'cpu:test/ranks=2', 'cpu', 'gemm', 'bf16', 'm=4,n=64,k=32', 4, 64, 32, 1, 0, 16384,
  4e-6, 3.6e-6, 4.4e-6, 9, 0, 'passed', '', '2026-12-01T00:00:01Z');
)sql";
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(raw, v1, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_close(raw);
  }
  // Opened read-only in intent (no create): migrated to the current version on open.
  auto db = CostDb::open(path_, false);
  ASSERT_TRUE(db.ok()) << db.error().message;
  EXPECT_EQ((*db)->schema_version(), kCostDbSchemaVersion);
  auto runs = (*db)->runs();
  ASSERT_TRUE(runs.ok()) << runs.error().message;
  ASSERT_EQ(runs->size(), 1U);
  EXPECT_EQ((*runs)[0].host, "vm");
  EXPECT_EQ((*runs)[0].world_size, 2);
  EXPECT_EQ((*runs)[0].nodes, 0);  // not recorded
  EXPECT_TRUE((*runs)[0].ranks.empty());
  EXPECT_FALSE((*runs)[0].pace_start.recorded());  // schema 4's pace: not recorded either
  EXPECT_FALSE((*runs)[0].pace_end.recorded());
  EXPECT_EQ((*runs)[0].cold_bytes, 0);  // schema 5's rotation: not recorded
  auto pts = (*db)->points();
  ASSERT_TRUE(pts.ok());
  ASSERT_EQ(pts->size(), 1U);
  EXPECT_DOUBLE_EQ((*pts)[0].median_s, 4e-6);
  // New runs of the migrated database record their ranks.
  RunInfo run;
  run.started_at = "2026-12-03T00:00:00Z";
  run.device = "cpu:test/ranks=2/nodes=2";
  run.backend = "cpu";
  run.world_size = 2;
  run.nodes = 2;
  run.ranks = {{0, "vm", "nodeA", 0}, {1, "vm", "nodeB", 1}};
  run.cold_bytes = std::int64_t{3} << 30;  // past 32 bits: stored whole
  ASSERT_TRUE((*db)->add_run(run).ok());
  EXPECT_TRUE(*(*db)->integrity_ok());
  db->reset();
  auto again = CostDb::open(path_, false);
  ASSERT_TRUE(again.ok());
  auto runs2 = (*again)->runs();
  ASSERT_TRUE(runs2.ok());
  ASSERT_EQ(runs2->size(), 2U);
  EXPECT_EQ((*runs2)[1].nodes, 2);
  EXPECT_EQ((*runs2)[1].ranks.size(), 2U);
  EXPECT_EQ((*runs2)[1].cold_bytes, std::int64_t{3} << 30);
  EXPECT_EQ((*runs2)[0].cold_bytes, 0);
}

TEST_F(CostDbTest, RecordsTheMachinesPaceAtTheStartAndEndOfARun) {
  auto db = CostDb::open(path_, true);
  ASSERT_TRUE(db.ok());
  const std::int64_t id = add_test_run(**db, "cpu:test/ranks=1", {81.25});
  // A second run, left without an end.
  const std::int64_t other = add_test_run(**db, "cpu:test/ranks=1", {81.25});
  ASSERT_TRUE((*db)->set_run_end_pace(id, {79.5}).ok());
  // A run that does not exist: an error naming the database, nothing written.
  const Status missing = (*db)->set_run_end_pace(other + 7, {1.0});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find(path_ + ": no run "), std::string::npos)
      << missing.error().message;
  db->reset();
  auto again = CostDb::open(path_, false);
  ASSERT_TRUE(again.ok());
  auto runs = (*again)->runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2U);
  EXPECT_EQ((*runs)[0].pace_start.gemm_gflops, 81.25);
  EXPECT_EQ((*runs)[0].pace_end.gemm_gflops, 79.5);
  EXPECT_EQ((*runs)[1].pace_start.gemm_gflops, 81.25);
  EXPECT_FALSE((*runs)[1].pace_end.recorded());
}

TEST_F(CostDbTest, ReplacesAPointsMeasurementKeepingItsIdentity) {
  auto db = CostDb::open(path_, true);
  ASSERT_TRUE(db.ok());
  CostPoint p = point("gemm", 16);
  p.run_id = add_test_run(**db, "cpu:test");
  ASSERT_TRUE(*(*db)->add_point(p));
  CostPoint again = p;
  again.median_s = 12e-6;
  again.p10_s = 11.9e-6;
  again.p90_s = 12.1e-6;
  again.repetitions = 5;
  again.detail = "measured again";
  ASSERT_TRUE((*db)->replace_measurement(again).ok());
  auto pts = (*db)->points("gemm");
  ASSERT_TRUE(pts.ok());
  ASSERT_EQ(pts->size(), 1U);
  EXPECT_DOUBLE_EQ((*pts)[0].median_s, 12e-6);
  EXPECT_DOUBLE_EQ((*pts)[0].p90_s, 12.1e-6);
  EXPECT_EQ((*pts)[0].repetitions, 5);
  EXPECT_EQ((*pts)[0].detail, "measured again");
  EXPECT_EQ((*pts)[0].shape, p.shape);
  // No point of that identity: an error naming the database; nothing added.
  CostPoint other = point("gemm", 4);
  const Status missing = (*db)->replace_measurement(other);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find(path_ + ": no point gemm "), std::string::npos)
      << missing.error().message;
  EXPECT_EQ((*db)->points("gemm")->size(), 1U);
}

TEST_F(CostDbTest, ANewerSchemaIsRefused) {
  {
    auto db = CostDb::open(path_, true);
    ASSERT_TRUE(db.ok());
  }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &raw), SQLITE_OK);
  const std::string bump =
      "UPDATE moeplan_schema SET version = " + std::to_string(kCostDbSchemaVersion + 1);
  ASSERT_EQ(sqlite3_exec(raw, bump.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  auto db = CostDb::open(path_, false);
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.error().message.find("upgrade moeplan"), std::string::npos);
}

}  // namespace
}  // namespace test_cost_db
}  // namespace moeplan::planner
