// Placement files: writing and validated reading.
#include "planner/placement/placement_file.hpp"

#include "models/file_io.hpp"
#include "models/index.hpp"
#include "models/json_reader.hpp"

namespace moeplan::planner {

PlacementFile placement_file_of(const Placement& placement, int gpus_per_node,
                                const std::string& load_source) {
  PlacementFile f;
  f.result.placement = placement;
  fill_logical_maps(f.result);
  const int ep = placement.ep_size;
  f.config.num_gpus = ep;
  f.config.num_nodes =
      gpus_per_node > 0 && ep >= gpus_per_node && ep % gpus_per_node == 0 ? ep / gpus_per_node : 1;
  f.config.num_slots = placement.num_slots;
  f.config.num_groups = 1;
  for (int l = 0; l < placement.num_layers(); ++l) f.layer_ids.push_back(l);
  f.load_source = load_source;
  return f;
}

nlohmann::json placement_to_json(const PlacementFile& f) {
  const auto& p = f.result.placement;
  nlohmann::json j;
  j["format"] = kPlacementFormat;
  j["version"] = kPlacementVersion;
  j["policy"] = p.policy;
  j["load"] = f.load_source;
  j["num_experts"] = p.num_experts;
  j["num_gpus"] = f.config.num_gpus;
  j["num_nodes"] = f.config.num_nodes;
  j["num_slots"] = p.num_slots;
  j["num_groups"] = f.config.num_groups;
  j["layer_ids"] = f.layer_ids;
  j["physical_to_logical_map"] = p.physical_to_logical;
  j["logical_to_physical_map"] = f.result.logical_to_physical;
  j["logical_count"] = f.result.logical_count;
  return j;
}

Status write_placement_file(const std::filesystem::path& path, const PlacementFile& file) {
  return write_file_atomic(path, placement_to_json(file).dump() + "\n");
}

Result<PlacementFile> parse_placement_file(const std::string& text, const std::string& source) {
  auto j = parse_json(text, source);
  if (!j) return j.error();
  if (!j->is_object()) return Error{source + ": expected a JSON object, got " + describe_json(*j)};
  JsonReader r(*j, source);
  auto format = r.string("format");
  if (!format) return format.error();
  if (*format != kPlacementFormat) {
    return r.error("format",
                   std::string("expected \"") + kPlacementFormat + "\", got \"" + *format + "\"");
  }
  auto version = r.integer("version", kPlacementVersion, kPlacementVersion);
  if (!version) return version.error();
  PlacementFile f;
  auto policy = r.string("policy");
  if (!policy) return policy.error();
  auto load = r.string_or("load", "");
  if (!load) return load.error();
  auto experts = r.integer("num_experts", 1, 1 << 20);
  if (!experts) return experts.error();
  auto gpus = r.integer("num_gpus", 1, 1 << 20);
  if (!gpus) return gpus.error();
  auto nodes = r.integer("num_nodes", 1, *gpus);
  if (!nodes) return nodes.error();
  auto slots = r.integer("num_slots", *experts, 1 << 24);
  if (!slots) return slots.error();
  auto groups = r.integer("num_groups", 1, *experts);
  if (!groups) return groups.error();
  f.load_source = *load;
  f.config.num_gpus = static_cast<int>(*gpus);
  f.config.num_nodes = static_cast<int>(*nodes);
  f.config.num_slots = static_cast<int>(*slots);
  f.config.num_groups = static_cast<int>(*groups);
  if (*gpus % *nodes != 0) return r.error("num_nodes", "expected a divisor of num_gpus");
  auto& p = f.result.placement;
  p.policy = *policy;
  p.num_experts = static_cast<int>(*experts);
  p.ep_size = static_cast<int>(*gpus);
  p.num_slots = static_cast<int>(*slots);

  auto int_matrix = [&](const std::string& key, std::vector<std::vector<int>>& out) -> Status {
    if (!r.has(key) || !j->at(key).is_array()) {
      return r.error(key, "expected an array of rows of integers");
    }
    for (const auto& row : j->at(key)) {
      if (!row.is_array()) return r.error(key, "expected rows, got " + describe_json(row));
      std::vector<int> v;
      for (const auto& x : row) {
        if (!x.is_number_integer() || x.get<std::int64_t>() < -1 ||
            x.get<std::int64_t>() > (1 << 24)) {
          return r.error(key, "expected integers, got " + describe_json(x));
        }
        v.push_back(x.get<int>());
      }
      out.push_back(std::move(v));
    }
    return Status::Ok();
  };
  MOEPLAN_TRY_STATUS(int_matrix("physical_to_logical_map", p.physical_to_logical));
  if (auto s = p.validate(); !s.ok()) {
    return r.error("physical_to_logical_map", s.error().message);
  }
  f.layer_ids.clear();
  if (r.has("layer_ids")) {
    if (!j->at("layer_ids").is_array()) return r.error("layer_ids", "expected an array");
    for (const auto& x : j->at("layer_ids")) {
      if (!x.is_number_integer() || x.get<std::int64_t>() < 0 || x.get<std::int64_t>() > 1 << 20) {
        return r.error("layer_ids", "expected non-negative integers, got " + describe_json(x));
      }
      f.layer_ids.push_back(x.get<int>());
    }
    if (static_cast<int>(f.layer_ids.size()) != p.num_layers()) {
      return r.error("layer_ids", "expected " + std::to_string(p.num_layers()) +
                                      " entries (one per layer), got " +
                                      std::to_string(f.layer_ids.size()));
    }
  } else {
    for (int l = 0; l < p.num_layers(); ++l) f.layer_ids.push_back(l);
  }
  // The companion maps must agree with the physical map.
  PlacementResult expect;
  expect.placement = p;
  fill_logical_maps(expect);
  MOEPLAN_TRY_STATUS(int_matrix("logical_count", f.result.logical_count));
  if (f.result.logical_count != expect.logical_count) {
    return r.error("logical_count", "expected the replica counts of physical_to_logical_map");
  }
  const auto& l2p =
      j->contains("logical_to_physical_map") ? j->at("logical_to_physical_map") : nlohmann::json();
  if (!l2p.is_array() || static_cast<int>(l2p.size()) != p.num_layers()) {
    return r.error("logical_to_physical_map", "expected [layers][experts][replicas] slots");
  }
  for (int l = 0; l < p.num_layers(); ++l) {
    const auto& layer = l2p[uz(l)];
    if (!layer.is_array() || static_cast<int>(layer.size()) != p.num_experts) {
      return r.error("logical_to_physical_map",
                     "layer " + std::to_string(l) + ": expected one row per expert");
    }
    std::vector<std::vector<int>> rows;
    std::vector<char> seen(uz(p.num_slots), 0);
    for (int e = 0; e < p.num_experts; ++e) {
      const auto& row = layer[uz(e)];
      std::vector<int> slots_of;
      if (!row.is_array()) {
        return r.error("logical_to_physical_map", "layer " + std::to_string(l) + ", expert " +
                                                      std::to_string(e) + ": expected an array");
      }
      for (const auto& x : row) {
        if (!x.is_number_integer()) {
          return r.error("logical_to_physical_map", "expected integers, got " + describe_json(x));
        }
        const auto s = x.get<std::int64_t>();
        if (s == -1) continue;
        if (s < 0 || s >= p.num_slots ||
            p.physical_to_logical[uz(l)][static_cast<std::size_t>(s)] != e ||
            seen[static_cast<std::size_t>(s)]++ != 0) {
          return r.error("logical_to_physical_map",
                         "layer " + std::to_string(l) + ", expert " + std::to_string(e) +
                             ": slot " + std::to_string(s) +
                             " does not hold this expert or is named twice");
        }
        slots_of.push_back(static_cast<int>(s));
      }
      if (static_cast<int>(slots_of.size()) != expect.logical_count[uz(l)][uz(e)]) {
        return r.error("logical_to_physical_map", "layer " + std::to_string(l) + ", expert " +
                                                      std::to_string(e) +
                                                      ": expected every replica's slot once");
      }
      rows.push_back(row.get<std::vector<int>>());
    }
    f.result.logical_to_physical.push_back(std::move(rows));
  }
  return f;
}

Result<PlacementFile> load_placement_file(const std::filesystem::path& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse_placement_file(*text, path.string());
}

}  // namespace moeplan::planner
