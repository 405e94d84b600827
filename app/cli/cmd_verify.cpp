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
#include "kernels/case_lists.hpp"
#include "kernels/communicator.hpp"
#include "kernels/job_world.hpp"
#include "kernels/mpi_info.hpp"
#include "kernels/verify.hpp"
#include "profiler/decoder_block.hpp"
#include "profiler/validate_attention.hpp"
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

/// verify --attention's own options.
struct AttentionVerifyOptions {
  bool attention = false;
  std::string scope = "block";
  std::string contexts = "64,300";
  std::string batches = "1,4";
  std::vector<std::string> moe_options_given;  ///< MoE-layer flags given (refused)
};

/// verify --attention: the attention block (or decoder layer) of each context, batch and dtype
/// on one rank, every op against its reference on every row (docs/VERIFY.md, "Norms and RoPE").
int run_verify_attention(const VerifyOptions& o, const AttentionVerifyOptions& a, int ranks,
                         bool json) {
  if (!a.moe_options_given.empty()) {
    return report_error(input_error(
        a.moe_options_given.front().substr(2),
        " applies to the MoE layer's cases, not to verify --attention (which takes --scope, "
        "--contexts, --batches, --dtype and --weights with --scope layer)"));
  }
  if (ranks > 1 || kernels::launcher_world_size() > 1) {
    return report_error(
        input_error("ranks",
                    ": verify --attention runs on one rank (the block has no communication); "
                    "expected --ranks 1 and no mpirun"));
  }
  auto dtypes = kernels::parse_storage_dtype_list(o.dtypes);
  if (!dtypes) return report_error(dtypes.error());
  struct AttentionRow {
    DType dtype;
    profiler::AttentionValidateCase c;
    std::vector<profiler::OpCheck> ops;
    std::string error;
  };
  std::vector<std::pair<DType, profiler::AttentionValidateRequest>> requests;
  int total = 0;
  for (const DType d : *dtypes) {
    profiler::AttentionValidateOptions v;
    v.model = o.model;
    v.dtype = std::string(dtype_name(d));
    v.contexts = a.contexts;
    v.batches = a.batches;
    v.scope = a.scope;
    v.weights = a.scope == "layer" ? o.weights : "";
    v.seed = o.seed;
    v.backend = o.backend;
    v.need_costs = false;
    if (a.scope == "core") {
      return report_error(
          input_error("scope",
                      " core: verify --attention checks the attention block or decoder layer "
                      "(the core is one of the block's ops); expected block or layer"));
    }
    if (!o.weights.empty() && a.scope != "layer") {
      return report_error(input_error("weights",
                                      ": the MoE layer's weight format applies to "
                                      "--scope layer only"));
    }
    auto req = profiler::make_attention_validate_request(v);
    if (!req) return report_error(req.error());
    total += static_cast<int>(req->cases.size());
    requests.emplace_back(d, std::move(*req));
  }
  Progress progress("verify", total);
  std::vector<AttentionRow> rows;
  for (auto& [dtype, req] : requests) {
    std::shared_ptr<kernels::Backend> backend = req.backend;
    if (!backend) backend = kernels::make_cpu_backend();
    for (const auto& c : req.cases) {
      AttentionRow row{dtype, c, {}, {}};
      auto check = [&](kernels::Communicator* world) {
        auto dc = profiler::make_decoder_case(req.model, req.dtype, {c.decode, c.tokens, c.context},
                                              req.moe ? &*req.moe : nullptr, world, *backend);
        if (!dc) {
          row.error = dc.error().message;
          return;
        }
        row.ops = (*dc)->check_ops(0);
      };
      if (req.moe) {
        kernels::run_in_process(1, [&](kernels::Communicator& world) { check(&world); });
      } else {
        check(nullptr);
      }
      rows.push_back(std::move(row));
      progress.update(static_cast<int>(rows.size()),
                      std::string(dtype_name(dtype)) + (c.decode ? " decode " : " prefill ") +
                          std::to_string(c.tokens) + " × " + std::to_string(c.context));
    }
  }
  progress.finish();
  bool all_passed = true;
  for (const auto& r : rows) {
    all_passed = all_passed && r.error.empty();
    for (const auto& op : r.ops) all_passed = all_passed && op.passed;
  }
  const std::string model = requests.front().second.model.name;
  if (json) {
    nlohmann::json out = {{"model", model},
                          {"scope", a.scope},
                          {"passed", all_passed},
                          {"rows", nlohmann::json::array()}};
    for (const auto& r : rows) {
      nlohmann::json ops = nlohmann::json::array();
      for (const auto& op : r.ops) {
        ops.push_back({{"op", op.op},
                       {"checked", op.checked},
                       {"max_abs_diff", op.max_abs_diff},
                       {"max_bound_use", op.max_bound_use},
                       {"passed", op.passed},
                       {"detail", op.detail}});
      }
      out["rows"].push_back({{"dtype", std::string(dtype_name(r.dtype))},
                             {"phase", r.c.decode ? "decode" : "prefill"},
                             {"tokens", r.c.tokens},
                             {"context", r.c.context},
                             {"error", r.error},
                             {"ops", ops}});
    }
    std::fputs((out.dump(2) + "\n").c_str(), stdout);
  } else {
    std::printf("verify %s attention %s on one rank: every op against its reference\n",
                model.c_str(),
                a.scope == "layer" ? "block + MoE layer (the decoder layer)" : "block");
    Table t;
    t.add_column("dtype");
    t.add_column("phase");
    t.add_column("tokens", Table::Align::kRight);
    t.add_column("context", Table::Align::kRight);
    t.add_column("op");
    t.add_column("values", Table::Align::kRight);
    t.add_column("max |diff|", Table::Align::kRight);
    t.add_column("bound use", Table::Align::kRight);
    t.add_column("result");
    std::size_t passed = 0, failed = 0;
    for (const auto& r : rows) {
      const std::vector<std::string> head = {
          std::string(dtype_name(r.dtype)), r.c.decode ? "decode" : "prefill",
          std::to_string(r.c.tokens), std::to_string(r.c.context)};
      if (!r.error.empty()) {
        t.add_row({head[0], head[1], head[2], head[3], "-", "", "", "", "ERROR: " + r.error});
        ++failed;
        continue;
      }
      for (const auto& op : r.ops) {
        t.add_row({head[0], head[1], head[2], head[3], op.op, std::to_string(op.checked),
                   sci(op.max_abs_diff), format_fixed(op.max_bound_use, 3),
                   op.passed ? "pass" : "FAIL: " + op.detail});
        (op.passed ? passed : failed) += 1;
      }
    }
    std::fputs(t.render().c_str(), stdout);
    std::printf(
        "%zu passed, %zu failed (bound use: max |diff| over its derived bound, see "
        "docs/VERIFY.md)\n",
        passed, failed);
  }
  return all_passed ? kExitOk : kExitFailed;
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
  auto attn = std::make_shared<AttentionVerifyOptions>();
  cmd->add_option("--model", o->model, "Bundled model name or config.json path")
      ->capture_default_str();
  auto* tokens =
      cmd->add_option("--tokens", o->tokens, "Comma-separated token counts")->capture_default_str();
  cmd->add_option("--dtype", o->dtypes, "Comma-separated storage dtypes: fp32, fp16, bf16")
      ->capture_default_str();
  auto* layouts = cmd->add_option("--layouts", o->layouts, "all, or EPxTP list such as 4x1,2x2,1x4")
                      ->capture_default_str();
  auto* dispatcher =
      cmd->add_option("--dispatcher", o->dispatchers,
                      "all, or a list of padded_a2a, allgather, a2av, deepep_normal, deepep_ll")
          ->capture_default_str();
  auto* ranks_per_node =
      cmd->add_option("--ranks-per-node", o->ranks_per_node,
                      "Group the ranks into nodes of N (deepep_normal needs two or more; 0: one "
                      "node)")
          ->capture_default_str();
  auto* ll_max =
      cmd->add_option("--ll-max-tokens", o->ll_max_tokens,
                      "deepep_ll's buffer, tokens per rank (0: the largest rank's tokens)")
          ->capture_default_str();
  auto* scale = cmd->add_option("--scale", o->scale,
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
  cmd->add_flag("--attention", attn->attention,
                "Check the attention block (--scope block) or the whole decoder layer (--scope "
                "layer: the block and the MoE layer) of one rank at full width instead: every "
                "op (norms, projections, RoPE, attention core, MoE layer) against its reference "
                "on every row, at --contexts and --batches");
  cmd->add_option("--scope", attn->scope, "With --attention: block or layer")
      ->capture_default_str();
  cmd->add_option("--contexts", attn->contexts,
                  "With --attention: comma-separated context lengths (prefill one prompt each)")
      ->capture_default_str();
  cmd->add_option("--batches", attn->batches,
                  "With --attention: comma-separated decode batch sizes, sequences")
      ->capture_default_str();
  const std::vector<CLI::Option*> moe_options = {tokens,         layouts, dispatcher,
                                                 ranks_per_node, ll_max,  scale};
  cmd->callback([&action, o, ranks, json, attn, moe_options] {
    attn->moe_options_given.clear();
    for (const CLI::Option* opt : moe_options) {
      if (opt->count() > 0) attn->moe_options_given.push_back(opt->get_name());
    }
    action = [o, ranks, json, attn] {
      return attn->attention ? run_verify_attention(*o, *attn, *ranks, *json)
                             : run_verify_command(*o, *ranks, *json);
    };
  });
}

}  // namespace moeplan::cli
