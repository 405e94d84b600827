// `moeplan costs import aiconfigurator …` (measured GPU tables → a cost database, through the
// Python converter scripts/aiconfigurator/import_aiconfigurator.py) and `moeplan costs report`
// (the accuracy of the roofline, the calibrated roofline and an imported database against the
// measured points; docs/GPU_COSTS.md).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/cli/cli_common.hpp"
#include "app/cli/table.hpp"
#include "models/file_io.hpp"
#include "models/registry.hpp"
#include "models/resources.hpp"
#include "models/units.hpp"
#include "planner/costs/accuracy.hpp"
#include "planner/costs/cost_setup.hpp"

namespace moeplan::cli {

namespace {

namespace fs = std::filesystem;

struct ImportOptions {
  std::string source;
  std::string system;
  std::string framework;
  std::string version;
  std::string nccl_version;
  std::string deepep_version;
  std::string ops;
  std::string dtypes;
  std::string data_dir;
  std::string out;
  std::string python;
  bool quiet = false;
};

struct ReportOptions {
  std::string costs;
  std::string layouts;
  bool json = false;
  std::string output;
};

/// Where `bash scripts/install-deps.sh --gpu-tables` puts the importer's Python packages.
fs::path gpu_tables_venv() {
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const fs::path base = cache != nullptr && cache[0] != '\0'
                            ? fs::path(cache)
                            : fs::path(home != nullptr ? home : "/tmp") / ".cache";
  return base / "moeplan" / "gpu-tables-venv";
}

/// The Python that runs the converter: --python, $MOEPLAN_PYTHON, the --gpu-tables venv, or
/// python3 on PATH.
std::string pick_python(const std::string& option) {
  if (!option.empty()) return option;
  if (const char* env = std::getenv("MOEPLAN_PYTHON"); env != nullptr && env[0] != '\0') {
    return env;
  }
  std::error_code ec;
  const fs::path venv = gpu_tables_venv() / "bin" / "python";
  if (fs::exists(venv, ec)) return venv.string();
  return "python3";
}

std::string read_or_empty(const char* path) {
  auto text = read_text_file(path);
  return text ? *text : std::string();
}

struct ProcessResult {
  int exit_code = -1;  ///< -1: could not start; 127: not found
  std::string out;
  std::string err;
};

/// Runs argv[0] with argv (no shell), stdout and stderr captured, stdin from /dev/null.
ProcessResult run_process(const std::vector<std::string>& argv) {
  ProcessResult r;
  char out_tmpl[] = "/tmp/moeplan-costs-out-XXXXXX";
  char err_tmpl[] = "/tmp/moeplan-costs-err-XXXXXX";
  const int out_fd = ::mkstemp(out_tmpl);
  const int err_fd = ::mkstemp(err_tmpl);
  if (out_fd < 0 || err_fd < 0) {
    if (out_fd >= 0) ::close(out_fd);
    if (err_fd >= 0) ::close(err_fd);
    return r;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) ::dup2(in, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "%s: %s\n", argv[0].c_str(), std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  if (pid > 0) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  ::close(out_fd);
  ::close(err_fd);
  r.out = read_or_empty(out_tmpl);
  r.err = read_or_empty(err_tmpl);
  ::unlink(out_tmpl);
  ::unlink(err_tmpl);
  return r;
}

std::string first_line(const std::string& text) {
  const auto nl = text.find('\n');
  return nl == std::string::npos ? text : text.substr(0, nl);
}

/// The fix for missing Python modules, as one command.
std::string install_hint(const std::string& python, const std::vector<std::string>& missing) {
  std::string pkgs;
  for (const auto& m : missing) {
    pkgs += " " + (m == "aiconfigurator_core" ? std::string("aiconfigurator-core==0.12.0") : m);
  }
  return "run `bash scripts/install-deps.sh --gpu-tables` (a venv under " +
         gpu_tables_venv().string() + ") or `" + python + " -m pip install" + pkgs + "`";
}

int run_import(const ImportOptions& o) {
  const fs::path script =
      resource_dir().parent_path() / "scripts" / "aiconfigurator" / "import_aiconfigurator.py";
  std::error_code ec;
  if (!fs::is_regular_file(script, ec)) {
    return report_error(Error{script.string() +
                              ": the importer script is missing; expected moeplan's source tree "
                              "(scripts/aiconfigurator/) beside its resources"});
  }
  const std::string python = pick_python(o.python);
  // NOTE: probe first, so a missing package is one line naming it and the fix, whatever the
  // converter would print.
  const std::string probe =
      "import importlib.util as u\n"
      "print(' '.join(n for n in ('pyarrow', 'aiconfigurator_core') if u.find_spec(n) is None))";
  const ProcessResult p = run_process({python, "-c", probe});
  if (p.exit_code != 0) {
    return report_error(input_error(
        "python", " " + python + ": cannot run it (" +
                      first_line(p.err.empty() ? "exit " + std::to_string(p.exit_code) : p.err) +
                      "); expected a Python 3 interpreter (set {python} or "
                      "MOEPLAN_PYTHON)"));
  }
  std::vector<std::string> missing;
  {
    std::istringstream in(p.out);
    std::string m;
    while (in >> m) {
      if (m == "aiconfigurator_core" && !o.data_dir.empty()) continue;  // tables given directly
      missing.push_back(m);
    }
  }
  if (!missing.empty()) {
    std::string names;
    for (const auto& m : missing) {
      names += (names.empty() ? "" : " and ") +
               std::string(m == "aiconfigurator_core" ? "aiconfigurator-core" : m);
    }
    return report_error(Error{"costs import: Python package" +
                              std::string(missing.size() > 1 ? "s " : " ") + names +
                              (missing.size() > 1 ? " are" : " is") + " not installed for " +
                              python + "; " + install_hint(python, missing)});
  }
  std::vector<std::string> argv = {python,        script.string(), "--system", o.system,
                                   "--framework", o.framework,     "--out",    o.out};
  for (const auto& [flag, value] :
       {std::pair{"--version", o.version}, std::pair{"--nccl-version", o.nccl_version},
        std::pair{"--deepep-version", o.deepep_version}, std::pair{"--ops", o.ops},
        std::pair{"--dtypes", o.dtypes}, std::pair{"--data-dir", o.data_dir}}) {
    if (!value.empty()) {
      argv.push_back(flag);
      argv.push_back(value);
    }
  }
  if (o.quiet) argv.push_back("--quiet");
  const ProcessResult r = run_process(argv);
  if (r.exit_code != 0) {
    // The converter's one line names the input ("--system x: unknown system; expected …").
    std::string line = first_line(r.err);
    const std::string prefix = "import_aiconfigurator: ";
    if (line.rfind(prefix, 0) == 0) line = line.substr(prefix.size());
    if (line.empty()) line = "the converter failed (exit " + std::to_string(r.exit_code) + ")";
    return report_error(Error{"costs import: " + line});
  }
  // The written database must open as a cost database of this moeplan's schema.
  auto db = planner::CostDb::open(o.out, false);
  if (!db) return report_error(db.error());
  std::fputs(r.out.c_str(), stdout);
  return kExitOk;
}

/// One node of `device` (as the bundled 1x-hgx-h200: NVSwitch at the device's NVLink bandwidth).
Result<planner::Cluster> one_node(const std::string& device) {
  auto spec = planner::load_device(device);
  if (!spec) return spec.error();
  const nlohmann::json j = {
      {"name", "1x-hgx-" + device},
      {"description", "one 8-GPU node of " + device + " (moeplan costs report)"},
      {"device", device},
      {"nodes", 1},
      {"gpus_per_node", 8},
      {"nvlink_domain_gpus", 8},
      {"intra_node",
       {{"kind", "nvswitch"},
        {"bandwidth_gb_per_s", spec->nvlink_bandwidth / 1e9},
        {"latency_us", 2.0}}},
      {"inter_node",
       {{"nics_per_node", 8},
        {"nic_bandwidth_gb_per_s", spec->nic_bandwidth > 0.0 ? spec->nic_bandwidth / 1e9 : 50.0},
        {"latency_us", 5.0},
        {"network", "rail_optimized"},
        {"oversubscription", 1.0}}}};
  return planner::parse_cluster(j, "one node of " + device);
}

nlohmann::json stats_json(const planner::ErrorStats& s) {
  return {{"n", s.n},
          {"median", s.median},
          {"p90", s.p90},
          {"worst", s.worst},
          {"median_ratio", s.median_ratio},
          {"min_ratio", s.min_ratio},
          {"max_ratio", s.max_ratio}};
}

std::string pct(const planner::ErrorStats& s, double v) {
  return s.n == 0 ? "-" : format_fixed(100.0 * v, 1) + "%";
}

int run_report(const ReportOptions& o) {
  std::error_code ec;
  if (!fs::is_regular_file(o.costs, ec)) {
    return report_error(input_error(
        "costs", " " + o.costs + ": no such file; expected a database from moeplan costs import"));
  }
  auto db = planner::CostDb::open(o.costs, false);
  if (!db) return report_error(input_error("costs", " " + db.error().message));
  auto devices = (*db)->devices();
  if (!devices) return report_error(devices.error());
  if (devices->size() != 1) {
    return report_error(input_error("costs", " " + o.costs + ": holds " +
                                                 std::to_string(devices->size()) +
                                                 " devices; expected the imported tables of one"));
  }
  const std::string device = devices->front();
  auto node = one_node(device);
  if (!node) return report_error(input_error("costs", " " + o.costs + ": " + node.error().message));
  auto cal = planner::load_calibration(device);
  if (!cal) return report_error(cal.error());
  std::vector<models::MoeModel> models;
  for (const auto& name : models::bundled_model_names()) {
    auto m = models::load_model(name);
    if (!m) return report_error(m.error());
    models.push_back(std::move(*m));
  }
  auto report = planner::accuracy_report(**db, *node, models, *cal ? &**cal : nullptr);
  if (!report) return report_error(input_error("costs", " " + report.error().message));

  // Stats per (kind, dtype) and per (kind, dtype, shape).
  struct Group {
    std::vector<double> old, cal, db, loo;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Group> groups;
  for (const auto& p : report->points) {
    for (const std::string& shape : {std::string("all"), p.shape}) {
      Group& g = groups[{p.kind, p.dtype, shape}];
      g.old.push_back(p.old_roofline / p.measured);
      g.cal.push_back(p.calibrated / p.measured);
      g.db.push_back(p.db / p.measured);
      g.loo.push_back(p.db_leave_one_out / p.measured);
    }
  }
  nlohmann::json j;
  j["device"] = report->device;
  j["costs"] = report->db_path;
  j["calibration"] = report->calibration;
  j["points"] = report->points.size();
  j["db_exact_points"] = report->db_exact;
  Table t;
  for (const char* h :
       {"kind", "dtype", "shape", "points", "old roofline med/worst",
        "calibrated (held out) med/worst", "db exact", "db leave-one-out med/worst"}) {
    t.add_column(h);
  }
  for (const auto& [key, g] : groups) {
    const auto so = planner::error_stats(g.old), sc = planner::error_stats(g.cal);
    const auto sd = planner::error_stats(g.db), sl = planner::error_stats(g.loo);
    j["groups"].push_back({{"kind", std::get<0>(key)},
                           {"dtype", std::get<1>(key)},
                           {"shape", std::get<2>(key)},
                           {"old_roofline", stats_json(so)},
                           {"calibrated", stats_json(sc)},
                           {"db", stats_json(sd)},
                           {"db_leave_one_out", stats_json(sl)}});
    t.add_row({std::get<0>(key), std::get<1>(key), std::get<2>(key), std::to_string(so.n),
               pct(so, so.median) + " / " + pct(so, so.worst),
               pct(sc, sc.median) + " / " + pct(sc, sc.worst) + " (" + std::to_string(sc.n) + ")",
               pct(sd, sd.worst), pct(sl, sl.median) + " / " + pct(sl, sl.worst)});
  }
  std::string text = "accuracy of the cost sources on device " + report->device + " against " +
                     report->db_path + " (" + std::to_string(report->points.size()) +
                     " measured points; " + std::to_string(report->db_exact) +
                     " answered exactly by the database)\ncalibration: " +
                     (report->calibration.empty() ? "(none)" : report->calibration) +
                     "\nerrors |predicted / measured − 1|, median / worst\n\n" + t.render();

  if (!o.layouts.empty()) {
    Table lt;
    for (const char* h :
         {"model", "cluster", "phase", "old roofline", "calibrated", "database", "changes"}) {
      lt.add_column(h);
    }
    for (const auto& cluster_name : split_list(o.layouts)) {
      auto s = planner::make_cost_setup(cluster_name, o.costs);
      if (!s) return report_error(s.error());
      const planner::RooflineCosts plain(*s->cluster);
      for (const auto& m : models) {
        for (const auto phase : {planner::Phase::kPrefill, planner::Phase::kDecode}) {
          planner::Workload w;
          w.phase = phase;
          w.tokens_per_gpu = phase == planner::Phase::kPrefill
                                 ? planner::kDefaultPrefillTokensPerGpu
                                 : planner::kDefaultDecodeBatchPerGpu;
          auto c = planner::compare_recommendations(m, *s->cluster, w, plain, *s->roofline,
                                                    *s->measured);
          if (!c) return report_error(c.error());
          const bool changed = c->old_roofline != c->calibrated || c->calibrated != c->db;
          std::string what = !changed                           ? "no"
                             : c->old_roofline == c->calibrated ? "db"
                             : c->calibrated == c->db           ? "calibrated"
                                                                : "both";
          lt.add_row({c->model, c->cluster, c->phase, c->old_roofline, c->calibrated, c->db, what});
          j["layouts"].push_back({{"model", c->model},
                                  {"cluster", c->cluster},
                                  {"phase", c->phase},
                                  {"tokens_per_gpu", c->tokens_per_gpu},
                                  {"old_roofline", c->old_roofline},
                                  {"calibrated", c->calibrated},
                                  {"db", c->db},
                                  {"old_ms", c->old_ms},
                                  {"calibrated_ms", c->calibrated_ms},
                                  {"db_ms", c->db_ms}});
        }
      }
    }
    text += "\nrecommended layout per source (prefill " +
            std::to_string(planner::kDefaultPrefillTokensPerGpu) + " tokens/GPU, decode batch " +
            std::to_string(planner::kDefaultDecodeBatchPerGpu) + "/GPU)\n\n" + lt.render();
  }
  if (o.json) {
    nlohmann::json pts = nlohmann::json::array();
    for (const auto& p : report->points) {
      auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
      pts.push_back({{"kind", p.kind},
                     {"dtype", p.dtype},
                     {"shape", p.shape},
                     {"split", p.split},
                     {"x", p.x},
                     {"measured_s", p.measured},
                     {"old_roofline_s", p.old_roofline},
                     {"calibrated_s", num(p.calibrated)},
                     {"db_s", p.db},
                     {"db_leave_one_out_s", num(p.db_leave_one_out)}});
    }
    j["point_list"] = std::move(pts);
    text = j.dump(1) + "\n";
  }
  return emit_text(text, o.output);
}

}  // namespace

void add_costs_command(CLI::App& app, Action& action) {
  auto* costs = app.add_subcommand(
      "costs", "Cost databases from measured GPU tables, and the accuracy of the cost sources");
  costs->require_subcommand(1);

  auto io = std::make_shared<ImportOptions>();
  auto* imp = costs->add_subcommand(
      "import",
      "Write a cost database from published GPU kernel tables (needs Python with pyarrow and "
      "aiconfigurator-core: bash scripts/install-deps.sh --gpu-tables)");
  imp->add_option("source", io->source, "Where the tables come from: aiconfigurator")
      ->required()
      ->check(CLI::IsMember({"aiconfigurator"}));
  imp->add_option("--system", io->system,
                  "aiconfigurator system, e.g. h200_sxm, h100_sxm, b200_sxm")
      ->required();
  imp->add_option("--framework", io->framework, "trtllm, sglang or vllm")->required();
  imp->add_option("--version", io->version,
                  "Framework version (default: aiconfigurator's current)");
  imp->add_option("--nccl-version", io->nccl_version, "NCCL table version (default: the system's)");
  imp->add_option("--deepep-version", io->deepep_version,
                  "sglang version of the DeepEP tables (h200_sxm: 0.5.6.post2 has 2, 4 and 8 "
                  "nodes; default: the framework's own)");
  imp->add_option("--ops", io->ops,
                  "Only these ops (comma-separated): moe_fused, gemm, all_gather, all_reduce, "
                  "all_to_all, reduce_scatter, custom_all_reduce, moe_dispatch, moe_combine");
  imp->add_option("--dtypes", io->dtypes, "Only these dtypes (comma-separated), e.g. bf16,fp16");
  imp->add_option("--data-dir", io->data_dir,
                  "A copy of aiconfigurator_core/systems instead of the installed package");
  imp->add_option("--out", io->out, "The cost database to write (replaced only when complete)")
      ->required();
  imp->add_option("--python", io->python,
                  "Python interpreter (default: $MOEPLAN_PYTHON, the --gpu-tables venv, python3)");
  imp->add_flag("--quiet", io->quiet, "Print nothing on success");
  imp->callback([&action, io] { action = [io] { return run_import(*io); }; });

  auto ro = std::make_shared<ReportOptions>();
  auto* rep = costs->add_subcommand(
      "report",
      "Accuracy of the roofline, the calibrated roofline and an imported database against its "
      "measured fused-MoE and NCCL points");
  rep->add_option("--costs", ro->costs, "A database written by moeplan costs import")->required();
  rep->add_option("--layouts", ro->layouts,
                  "Also compare the recommended layouts of every bundled model on these clusters "
                  "(comma-separated, of the database's device), prefill and decode");
  rep->add_flag("--json", ro->json, "Print the report as JSON (with every point)");
  rep->add_option("-o,--output", ro->output, "Write to this file (atomically) instead of stdout");
  rep->callback([&action, ro] { action = [ro] { return run_report(*ro); }; });
}

}  // namespace moeplan::cli
