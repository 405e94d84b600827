// The cost database on SQLite.
#include "planner/costs/cost_db.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <map>
#include <set>

namespace moeplan::planner {

namespace {

// Version 1: runs and points. Version 2: each point's provenance (profiled here, or imported from
// a published table). Version 3: where the ranks of a run ran. Version 4: the machine's pace at
// the start and end of a run. Version 5: the rotation a run read its operands cold through.
// Later versions append a migration here; never edit one.
const char* const kMigrations[] = {
    R"sql(
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
)sql",
    R"sql(
ALTER TABLE points ADD COLUMN provenance TEXT NOT NULL DEFAULT '';
)sql",
    // Version 3: where the ranks of a run ran, so that a profile on several nodes (collectives
    // over the network) is told from one on a single node. Runs of versions 1 and 2 keep nodes NULL
    // and no run_ranks rows (not recorded).
    R"sql(
ALTER TABLE runs ADD COLUMN nodes INTEGER;
CREATE TABLE run_ranks(
  run_id INTEGER NOT NULL REFERENCES runs(id),
  rank INTEGER NOT NULL, host TEXT NOT NULL, node TEXT NOT NULL, shm_domain INTEGER NOT NULL,
  PRIMARY KEY(run_id, rank));
)sql",
    // Version 4: the machine's pace (a fixed GEMM's GFLOP/s) before the first point and after
    // the last, so that a later validate can tell whether this machine still runs at the pace
    // it was profiled at. NULL: not recorded.
    R"sql(
ALTER TABLE runs ADD COLUMN pace_start_gemm_gflops REAL;
ALTER TABLE runs ADD COLUMN pace_end_gemm_gflops REAL;
)sql",
    // Version 5: the rotation a run's points read their operands cold through (bytes), so that
    // validate reads its cases as cold as the profile's points were. NULL: not recorded.
    R"sql(
ALTER TABLE runs ADD COLUMN cold_bytes INTEGER;
)sql",
};
constexpr int kNumMigrations = static_cast<int>(sizeof(kMigrations) / sizeof(kMigrations[0]));
static_assert(kNumMigrations == kCostDbSchemaVersion);

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return s_; }
  void text(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.c_str(), -1, SQLITE_TRANSIENT);
  }
  void real(int i, double v) { sqlite3_bind_double(s_, i, v); }
  void integer(int i, std::int64_t v) { sqlite3_bind_int64(s_, i, v); }
  std::string col_text(int i) {
    const unsigned char* t = sqlite3_column_text(s_, i);
    return t == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(t));
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_OK;
};

/// Binds a pace's figure at `i` (NULL where not measured).
void bind_pace(Stmt& s, int i, const MachinePace& p) {
  if (p.recorded()) {
    s.real(i, p.gemm_gflops);
  } else {
    sqlite3_bind_null(s.get(), i);
  }
}

Disposition parse_disposition(const std::string& s) {
  if (s == "incorrect") return Disposition::kIncorrect;
  if (s == "not_supported") return Disposition::kNotSupported;
  return Disposition::kPassed;
}

