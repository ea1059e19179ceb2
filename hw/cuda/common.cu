#include "hw/cuda/common.cuh"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>

#include "hw/host/checksum.hpp"

namespace epsim::hw {

bool is_asynchronous_error(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

void throw_cuda_failure(cudaError_t err, const char* call, const char* file, int line) {
  throw ApiError(ApiFailure{"CUDA", call, cudaGetErrorName(err), cudaGetErrorString(err), file, line,
                            is_asynchronous_error(err), ""});
}

void cuda_launch_check(const char* kernel, const char* file, int line) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw_cuda_failure(err, (std::string("launch of ") + kernel).c_str(), file, line);
}

void cuda_check_cleanup(cudaError_t err, const char* call, const char* file, int line) noexcept {
  if (err == cudaSuccess || std::uncaught_exceptions() > 0) return;
  std::fprintf(stderr, "epsim-hw: warning: %s:%d: CUDA call %s failed during clean-up: %s (%s)\n",
               repository_relative(file).c_str(), line, call, cudaGetErrorName(err), cudaGetErrorString(err));
}

void cublas_check_cleanup(cublasStatus_t st, const char* call, const char* file, int line) noexcept {
  if (st == CUBLAS_STATUS_SUCCESS || std::uncaught_exceptions() > 0) return;
  std::fprintf(stderr, "epsim-hw: warning: %s:%d: cuBLAS call %s failed during clean-up: %s (%s)\n",
               repository_relative(file).c_str(), line, call, cublasGetStatusName(st), cublasGetStatusString(st));
}

void cublas_check(cublasStatus_t st, const char* call, const char* file, int line) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  // CUBLAS_STATUS_EXECUTION_FAILED: the GPU program failed to launch or run; the CUDA error behind it
  // is the one the next synchronisation reports.
  throw ApiError(ApiFailure{"cuBLAS", call, cublasGetStatusName(st), cublasGetStatusString(st), file, line,
                            st == CUBLAS_STATUS_EXECUTION_FAILED, ""});
}

#if defined(EPSIM_HAVE_NCCL)
const char* nccl_result_name(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult (unknown value)";
  }
}

void nccl_check(ncclResult_t r, const char* call, const char* file, int line, bool in_progress_ok) {
  if (r == ncclSuccess || (in_progress_ok && r == ncclInProgress)) return;
  const char* last = ncclGetLastError(nullptr);
  throw ApiError(ApiFailure{"NCCL", call, nccl_result_name(r), ncclGetErrorString(r), file, line, false,
                            last ? last : ""});
}
#endif

namespace {

std::string version_text(int v) {  // 12040 -> "12.4"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

__global__ void spin_kernel(volatile int* flag, volatile int* timed_out, long long timeout_cycles) {
  const long long start = clock64();
  while (*flag == 0) {
    if (clock64() - start > timeout_cycles) {
      *timed_out = 1;
      break;
    }
  }
}

__global__ void fill_pattern_kernel(std::uint32_t* dst, std::uint64_t words, std::uint64_t seed) {
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    dst[i] = pattern_word(seed, i);
}

__global__ void fill_bf16_kernel(std::uint16_t* dst, std::uint64_t n, std::uint64_t seed) {
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    // bf16 values in [-1/32, 1/32): sign, exponent 0x7A (2^-5), random mantissa.
    const std::uint32_t w = pattern_word(seed, i);
    dst[i] = static_cast<std::uint16_t>(((w & 1u) << 15) | (0x7Au << 7) | ((w >> 1) & 0x7Fu));
  }
}

__global__ void fill_fp8_kernel(std::uint8_t* dst, std::uint64_t n, std::uint64_t seed) {
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    // E4M3: sign, exponent field 4 (2^-3), random 3-bit mantissa.
    const std::uint32_t w = pattern_word(seed, i);
    dst[i] = static_cast<std::uint8_t>(((w & 1u) << 7) | (0x4u << 3) | ((w >> 1) & 0x7u));
  }
}

__global__ void checksum_kernel(const std::uint32_t* src, ChecksumSample sample, unsigned long long* out) {
  unsigned long long sum = 0;
  const std::uint64_t covered = sample.covered_words();
  for (std::uint64_t c = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; c < covered;
       c += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t i = sample.word_index(c);
    sum += checksum_term(src[i], i);
  }
  atomicAdd(out, sum);
}

