// moeplan_layout.json: its typed sections, written and read back, and its export-table entry.
#include "planner/export/layout_file.hpp"

#include <cstdio>
#include <cstdlib>

#include "models/file_io.hpp"
#include "models/json_reader.hpp"
#include "planner/export/writer.hpp"

namespace moeplan::planner {

namespace {

/// 12 significant digits: milliseconds converted from seconds and back are then written the
/// same way every time (x·1e3/1e3 is not always x in binary floating point).
double sig12(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.12g", x);
  return std::strtod(buf, nullptr);
}

constexpr const char* kMapMarker = "@physical_to_logical_map@";
constexpr const char* kLayerIdsMarker = "@moe_layer_ids@";

nlohmann::ordered_json to_json(const LayoutFile& f) {
  nlohmann::ordered_json j;
  j["format"] = kLayoutFormat;
  j["version"] = kLayoutVersion;
  j["model"] = {{"name", f.model.name},
                {"source", f.model.source},
                {"fingerprint", f.model.fingerprint},
                {"num_hidden_layers", f.model.num_hidden_layers},
                {"moe_layer_ids", kLayerIdsMarker},
                {"num_experts", f.model.num_experts},
                {"top_k", f.model.top_k}};
  j["cluster"] = {{"name", f.cluster.name},
                  {"source", f.cluster.source},
                  {"fingerprint", f.cluster.fingerprint},
                  {"device", f.cluster.device},
                  {"gpus_per_node", f.cluster.gpus_per_node}};
  j["plan"] = {{"source", f.plan.source},
               {"rank", f.plan.rank},
               {"cost_source", f.plan.cost_source},
               {"expert_load", f.plan.expert_load},
               {"placement", f.plan.placement}};
  j["workload"] = {{"phase", phase_name(f.workload.phase)},
                   {"tokens_per_gpu", f.workload.tokens_per_gpu}};
  j["layout"] = {{"num_gpus", f.layout.num_gpus},
                 {"dp_size", f.layout.dp_size},
                 {"ep_size", f.layout.ep_size},
                 {"tp_size", f.layout.tp_size},
                 {"dispatcher", dispatcher_name(f.layout.dispatcher)},
                 {"mapping", mapping_name(f.layout.mapping)}};
  if (f.layout.tbo) j["layout"]["two_batch_overlap"] = true;
  nlohmann::ordered_json layer_ms, sources;
  double total = 0.0;
  for (const auto& [name, item] : kLayerCostParts) {
    const double v = sig12((f.predicted.layer.*item).seconds * 1e3);
    layer_ms[name] = v;
    total += v;
    sources[name] = (f.predicted.layer.*item).source;
  }
  if (f.predicted.layer.overlap_hidden > 0.0) {
    const double hidden = sig12(f.predicted.layer.overlap_hidden * 1e3);
    layer_ms["overlap_hidden"] = hidden;
    total -= hidden;
  }
  // The sum of the written parts, so that reading the file back and writing it again agrees.
  layer_ms["total"] = sig12(total);
  j["predicted"] = {{"feasible", f.predicted.feasible},
                    {"layer_ms", layer_ms},
                    {"sources", sources},
                    {"step_ms", sig12(f.predicted.step_seconds * 1e3)},
                    {"tokens_per_s_per_gpu", f.predicted.tokens_per_s_per_gpu},
                    {"memory_gib", f.predicted.memory_gib},
                    {"capacity_gib", f.predicted.capacity_gib}};
  if (f.placement) {
    j["placement"] = {{"policy", f.placement->policy},
                      {"num_slots", f.placement->num_slots},
                      {"layer_ids", kLayerIdsMarker},
                      {"physical_to_logical_map", kMapMarker}};
  } else {
    j["placement"] = nullptr;
  }
  return j;
}

Result<nlohmann::json> section(const nlohmann::json& j, const JsonReader& r, const std::string& key,
                               const std::string& what) {
  if (!r.has(key) || !j.at(key).is_object()) return r.error(key, "expected an object with " + what);
  return j.at(key);
}

/// Required strings of one section into their fields.
Status read_strings(const JsonReader& r,
                    std::initializer_list<std::pair<const char*, std::string*>> keys) {
  for (const auto& [key, dst] : keys) {
    auto v = r.string(key);
    if (!v) return v.error();
    *dst = *v;
  }
  return Status::Ok();
}

Result<LayoutFile::Model> read_model(const nlohmann::json& j, const std::string& source) {
  JsonReader r(j, source, "model.");
  LayoutFile::Model m;
  MOEPLAN_TRY_STATUS(
      read_strings(r, {{"name", &m.name}, {"source", &m.source}, {"fingerprint", &m.fingerprint}}));
  auto hidden = r.integer("num_hidden_layers", 1, 1 << 16);
  if (!hidden) return hidden.error();
  m.num_hidden_layers = static_cast<int>(*hidden);
  auto ids = r.integer_list_or_empty("moe_layer_ids", 0, *hidden - 1);
  if (!ids) return ids.error();
  if (ids->empty()) return r.error("moe_layer_ids", "expected at least one MoE layer");
  for (std::size_t i = 0; i < ids->size(); ++i) {
    if (i > 0 && (*ids)[i] <= (*ids)[i - 1]) {
      return r.error("moe_layer_ids", "expected increasing hidden-layer indices");
    }
    m.moe_layer_ids.push_back(static_cast<int>((*ids)[i]));
  }
  auto experts = r.integer("num_experts", 1, 1 << 20);
  if (!experts) return experts.error();
  m.num_experts = static_cast<int>(*experts);
  auto top_k = r.integer("top_k", 1, *experts);
  if (!top_k) return top_k.error();
  m.top_k = static_cast<int>(*top_k);
  return m;
}

Result<LayoutFile::ClusterRef> read_cluster(const nlohmann::json& j, const std::string& source) {
  JsonReader r(j, source, "cluster.");
  LayoutFile::ClusterRef c;
  MOEPLAN_TRY_STATUS(read_strings(r, {{"name", &c.name},
                                      {"source", &c.source},
                                      {"fingerprint", &c.fingerprint},
                                      {"device", &c.device}}));
  auto gpn = r.integer("gpus_per_node", 1, 1 << 16);
  if (!gpn) return gpn.error();
  c.gpus_per_node = static_cast<int>(*gpn);
  return c;
}

Result<LayoutFile::PlanRef> read_plan(const nlohmann::json& j, const std::string& source) {
  JsonReader r(j, source, "plan.");
  LayoutFile::PlanRef p;
  MOEPLAN_TRY_STATUS(read_strings(r, {{"source", &p.source},
                                      {"cost_source", &p.cost_source},
                                      {"expert_load", &p.expert_load},
                                      {"placement", &p.placement}}));
  auto rank = r.integer("rank", 0, 1 << 20);
  if (!rank) return rank.error();
  p.rank = static_cast<int>(*rank);
  return p;
}

Result<Workload> read_workload(const nlohmann::json& j, const std::string& source) {
  JsonReader r(j, source, "workload.");
  Workload w;
  auto phase = r.string("phase");
  if (!phase) return phase.error();
  const auto ph = parse_phase(*phase);
  if (!ph) return r.error("phase", "expected prefill or decode, got \"" + *phase + "\"");
  w.phase = *ph;
  auto tokens = r.integer("tokens_per_gpu", 1, 1 << 30);
  if (!tokens) return tokens.error();
  w.tokens_per_gpu = static_cast<int>(*tokens);
  return w;
}

Result<LayoutFile::Predicted> read_predicted(const nlohmann::json& j, const std::string& source) {
  JsonReader r(j, source, "predicted.");
  LayoutFile::Predicted p;
  auto figures = parse_predicted_figures(j, source, "predicted.");
  if (!figures) return figures.error();
  p.feasible = figures->feasible;
  p.layer = std::move(figures->per_layer);
  p.step_seconds = figures->step_seconds;
  p.tokens_per_s_per_gpu = figures->tokens_per_s_per_gpu;
  auto mem = r.number_or("memory_gib", 0.0, 0.0, 1e12);
  if (!mem) return mem.error();
  p.memory_gib = *mem;
  auto cap = r.number_or("capacity_gib", 0.0, 0.0, 1e12);
  if (!cap) return cap.error();
  p.capacity_gib = *cap;
  return p;
}

Result<Placement> read_placement(const nlohmann::json& j, const std::string& source,
                                 const LayoutFile& f) {
  if (!j.is_object()) return Error{source + ": key 'placement': expected an object or null"};
  JsonReader r(j, source, "placement.");
  Placement p;
  auto policy = r.string("policy");
  if (!policy) return policy.error();
  p.policy = *policy;
  p.num_experts = f.model.num_experts;
  p.ep_size = f.layout.ep_size;
  auto slots = r.integer("num_slots", f.model.num_experts, 1 << 24);
  if (!slots) return slots.error();
  p.num_slots = static_cast<int>(*slots);
  auto ids = r.integer_list_or_empty("layer_ids", 0, f.model.num_hidden_layers - 1);
  if (!ids) return ids.error();
  if (std::vector<int>(ids->begin(), ids->end()) != f.model.moe_layer_ids) {
    return r.error("layer_ids", "expected model.moe_layer_ids");
  }
  const auto& map =
      j.contains("physical_to_logical_map") ? j.at("physical_to_logical_map") : nlohmann::json();
  if (!map.is_array() || map.size() != f.model.moe_layer_ids.size()) {
    return r.error("physical_to_logical_map",
                   "expected one row of num_slots experts per MoE layer (" +
                       std::to_string(f.model.moe_layer_ids.size()) + ")");
  }
  for (const auto& row : map) {
    if (!row.is_array()) {
      return r.error("physical_to_logical_map", "expected rows, got " + describe_json(row));
    }
    std::vector<int> v;
    for (const auto& x : row) {
      if (!x.is_number_integer() || x.get<std::int64_t>() < 0 ||
          x.get<std::int64_t>() >= f.model.num_experts) {
        return r.error("physical_to_logical_map", "expected expert ids in [0, " +
                                                      std::to_string(f.model.num_experts) +
                                                      "), got " + describe_json(x));
      }
      v.push_back(x.get<int>());
    }
    p.physical_to_logical.push_back(std::move(v));
  }
  if (auto st = p.validate(); !st.ok()) {
    return r.error("physical_to_logical_map", st.error().message);
  }
  return p;
}

ExportResult write_layout_file(const ExportSpec& spec, std::string_view /*version*/,
                               const ExportOptions& /*options*/) {
  ExportResult res;
  res.files.push_back({"moeplan_layout.json", layout_file_text(layout_file_of(spec))});
  return res;
}

std::vector<std::string> runs_everything(const ExportSpec&, const Layout&, std::string_view) {
  return {};
}

constexpr exports::FrameworkVersion kVersions[] = {
    {"1", "moeplan's own format: written and read back by moeplan (tests/planner)"}};

}  // namespace

namespace exports {
const FormatWriter kLayoutFileWriter = {ExportFormat::kJson, "json",          "moeplan",
                                        kVersions,           runs_everything, write_layout_file};
}  // namespace exports

LayoutFile layout_file_of(const ExportSpec& spec) {
  LayoutFile f;
  f.model = {spec.model,
             spec.model_source,
             spec.model_fingerprint,
             spec.num_hidden_layers,
             spec.moe_layer_ids,
             spec.num_experts,
             spec.top_k};
  f.cluster = {spec.cluster, spec.cluster_source, spec.cluster_fingerprint, spec.device,
               spec.gpus_per_node};
  f.plan = {spec.plan_source, spec.chosen.rank, spec.cost_source, spec.load_source,
            spec.cost_placement};
  f.workload = spec.workload;
  f.layout = spec.chosen.layout;
  f.predicted = {spec.chosen.feasible,     spec.chosen.per_layer,
                 spec.chosen.step_seconds, spec.chosen.tokens_per_s_per_gpu,
                 spec.chosen.memory_gib,   spec.chosen.capacity_gib};
  f.placement = spec.placement;
  return f;
}

ExportSpec spec_of(const LayoutFile& f) {
  ExportSpec s;
  s.model = f.model.name;
  s.model_source = f.model.source;
  s.model_fingerprint = f.model.fingerprint;
  s.num_hidden_layers = f.model.num_hidden_layers;
  s.moe_layer_ids = f.model.moe_layer_ids;
  s.num_experts = f.model.num_experts;
  s.top_k = f.model.top_k;
  s.cluster = f.cluster.name;
  s.cluster_source = f.cluster.source;
  s.cluster_fingerprint = f.cluster.fingerprint;
  s.device = f.cluster.device;
  s.gpus_per_node = f.cluster.gpus_per_node;
  s.plan_source = f.plan.source;
  s.cost_source = f.plan.cost_source;
  s.load_source = f.plan.expert_load;
  s.cost_placement = f.plan.placement;
  s.workload = f.workload;
  s.chosen.rank = f.plan.rank;
  s.chosen.layout = f.layout;
  s.chosen.feasible = f.predicted.feasible;
  s.chosen.per_layer = f.predicted.layer;
  s.chosen.step_seconds = f.predicted.step_seconds;
  s.chosen.tokens_per_s_per_gpu = f.predicted.tokens_per_s_per_gpu;
  s.chosen.memory_gib = f.predicted.memory_gib;
  s.chosen.capacity_gib = f.predicted.capacity_gib;
  s.placement = f.placement;
  return s;
}

std::string layout_file_text(const LayoutFile& file) {
  // One row of the map per line keeps the file readable and diffable.
  std::string text = to_json(file).dump(2);
  const std::string ids = std::string("\"") + kLayerIdsMarker + "\"";
  for (auto pos = text.find(ids); pos != std::string::npos; pos = text.find(ids)) {
    text.replace(pos, ids.size(), exports::int_row(file.model.moe_layer_ids));
  }
  if (file.placement) {
    const auto& rows = file.placement->physical_to_logical;
    std::string map = "[\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      map += "        " + exports::int_row(rows[i]) + (i + 1 < rows.size() ? ",\n" : "\n");
    }
    map += "      ]";
    const std::string marker = std::string("\"") + kMapMarker + "\"";
    text.replace(text.find(marker), marker.size(), map);
  }
  return text + "\n";
}

