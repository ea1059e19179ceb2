// epsim-hw bench alltoall: NCCL all-to-all (ncclGroupStart + ncclSend/ncclRecv to every other rank),
// single process driving every GPU, time vs bytes per pair. Compiled out without NCCL.
//
// Reliability: the communicators are non-blocking (ncclConfig_t::blocking = 0), so no NCCL call can
// hold the host; every wait (set-up, the enqueue of each group, the exchanges on the streams) polls
// ncclCommGetAsyncError and cudaStreamQuery under the --nccl-timeout-s deadline. A rank that reports an
// error or does not finish in time gets every communicator aborted (ncclCommAbort) and the process
// exits 1 with a message naming the collective, the ranks and the elapsed time. The data each rank
// receives is checked against the pattern its sender wrote (a sampled checksum per pair).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "hw/cuda/commands.cuh"
#include "hw/cuda/common.cuh"
#include "hw/host/measurement_writer.hpp"

#if defined(EPSIM_HAVE_NCCL)
#include "hw/host/collective_wait.hpp"
#include "hw/host/exit_watchdog.hpp"
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

constexpr double kDefaultNcclTimeout_s = 120.0;
/// How long ncclCommAbort may take before the process exits without it (it can hang behind a kernel
/// that never returns).
constexpr double kAbortGrace_s = 30.0;

/// The pattern seed of the bytes rank `src` sends to rank `dst`: every pair's data differs, so data
/// delivered to the wrong rank or from the wrong segment fails the check.
std::uint64_t pair_seed(int src, int dst) {
  return 0xA2A0000000ull + static_cast<std::uint64_t>(src) * 65536u + static_cast<std::uint64_t>(dst);
}

/// One process's NCCL ranks (one per GPU), their streams, and the deadline every wait runs under.
class NcclRanks {
 public:
  NcclRanks(int gpus, double timeout_s) : gpus_(gpus), wait_(timeout_s, WaitClock::steady()) {
    comms_.assign(static_cast<std::size_t>(gpus), nullptr);
    streams_.assign(static_cast<std::size_t>(gpus), nullptr);
    try {
      for (int g = 0; g < gpus; ++g) {
        CUDA_CHECK(cudaSetDevice(g));
        CUDA_CHECK(cudaStreamCreateWithFlags(&streams_[g], cudaStreamNonBlocking));
      }
      ncclUniqueId id;
      NCCL_CHECK(ncclGetUniqueId(&id));
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      NCCL_CHECK(ncclGroupStart());
      for (int g = 0; g < gpus; ++g) {
        CUDA_CHECK(cudaSetDevice(g));
        NCCL_CHECK_ASYNC(ncclCommInitRankConfig(&comms_[g], gpus, id, g, &config));
      }
      NCCL_CHECK_ASYNC(ncclGroupEnd());
      await_nccl("NCCL communicator set-up (" + std::to_string(gpus) + " ranks)");
    } catch (...) {  // the destructor does not run for a half-built object
      abort_all();
      destroy_streams();
      throw;
    }
  }

  /// Frees the communicators: finalised and destroyed after success, aborted while an exception
  /// propagates (a failed CUDA call elsewhere): NCCL must not be left waiting for ranks that are gone.
  ~NcclRanks() {
    if (std::uncaught_exceptions() > 0 || finalize_failed_) {
      abort_all();
    } else {
      for (int g = 0; g < gpus_; ++g) {
        CUDA_CHECK_CLEANUP(cudaSetDevice(g));
        const ncclResult_t r = ncclCommDestroy(comms_[g]);
        if (r != ncclSuccess)
          std::fprintf(stderr, "epsim-hw: warning: ncclCommDestroy (rank %d): %s\n", g, ncclGetErrorString(r));
      }
    }
    destroy_streams();
  }
  NcclRanks(const NcclRanks&) = delete;
  NcclRanks& operator=(const NcclRanks&) = delete;

  ncclComm_t comm(int g) const { return comms_[static_cast<std::size_t>(g)]; }
  cudaStream_t stream(int g) const { return streams_[static_cast<std::size_t>(g)]; }

