// FlowNetwork's local mode (GroupSharing): max-min inside a group of links, the groups on their own.
// Hand-worked cases, flows inside one group against the exact mode (where local is max-min, so the
// two must agree), and whole layers against the exact mode, on 2 nodes too, where per_link is 6 to 7%
// off.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/balancers/ultraep.hpp"
#include "sim/config/loaders.hpp"
#include "sim/engine/flow_network.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/engine/flow_ends.hpp"
#include "tests/engine/random_layer.hpp"
#include "tests/test_paths.hpp"

using epsim::EventQueue;
using epsim::FlowId;
using epsim::FlowNetwork;
using epsim::LinkId;
using epsim::Time_ps;

namespace {

constexpr double kNoCap = FlowNetwork::kNoRateCap;
// 1,000 GB/s is one byte per picosecond, which keeps the hand arithmetic in bytes and ps.
constexpr double kBytePerPs_GBps = 1000;

const FlowNetwork::Sharing kLocal = epsim::test::sharing(FlowNetwork::SharingMode::local);
const FlowNetwork::Sharing kExact = epsim::test::sharing(FlowNetwork::SharingMode::exact);

using Ends = epsim::test::FlowEnds;

}  // namespace

TEST_CASE("local: a single flow takes latency + bytes / bandwidth and fills its link") {
  EventQueue q;
  FlowNetwork net(q);
  net.set_sharing(kLocal);
  const LinkId l = net.add_link("l", 100, 0);  // 0.1 bytes per ps
  Ends ends(1);
  const FlowId f = net.start_flow({l}, 1e6, 1000, kNoCap, ends.at(0));
  CHECK(net.flow_rate_GBps(f) == 0);  // still in its latency
  double rate_mid = -1, bytes_mid = -1;
  q.schedule(1000 + 5'000'000, [&] {
    rate_mid = net.flow_rate_GBps(f);
    bytes_mid = net.link_bytes(l);
  });
  q.run();
  CHECK(ends.ended[0] == 1000 + 10'000'000);  // 1e6 bytes / 0.1 bytes per ps
  CHECK(rate_mid == doctest::Approx(100));
  CHECK(bytes_mid == doctest::Approx(5e5));
  CHECK(net.link_bytes(l) == doctest::Approx(1e6));
  CHECK(net.link_busy_ps(l) == 10'000'000);
  CHECK(net.active_flows() == 0);
}

TEST_CASE("local: a flow held back by a link of its group leaves its share of the port to the others") {
  // The weight copy beside a token flow that the SM limit holds back (per_link_sharing_test.cpp works
  // the same case for per_link). Port P moves 1 byte/ps; the token flow t (1,000 bytes) also crosses
  // S, 0.25 byte/ps; the copy w (1,000 bytes) crosses P only.
  // P and S in one group (a GPU's sending links): max-min, S fills at 0.25 and freezes t, w takes the
  // 0.75 left on P: w ends at 1,000 / 0.75 = 1,333.3, rounded up to 1,334 ps; t ends at 4,000.
  // Each link a group of its own: per_link's result, w gets half of P and ends at 2,000.
  for (const bool one_group : {true, false}) {
    INFO((one_group ? "one group" : "a group each"));
    EventQueue q;
    FlowNetwork net(q);
    net.set_sharing(kLocal);
    const LinkId port = net.add_link("P", kBytePerPs_GBps, one_group ? 7 : -1);
    const LinkId sms = net.add_link("S", kBytePerPs_GBps / 4, one_group ? 7 : -1);
    Ends ends(2);
    const FlowId t = net.start_flow({sms, port}, 1000, 0, kNoCap, ends.at(0));
    const FlowId w = net.start_flow({port}, 1000, 0, kNoCap, ends.at(1));
    double t_rate = -1, w_rate = -1;
    q.schedule(100, [&] {
      t_rate = net.flow_rate_GBps(t);
      w_rate = net.flow_rate_GBps(w);
    });
    q.run();
    CHECK(ends.ended[0] == 4000);
    CHECK(ends.ended[1] == (one_group ? 1334 : 2000));
    CHECK(t_rate == doctest::Approx(250));  // S's share either way
    CHECK(w_rate == doctest::Approx(one_group ? 750 : 500));
    CHECK(net.link_bytes(port) == doctest::Approx(2000));
    CHECK(net.link_bytes(sms) == doctest::Approx(1000));
  }
}

