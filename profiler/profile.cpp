// The profile loop.
#include "profiler/profile.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <new>
#include <optional>
#include <set>

#include "kernels/fault_inject.hpp"
#include "kernels/rank_watchdog.hpp"
#include "models/registry.hpp"
#include "models/units.hpp"
#include "planner/costs/cost_db.hpp"
#include "planner/topology/local_cluster.hpp"
#include "profiler/pace.hpp"
#include "profiler/sweep.hpp"

namespace moeplan::profiler {

namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// What a point's detail says once it has had its second look, either way.
constexpr const char* kAfterTheSweep = " after the sweep";

// The note a second look adds to the kept measurement's detail, naming the other one.
std::string second_look_note(bool replaced, const std::string& other) {
  return std::string(replaced ? "; re-measured" : "; measured again") + kAfterTheSweep +
         (replaced ? " (first: " : ", first kept (again: ") + other + ")";
}

std::string describe(const Stats& s) {
  char text[96];
  std::snprintf(text, sizeof text, "median %.4g ms, spread %.0f%%", s.median_s * 1e3,
                100.0 * spread(s));
  return text;
}

bool had_second_look(const std::string& detail) {
  return detail.find(kAfterTheSweep) != std::string::npos;
}

// A stored point's statistics.
Stats stored_stats(const planner::CostPoint& p) {
  return Stats{p.median_s, p.p10_s, p.p90_s, p.repetitions};
}

}  // namespace

Result<ProfileRequest> make_profile_request(const ProfileOptions& o, int world_size) {
  if (o.backend != "cpu" && o.backend != "cuda") {
    return input_error("backend", " " + o.backend + ": expected {backend} cpu or cuda");
  }
  if (o.backend == "cuda" && world_size > 1) {
    // NOTE: the collectives of a GPU profile run through NCCL on device buffers, one process per
    // GPU (NCCL refuses two ranks on one GPU, and in-process ranks would share one).
    if (!o.launched) {
      return input_error("backend", " cuda on " + std::to_string(world_size) +
                                        " in-process ranks: a CUDA profile of collectives runs "
                                        "one process per GPU; expected mpirun/srun -np " +
                                        std::to_string(world_size) + " (or one rank)");
    }
    if (MOEPLAN_HAVE_NCCL == 0) {
      return input_error("backend", " cuda on " + std::to_string(world_size) +
                                        " ranks: NCCL is not compiled in (it was not found at "
                                        "build time); expected one rank or {backend} cpu");
    }
  }
  if (o.out.empty()) return input_error("out", ": expected the path of the cost database to write");
  const auto local = planner::parse_local_cluster(o.cluster);
  if (!o.cluster.empty() && !(local && *local && (*local)->num_ranks() == world_size)) {
    return input_error("cluster", " " + o.cluster + ": a profile measures this machine with its " +
                                      std::to_string(world_size) +
                                      " ranks; expected local:" + std::to_string(world_size) +
                                      " (or local:KxM of as many) or no {cluster}");
  }
  if (!(o.max_seconds > 0.0) || o.max_seconds > 600.0) {
    return input_error("max_seconds", ": expected a time per point in (0, 600] s");
  }
  if (o.max_tokens < 0) return input_error("max_tokens", ": expected a positive row count");
  if (o.max_bytes < 0.0) return input_error("max_bytes", ": expected a positive byte count");
  if (o.cold_mib < 1 || static_cast<std::size_t>(o.cold_mib) > (kMaxColdBytes >> 20)) {
    return input_error("cold_mib", " " + std::to_string(o.cold_mib) + ": expected 1 to " +
                                       std::to_string(kMaxColdBytes >> 20) + " MiB");
  }
  auto model = models::load_model(o.model);
  if (!model) return model.error();
  MOEPLAN_TRY_STATUS(models::apply_weights_choice(*model, o.weights));
  model->weights = kernels::kernel_run_format(model->weights);
  SweepRequest sr;
  sr.scale = o.scale;
  sr.world_size = world_size;
  sr.quick = o.quick;
  sr.max_tokens = o.max_tokens;
  sr.max_bytes = o.max_bytes;
  for (const auto& d : split_list(o.dtypes)) {
    const auto dt = parse_dtype(d);
    if (!dt || *dt == DType::kFp8) {
      return input_error("dtype", ": expected fp32, fp16 or bf16, got '" + d + "'");
    }
    sr.dtypes.push_back(*dt);
  }
  auto sweep = make_sweep(*model, sr);
  if (!sweep) return sweep.error();
  ProfileRequest req;
  req.sweep = *sweep;
  req.sweep.backend = o.backend;
  req.sweep.cold_bytes = static_cast<std::size_t>(o.cold_mib) << 20;
  req.ops = split_list(o.ops);
  auto points = sweep_points(req.sweep, req.ops);
  if (!points) return points.error();
  if (points->empty()) {
    return input_error("ops", " " + o.ops + ": nothing to measure on " +
                                  std::to_string(world_size) +
                                  " rank(s) (collectives need at least 2)");
  }
  if (o.backend != "cpu") {
    // A device backend (one rank): made here so that an unusable one is an input error. CPU
    // ranks, threads of one process too, make their own in run_profile.
    auto backend = kernels::make_backend(o.backend, o.device);
    if (!backend) return backend.error();
    req.backend = std::move(*backend);
  }
  req.out_path = o.out;
  req.resume = o.resume;
  req.command = o.command;
  req.harness.max_seconds = o.max_seconds;
  // NOTE: a sample of at least 5 ms (back-to-back runs) is scheduled like a layer phase is: on a
  // machine shared with other work, sub-millisecond samples dodge preemption that a phase of
  // tens of milliseconds cannot.
  req.harness.min_sample_s = 5e-3;
  // A full profile measures its unsettled points again after the sweep; a quick one does not.
  req.remeasure_unsettled = !o.quick;
  if (o.quick) {
    req.harness.min_sample_s = 2e-4;
    req.harness.min_reps = 3;
    req.harness.max_seconds = std::min(o.max_seconds, 0.2);
  }
  return req;
}

