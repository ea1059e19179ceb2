#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "sim/engine/sm_pool.hpp"

using epsim::EventQueue;
using epsim::SmPool;
using epsim::Time_ps;

TEST_CASE("SmPool: a communication kernel's SMs slow the running GEMM") {
  EventQueue q;
  SmPool sms(q, 132);
  CHECK(sms.total_sms() == 132);
  Time_ps started = -1, ended = -1;
  sms.acquire(33);
  sms.submit(100'000'000, [&](Time_ps s, Time_ps e) {
    started = s;
    ended = e;
  });
  q.schedule(40'000'000, [&] { sms.release(33); });
  q.run();
  // 0..40 us at 99/132 = 0.75 speed: 30 us of work; the remaining 70 us at full speed: 110 us.
  CHECK(started == 0);
  CHECK(ended == 110'000'000);
  CHECK(sms.held_sms() == 0);
  CHECK(sms.compute_busy_ps() == 110'000'000);
}

TEST_CASE("SmPool: SMs taken in the middle of a kernel") {
  EventQueue q;
  SmPool sms(q, 132);
  Time_ps ended = -1;
  sms.submit(100'000'000, [&](Time_ps, Time_ps e) { ended = e; });
  q.schedule(20'000'000, [&] { sms.acquire(66); });
  q.schedule(60'000'000, [&] { sms.release(66); });
  q.run();
  // 20 us full speed, 40 us at half speed (20 us of work), then the last 60 us: 120 us.
  CHECK(ended == 120'000'000);
}

TEST_CASE("SmPool: kernels run FIFO on the compute stream") {
  EventQueue q;
  SmPool sms(q, 132);
  std::vector<Time_ps> log;
  sms.submit(10'000'000, [&](Time_ps s, Time_ps e) {
    log.push_back(s);
    log.push_back(e);
  });
  sms.submit(5'000'000, [&](Time_ps s, Time_ps e) {
    log.push_back(s);
    log.push_back(e);
  });
  q.run();
  CHECK(log == std::vector<Time_ps>{0, 10'000'000, 10'000'000, 15'000'000});
  CHECK(sms.compute_busy_ps() == 15'000'000);
}

TEST_CASE("SmPool: acquire and release while idle create no events") {
  EventQueue q;
  SmPool sms(q, 132);
  sms.acquire(20);
  sms.acquire(12);
  CHECK(sms.held_sms() == 32);
  sms.release(32);
  CHECK(q.empty());
  CHECK(sms.compute_busy_ps() == 0);
}

TEST_CASE("SmPool: completion rounds up to the next picosecond") {
  EventQueue q;
  SmPool sms(q, 4);
  sms.acquire(1);
  Time_ps ended = -1;
  // 1 ps of full-speed work at 3/4 speed takes 4/3 ps: ends at 2 ps.
  sms.submit(1, [&](Time_ps, Time_ps e) { ended = e; });
  q.run();
  CHECK(ended == 2);
}

TEST_CASE("SmPool: preconditions") {
  EventQueue q;
  SmPool sms(q, 132);
  CHECK_THROWS_AS(sms.acquire(132), std::logic_error);  // the stream must keep at least one SM
  sms.acquire(131);
  CHECK_THROWS_AS(sms.acquire(1), std::logic_error);
  CHECK_THROWS_AS(sms.release(132), std::logic_error);
  CHECK_THROWS_AS(sms.acquire(-1), std::logic_error);
  CHECK_THROWS_AS(sms.submit(-5, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(SmPool(q, 0), std::invalid_argument);
}
