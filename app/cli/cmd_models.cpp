// `moeplan models list` and `moeplan models show NAME|PATH [--json]`.
#include <cstdio>
#include <memory>

#include "app/cli/cli_common.hpp"
#include "app/cli/table.hpp"
#include "models/model_json.hpp"
#include "models/model_summary.hpp"
#include "models/registry.hpp"
#include "models/units.hpp"

namespace moeplan::cli {

namespace {

int run_list(bool json) {
  nlohmann::json out = nlohmann::json::array();
  Table t;
  t.add_column("name");
  t.add_column("architecture");
  t.add_column("experts", Table::Align::kRight);
  t.add_column("top-k", Table::Align::kRight);
  t.add_column("shared", Table::Align::kRight);
  t.add_column("layers (MoE)", Table::Align::kRight);
  t.add_column("params", Table::Align::kRight);
  t.add_column("active", Table::Align::kRight);
  t.add_column("weights");
  for (const auto& name : models::bundled_model_names()) {
    auto m = models::load_model(name);
    if (!m) return report_error(m.error());
    if (json) {
      out.push_back(models::model_to_json(*m));
      continue;
    }
    t.add_row(
        {name, m->architecture, std::to_string(m->num_experts),
         std::to_string(m->num_experts_per_tok), std::to_string(m->num_shared_experts),
         std::to_string(m->num_hidden_layers) + " (" + std::to_string(m->num_moe_layers()) + ")",
         format_count(static_cast<double>(m->total_parameters())),
         format_count(static_cast<double>(m->active_parameters())), m->weights.name()});
  }
  const std::string text = json ? out.dump(2) + "\n" : t.render();
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

int run_show(const std::string& name, const std::string& weights, bool json) {
  auto m = models::load_model(name);
  if (!m) return report_error(m.error());
  if (auto st = models::apply_weights_choice(*m, weights); !st) return report_error(st.error());
  const std::string text = json ? models::model_to_json(*m).dump(2) + "\n"
                                : render_key_values(models::model_summary(*m));
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace

void add_models_command(CLI::App& app, Action& action) {
  struct Options {
    std::string name = models::kDefaultModel;
    bool list_json = false;
    bool show_json = false;
    std::string weights;
  };
  auto opts = std::make_shared<Options>();
  auto* models_cmd = app.add_subcommand("models", "List bundled MoE models or show one's figures");
  models_cmd->require_subcommand(1);

  auto* list = models_cmd->add_subcommand("list", "List the bundled models");
  list->add_flag("--json", opts->list_json, "Print JSON");
  list->callback([&action, opts] { action = [opts] { return run_list(opts->list_json); }; });

  auto* show = models_cmd->add_subcommand("show", "Show a model's parsed and derived figures");
  show->add_option("model", opts->name, "Bundled model name or path to a config.json")
      ->capture_default_str();
  show->add_flag("--json", opts->show_json, "Print JSON");
  show->add_option("--weights", opts->weights, weights_flag_help());
  show->callback([&action, opts] {
    action = [opts] { return run_show(opts->name, opts->weights, opts->show_json); };
  });
}

}  // namespace moeplan::cli