TEST_CASE("local: a receiving side runs ahead of its sender, so a later flow into it ends early, and a following one does not") {
  // The cause of local's early ends on skewed traffic (docs/performance.md, "Pinned down on a
  // layer"). Every link moves 1 byte/ps and is a group of its own GPU side: sender S1's port, S2's,
  // receiver R's and X's. At 0 S1 starts f1 (1e6 bytes, to R) and f1x (1e7, to X); at 500,000 ps S2
  // starts f2 (1e6, to R).
  // Exact: S1 holds f1 to 0.5 byte/ps; by 500,000 R has 250,000 bytes of it; then f1 and f2 share R
  // at 0.5 each: f1 ends at 500,000 + 750,000 / 0.5 = 2,000,000; f2 has 750,000 by then and its last
  // 250,000 take 250,000 ps at R's full rate: 2,250,000. f1x: 0.5 to 2,000,000, 1 after: 11,000,000.
  // Local: R's side of f1 runs at R's full rate while S1 sends at 0.5: R has 500,000 bytes of f1 by
  // 500,000 ps, bytes its sender has not sent yet. R's side of f1 is done at 1,500,000, and R's side
  // of f2 has 500,000 bytes by then and the rest by 2,000,000; S2's side of f2 ended at 1,500,000.
  // So f2 ends at 2,000,000, 250,000 ps (11%) before exact; f1 and f1x end as under exact.
  // Coupled with R following (group_coupling.cpp) caps R's side of f1 at S1's rate for it, 0.5:
  // 250,000 bytes by 500,000 ps; then f1 (cap 0.5) and f2 (cap 1) share R, both at 0.5 as R fills;
  // S2 is done with f2 at 1,500,000, and R takes the rest of f2 at its own pace: exact's figures to
  // the picosecond. Coupled with no group following is local.
  enum class Setting { local, exact, coupled_following, coupled_alone };
  for (const Setting setting : {Setting::local, Setting::exact, Setting::coupled_following, Setting::coupled_alone}) {
    const bool runs_ahead = setting == Setting::local || setting == Setting::coupled_alone;
    INFO("setting " << static_cast<int>(setting));
    EventQueue q;
    FlowNetwork net(q);
    net.set_sharing(setting == Setting::local   ? kLocal
                    : setting == Setting::exact ? kExact
                                                : epsim::test::sharing(FlowNetwork::SharingMode::coupled));
    const LinkId s1 = net.add_link("S1", kBytePerPs_GBps, 0);
    const LinkId s2 = net.add_link("S2", kBytePerPs_GBps, 1);
    const LinkId r = net.add_link("R", kBytePerPs_GBps, 2);
    const LinkId x = net.add_link("X", kBytePerPs_GBps, 3);
    if (setting == Setting::coupled_following) net.couple_group_of(r);
    CHECK(net.group_follows(r) == (setting == Setting::coupled_following));
    CHECK_FALSE(net.group_follows(s1));
    Ends ends(3);
    net.start_flow({s1, r}, 1e6, 0, kNoCap, ends.at(0));
    net.start_flow({s1, x}, 1e7, 0, kNoCap, ends.at(1));
    double r_bytes_at_start = -1;
    q.schedule(500'000, [&] {
      r_bytes_at_start = net.link_bytes(r);
      net.start_flow({s2, r}, 1e6, 0, kNoCap, ends.at(2));
    });
    q.run();
    CHECK(r_bytes_at_start == doctest::Approx(runs_ahead ? 500'000 : 250'000));
    CHECK(ends.ended[0] == 2'000'000);
    CHECK(ends.ended[1] == 11'000'000);
    CHECK(ends.ended[2] == (runs_ahead ? 2'000'000 : 2'250'000));
    CHECK(net.link_bytes(r) == doctest::Approx(2e6));
  }
}

