#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "sim/engine/host_cpu.hpp"

using epsim::EventQueue;
using epsim::HostCpu;
using epsim::Time_ps;

TEST_CASE("HostCpu: tasks run FIFO with their durations") {
  EventQueue q;
  HostCpu cpu(q);
  std::vector<Time_ps> log;
  const auto record = [&](Time_ps s, Time_ps e) {
    log.push_back(s);
    log.push_back(e);
  };
  cpu.submit(3'000'000, record);
  cpu.submit(1'000'000, record);
  q.schedule(10'000'000, [&] { cpu.submit(2'000'000, record); });  // arrives to an idle CPU
  q.schedule(2'000'000, [&] { CHECK(cpu.busy_ps() == 2'000'000); });
  q.run();
  CHECK(log == std::vector<Time_ps>{0, 3'000'000, 3'000'000, 4'000'000, 10'000'000, 12'000'000});
  CHECK(cpu.busy_ps() == 6'000'000);
}

TEST_CASE("HostCpu: a zero-length task completes from an event, not inside submit") {
  EventQueue q;
  HostCpu cpu(q);
  bool done = false;
  cpu.submit(0, [&](Time_ps s, Time_ps e) {
    CHECK(s == 0);
    CHECK(e == 0);
    done = true;
  });
  CHECK_FALSE(done);
  q.run();
  CHECK(done);
  CHECK(cpu.busy_ps() == 0);  // it took no time
  CHECK_THROWS_AS(cpu.submit(-1, nullptr), std::invalid_argument);
}
