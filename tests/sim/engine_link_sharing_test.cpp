// Copy Engine copies and EP-backend messages cross the same NVLink ports in the flow network, so they
// share them (FEPLB's outputs returned by Copy Engine while the combine leaves the same GPU). Worked
// by hand on simple_cluster.hpp: NVLink 0.1 byte/ps (100 GB/s) + 1 us, Copy Engine capped at 0.05
// byte/ps with 2 us per copy.
#include <doctest/doctest.h>

#include "sim/replay/sim_context.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

constexpr Time_ps us = kPsPerUs;

struct Ends {
  Time_ps message_ps = -1;
  Time_ps copy_ps = -1;
};

// A 5e5-byte EP message `message_src` -> `message_dst` and a 1e6-byte Copy Engine copy `copy_src` ->
// `copy_dst`, both issued at 0.
Ends race(int message_src, int message_dst, int copy_src, int copy_dst) {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model();
  SimContext ctx(hw, model, 2);
  Ends ends;
  ctx.ep_message(message_src, message_dst, 5e5, Pass::forward, "combine", [&] { ends.message_ps = ctx.now_ps(); });
  ctx.ce_copy(copy_src, copy_dst, 1e6, Pass::forward, "outputs", [&] { ends.copy_ps = ctx.now_ps(); });
  ctx.queue().run();
  return ends;
}

}  // namespace

TEST_CASE("a Copy Engine copy and an EP message on the same NVLink port share it") {
  // The outputs go back GPU 1 -> GPU 0 by Copy Engine while the combine sends GPU 1 -> GPU 0 too. The
  // message moves alone at 0.1 B/ps from 1 us (1e5 bytes by 2 us); from 2 us the copy takes its cap,
  // 0.05 B/ps, and the message the other half: 4e5 bytes in 8 us, done at 10 us (6 us alone). The copy
  // keeps its cap throughout: 2 + 20 us.
  const Ends shared = race(1, 0, 1, 0);
  CHECK(shared.message_ps == 10 * us);
  CHECK(shared.copy_ps == 22 * us);
  // In opposite directions they cross different ports (GPU 1's out and GPU 0's in, against GPU 0's out
  // and GPU 1's in): nothing is shared.
  const Ends apart = race(0, 1, 1, 0);
  CHECK(apart.message_ps == 6 * us);
  CHECK(apart.copy_ps == 22 * us);
}