__global__ void sm_copy_kernel(int4* __restrict__ dst, const int4* __restrict__ src, std::size_t vectors,
                               unsigned char* __restrict__ dst_tail, const unsigned char* __restrict__ src_tail,
                               std::size_t tail) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < vectors; i += stride)
    dst[i] = src[i];
  if (blockIdx.x == 0 && threadIdx.x < tail) dst_tail[threadIdx.x] = src_tail[threadIdx.x];
}

}  // namespace

void copy_prefer_engine(void* dst, const void* src, std::size_t bytes, cudaStream_t s) {
#if CUDART_VERSION >= 12080
  cudaMemcpyAttributes attr{};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;  // the source is written earlier in the stream
  attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
  void* dsts[1] = {dst};
  const void* srcs[1] = {src};
  std::size_t sizes[1] = {bytes};
  std::size_t attr_index = 0;
#if CUDART_VERSION >= 13000
  CUDA_CHECK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, &attr, &attr_index, 1, s));
#else
  std::size_t fail_index = 0;
  CUDA_CHECK(cudaMemcpyBatchAsync(dsts, const_cast<void**>(srcs), sizes, 1, &attr, &attr_index, 1, &fail_index, s));
#endif
#else
  (void)dst, (void)src, (void)bytes, (void)s;
  throw std::runtime_error("copies that prefer a Copy Engine need cudaMemcpyBatchAsync (CUDA 12.8 or later)");
#endif
}

int sm_count(int device) {
  int n = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  return n;
}

MeasurementHeader describe_device(int device) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  MeasurementHeader h;
  h.gpu = prop.name;
  int driver = 0, runtime = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  // The CUDA API reports the driver's CUDA version, not the kernel driver's release (nvidia-smi's
  // "550.54.15"); without NVML that is the best available.
  h.driver = "CUDA driver API " + version_text(driver);
  h.cuda = version_text(runtime);
  int sm_khz = 0, mem_khz = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device));
  h.sm_clock_MHz = sm_khz / 1000.0;
  h.mem_clock_MHz = mem_khz / 1000.0;
  if (!(h.sm_clock_MHz > 0)) h.sm_clock_MHz = 1;  // the format requires > 0; flagged in comments by callers
  if (!(h.mem_clock_MHz > 0)) h.mem_clock_MHz = 1;
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  h.date = buf;
  h.tool = kToolVersion;
  return h;
}

SpinGate::SpinGate() {
  CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(const_cast<int**>(&flag_)), sizeof(int), cudaHostAllocMapped));
  CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(const_cast<int**>(&timeout_)), sizeof(int), cudaHostAllocMapped));
  *flag_ = 0;
  *timeout_ = 0;
  CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&flag_device_), const_cast<int*>(flag_), 0));
  CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&timeout_device_), const_cast<int*>(timeout_), 0));
}

SpinGate::~SpinGate() {
  if (flag_) {
    *flag_ = 1;  // lets any spin kernel still waiting go before the flag's memory is freed
    CUDA_CHECK_CLEANUP(cudaDeviceSynchronize());
    CUDA_CHECK_CLEANUP(cudaFreeHost(const_cast<int*>(flag_)));
  }
  if (timeout_) CUDA_CHECK_CLEANUP(cudaFreeHost(const_cast<int*>(timeout_)));
}

void SpinGate::hold(cudaStream_t stream, double timeout_ms) {
  *flag_ = 0;
  *timeout_ = 0;
  int device = 0, khz = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
  const long long cycles = static_cast<long long>(timeout_ms * (khz > 0 ? khz : 2000000));
  spin_kernel<<<1, 1, 0, stream>>>(flag_device_, timeout_device_, cycles);
  CUDA_CHECK_LAUNCH("spin_kernel");
}

void SpinGate::release() {
  __atomic_store_n(const_cast<int*>(flag_), 1, __ATOMIC_SEQ_CST);
}

bool SpinGate::timed_out() const { return *timeout_ != 0; }

EventPair::EventPair() {
  CUDA_CHECK(cudaEventCreate(&a_));
  CUDA_CHECK(cudaEventCreate(&b_));
}