/// The rows of `s` as points; its columns are run_id .. disposition, then detail (when
/// `with_detail`), measured_at and provenance.
Result<std::vector<CostPoint>> read_points(Stmt& s, bool with_detail, sqlite3* db,
                                           const std::string& path) {
  std::vector<CostPoint> out;
  int rc = 0;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
    CostPoint p;
    p.run_id = sqlite3_column_int64(s.get(), 0);
    p.device = s.col_text(1);
    p.backend = s.col_text(2);
    p.op = s.col_text(3);
    p.dtype = s.col_text(4);
    p.shape = s.col_text(5);
    p.m = sqlite3_column_double(s.get(), 6);
    p.n = sqlite3_column_double(s.get(), 7);
    p.k = sqlite3_column_double(s.get(), 8);
    p.group_size = sqlite3_column_int(s.get(), 9);
    p.bytes = sqlite3_column_double(s.get(), 10);
    p.flops = sqlite3_column_double(s.get(), 11);
    p.median_s = sqlite3_column_double(s.get(), 12);
    p.p10_s = sqlite3_column_double(s.get(), 13);
    p.p90_s = sqlite3_column_double(s.get(), 14);
    p.repetitions = sqlite3_column_int(s.get(), 15);
    p.bus_bandwidth = sqlite3_column_double(s.get(), 16);
    p.disposition = parse_disposition(s.col_text(17));
    const int next = with_detail ? 19 : 18;
    if (with_detail) p.detail = s.col_text(18);
    p.measured_at = s.col_text(next);
    p.provenance = s.col_text(next + 1);
    out.push_back(std::move(p));
  }
  if (rc != SQLITE_DONE) return Error{path + ": " + sqlite3_errmsg(db)};
  return out;
}

}  // namespace

int count_domains(const std::vector<RunRank>& ranks) {
  std::set<int> domains;
  for (const auto& r : ranks) domains.insert(r.shm_domain);
  return std::max(1, static_cast<int>(domains.size()));
}

std::string describe_ranks(const std::vector<RunRank>& ranks) {
  // Domains in order of their first rank; each a list of rank ranges.
  std::vector<std::pair<int, std::vector<int>>> domains;
  std::map<int, std::string> names;
  for (const auto& r : ranks) {
    auto it = std::find_if(domains.begin(), domains.end(),
                           [&](const auto& d) { return d.first == r.shm_domain; });
    if (it == domains.end()) {
      domains.push_back({r.shm_domain, {}});
      it = std::prev(domains.end());
      names[r.shm_domain] = r.node;
    }
    it->second.push_back(r.rank);
  }
  std::string out =
      std::to_string(ranks.size()) + (ranks.size() == 1 ? " rank on " : " ranks on ") +
      (domains.size() == 1 ? std::string("one node") : std::to_string(domains.size()) + " nodes") +
      " (";
  for (std::size_t d = 0; d < domains.size(); ++d) {
    auto list = domains[d].second;
    std::sort(list.begin(), list.end());
    out += (d > 0 ? "; " : "") + names[domains[d].first] + ": ";
    for (std::size_t i = 0; i < list.size();) {
      std::size_t j = i;
      while (j + 1 < list.size() && list[j + 1] == list[j] + 1) ++j;
      out += (i > 0 ? "," : "") + std::to_string(list[i]) +
             (j > i ? "-" + std::to_string(list[j]) : "");
      i = j + 1;
    }
  }
  return out + ")";
}

bool is_imported(const std::string& provenance) {
  return provenance.rfind(kProvenanceImported, 0) == 0;
}

std::string disposition_name(Disposition d) {
  switch (d) {
    case Disposition::kPassed: return "passed";
    case Disposition::kIncorrect: return "incorrect";
    case Disposition::kNotSupported: return "not_supported";
  }
  return "?";
}

Result<std::unique_ptr<CostDb>> CostDb::open(const std::string& path, bool create) {
  std::error_code ec;
  if (!create && !std::filesystem::exists(path, ec))
    return Error{path + ": cost database not found"};
  if (std::filesystem::is_directory(path, ec)) {
    return Error{path + ": expected a cost database file, got a directory"};
  }
  sqlite3* raw = nullptr;
  const int flags =
      SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_FULLMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  std::unique_ptr<CostDb> db(new CostDb(raw, path));
  if (rc != SQLITE_OK) {
    return Error{path + ": cannot open the cost database: " +
                 (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc))};
  }
  sqlite3_busy_timeout(raw, 15000);  // concurrent profiles wait for each other's commits
  // NOTE: imported GPU tables hold ~10^5 points (100+ MB); reading them through a memory map
  // rather than one pread per page keeps `plan --costs` well under a second.
  sqlite3_exec(raw, "PRAGMA mmap_size=1073741824", nullptr, nullptr, nullptr);
  MOEPLAN_TRY_STATUS(db->migrate(create));
  return db;
}

