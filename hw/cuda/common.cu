#include "hw/cuda/common.cuh"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "hw/host/checksum.hpp"

namespace epsim::hw {

void cuda_check(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what + ": " +
                             cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

void cublas_check(cublasStatus_t st, const char* what, const char* file, int line) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what + ": cuBLAS status " +
                             std::to_string(static_cast<int>(st)));
}

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

__global__ void checksum_kernel(const std::uint32_t* src, std::uint64_t words, unsigned long long* out) {
  unsigned long long sum = 0;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    sum += checksum_term(src[i], i);
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
    *flag_ = 1;
    cudaDeviceSynchronize();
    cudaFreeHost(const_cast<int*>(flag_));
  }
  if (timeout_) cudaFreeHost(const_cast<int*>(timeout_));
}

void SpinGate::hold(cudaStream_t stream, double timeout_ms) {
  *flag_ = 0;
  *timeout_ = 0;
  int device = 0, khz = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
  const long long cycles = static_cast<long long>(timeout_ms * (khz > 0 ? khz : 2000000));
  spin_kernel<<<1, 1, 0, stream>>>(flag_device_, timeout_device_, cycles);
  CUDA_CHECK(cudaGetLastError());
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
  cudaEventDestroy(a_);
  cudaEventDestroy(b_);
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
  if (p_) cudaFree(p_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) cudaFree(p_);
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
  CUDA_CHECK(cudaGetLastError());
}

void fill_bf16(void* dst, std::uint64_t elements, std::uint64_t seed, cudaStream_t s) {
  if (elements == 0) return;
  fill_bf16_kernel<<<1024, 256, 0, s>>>(static_cast<std::uint16_t*>(dst), elements, seed);
  CUDA_CHECK(cudaGetLastError());
}

std::uint64_t device_checksum(const void* src, std::uint64_t words, cudaStream_t s) {
  DeviceBuffer sum(sizeof(unsigned long long));
  CUDA_CHECK(cudaMemsetAsync(sum.get(), 0, sizeof(unsigned long long), s));
  if (words > 0) {
    checksum_kernel<<<1024, 256, 0, s>>>(static_cast<const std::uint32_t*>(src), words,
                                         static_cast<unsigned long long*>(sum.get()));
    CUDA_CHECK(cudaGetLastError());
  }
  unsigned long long host = 0;
  CUDA_CHECK(cudaMemcpyAsync(&host, sum.get(), sizeof host, cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  return host;
}

void sm_copy(void* dst, const void* src, std::size_t bytes, int blocks, cudaStream_t s) {
  const std::size_t vectors = bytes / 16;
  const std::size_t tail = bytes % 16;
  sm_copy_kernel<<<blocks, 512, 0, s>>>(static_cast<int4*>(dst), static_cast<const int4*>(src), vectors,
                                        static_cast<unsigned char*>(dst) + vectors * 16,
                                        static_cast<const unsigned char*>(src) + vectors * 16, tail);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace epsim::hw
