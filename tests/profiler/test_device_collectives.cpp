// Collectives measured on a GPU communicator's device memory (NCCL in a CUDA profile), checked
// here without a GPU: a stand-in device communicator keeps its "device memory" in host memory and
// runs each collective only when it is waited for, as a CUDA stream runs enqueued work.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <thread>

#include "kernels/communicator.hpp"
#include "models/registry.hpp"
#include "planner/costs/cost_db.hpp"
#include "profiler/harness.hpp"
#include "profiler/ops.hpp"
#include "profiler/profile.hpp"
#include "profiler/sweep.hpp"
#include "tests/profiler/recording_backend.hpp"

namespace moeplan::profiler {
namespace {

// The device side of QueuedDeviceComm: "device memory" in host memory; device collectives are
// queued and run, in order, over the group's host communicator at synchronize() (and before a
// copy, which waits for them), each after `delay_s` of "device time".
class QueuedDevice final : public kernels::DeviceCollectives {
 public:
  QueuedDevice(kernels::Communicator& host, double delay_s) : host_(host), delay_s_(delay_s) {}

  std::shared_ptr<void> allocate(std::size_t bytes) override {
    ++allocations;
    return {::operator new(std::max<std::size_t>(bytes, 1)), [](void* p) { ::operator delete(p); }};
  }
  void upload(void* device, const void* host, std::size_t bytes) override {
    synchronize();
    std::memcpy(device, host, bytes);
  }
  void download(void* host, const void* device, std::size_t bytes) override {
    synchronize();
    std::memcpy(host, device, bytes);
  }
  void all_reduce_sum(float* data, std::size_t count) override {
    queue_.push_back([=, this] { host_.all_reduce_sum({data, count}); });
  }
  void all_gather(const void* send, std::size_t bytes, void* recv) override {
    queue_.push_back([=, this] { host_.all_gather(send, bytes, recv); });
  }
  void all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                    std::span<const std::size_t> recv_bytes,
                    std::span<const std::size_t> recv_offsets) override {
    queue_.push_back(
        [=, this] { host_.all_gather_v(send, send_bytes, recv, recv_bytes, recv_offsets); });
  }
  void all_to_all(const void* send, std::size_t bytes_per_rank, void* recv) override {
    queue_.push_back([=, this] { host_.all_to_all(send, bytes_per_rank, recv); });
  }
  void all_to_all_v(const void* send, std::span<const std::size_t> send_bytes,
                    std::span<const std::size_t> send_offsets, void* recv,
                    std::span<const std::size_t> recv_bytes,
                    std::span<const std::size_t> recv_offsets) override {
    queue_.push_back([=, this] {
      host_.all_to_all_v(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets);
    });
  }
  void reduce_scatter_sum(const float* send, float* recv, std::size_t count) override {
    queue_.push_back([=, this] {
      host_.reduce_scatter_sum({send, count * static_cast<std::size_t>(host_.size())},
                               {recv, count});
    });
  }
  void synchronize() override {
    for (auto& f : queue_) {
      if (delay_s_ > 0.0) std::this_thread::sleep_for(std::chrono::duration<double>(delay_s_));
      f();
      ++collectives_run;
    }
    queue_.clear();
  }

  int allocations = 0;
  long collectives_run = 0;

 private:
  kernels::Communicator& host_;
  double delay_s_;
  std::vector<std::function<void()>> queue_;
};

// A stand-in GPU communicator: the host communicator of a group for its host collectives, and
// QueuedDevice for its device ones.
class QueuedDeviceComm final : public kernels::Communicator {
 public:
  explicit QueuedDeviceComm(std::unique_ptr<kernels::Communicator> host, double delay_s = 0.0)
      : host_(std::move(host)), delay_s_(delay_s), device_(*host_, delay_s) {}

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string kind() const override { return "queued-device"; }
  void barrier() override { host_->barrier(); }
  void all_reduce_sum(std::span<float> d) override { host_->all_reduce_sum(d); }
  void all_reduce_max(std::span<std::int64_t> d) override { host_->all_reduce_max(d); }
  void all_gather(const void* s, std::size_t b, void* r) override { host_->all_gather(s, b, r); }
  void all_gather_v(const void* s, std::size_t sb, void* r, std::span<const std::size_t> rb,
                    std::span<const std::size_t> ro) override {
    host_->all_gather_v(s, sb, r, rb, ro);
  }
  void all_to_all(const void* s, std::size_t b, void* r) override { host_->all_to_all(s, b, r); }
  void all_to_all_v(const void* s, std::span<const std::size_t> sb, std::span<const std::size_t> so,
                    void* r, std::span<const std::size_t> rb,
                    std::span<const std::size_t> ro) override {
    host_->all_to_all_v(s, sb, so, r, rb, ro);
  }
  void reduce_scatter_sum(std::span<const float> s, std::span<float> r) override {
    host_->reduce_scatter_sum(s, r);
  }
  std::unique_ptr<kernels::Communicator> split(int color, int key) override {
    return std::make_unique<QueuedDeviceComm>(host_->split(color, key), delay_s_);
  }
  kernels::DeviceCollectives* device_collectives() override { return &device_; }
  QueuedDevice& device() { return device_; }

