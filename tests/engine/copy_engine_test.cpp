#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "sim/engine/copy_engine.hpp"

using epsim::CopyEngine;
using epsim::EventQueue;
using epsim::FlowNetwork;
using epsim::LinkId;
using epsim::Time_ps;

namespace {

struct Done {
  Time_ps started_ps = -1;
  Time_ps ended_ps = -1;
  CopyEngine::DoneCallback callback() {
    return [this](Time_ps s, Time_ps e) {
      started_ps = s;
      ended_ps = e;
    };
  }
};

}  // namespace

TEST_CASE("CopyEngine: copies run one after another, each paying the fixed cost") {
  EventQueue q;
  FlowNetwork net(q);
  const LinkId out = net.add_link("gpu0.nvlink_out", 400);
  const LinkId in = net.add_link("gpu1.nvlink_in", 400);
  // a = 2 us, bw = 100 GB/s (0.1 B/ps) below the 400 GB/s path.
  CopyEngine ce(q, net, 2'000'000, 100);
  Done first, second;
  ce.enqueue({out, in}, 1e6, first.callback());
  ce.enqueue({out, in}, 5e5, second.callback());
  CHECK(ce.queued() == 2);
  q.schedule(5'000'000, [&] { CHECK(ce.busy_ps() == 5'000'000); });
  q.run();
  // first: a + b1 / bw = 2e6 + 1e7; second: 2a + (b1 + b2) / bw = 4e6 + 1.5e7.
  CHECK(first.started_ps == 0);
  CHECK(first.ended_ps == 12'000'000);
  CHECK(second.started_ps == 12'000'000);
  CHECK(second.ended_ps == 19'000'000);
  CHECK(ce.queued() == 0);
  CHECK(ce.busy_ps() == 19'000'000);
  CHECK(ce.bytes_copied() == doctest::Approx(1.5e6));
  CHECK(net.link_bytes(out) == doctest::Approx(1.5e6));
  CHECK(net.link_busy_ps(out) == 15'000'000);  // the fixed costs use no link
}

TEST_CASE("CopyEngine: a small copy waits behind a large one (head-of-line blocking)") {
  EventQueue q;
  FlowNetwork net(q);
  const LinkId to_gpu1 = net.add_link("gpu1.nvlink_in", 400);
  const LinkId to_gpu2 = net.add_link("gpu2.nvlink_in", 400);
  CopyEngine ce(q, net, 2'000'000, 100);
  Done large, small;
  ce.enqueue({to_gpu1}, 1e7, large.callback());
  // Another destination, free link: it still waits for the engine.
  q.schedule(1'000'000, [&] {
    ce.enqueue({to_gpu2}, 1e3, small.callback());
    CHECK(ce.queued() == 2);
  });
  q.run();
  CHECK(large.ended_ps == 2'000'000 + 100'000'000);
  CHECK(small.started_ps == 102'000'000);
  CHECK(small.ended_ps == 102'000'000 + 2'000'000 + 10'000);
}

TEST_CASE("CopyEngine: a copy shares an NVLink port with another flow max-min") {
  EventQueue q;
  FlowNetwork net(q);
  const LinkId port = net.add_link("gpu0.nvlink_out", 400);
  CopyEngine ce(q, net, 2'000'000, 390);
  Done copy, other;
  ce.enqueue({port}, 4e6, copy.callback());
  // Enters its transfer phase at 2 us, with the copy.
  net.start_flow({port}, 2e6, 2'000'000, FlowNetwork::kNoRateCap, other.callback());
  q.run();
  // Both at 200 GB/s (the 390 GB/s engine cap does not bind): the other flow's 2e6 B take 1e7 ps,
  // ending at 12 us. The copy then has 2e6 B left at min(400, 390) = 0.39 B/ps:
  // ceil(2e6 / 0.39) = ceil(5128205.13) = 5128206 ps.
  CHECK(other.ended_ps == 12'000'000);
  CHECK(copy.started_ps == 0);
  CHECK(copy.ended_ps == 12'000'000 + 5'128'206);
}

TEST_CASE("CopyEngine: a copy enqueued from a completion callback starts right away") {
  EventQueue q;
  FlowNetwork net(q);
  const LinkId l = net.add_link("l", 100);
  CopyEngine ce(q, net, 1'000'000, 100);
  Done second;
  ce.enqueue({l}, 1e6, [&](Time_ps, Time_ps) { ce.enqueue({l}, 1e6, second.callback()); });
  q.run();
  CHECK(second.started_ps == 11'000'000);
  CHECK(second.ended_ps == 22'000'000);
  CHECK_THROWS_AS(ce.enqueue({l}, -1, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(ce.enqueue({l + 7}, 1, nullptr), std::out_of_range);
  CHECK(ce.queued() == 0);
}

TEST_CASE("CopyEngine: the next copy starts before the finished copy's callback runs") {
  // A copy leaves the queue at the instant the one before it ends, so that a callback which enqueues
  // more queues it behind the copies already waiting; each copy says when it starts.
  EventQueue q;
  FlowNetwork net(q);
  const LinkId l = net.add_link("l", 100);
  CopyEngine ce(q, net, 1'000'000, 100);
  std::vector<std::string> log;
  const auto note = [&](std::string what) { return [&log, what](Time_ps, Time_ps) { log.push_back(what); }; };
  ce.enqueue({l}, 1e6, note("a done"), [&] { log.push_back("a starts"); });
  ce.enqueue({l}, 1e6, note("b done"), [&] { log.push_back("b starts"); });
  q.run();
  CHECK(log == std::vector<std::string>{"a starts", "b starts", "a done", "b done"});
}
