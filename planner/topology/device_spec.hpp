// Accelerator specifications (resources/devices/NAME.json): peak FLOP/s, HBM capacity and
// bandwidth, link bandwidths. The roofline cost source and the memory check read them.
#pragma once

#include <string>
#include <vector>

#include "models/result.hpp"

namespace moeplan::planner {

/// One accelerator type. Rates are per second; bandwidths are bytes per second per direction.
struct DeviceSpec {
  std::string name;              ///< "h200"
  std::string display_name;      ///< "NVIDIA H200 SXM"
  double peak_bf16_flops = 0.0;  ///< dense, fp32 accumulate
  double peak_fp8_flops = 0.0;   ///< dense
  double peak_fp32_flops = 0.0;  ///< non-tensor-core fp32
  double hbm_bytes = 0.0;
  double hbm_bandwidth = 0.0;
  double nvlink_bandwidth = 0.0;
  double nic_bandwidth = 0.0;
};

/// Reads and validates a device JSON file.
Result<DeviceSpec> load_device_file(const std::string& path);

/// Loads a bundled device by name ("h200") or a device JSON by path.
Result<DeviceSpec> load_device(const std::string& name_or_path);

/// Names of the bundled devices, sorted.
std::vector<std::string> bundled_device_names();

}  // namespace moeplan::planner