 private:
  std::unique_ptr<kernels::Communicator> host_;
  double delay_s_;
  QueuedDevice device_;
};

SweepSpec tiny_sweep(int world) {
  auto model = models::load_model("qwen1.5-moe-a2.7b");
  EXPECT_TRUE(model.ok());
  SweepRequest r;
  r.scale = 16;
  r.world_size = world;
  r.dtypes = {DType::kBf16};
  r.quick = true;
  r.max_tokens = 8;
  r.max_bytes = 4096;
  auto s = make_sweep(*model, r);
  EXPECT_TRUE(s.ok()) << s.error().message;
  s->cold_bytes = std::size_t{4} << 20;
  return *s;
}

HarnessOptions fast() {
  HarnessOptions o;
  o.warmup = 1;
  o.min_reps = 2;
  o.max_reps = 2;
  o.min_sample_s = 0.0;
  return o;
}

std::string fresh_db(const std::string& name) {
  const auto path = (std::filesystem::temp_directory_path() / name).string();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return path;
}

// Every collective op on device memory: its device case (allocated there, not the host case),
// right on 2 ranks, and a fault on one rank fails both. The results exist only once the queue is
// waited for, so a check that read them early would fail too.
TEST(DeviceCollectives, EveryCollectiveVerifiesOnDeviceMemoryAndCatchesAFault) {
  const SweepSpec s = tiny_sweep(2);
  const auto backend = kernels::make_cpu_backend();
  int checked = 0;
  for (const auto& table : all_ops()) {
    if (!table.collective) continue;
    const auto pts = table.sweep(s);
    ASSERT_FALSE(pts.empty()) << table.name;
    for (const bool fault : {false, true}) {
      std::atomic<int> incorrect{0}, passed{0}, on_device{0};
      kernels::run_in_process(2, [&](kernels::Communicator& world) {
        QueuedDeviceComm dev(world.split(0, world.rank()));
        auto c = table.init(pts.back(), s, &dev, *backend);
        ASSERT_TRUE(c.ok()) << c.error().message;
        if (dev.device().allocations > 0) ++on_device;
        if (fault && world.rank() == 1) (*c)->inject_fault();
        const Measurement m = measure(**c, &world, fast());
        (m.disposition == planner::Disposition::kIncorrect ? incorrect : passed)++;
        EXPECT_GT(dev.device().collectives_run, 0) << table.name;
      });
      EXPECT_EQ(on_device.load(), 2) << table.name;
      EXPECT_EQ(fault ? incorrect.load() : passed.load(), 2) << table.name;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

// A sample's clock stops after the collectives it enqueued have run (settle()), as nccl-tests
// synchronizes inside its timed loop: 3 ms of "device time" per collective shows in the median.
TEST(DeviceCollectives, ASampleWaitsForItsCollectives) {
  constexpr double kDelay = 3e-3;
  const SweepSpec s = tiny_sweep(2);
  const auto backend = kernels::make_cpu_backend();
  const OpTable table = all_reduce_op();
  const auto pts = table.sweep(s);
  ASSERT_FALSE(pts.empty());
  std::atomic<int> slow_enough{0};
  kernels::run_in_process(2, [&](kernels::Communicator& world) {
    QueuedDeviceComm dev(world.split(0, world.rank()), kDelay);
    auto c = table.init(pts.front(), s, &dev, *backend);
    ASSERT_TRUE(c.ok());
    HarnessOptions h = fast();
    h.min_sample_s = 0.0;
    const Measurement m = measure(**c, &world, h);
    ASSERT_EQ(m.disposition, planner::Disposition::kPassed) << m.detail;
    if (m.stats.median_s >= kDelay) ++slow_enough;
  });
  EXPECT_EQ(slow_enough.load(), 2);
}

// run_profile with a collectives communicator: every collective group is split from it and its
// points are measured on its device memory; the run records both communicators. A communicator
// of other ranks is refused.
TEST(DeviceCollectives, ProfileMeasuresCollectivesOnTheGivenCommunicator) {
  const auto path = fresh_db("moeplan_profile_devcoll.db");
  ProfileRequest req;
  req.sweep = tiny_sweep(2);
  req.ops = {"all_reduce", "all_to_all_v", "gemm"};
  req.harness = fast();
  req.out_path = path;
  kernels::run_in_process(2, [&](kernels::Communicator& world) {
    QueuedDeviceComm dev(world.split(0, world.rank()));
    auto s = run_profile(world, req, {}, {}, {}, &dev);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s->measured, s->total);
    EXPECT_EQ(s->incorrect, 0);
  });
  auto db = planner::CostDb::open(path, false);
  ASSERT_TRUE(db.ok());
  auto runs = (*db)->runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1U);
  EXPECT_EQ(runs->front().communicator, "inproc+queued-device");
  auto pts = (*db)->points();
  ASSERT_TRUE(pts.ok());
  std::map<std::string, int> passed;
  for (const auto& p : *pts) {
    if (p.disposition == planner::Disposition::kPassed) ++passed[p.op];
  }
  EXPECT_GT(passed["all_reduce"], 0);
  EXPECT_GT(passed["all_to_all_v"], 0);
  EXPECT_GT(passed["gemm"], 0);

  kernels::run_in_process(2, [&](kernels::Communicator& world) {
    QueuedDeviceComm alone(world.split(world.rank(), 0));
    auto s = run_profile(world, req, {}, {}, {}, &alone);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("is not the world's rank"), std::string::npos)
        << s.error().message;
  });
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

// A device profile (the backend has a device clock) times its collectives only on device memory:
// over the host communicator they are left out, saying why; on the device communicator they are
// measured by wall time around the waited-for collectives (they make no backend call, so the
// device clock would have read 0).
TEST(DeviceCollectives, DeviceProfileTimesCollectivesOnlyOnDeviceMemory) {
  constexpr double kDelay = 1e-3;
  for (const bool device_comm : {false, true}) {
    const auto path = fresh_db("moeplan_profile_devcoll_gpu.db");
    ProfileRequest req;
    req.sweep = tiny_sweep(2);
    req.ops = {"all_reduce"};
    req.harness = fast();
    req.device_collective_min_sample_s = 0.0;
    req.out_path = path;
    req.backend = std::make_shared<RecordingBackend>(2.5e-4);
    kernels::run_in_process(2, [&](kernels::Communicator& world) {
      QueuedDeviceComm dev(world.split(0, world.rank()), kDelay);
      auto s = run_profile(world, req, {}, {}, {}, device_comm ? &dev : nullptr);
      ASSERT_TRUE(s.ok()) << s.error().message;
      EXPECT_GT(s->total, 0);
      EXPECT_EQ(device_comm ? s->measured : s->not_supported, s->total);
    });
    auto db = planner::CostDb::open(path, false);
    ASSERT_TRUE(db.ok());
    auto pts = (*db)->points();
    ASSERT_TRUE(pts.ok());
    ASSERT_FALSE(pts->empty());
    for (const auto& p : *pts) {
      EXPECT_EQ(p.device, "fakegpu:Fake GPU 80GB/ranks=2");
      if (device_comm) {
        EXPECT_EQ(p.disposition, planner::Disposition::kPassed) << p.detail;
        EXPECT_GE(p.median_s, kDelay) << p.shape;
        EXPECT_GT(p.bus_bandwidth, 0.0);
      } else {
        EXPECT_EQ(p.disposition, planner::Disposition::kNotSupported);
        EXPECT_NE(p.detail.find("a collective over host memory (inproc)"), std::string::npos)
            << p.detail;
      }
    }
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  }
}

}  // namespace
}  // namespace moeplan::profiler
