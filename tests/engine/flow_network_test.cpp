#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/engine/flow_network.hpp"
#include "sim/hardware/topology.hpp"

using epsim::EventQueue;
using epsim::FlowId;
using epsim::FlowNetwork;
using epsim::LinkId;
using epsim::Time_ps;

namespace {

constexpr double kNoCap = FlowNetwork::kNoRateCap;

// Records a flow's callback.
struct Done {
  Time_ps started_ps = -1;
  Time_ps ended_ps = -1;
  FlowNetwork::DoneCallback callback() {
    return [this](Time_ps s, Time_ps e) {
      started_ps = s;
      ended_ps = e;
    };
  }
};

}  // namespace

TEST_CASE("FlowNetwork: one flow over one link takes latency + bytes / bandwidth") {
  EventQueue q;
  FlowNetwork net(q);
  const LinkId l = net.add_link("l", 100);
  CHECK(net.link_count() == 1);
  CHECK(net.link_name(l) == "l");
  CHECK(net.link_capacity_GBps(l) == 100);
  Done d;
  const FlowId f = net.start_flow({l}, 1e6, 2'000'000, kNoCap, d.callback());
  CHECK(net.active_flows() == 1);
  q.schedule(1'000'000, [&] { CHECK(net.flow_rate_GBps(f) == 0); });  // still in its latency
  q.schedule(7'000'000, [&] {
    CHECK(net.flow_rate_GBps(f) == doctest::Approx(100));
    CHECK(net.link_bytes(l) == doctest::Approx(5e5));
    CHECK(net.link_busy_ps(l) == 5'000'000);
  });
  q.run();
  // 2 us latency + 1e6 B / (100 GB/s = 0.1 B/ps) = 2e6 + 1e7 ps.
  CHECK(d.started_ps == 0);
  CHECK(d.ended_ps == 12'000'000);
  CHECK(net.active_flows() == 0);
  CHECK(net.flow_rate_GBps(f) == 0);
  CHECK(net.link_bytes(l) == doctest::Approx(1e6));
  CHECK(net.link_busy_ps(l) == 10'000'000);
}

TEST_CASE("FlowNetwork: equal flows on one link share it and end together") {
  EventQueue q;
  FlowNetwork net(q);
  const LinkId l = net.add_link("l", 100);
  Done a, b;
  const FlowId fa = net.start_flow({l}, 1e6, 1'000'000, kNoCap, a.callback());
  const FlowId fb = net.start_flow({l}, 1e6, 1'000'000, kNoCap, b.callback());
  q.schedule(5'000'000, [&] {
    CHECK(net.flow_rate_GBps(fa) == doctest::Approx(50));
    CHECK(net.flow_rate_GBps(fb) == doctest::Approx(50));
  });
  q.run();
  // Each at 0.05 B/ps: 1e6 B take 2e7 ps after the 1 us latency.
  CHECK(a.ended_ps == 21'000'000);
  CHECK(b.ended_ps == 21'000'000);
  CHECK(net.link_bytes(l) == doctest::Approx(2e6));
  CHECK(net.link_busy_ps(l) == 20'000'000);
}

TEST_CASE("FlowNetwork: when the smaller flow ends the other speeds up") {
  EventQueue q;
  FlowNetwork net(q);
  const LinkId l = net.add_link("l", 100);
  Done small, large;
  const FlowId fl = net.start_flow({l}, 3e6, 1'000'000, kNoCap, large.callback());
  net.start_flow({l}, 1e6, 1'000'000, kNoCap, small.callback());
  q.schedule(30'000'000, [&] { CHECK(net.flow_rate_GBps(fl) == doctest::Approx(100)); });
  q.run();
  // Both at 50 GB/s: the small one is done 2e7 ps after entering (t = 21 us), when the large one has
  // 2e6 B left; alone at 0.1 B/ps that takes 2e7 ps more: t = 41 us = latency + (b1 + b2) / bw.
  CHECK(small.ended_ps == 21'000'000);
  CHECK(large.ended_ps == 41'000'000);
  CHECK(large.started_ps == 0);
}

