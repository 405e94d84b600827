// `moeplan verify`: every requested layout × dispatcher × dtype × token count of the sharded MoE
// layer against the dense reference, on in-process ranks (--ranks N) or under mpirun.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/cli/cli_common.hpp"
#include "app/cli/progress.hpp"
#include "app/cli/table.hpp"
#include "kernels/job_world.hpp"
#include "kernels/mpi_info.hpp"
#include "kernels/verify.hpp"
#if MOEPLAN_HAVE_NCCL
#include "kernels/cuda/nccl_communicator.hpp"
#endif
#include "models/registry.hpp"
#include "models/units.hpp"

namespace moeplan::cli {

namespace {

using kernels::VerifyOptions;

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

/// One case's result for the progress line:
/// "2x2 tp_innermost a2av fp16 96: pass (bound use 0.12)".
std::string case_text(const kernels::VerifyRow& r) {
  return r.layout.short_name() + " " + models::mapping_name(r.layout.mapping) + " " +
         kernels::dispatcher_name(r.layout.dispatcher) + " " + std::string(dtype_name(r.dtype)) +
         " " + std::to_string(r.num_tokens) + ": " + (r.passed ? "pass" : "FAIL") + " (bound use " +
         format_fixed(r.max_bound_use, 3) + ")";
}

int print_rows(const kernels::VerifyRequest& req, const std::vector<kernels::VerifyRow>& rows,
               int world_size, const std::string& mode, bool json) {
  bool all_passed = true;
  for (const auto& r : rows) all_passed = all_passed && r.passed;
  if (json) {
    nlohmann::json out = {{"model", req.model.name}, {"scale", req.scale},
                          {"ranks", world_size},     {"communicator", mode},
                          {"passed", all_passed},    {"rows", nlohmann::json::array()}};
    for (const auto& r : rows) {
      out["rows"].push_back({{"layout", r.layout.short_name()},
                             {"ep_size", r.layout.ep_size},
                             {"tp_size", r.layout.tp_size},
                             {"mapping", models::mapping_name(r.layout.mapping)},
                             {"dispatcher", kernels::dispatcher_name(r.layout.dispatcher)},
                             {"dtype", std::string(dtype_name(r.dtype))},
                             {"tokens", r.num_tokens},
                             {"max_abs_diff", r.max_abs_diff},
                             {"max_rel_diff", r.max_rel_diff},
                             {"max_bound_use", r.max_bound_use},
                             {"max_abs_reference", r.max_abs_ref},
                             {"layer_ms", r.layer_ms},
                             {"passed", r.passed}});
    }
    out["weights"] = req.model.weights.to_json();
    out["skipped"] = req.skipped;
    out["ranks_per_node"] = req.dispatch.ranks_per_node;
    std::fputs((out.dump(2) + "\n").c_str(), stdout);
  } else {
    std::printf("verify %s (scale 1/%d) on %d ranks (%s): sharded layer vs dense reference\n",
                req.model.name.c_str(), req.scale, world_size, mode.c_str());
    if (const std::string note = kernels::kernel_run_note(req.model.weights); !note.empty()) {
      std::printf("note: %s\n", note.c_str());
    }
    if (req.model.weights.quantized()) {
      std::printf("expert weights: %s; activations: %s\n", req.model.weights.describe().c_str(),
                  req.model.weights.describe_activations().c_str());
    }
    Table t;
    t.add_column("layout");
    t.add_column("mapping");
    t.add_column("dispatcher");
    t.add_column("dtype");
    t.add_column("tokens", Table::Align::kRight);
    t.add_column("max |diff|", Table::Align::kRight);
    t.add_column("max rel diff", Table::Align::kRight);
    t.add_column("bound use", Table::Align::kRight);
    t.add_column("layer ms", Table::Align::kRight);
    t.add_column("result");
    for (const auto& r : rows) {
      t.add_row({r.layout.short_name(), models::mapping_name(r.layout.mapping),
                 kernels::dispatcher_name(r.layout.dispatcher), std::string(dtype_name(r.dtype)),
                 std::to_string(r.num_tokens), sci(r.max_abs_diff), sci(r.max_rel_diff),
                 format_fixed(r.max_bound_use, 3), format_fixed(r.layer_ms, 1),
                 r.passed ? "pass" : "FAIL"});
    }
    std::fputs(t.render().c_str(), stdout);
    std::printf(
        "%zu passed, %zu failed (bound use: max |diff| over its derived bound, see "
        "docs/VERIFY.md; layer ms: measured wall time of the slowest rank)\n",
        static_cast<std::size_t>(
            std::count_if(rows.begin(), rows.end(), [](const auto& r) { return r.passed; })),
        static_cast<std::size_t>(
            std::count_if(rows.begin(), rows.end(), [](const auto& r) { return !r.passed; })));
    for (const auto& why : req.skipped) std::printf("not run: %s\n", why.c_str());
  }
  return all_passed ? kExitOk : kExitFailed;
}

int run_verify_command(const VerifyOptions& o, int ranks_option, bool json) {
  auto world =
      kernels::JobWorld::open({ranks_option, 4, 256}, command_line_args(), report_and_flush);
  if (!world) return report_error(world.error());
  std::string mode = world->mode();
  kernels::Communicator* nccl_world = nullptr;  // the job's collectives, when over NCCL
  int device = 0;
#if MOEPLAN_HAVE_NCCL
  // The CUDA backend under mpirun: one process per GPU (local rank picks the device), the
  // layer's collectives over NCCL bootstrapped through MPI.
  std::unique_ptr<kernels::Communicator> nccl;
  if (kernels::Communicator* mpi = world->mpi(); mpi != nullptr && o.backend == "cuda") {
    device = kernels::cuda::device_for_local_rank(kernels::launcher_local_rank());
    auto made = kernels::cuda::make_nccl_communicator(*mpi, device);
    if (!made) return report_error(made.error());
    nccl = std::move(*made);
    nccl_world = nccl.get();
    mode = "nccl";
  }
#endif
  auto req = kernels::make_verify_request(o, world->size());
  if (req) req->device = device;
  if (!world->agree(req ? Status::Ok() : Status(req.error()), report_and_flush)) {
    return kExitBadInput;
  }
  std::unique_ptr<Progress> progress;
  if (world->is_root()) progress = std::make_unique<Progress>("verify", case_count(*req));
  const auto job = [&](kernels::Communicator& comm) {
    return kernels::run_verify(comm, *req, [&](int done, int, const kernels::VerifyRow& r) {
      if (progress) progress->update(done, case_text(r));
    });
  };
  const std::vector<kernels::VerifyRow> rows =
      nccl_world != nullptr ? job(*nccl_world) : world->run<std::vector<kernels::VerifyRow>>(job);
  if (progress) progress->finish();
  int rc = kExitOk;
  if (world->is_root()) rc = print_rows(*req, rows, world->size(), mode, json);
  return world->agree_exit_code(rc);
}

}  // namespace

void add_verify_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<VerifyOptions>();
  o->model = models::kDefaultModel;
  auto ranks = std::make_shared<int>(-1);
  auto* cmd = app.add_subcommand(
      "verify",
      "Check every layout and dispatcher of the sharded MoE layer against the dense "
      "reference (in-process ranks, or under mpirun)");
  cmd->add_option("--model", o->model, "Bundled model name or config.json path")
      ->capture_default_str();
  cmd->add_option("--tokens", o->tokens, "Comma-separated token counts")->capture_default_str();
  cmd->add_option("--dtype", o->dtypes, "Comma-separated storage dtypes: fp32, fp16, bf16")
      ->capture_default_str();
  cmd->add_option("--layouts", o->layouts, "all, or EPxTP list such as 4x1,2x2,1x4")
      ->capture_default_str();
  cmd->add_option("--dispatcher", o->dispatchers,
                  "all, or a list of padded_a2a, allgather, a2av, deepep_normal, deepep_ll")
      ->capture_default_str();
  cmd->add_option("--ranks-per-node", o->ranks_per_node,
                  "Group the ranks into nodes of N (deepep_normal needs two or more; 0: one node)")
      ->capture_default_str();
  cmd->add_option("--ll-max-tokens", o->ll_max_tokens,
                  "deepep_ll's buffer, tokens per rank (0: the largest rank's tokens)")
      ->capture_default_str();
  cmd->add_option("--scale", o->scale,
                  "Divide hidden and expert widths by S (counts and routing kept)")
      ->capture_default_str();
  cmd->add_option("--ranks", *ranks,
                  "In-process ranks (threads); default 4, or the mpirun world size");
  cmd->add_option("--seed", o->seed, "Seed of the weights and inputs")->capture_default_str();
  cmd->add_option("--weights", o->weights,
                  "Expert weight format: the model's own by default (DeepSeek-V3: fp8-block); "
                  "bf16/fp16 (plain), fp8-block, fp8-channel (per-token activations), fp8-tensor "
                  "(static activation scales), and w4a16, mxfp4 or nvfp4 (4-bit, decoded on load; "
                  "nvfp4's activations at the dtype) run");
  cmd->add_option("--backend", o->backend,
                  "Compute backend: cpu, or cuda (in-process ranks share device 0; under mpirun "
                  "one GPU per process and NCCL)")
      ->capture_default_str();
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([&action, o, ranks, json] {
    action = [o, ranks, json] { return run_verify_command(*o, *ranks, *json); };
  });
}

}  // namespace moeplan::cli