EventPair::~EventPair() {
  CUDA_CHECK_CLEANUP(cudaEventDestroy(a_));
  CUDA_CHECK_CLEANUP(cudaEventDestroy(b_));
}

float EventPair::elapsed_ms() const {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
  return ms;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : n_(bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMalloc(&p_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (p_) CUDA_CHECK_CLEANUP(cudaFree(p_));
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) CUDA_CHECK_CLEANUP(cudaFree(p_));
    p_ = o.p_;
    n_ = o.n_;
    o.p_ = nullptr;
    o.n_ = 0;
  }
  return *this;
}

void fill_pattern(void* dst, std::uint64_t words, std::uint64_t seed, cudaStream_t s) {
  if (words == 0) return;
  fill_pattern_kernel<<<1024, 256, 0, s>>>(static_cast<std::uint32_t*>(dst), words, seed);
  CUDA_CHECK_LAUNCH("fill_pattern_kernel");
}

void fill_bf16(void* dst, std::uint64_t elements, std::uint64_t seed, cudaStream_t s) {
  if (elements == 0) return;
  fill_bf16_kernel<<<1024, 256, 0, s>>>(static_cast<std::uint16_t*>(dst), elements, seed);
  CUDA_CHECK_LAUNCH("fill_bf16_kernel");
}

void fill_fp8(void* dst, std::uint64_t elements, std::uint64_t seed, cudaStream_t s) {
  if (elements == 0) return;
  fill_fp8_kernel<<<1024, 256, 0, s>>>(static_cast<std::uint8_t*>(dst), elements, seed);
  CUDA_CHECK_LAUNCH("fill_fp8_kernel");
}

std::uint64_t device_checksum(const void* src, const ChecksumSample& sample, cudaStream_t s) {
  DeviceBuffer sum(sizeof(unsigned long long));
  CUDA_CHECK(cudaMemsetAsync(sum.get(), 0, sizeof(unsigned long long), s));
  if (sample.covered_words() > 0) {
    // At most kChecksumMaxWords words are read (4 MiB): microseconds on an H100.
    checksum_kernel<<<1024, 256, 0, s>>>(static_cast<const std::uint32_t*>(src), sample,
                                         static_cast<unsigned long long*>(sum.get()));
    CUDA_CHECK_LAUNCH("checksum_kernel");
  }
  unsigned long long host = 0;
  CUDA_CHECK(cudaMemcpyAsync(&host, sum.get(), sizeof host, cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  return host;
}

void verify_pattern_copy(const void* dst, std::uint64_t bytes, std::uint64_t seed, const std::string& transfer,
                         cudaStream_t s, ExpectedChecksums& expected) {
  const std::uint64_t words = checksum_word_count(bytes);
  const ChecksumSample sample = checksum_sample(words);
  const std::uint64_t want = expected.get(seed, words);
  const std::uint64_t got = device_checksum(dst, sample, s);
  if (got != want) throw std::runtime_error(checksum_mismatch_message(transfer, bytes, sample, want, got));
}

void verify_pattern_copy_host(const void* dst, std::uint64_t bytes, std::uint64_t seed, const std::string& transfer,
                              ExpectedChecksums& expected) {
  const std::uint64_t words = checksum_word_count(bytes);
  const ChecksumSample sample = checksum_sample(words);
  const std::uint64_t want = expected.get(seed, words);
  const std::uint64_t got = checksum_words(static_cast<const std::uint32_t*>(dst), sample);
  if (got != want) throw std::runtime_error(checksum_mismatch_message(transfer, bytes, sample, want, got));
}

void sm_copy(void* dst, const void* src, std::size_t bytes, int blocks, cudaStream_t s) {
  const std::size_t vectors = bytes / 16;
  const std::size_t tail = bytes % 16;
  sm_copy_kernel<<<blocks, 512, 0, s>>>(static_cast<int4*>(dst), static_cast<const int4*>(src), vectors,
                                        static_cast<unsigned char*>(dst) + vectors * 16,
                                        static_cast<const unsigned char*>(src) + vectors * 16, tail);
  CUDA_CHECK_LAUNCH("sm_copy_kernel");
}

}  // namespace epsim::hw
