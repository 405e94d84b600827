// libFuzzer target: the cost database opened from an arbitrary file (plan/validate --costs FILE):
// the bytes are written to a scratch file, opened, migrated, read and queried as plan does.
#include "planner/costs/cost_db.hpp"
#include "planner/costs/measured_costs.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace moeplan;
  const auto path = fuzz::scratch_path(".db");
  fuzz::write_scratch(path, fuzz::as_string(data, size));
  {
    auto db = planner::CostDb::open(path.string(), false);
    if (db) {
      (void)(*db)->runs();
      (void)(*db)->integrity_ok();
      auto points = (*db)->points();
      if (points) {
        for (const auto& d : planner::point_devices(*points)) {
          (void)planner::derive_device_spec(*points, d, 1e9);
          (void)planner::derive_link_latency(*points, d);
        }
      }
      const auto& cluster = fuzz::bundled_cluster("1x-hgx-h200");
      auto m = planner::MeasuredCosts::load(**db, cluster);
      if (m) {
        (void)(*m)->gemm({64.0, 256.0, 128.0, DType::kBf16});
        (void)(*m)->grouped_gemm({{0.0, 3.0, 70.0}, 256.0, 128.0, DType::kBf16});
        (void)(*m)->elementwise({"silu_mul", 1e6, DType::kBf16});
        (void)(*m)->collective(
            {planner::CollectiveOp::kAllToAll, {{0, 1, 2, 3}}, 1e6, {}, DType::kBf16});
        (void)(*m)->misses();
      }
    }
  }
  fuzz::remove_scratch(path);
  return 0;
}
