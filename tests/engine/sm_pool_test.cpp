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

TEST_CASE("SmPool: HBM pressure slows a memory-bound kernel, not a compute-bound one") {
  EventQueue q;
  SmPool pool(q, 100);
  Time_ps memory_bound_end = 0, compute_bound_end = 0;
  // Copies take half of HBM bandwidth from 10 us to 30 us.
  q.schedule(10 * epsim::kPsPerUs, [&] { pool.set_hbm_pressure(0.5); });
  q.schedule(30 * epsim::kPsPerUs, [&] { pool.set_hbm_pressure(0.0); });
  // A 40 us kernel that needs all of HBM: 10 us at full speed, 20 us at half (10 us of work), then the
  // remaining 20 us at full speed: ends at 50 us.
  pool.submit(40 * epsim::kPsPerUs, [&](Time_ps, Time_ps end) { memory_bound_end = end; }, 1.0);
  // Then a 40 us kernel needing a quarter of HBM: (1 - 0.5) / 0.25 >= 1, so it never slows: 50 + 40.
  q.schedule(55 * epsim::kPsPerUs, [&] { pool.set_hbm_pressure(0.5); });
  pool.submit(40 * epsim::kPsPerUs, [&](Time_ps, Time_ps end) { compute_bound_end = end; }, 0.25);
  q.run();
  CHECK(memory_bound_end == 50 * epsim::kPsPerUs);
  CHECK(compute_bound_end == 90 * epsim::kPsPerUs);
}

TEST_CASE("SmPool: a kernel that finds no HBM bandwidth left keeps 5% of its speed") {
  EventQueue q;
  SmPool pool(q, 100);
  Time_ps ends[2] = {0, 0};
  // Copies take all of HBM: a kernel that needs all of it would stop; it keeps 5%, so 1 us of work
  // takes 20 us.
  pool.set_hbm_pressure(1.0);
  pool.submit(1'000'000, [&](Time_ps, Time_ps end) { ends[0] = end; }, 1.0);
  // Then 99% taken from a kernel needing half: (1 - 0.99) / 0.5 = 2% of its speed, held at 5%: 20 us more.
  q.schedule(20'000'000, [&] { pool.set_hbm_pressure(0.99); });
  pool.submit(1'000'000, [&](Time_ps, Time_ps end) { ends[1] = end; }, 0.5);
  q.run();
  CHECK(ends[0] == 20'000'000);
  CHECK(ends[1] == 40'000'000);
}
