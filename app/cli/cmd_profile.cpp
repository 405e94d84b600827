// `moeplan profile`: measure the kernels and collectives a model's layouts need on this machine
// (threads, or real processes under mpirun/srun) and write them to a cost database.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>

#include "app/cli/cli_common.hpp"
#include "app/cli/progress.hpp"
#include "kernels/job_world.hpp"
#include "kernels/mpi_info.hpp"
#include "kernels/rank_watchdog.hpp"
#include "models/registry.hpp"
#include "profiler/pace.hpp"
#include "profiler/profile.hpp"
#include "profiler/sweep.hpp"
#if MOEPLAN_HAVE_NCCL
#include "kernels/cuda/nccl_communicator.hpp"
#endif

namespace moeplan::cli {

namespace {

struct ProfileOptions : profiler::ProfileOptions {
  ProfileOptions() { model = models::kDefaultModel; }
  int ranks = -1;
};

int report(const profiler::ProfileSummary& s, const std::string& out) {
  std::printf(
      "profile %s: %d points: %d measured, %d kept from before, %d incorrect, %d not supported%s\n"
      "device: %s\n",
      out.c_str(), s.total, s.measured, s.skipped, s.incorrect, s.not_supported,
      s.interrupted ? " (interrupted: every completed point is kept; --resume continues)" : "",
      s.device.c_str());
  if (s.remeasured > 0) {
    std::printf(
        "%d point(s) had not settled (samples spread beyond %.0f%% in their time budget) and "
        "were measured again after the sweep: %d replaced by the steadier measurement\n",
        s.remeasured, 100.0 * profiler::HarnessOptions{}.target_spread, s.replaced);
  }
  // The pace validate compares its own with (profiler/pace.hpp).
  std::printf("machine pace (%s): %s at the start", profiler::pace_probe_text().c_str(),
              profiler::pace_text(s.pace_start).c_str());
  if (s.pace_end.recorded())
    std::printf(", %s at the end", profiler::pace_text(s.pace_end).c_str());
  std::printf("\n");
  if (s.interrupted) return 130;
  return s.incorrect > 0 ? kExitFailed : kExitOk;
}

int run_profile_command(const ProfileOptions& options) {
  // SIGINT/SIGTERM stop the sweep between points on every rank (exit 130, every completed point
  // kept); under a launcher a rank still blocked 2 s later is ended by the rank watchdog.
  kernels::install_stop_handler();
  const auto stop = [] { return kernels::stop_requested(); };
  auto world =
      kernels::JobWorld::open({options.ranks, 1, 64}, command_line_args(), report_and_flush);
  if (!world) return report_error(world.error());
  world->allow_graceful_stop(2.0);
  ProfileOptions o = options;
  o.launched = world->launched();
  // The collectives of a CUDA profile under a launcher: NCCL bootstrapped through MPI, one
  // process per GPU (the local rank picks the device), as nccl-tests and verify do.
  [[maybe_unused]] const bool over_nccl =
      world->mpi() != nullptr && o.backend == "cuda" && world->size() > 1;
#if MOEPLAN_HAVE_NCCL
  if (over_nccl) o.device = kernels::cuda::device_for_local_rank(kernels::launcher_local_rank());
#endif
  auto req = profiler::make_profile_request(o, world->size());
  if (req && world->launched()) {
    for (int r = 0; r < world->size(); ++r) {
      const auto& p = world->places()[static_cast<std::size_t>(r)];
      req->places.push_back({r, p.host, p.node, p.shm_domain});
    }
  }
  Status ok = req ? (world->is_root() ? profiler::check_profile_output(*req) : Status::Ok())
                  : Status(req.error());
  if (!world->agree(ok, report_and_flush)) return kExitBadInput;
  std::unique_ptr<kernels::Communicator> nccl;
#if MOEPLAN_HAVE_NCCL
  if (over_nccl) {
    auto made = kernels::cuda::make_nccl_communicator(*world->mpi(), o.device);
    if (!world->agree(made ? Status::Ok() : Status(made.error()), report_and_flush)) {
      return kExitBadInput;
    }
    nccl = std::move(*made);
  }
#endif
  std::unique_ptr<Progress> progress;
  if (world->is_root()) progress = std::make_unique<Progress>("profile", 0);
  int total = 0;
  auto sum = world->run<Result<profiler::ProfileSummary>>([&](kernels::Communicator& comm) {
    return profiler::run_profile(
        comm, *req,
        [&](int done, int n, const std::string& what) {
          if (total == 0) {
            total = n;
            progress = std::make_unique<Progress>("profile", n);
          }
          progress->update(done, what);
        },
        stop, {}, nccl.get());
  });
  if (progress) progress->finish();
  int rc = kExitOk;
  if (!sum) {
    rc = world->is_root() ? report_error(sum.error()) : kExitBadInput;
  } else if (world->is_root()) {
    rc = report(*sum, o.out);
    // After the summary, so that a refused profile says one thing only.
    const std::string note = profiler::cold_rotation_note(*req);
    if (!note.empty()) std::printf("note: %s\n", note.c_str());
  }
  return world->agree_exit_code(rc);
}

}  // namespace

void add_profile_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<ProfileOptions>();
  auto* cmd = app.add_subcommand(
      "profile",
      "Measure the kernels and collectives a model's layouts need on this machine and write "
      "them to a cost database (threads with --ranks, or real processes under mpirun/srun)");
  cmd->add_option("--backend", o->backend,
                  "Compute backend to measure: cpu, or cuda (the kernels timed by CUDA events; "
                  "under mpirun/srun one process per GPU, the collectives over NCCL on device "
                  "memory)")
      ->capture_default_str();
  cmd->add_option("--model", o->model, "Bundled model name or config.json path")
      ->capture_default_str();
  cmd->add_option("--cluster", o->cluster, "local:N (must match the rank count; optional)");
  cmd->add_option("--scale", o->scale,
                  "Divide hidden and expert widths by S (as verify/validate --scale)")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtypes,
                  "Comma-separated storage dtypes: fp32, fp16, bf16 (default: the model's)");
  cmd->add_option("--weights", o->weights,
                  "Expert weight format: the model's own by default (DeepSeek-V3: fp8-block, "
                  "whose expert GEMMs are measured as fp8 ones; so are fp8-channel's and "
                  "fp8-tensor's); bf16/fp16, w4a16, mxfp4, nvfp4 (decoded on load)");
  cmd->add_option("--ops", o->ops, "Comma-separated ops to measure (default: all)");
  cmd->add_option("--max-tokens", o->max_tokens,
                  "GEMM rows up to this (default 4096, --quick 512)");
  cmd->add_option("--max-bytes", o->max_bytes,
                  "Message and elementwise sizes up to this (default 64 MiB, --quick 1 MiB)");
  cmd->add_option("--max-seconds", o->max_seconds, "Timing budget per point, seconds")
      ->capture_default_str();
  cmd->add_option("--cold-mib", o->cold_mib,
                  "Operand copies each point reads in turn, together this many MiB, so that "
                  "weights come cold from memory as in a step of a many-layer model; validate "
                  "reads the profile's. Raise it on a CPU whose last-level cache is over 1/8 of "
                  "it (profile says so)")
      ->capture_default_str();
  cmd->add_flag("--quick", o->quick, "A small sweep (powers of two, small caps, short timing)");
  cmd->add_option("--out", o->out, "Cost database to write (SQLite; required)");
  cmd->add_flag("--resume", o->resume, "Add to an existing database, measuring only what it lacks");
  cmd->add_option("--ranks", o->ranks,
                  "In-process ranks (threads) for collectives; default 1, or the mpirun world");
  cmd->callback([&action, o] {
    o->command = "moeplan profile --backend " + o->backend + " --model " + o->model + " --scale " +
                 std::to_string(o->scale) + (o->dtypes.empty() ? "" : " --dtype " + o->dtypes) +
                 (o->ops.empty() ? "" : " --ops " + o->ops) +
                 (o->cold_mib == static_cast<long>(profiler::kColdBytes >> 20)
                      ? ""
                      : " --cold-mib " + std::to_string(o->cold_mib)) +
                 (o->quick ? " --quick" : "") + (o->resume ? " --resume" : "") + " --out " + o->out;
    action = [o] { return run_profile_command(*o); };
  });
}

}  // namespace moeplan::cli