  /// Flushes every communicator (ncclCommFinalize) under the deadline; the destructor then frees them.
  void finalize() {
    finalize_failed_ = true;  // until proven otherwise: a throw below must abort, not destroy
    for (int g = 0; g < gpus_; ++g) {
      CUDA_CHECK(cudaSetDevice(g));
      NCCL_CHECK_ASYNC(ncclCommFinalize(comms_[g]));
    }
    await_nccl("NCCL communicator finalisation");
    finalize_failed_ = false;
  }

  /// Waits until no communicator has an NCCL operation in progress on the host (set-up, the enqueue of
  /// a group, finalisation).
  void await_nccl(const std::string& what) { await(what, false); }
  /// Waits until every rank's stream has finished (the exchanges themselves), watching NCCL's errors.
  void await_streams(const std::string& what) { await(what, true); }

 private:
  RankPoll poll(int g, bool streams) const {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comms_[g], &state);
    if (r != ncclSuccess)
      return {PollState::failed, std::string("ncclCommGetAsyncError returned ") + nccl_result_name(r) + " (" +
                                     ncclGetErrorString(r) + ")"};
    if (state != ncclSuccess && state != ncclInProgress) {
      std::string report = std::string("NCCL reports ") + nccl_result_name(state) + " (" + ncclGetErrorString(state) + ")";
      if (const char* last = ncclGetLastError(comms_[g]))
        if (*last) report += ": " + std::string(last);
      return {PollState::failed, report};
    }
    if (state == ncclInProgress) return {PollState::pending, ""};
    if (!streams) return {PollState::done, ""};
    const cudaError_t device = cudaSetDevice(g);
    const cudaError_t e = device != cudaSuccess ? device : cudaStreamQuery(streams_[g]);
    if (e == cudaSuccess) return {PollState::done, ""};
    if (e == cudaErrorNotReady) return {PollState::pending, ""};
    return {PollState::failed, std::string(device != cudaSuccess ? "cudaSetDevice" : "cudaStreamQuery") + " returned " +
                                   cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"};
  }

  void await(const std::string& what, bool streams) {
    const CollectiveOutcome o = wait_for_ranks(wait_, gpus_, [&](int g) { return poll(g, streams); });
    if (o.status == WaitResult::Status::done) return;
    const std::string message = o.status == WaitResult::Status::timed_out
                                    ? collective_timeout_message(what, o, gpus_, wait_.timeout_s())
                                    : collective_failure_message(what, o);
    fail(message);
  }

  /// Reports, aborts every communicator, and exits 1 without unwinding: after an abort the device state
  /// is unknown, and destructors (cudaFree synchronises the device) could block on the hung kernel.
  [[noreturn]] void fail(const std::string& message) {
    std::fflush(stdout);
    std::fprintf(stderr, "epsim-hw: error: %s; aborting the NCCL communicators (ncclCommAbort)\n", message.c_str());
    std::fflush(stderr);
    abort_all();
    std::fprintf(stderr, "epsim-hw: communicators aborted; nothing was written\n");
    std::fflush(stderr);
    std::_Exit(1);
  }

  void destroy_streams() noexcept {
    for (int g = 0; g < gpus_; ++g) {
      if (!streams_[g]) continue;
      CUDA_CHECK_CLEANUP(cudaSetDevice(g));
      CUDA_CHECK_CLEANUP(cudaStreamDestroy(streams_[g]));
    }
  }

  void abort_all() noexcept {
    ExitWatchdog watchdog(kAbortGrace_s, [] {
      std::fprintf(stderr, "epsim-hw: error: ncclCommAbort did not return within %.0f s; exiting without it\n",
                   kAbortGrace_s);
      std::fflush(stderr);
      std::_Exit(1);
    });
    for (int g = 0; g < gpus_; ++g) {
      if (!comms_[g]) continue;
      const ncclResult_t r = ncclCommAbort(comms_[g]);
      if (r != ncclSuccess && r != ncclInProgress)
        std::fprintf(stderr, "epsim-hw: warning: ncclCommAbort (rank %d): %s\n", g, ncclGetErrorString(r));
      comms_[g] = nullptr;
    }
    watchdog.disarm();
  }

