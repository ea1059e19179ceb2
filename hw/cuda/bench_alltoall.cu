// epsim-hw bench alltoall: NCCL all-to-all (ncclGroupStart + ncclSend/ncclRecv to every other rank),
// single process driving every GPU, time vs bytes per pair. Compiled out without NCCL.
#include <algorithm>
#include <cstdio>

#include "hw/cuda/commands.cuh"
#include "hw/cuda/common.cuh"
#include "hw/host/measurement_writer.hpp"

#if defined(EPSIM_HAVE_NCCL)
#include <nccl.h>
#endif

namespace epsim::hw {

#if !defined(EPSIM_HAVE_NCCL)

int bench_alltoall(const HwArgs&) {
  std::fprintf(stderr,
               "epsim-hw: bench alltoall is not available: this epsim-hw was built without NCCL "
               "(install NCCL and reconfigure; CMake looks for nccl.h and libnccl under the CUDA toolkit or $NCCL_HOME)\n");
  return 1;
}

#else

namespace {
void nccl_check(ncclResult_t r, const char* what, const char* file, int line) {
  if (r != ncclSuccess)
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what + ": " + ncclGetErrorString(r));
}
#define NCCL_CHECK(x) nccl_check((x), #x, __FILE__, __LINE__)
}  // namespace

int bench_alltoall(const HwArgs& a) {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  const int gpus = static_cast<int>(a.integer("gpus", count, 1, 1024));
  if (gpus < 2 || gpus > count) {
    std::fprintf(stderr, "epsim-hw: bench alltoall needs at least 2 GPUs (%d visible, --gpus %d)\n", count, gpus);
    return 1;
  }
  const auto sizes = parse_sizes(a.text("sizes", "4K,16K,64K,256K,1M,4M,16M,64M"));
  const int warmup = static_cast<int>(a.integer("warmup", 5, 0, 10000));
  const int reps = static_cast<int>(a.integer("reps", 30, 1, 10000));
  const std::size_t max_pair = static_cast<std::size_t>(*std::max_element(sizes.begin(), sizes.end()));

  std::vector<int> devs(static_cast<std::size_t>(gpus));
  for (int i = 0; i < gpus; ++i) devs[i] = i;
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(gpus));
  NCCL_CHECK(ncclCommInitAll(comms.data(), gpus, devs.data()));
  std::vector<cudaStream_t> streams(static_cast<std::size_t>(gpus));
  std::vector<DeviceBuffer> send, recv;
  std::vector<std::vector<cudaEvent_t>> start(gpus), stop(gpus);
  for (int g = 0; g < gpus; ++g) {
    CUDA_CHECK(cudaSetDevice(g));
    CUDA_CHECK(cudaStreamCreateWithFlags(&streams[g], cudaStreamNonBlocking));
    send.emplace_back(max_pair * gpus);
    recv.emplace_back(max_pair * gpus);
    CUDA_CHECK(cudaMemset(send.back().get(), 1, max_pair * gpus));
    start[g].resize(static_cast<std::size_t>(reps));
    stop[g].resize(static_cast<std::size_t>(reps));
    for (int r = 0; r < reps; ++r) {
      CUDA_CHECK(cudaEventCreate(&start[g][r]));
      CUDA_CHECK(cudaEventCreate(&stop[g][r]));
    }
  }
  auto exchange = [&](std::size_t bytes) {
    NCCL_CHECK(ncclGroupStart());
    for (int g = 0; g < gpus; ++g)
      for (int p = 0; p < gpus; ++p) {
        if (p == g) continue;
        NCCL_CHECK(ncclSend(static_cast<char*>(send[g].get()) + p * bytes, bytes, ncclChar, p, comms[g], streams[g]));
        NCCL_CHECK(ncclRecv(static_cast<char*>(recv[g].get()) + p * bytes, bytes, ncclChar, p, comms[g], streams[g]));
      }
    NCCL_CHECK(ncclGroupEnd());
  };
  auto sync_all = [&] {
    for (int g = 0; g < gpus; ++g) {
      CUDA_CHECK(cudaSetDevice(g));
      CUDA_CHECK(cudaStreamSynchronize(streams[g]));
    }
  };

  Measurements m;
  m.header = describe_device(0);
  std::vector<std::string> comments = {
      "epsim-hw bench alltoall: NCCL " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
          std::to_string(NCCL_PATCH) + ", one process, ncclGroupStart + ncclSend/ncclRecv to every other rank",
      "each repetition: the slowest rank's time between events recorded on its stream before and after the group;",
      "ranks are not synchronised before each repetition (back-to-back exchanges), median over the repetitions"};
  for (auto b : sizes) {
    const std::size_t bytes = static_cast<std::size_t>(b);
    for (int i = 0; i < warmup; ++i) exchange(bytes);
    sync_all();
    for (int r = 0; r < reps; ++r) {
      for (int g = 0; g < gpus; ++g) {
        CUDA_CHECK(cudaSetDevice(g));
        CUDA_CHECK(cudaEventRecord(start[g][r], streams[g]));
      }
      exchange(bytes);
      for (int g = 0; g < gpus; ++g) {
        CUDA_CHECK(cudaSetDevice(g));
        CUDA_CHECK(cudaEventRecord(stop[g][r], streams[g]));
      }
    }
    sync_all();
    std::vector<double> times;
    for (int r = 0; r < reps; ++r) {
      double worst = 0;
      for (int g = 0; g < gpus; ++g) {
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start[g][r], stop[g][r]));
        worst = std::max(worst, ms * 1000.0);
      }
      times.push_back(worst);
    }
    AllToAllPoint p;
    p.ranks = gpus;
    p.bytes_per_pair = static_cast<double>(bytes);
    p.median_us = median(times);
    p.repetitions = reps;
    m.all_to_all.push_back(p);
    std::printf("alltoall ranks %d, %zu B per pair: %.2f us (%.1f GB/s sent per rank)\n", gpus, bytes, p.median_us,
                (gpus - 1) * static_cast<double>(bytes) / (p.median_us * 1e3));
    std::fflush(stdout);
  }
  for (int g = 0; g < gpus; ++g) {
    CUDA_CHECK(cudaSetDevice(g));
    for (int r = 0; r < reps; ++r) {
      cudaEventDestroy(start[g][r]);
      cudaEventDestroy(stop[g][r]);
    }
    ncclCommDestroy(comms[g]);
  }
  // Buffers are freed on their own device.
  for (int g = gpus - 1; g >= 0; --g) {
    CUDA_CHECK(cudaSetDevice(g));
    send.pop_back();
    recv.pop_back();
    cudaStreamDestroy(streams[g]);
  }
  write_measurements_file(a.text("o", ""), m, comments);
  std::printf("wrote %s (%zu points)\n", a.text("o", "").c_str(), m.all_to_all.size());
  return 0;
}

#endif

}  // namespace epsim::hw
