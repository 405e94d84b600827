// `moeplan clusters list` and `moeplan clusters show NAME|PATH`.
#include <cstdio>
#include <map>
#include <memory>

#include "app/cli/cli_common.hpp"
#include "app/cli/table.hpp"
#include "models/units.hpp"
#include "planner/topology/cluster.hpp"

namespace moeplan::cli {

namespace {

std::string network_of(const planner::Cluster& c) {
  const auto& f = c.info().form;
  const auto slash = f.find('/');
  return slash == std::string::npos ? f : f.substr(slash + 1);
}

int run_list() {
  Table t;
  t.add_column("name");
  t.add_column("GPUs", Table::Align::kRight);
  t.add_column("nodes × GPUs");
  t.add_column("device");
  t.add_column("NVLink domain", Table::Align::kRight);
  t.add_column("network");
  for (const auto& name : planner::bundled_cluster_names()) {
    auto c = planner::load_cluster(name);
    if (!c) return report_error(c.error());
    const auto& i = c->info();
    t.add_row({name, std::to_string(c->num_gpus()),
               std::to_string(i.num_nodes) + " × " + std::to_string(i.gpus_per_node), i.device.name,
               std::to_string(i.nvlink_domain_gpus), network_of(*c)});
  }
  std::fputs(t.render().c_str(), stdout);
  return kExitOk;
}

int run_show(const std::string& name) {
  auto c = planner::load_cluster(name);
  if (!c) return report_error(c.error());
  const auto& i = c->info();
  std::vector<std::pair<std::string, std::string>> rows = {
      {"name", i.name},
      {"description", i.description},
      {"source", i.source},
      {"form", i.form},
      {"device", i.device.display_name + " (" + i.device.name + ")"},
      {"GPUs", std::to_string(c->num_gpus()) + " (" + std::to_string(i.num_nodes) + " × " +
                   std::to_string(i.gpus_per_node) + ")"},
      {"NVLink domain", std::to_string(i.nvlink_domain_gpus) + " GPUs"},
  };
  std::map<std::string, int> kinds;
  const auto& g = c->graph();
  for (auto [v, vend] = boost::vertices(g); v != vend; ++v) ++kinds[vertex_kind_name(g[*v].kind)];
  std::string vs;
  for (const auto& [k, n] : kinds) vs += (vs.empty() ? "" : ", ") + std::to_string(n) + " " + k;
  rows.emplace_back("vertices", vs);
  // Link classes: (bandwidth, latency) with their count of directed links.
  rows.emplace_back("links", std::to_string(c->num_links()) + " directed");
  std::map<std::pair<double, double>, int> classes;
  for (int e = 0; e < c->num_links(); ++e) {
    ++classes[{c->link(e).bandwidth, c->link(e).latency}];
  }
  for (const auto& [bl, n] : classes) {
    rows.emplace_back("link class", std::to_string(n) + " × " + format_fixed(bl.first / 1e9, 1) +
                                        " GB/s, " + format_fixed(bl.second * 1e6, 2) + " µs");
  }
  std::fputs(render_key_values(rows).c_str(), stdout);
  return kExitOk;
}

}  // namespace

void add_clusters_command(CLI::App& app, Action& action) {
  auto name = std::make_shared<std::string>(planner::kDefaultCluster);
  auto* cmd = app.add_subcommand("clusters", "List bundled clusters or show one's topology");
  cmd->require_subcommand(1);
  auto* list = cmd->add_subcommand("list", "List the bundled clusters");
  list->callback([&action] { action = [] { return run_list(); }; });
  auto* show = cmd->add_subcommand("show", "Show a cluster's topology figures");
  show->add_option("cluster", *name, "Bundled cluster name or path to a cluster JSON")
      ->capture_default_str();
  show->callback([&action, name] { action = [name] { return run_show(*name); }; });
}

}  // namespace moeplan::cli
