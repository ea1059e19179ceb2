// Shared CUDA helpers of epsim-hw: error checks, device description, the spin kernel that holds a
// stream until the host releases it (so enqueue cost is excluded from event timings; nvbandwidth's
// pattern, ../shared/reference/hardware.md section 5), event timing and checksummed data movement.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#if defined(EPSIM_HAVE_NCCL)
#include <nccl.h>
#endif

#include "hw/calibration/measurements.hpp"
#include "hw/host/api_error.hpp"
#include "hw/host/checksum.hpp"

namespace epsim::hw {

constexpr const char* kToolVersion = "epsim-hw 0.1.0";

// Every CUDA runtime, cuBLAS and NCCL call goes through one of these. A failure throws ApiError
// (hw/host/api_error.hpp): one line with file:line, the call's source text and the library's error
// name and text; main() prints it and exits 1. Errors that device work raised earlier and that only
// surface at a synchronisation point (cudaStreamSynchronize, cudaMemcpy, cudaEventElapsedTime...) are
// marked as such in the message.
[[noreturn]] void throw_cuda_failure(cudaError_t err, const char* call, const char* file, int line);
inline void cuda_check(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) throw_cuda_failure(err, call, file, line);
}
void cublas_check(cublasStatus_t st, const char* call, const char* file, int line);
/// After a kernel launch: cudaGetLastError, reported as a failed launch of `kernel`.
void cuda_launch_check(const char* kernel, const char* file, int line);
/// For destructors and other clean-up that must not throw: a failure is printed as a warning, except
/// while an exception is already propagating (the first error is the one that matters).
void cuda_check_cleanup(cudaError_t err, const char* call, const char* file, int line) noexcept;
void cublas_check_cleanup(cublasStatus_t st, const char* call, const char* file, int line) noexcept;
/// True for errors raised by earlier device work (illegal address, launch failure, assert, ECC...).
bool is_asynchronous_error(cudaError_t err);

#define CUDA_CHECK(x) ::epsim::hw::cuda_check((x), #x, __FILE__, __LINE__)
#define CUBLAS_CHECK(x) ::epsim::hw::cublas_check((x), #x, __FILE__, __LINE__)
#define CUDA_CHECK_LAUNCH(kernel) ::epsim::hw::cuda_launch_check(kernel, __FILE__, __LINE__)
#define CUDA_CHECK_CLEANUP(x) ::epsim::hw::cuda_check_cleanup((x), #x, __FILE__, __LINE__)
#define CUBLAS_CHECK_CLEANUP(x) ::epsim::hw::cublas_check_cleanup((x), #x, __FILE__, __LINE__)

#if defined(EPSIM_HAVE_NCCL)
/// `in_progress_ok`: communicators are non-blocking (bench alltoall), so set-up, group ends and
/// finalisation may answer ncclInProgress; completion is then awaited with a deadline.
void nccl_check(ncclResult_t r, const char* call, const char* file, int line, bool in_progress_ok);
/// "ncclSystemError", ...: the enumerator's name (NCCL only gives a description).
const char* nccl_result_name(ncclResult_t r);
#define NCCL_CHECK(x) ::epsim::hw::nccl_check((x), #x, __FILE__, __LINE__, false)
#define NCCL_CHECK_ASYNC(x) ::epsim::hw::nccl_check((x), #x, __FILE__, __LINE__, true)
#endif

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
/// Fills FP8 E4M3 data with small finite values (magnitudes in [1/8, 1/4)).
void fill_fp8(void* dst, std::uint64_t elements, std::uint64_t seed, cudaStream_t s);
/// Checksum of the words `sample` covers at `src` (synchronises `s`).
std::uint64_t device_checksum(const void* src, const ChecksumSample& sample, cudaStream_t s);

/// Checks that the first `bytes` bytes at device address `dst` are a copy of a buffer filled with
/// pattern `seed` (fill_pattern): checksums the sampled words on the GPU (synchronising `s`) and compares
/// with the host's value; a mismatch throws std::runtime_error naming `transfer`
/// (checksum_mismatch_message). Whole 32-bit words only: a tail of 1-3 bytes is not checked.
void verify_pattern_copy(const void* dst, std::uint64_t bytes, std::uint64_t seed, const std::string& transfer,
                         cudaStream_t s, ExpectedChecksums& expected);
/// The same for a copy that landed in host memory (checksummed on the CPU).
void verify_pattern_copy_host(const void* dst, std::uint64_t bytes, std::uint64_t seed, const std::string& transfer,
                              ExpectedChecksums& expected);
/// A copy of `bytes` from `src` to `dst` by cudaMemcpyBatchAsync with the hint to overlap with compute
/// (cudaMemcpyFlagPreferOverlapWithCompute, CUDA 12.8 and later), the documented way to ask for a
/// Copy Engine where a plain cudaMemcpyAsync within one GPU runs as a kernel. A hint the driver may
/// ignore: on the H200 with driver 580 the SM probe found this copy a kernel too. Throws
/// std::runtime_error when built with an older CUDA.
void copy_prefer_engine(void* dst, const void* src, std::size_t bytes, cudaStream_t s);
/// Vectorised SM copy (16 B per thread per iteration, grid = blocks); bytes need not be a multiple of 16.
void sm_copy(void* dst, const void* src, std::size_t bytes, int blocks, cudaStream_t s);

int sm_count(int device);

}  // namespace epsim::hw