TEST_CASE("local: groups run on their own, a group is max-min") {
  // f (1,500 bytes) crosses A and B; g (500) is on A from 0; h (10,000) joins B at 1,000.
  // A and B in one group: max-min, f moves at one rate on both: half of A to 1,000 (g ends), then
  // half of B beside h: 1,000 more bytes take 2,000 ps, f ends at 3,000; h has 1,000 bytes by then
  // and the 9,000 left end at 12,000.
  // A group each: A serves f at half to 1,000 and alone after, 1,000 more bytes: 2,000; B serves f
  // alone to 1,000, then at half: 500 more bytes by 2,000. f ends at 2,000; h has 500 bytes by 2,000
  // and ends at 11,500 (per_link's case in per_link_sharing_test.cpp).
  for (const bool one_group : {true, false}) {
    INFO((one_group ? "one group" : "a group each"));
    EventQueue q;
    FlowNetwork net(q);
    net.set_sharing(kLocal);
    const LinkId a = net.add_link("A", kBytePerPs_GBps, one_group ? 0 : 1);
    const LinkId b = net.add_link("B", kBytePerPs_GBps, one_group ? 0 : 2);
    Ends ends(3);
    net.start_flow({a, b}, 1500, 0, kNoCap, ends.at(0));
    net.start_flow({a}, 500, 0, kNoCap, ends.at(1));
    q.schedule(1000, [&] { net.start_flow({b}, 10000, 0, kNoCap, ends.at(2)); });
    q.run();
    CHECK(ends.ended[1] == 1000);
    CHECK(ends.ended[0] == (one_group ? 3000 : 2000));
    CHECK(ends.ended[2] == (one_group ? 12000 : 11500));
    CHECK(net.link_bytes(b) == doctest::Approx(11500));
    CHECK(net.link_busy_ps(b) == (one_group ? 12000 : 11500));
    // A carries g and f, and is idle once f ends; in one group h's class is then the only one with
    // flows, and A, which it does not cross, carries nothing.
    CHECK(net.link_bytes(a) == doctest::Approx(2000));
    CHECK(net.link_busy_ps(a) == (one_group ? 3000 : 2000));
  }
}

TEST_CASE("an end hint is only requested: flows end as without it, in every sharing mode") {
  // The case above, a group each, started with end hints (the addresses the callbacks read first) and
  // without. Under local the hand-worked ends hold (1,000, 2,000 and 11,500 ps); every mode ends
  // each flow at the same picosecond with hints as without, and the hinted bytes are untouched.
  using Mode = FlowNetwork::SharingMode;
  for (const Mode mode : {Mode::local, Mode::coupled, Mode::per_link, Mode::exact}) {
    std::vector<Time_ps> ended[2];
    const double hinted[3] = {1.5, 2.5, 3.5};
    for (const bool hints : {false, true}) {
      EventQueue q;
      FlowNetwork net(q);
      net.set_sharing(epsim::test::sharing(mode));
      const LinkId a = net.add_link("A", kBytePerPs_GBps, 1);
      const LinkId b = net.add_link("B", kBytePerPs_GBps, 2);
      Ends ends(3);
      // Both of a flow's hints: what its callback reads first, and then.
      const auto hint = [&](int k) {
        return hints ? epsim::EndHints{&hinted[k], &hinted[(k + 1) % 3]} : epsim::EndHints{};
      };
      net.start_flow({a, b}, 1500, 0, kNoCap, ends.at(0), hint(0));
      net.start_flow({a}, 500, 0, kNoCap, ends.at(1), hint(1));
      q.schedule(1000, [&] { net.start_flow({b}, 10000, 0, kNoCap, ends.at(2), hint(2)); });
      q.run();
      ended[hints ? 1 : 0] = ends.ended;
    }
    INFO("mode " << static_cast<int>(mode));
    CHECK(ended[1] == ended[0]);
    if (mode == Mode::local) CHECK(ended[1] == std::vector<Time_ps>{2000, 1000, 11500});
    CHECK(hinted[0] == 1.5);
    CHECK(hinted[1] == 2.5);
    CHECK(hinted[2] == 3.5);
  }
}

