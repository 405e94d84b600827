// Bundled device specs carry FACTS.md's figures; bad device files are rejected clearly.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "planner/topology/device_spec.hpp"

namespace moeplan::planner {
namespace test_device_spec {
namespace {

TEST(DeviceSpec, BundledDevices) {
  EXPECT_EQ(bundled_device_names(), (std::vector<std::string>{"b200", "b200_sxm", "h100", "h200"}));
  auto h200 = load_device("h200");
  ASSERT_TRUE(h200.ok()) << h200.error().message;
  EXPECT_DOUBLE_EQ(h200->peak_bf16_flops, 989e12);
  EXPECT_DOUBLE_EQ(h200->peak_fp8_flops, 1979e12);
  EXPECT_DOUBLE_EQ(h200->hbm_bytes, 141e9);
  EXPECT_DOUBLE_EQ(h200->hbm_bandwidth, 4.8e12);
  EXPECT_DOUBLE_EQ(h200->nvlink_bandwidth, 450e9);
  auto h100 = load_device("h100");
  ASSERT_TRUE(h100.ok());
  EXPECT_DOUBLE_EQ(h100->hbm_bytes, 80e9);
  EXPECT_DOUBLE_EQ(h100->hbm_bandwidth, 3.35e12);
  auto b200 = load_device("b200");
  ASSERT_TRUE(b200.ok());
  EXPECT_DOUBLE_EQ(b200->nvlink_bandwidth, 900e9);
}

TEST(DeviceSpec, UnknownNameAndBadFile) {
  auto unknown = load_device("tpu");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("unknown device 'tpu'"), std::string::npos);

  const auto path = std::filesystem::temp_directory_path() / "moeplan_bad_device.json";
  std::ofstream(path) << R"({"name": "x", "peak_bf16_tflops": -1, "hbm_gb": 1,
                            "hbm_bandwidth_gb_per_s": 1})";
  auto bad = load_device(path.string());
  std::filesystem::remove(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("key 'peak_bf16_tflops': expected a number"),
            std::string::npos)
      << bad.error().message;
}

}  // namespace
}  // namespace test_device_spec
}  // namespace moeplan::planner
