// Reading a device's calibrated-roofline parameters.
#include "planner/costs/calibration.hpp"

#include <cmath>
#include <system_error>

#include "models/json_reader.hpp"
#include "models/resources.hpp"
#include "planner/costs/cost_source.hpp"

namespace moeplan::planner {

double EfficiencyFit::operator()(double m, double n, double k) const {
  if (!(m > 0.0) || !(n > 0.0) || !(k > 0.0)) return 0.0;
  return max_efficiency * m / (m + rows_half) * n / (n + cols_half) * k / (k + depth_half);
}

double CollectiveCalibration::seconds(double bytes, double bus_factor) const {
  if (!(bytes > 0.0)) return 0.0;
  return latency_s + bytes * bus_factor / bus_bandwidth *
                         (1.0 + std::pow(half_size_bytes / bytes, shape_exponent));
}

MoeCalibration::Groups MoeCalibration::groups(const std::vector<double>& rows,
                                              bool expected) const {
  Groups g;
  double last_m = -1.0, last_p = 0.0;  // a uniform load repeats one value: one exp for all
  for (const double m : rows) {
    if (!(m > 0.0)) continue;
    if (m != last_m) {
      last_m = m;
      last_p = group_occupancy(m, expected);
    }
    g.pairs += m;
    g.active += last_p;
    // Non-empty with probability p, then ceil(rows / tile_rows) row tiles of its m / p rows
    // (counts: m < 1 is one tile with probability m).
    g.row_tiles += last_p * std::ceil(m / last_p / tile_rows);
  }
  return g;
}

double MoeCalibration::output_tiles(const std::vector<double>& rows, double n,
                                    bool expected) const {
  return groups(rows, expected).row_tiles * std::ceil(n / tile_cols);
}

double NicCalibration::efficiency(double bytes) const {
  if (!(bytes > 0.0)) return 0.0;
  return max_efficiency / (1.0 + std::pow(half_size_bytes / bytes, shape_exponent));
}

double NicCalibration::seconds(double bytes, double nic_bandwidth) const {
  if (!(bytes > 0.0)) return 0.0;
  return latency_s + bytes / (efficiency(bytes) * nic_bandwidth);
}

const NicCalibration* Calibration::nic_curve(const std::string& mode, const std::string& phase,
                                             int nodes) const {
  const auto it = nic.find({mode, phase, nodes});
  return it == nic.end() ? nullptr : &it->second;
}

std::optional<double> Calibration::nic_efficiency(double bytes, int nodes, const std::string& mode,
                                                  const std::string& phase,
                                                  bool* extrapolated) const {
  if (extrapolated != nullptr) *extrapolated = false;
  if (nodes < 2) return std::nullopt;
  const NicCalibration* below = nullptr;
  const NicCalibration* above = nullptr;
  int n_below = 0, n_above = 0;
  for (const auto& [key, curve] : nic) {
    const auto& [m, p, n] = key;
    if (m != mode || p != phase) continue;
    if (n <= nodes && n > n_below) {
      below = &curve;
      n_below = n;
    }
    if (n >= nodes && (above == nullptr || n < n_above)) {
      above = &curve;
      n_above = n;
    }
  }
  if (below == nullptr && above == nullptr) return std::nullopt;
  if (above == nullptr) {  // beyond the largest fitted node count: its curve holds
    if (extrapolated != nullptr) *extrapolated = true;
    return below->efficiency(bytes);
  }
  if (below == nullptr) return above->efficiency(bytes);  // below the smallest fitted count
  if (n_below == n_above) return below->efficiency(bytes);
  const double f = std::log(static_cast<double>(nodes) / n_below) /
                   std::log(static_cast<double>(n_above) / n_below);
  return (1.0 - f) * below->efficiency(bytes) + f * above->efficiency(bytes);
}

double nccl_bus_factor(const std::string& op, int g) {
  const double gd = static_cast<double>(g);
  if (g <= 1) return 0.0;
  return op == "all_reduce" ? 2.0 * (gd - 1.0) / gd : (gd - 1.0) / gd;
}

double Calibration::peak_flops(const std::string& table_dtype) const {
  return table_dtype == "fp8" || table_dtype == "fp8_block" ? peak_fp8_flops : peak_bf16_flops;
}

namespace {

/// The measured sizes a curve was fitted on ("sizes_bytes": [min, max]), when the file has them.
template <typename Curve>
void read_sizes(const nlohmann::json& body, Curve& curve) {
  const auto it = body.find("sizes_bytes");
  if (it != body.end() && it->is_array() && it->size() == 2 && (*it)[0].is_number() &&
      (*it)[1].is_number()) {
    curve.min_bytes = (*it)[0].get<double>();
    curve.max_bytes = (*it)[1].get<double>();
  }
}

// Parameters are positive and finite. Exponents and half points may be tiny, and a half size
// huge: a fit where the size term is flat (b200_sxm all_gather/8: S_h ≈ 2e36 with a small
// exponent) is still a finite curve.
constexpr double kLo = 1e-300;
constexpr double kHi = 1e300;

const nlohmann::json* object_at(const nlohmann::json& j, const std::string& key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it != j.end() && it->is_object() ? &*it : nullptr;
}

Result<EfficiencyFit> read_efficiency(const JsonReader& r) {
  EfficiencyFit e;
  for (auto [key, dst] :
       {std::pair{"gemm_max_efficiency", &e.max_efficiency}, std::pair{"rows_half", &e.rows_half},
        std::pair{"cols_half", &e.cols_half}, std::pair{"depth_half", &e.depth_half}}) {
    auto v = r.number(key, kLo, kHi);
    if (!v) return v.error();
    *dst = *v;
  }
  return e;
}

/// Reads `<section>.<dtype>.parameters` objects of a section (gemm, moe_grouped_ffn).
template <typename T, typename Fn>
Status read_dtype_section(const nlohmann::json& root, const std::string& source,
                          const std::string& section, std::map<std::string, T>& out, Fn read) {
  const nlohmann::json* s = object_at(root, section);
  if (s == nullptr) return Status::Ok();  // a device may lack a table: that part stays plain
  for (const auto& [dtype, body] : s->items()) {
    const nlohmann::json* params = object_at(body, "parameters");
    if (params == nullptr) {
      return Error{source + ": key '" + section + "." + dtype +
                   ".parameters': expected an object of fitted parameters"};
    }
    const JsonReader r(*params, source, section + "." + dtype + ".parameters.");
    auto v = read(r);
    if (!v) return v.error();
    out[dtype] = *v;
  }
  return Status::Ok();
}

Result<NicCalibration> read_nic(const nlohmann::json& params, const std::string& source,
                                const std::string& prefix) {
  const JsonReader r(params, source, prefix);
  NicCalibration c;
  for (auto [key, dst] :
       {std::pair{"latency_s", &c.latency_s}, std::pair{"max_efficiency", &c.max_efficiency},
        std::pair{"half_size_bytes", &c.half_size_bytes},
        std::pair{"shape_exponent", &c.shape_exponent}}) {
    // a latency may fit to exactly 0; the rest are positive
    auto v = r.number(key, key == std::string("latency_s") ? 0.0 : kLo, kHi);
    if (!v) return v.error();
    *dst = *v;
  }
  return c;
}

/// The `collectives_internode` section: per-GPU NIC bandwidth and curves "MODE/PHASE/NODES".
Status read_internode(const nlohmann::json& root, const std::string& source, Calibration& c) {
  const nlohmann::json* s = object_at(root, "collectives_internode");
  if (s == nullptr || s->empty()) return Status::Ok();  // no multi-node tables for this device
  const JsonReader top(*s, source, "collectives_internode.");
  auto bw = top.number("nic_bandwidth_bytes_per_s", 1.0, kHi);
  if (!bw) return bw.error();
  c.nic_bandwidth = *bw;
  if (const nlohmann::json* tables = object_at(*s, "tables")) {
    for (const auto& [mode, t] : tables->items()) {
      const JsonReader r(t, source, "collectives_internode.tables." + mode + ".");
      auto value = r.string_or("value", "");
      if (!value) return value.error();
      if (!c.nic_provenance.empty()) c.nic_provenance += "; ";
      c.nic_provenance += mode + " " + *value;
    }
  }
  const nlohmann::json* curves = object_at(*s, "curves");
  if (curves == nullptr) {
    return Error{source +
                 ": key 'collectives_internode.curves': expected an object of MODE/PHASE/NODES "
                 "curves"};
  }
  for (const auto& [name, body] : curves->items()) {
    const std::string prefix = "collectives_internode.curves." + name + ".";
    const auto a = name.find('/');
    const auto b = a == std::string::npos ? a : name.find('/', a + 1);
    int nodes = 0;
    if (b != std::string::npos) {
      try {
        std::size_t used = 0;
        nodes = std::stoi(name.substr(b + 1), &used);
        if (used != name.size() - b - 1) nodes = 0;
      } catch (const std::exception&) {
        nodes = 0;
      }
    }
    const std::string mode = a == std::string::npos ? "" : name.substr(0, a);
    const std::string phase = b == std::string::npos ? "" : name.substr(a + 1, b - a - 1);
    if (nodes < 2 || nodes > 4096 || (mode != "normal" && mode != "ll") ||
        (phase != "dispatch" && phase != "combine")) {
      return Error{source + ": key 'collectives_internode.curves." + name +
                   "': expected MODE/PHASE/NODES such as normal/dispatch/2 (mode normal or ll, "
                   "phase dispatch or combine, 2 nodes or more)"};
    }
    const nlohmann::json* params = object_at(body, "parameters");
    if (params == nullptr) {
      return Error{source + ": key '" + prefix + "parameters': expected an object"};
    }
    auto full = read_nic(*params, source, prefix + "parameters.");
    if (!full) return full.error();
    read_sizes(body, *full);
    c.nic[{mode, phase, nodes}] = *full;
    if (const nlohmann::json* h = object_at(body, "held_out_fit_parameters")) {
      auto held = read_nic(*h, source, prefix + "held_out_fit_parameters.");
      if (!held) return held.error();
      held->min_bytes = full->min_bytes;
      held->max_bytes = full->max_bytes;
      c.nic_held_out[{mode, phase, nodes}] = *held;
    }
  }
  return Status::Ok();
}

Result<CollectiveCalibration> read_collective(const nlohmann::json& params,
                                              const std::string& source,
                                              const std::string& prefix) {
  const JsonReader r(params, source, prefix);
  CollectiveCalibration c;
  for (auto [key, dst] : {std::pair{"latency_s", &c.latency_s},
                          std::pair{"bus_bandwidth_bytes_per_s", &c.bus_bandwidth},
                          std::pair{"half_size_bytes", &c.half_size_bytes},
                          std::pair{"shape_exponent", &c.shape_exponent}}) {
    auto v = r.number(key, kLo, kHi);
    if (!v) return v.error();
    *dst = *v;
  }
  return c;
}

}  // namespace

std::filesystem::path calibration_path(const std::string& device) {
  return resource_dir() / "devices" / "calibration" / (device + ".json");
}

Result<Calibration> load_calibration_file(const std::filesystem::path& path) {
  auto j = load_json_file(path);
  if (!j) return j.error();
  const std::string source = path.string();
  if (!j->is_object()) return Error{source + ": expected a JSON object of calibrated parameters"};
  const JsonReader top(*j, source);
  Calibration c;
  c.file = source;
  auto device = top.string("device");
  if (!device) return device.error();
  c.device = *device;
  auto system = top.string_or("system", "");
  if (!system) return system.error();
  c.system = *system;
  if (const nlohmann::json* p = object_at(*j, "provenance")) {
    const JsonReader r(*p, source, "provenance.");
    auto package = r.string_or("package", "");
    auto framework = r.string_or("framework", "");
    auto version = r.string_or("version", "");
    if (!package) return package.error();
    if (!framework) return framework.error();
    if (!version) return version.error();
    c.provenance = *package;
    if (!framework->empty()) c.provenance += ", " + *framework + " " + *version;
  }
  const nlohmann::json* figures = object_at(*j, "device_figures");
  if (figures == nullptr) {
    return Error{source +
                 ": key 'device_figures': expected the device figures the parameters were "
                 "fitted against (peak_bf16_flops, peak_fp8_flops, hbm_bandwidth_bytes_per_s)"};
  }
  {
    const JsonReader r(*figures, source, "device_figures.");
    for (auto [key, dst] : {std::pair{"peak_bf16_flops", &c.peak_bf16_flops},
                            std::pair{"peak_fp8_flops", &c.peak_fp8_flops},
                            std::pair{"hbm_bandwidth_bytes_per_s", &c.hbm_bandwidth}}) {
      auto v = r.number(key, 1.0, kHi);
      if (!v) return v.error();
      *dst = *v;
    }
  }
  MOEPLAN_TRY_STATUS(read_dtype_section(
      *j, source, "gemm", c.gemm, [](const JsonReader& r) -> Result<GemmCalibration> {
        GemmCalibration g;
        auto e = read_efficiency(r);
        if (!e) return e.error();
        g.efficiency = *e;
        for (auto [key, dst] :
             {std::pair{"hbm_efficiency", &g.hbm_efficiency}, std::pair{"fixed_s", &g.fixed_s},
              std::pair{"blend_exponent", &g.blend_exponent}}) {
          auto v = r.number(key, kLo, kHi);
          if (!v) return v.error();
          *dst = *v;
        }
        return g;
      }));
  MOEPLAN_TRY_STATUS(read_dtype_section(
      *j, source, "moe_grouped_ffn", c.moe, [](const JsonReader& r) -> Result<MoeCalibration> {
        MoeCalibration m;
        auto e = read_efficiency(r);
        if (!e) return e.error();
        m.efficiency = *e;
        for (auto [key, dst] :
             {std::pair{"hbm_efficiency", &m.hbm_efficiency},
              std::pair{"per_tile_s", &m.per_tile_s}, std::pair{"fixed_s", &m.fixed_s},
              std::pair{"fixed_per_hidden_s", &m.fixed_per_hidden_s},
              std::pair{"permute_factor", &m.permute_factor},
              std::pair{"blend_exponent", &m.blend_exponent}}) {
          auto v = r.number(key, kLo, kHi);
          if (!v) return v.error();
          *dst = *v;
        }
        // The tile the per-tile cost counts: whole rows and columns, as the kernels tile.
        for (auto [key, dst] :
             {std::pair{"tile_rows", &m.tile_rows}, std::pair{"tile_cols", &m.tile_cols}}) {
          auto v = r.integer(key, 1, 65536);
          if (!v) return v.error();
          *dst = static_cast<double>(*v);
        }
        return m;
      }));
  if (const nlohmann::json* nccl = object_at(*j, "collectives_nccl")) {
    if (const nlohmann::json* ops = object_at(*nccl, "ops")) {
      for (const auto& [name, body] : ops->items()) {
        const std::string prefix = "collectives_nccl.ops." + name + ".";
        const auto slash = name.find('/');
        int g = 0;
        if (slash != std::string::npos) {
          try {
            g = std::stoi(name.substr(slash + 1));
          } catch (const std::exception&) {
            g = 0;
          }
        }
        if (slash == std::string::npos || g < 2 || g > 1024) {
          return Error{source + ": key 'collectives_nccl.ops." + name +
                       "': expected OP/GPUS such as all_reduce/8"};
        }
        const std::string op = name.substr(0, slash);
        const nlohmann::json* params = object_at(body, "parameters");
        if (params == nullptr) {
          return Error{source + ": key '" + prefix + "parameters': expected an object"};
        }
        auto full = read_collective(*params, source, prefix + "parameters.");
        if (!full) return full.error();
        read_sizes(body, *full);
        c.collectives[{op, g}] = *full;
        if (const nlohmann::json* h = object_at(body, "held_out_fit_parameters")) {
          auto held = read_collective(*h, source, prefix + "held_out_fit_parameters.");
          if (!held) return held.error();
          held->min_bytes = full->min_bytes;
          held->max_bytes = full->max_bytes;
          c.collectives_held_out[{op, g}] = *held;
        }
      }
    }
  }
  if (const nlohmann::json* ep = object_at(*j, "ep_kernels_deepep")) {
    const JsonReader r(*ep, source, "ep_kernels_deepep.");
    auto src = r.string_or("source", "");
    if (!src) return src.error();
    c.ep_kernels_provenance = *src;
    const nlohmann::json* kernels = object_at(*ep, "kernels");
    if (kernels == nullptr) {
      return Error{source + ": key 'ep_kernels_deepep.kernels': expected an object of kernels"};
    }
    for (const char* name : {"normal_dispatch", "normal_combine", "ll_dispatch", "ll_combine"}) {
      const nlohmann::json* body = object_at(*kernels, name);
      if (body == nullptr) continue;
      const JsonReader k(*body, source, std::string("ep_kernels_deepep.kernels.") + name + ".");
      EpKernelCalibration e;
      auto fixed = k.number("fixed_s", 0.0, 1.0);
      if (!fixed) return fixed.error();
      auto per_node = k.number_or("per_node_s", 0.0, 0.0, 1.0);
      if (!per_node) return per_node.error();
      auto eff = k.number("nic_efficiency", 1e-3, 1.0);
      if (!eff) return eff.error();
      e.fixed_s = *fixed;
      e.per_node_s = *per_node;
      e.nic_efficiency = *eff;
      c.ep_kernels[name] = e;
    }
  }
  MOEPLAN_TRY_STATUS(read_internode(*j, source, c));
  return c;
}

Result<std::optional<Calibration>> load_calibration(const std::string& device) {
  if (device.empty() || device.find('/') != std::string::npos ||
      device.find(':') != std::string::npos) {
    return std::optional<Calibration>();  // a derived or local device: nothing bundled
  }
  const auto path = calibration_path(device);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::optional<Calibration>();
  auto c = load_calibration_file(path);
  if (!c) return c.error();
  if (c->device != device) {
    return Error{path.string() + ": key 'device': '" + c->device + "', expected '" + device + "'"};
  }
  return std::optional<Calibration>(std::move(*c));
}

}  // namespace moeplan::planner