TEST_CASE("local: a rate cap is a bound inside the group's max-min, as in exact") {
  // On P (1 byte/ps), c is capped at 0.3 byte/ps and u is not: max-min gives c 0.3 and u the 0.7
  // left. u (1,000 bytes) ends at 1,428.6 -> 1,429 ps; c then stays at its cap and its 1,000 bytes end
  // at 3,333.3 -> 3,334. A flow over no link with a cap of 0.1 byte/ps moves 1,000 bytes in 10,000 ps
  // after its latency.
  for (const FlowNetwork::Sharing& sharing : {kLocal, kExact}) {
    EventQueue q;
    FlowNetwork net(q);
    net.set_sharing(sharing);
    const LinkId p = net.add_link("P", kBytePerPs_GBps, 3);
    Ends ends(3);
    const FlowId c = net.start_flow({p}, 1000, 0, 300, ends.at(0));
    const FlowId u = net.start_flow({p}, 1000, 0, kNoCap, ends.at(1));
    net.start_flow({}, 1000, 500, 100, ends.at(2));
    double c_rate = -1, u_rate = -1;
    q.schedule(100, [&] {
      c_rate = net.flow_rate_GBps(c);
      u_rate = net.flow_rate_GBps(u);
    });
    q.run();
    CHECK(c_rate == doctest::Approx(300));
    CHECK(u_rate == doctest::Approx(700));
    CHECK(ends.ended[1] == 1429);
    CHECK(ends.ended[0] >= 3333);
    CHECK(ends.ended[0] <= 3334);
    CHECK(ends.ended[2] == 500 + 10'000);
  }
}

TEST_CASE("local: empty flows end after their latency, from an event") {
  EventQueue q;
  FlowNetwork net(q);
  net.set_sharing(kLocal);
  const LinkId l = net.add_link("l", 10, 0);
  Ends ends(2);
  bool inside = true;
  net.start_flow({l}, 0, 300, kNoCap, [&](Time_ps, Time_ps e) {
    CHECK_FALSE(inside);
    ends.ended[0] = e;
  });
  net.start_flow({}, 1000, 0, kNoCap, ends.at(1));
  inside = false;
  q.run();
  CHECK(ends.ended[0] == 300);
  CHECK(ends.ended[1] == 0);
  CHECK(net.link_busy_ps(l) == 0);
}

TEST_CASE("local: at most 16 links in a group") {
  EventQueue q;
  FlowNetwork net(q);
  net.set_sharing(kLocal);
  for (int k = 0; k < epsim::GroupSharing::kMaxGroupLinks; ++k) net.add_link("l" + std::to_string(k), 10, 5);
  CHECK_THROWS_AS(net.add_link("one too many", 10, 5), std::length_error);
  CHECK_NOTHROW(net.add_link("another group", 10, 6));
}

TEST_CASE("local: a flow across six groups ends in its slowest, and its slot serves shorter routes after") {
  // A flow keeps up to four groups in its path and more in a pool; the slot it frees serves the next
  // flow whatever its route. Seven links, each a group of its own, 1 byte/ps but L1 0.5 and L2 0.25.
  // All flows wait 100 ps before they enter. k (500 bytes, L2) starts first, then f (1,000 bytes,
  // L0 to L5), then j (100 bytes, L6): f's segments beyond the fourth sit apart from its path, and j's
  // path, written before f enters, sits next to f's.
  // L2 is max-min between f and k, 0.125 byte/ps each: k ends at 100 + 4,000. f has 500 bytes through
  // L2 then and the rest alone, 2,000 ps: f ends at 6,100 (its other groups were done by 2,100).
  // From f's end, g (1,000 bytes, L0 and L1) takes f's slot: enters at 6,200, ends at 8,200 at L1's
  // 0.5. From g's end, h (500 bytes, L0 to L5) takes it again: enters at 8,300, 2,000 ps at L2.
  EventQueue q;
  FlowNetwork net(q);
  net.set_sharing(kLocal);
  std::vector<LinkId> l;
  for (const double share : {1.0, 0.5, 0.25, 1.0, 1.0, 1.0, 1.0})
    l.push_back(net.add_link("L" + std::to_string(l.size()), share * kBytePerPs_GBps, -1));
  const std::vector<LinkId> six(l.begin(), l.begin() + 6);
  Ends ends(5);  // k, f, j, g, h
  net.start_flow({l[2]}, 500, 100, kNoCap, ends.at(0));
  FlowId f = 0;
  f = net.start_flow(six, 1000, 100, kNoCap, [&](Time_ps s, Time_ps e) {
    ends.at(1)(s, e);
    net.start_flow({l[0], l[1]}, 1000, 100, kNoCap, [&](Time_ps s2, Time_ps e2) {
      ends.at(3)(s2, e2);
      net.start_flow(six, 500, 100, kNoCap, ends.at(4));
    });
  });
  net.start_flow({l[6]}, 100, 100, kNoCap, ends.at(2));
  double f_rate = -1;
  q.schedule(200, [&] { f_rate = net.flow_rate_GBps(f); });
  q.run();
  CHECK(ends.ended == std::vector<Time_ps>{4100, 6100, 200, 8200, 10300});
  CHECK(f_rate == doctest::Approx(125));  // L2's share, the least of its groups'
  CHECK(net.link_bytes(l[2]) == doctest::Approx(500 + 1000 + 500));
  CHECK(net.link_bytes(l[1]) == doctest::Approx(1000 + 1000 + 500));
  CHECK(net.active_flows() == 0);
}

TEST_CASE("local: flows inside one group end as under exact max-min") {
  // Inside one group local is max-min, whatever the routes, caps, sizes, latencies and start times: the
  // two modes must give the same ends, up to the rounding of each end to a picosecond and what that
  // passes on to the flows sharing with it.
  std::uint64_t x = 98765;
  const auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  Time_ps worst = 0;
  for (int round = 0; round < 30; ++round) {
    const int links = 1 + static_cast<int>(next() % 5);
    const int flows = 5 + static_cast<int>(next() % 60);
    struct Spec {
      std::vector<int> route;
      double bytes;
      double cap_GBps;
      Time_ps start, latency;
    };
    std::vector<Spec> specs;
    for (int i = 0; i < flows; ++i) {
      Spec s;
      for (int k = 0; k < links; ++k)
        if (next() % 2 == 0) s.route.push_back(k);
      if (s.route.empty()) s.route.push_back(static_cast<int>(next() % links));
      s.bytes = static_cast<double>(1 + next() % 100'000);
      s.cap_GBps = next() % 4 == 0 ? 5.0 + static_cast<double>(next() % 30) : kNoCap;
      s.start = static_cast<Time_ps>(next() % 200'000);
      s.latency = static_cast<Time_ps>(next() % 3 == 0 ? 0 : next() % 5000);
      specs.push_back(s);
    }
    std::vector<std::vector<Time_ps>> ended;
    for (const FlowNetwork::Sharing& sharing : {kLocal, kExact}) {
      EventQueue q;
      FlowNetwork net(q);
      net.set_sharing(sharing);
      std::vector<LinkId> ids;
      for (int k = 0; k < links; ++k) ids.push_back(net.add_link("l" + std::to_string(k), 10.0 * (k + 1), 0));
      Ends ends(specs.size());
      for (std::size_t i = 0; i < specs.size(); ++i) {
        q.schedule(specs[i].start, [&, i] {
          std::vector<LinkId> route;
          for (const int k : specs[i].route) route.push_back(ids[static_cast<std::size_t>(k)]);
          net.start_flow(route, specs[i].bytes, specs[i].latency, specs[i].cap_GBps, ends.at(i));
        });
      }
      q.run();
      ended.push_back(ends.ended);
    }
    for (std::size_t i = 0; i < specs.size(); ++i) {
      INFO("round " << round << ", flow " << i);
      const Time_ps d = std::llabs(ended[0][i] - ended[1][i]);
      worst = std::max(worst, d);
      CHECK(d <= 4);
    }
  }
  MESSAGE("local inside one group: worst end against exact " << worst << " ps");
}

TEST_CASE("local: engine.bandwidth_sharing local in a hardware file") {
  using namespace epsim;
  const std::string preset = (test::source_dir() / "models/h100-sxm-8.yaml").string();
  std::ifstream in(preset);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = (test::scratch_dir("local_hw") / "hw.yaml").string();
  std::ofstream(path) << text << "\nengine:\n  bandwidth_sharing: local\n";
  CHECK(load_hardware(path).engine.bandwidth_sharing == BandwidthSharing::local);
  CHECK(std::string(to_string(BandwidthSharing::local)) == "local");
}

// ---- whole layers against the exact mode -------------------------------------------------------

using epsim::test::relative;

TEST_CASE("local: whole layers on 2, 4 and 8 nodes within 0.5% of exact sharing") {
  // Static EP, forward and backward, GLM-5-like layers on H100 nodes of 8 with the preset's
  // SM-limited DeepEP kernels, skewed counts. On 2 nodes a GPU's one RDMA flow shares the kernel's
  // SM limit with its NVLink flows: per_link serves it at its NIC's full rate (6 to 7% early,
  // docs/performance.md), a GPU's sending group holds it to its SM share as max-min does. The stated
  // bounds: layer time and every GPU's finish (its last task's end) within 0.5%.
  using namespace epsim;
  HardwareSpec hw = load_hardware((test::source_dir() / "models/h100-sxm-8.yaml").string());
  const ModelSpec model = load_model((test::source_dir() / "models/glm5-like-128.yaml").string());
  double worst_layer = 0;
  double worst_gpu = 0;
  double per_link_2_nodes = 0;
  for (const int ep : {16, 32, 64}) {
    for (const TokenCopies copies : {TokenCopies::per_expert, TokenCopies::per_node}) {
      for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        INFO("EP " << ep << ", copies " << (copies == TokenCopies::per_node ? "per_node" : "per_expert")
                   << ", seed " << seed);
        hw.nodes = std::max(hw.nodes, ep / hw.gpus_per_node);
        hw.ep_backend.token_copies = copies;
        const Plan plan = test::random_static_plan(hw, model, ep, 2048, seed);
        const std::vector<std::int64_t> local(static_cast<std::size_t>(ep), 2048);
        const test::SharingError error = test::sharing_error(hw, model, plan, local, BandwidthSharing::local);
        if (ep == 16) {
          const double coarse = test::sharing_error(hw, model, plan, local, BandwidthSharing::per_link).layer;
          per_link_2_nodes = std::max(per_link_2_nodes, coarse);
        }
        worst_layer = std::max(worst_layer, error.layer);
        worst_gpu = std::max(worst_gpu, error.worst_gpu);
        CHECK(error.layer <= 0.005);
        CHECK(error.worst_gpu <= 0.005);  // every GPU's finish
      }
    }
  }
  // The case the groups are for: per_link misses it by far more than the bound.
  CHECK(per_link_2_nodes > 0.01);
  MESSAGE("local layers: worst layer time error " << worst_layer << ", worst GPU finish error " << worst_gpu
                                                  << " (per_link on 2 nodes: " << per_link_2_nodes << ")");
}

TEST_CASE("local: skewed UltraEP layers end early, within 2.5% of exact, and coupled ones within 0.5%") {
  // What local leaves out is the coupling across the fabric: a flow's sending and receiving GPUs
  // serve it each on their own, so skewed traffic ends early (docs/performance.md, "local"). On these
  // EP 128 UltraEP layers, with their weight copies and skewed counts, the measured errors are -1.1 to
  // -2.2%; per_link's are -2.2 to +0.7%, a late error on the copies (which local removes) partly
  // cancelling the same early one. The test pins the sign and the bound. Coupled, with the busiest
  // tenth of the GPUs following their senders (group_coupling.cpp), removes the head start: within
  // 0.18% on these layers; the test states 0.5%, the target of docs/performance.md.
  using namespace epsim;
  HardwareSpec hw = load_hardware((test::source_dir() / "models/h100-sxm-8.yaml").string());
  const ModelSpec model = load_model((test::source_dir() / "models/glm5-like-256.yaml").string());
  const int ep = 128;
  hw.nodes = ep / hw.gpus_per_node;
  double earliest = 0;
  double coupled_worst = 0;
  int same_last = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    INFO("seed " << seed);
    const TraceRecord rec = test::random_record(ep, model.num_experts, 4096, model.top_k, seed);
    BalancerContext c;
    c.num_gpus = ep;
    c.gpus_per_node = hw.gpus_per_node;
    c.model = &model;
    c.hardware = &hw;
    const Plan plan = UltraEp(UltraEpParams{}).plan(rec, c);
    REQUIRE(plan.instances.size() > static_cast<std::size_t>(model.num_experts));  // it moves weights
    const std::vector<std::int64_t> local(static_cast<std::size_t>(ep), 4096);
    const auto layer = [&](BandwidthSharing sharing) {
      hw.engine.bandwidth_sharing = sharing;
      return simulate_layer(hw, model, plan, local, true);
    };
    const LayerResult exact_run = layer(BandwidthSharing::exact);
    const double exact = static_cast<double>(exact_run.layer_ps());
    const double error = static_cast<double>(layer(BandwidthSharing::local).layer_ps()) / exact - 1;
    earliest = std::min(earliest, error);
    CHECK(error <= 0);
    CHECK(error >= -0.025);
    const LayerResult coupled_run = layer(BandwidthSharing::coupled);
    const double coupled = std::abs(static_cast<double>(coupled_run.layer_ps()) / exact - 1);
    coupled_worst = std::max(coupled_worst, coupled);
    CHECK(coupled <= 0.005);
    // The straggler a user reads: coupled names exact's last GPU (the first of those ending last), on
    // these layers as on the accuracy set's UltraEP layers (docs/performance.md, "Which GPU is last").
    const std::vector<Time_ps>& exact_finish = exact_run.gemm_finish_fwd_ps;
    const std::vector<Time_ps>& coupled_finish = coupled_run.gemm_finish_fwd_ps;
    const auto last = [](const std::vector<Time_ps>& finish) {
      return std::max_element(finish.begin(), finish.end()) - finish.begin();
    };
    CHECK(last(coupled_finish) == last(exact_finish));
    same_last += last(coupled_finish) == last(exact_finish) ? 1 : 0;
  }
  CHECK(earliest < -0.01);  // what coupled removes is there
  MESSAGE("skewed UltraEP layers at EP 128: local earliest " << earliest << ", coupled worst " << coupled_worst
                                                             << ", coupled names exact's last GPU on " << same_last
                                                             << " of 6");
}

TEST_CASE("local: a skewed all-to-all ends as under exact when its senders start together, early when staggered") {
  // One rail of 16 GPUs: each sends every other GPU 0.5 to 1.5 MB times the receiver's popularity
  // (1 to 4), over its SM limit (60 GB/s), its NIC (50 GB/s), the receiver's NIC and SM limit. Started
  // together, the last flow ends at the same picosecond under both modes: the receiving NICs bound
  // the exchange, and each is busy under both until it has moved its bytes. Senders started in steps
  // of 31 us over 465 us (as kernels start when their GEMMs end) end it 7.6% early under local: the
  // sides run on their own, so a GPU's receiving side can move bytes its senders have not sent yet.
  // This is the error skewed layers show (docs/performance.md, "local"); the test pins its sign and
  // size.
  const int n = 16;
  std::uint64_t x = 4242;
  const auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  std::vector<double> popularity(n), bytes(static_cast<std::size_t>(n) * n);
  for (double& p : popularity) p = 1 + static_cast<double>(next() % 3001) / 1000;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) bytes[static_cast<std::size_t>(a * n + b)] = 1e6 * popularity[b] * (0.5 + static_cast<double>(next() % 1001) / 1000);
  const auto last_end = [&](const FlowNetwork::Sharing& sharing, Time_ps stagger_ps) {
    EventQueue q;
    FlowNetwork net(q);
    net.set_sharing(sharing);
    std::vector<LinkId> out, in, sms_out, sms_in;
    for (int g = 0; g < n; ++g) {
      out.push_back(net.add_link("nic_out", 50, 2 * g));
      in.push_back(net.add_link("nic_in", 50, 2 * g + 1));
      sms_out.push_back(net.add_link("sms_out", 60, 2 * g));
      sms_in.push_back(net.add_link("sms_in", 60, 2 * g + 1));
    }
    Time_ps last = 0;
    for (int a = 0; a < n; ++a) {
      q.schedule(stagger_ps * ((a * 7) % n), [&, a] {
        for (int b = 0; b < n; ++b) {
          if (a == b) continue;
          net.start_flow({sms_out[a], out[a], in[b], sms_in[b]}, bytes[static_cast<std::size_t>(a * n + b)], 0, kNoCap,
                         [&last](Time_ps, Time_ps e) { last = std::max(last, e); });
        }
      });
    }
    q.run();
    return static_cast<double>(last);
  };
  CHECK(std::fabs(last_end(kLocal, 0) - last_end(kExact, 0)) <= 2);
  const double staggered = last_end(kLocal, 31'000'000) / last_end(kExact, 31'000'000) - 1;
  CHECK(staggered < 0);
  CHECK(staggered > -0.15);
  MESSAGE("local, senders started in steps of 31 us: " << staggered << " against exact");
}
