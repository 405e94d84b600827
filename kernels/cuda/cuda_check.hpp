// Check macros for CUDA runtime and cuBLAS calls (they throw std::runtime_error naming the call,
// file:line and the library's error string), and a growable device buffer.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace moeplan::kernels::cuda {

[[noreturn]] inline void throw_error(const char* expr, const char* file, int line,
                                     const std::string& message) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " +
                           message);
}

/// Device memory exhausted: a std::bad_alloc (so a profile marks the shape "not supported" and
/// goes on, as for host memory) that keeps the call, file:line and CUDA's message.
class DeviceOutOfMemory final : public std::bad_alloc {
 public:
  explicit DeviceOutOfMemory(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

inline void check_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaErrorMemoryAllocation) {
    throw DeviceOutOfMemory(std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " +
                            cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
  if (e != cudaSuccess) {
    throw_error(expr, file, line,
                std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")");
  }
}

inline void check_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s == CUBLAS_STATUS_ALLOC_FAILED) {
    throw DeviceOutOfMemory(std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " +
                            cublasGetStatusName(s) + " (" + cublasGetStatusString(s) + ")");
  }
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw_error(expr, file, line,
                std::string(cublasGetStatusName(s)) + " (" + cublasGetStatusString(s) + ")");
  }
}

/// Device memory that grows on demand (contents are not kept when it grows).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  /// At least `bytes` bytes (never returns null, even for 0 bytes).
  void* reserve(std::size_t bytes);
  template <class T>
  T* reserve_as(std::size_t count) {
    return static_cast<T*>(reserve(count * sizeof(T)));
  }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace moeplan::kernels::cuda

#define MOEPLAN_CUDA_CHECK(expr) \
  ::moeplan::kernels::cuda::check_cuda((expr), #expr, __FILE__, __LINE__)
#define MOEPLAN_CUBLAS_CHECK(expr) \
  ::moeplan::kernels::cuda::check_cublas((expr), #expr, __FILE__, __LINE__)

namespace moeplan::kernels::cuda {

inline void* DeviceBuffer::reserve(std::size_t bytes) {
  bytes = bytes == 0 ? 256 : bytes;
  if (bytes <= bytes_) return ptr_;
  if (ptr_ != nullptr) MOEPLAN_CUDA_CHECK(cudaFree(ptr_));
  ptr_ = nullptr;
  bytes_ = 0;
  MOEPLAN_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  bytes_ = bytes;
  return ptr_;
}

}  // namespace moeplan::kernels::cuda
