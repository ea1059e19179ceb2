// epsim-hw bench alltoall: NCCL all-to-all (ncclGroupStart + ncclSend/ncclRecv to every other rank),
// single process driving every GPU, time vs bytes per pair. Without NCCL it says so and exits 1.
//
// Reliability: the communicators are non-blocking (ncclConfig_t::blocking = 0), so no NCCL call can
// hold the host; every wait (set-up, the enqueue of each group, the exchanges on the streams) polls
// ncclCommGetAsyncError and cudaStreamQuery under the --nccl-timeout-s deadline. A rank that reports an
// error or does not finish in time gets every communicator aborted (ncclCommAbort) and the process
// exits 1 with a message naming the collective, the ranks and the elapsed time. The data each rank
// receives is checked against the pattern its sender wrote (a sampled checksum per pair).
#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "hw/cuda/commands.cuh"
#include "hw/cuda/common.cuh"
#include "hw/cuda/nccl_ranks.cuh"
#include "hw/cuda/rank_timer.cuh"

namespace epsim::hw {

#if !defined(EPSIM_HAVE_NCCL)

void measure_alltoall(const HwArgs&, Measurements&, std::vector<std::string>&) {
  throw std::runtime_error(kNoNcclMessage);
}

#else

void measure_alltoall(const HwArgs& a, Measurements& m, std::vector<std::string>& comments) {
  // Arguments first: a bad one is exit 2 whatever the machine.
  const std::int64_t gpus_wanted = a.integer("gpus", 0, 1, 1024);  // 0: every visible GPU
  const auto sizes = parse_sizes(a.text("sizes", "4K,16K,64K,256K,1M,4M,16M,64M"));
  const int warmup = static_cast<int>(a.integer("warmup", 5, 0, 10000));
  const int reps = static_cast<int>(a.integer("reps", 30, 1, 10000));
  const double timeout_s = a.number("nccl-timeout-s", kDefaultNcclTimeout_s, 1e-3, 86400.0);
  const bool verify = !a.flags.count("no-verify");
  const std::size_t max_pair = static_cast<std::size_t>(*std::max_element(sizes.begin(), sizes.end()));
  const int gpus = nccl_rank_count(gpus_wanted, "bench alltoall");

  NcclRanks ranks(gpus, timeout_s);
  std::vector<DeviceBuffer> send, recv;
  for (int g = 0; g < gpus; ++g) {
    CUDA_CHECK(cudaSetDevice(g));
    send.emplace_back(max_pair * gpus);
    recv.emplace_back(max_pair * gpus);
  }
  RankTimer timer(gpus, reps);
  auto exchange = [&](std::size_t bytes, const std::string& what) {
    NCCL_CHECK(ncclGroupStart());
    for (int g = 0; g < gpus; ++g)
      for (int p = 0; p < gpus; ++p) {
        if (p == g) continue;
        NCCL_CHECK_ASYNC(ncclSend(static_cast<char*>(send[g].get()) + p * bytes, bytes, ncclChar, p, ranks.comm(g),
                                  ranks.stream(g)));
        NCCL_CHECK_ASYNC(ncclRecv(static_cast<char*>(recv[g].get()) + p * bytes, bytes, ncclChar, p, ranks.comm(g),
                                  ranks.stream(g)));
      }
    NCCL_CHECK_ASYNC(ncclGroupEnd());
    ranks.await_nccl(what + ": enqueue");  // non-blocking: the group may still be launching
  };

  comments.insert(comments.end(), {
      "all_to_all: NCCL " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
          std::to_string(NCCL_PATCH) + ", one process, ncclGroupStart + ncclSend/ncclRecv to every other rank",
      "each repetition: the slowest rank's time between events recorded on its stream before and after the group;",
      "ranks are not synchronised before each repetition (back-to-back exchanges), median over the repetitions"});
  if (verify)
    comments.push_back("received data checked against each sender's pattern (sampled checksum per pair of ranks)");
  ExpectedChecksums expected;
  for (auto b : sizes) {
    const std::size_t bytes = static_cast<std::size_t>(b);
    const std::string what = "NCCL all-to-all (" + std::to_string(bytes) + " B per pair, " + std::to_string(gpus) + " ranks)";
    // Outside the timed loop: every pair's segment gets its own pattern, receive buffers are zeroed.
    for (int g = 0; g < gpus; ++g) {
      CUDA_CHECK(cudaSetDevice(g));
      for (int p = 0; p < gpus; ++p)
        if (p != g) fill_pattern(static_cast<char*>(send[g].get()) + p * bytes, bytes / 4, pair_seed(g, p), ranks.stream(g));
      if (verify) CUDA_CHECK(cudaMemsetAsync(recv[g].get(), 0, bytes * gpus, ranks.stream(g)));
    }
    const std::vector<double> times =
        timer.time_us(ranks, warmup, [&](const std::string& label) { exchange(bytes, label); }, what);
    if (verify)
      for (int g = 0; g < gpus; ++g) {
        CUDA_CHECK(cudaSetDevice(g));
        for (int p = 0; p < gpus; ++p)
          if (p != g)
            verify_pattern_copy(static_cast<const char*>(recv[g].get()) + p * bytes, bytes, pair_seed(p, g),
                                what + ": rank " + std::to_string(p) + " -> rank " + std::to_string(g), ranks.stream(g),
                                expected);
      }
    AllToAllPoint p;
    p.ranks = gpus;
    p.bytes_per_pair = static_cast<double>(bytes);
    p.median_us = median(times);
    p.repetitions = reps;
    m.all_to_all.push_back(p);
    std::printf("alltoall ranks %d, %zu B per pair: %.2f us (%.1f GB/s sent per rank)%s\n", gpus, bytes, p.median_us,
                (gpus - 1) * static_cast<double>(bytes) / (p.median_us * 1e3), verify ? ", checksums ok" : "");
    std::fflush(stdout);
  }
  ranks.finalize();
  // Buffers are freed on their own device.
  for (int g = gpus - 1; g >= 0; --g) {
    CUDA_CHECK(cudaSetDevice(g));
    send.pop_back();
    recv.pop_back();
  }
}

#endif

}  // namespace epsim::hw
