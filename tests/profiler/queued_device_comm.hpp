// A stand-in GPU communicator for the profiler tests: its "device memory" is host memory and its
// device collectives run over the group's host communicator only when waited for, as a CUDA
// stream runs enqueued work — so a case that read a result before waiting would read old bytes.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "kernels/communicator.hpp"

namespace moeplan::profiler::fixtures {

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

}  // namespace moeplan::profiler::fixtures