TEST_CASE("FlowNetwork: classic max-min example over two links") {
  EventQueue q;
  FlowNetwork net(q);
  SUBCASE("equal capacities: every flow gets half a link") {
    const LinkId a = net.add_link("A", 10);
    const LinkId b = net.add_link("B", 10);
    const FlowId f1 = net.start_flow({a, b}, 1e9, 0, kNoCap, nullptr);
    const FlowId f2 = net.start_flow({a}, 1e9, 0, kNoCap, nullptr);
    const FlowId f3 = net.start_flow({b}, 1e9, 0, kNoCap, nullptr);
    bool probed = false;
    q.schedule(1, [&] {
      CHECK(net.flow_rate_GBps(f1) == doctest::Approx(5));
      CHECK(net.flow_rate_GBps(f2) == doctest::Approx(5));
      CHECK(net.flow_rate_GBps(f3) == doctest::Approx(5));
      probed = true;
    });
    while (!probed && q.run_next()) {
    }
    CHECK(probed);
  }
  SUBCASE("B is the bottleneck of flow 1, flow 2 takes the rest of A") {
    // A = 10 GB/s carries f1, f2; B = 4 GB/s carries f1, f3. Filling: B saturates first at 2 each,
    // so f1 = f3 = 2 and f2 gets A's remaining 8.
    const LinkId a = net.add_link("A", 10);
    const LinkId b = net.add_link("B", 4);
    Done d1, d2, d3;
    const FlowId f1 = net.start_flow({a, b}, 6e4, 0, kNoCap, d1.callback());
    const FlowId f2 = net.start_flow({a}, 1.6e5, 0, kNoCap, d2.callback());
    const FlowId f3 = net.start_flow({b}, 2e4, 0, kNoCap, d3.callback());
    q.schedule(5'000'000, [&] {
      CHECK(net.flow_rate_GBps(f1) == doctest::Approx(2));
      CHECK(net.flow_rate_GBps(f2) == doctest::Approx(8));
      CHECK(net.flow_rate_GBps(f3) == doctest::Approx(2));
    });
    // f3: 2e4 B at 0.002 B/ps ends at 10 us. Then f1 has 4e4 B left and f2 8e4 B. B alone limits
    // f1 to 4, so f2 gets 6: f1 ends 4e4 / 0.004 = 10 us later (20 us), f2 has moved 6e4 by then;
    // its last 2e4 B at the full 10 GB/s take 2 us: 22 us.
    q.schedule(15'000'000, [&] {
      CHECK(net.flow_rate_GBps(f1) == doctest::Approx(4));
      CHECK(net.flow_rate_GBps(f2) == doctest::Approx(6));
    });
    q.schedule(21'000'000, [&] { CHECK(net.flow_rate_GBps(f2) == doctest::Approx(10)); });
    q.run();
    CHECK(d3.ended_ps == 10'000'000);
    CHECK(d1.ended_ps == 20'000'000);
    CHECK(d2.ended_ps == 22'000'000);
    CHECK(net.link_bytes(a) == doctest::Approx(6e4 + 1.6e5));
    CHECK(net.link_bytes(b) == doctest::Approx(6e4 + 2e4));
    CHECK(net.link_busy_ps(a) == 22'000'000);
    CHECK(net.link_busy_ps(b) == 20'000'000);
  }
}

TEST_CASE("FlowNetwork: a rate cap below the fair share binds, the others share the rest") {
  EventQueue q;
  FlowNetwork net(q);
  const LinkId l = net.add_link("l", 100);
  Done capped, a, b;
  const FlowId fc = net.start_flow({l}, 1e5, 0, 10, capped.callback());
  const FlowId fa = net.start_flow({l}, 9e5, 0, kNoCap, a.callback());
  const FlowId fb = net.start_flow({l}, 4.5e5, 0, 60, b.callback());  // cap above its share: no effect
  q.schedule(1'000'000, [&] {
    CHECK(net.flow_rate_GBps(fc) == doctest::Approx(10));
    CHECK(net.flow_rate_GBps(fa) == doctest::Approx(45));
    CHECK(net.flow_rate_GBps(fb) == doctest::Approx(45));
  });
  q.run();
  // 1e5 B at 0.01 B/ps and 4.5e5 B at 0.045 B/ps both take 10 us; fa then has 4.5e5 B left alone
  // on the link: 4.5e6 ps more.
  CHECK(capped.ended_ps == 10'000'000);
  CHECK(b.ended_ps == 10'000'000);
  CHECK(a.ended_ps == 14'500'000);
}

