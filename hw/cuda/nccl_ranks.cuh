// One process's NCCL ranks (one per GPU, non-blocking communicators), their streams, and the deadline
// every wait on them runs under (--nccl-timeout-s). A rank that reports an error or does not finish in
// time gets every communicator aborted (ncclCommAbort) and the process exits 1 with a message naming
// the collective, the ranks and the elapsed time. Used by bench alltoall and bench ep_comm.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

namespace epsim::hw {
constexpr const char* kNoNcclMessage =
    "this epsim-hw was built without NCCL, so the multi-GPU benchmarks are not available (install NCCL and "
    "reconfigure; CMake looks for nccl.h and libnccl under the CUDA toolkit or $NCCL_HOME)";
}  // namespace epsim::hw

#if defined(EPSIM_HAVE_NCCL)

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "hw/cuda/common.cuh"
#include "hw/host/collective_wait.hpp"
#include "hw/host/exit_watchdog.hpp"

namespace epsim::hw {

constexpr double kDefaultNcclTimeout_s = 120.0;
/// How long ncclCommAbort may take before the process exits without it (it can hang behind a kernel
/// that never returns).
constexpr double kAbortGrace_s = 30.0;

/// The pattern seed of the bytes rank `src` sends to rank `dst`: every pair's data differs, so data
/// delivered to the wrong rank or from the wrong segment fails the check.
inline std::uint64_t pair_seed(int src, int dst) {
  return 0xA2A0000000ull + static_cast<std::uint64_t>(src) * 65536u + static_cast<std::uint64_t>(dst);
}

/// The ranks a multi-GPU benchmark uses: `wanted` (0: every visible GPU); fewer than 2 or more than
/// are visible throws std::runtime_error naming `bench`.
inline int nccl_rank_count(std::int64_t wanted, const std::string& bench) {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  const std::int64_t gpus = wanted > 0 ? wanted : count;
  if (gpus < 2 || gpus > count)
    throw std::runtime_error(bench + " needs at least 2 GPUs (" + std::to_string(count) + " visible, --gpus " +
                             std::to_string(gpus) + ")");
  return static_cast<int>(gpus);
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

}  // namespace epsim::hw

#endif
