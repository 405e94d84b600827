// The cost database: SQLite, schema versioned with migrations, one row per measured point. The
// planner owns the schema and reads it (MeasuredCosts); the profiler writes it through
// CostDbWriter. A point's identity (device, backend, op, dtype, shape, group size) is unique, so
// `profile --resume` measures only what is missing and concurrent writers cannot duplicate rows.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/result.hpp"

struct sqlite3;

namespace moeplan::planner {

/// The schema version this build writes and reads. Version 2 added `points.provenance`, version
/// 3 where the ranks of a run ran (`runs.nodes`, `run_ranks`), version 4 the machine's pace at the
/// start and end of a run (`runs.pace_*`), version 5 the rotation a run read its operands cold
/// through (`runs.cold_bytes`); older databases are migrated when opened and stay
/// readable.
inline constexpr int kCostDbSchemaVersion = 5;

/// `CostPoint::provenance` of points measured by `moeplan profile` (the default; also every point
/// of a version-1 database).
inline constexpr const char* kProvenanceProfiled = "";
/// Prefix of the provenance of points imported from published tables ("imported:measured",
/// "imported:borrowed", "imported:measured-as=fp16"); `detail` says which table, framework,
/// version and kernel.
inline constexpr const char* kProvenanceImported = "imported:";

/// The value of `key` in a point's "key=value,key=value" shape text ("" when absent).
std::string shape_field(const std::string& shape, const std::string& key);
/// The integer value of `key` in a shape text; −1 when absent or not an integer.
long shape_int(const std::string& shape, const std::string& key);

/// True when a point's provenance says it was imported rather than profiled here.
bool is_imported(const std::string& provenance);

/// How a measured point ended (CUTLASS's dispositions).
enum class Disposition : std::uint8_t { kPassed, kIncorrect, kNotSupported };
std::string disposition_name(Disposition d);

/// Where one rank of a run ran.
struct RunRank {
  int rank = 0;
  std::string host;    ///< host name
  std::string node;    ///< Slurm's node name, else the host name
  int shm_domain = 0;  ///< world rank of the first rank sharing memory with it (MPI's locality)
};

/// Shared-memory domains (nodes) among `ranks`; 1 when empty.
int count_domains(const std::vector<RunRank>& ranks);

/// "2 ranks on 2 nodes (nodeA: 0; nodeB: 1)" or "8 ranks on one node (vm: 0-7)": the ranks
/// grouped by shared-memory domain, each named by its first rank's node.
std::string describe_ranks(const std::vector<RunRank>& ranks);

/// How fast the machine ran a fixed probe (profiler/pace.hpp: the profile's own GEMM op at one
/// shape) at one moment; 0 where not measured.
struct MachinePace {
  double gemm_gflops = 0.0;  ///< the probe GEMM's GFLOP/s
  bool recorded() const { return gemm_gflops > 0.0; }
};

/// Where and with what a profile ran; every point refers to one run.
struct RunInfo {
  std::int64_t id = 0;
  std::string started_at;  ///< ISO 8601 UTC
  std::string host;
  std::string cpu_model;
  std::string device;        ///< e.g. "cpu:AMD EPYC 9B45" or "h200"
  std::string backend;       ///< "cpu", "cuda"
  std::string communicator;  ///< "inproc", "mpi", "nccl"
  std::string compiler;
  std::string cuda;
  std::string nccl;
  std::string mpi;
  std::string moeplan_version;
  int world_size = 1;
  std::string command;
  /// Shared-memory domains (nodes) the ranks spanned; 0 when not recorded (schema 1 runs).
  int nodes = 0;
  /// Where each rank ran, by rank; empty when not recorded (schema 1 runs).
  std::vector<RunRank> ranks;
  /// The machine's pace before the first point and after the last (not recorded: runs before
  /// schema 4, imported tables, a profile stopped before its end).
  MachinePace pace_start;
  MachinePace pace_end;
  /// The rotation the run's points read their operands cold through (profile --cold-mib), in
  /// bytes; 0 when not recorded (runs before schema 5: 256 MiB, imported tables: none).
  std::int64_t cold_bytes = 0;
};

/// One measured point. `shape` is the canonical text of the op's shape ("m=64,n=2560,k=3584");
/// m, n, k repeat its numbers for interpolation (collectives: m = bytes).
struct CostPoint {
  std::int64_t run_id = 0;
  std::string device;
  std::string backend;
  std::string op;
  std::string dtype;
  std::string shape;
  double m = 0.0;
  double n = 0.0;
  double k = 0.0;
  int group_size = 1;
  double bytes = 0.0;
  double flops = 0.0;
  double median_s = 0.0;
  double p10_s = 0.0;
  double p90_s = 0.0;
  int repetitions = 0;
  double bus_bandwidth = 0.0;  ///< bytes/s, nccl-tests definition (collectives only)
  Disposition disposition = Disposition::kPassed;
  std::string detail;
  std::string measured_at;
  /// Where the point comes from: kProvenanceProfiled ("") or kProvenanceImported + what the
  /// source says of the value ("imported:measured", "imported:borrowed", ...).
  std::string provenance = kProvenanceProfiled;
};

/// An open cost database (read and write). Not thread-safe; one per thread or process.
class CostDb {
 public:
  /// Opens (creating when `create`) and migrates a database; errors name the path.
  static Result<std::unique_ptr<CostDb>> open(const std::string& path, bool create);
  ~CostDb();
  CostDb(const CostDb&) = delete;
  CostDb& operator=(const CostDb&) = delete;

  const std::string& path() const { return path_; }
  int schema_version() const { return version_; }

  /// Records a run and where its ranks ran (one transaction); returns its id.
  Result<std::int64_t> add_run(const RunInfo& run);
  /// Inserts one point in its own transaction; an existing identical key is kept (returns
  /// false then, true when inserted).
  Result<bool> add_point(const CostPoint& p);
  /// Replaces the measurement (run, median, p10, p90, repetitions, busBw, detail, time) of the
  /// point with `p`'s identity, in its own transaction; an error when there is no such point.
  Status replace_measurement(const CostPoint& p);
  /// The point with this identity (its detail included), or nothing when there is none.
  Result<std::optional<CostPoint>> find_point(const std::string& device, const std::string& backend,
                                              const std::string& op, const std::string& dtype,
                                              const std::string& shape, int group_size) const;
  /// Every point, optionally of one op ("" = all), ordered by op, dtype, group, m, n, k.
  Result<std::vector<CostPoint>> points(const std::string& op = "") const;
  /// The points of one device and these ops, unordered, without `detail` (what a planner reads:
  /// an imported GPU table holds ~10^5 points with long provenance text).
  Result<std::vector<CostPoint>> points_of(const std::string& device,
                                           const std::vector<std::string>& ops) const;
  /// The distinct devices of the points, sorted.
  Result<std::vector<std::string>> devices() const;
  Result<std::vector<RunInfo>> runs() const;
  /// Records the machine's pace at the end of run `id`.
  Status set_run_end_pace(std::int64_t id, const MachinePace& pace);
  /// `PRAGMA integrity_check` == "ok".
  Result<bool> integrity_ok() const;

 private:
  CostDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status migrate(bool create);
  Status exec(const std::string& sql);

  sqlite3* db_;
  std::string path_;
  int version_ = 0;
};

}  // namespace moeplan::planner
