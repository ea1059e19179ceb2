#include "hw/host/exit_watchdog.hpp"

#include <chrono>
#include <stdexcept>

namespace epsim::hw {

ExitWatchdog::ExitWatchdog(double seconds, std::function<void()> on_expiry) {
  if (!(seconds > 0)) throw std::invalid_argument("ExitWatchdog: the delay must be > 0 s");
  if (!on_expiry) throw std::invalid_argument("ExitWatchdog: no action");
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  thread_ = std::thread([this, deadline, action = std::move(on_expiry)] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (wake_.wait_until(lock, deadline, [this] { return disarmed_; })) return;
    lock.unlock();
    action();
  });
}

ExitWatchdog::~ExitWatchdog() { disarm(); }

void ExitWatchdog::disarm() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    disarmed_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace epsim::hw