  int gpus_;
  DeadlineWait wait_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  bool finalize_failed_ = false;
};

}  // namespace

int bench_alltoall(const HwArgs& a) {
  // Arguments first: a bad one is exit 2 whatever the machine.
  const std::int64_t gpus_wanted = a.integer("gpus", 0, 1, 1024);  // 0: every visible GPU
  const auto sizes = parse_sizes(a.text("sizes", "4K,16K,64K,256K,1M,4M,16M,64M"));
  const int warmup = static_cast<int>(a.integer("warmup", 5, 0, 10000));
  const int reps = static_cast<int>(a.integer("reps", 30, 1, 10000));
  const double timeout_s = a.number("nccl-timeout-s", kDefaultNcclTimeout_s, 1e-3, 86400.0);
  const bool verify = !a.flags.count("no-verify");
  const std::size_t max_pair = static_cast<std::size_t>(*std::max_element(sizes.begin(), sizes.end()));

  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  const int gpus = gpus_wanted > 0 ? static_cast<int>(gpus_wanted) : count;
  if (gpus < 2 || gpus > count) {
    std::fprintf(stderr, "epsim-hw: bench alltoall needs at least 2 GPUs (%d visible, --gpus %d)\n", count, gpus);
    return 1;
  }

  NcclRanks ranks(gpus, timeout_s);
  std::vector<DeviceBuffer> send, recv;
  std::vector<std::vector<cudaEvent_t>> start(gpus), stop(gpus);
  for (int g = 0; g < gpus; ++g) {
    CUDA_CHECK(cudaSetDevice(g));
    send.emplace_back(max_pair * gpus);
    recv.emplace_back(max_pair * gpus);
    start[g].resize(static_cast<std::size_t>(reps));
    stop[g].resize(static_cast<std::size_t>(reps));
    for (int r = 0; r < reps; ++r) {
      CUDA_CHECK(cudaEventCreate(&start[g][r]));
      CUDA_CHECK(cudaEventCreate(&stop[g][r]));
    }
  }
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

  Measurements m;
  m.header = describe_device(0);
  std::vector<std::string> comments = {
      "epsim-hw bench alltoall: NCCL " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
          std::to_string(NCCL_PATCH) + ", one process, ncclGroupStart + ncclSend/ncclRecv to every other rank",
      "each repetition: the slowest rank's time between events recorded on its stream before and after the group;",
      "ranks are not synchronised before each repetition (back-to-back exchanges), median over the repetitions"};
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
    for (int i = 0; i < warmup; ++i) exchange(bytes, what + ", warm-up");
    ranks.await_streams(what + ", warm-up");
    for (int r = 0; r < reps; ++r) {
      for (int g = 0; g < gpus; ++g) {
        CUDA_CHECK(cudaSetDevice(g));
        CUDA_CHECK(cudaEventRecord(start[g][r], ranks.stream(g)));
      }
      exchange(bytes, what + ", repetition " + std::to_string(r));
      for (int g = 0; g < gpus; ++g) {
        CUDA_CHECK(cudaSetDevice(g));
        CUDA_CHECK(cudaEventRecord(stop[g][r], ranks.stream(g)));
      }
    }
    ranks.await_streams(what + ", timed repetitions");
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
  for (int g = 0; g < gpus; ++g) {
    CUDA_CHECK(cudaSetDevice(g));
    for (int r = 0; r < reps; ++r) {
      CUDA_CHECK(cudaEventDestroy(start[g][r]));
      CUDA_CHECK(cudaEventDestroy(stop[g][r]));
    }
  }
  // Buffers are freed on their own device.
  for (int g = gpus - 1; g >= 0; --g) {
    CUDA_CHECK(cudaSetDevice(g));
    send.pop_back();
    recv.pop_back();
  }
  write_measurements_file(a.text("o", ""), m, comments, a.flags.count("force") > 0);
  std::printf("wrote %s (%zu points)\n", a.text("o", "").c_str(), m.all_to_all.size());
  return 0;
}

#endif

}  // namespace epsim::hw
