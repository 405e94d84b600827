// Accelerator specifications.
#include "planner/topology/device_spec.hpp"

#include <algorithm>
#include <filesystem>

#include "models/json_reader.hpp"
#include "models/resources.hpp"

namespace moeplan::planner {

namespace fs = std::filesystem;

Result<DeviceSpec> load_device_file(const std::string& path) {
  auto j = load_json_file(path);
  if (!j) return j.error();
  if (!j->is_object()) return Error{path + ": expected a JSON object describing a device"};
  const JsonReader r(*j, path);
  DeviceSpec d;
  auto name = r.string("name");
  if (!name) return name.error();
  d.name = *name;
  auto display = r.string_or("display_name", d.name);
  if (!display) return display.error();
  d.display_name = *display;
  struct Field {
    const char* key;
    double scale;
    double* out;
    bool required;
  };
  const Field fields[] = {
      {"peak_bf16_tflops", 1e12, &d.peak_bf16_flops, true},
      {"peak_fp8_tflops", 1e12, &d.peak_fp8_flops, false},
      {"peak_fp32_tflops", 1e12, &d.peak_fp32_flops, false},
      {"hbm_gb", 1e9, &d.hbm_bytes, true},
      {"hbm_bandwidth_gb_per_s", 1e9, &d.hbm_bandwidth, true},
      {"nvlink_bandwidth_gb_per_s", 1e9, &d.nvlink_bandwidth, false},
      {"nic_bandwidth_gb_per_s", 1e9, &d.nic_bandwidth, false},
  };
  for (const auto& f : fields) {
    auto v = f.required ? r.number(f.key, 1e-9, 1e9) : r.number_or(f.key, 0.0, 0.0, 1e9);
    if (!v) return v.error();
    *f.out = *v * f.scale;
  }
  return d;
}

Result<DeviceSpec> load_device(const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos ||
      fs::path(name_or_path).extension() == ".json") {
    return load_device_file(name_or_path);
  }
  const fs::path p = resource_dir() / "devices" / (name_or_path + ".json");
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) {
    std::string known;
    for (const auto& n : bundled_device_names()) known += (known.empty() ? "" : ", ") + n;
    return Error{"unknown device '" + name_or_path + "': expected one of " + known +
                 " or a path to a device JSON"};
  }
  return load_device_file(p.string());
}

std::vector<std::string> bundled_device_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(resource_dir() / "devices", ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().extension() == ".json") names.push_back(it->path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace moeplan::planner