TEST_CASE("FlowNetwork: a capped flow over no links runs at its cap") {
  EventQueue q;
  FlowNetwork net(q);
  Done d;
  net.start_flow({}, 1e6, 3'000'000, 50, d.callback());
  q.run();
  CHECK(d.ended_ps == 3'000'000 + 20'000'000);
}

TEST_CASE("FlowNetwork: zero-byte and link-less uncapped flows complete after their latency") {
  EventQueue q;
  FlowNetwork net(q);
  const LinkId l = net.add_link("l", 100);
  Done zero, bare, immediate;
  bool inside_start = true;
  net.start_flow({l}, 0, 5'000'000, kNoCap, zero.callback());
  net.start_flow({}, 1e6, 4'000'000, kNoCap, bare.callback());
  net.start_flow({l}, 0, 0, kNoCap, [&](Time_ps s, Time_ps e) {
    CHECK_FALSE(inside_start);  // never called back from inside start_flow
    immediate.started_ps = s;
    immediate.ended_ps = e;
  });
  inside_start = false;
  q.run();
  CHECK(zero.ended_ps == 5'000'000);
  CHECK(bare.ended_ps == 4'000'000);
  CHECK(immediate.ended_ps == 0);
  CHECK(net.link_busy_ps(l) == 0);
  CHECK(net.link_bytes(l) == 0);
}

TEST_CASE("FlowNetwork: flows on disjoint links leave each other's completion events alone") {
  EventQueue q;
  FlowNetwork net(q);
  const LinkId x = net.add_link("x", 100);
  const LinkId y = net.add_link("y", 100);
  std::vector<std::string> order;
  net.start_flow({x}, 1e6, 0, kNoCap, [&](Time_ps, Time_ps e) {
    CHECK(e == 10'000'000);
    order.push_back("x");
  });
  // Scheduled after x's completion event exists, for the same instant: it must run after x, which
  // only holds if x's event is never rescheduled (a reschedule takes a fresh sequence number).
  q.schedule(1, [&] { q.schedule(10'000'000, [&] { order.push_back("marker"); }); });
  q.schedule(3'000'000, [&] {
    net.start_flow({y}, 5e5, 0, kNoCap, [&](Time_ps, Time_ps e) {
      CHECK(e == 8'000'000);
      order.push_back("y");
    });
  });
  q.run();
  CHECK(order == std::vector<std::string>{"y", "x", "marker"});
}

TEST_CASE("FlowNetwork: per-link bytes and busy time") {
  EventQueue q;
  FlowNetwork net(q);
  const LinkId l = net.add_link("l", 100);
  const LinkId m = net.add_link("m", 50);
  net.start_flow({l}, 1e6, 2'000'000, kNoCap, nullptr);  // busy on l 2..12 us
  q.schedule(20'000'000, [&] { net.start_flow({l, m}, 1e6, 0, kNoCap, nullptr); });  // 20..40 us at 50
  q.schedule(30'000'000, [&] {
    CHECK(net.link_bytes(l) == doctest::Approx(1.5e6));
    CHECK(net.link_busy_ps(l) == 20'000'000);
    CHECK(net.link_busy_ps(m) == 10'000'000);
  });
  q.run();
  CHECK(q.now_ps() == 40'000'000);
  CHECK(net.link_bytes(l) == doctest::Approx(2e6));
  CHECK(net.link_bytes(m) == doctest::Approx(1e6));
  CHECK(net.link_busy_ps(l) == 30'000'000);
  CHECK(net.link_busy_ps(m) == 20'000'000);
}

TEST_CASE("FlowNetwork: callbacks may start new flows on the same links") {
  EventQueue q;
  FlowNetwork net(q);
  const LinkId l = net.add_link("l", 100);
  Done second;
  net.start_flow({l}, 1e6, 0, kNoCap, [&](Time_ps, Time_ps) { net.start_flow({l}, 1e6, 0, kNoCap, second.callback()); });
  q.run();
  CHECK(second.started_ps == 10'000'000);
  CHECK(second.ended_ps == 20'000'000);
}

