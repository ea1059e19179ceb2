// ExitWatchdog: the action runs when the timer expires, never when disarmed first.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>

#include "hw/host/exit_watchdog.hpp"

using namespace epsim::hw;

TEST_CASE("ExitWatchdog: disarmed before its delay, the action never runs") {
  std::atomic<bool> ran{false};
  {
    ExitWatchdog w(60.0, [&] { ran = true; });
    w.disarm();
  }
  CHECK_FALSE(ran.load());
  {
    ExitWatchdog w(60.0, [&] { ran = true; });  // the destructor disarms too
  }
  CHECK_FALSE(ran.load());
}

TEST_CASE("ExitWatchdog: not disarmed, the action runs on the watchdog's thread") {
  std::promise<void> fired;
  auto done = fired.get_future();
  ExitWatchdog w(0.001, [&] { fired.set_value(); });
  CHECK(done.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  w.disarm();
}

TEST_CASE("ExitWatchdog refuses a non-positive delay and an empty action") {
  CHECK_THROWS_AS(ExitWatchdog(0.0, [] {}), std::invalid_argument);
  CHECK_THROWS_AS(ExitWatchdog(1.0, nullptr), std::invalid_argument);
}
