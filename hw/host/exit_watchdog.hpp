// A last-resort timer: runs an action on its own thread unless disarmed in time. epsim-hw arms it
// around ncclCommAbort, which can itself hang when a kernel never returns, so that a hung collective
// always ends the process (the action prints the error and calls std::_Exit) instead of waiting forever.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace epsim::hw {

class ExitWatchdog {
 public:
  /// Starts the timer; `on_expiry` runs on the watchdog's thread after `seconds` unless disarm() (or
  /// the destructor) came first. Throws std::invalid_argument on seconds <= 0 or an empty action.
  ExitWatchdog(double seconds, std::function<void()> on_expiry);
  ~ExitWatchdog();
  ExitWatchdog(const ExitWatchdog&) = delete;
  ExitWatchdog& operator=(const ExitWatchdog&) = delete;

  /// Stops the timer and waits for its thread; the action does not run if it has not started.
  void disarm();

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool disarmed_ = false;
  std::thread thread_;
};

}  // namespace epsim::hw
