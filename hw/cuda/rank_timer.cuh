// Times one collective on every NCCL rank: warm-ups, then `reps` repetitions each framed by a CUDA
// event pair on every rank's stream. A repetition's time is its slowest rank's, since the collective
// is done only when every rank is. Used by bench alltoall and bench ep_comm.
#pragma once

#if defined(EPSIM_HAVE_NCCL)

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "hw/cuda/common.cuh"
#include "hw/cuda/nccl_ranks.cuh"

namespace epsim::hw {

class RankTimer {
 public:
  /// Creates `reps` event pairs on each of the `gpus` devices.
  RankTimer(int gpus, int reps) : gpus_(gpus), reps_(reps), start_(gpus), stop_(gpus) {
    for (int g = 0; g < gpus; ++g) {
      CUDA_CHECK(cudaSetDevice(g));
      start_[g].resize(static_cast<std::size_t>(reps));
      stop_[g].resize(static_cast<std::size_t>(reps));
      for (int r = 0; r < reps; ++r) {
        CUDA_CHECK(cudaEventCreate(&start_[g][r]));
        CUDA_CHECK(cudaEventCreate(&stop_[g][r]));
      }
    }
  }
  ~RankTimer() {
    for (int g = 0; g < gpus_; ++g) {
      CUDA_CHECK_CLEANUP(cudaSetDevice(g));
      for (int r = 0; r < reps_; ++r) {
        CUDA_CHECK_CLEANUP(cudaEventDestroy(start_[g][r]));
        CUDA_CHECK_CLEANUP(cudaEventDestroy(stop_[g][r]));
      }
    }
  }
  RankTimer(const RankTimer&) = delete;
  RankTimer& operator=(const RankTimer&) = delete;

  /// Runs `exchange(label)` `warmup` times, then once per repetition between the events, waiting on
  /// the ranks' streams under their deadline; returns each repetition's slowest-rank time in us.
  std::vector<double> time_us(NcclRanks& ranks, int warmup, const std::function<void(const std::string&)>& exchange,
                              const std::string& what) {
    for (int i = 0; i < warmup; ++i) exchange(what + ", warm-up");
    ranks.await_streams(what + ", warm-up");
    for (int r = 0; r < reps_; ++r) {
      record(start_, r, ranks);
      exchange(what + ", repetition " + std::to_string(r));
      record(stop_, r, ranks);
    }
    ranks.await_streams(what + ", timed repetitions");
    std::vector<double> times;
    for (int r = 0; r < reps_; ++r) {
      double worst = 0;
      for (int g = 0; g < gpus_; ++g) {
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start_[g][r], stop_[g][r]));
        worst = std::max(worst, ms * 1000.0);
      }
      times.push_back(worst);
    }
    return times;
  }

 private:
  void record(std::vector<std::vector<cudaEvent_t>>& events, int r, NcclRanks& ranks) {
    for (int g = 0; g < gpus_; ++g) {
      CUDA_CHECK(cudaSetDevice(g));
      CUDA_CHECK(cudaEventRecord(events[g][r], ranks.stream(g)));
    }
  }

  int gpus_;
  int reps_;
  std::vector<std::vector<cudaEvent_t>> start_, stop_;
};

}  // namespace epsim::hw

#endif  // EPSIM_HAVE_NCCL
