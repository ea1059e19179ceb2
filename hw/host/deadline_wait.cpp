#include "hw/host/deadline_wait.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace epsim::hw {

WaitClock WaitClock::steady() {
  WaitClock c;
  c.now_s = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  c.sleep_s = [](double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); };
  return c;
}

DeadlineWait::DeadlineWait(double timeout_s, WaitClock clock, double first_sleep_s, double max_sleep_s)
    : timeout_s_(timeout_s), first_sleep_s_(first_sleep_s), max_sleep_s_(max_sleep_s), clock_(std::move(clock)) {
  if (!(timeout_s > 0)) throw std::invalid_argument("DeadlineWait: the timeout must be > 0 s");
  if (!(first_sleep_s > 0) || !(max_sleep_s >= first_sleep_s))
    throw std::invalid_argument("DeadlineWait: need 0 < first sleep <= max sleep");
  if (!clock_.now_s || !clock_.sleep_s) throw std::invalid_argument("DeadlineWait: clock and sleep are required");
}

WaitResult DeadlineWait::wait(const std::function<PollState()>& poll) const {
  const double start = clock_.now_s();
  double sleep = first_sleep_s_;
  WaitResult r;
  for (;;) {
    const PollState state = poll();
    ++r.polls;
    r.elapsed_s = clock_.now_s() - start;
    if (state == PollState::done) {
      r.status = WaitResult::Status::done;
      return r;
    }
    if (state == PollState::failed) {
      r.status = WaitResult::Status::failed;
      return r;
    }
    if (r.elapsed_s >= timeout_s_) {
      r.status = WaitResult::Status::timed_out;
      return r;
    }
    clock_.sleep_s(std::min(sleep, timeout_s_ - r.elapsed_s));
    sleep = std::min(2 * sleep, max_sleep_s_);
  }
}

}  // namespace epsim::hw
