// `moeplan export`: a layout of a plan (and a placement) as the launch configuration of SGLang,
// vLLM, TensorRT-LLM, Megatron-Core, PaddleNLP, or moeplan's own layout file.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "app/cli/cli_common.hpp"
#include "planner/export.hpp"

namespace moeplan::cli {

namespace {

struct ExportOptions {
  std::string plan;
  std::string layout;
  std::string placement;
  std::string format;
  std::string framework_version;
  std::string out;
};

int run_export(const ExportOptions& o) {
  if (o.plan.empty()) return report_error(Error{"export: expected --plan PLAN.json"});
  auto format = planner::parse_export_format(o.format);
  if (!format) return report_error(format.error());
  auto plan = planner::load_plan_file(o.plan);
  if (!plan) return report_error(plan.error());
  auto spec = planner::export_spec_from_plan(*plan, o.layout, o.placement);
  if (!spec) return report_error(spec.error());
  return emit_export(*spec, *format, o.framework_version, o.out);
}

}  // namespace

int emit_export(const planner::ExportSpec& spec, planner::ExportFormat format,
                const std::string& framework_version, const std::string& out_dir) {
  auto result = planner::export_layout(spec, format, {framework_version, out_dir});
  if (!result) return report_error(result.error());
  if (!out_dir.empty()) {
    if (auto s = planner::write_export(*result, out_dir); !s.ok()) return report_error(s.error());
  }
  for (const auto& w : result->warnings) std::fprintf(stderr, "moeplan: warning: %s\n", w.c_str());
  if (out_dir.empty()) {
    const std::string text = planner::export_to_text(*result);
    std::fputs(text.c_str(), stdout);
  } else {
    for (const auto& f : result->files) {
      std::printf("wrote %s\n", (std::filesystem::path(out_dir) / f.name).string().c_str());
    }
  }
  return kExitOk;
}

void add_export_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<ExportOptions>();
  auto* cmd = app.add_subcommand(
      "export", "Write a plan's layout (and placement) as a framework's launch configuration");
  cmd->add_option("--plan", o->plan, "Plan JSON (moeplan plan --json -o PLAN.json)");
  cmd->add_option("--layout", o->layout,
                  "Layout: a rank of the plan (3) or a shape EPxTP / DPxEPxTP (8x2); default the "
                  "recommended one");
  cmd->add_option("--placement", o->placement,
                  "Placement file (moeplan place --out) for the layout's EP size");
  cmd->add_option("--format", o->format, "sglang | vllm | trtllm | megatron | paddle | json");
  cmd->add_option("--framework-version", o->framework_version,
                  "The framework release to write for (default: its current release; "
                  "docs/EXPORT.md lists each format's)");
  cmd->add_option("--out", o->out,
                  "Write the files into this folder (atomically) instead of "
                  "printing them");
  cmd->callback([&action, o] { action = [o] { return run_export(*o); }; });
}

}  // namespace moeplan::cli