Status check_profile_output(const ProfileRequest& req) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(req.out_path);
  if (fs::exists(p, ec)) {
    if (!fs::is_regular_file(p, ec)) {
      return input_error("out", " " + req.out_path + ": expected a file path, got a directory");
    }
    if (!req.resume) {
      return input_error("out",
                         " " + req.out_path +
                             " exists; expected {resume} to measure what it lacks, or a new path");
    }
  } else {
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    if (!fs::is_directory(dir, ec)) {
      return input_error("out",
                         " " + req.out_path + ": directory " + dir.string() + " does not exist");
    }
  }
  return Status::Ok();
}

namespace {

/// A resumed profile reads its operands through the rotation its earlier runs of the device
/// recorded (one rotation per profile: validate reads it back).
Status check_resumed_rotation(const planner::CostDb& db, const planner::RunInfo& run) {
  auto runs = db.runs();
  if (!runs) return runs.error();
  for (const auto& r : *runs) {
    if (r.device != run.device ||
        recorded_cold_bytes(r) == static_cast<std::size_t>(run.cold_bytes)) {
      continue;
    }
    return input_error("cold_mib", " " + std::to_string(run.cold_bytes >> 20) + ": " + db.path() +
                                       " was profiled with a rotation of " +
                                       std::to_string(recorded_cold_bytes(r) >> 20) + " MiB (run " +
                                       std::to_string(r.id) +
                                       "); expected the same to resume it, or a new path");
  }
  return Status::Ok();
}

}  // namespace

std::string cpu_device_name(const Environment& env, int world_size, int num_nodes) {
  return "cpu:" + env.cpu_model + "/ranks=" + std::to_string(world_size) +
         (num_nodes > 1 ? "/nodes=" + std::to_string(num_nodes) : "");
}

