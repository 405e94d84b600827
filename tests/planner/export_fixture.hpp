// What the export tests share: a roofline plan of a bundled model on a bundled cluster, the spec
// of one of its layouts, a placement whose layers differ, a file of an export by name, and a
// `bash -n` syntax check of a generated script.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "models/registry.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/export.hpp"

namespace moeplan::planner::export_test {

struct Fixture {
  models::MoeModel model;
  Cluster cluster;
  PlanSummary plan;
};

inline Fixture make(const std::string& model_name, const std::string& cluster_name, int gpus,
                    bool attention_dp = false) {
  auto model = models::load_model(model_name);
  EXPECT_TRUE(model.ok()) << model.error().message;
  auto cluster = load_cluster(cluster_name);
  EXPECT_TRUE(cluster.ok()) << cluster.error().message;
  const RooflineCosts costs(*cluster);
  PlanRequest req;
  req.num_gpus = gpus;
  req.attention_dp = attention_dp;
  auto plan = make_plan(*model, *cluster, costs, req);
  EXPECT_TRUE(plan.ok()) << plan.error().message;
  return {*model, *cluster, summarize_plan(*plan)};
}

inline ExportSpec spec_for(const Fixture& f, const std::string& selector,
                           const PlacementFile* placement = nullptr) {
  auto chosen = select_layout(f.plan, selector);
  EXPECT_TRUE(chosen.ok()) << chosen.error().message;
  auto spec = make_export_spec(f.plan, *chosen, f.model, f.cluster, placement, "place.json");
  EXPECT_TRUE(spec.ok()) << spec.error().message;
  return *spec;
}

/// A placement for `ep` ranks with `redundant` extra slots: slot s holds expert s mod E, so
/// the first experts get a second replica; every MoE layer of the model is rotated by its
/// index so the layers differ.
inline PlacementFile rotated_placement(const models::MoeModel& m, int ep, int redundant) {
  PlacementFile f;
  Placement& p = f.result.placement;
  p.policy = "test-rotated";
  p.num_experts = m.num_experts;
  p.ep_size = ep;
  p.num_slots = m.num_experts + redundant;
  for (int h = 0, l = 0; h < m.num_hidden_layers; ++h) {
    if (!m.moe_layers[static_cast<std::size_t>(h)]) continue;
    std::vector<int> row;
    for (int s = 0; s < p.num_slots; ++s) row.push_back((s + l) % m.num_experts);
    p.physical_to_logical.push_back(row);
    f.layer_ids.push_back(h);
    ++l;
  }
  f.config.num_gpus = ep;
  f.config.num_slots = p.num_slots;
  fill_logical_maps(f.result);
  return f;
}

inline const ExportFile* file_named(const ExportResult& r, const std::string& name) {
  for (const auto& f : r.files) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

/// The export of `spec` in `format` at `version` ("" = default); fails the test on an error.
inline ExportResult exported(const ExportSpec& spec, ExportFormat format,
                             const std::string& version = "") {
  auto out = export_layout(spec, format, {version, ""});
  EXPECT_TRUE(out.ok()) << out.error().message;
  return out.ok() ? *out : ExportResult{};
}

/// `bash -n` on `script`: "" when bash parses it, else bash's complaint.
inline std::string bash_syntax_error(const std::string& script) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string tag = std::to_string(::getpid());
  const auto file = dir / ("moeplan_bash_n_" + tag + ".sh");
  const auto err = dir / ("moeplan_bash_n_" + tag + ".err");
  std::ofstream(file) << script;
  const std::string cmd = "bash -n " + file.string() + " 2>" + err.string();
  const int status = std::system(cmd.c_str());
  std::ifstream in(err);
  const std::string complaint((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
  std::filesystem::remove(file);
  std::filesystem::remove(err);
  return status == 0 ? std::string() : "bash -n: " + complaint;
}

}  // namespace moeplan::planner::export_test
