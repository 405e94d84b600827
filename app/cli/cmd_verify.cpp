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
#include "kernels/mpi_communicator.hpp"
#include "kernels/mpi_info.hpp"
#include "kernels/verify.hpp"
#if MOEPLAN_HAVE_NCCL
#include "kernels/cuda/nccl_communicator.hpp"
#endif
#include "models/registry.hpp"
#include "models/units.hpp"

namespace moeplan::cli {

namespace {

struct VerifyOptions {
  std::string model = models::kDefaultModel;
  std::string tokens = "1024";
  std::string dtypes = "fp32,fp16,bf16";
  std::string layouts = "all";
  std::string dispatchers = "all";
  int scale = 1;
  int ranks = -1;  // not given: the launcher's world size under mpirun, else 4 threads
  std::uint64_t seed = 20241120;
  std::string backend = "cpu";
  bool json = false;
};

Result<kernels::VerifyRequest> build_request(const VerifyOptions& o, int world_size) {
  kernels::VerifyRequest req;
  auto m = models::load_model(o.model);
  if (!m) return m.error();
  req.model = *m;
  req.scale = o.scale;
  req.seed = o.seed;
  if (o.backend != "cpu" && o.backend != "cuda") {
    return Error{"--backend: expected cpu or cuda, got '" + o.backend + "'"};
  }
  req.backend = o.backend;
  for (const auto& t : split_list(o.tokens)) {
    try {
      std::size_t used = 0;
      const long v = std::stol(t, &used);
      if (used != t.size() || v < 1 || v > (1L << 24)) throw std::invalid_argument(t);
      req.token_counts.push_back(static_cast<int>(v));
    } catch (const std::exception&) {
      return Error{"--tokens: expected a comma-separated list of positive integers, got '" + t +
                   "'"};
    }
  }
  for (const auto& d : split_list(o.dtypes)) {
    const auto dt = parse_dtype(d);
    if (!dt || *dt == DType::kFp8) {
      return Error{"--dtype: expected fp32, fp16 or bf16, got '" + d + "'"};
    }
    req.dtypes.push_back(*dt);
  }
  auto spec = kernels::LayerSpec::from_model(req.model, req.scale, DType::kFp32, req.seed);
  if (!spec) return spec.error();
  if (o.layouts == "all") {
    for (const auto& l : kernels::legal_layouts(*spec, world_size)) {
      req.layouts.push_back(l);
      if (l.ep_size > 1 && l.tp_size > 1) {
        req.layouts.push_back({l.ep_size, l.tp_size, kernels::RankMapping::kEpInnermost});
      }
    }
    if (req.layouts.empty()) {
      return Error{"--layouts all: no legal layout of " + req.model.name + " on " +
                   std::to_string(world_size) + " ranks"};
    }
  } else {
    for (const auto& text : split_list(o.layouts)) {
      auto l = kernels::parse_layout(text);
      if (!l) return l.error();
      req.layouts.push_back(*l);
    }
  }
  if (o.dispatchers == "all") {
    req.dispatchers.assign(std::begin(kernels::kAllDispatchers),
                           std::end(kernels::kAllDispatchers));
  } else {
    for (const auto& text : split_list(o.dispatchers)) {
      auto d = kernels::parse_dispatcher(text);
      if (!d) return Error{"--dispatcher: " + d.error().message};
      req.dispatchers.push_back(*d);
    }
  }
  MOEPLAN_TRY_STATUS(kernels::check_request(req, world_size));
  return req;
}

int case_count(const kernels::VerifyRequest& r) {
  return static_cast<int>(r.layouts.size() * r.dispatchers.size() * r.dtypes.size() *
                          r.token_counts.size());
}

std::string mapping_name(kernels::RankMapping m) {
  return m == kernels::RankMapping::kTpInnermost ? "tp-inner" : "ep-inner";
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

/// One case's result for the progress line: "2x2 tp-inner a2av fp16 96: pass (bound use 0.12)".
std::string case_text(const kernels::VerifyRow& r) {
  return r.layout.name() + " " + mapping_name(r.layout.mapping) + " " +
         kernels::dispatcher_name(r.dispatcher) + " " + std::string(dtype_name(r.dtype)) + " " +
         std::to_string(r.num_tokens) + ": " + (r.passed ? "pass" : "FAIL") + " (bound use " +
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
      out["rows"].push_back({{"layout", r.layout.name()},
                             {"ep_size", r.layout.ep_size},
                             {"tp_size", r.layout.tp_size},
                             {"mapping", mapping_name(r.layout.mapping)},
                             {"dispatcher", kernels::dispatcher_name(r.dispatcher)},
                             {"dtype", std::string(dtype_name(r.dtype))},
                             {"tokens", r.num_tokens},
                             {"max_abs_diff", r.max_abs_diff},
                             {"max_rel_diff", r.max_rel_diff},
                             {"max_bound_use", r.max_bound_use},
                             {"max_abs_reference", r.max_abs_ref},
                             {"layer_ms", r.layer_ms},
                             {"passed", r.passed}});
    }
    std::fputs((out.dump(2) + "\n").c_str(), stdout);
  } else {
    std::printf("verify %s (scale 1/%d) on %d ranks (%s): sharded layer vs dense reference\n",
                req.model.name.c_str(), req.scale, world_size, mode.c_str());
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
      t.add_row({r.layout.name(), mapping_name(r.layout.mapping),
                 kernels::dispatcher_name(r.dispatcher), std::string(dtype_name(r.dtype)),
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
  }
  return all_passed ? kExitOk : kExitFailed;
}

int run_verify_command(const VerifyOptions& o) {
  const int launched = kernels::launcher_world_size();
  if (launched > 1) {
    auto launcher = launcher_world(launched, o.ranks);
    if (!launcher) return report_error(launcher.error());
    std::unique_ptr<kernels::Communicator> world = std::move(*launcher);
    std::string mode = "mpi";
    kernels::Communicator* comm = world.get();
    int device = 0;
#if MOEPLAN_HAVE_NCCL
    // The CUDA backend under mpirun: one process per GPU (local rank picks the device), the
    // layer's collectives over NCCL bootstrapped through MPI.
    std::unique_ptr<kernels::Communicator> nccl;
    if (o.backend == "cuda") {
      device = kernels::cuda::device_for_local_rank(kernels::launcher_local_rank());
      auto made = kernels::cuda::make_nccl_communicator(*world, device);
      if (!made) return report_error(made.error());
      nccl = std::move(*made);
      comm = nccl.get();
      mode = "nccl";
    }
#endif
    auto req = build_request(o, comm->size());
    if (req) req->device = device;
    if (!req) return comm->rank() == 0 ? report_error(req.error()) : kExitBadInput;
    Progress progress("verify", case_count(*req));
    auto rows = kernels::run_verify(*comm, *req, [&](int done, int, const kernels::VerifyRow& r) {
      progress.update(done, case_text(r));
    });
    progress.finish();
    int rc = kExitOk;
    if (comm->rank() == 0) rc = print_rows(*req, rows, comm->size(), mode, o.json);
    return agree_exit_code(*world, rc);
  }
  const int ranks = o.ranks == -1 ? 4 : o.ranks;
  if (ranks < 1 || ranks > 256) {
    return report_error(
        Error{"--ranks: expected 1 to 256 in-process ranks, got " + std::to_string(ranks)});
  }
  auto req = build_request(o, ranks);
  if (!req) return report_error(req.error());
  Progress progress("verify", case_count(*req));
  std::vector<kernels::VerifyRow> rows;
  kernels::run_in_process(ranks, [&](kernels::Communicator& world) {
    auto r = kernels::run_verify(world, *req, [&](int done, int, const kernels::VerifyRow& row) {
      progress.update(done, case_text(row));
    });
    if (world.rank() == 0) rows = std::move(r);
  });
  progress.finish();
  return print_rows(*req, rows, ranks, "in-process threads", o.json);
}

}  // namespace

void add_verify_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<VerifyOptions>();
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
  cmd->add_option("--dispatcher", o->dispatchers, "all, or a list of padded_a2a, allgather, a2av")
      ->capture_default_str();
  cmd->add_option("--scale", o->scale,
                  "Divide hidden and expert widths by S (counts and routing kept)")
      ->capture_default_str();
  cmd->add_option("--ranks", o->ranks,
                  "In-process ranks (threads); default 4, or the mpirun world size");
  cmd->add_option("--seed", o->seed, "Seed of the weights and inputs")->capture_default_str();
  cmd->add_option("--backend", o->backend,
                  "Compute backend: cpu, or cuda (in-process ranks share device 0; under mpirun "
                  "one GPU per process and NCCL)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([&action, o] { action = [o] { return run_verify_command(*o); }; });
}

}  // namespace moeplan::cli