std::string device_profile_name(const kernels::Backend& backend, int world_size) {
  return backend.name() + ":" + backend.device_name() + "/ranks=" + std::to_string(world_size);
}

std::string cold_rotation_note(std::size_t llc, std::size_t cold_bytes) {
  if (llc == 0 || cold_bytes / kColdCacheRatio >= llc) return "";
  const auto mib = [](std::size_t b) { return std::to_string((b + (1U << 20) - 1) >> 20); };
  return "this CPU's last-level cache is " + mib(llc) + " MiB and the operand rotation " +
         mib(cold_bytes) + " MiB, under " + std::to_string(kColdCacheRatio) +
         " times it: weights may be measured warmer than a many-layer model reads them "
         "(--cold-mib " +
         mib(llc * kColdCacheRatio) +
         " measures them cold; validate reads the profile's rotation, so its cases are as warm)";
}

std::string cold_rotation_note(const ProfileRequest& req) {
  return req.backend ? std::string()
                     : cold_rotation_note(current_environment().last_level_cache_bytes,
                                          req.sweep.cold_bytes);
}

int count_nodes(const std::vector<planner::RunRank>& places) {
  std::set<int> domains;
  for (const auto& p : places) domains.insert(p.shm_domain);
  return std::max(1, static_cast<int>(domains.size()));
}

