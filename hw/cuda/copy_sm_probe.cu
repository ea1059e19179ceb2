// The SM probe: a holder kernel fills every SM's thread slots and spins on the global timer; a copy
// enqueued on another stream once the holder is resident either runs beside it (a Copy Engine moves
// the bytes) or waits until the holder lets the SMs go (the driver made the copy a kernel).
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "hw/cuda/common.cuh"
#include "hw/cuda/copy_sm_probe.cuh"
#include "hw/host/hw_args.hpp"

namespace epsim::hw {

namespace {

constexpr int kHolderThreads = 1024;

// Spins until `hold_ns` of global time have passed since this block started. Few registers, no shared
// memory: as many blocks fit on an SM as its thread slots allow, and the probe launches exactly that.
// A cycle count of 4 per nanosecond (twice any Hopper clock) ends it too, should the timer not advance.
__global__ void hold_sms_kernel(unsigned long long hold_ns) {
  unsigned long long start = 0, now = 0;
  const long long first_cycle = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < hold_ns && static_cast<unsigned long long>(clock64() - first_cycle) < 4 * hold_ns);
}

}  // namespace

CopySmProbeTimes probe_copy_sms(int device, const std::function<void(cudaStream_t)>& copy, int trials) {
  CUDA_CHECK(cudaSetDevice(device));
  int per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, hold_sms_kernel, kHolderThreads, 0));
  const int blocks = std::max(1, per_sm) * sm_count(device);
  cudaStream_t hs, cs;
  CUDA_CHECK(cudaStreamCreateWithFlags(&hs, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  std::vector<double> alone, beside, left;
  {
    EventPair c, h;
    copy(cs);  // warm-up
    CUDA_CHECK(cudaStreamSynchronize(cs));
    for (int t = 0; t < trials; ++t) {
      c.start(cs);
      copy(cs);
      c.stop(cs);
      CUDA_CHECK(cudaStreamSynchronize(cs));
      alone.push_back(c.elapsed_ms() * 1000.0);
    }
    const double hold_us = std::max(2000.0, 10.0 * median(alone));
    for (int t = 0; t < trials; ++t) {
      h.start(hs);
      hold_sms_kernel<<<blocks, kHolderThreads, 0, hs>>>(static_cast<unsigned long long>(hold_us * 1000.0));
      CUDA_CHECK_LAUNCH("hold_sms_kernel");
      h.stop(hs);
      // Let the holder become resident before the copy is enqueued (a launch takes microseconds; the
      // holder lasts milliseconds, and its remaining time is measured, not assumed).
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long long>(hold_us / 10.0)));
      c.start(cs);
      copy(cs);
      c.stop(cs);
      CUDA_CHECK(cudaDeviceSynchronize());
      float to_holder_end_ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&to_holder_end_ms, c.start_event(), h.stop_event()));
      beside.push_back(c.elapsed_ms() * 1000.0);
      left.push_back(to_holder_end_ms * 1000.0);
    }
  }
  CUDA_CHECK(cudaStreamDestroy(hs));
  CUDA_CHECK(cudaStreamDestroy(cs));
  return {median(alone), median(beside), median(left)};
}

}  // namespace epsim::hw
