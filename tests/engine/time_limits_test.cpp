// Conversions to integer picoseconds never overflow: beyond the simulation horizon (1e18 ps) they
// throw TimeOverflow, which the replay reports as an input error; below it they are exact.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "sim/core/time.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/flow_network.hpp"
#include "sim/engine/sm_pool.hpp"
#include "sim/hardware/gemm_cost.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

TEST_CASE("us_to_ps and checked_ceil_ps: exact within the horizon, TimeOverflow beyond") {
  CHECK(us_to_ps(1e6) == 1'000'000'000'000);       // the largest accepted latency: one second
  CHECK(us_to_ps(1e12) == kMaxTime_ps);             // the horizon itself
  CHECK(us_to_ps(-2.5) == -2'500'000);
  CHECK_THROWS_AS(us_to_ps(1e300), TimeOverflow);   // was llround of 1e306: undefined behaviour
  CHECK_THROWS_AS(us_to_ps(std::nan("")), TimeOverflow);
  CHECK(checked_ceil_ps(2.1, "x") == 3);
  CHECK_THROWS_AS(checked_ceil_ps(std::numeric_limits<double>::infinity(), "x"), TimeOverflow);
  CHECK_THROWS_WITH(checked_ceil_ps(2e18, "a transfer time"),
                    "a transfer time of 2e+06 s is beyond the simulation horizon of 1e+06 s (1e18 ps)");
  // 1 GB at the smallest accepted bandwidth (0.001 GB/s = 1e-6 bytes/ps): 1e15 ps.
  CHECK(transfer_time_ps(1e9, 1e-3) == 1'000'000'000'000'000);
  CHECK_THROWS_AS(transfer_time_ps(1e13, 1e-3), TimeOverflow);  // 1e19 ps
}

TEST_CASE("checked_ceil_ps rounds up as std::ceil does, over the whole horizon") {
  // Whole numbers, values just off them, halves, both signs, the horizon and where doubles stop
  // holding fractions (2^52) or odd integers (2^53), and a spread of random magnitudes.
  std::vector<double> values = {0.0, -0.0, 1e-300, -1e-300, 0.5, -0.5, 1.0, -1.0, 2.1, -2.1, 1e18, -1e18,
                                4503599627370495.5, 4503599627370496.0, 9007199254740993.0, -4503599627370495.5};
  for (double v = 1.0; v < 1e18; v *= 3.7) {
    for (const double x : {v, std::nextafter(v, 0.0), std::nextafter(v, 2 * v), v + 0.25})
      for (const double s : {x, -x}) values.push_back(s);
  }
  std::uint64_t state = 12345;
  for (int i = 0; i < 20'000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double mantissa = static_cast<double>(state >> 11) / 9007199254740992.0;  // [0, 1)
    const double x = mantissa * std::pow(10.0, static_cast<double>(i % 19));
    values.push_back(i % 2 == 0 ? x : -x);
  }
  for (const double x : values) {
    CAPTURE(x);
    CHECK(checked_ceil_ps(x, "x") == static_cast<Time_ps>(std::ceil(x)));
  }
}

TEST_CASE("EventQueue: events beyond the horizon are refused before any overflow") {
  EventQueue q;
  CHECK_NOTHROW(q.schedule(kMaxTime_ps, [] {}));
  CHECK_THROWS_AS(q.schedule(kMaxTime_ps + 1, [] {}), TimeOverflow);
  // now + delay would overflow int64: refused, not wrapped into the past.
  CHECK_THROWS_AS(q.schedule_in(std::numeric_limits<Time_ps>::max(), [] {}), TimeOverflow);
  q.run();
  CHECK(q.now_ps() == kMaxTime_ps);
}

TEST_CASE("SmPool: a 10 s kernel on 1024 SMs runs (work x SMs x 1000 exceeds int64)") {
  // 1e13 ps x 1024 SMs x 1000 = 1.024e19 > 9.22e18: this kernel used to be refused as "out of range".
  EventQueue q;
  SmPool pool(q, 1024);
  Time_ps ended = -1;
  pool.submit(10'000'000'000'000, [&](Time_ps, Time_ps end) { ended = end; });
  q.run();
  CHECK(ended == 10'000'000'000'000);

  // With 256 of 1024 SMs held throughout, it runs at 768/1024 of its speed: 1e13 * 4 / 3 rounded up.
  EventQueue q2;
  SmPool pool2(q2, 1024);
  pool2.acquire(256);
  pool2.submit(10'000'000'000'000, [&](Time_ps, Time_ps end) { ended = end; });
  q2.run();
  CHECK(ended == 13'333'333'333'334);

  EventQueue q3;
  SmPool pool3(q3, 100);
  CHECK_THROWS_AS(pool3.submit(kMaxTime_ps + 1, {}), TimeOverflow);
}

TEST_CASE("FlowNetwork: a transfer beyond the horizon throws TimeOverflow instead of wrapping") {
  EventQueue q;
  FlowNetwork net(q);
  const LinkId link = net.add_link("slow", 1e-3);  // 1e-6 bytes per ps
  // 1e13 bytes take 1e19 ps: the cast to int64 used to be undefined (and land in the past).
  net.start_flow({link}, 1e13, 0, FlowNetwork::kNoRateCap, nullptr);
  CHECK_THROWS_AS(q.run(), TimeOverflow);

  EventQueue q2;
  FlowNetwork net2(q2);
  const LinkId link2 = net2.add_link("slow", 1e-3);
  Time_ps ended = -1;
  // 1e9 bytes: 1e15 ps (+1 for the flow model's completion rounding at most).
  net2.start_flow({link2}, 1e9, 0, FlowNetwork::kNoRateCap, [&](Time_ps, Time_ps end) { ended = end; });
  q2.run();
  CHECK(ended >= 1'000'000'000'000'000 - 1);
  CHECK(ended <= 1'000'000'000'000'000 + 1);
}

TEST_CASE("GemmCost: a GEMM beyond the horizon throws TimeOverflow") {
  HardwareSpec hw = test::simple_hardware();
  hw.gpu.bf16_peak_TFLOPs = 1e-3;  // the smallest accepted: 1e-3 FLOP per ps
  const ModelSpec model = test::simple_model();  // 2e6 FLOPs per token
  const GemmCost cost(hw, model);
  // 1000 tokens: 2e9 FLOPs / 1e-3 = 2e12 ps.
  CHECK(cost.grouped_time_ps({1000}, model.expert_ffn_size) == 2'000'000'000'000);
  // 1e9 tokens: 2e15 FLOPs / 1e-3 = 2e18 ps, beyond the horizon (was an int64 that SmPool refused
  // with an internal error).
  CHECK_THROWS_AS(cost.grouped_time_ps({1'000'000'000}, model.expert_ffn_size), TimeOverflow);
}