Result<LayoutFile> read_layout_file(const std::string& text, const std::string& source) {
  auto parsed = parse_json(text, source);
  if (!parsed) return parsed.error();
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return Error{source + ": expected a JSON object, got " + describe_json(j)};
  JsonReader r(j, source);
  auto format = r.string("format");
  if (!format) return format.error();
  if (*format != kLayoutFormat) {
    return r.error("format",
                   std::string("expected \"") + kLayoutFormat + "\", got \"" + *format + "\"");
  }
  auto version = r.integer("version", kLayoutVersion, kLayoutVersion);
  if (!version) return version.error();
  LayoutFile f;
  auto model = section(j, r, "model", "name, source, fingerprint and layer figures");
  if (!model) return model.error();
  auto m = read_model(*model, source);
  if (!m) return m.error();
  f.model = std::move(*m);
  auto cluster = section(j, r, "cluster", "name, source, fingerprint and device");
  if (!cluster) return cluster.error();
  auto c = read_cluster(*cluster, source);
  if (!c) return c.error();
  f.cluster = std::move(*c);
  auto plan = section(j, r, "plan", "source, rank and cost source");
  if (!plan) return plan.error();
  auto p = read_plan(*plan, source);
  if (!p) return p.error();
  f.plan = std::move(*p);
  auto work = section(j, r, "workload", "phase and tokens_per_gpu");
  if (!work) return work.error();
  auto w = read_workload(*work, source);
  if (!w) return w.error();
  f.workload = *w;
  auto layout = section(j, r, "layout",
                        "num_gpus, dp_size, ep_size, tp_size, dispatcher and "
                        "mapping");
  if (!layout) return layout.error();
  auto predicted = section(j, r, "predicted", "the layout's predicted costs");
  if (!predicted) return predicted.error();
  JsonReader lr(*layout, source, "layout.");
  auto gpus = lr.integer("num_gpus", 1, 1 << 20);
  if (!gpus) return gpus.error();
  auto shape = parse_layout_keys(*layout, source, "layout.", static_cast<int>(*gpus));
  if (!shape) return shape.error();
  f.layout = *shape;
  if (f.model.num_experts % f.layout.ep_size != 0) {
    return lr.error("ep_size", "expected a divisor of model.num_experts (" +
                                   std::to_string(f.model.num_experts) + ")");
  }
  auto pred = read_predicted(*predicted, source);
  if (!pred) return pred.error();
  f.predicted = std::move(*pred);
  if (r.has("placement")) {
    auto pl = read_placement(j.at("placement"), source, f);
    if (!pl) return pl.error();
    f.placement = std::move(*pl);
  }
  return f;
}

Result<ExportSpec> parse_layout_file(const std::string& text, const std::string& source) {
  auto file = read_layout_file(text, source);
  if (!file) return file.error();
  return spec_of(*file);
}

Result<ExportSpec> load_layout_file(const std::filesystem::path& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse_layout_file(*text, path.string());
}

}  // namespace moeplan::planner
