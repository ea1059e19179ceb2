// Waiting for asynchronous work with a deadline. NCCL's collectives can hang forever (a peer that never
// posts its half of an exchange, a broken link); a plain cudaStreamSynchronize would then hang epsim-hw
// with it. Instead the caller polls (cudaStreamQuery, ncclCommGetAsyncError) through DeadlineWait,
// which sleeps between polls with a growing interval and gives up once the timeout has passed, so the
// caller can abort the communicators (ncclCommAbort) and fail with a clear error.
// The clock and the sleep are injected: the tests drive the loop with a fake clock, the runner with
// std::chrono::steady_clock.
#pragma once

#include <cstddef>
#include <functional>

namespace epsim::hw {

enum class PollState { pending, done, failed };

struct WaitResult {
  enum class Status { done, failed, timed_out };
  Status status = Status::done;
  double elapsed_s = 0;  ///< clock time from the start of wait() to the last poll
  std::size_t polls = 0;
};

struct WaitClock {
  std::function<double()> now_s;        ///< monotonic seconds
  std::function<void(double)> sleep_s;  ///< sleeps about that many seconds
  /// std::chrono::steady_clock and std::this_thread::sleep_for.
  static WaitClock steady();
};

class DeadlineWait {
 public:
  /// Throws std::invalid_argument unless 0 < timeout_s, 0 < first_sleep_s <= max_sleep_s.
  DeadlineWait(double timeout_s, WaitClock clock, double first_sleep_s = 20e-6, double max_sleep_s = 1e-3);

  /// Polls until `poll` answers done or failed, or the timeout has passed since the call. The first poll
  /// is immediate; the sleeps between polls double from first_sleep_s up to max_sleep_s and never run past
  /// the deadline. Work that finishes exactly at the deadline counts as done (the poll comes first).
  WaitResult wait(const std::function<PollState()>& poll) const;

  double timeout_s() const { return timeout_s_; }

 private:
  double timeout_s_, first_sleep_s_, max_sleep_s_;
  WaitClock clock_;
};

}  // namespace epsim::hw
