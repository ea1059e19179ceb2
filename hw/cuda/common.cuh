// Shared CUDA helpers of epsim-hw: error checks, device description, the spin kernel that holds a
// stream until the host releases it (so enqueue cost is excluded from event timings; nvbandwidth's
// pattern, ../shared/reference/hardware.md section 5), and event timing.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "hw/calibration/measurements.hpp"

namespace epsim::hw {

constexpr const char* kToolVersion = "epsim-hw 0.1.0";

void cuda_check(cudaError_t err, const char* what, const char* file, int line);
void cublas_check(cublasStatus_t st, const char* what, const char* file, int line);
#define CUDA_CHECK(x) ::epsim::hw::cuda_check((x), #x, __FILE__, __LINE__)
#define CUBLAS_CHECK(x) ::epsim::hw::cublas_check((x), #x, __FILE__, __LINE__)

/// gpu name, driver and runtime versions, clocks (from cudaDeviceGetAttribute: the maximum clocks the
/// device reports, not the clocks locked during the run), today's date, tool version.
MeasurementHeader describe_device(int device);

/// A host-mapped flag the spin kernel polls. release() lets every held stream go.
class SpinGate {
 public:
  SpinGate();
  ~SpinGate();
  SpinGate(const SpinGate&) = delete;
  SpinGate& operator=(const SpinGate&) = delete;
  /// Enqueues the spin kernel on `stream` (current device). It gives up after `timeout_ms` of GPU
  /// time so a too-deep queue cannot deadlock; hold() resets the flag first.
  void hold(cudaStream_t stream, double timeout_ms = 10000.0);
  void release();
  /// True if a spin kernel timed out since the last hold(): the measurement included enqueue time.
  bool timed_out() const;

 private:
  volatile int* flag_ = nullptr;
  int* flag_device_ = nullptr;
  volatile int* timeout_ = nullptr;
  int* timeout_device_ = nullptr;
};

/// A pool of recorded events; elapsed_ms(a, b) after synchronisation.
class EventPair {
 public:
  EventPair();
  ~EventPair();
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  void start(cudaStream_t s) { CUDA_CHECK(cudaEventRecord(a_, s)); }
  void stop(cudaStream_t s) { CUDA_CHECK(cudaEventRecord(b_, s)); }
  float elapsed_ms() const;
  cudaEvent_t start_event() const { return a_; }
  cudaEvent_t stop_event() const { return b_; }

 private:
  cudaEvent_t a_{}, b_{};
};

/// A device allocation freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  std::size_t n_ = 0;
};

/// Fills `words` 32-bit words at `dst` with pattern `seed` (hw/host/checksum.hpp).
void fill_pattern(void* dst, std::uint64_t words, std::uint64_t seed, cudaStream_t s);
/// Fills bf16 data with small finite values (so GEMMs do not run on NaN/denormals).
void fill_bf16(void* dst, std::uint64_t elements, std::uint64_t seed, cudaStream_t s);
/// Checksum of `words` words at `src` (synchronises `s`).
std::uint64_t device_checksum(const void* src, std::uint64_t words, cudaStream_t s);
/// Vectorised SM copy (16 B per thread per iteration, grid = blocks); bytes need not be a multiple of 16.
void sm_copy(void* dst, const void* src, std::size_t bytes, int blocks, cudaStream_t s);

int sm_count(int device);

}  // namespace epsim::hw