CostDb::~CostDb() { sqlite3_close_v2(db_); }

Status CostDb::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    return Error{path_ + ": " + msg};
  }
  return Status::Ok();
}

Status CostDb::migrate(bool create) {
  // Reading the schema also proves the file is a SQLite database.
  {
    Stmt probe(db_, "SELECT count(*) FROM sqlite_master");
    if (!probe.ok() || sqlite3_step(probe.get()) != SQLITE_ROW) {
      return Error{path_ + ": not a moeplan cost database (" + sqlite3_errmsg(db_) + ")"};
    }
  }
  // WAL: a process killed at any moment leaves every committed point readable.
  MOEPLAN_TRY_STATUS(exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"));
  MOEPLAN_TRY_STATUS(exec("BEGIN IMMEDIATE"));
  auto rollback = [this](Error e) {
    (void)exec("ROLLBACK");  // the original error is the one to report
    return Status(std::move(e));
  };
  bool has_meta = false;
  bool has_other_tables = false;
  {
    Stmt s(db_, "SELECT name FROM sqlite_master WHERE type='table'");
    while (sqlite3_step(s.get()) == SQLITE_ROW) {
      const std::string name = s.col_text(0);
      if (name == "moeplan_schema") {
        has_meta = true;
      } else if (name != "sqlite_sequence") {
        has_other_tables = true;
      }
    }
  }
  int version = 0;
  if (has_meta) {
    Stmt s(db_, "SELECT version FROM moeplan_schema");
    if (sqlite3_step(s.get()) == SQLITE_ROW) version = sqlite3_column_int(s.get(), 0);
  } else if (has_other_tables) {
    return rollback(Error{path_ + ": a SQLite database, but not a moeplan cost database"});
  } else if (!create) {
    return rollback(Error{path_ + ": empty database, expected a moeplan cost database"});
  }
  if (version > kCostDbSchemaVersion) {
    return rollback(Error{path_ + ": schema version " + std::to_string(version) +
                          " is newer than this moeplan's " + std::to_string(kCostDbSchemaVersion) +
                          "; upgrade moeplan"});
  }
  if (!has_meta) {
    if (auto s = exec("CREATE TABLE moeplan_schema(version INTEGER NOT NULL);"
                      "INSERT INTO moeplan_schema VALUES(0);");
        !s) {
      return rollback(s.error());
    }
  }
  for (int v = version; v < kCostDbSchemaVersion; ++v) {
    if (auto s = exec(kMigrations[v]); !s) return rollback(s.error());
    if (auto s = exec("UPDATE moeplan_schema SET version = " + std::to_string(v + 1)); !s) {
      return rollback(s.error());
    }
  }
  MOEPLAN_TRY_STATUS(exec("COMMIT"));
  version_ = kCostDbSchemaVersion;
  return Status::Ok();
}

Result<std::int64_t> CostDb::add_run(const RunInfo& r) {
  MOEPLAN_TRY_STATUS(exec("BEGIN IMMEDIATE"));
  auto fail = [this]() -> Result<std::int64_t> {
    Error e{path_ + ": " + sqlite3_errmsg(db_)};
    (void)exec("ROLLBACK");  // the original error is the one to report
    return e;
  };
  std::int64_t id = 0;
  {
    Stmt s(db_,
           "INSERT INTO runs(started_at, host, cpu_model, device, backend, communicator, "
           "compiler, cuda, nccl, mpi, moeplan_version, world_size, command, nodes, "
           "pace_start_gemm_gflops, pace_end_gemm_gflops, cold_bytes) "
           "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    if (!s.ok()) return fail();
    const std::string fields[] = {r.started_at, r.host,         r.cpu_model,      r.device,
                                  r.backend,    r.communicator, r.compiler,       r.cuda,
                                  r.nccl,       r.mpi,          r.moeplan_version};
    for (int i = 0; i < 11; ++i) s.text(i + 1, fields[i]);
    s.integer(12, r.world_size);
    s.text(13, r.command);
    if (r.nodes > 0) {
      s.integer(14, r.nodes);
    } else {
      sqlite3_bind_null(s.get(), 14);
    }
    bind_pace(s, 15, r.pace_start);
    bind_pace(s, 16, r.pace_end);
    if (r.cold_bytes > 0) {
      s.integer(17, r.cold_bytes);
    } else {
      sqlite3_bind_null(s.get(), 17);
    }
    if (sqlite3_step(s.get()) != SQLITE_DONE) return fail();
    id = static_cast<std::int64_t>(sqlite3_last_insert_rowid(db_));
  }
  for (const auto& k : r.ranks) {
    Stmt s(db_, "INSERT INTO run_ranks(run_id, rank, host, node, shm_domain) VALUES(?,?,?,?,?)");
    if (!s.ok()) return fail();
    s.integer(1, id);
    s.integer(2, k.rank);
    s.text(3, k.host);
    s.text(4, k.node);
    s.integer(5, k.shm_domain);
    if (sqlite3_step(s.get()) != SQLITE_DONE) return fail();
  }
  MOEPLAN_TRY_STATUS(exec("COMMIT"));
  return id;
}

Status CostDb::set_run_end_pace(std::int64_t id, const MachinePace& pace) {
  Stmt s(db_, "UPDATE runs SET pace_end_gemm_gflops = ? WHERE id = ?");
  if (!s.ok()) return Error{path_ + ": " + sqlite3_errmsg(db_)};
  bind_pace(s, 1, pace);
  s.integer(2, id);
  if (sqlite3_step(s.get()) != SQLITE_DONE) return Error{path_ + ": " + sqlite3_errmsg(db_)};
  if (sqlite3_changes(db_) != 1) {
    return Error{path_ + ": no run " + std::to_string(id) + " to record its end pace in"};
  }
  return Status::Ok();
}

Status CostDb::replace_measurement(const CostPoint& p) {
  Stmt s(db_,
         "UPDATE points SET run_id = ?, median_s = ?, p10_s = ?, p90_s = ?, repetitions = ?, "
         "bus_bandwidth = ?, detail = ?, measured_at = ? WHERE device = ? AND backend = ? AND "
         "op = ? AND dtype = ? AND shape = ? AND group_size = ?");
  if (!s.ok()) return Error{path_ + ": " + sqlite3_errmsg(db_)};
  s.integer(1, p.run_id);
  s.real(2, p.median_s);
  s.real(3, p.p10_s);
  s.real(4, p.p90_s);
  s.integer(5, p.repetitions);
  s.real(6, p.bus_bandwidth);
  s.text(7, p.detail);
  s.text(8, p.measured_at);
  s.text(9, p.device);
  s.text(10, p.backend);
  s.text(11, p.op);
  s.text(12, p.dtype);
  s.text(13, p.shape);
  s.integer(14, p.group_size);
  if (sqlite3_step(s.get()) != SQLITE_DONE) return Error{path_ + ": " + sqlite3_errmsg(db_)};
  if (sqlite3_changes(db_) != 1) {
    return Error{path_ + ": no point " + p.op + " " + p.shape + " of " + p.device +
                 " to replace the measurement of"};
  }
  return Status::Ok();
}

Result<bool> CostDb::add_point(const CostPoint& p) {
  Stmt s(db_,
         "INSERT OR IGNORE INTO points(run_id, device, backend, op, dtype, shape, m, n, k, "
         "group_size, bytes, flops, median_s, p10_s, p90_s, repetitions, bus_bandwidth, "
         "disposition, detail, measured_at, provenance) "
         "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  if (!s.ok()) return Error{path_ + ": " + sqlite3_errmsg(db_)};
  s.integer(1, p.run_id);
  s.text(2, p.device);
  s.text(3, p.backend);
  s.text(4, p.op);
  s.text(5, p.dtype);
  s.text(6, p.shape);
  s.real(7, p.m);
  s.real(8, p.n);
  s.real(9, p.k);
  s.integer(10, p.group_size);
  s.real(11, p.bytes);
  s.real(12, p.flops);
  s.real(13, p.median_s);
  s.real(14, p.p10_s);
  s.real(15, p.p90_s);
  s.integer(16, p.repetitions);
  s.real(17, p.bus_bandwidth);
  s.text(18, disposition_name(p.disposition));
  s.text(19, p.detail);
  s.text(20, p.measured_at);
  s.text(21, p.provenance);
  if (sqlite3_step(s.get()) != SQLITE_DONE) return Error{path_ + ": " + sqlite3_errmsg(db_)};
  return sqlite3_changes(db_) > 0;
}

Result<std::optional<CostPoint>> CostDb::find_point(const std::string& device,
                                                    const std::string& backend,
                                                    const std::string& op, const std::string& dtype,
                                                    const std::string& shape,
                                                    int group_size) const {
  Stmt s(db_,
         "SELECT run_id, device, backend, op, dtype, shape, m, n, k, group_size, bytes, flops, "
         "median_s, p10_s, p90_s, repetitions, bus_bandwidth, disposition, detail, measured_at, "
         "provenance FROM points WHERE device=? AND backend=? AND op=? AND dtype=? AND shape=? AND "
         "group_size=?");
  if (!s.ok()) return Error{path_ + ": " + sqlite3_errmsg(db_)};
  s.text(1, device);
  s.text(2, backend);
  s.text(3, op);
  s.text(4, dtype);
  s.text(5, shape);
  s.integer(6, group_size);
  auto found = read_points(s, true, db_, path_);
  if (!found) return found.error();
  if (found->empty()) return std::optional<CostPoint>{};
  return std::optional<CostPoint>{std::move(found->front())};
}

Result<std::vector<CostPoint>> CostDb::points(const std::string& op) const {
  const std::string sql =
      "SELECT run_id, device, backend, op, dtype, shape, m, n, k, group_size, bytes, flops, "
      "median_s, p10_s, p90_s, repetitions, bus_bandwidth, disposition, detail, measured_at, "
      "provenance FROM points" +
      std::string(op.empty() ? "" : " WHERE op = ?") + " ORDER BY op, dtype, group_size, n, k, m";
  Stmt s(db_, sql.c_str());
  if (!s.ok()) return Error{path_ + ": " + sqlite3_errmsg(db_)};
  if (!op.empty()) s.text(1, op);
  return read_points(s, true, db_, path_);
}

Result<std::vector<CostPoint>> CostDb::points_of(const std::string& device,
                                                 const std::vector<std::string>& ops) const {
  std::string sql =
      "SELECT run_id, device, backend, op, dtype, shape, m, n, k, group_size, bytes, flops, "
      "median_s, p10_s, p90_s, repetitions, bus_bandwidth, disposition, measured_at, provenance "
      "FROM points NOT INDEXED WHERE device = ? AND op IN (";
  for (std::size_t i = 0; i < ops.size(); ++i) sql += i == 0 ? "?" : ",?";
  sql += ")";
  Stmt s(db_, sql.c_str());
  if (!s.ok()) return Error{path_ + ": " + sqlite3_errmsg(db_)};
  s.text(1, device);
  for (std::size_t i = 0; i < ops.size(); ++i) s.text(static_cast<int>(i) + 2, ops[i]);
  return read_points(s, false, db_, path_);
}

Result<std::vector<std::string>> CostDb::devices() const {
  Stmt s(db_, "SELECT DISTINCT device FROM points ORDER BY device");
  if (!s.ok()) return Error{path_ + ": " + sqlite3_errmsg(db_)};
  std::vector<std::string> out;
  int rc = 0;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) out.push_back(s.col_text(0));
  if (rc != SQLITE_DONE) return Error{path_ + ": " + sqlite3_errmsg(db_)};
  return out;
}

Result<std::vector<RunInfo>> CostDb::runs() const {
  std::vector<RunInfo> out;
  {
    Stmt s(db_,
           "SELECT id, started_at, host, cpu_model, device, backend, communicator, compiler, "
           "cuda, nccl, mpi, moeplan_version, world_size, command, nodes, pace_start_gemm_gflops, "
           "pace_end_gemm_gflops, cold_bytes FROM runs ORDER BY id");
    if (!s.ok()) return Error{path_ + ": " + sqlite3_errmsg(db_)};
    int rc = 0;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
      RunInfo r;
      r.id = sqlite3_column_int64(s.get(), 0);
      r.started_at = s.col_text(1);
      r.host = s.col_text(2);
      r.cpu_model = s.col_text(3);
      r.device = s.col_text(4);
      r.backend = s.col_text(5);
      r.communicator = s.col_text(6);
      r.compiler = s.col_text(7);
      r.cuda = s.col_text(8);
      r.nccl = s.col_text(9);
      r.mpi = s.col_text(10);
      r.moeplan_version = s.col_text(11);
      r.world_size = sqlite3_column_int(s.get(), 12);
      r.command = s.col_text(13);
      r.nodes = sqlite3_column_int(s.get(), 14);  // NULL (not recorded) reads as 0
      r.pace_start.gemm_gflops = sqlite3_column_double(s.get(), 15);  // NULL reads as 0
      r.pace_end.gemm_gflops = sqlite3_column_double(s.get(), 16);
      r.cold_bytes = sqlite3_column_int64(s.get(), 17);  // NULL reads as 0
      out.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return Error{path_ + ": " + sqlite3_errmsg(db_)};
  }
  Stmt s(db_, "SELECT run_id, rank, host, node, shm_domain FROM run_ranks ORDER BY run_id, rank");
  if (!s.ok()) return Error{path_ + ": " + sqlite3_errmsg(db_)};
  int rc = 0;
  std::size_t i = 0;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
    const std::int64_t run_id = sqlite3_column_int64(s.get(), 0);
    while (i < out.size() && out[i].id < run_id) ++i;
    if (i == out.size() || out[i].id != run_id) continue;  // a rank of no run: ignored
    RunRank k;
    k.rank = sqlite3_column_int(s.get(), 1);
    k.host = s.col_text(2);
    k.node = s.col_text(3);
    k.shm_domain = sqlite3_column_int(s.get(), 4);
    out[i].ranks.push_back(std::move(k));
  }
  if (rc != SQLITE_DONE) return Error{path_ + ": " + sqlite3_errmsg(db_)};
  return out;
}

Result<bool> CostDb::integrity_ok() const {
  Stmt s(db_, "PRAGMA integrity_check");
  if (!s.ok() || sqlite3_step(s.get()) != SQLITE_ROW)
    return Error{path_ + ": " + sqlite3_errmsg(db_)};
  return s.col_text(0) == "ok";
}

std::string shape_field(const std::string& shape, const std::string& key) {
  std::size_t at = 0;
  while (at <= shape.size()) {
    std::size_t end = shape.find(',', at);
    if (end == std::string::npos) end = shape.size();
    const std::size_t eq = shape.find('=', at);
    if (eq != std::string::npos && eq < end && shape.compare(at, eq - at, key) == 0 &&
        eq - at == key.size()) {
      return shape.substr(eq + 1, end - eq - 1);
    }
    at = end + 1;
  }
  return "";
}

long shape_int(const std::string& shape, const std::string& key) {
  const std::string v = shape_field(shape, key);
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  return v.empty() || end == nullptr || *end != '\0' ? -1 : x;
}

}  // namespace moeplan::planner