TEST_CASE("FlowNetwork: bad arguments") {
  EventQueue q;
  FlowNetwork net(q);
  CHECK_THROWS_AS(net.add_link("zero", 0), std::invalid_argument);
  const LinkId l = net.add_link("l", 1);
  CHECK_THROWS_AS(net.start_flow({l + 1}, 1, 0, kNoCap, nullptr), std::out_of_range);
  CHECK_THROWS_AS(net.start_flow({l}, -1, 0, kNoCap, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(net.start_flow({l}, 1, -1, kNoCap, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(net.start_flow({l}, 1, 0, 0, nullptr), std::invalid_argument);
  // A flow crosses at most kMaxFlowLinks (0xfffe) links: its bounds (one a link, one for a cap)
  // count in 16 bits.
  CHECK(epsim::kMaxFlowLinks == 0xfffe);
  CHECK_THROWS_AS(net.start_flow(std::vector<LinkId>(0xffff, l), 1, 0, kNoCap, nullptr), std::invalid_argument);
  CHECK(net.active_flows() == 0);
}

TEST_CASE("per_link and local refuse a route of more than kMaxFlowLinks links themselves") {
  // FlowNetwork checks first; the models hold the same bound for their own callers. A route of
  // 0xffff links with a cap would need 0x10000 bounds, one more than 16 bits count.
  const std::vector<int> route(epsim::kMaxFlowLinks + 1, 0);
  EventQueue q;
  epsim::PerLinkSharing per_link(q);
  per_link.add_link(1);
  CHECK_THROWS_AS(per_link.start_flow(route, 1, 0, 1, nullptr), std::length_error);
  epsim::GroupSharing local(q);
  local.add_link(1, -1);
  CHECK_THROWS_AS(local.start_flow(route, 1, 0, 1, nullptr), std::length_error);
  CHECK(per_link.active_flows() == 0);
  CHECK(local.active_flows() == 0);
}

// ---- cross-check against an independent, naive fluid simulation -------------------------------

namespace {

struct RefFlow {
  std::vector<LinkId> links;
  double bytes;
  Time_ps start_ps;
  Time_ps latency_ps;
  double cap_GBps;
};

// Textbook progressive filling, recomputed from scratch: O(rounds * (flows + links)).
std::vector<double> reference_rates(const std::vector<double>& capacity, const std::vector<RefFlow>& flows,
                                    const std::vector<int>& active) {
  std::vector<double> rate(flows.size(), 0);
  std::vector<double> residual = capacity;
  std::vector<bool> frozen(flows.size(), true);
  for (int f : active) frozen[static_cast<std::size_t>(f)] = false;
  std::size_t left = active.size();
  while (left > 0) {
    std::vector<int> count(capacity.size(), 0);
    for (int f : active) {
      if (frozen[static_cast<std::size_t>(f)]) continue;
      for (LinkId l : flows[static_cast<std::size_t>(f)].links) ++count[static_cast<std::size_t>(l)];
    }
    double level = std::numeric_limits<double>::infinity();
    for (std::size_t l = 0; l < capacity.size(); ++l) {
      if (count[l] > 0) level = std::min(level, residual[l] / count[l]);
    }
    for (int f : active) {
      if (!frozen[static_cast<std::size_t>(f)]) level = std::min(level, flows[static_cast<std::size_t>(f)].cap_GBps);
    }
    std::vector<int> freezing;
    for (int f : active) {
      if (frozen[static_cast<std::size_t>(f)]) continue;
      const RefFlow& flow = flows[static_cast<std::size_t>(f)];
      bool stop = flow.cap_GBps <= level * (1 + 1e-12);
      for (LinkId l : flow.links) {
        stop = stop || residual[static_cast<std::size_t>(l)] / count[static_cast<std::size_t>(l)] <= level * (1 + 1e-12);
      }
      if (stop) freezing.push_back(f);
    }
    for (int f : freezing) {
      frozen[static_cast<std::size_t>(f)] = true;
      rate[static_cast<std::size_t>(f)] = level;
      for (LinkId l : flows[static_cast<std::size_t>(f)].links) residual[static_cast<std::size_t>(l)] -= level;
      --left;
    }
  }
  return rate;
}

// Continuous-time fluid simulation with the same semantics; returns completion times (ps, real).
std::vector<double> reference_ends(const std::vector<double>& capacity, const std::vector<RefFlow>& flows) {
  const std::size_t n = flows.size();
  std::vector<double> remaining(n), end(n, -1);
  for (std::size_t f = 0; f < n; ++f) remaining[f] = flows[f].bytes;
  double t = 0;
  while (std::count(end.begin(), end.end(), -1.0) > 0) {
    std::vector<int> active;
    double next_entry = std::numeric_limits<double>::infinity();
    for (std::size_t f = 0; f < n; ++f) {
      if (end[f] >= 0) continue;
      const double entry = static_cast<double>(flows[f].start_ps + flows[f].latency_ps);
      if (entry <= t) {
        active.push_back(static_cast<int>(f));
      } else {
        next_entry = std::min(next_entry, entry);
      }
    }
    const std::vector<double> rate = reference_rates(capacity, flows, active);
    double step = next_entry - t;
    for (int f : active) step = std::min(step, remaining[static_cast<std::size_t>(f)] / (rate[static_cast<std::size_t>(f)] * 1e-3));
    t += step;
    for (int f : active) {
      const std::size_t i = static_cast<std::size_t>(f);
      remaining[i] -= rate[i] * 1e-3 * step;
      if (remaining[i] <= 1e-6 * flows[i].bytes) end[i] = t;
    }
  }
  return end;
}

// `coarse` draws from few distinct values, so that many flows tie (equal rates, simultaneous
// completions); otherwise values are spread out and rates diverge.
void check_against_reference(std::uint64_t seed, bool coarse) {
  std::uint64_t rng = seed * 7919;
  const auto next = [&] {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>(rng >> 33);
  };
  EventQueue q;
  FlowNetwork net(q);
  std::vector<double> capacity;
  const int links = 3 + next() % 5;
  for (int l = 0; l < links; ++l) {
    // Some links far faster than the rest stay unsaturated: traffic on them must not couple flows.
    capacity.push_back(coarse ? 100.0 * (1 + next() % 2) : next() % 4 == 0 ? 2000.0 : 10.0 * (1 + next() % 20));
    net.add_link("l" + std::to_string(l), capacity.back());
  }
  std::vector<RefFlow> flows;
  const int count = 10 + next() % 30;
  for (int f = 0; f < count; ++f) {
    RefFlow flow;
    const int hops = 1 + next() % 3;
    for (int h = 0; h < hops; ++h) {
      const LinkId l = next() % links;
      if (std::find(flow.links.begin(), flow.links.end(), l) == flow.links.end()) flow.links.push_back(l);
    }
    flow.bytes = coarse ? 1e5 * (1 + next() % 2) : 1e4 * (1 + next() % 1000);
    flow.start_ps = static_cast<Time_ps>(next() % (coarse ? 3 : 50)) * 1'000'000;
    flow.latency_ps = static_cast<Time_ps>(next() % 3) * 500'000;
    flow.cap_GBps = next() % 4 == 0 ? (coarse ? 50.0 : 5.0 * (1 + next() % 20)) : kNoCap;
    flows.push_back(flow);
  }
  std::vector<Time_ps> ended(flows.size(), -1);
  std::vector<FlowId> ids(flows.size(), -1);
  // Probes first, so that at equal times they run before flows start or end (those were then
  // not yet started / still transferring in both models).
  std::vector<Time_ps> probes;
  for (int p = 0; p < 60; ++p) probes.push_back(static_cast<Time_ps>(p) * 3'000'000 + 123'457);
  for (Time_ps at : probes) {
    q.schedule(at, [&, at] {
      std::vector<int> active;
      for (std::size_t f = 0; f < flows.size(); ++f) {
        if (flows[f].start_ps + flows[f].latency_ps < at && ended[f] < 0) active.push_back(static_cast<int>(f));
      }
      const std::vector<double> expect = reference_rates(capacity, flows, active);
      for (int f : active) {
        CHECK(net.flow_rate_GBps(ids[static_cast<std::size_t>(f)]) ==
              doctest::Approx(expect[static_cast<std::size_t>(f)]).epsilon(1e-9));
      }
    });
  }
  for (std::size_t f = 0; f < flows.size(); ++f) {
    q.schedule(flows[f].start_ps, [&, f] {
      ids[f] = net.start_flow(flows[f].links, flows[f].bytes, flows[f].latency_ps, flows[f].cap_GBps,
                              [&, f](Time_ps s, Time_ps e) {
                                CHECK(s == flows[f].start_ps);
                                ended[f] = e;
                              });
    });
  }
  q.run();
  const std::vector<double> expect = reference_ends(capacity, flows);
  for (std::size_t f = 0; f < flows.size(); ++f) {
    INFO("seed " << seed << " flow " << f);
    // Each completion is rounded up to a whole picosecond; the rounding ripples through later
    // rates, so allow a few ps per event.
    CHECK(std::fabs(static_cast<double>(ended[f]) - expect[f]) <= 2.0 * static_cast<double>(flows.size()));
  }
  std::vector<double> carried(capacity.size(), 0);
  for (const RefFlow& flow : flows) {
    for (LinkId l : flow.links) carried[static_cast<std::size_t>(l)] += flow.bytes;
  }
  for (std::size_t l = 0; l < capacity.size(); ++l) {
    CHECK(net.link_bytes(static_cast<LinkId>(l)) == doctest::Approx(carried[l]).epsilon(1e-9));
  }
  CHECK(net.active_flows() == 0);
}

}  // namespace

TEST_CASE("FlowNetwork matches a naive max-min fluid simulation on random workloads") {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    check_against_reference(seed, false);
    check_against_reference(seed, true);
  }
}

TEST_CASE("FlowNetwork: an all-to-all-v over a rail-forwarded topology matches the naive simulation") {
  // 3 nodes x 4 GPUs; every ordered pair sends its own size, all started at t = 0 with the route's
  // latency. The per-pair rates mix NVLink ports, IB NICs and forwarding hops.
  epsim::HardwareSpec hw;
  hw.nodes = 3;
  hw.gpus_per_node = 4;
  hw.nvlink.port_bw_GBps = 450;
  hw.nvlink.latency_us = 1;
  hw.infiniband.nic_bw_GBps = 50;
  hw.infiniband.latency_us = 3;
  hw.pcie.h2d_GBps = 55;
  hw.pcie.d2h_GBps = 55;
  hw.ep_backend.internode_route = "rail_forward";
  EventQueue q;
  FlowNetwork net(q);
  const epsim::Topology topo(hw, 12, net);
  std::vector<double> capacity;
  for (std::size_t l = 0; l < net.link_count(); ++l) capacity.push_back(net.link_capacity_GBps(static_cast<LinkId>(l)));
  std::vector<RefFlow> flows;
  for (int src = 0; src < 12; ++src) {
    for (int dst = 0; dst < 12; ++dst) {
      if (src == dst) continue;
      const double bytes = 1e5 + static_cast<double>((src * 12 + dst) * 7919 % 1000) * 100;
      flows.push_back(RefFlow{topo.ep_route(src, dst), bytes, 0, topo.ep_latency_ps(src, dst), kNoCap});
    }
  }
  std::vector<Time_ps> ended(flows.size(), -1);
  for (std::size_t f = 0; f < flows.size(); ++f) {
    net.start_flow(flows[f].links, flows[f].bytes, flows[f].latency_ps, kNoCap, [&ended, f](Time_ps, Time_ps e) { ended[f] = e; });
  }
  q.run();
  const std::vector<double> expect = reference_ends(capacity, flows);
  for (std::size_t f = 0; f < flows.size(); ++f) {
    INFO("flow " << f);
    CHECK(std::fabs(static_cast<double>(ended[f]) - expect[f]) <= 2.0 * static_cast<double>(flows.size()));
  }
}

TEST_CASE("FlowNetwork: the solver's counters count re-solves, flows re-solved and rates moved") {
  // Two flows start together on one link: one solve sets both rates (0 -> C/2). When the smaller
  // ends, the other lost its only bottleneck: one solve of one flow moves its rate (C/2 -> C). When
  // it ends, no flow is left to re-solve. A third flow on a second link that shares nothing with
  // them is never re-solved after its own start: its solve is the first one (same instant).
  EventQueue q;
  FlowNetwork net(q);
  const LinkId a = net.add_link("a", 100);
  const LinkId b = net.add_link("b", 100);
  Done small, large, apart;
  net.start_flow({a}, 1e6, 0, kNoCap, small.callback());
  net.start_flow({a}, 3e6, 0, kNoCap, large.callback());
  net.start_flow({b}, 1e6, 0, kNoCap, apart.callback());
  q.run();
  // 1e6 B at 50 GB/s = 20 us; the rest, 2e6 B, at 100 GB/s = 20 us.
  CHECK(small.ended_ps == 20'000'000);
  CHECK(large.ended_ps == 40'000'000);
  CHECK(apart.ended_ps == 10'000'000);
  CHECK(net.solves() == 2);
  CHECK(net.flows_resolved() == 3 + 1);
  CHECK(net.rate_changes() == 3 + 1);
}

TEST_CASE("FlowNetwork: a flow over six links shares its narrowest one max-min fairly") {
  // Flow a crosses six links, the third of them 50 GB/s; flow b shares only that one. Both get
  // 25 GB/s: b's 0.5 MB ends at 20 us, then a alone runs at 50 GB/s, its last 0.5 MB in 10 us.
  EventQueue q;
  FlowNetwork net(q);
  std::vector<LinkId> path;
  for (int k = 0; k < 6; ++k) path.push_back(net.add_link("l" + std::to_string(k), k == 2 ? 50 : 100));
  Done a, b;
  const FlowId fa = net.start_flow(path, 1e6, 0, kNoCap, a.callback());
  net.start_flow({path[2]}, 5e5, 0, kNoCap, b.callback());
  q.schedule(10'000'000, [&] { CHECK(net.flow_rate_GBps(fa) == doctest::Approx(25)); });
  q.schedule(25'000'000, [&] { CHECK(net.flow_rate_GBps(fa) == doctest::Approx(50)); });
  q.run();
  CHECK(b.ended_ps == 20'000'000);
  CHECK(a.ended_ps == 30'000'000);
  CHECK(net.link_bytes(path[5]) == doctest::Approx(1e6));
}

TEST_CASE("FlowNetwork: a flow passing through a link that fills below its rate yields there") {
  // Link a (100 GB/s) carries p, x1 and x2; link c (30 GB/s) carries p and q. p and q split c
  // (15 each), x1 and x2 split the rest of a (42.5 each): p only passes through a. Then six flows
  // join a: kept at 15, p would leave 85 / 8 = 10.6 to the others, above its own share, so p yields
  // on a too: all nine flows on a run at 100 / 9, and q takes what p leaves on c, 30 - 100 / 9.
  EventQueue q;
  FlowNetwork net(q);
  const LinkId a = net.add_link("a", 100);
  const LinkId c = net.add_link("c", 30);
  const FlowId p = net.start_flow({a, c}, 1e9, 0, kNoCap, nullptr);
  const FlowId fq = net.start_flow({c}, 1e9, 0, kNoCap, nullptr);
  const FlowId x1 = net.start_flow({a}, 1e9, 0, kNoCap, nullptr);
  net.start_flow({a}, 1e9, 0, kNoCap, nullptr);
  std::vector<FlowId> joined;
  q.schedule(1'000'000, [&] {
    CHECK(net.flow_rate_GBps(p) == doctest::Approx(15));
    CHECK(net.flow_rate_GBps(fq) == doctest::Approx(15));
    CHECK(net.flow_rate_GBps(x1) == doctest::Approx(42.5));
    for (int k = 0; k < 6; ++k) joined.push_back(net.start_flow({a}, 1e9, 0, kNoCap, nullptr));
  });
  q.schedule(2'000'000, [&] {
    CHECK(net.flow_rate_GBps(p) == doctest::Approx(100.0 / 9));
    CHECK(net.flow_rate_GBps(fq) == doctest::Approx(30 - 100.0 / 9));
    CHECK(net.flow_rate_GBps(x1) == doctest::Approx(100.0 / 9));
    for (FlowId f : joined) CHECK(net.flow_rate_GBps(f) == doctest::Approx(100.0 / 9));
  });
  q.run();
  CHECK(net.active_flows() == 0);
}