Result<ProfileSummary> run_profile(
    kernels::Communicator& world, const ProfileRequest& req,
    const std::function<void(int, int, const std::string&)>& progress,
    const std::function<bool()>& stop,
    const std::function<void(const planner::CostPoint&)>& written,
    kernels::Communicator* collectives) {
  const bool root = world.rank() == 0;
  // (Every rank agrees, so that none goes on to wait for the others in a collective.)
  const bool differs = collectives != nullptr &&
                       (collectives->size() != world.size() || collectives->rank() != world.rank());
  if (any_rank(world, differs)) {
    if (!differs) return Error{"profile: another rank's collectives' communicator is not its rank"};
    return Error{"profile: the collectives' communicator (" + collectives->kind() + ", rank " +
                 std::to_string(collectives->rank()) + " of " +
                 std::to_string(collectives->size()) + ") is not the world's rank " +
                 std::to_string(world.rank()) + " of " + std::to_string(world.size())};
  }
  auto points = sweep_points(req.sweep, req.ops);
  if (!points) return points.error();
  // The backend whose calls every compute op times (its can_implement decides what is
  // not_supported).
  std::shared_ptr<kernels::Backend> backend = req.backend;
  if (!backend) {
    auto made = kernels::make_backend(req.sweep.backend);
    if (!made) return made.error();
    backend = std::move(*made);
  }
  const Environment env = current_environment();
  std::vector<planner::RunRank> places = req.places;
  if (places.empty()) {
    for (int r = 0; r < world.size(); ++r) places.push_back({r, env.host, env.node, 0});
  }
  const int num_nodes = count_nodes(places);
  ProfileSummary sum;
  // A device profile (the backend has a device clock) is named after its device.
  const bool device_profile = backend->device_seconds().has_value();
  sum.device = device_profile ? device_profile_name(*backend, world.size())
                              : cpu_device_name(env, world.size(), num_nodes);
  // A device backend's events time the kernels alone, with no timer or barrier overhead to
  // amortize: one run per sample. Collectives on device memory keep req.harness: wall time around
  // back-to-back runs and one synchronize.
  HarnessOptions harness = req.harness;
  if (device_profile) {
    harness.device_clock = backend.get();
    harness.min_sample_s = 0.0;
  }
  const HarnessOptions& device_collective_harness = req.harness;
  sum.total = static_cast<int>(points->size());
  // The machine's pace before the first point (and after the last, below): what a later validate
  // compares its own with, to tell a stale profile from the planner's error.
  sum.pace_start = measure_pace(world, *backend, req.sweep.cold_bytes);

  std::unique_ptr<planner::CostDb> db;
  std::int64_t run_id = 0;
  Error open_error{""};
  if (root) {
    auto opened = planner::CostDb::open(req.out_path, true);
    if (opened) {
      db = std::move(*opened);
      planner::RunInfo run;
      run.started_at = utc_now();
      run.host = env.host;
      run.cpu_model = env.cpu_model;
      run.device = sum.device;
      run.backend = backend->name();
      run.communicator =
          collectives != nullptr ? world.kind() + "+" + collectives->kind() : world.kind();
      run.compiler = env.compiler;
      run.mpi = env.mpi;
      run.moeplan_version = env.moeplan_version;
      run.world_size = world.size();
      run.command = req.command;
      run.nodes = num_nodes;
      run.ranks = places;
      run.pace_start = sum.pace_start;
      run.cold_bytes = static_cast<std::int64_t>(req.sweep.cold_bytes);
      const Status same_rotation = req.resume ? check_resumed_rotation(*db, run) : Status::Ok();
      // The watchdog ends a lost job only between commits (kernels/rank_watchdog.hpp).
      auto id = same_rotation ? [&] {
        kernels::CommitLock lock;
        return db->add_run(run);
      }()
                              : Result<std::int64_t>(same_rotation.error());
      if (id) {
        run_id = *id;
      } else {
        open_error = id.error();
        db.reset();
      }
    } else {
      open_error = opened.error();
    }
  }
  if (any_rank(world, root && !db)) {
    return root ? open_error : Error{"rank 0 could not open " + req.out_path};
  }

  // One communicator per collective group size: world/g groups of g consecutive ranks.
  kernels::Communicator& group_parent = collectives != nullptr ? *collectives : world;
  std::map<int, std::unique_ptr<kernels::Communicator>> groups;
  for (const int g : req.sweep.group_sizes) {
    groups[g] = group_parent.split(world.rank() / g, world.rank() % g);
  }
  kernels::Communicator* sync = world.size() > 1 ? &world : nullptr;
  // NOTE: collective buffers are a few times S per rank; keep them within half of the host's
  // memory shared by every rank.
  const double memory = planner::host_memory_bytes();
  const double byte_cap = memory > 0.0 ? memory / (8.0 * world.size()) : 1e300;

  // One point measured on every rank (the same verdict on all of them).
  const auto measure_point = [&](const OpTable* table, const OpPoint& point) {
    Measurement m;
    if (point.bytes * 4.0 > byte_cap && table->collective) {
      m.disposition = planner::Disposition::kNotSupported;
      m.detail = "exceeds the memory cap of this host";
    } else if (device_profile && table->host_op) {
      m.disposition = planner::Disposition::kNotSupported;
      m.detail = "host code in moeplan's layer, not a " + backend->name() +
                 " kernel: not timed on the device (plans take it from the roofline)";
    } else if (device_profile && table->collective &&
               groups.at(point.group_size)->device_collectives() == nullptr) {
      m.disposition = planner::Disposition::kNotSupported;
      m.detail = "a collective over host memory (" + group_parent.kind() + "), not the " +
                 backend->name() + " device's: not timed (plans take it from the roofline)";
    } else {
      kernels::Communicator* group =
          table->collective ? groups.at(point.group_size).get() : nullptr;
      Result<std::unique_ptr<OpCase>> c = Error{""};
      try {
        kernels::fault_point(world.rank());
        c = table->init(point, req.sweep, group, *backend);
      } catch (const std::bad_alloc&) {
        // The shape's buffers do not fit (host memory here; device memory on a GPU backend,
        // whose allocation failures derive from std::bad_alloc): not supported, and go on.
        c = Error{"out of memory allocating this shape's buffers"};
      }
      // Every rank must agree: one rank that cannot set the point up would leave the others
      // waiting in its collectives.
      if (any_rank(world, !c)) {
        m.disposition = planner::Disposition::kNotSupported;
        m.detail = c ? std::string("another rank could not set this shape up") : c.error().message;
      } else {
        const StandInWatch watch(*backend);
        const bool on_device = group != nullptr && group->device_collectives() != nullptr;
        m = measure(**c, sync, on_device ? device_collective_harness : harness);
        // A stand-in ran instead of the backend's kernel (the CUDA fp8 GEMM emulated in fp32):
        // right, so verified, but not the kernel's time — no time recorded.
        const std::string stand_in = watch.reason();
        if (any_rank(world, !stand_in.empty())) {
          m.disposition = planner::Disposition::kNotSupported;
          m.detail = !stand_in.empty() ? stand_in : "another rank ran a stand-in for this kernel";
        }
      }
    }
    return m;
  };
  // The CostPoint of a measured point as the database stores it.
  const auto cost_point = [&](const OpTable* table, const OpPoint& point, const Measurement& m) {
    planner::CostPoint p;
    p.run_id = run_id;
    p.device = sum.device;
    p.backend = backend->name();
    p.op = point.op;
    p.dtype = std::string(dtype_name(point.dtype));
    p.shape = point.shape;
    p.m = point.m;
    p.n = point.n;
    p.k = point.k;
    p.group_size = point.group_size;
    p.bytes = point.bytes;
    p.flops = point.flops;
    p.median_s = m.stats.median_s;
    p.p10_s = m.stats.p10_s;
    p.p90_s = m.stats.p90_s;
    p.repetitions = m.stats.repetitions;
    if (table->bus_factor && m.stats.median_s > 0.0) {
      p.bus_bandwidth = point.bytes / m.stats.median_s * table->bus_factor(point.group_size);
    }
    p.disposition = m.disposition;
    p.detail = point.kernel.empty() ? m.detail : point.kernel + "; " + m.detail;
    p.measured_at = utc_now();
    return p;
  };
  // Points whose samples did not settle within the harness's spread in their time budget (the
  // machine was interfered with while they ran): measured again after the sweep — this run's,
  // and, when resuming, an earlier run's that had no second look (it was interrupted before, or
  // was a quick profile).
  struct Unsettled {
    std::size_t index;          ///< in *points
    Stats first;                ///< (rank 0's: the stored one of an earlier run's point)
    planner::CostPoint stored;  ///< as the database holds it (rank 0)
  };
  std::vector<Unsettled> unsettled;
  const auto unsettled_stats = [&](const Stats& s) {
    return req.remeasure_unsettled && spread(s) > harness.target_spread;
  };

  int done = 0;
  for (std::size_t index = 0; index < points->size(); ++index) {
    const auto& [table, point] = (*points)[index];
    if (any_rank(world, stop && stop())) {
      sum.interrupted = true;
      break;
    }
    bool skip = false;
    bool look_again = false;
    std::optional<planner::CostPoint> stored;
    Error db_error{""};
    if (root && req.resume) {
      auto found =
          db->find_point(sum.device, backend->name(), point.op,
                         std::string(dtype_name(point.dtype)), point.shape, point.group_size);
      if (!found) {
        db_error = found.error();
      } else if (*found) {
        skip = true;
        stored = std::move(*found);
        look_again = stored->disposition == planner::Disposition::kPassed &&
                     unsettled_stats(stored_stats(*stored)) && !had_second_look(stored->detail);
      }
    }
    if (any_rank(world, root && !db_error.message.empty())) {
      return root ? db_error : Error{"rank 0 could not read " + req.out_path};
    }
    if (any_rank(world, skip)) {
      if (any_rank(world, look_again)) {
        unsettled.push_back({index, stored ? stored_stats(*stored) : Stats{},
                             stored ? *stored : planner::CostPoint{}});
      }
      ++sum.skipped;
      ++done;
      if (root && progress) progress(done, sum.total, point.op + " " + point.shape + " (kept)");
      continue;
    }

    const Measurement m = measure_point(table, point);
    switch (m.disposition) {
      case planner::Disposition::kPassed: ++sum.measured; break;
      case planner::Disposition::kIncorrect: ++sum.incorrect; break;
      case planner::Disposition::kNotSupported: ++sum.not_supported; break;
    }
    const bool again =
        any_rank(world, m.disposition == planner::Disposition::kPassed && unsettled_stats(m.stats));
    if (root) {
      const planner::CostPoint p = cost_point(table, point, m);
      if (again) unsettled.push_back({index, m.stats, p});
      auto added = [&] {
        kernels::CommitLock lock;
        auto a = db->add_point(p);
        if (a) lock.committed();
        return a;
      }();
      if (!added) {
        db_error = Error{added.error().message + " (the " + std::to_string(done) +
                         " points completed before are kept; {resume} continues)"};
      } else if (written) {
        written(p);
      }
    } else if (again) {
      unsettled.push_back({index, m.stats, {}});
    }
    if (any_rank(world, root && !db_error.message.empty())) {
      return root ? db_error : Error{"rank 0 could not write " + req.out_path};
    }
    ++done;
    if (root && progress) progress(done, sum.total, point.op + " " + point.shape);
  }
  // The unsettled points again, now that the sweep has moved the interference's moment away:
  // the measurement whose samples spread less replaces the first (its detail says so).
  for (std::size_t u = 0; u < unsettled.size() && !sum.interrupted; ++u) {
    if (any_rank(world, stop && stop())) {
      sum.interrupted = true;
      break;
    }
    const auto& [table, point] = (*points)[unsettled[u].index];
    const Stats& first = unsettled[u].first;
    const Measurement again = measure_point(table, point);
    ++sum.remeasured;
    // Rank 0 decides (it holds an earlier run's stored figures), and every rank follows.
    const bool steadier =
        any_rank(world, root && again.disposition == planner::Disposition::kPassed &&
                            spread(again.stats) < spread(first));
    if (steadier) ++sum.replaced;
    Error db_error{""};
    if (root) {
      // The kept measurement, its detail saying that both were taken (so a resumed profile does
      // not look at it again); a first one kept keeps its run and time.
      planner::CostPoint p = unsettled[u].stored;
      if (steadier) {
        Measurement kept = again;
        kept.detail += second_look_note(true, describe(first));
        p = cost_point(table, point, kept);
      } else {
        p.detail += second_look_note(false, again.disposition == planner::Disposition::kPassed
                                                ? describe(again.stats)
                                                : again.detail);
      }
      const kernels::CommitLock lock;  // a point already counted: not counted again
      if (auto r = db->replace_measurement(p); !r) {
        db_error = Error{r.error().message + " (every point measured is kept)"};
      } else if (written) {
        written(p);
      }
    }
    if (any_rank(world, root && !db_error.message.empty())) {
      return root ? db_error : Error{"rank 0 could not write " + req.out_path};
    }
    if (root && progress) {
      progress(done, sum.total,
               "re-measured " + std::to_string(u + 1) + "/" + std::to_string(unsettled.size()) +
                   " unsettled: " + point.op + " " + point.shape +
                   (steadier ? " (replaced)" : " (first kept)"));
    }
  }
  if (!sum.interrupted) {
    sum.pace_end = measure_pace(world, *backend, req.sweep.cold_bytes);
    Error db_error{""};
    if (root) {
      const kernels::CommitLock lock;  // not a point: not counted as one
      if (auto s = db->set_run_end_pace(run_id, sum.pace_end); !s) {
        db_error = Error{s.error().message + " (every point measured is kept)"};
      }
    }
    if (any_rank(world, root && !db_error.message.empty())) {
      return root ? db_error : Error{"rank 0 could not write " + req.out_path};
    }
  }
  return sum;
}

}  // namespace moeplan::profiler
