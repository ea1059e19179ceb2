// FlowNetwork's coupled mode (GroupSharing with following groups, group_coupling.cpp): local, with
// the groups named to follow holding each flow to the rate the group before it on its route gives
// it. Hand-worked cases against exact and local (local's head start with a following receiver is in
// group_sharing_test.cpp, beside local's), the choice of the busiest GPUs, its settings and errors,
// and static-EP layers against exact (the skewed UltraEP layers where local ends early are in
// group_sharing_test.cpp too).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/config/loaders.hpp"
#include "sim/engine/flow_network.hpp"
#include "sim/replay/exchange_fanout.hpp"
#include "sim/replay/layer_run.hpp"
#include "sim/replay/sim_context.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/engine/flow_ends.hpp"
#include "tests/engine/random_layer.hpp"
#include "tests/test_paths.hpp"

using epsim::EventQueue;
using epsim::FlowNetwork;
using epsim::LinkId;

namespace {

constexpr double kNoCap = FlowNetwork::kNoRateCap;
// 1,000 GB/s is one byte per picosecond, which keeps the hand arithmetic in bytes and ps.
constexpr double kBytePerPs_GBps = 1000;

using Ends = epsim::test::FlowEnds;
using Mode = FlowNetwork::SharingMode;

std::string hardware_with(const std::string& name, const std::string& engine_block) {
  const std::string preset = (epsim::test::source_dir() / "models/h100-sxm-8.yaml").string();
  std::ifstream in(preset);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = (epsim::test::scratch_dir(name) / "hw.yaml").string();
  std::ofstream(path) << text << "\nengine:\n" << engine_block;
  return path;
}

}  // namespace

TEST_CASE("coupled: caps chain along a relayed route") {
  // f crosses four groups, S, the relay's receiving side A, its sending side B and the receiver R
  // (FasterMoE's gradient reductions between rails cross nodes so). S also sends g (1e7) to X, so it
  // sends f at 0.5 byte/ps. With A, B and R following, each carries f at the rate of the one before
  // it: 0.5; h, from T to R from 500,000 ps, then meets an R that holds 250,000 bytes of f, and the
  // case is local's head start (group_sharing_test.cpp) with R following: f ends at 2,000,000, h at
  // 2,250,000, as under exact. With R alone
  // following, A and B run ahead at 1 byte/ps and R follows B: R too moves f at 1 until h comes, so
  // h ends at 2,000,000, as under local.
  for (const bool chain : {true, false}) {
    INFO((chain ? "A, B and R follow" : "R alone follows"));
    for (const Mode mode : {Mode::coupled, Mode::exact}) {
      if (mode == Mode::exact && !chain) continue;
      EventQueue q;
      FlowNetwork net(q);
      net.set_sharing(epsim::test::sharing(mode));
      const LinkId s = net.add_link("S", kBytePerPs_GBps, 0);
      const LinkId a = net.add_link("A", kBytePerPs_GBps, 1);
      const LinkId b = net.add_link("B", kBytePerPs_GBps, 2);
      const LinkId r = net.add_link("R", kBytePerPs_GBps, 3);
      const LinkId t = net.add_link("T", kBytePerPs_GBps, 4);
      const LinkId x = net.add_link("X", kBytePerPs_GBps, 5);
      if (mode == Mode::coupled) {
        net.couple_group_of(r);
        if (chain) {
          net.couple_group_of(a);
          net.couple_group_of(b);
        }
      }
      Ends ends(3);
      net.start_flow({s, a, b, r}, 1e6, 0, kNoCap, ends.at(0));
      net.start_flow({s, x}, 1e7, 0, kNoCap, ends.at(1));
      q.schedule(500'000, [&] { net.start_flow({t, r}, 1e6, 0, kNoCap, ends.at(2)); });
      q.run();
      CHECK(ends.ended[0] == 2'000'000);
      CHECK(ends.ended[1] == 11'000'000);
      CHECK(ends.ended[2] == (chain ? 2'250'000 : 2'000'000));
    }
  }
}

namespace {

/// One sender S (1 byte/ps), a receiver R (following under coupled) and another receiver X, a
/// group each.
struct SenderAndReceivers {
  EventQueue q;
  FlowNetwork net{q};
  LinkId s, r, x;
  SenderAndReceivers(Mode mode, double r_GBps, double x_GBps) {
    net.set_sharing(epsim::test::sharing(mode));
    s = net.add_link("S", kBytePerPs_GBps, 0);
    r = net.add_link("R", r_GBps, 1);
    x = net.add_link("X", x_GBps, 2);
    if (mode == Mode::coupled) net.couple_group_of(r);
  }
};

/// Two senders S1 and S2 (1 byte/ps each, or as given), a receiver R (following under coupled) and
/// another receiver X, a group each; rates in bytes per ps.
struct TwoSendersAndReceivers {
  EventQueue q;
  FlowNetwork net{q};
  LinkId s1, s2, r, x;
  TwoSendersAndReceivers(Mode mode, double r_byte_per_ps, double x_byte_per_ps)
      : TwoSendersAndReceivers(mode, 1, 1, r_byte_per_ps, x_byte_per_ps) {}
  TwoSendersAndReceivers(Mode mode, double s1_byte_per_ps, double s2_byte_per_ps, double r_byte_per_ps,
                         double x_byte_per_ps) {
    net.set_sharing(epsim::test::sharing(mode));
    s1 = net.add_link("S1", s1_byte_per_ps * kBytePerPs_GBps, 0);
    s2 = net.add_link("S2", s2_byte_per_ps * kBytePerPs_GBps, 1);
    r = net.add_link("R", r_byte_per_ps * kBytePerPs_GBps, 2);
    x = net.add_link("X", x_byte_per_ps * kBytePerPs_GBps, 3);
    if (mode == Mode::coupled) net.couple_group_of(r);
  }
};

const char* mode_name(Mode mode) {
  return mode == Mode::coupled ? "coupled" : mode == Mode::exact ? "exact" : "local";
}

}  // namespace

/// SenderAndReceivers with every link 1 byte/ps, under each mode: `run(net, q, s, r, x, ends)`
/// starts the flows and may schedule more; then the queue runs and `check(mode, ends, r_bytes)` gets
/// R's bytes at `probe_ps`.
template <class Run, class Check>
void sender_two_receivers(epsim::Time_ps probe_ps, std::size_t flows, Run&& run, Check&& check) {
  for (const Mode mode : {Mode::coupled, Mode::exact, Mode::local}) {
    INFO(mode_name(mode));
    SenderAndReceivers n(mode, kBytePerPs_GBps, kBytePerPs_GBps);
    Ends ends(flows);
    run(n.net, n.q, n.s, n.r, n.x, ends);
    double r_bytes = -1;
    n.q.schedule(probe_ps, [&] { r_bytes = n.net.link_bytes(n.r); });
    n.q.run();
    check(mode, ends, r_bytes);
  }
}

namespace {

/// What "a leader that speeds up lifts its follower's cap" finds (worked there): R at 250,000 bytes at
/// 500,000 ps (local's R, running ahead, at 500,000), g ending then and f at 1,250,000.
void check_lifted_cap(Mode mode, const Ends& ends, double r_bytes) {
  CHECK(r_bytes == doctest::Approx(mode == Mode::local ? 500'000 : 250'000));
  CHECK(ends.ended[1] == 500'000);
  CHECK(ends.ended[0] == 1'250'000);
}

}  // namespace

TEST_CASE("coupled: a leader that speeds up lifts its follower's cap") {
  // S sends f (1e6 bytes) to R and g (250,000) to X. S gives each 0.5 byte/ps: g is done at 500,000
  // ps, and S sends f alone from there, at 1: 750,000 bytes more, f ends at 1,250,000 under exact. R
  // following carries f at S's rate: 250,000 bytes by 500,000 (local: 500,000, R running ahead),
  // then 1 byte/ps once S tells it its rate moved, and f ends at 1,250,000 as under exact and local.
  // A cap left at 0.5 would end it at 2,000,000.
  sender_two_receivers(
      500'000, 2,
      [](FlowNetwork& net, EventQueue&, LinkId s, LinkId r, LinkId x, Ends& ends) {
        net.start_flow({s, r}, 1e6, 0, kNoCap, ends.at(0));
        net.start_flow({s, x}, 250'000, 0, kNoCap, ends.at(1));
      },
      check_lifted_cap);
}

TEST_CASE("coupled: a sender's class past the first 32 of its group tells its follower too") {
  // The case above with 40 empty flows from S to X first, each under its own rate cap: each is a
  // class of S's group (a group keeps a bit for each of its first 32 classes that leads, and reads
  // every class past them), so f and g share S's 41st. They end as they enter and take nothing: f
  // still ends at 1,250,000, which needs S's move at 500,000 told to R. Were the 41st class not
  // read, R would keep f at 0.5 byte/ps and end it at 2,000,000.
  sender_two_receivers(
      500'000, 42,
      [](FlowNetwork& net, EventQueue&, LinkId s, LinkId r, LinkId x, Ends& ends) {
        for (std::size_t k = 0; k < 40; ++k)
          net.start_flow({s, x}, 0, 0, static_cast<double>(k + 1), ends.at(2 + k));
        net.start_flow({s, r}, 1e6, 0, kNoCap, ends.at(0));
        net.start_flow({s, x}, 250'000, 0, kNoCap, ends.at(1));
      },
      [](Mode mode, const Ends& ends, double r_bytes) {
        check_lifted_cap(mode, ends, r_bytes);
        CHECK(ends.ended[41] == 0);
      });
}

TEST_CASE("coupled: a leader's move within the tolerance waits for the follower's next re-solve") {
  // S (1 byte/ps) sends f (1e6 bytes) to R, which follows, and 59 flows to X (100 byte/ps): g, of
  // 100,000 bytes, and 58 of 1e6. Each moves at 1/60 byte/ps at S: g ends at 6,000,000 ps, and S
  // then sends the other 59 at 1/59, a move of 1.7%, within coupled's tolerance (5%): R keeps f at
  // 1/60. S ends its 59 flows together at 6,000,000 + 900,000 x 59 = 59,100,000, exact's end for f.
  // S's class then has no flows, which moves R beyond the tolerance: R has carried 59,100,000 / 60
  // = 985,000 bytes of f and carries the last 15,000 at its own 1 byte/ps, so f ends 15,000 ps
  // after exact's. The same with g of 400,000 bytes moves S's rate from 1/60 to 1/59 at
  // 24,000,000 ps, and R likewise ends f at exact's end plus what it lags: 1e6 - 59,400,000 / 60.
  // With 29 flows to X in place of 59, S's move from 1/30 to 1/29 is 3.4%, still within it.
  for (const int flows : {60, 30}) {
    for (const double g_bytes : {100'000.0, 400'000.0}) {
      INFO(flows << " flows at S, g of " << g_bytes << " bytes");
      const double n = flows;
      const epsim::Time_ps s_done = static_cast<epsim::Time_ps>(g_bytes * n + (1e6 - g_bytes) * (n - 1));
      const epsim::Time_ps lag = static_cast<epsim::Time_ps>(1e6 - static_cast<double>(s_done) / n);
      for (const Mode mode : {Mode::coupled, Mode::exact}) {
        INFO(mode_name(mode));
        SenderAndReceivers net(mode, kBytePerPs_GBps, 100 * kBytePerPs_GBps);
        Ends ends(static_cast<std::size_t>(flows));
        net.net.start_flow({net.s, net.r}, 1e6, 0, kNoCap, ends.at(0));
        net.net.start_flow({net.s, net.x}, g_bytes, 0, kNoCap, ends.at(1));
        for (std::size_t k = 2; k < static_cast<std::size_t>(flows); ++k)
          net.net.start_flow({net.s, net.x}, 1e6, 0, kNoCap, ends.at(k));
        net.q.run();
        CHECK(ends.ended[1] == static_cast<epsim::Time_ps>(g_bytes * n));
        CHECK(ends.ended[2] == s_done);
        CHECK(ends.ended[0] == (mode == Mode::coupled ? s_done + lag : s_done));
      }
    }
  }
}

TEST_CASE("coupled: a receiver with room takes its leader's new rate at once, and one without re-solves") {
  // S (1 byte/ps) sends f (1e6 bytes) to R and g (250,000) to X (1 byte/ps): 0.5 each until g ends
  // at 500,000 ps, then f alone at 1. R, following, carries f at S's 0.5 with room to spare. When S
  // speeds up: an R of 2 byte/ps still has room, so f's class takes S's 1 as it is (no filling; the
  // recap of a group with room): 750,000 bytes by 1,000,000 and f's end at 1,250,000. An R of 0.8
  // has no room for 1: the full solve holds f at 0.8, 650,000 bytes by 1,000,000, and f ends at
  // 500,000 + 750,000 / 0.8 = 1,437,500. Exact gives the same.
  for (const double r_GBps : {2 * kBytePerPs_GBps, 0.8 * kBytePerPs_GBps}) {
    const bool room = r_GBps > kBytePerPs_GBps;
    INFO("R of " << r_GBps / kBytePerPs_GBps << " byte/ps");
    for (const Mode mode : {Mode::coupled, Mode::exact}) {
      INFO(mode_name(mode));
      SenderAndReceivers n(mode, r_GBps, kBytePerPs_GBps);
      Ends ends(2);
      const auto f = n.net.start_flow({n.s, n.r}, 1e6, 0, kNoCap, ends.at(0));
      n.net.start_flow({n.s, n.x}, 250'000, 0, kNoCap, ends.at(1));
      double r_bytes = -1;
      double r_rate_GBps = -1;
      n.q.schedule(1'000'000, [&] {
        r_bytes = n.net.link_bytes(n.r);
        r_rate_GBps = n.net.flow_rate_GBps(f);
      });
      n.q.run();
      CHECK(ends.ended[1] == 500'000);
      CHECK(r_bytes == doctest::Approx(room ? 750'000 : 650'000));
      CHECK(r_rate_GBps == doctest::Approx(room ? kBytePerPs_GBps : 0.8 * kBytePerPs_GBps));
      CHECK(ends.ended[0] == (room ? 1'250'000 : 1'437'500));
    }
  }
}

TEST_CASE("coupled: a receiver's classes keep their own clocks, and one that ends leaves the others their room") {
  // Two senders into one following receiver R. S1 (1 byte/ps) sends f1 (1e6 bytes) to R and g
  // (250,000) to X (1 byte/ps): 0.5 each until g ends at 500,000 ps, then f1 alone at 1. S2 (1
  // byte/ps) sends f2 (1e6) to R alone, at 1. R's classes for S1 and S2 move on clocks of their
  // own: S1's move at 500,000 re-rates f1's class and leaves f2's as it was.
  //   R of 10 byte/ps has room for both at their senders' rates. f2 ends at 1,000,000, f1 at
  //   500,000 + 750,000 = 1,250,000. At 750,000 R has carried f1's 250,000 + 250,000 and f2's
  //   750,000: 1,250,000 bytes; at 1,100,000, after f2 left (and gave its share of R back), f1's
  //   850,000 and f2's 1e6, with f1 at 1 byte/ps.
  //   R of 1.5 byte/ps has no room: until 500,000 f1 takes S1's 0.5 and f2 the 1 left; then R
  //   shares 0.75 each. f2 has 500,000 to go: it ends at 500,000 + 666,666.7, rounded up to
  //   1,166,667, when f1 has 250,000 + 500,000.25; f1 then runs alone at S1's 1 and ends at
  //   1,416,666.75, rounded up to 1,416,667. At 750,000 R has carried f1's 437,500 and f2's
  //   687,500; at 1,100,000, 700,000 and 950,000, with f1 at 0.75. Coupled's senders do not learn
  //   what their receivers hold: S1 sends f1 at 1 from 500,000 and has sent it by 1,250,000, when
  //   R holds 833,333.25 of it; without its leader R takes the rest at its own 1.5, and f1 ends at
  //   1,361,111.2, rounded up to 1,361,112 (docs/performance.md, "Which GPUs coupled makes late").
  struct Case {
    double r_byte_per_ps;
    epsim::Time_ps f2_end, f1_end, f1_end_coupled;
    double r_at_750k, r_at_1100k, f1_rate_at_1100k;
  };
  for (const Case& c : {Case{10, 1'000'000, 1'250'000, 1'250'000, 1'250'000, 1'850'000, 1},
                        Case{1.5, 1'166'667, 1'416'667, 1'361'112, 1'125'000, 1'650'000, 0.75}}) {
    INFO("R of " << c.r_byte_per_ps << " byte/ps");
    for (const Mode mode : {Mode::coupled, Mode::exact}) {
      INFO(mode_name(mode));
      TwoSendersAndReceivers n(mode, c.r_byte_per_ps, 1);
      FlowNetwork& net = n.net;
      EventQueue& q = n.q;
      const LinkId s1 = n.s1, s2 = n.s2, r = n.r, x = n.x;
      Ends ends(3);
      const auto f1 = net.start_flow({s1, r}, 1e6, 0, kNoCap, ends.at(0));
      net.start_flow({s2, r}, 1e6, 0, kNoCap, ends.at(1));
      net.start_flow({s1, x}, 250'000, 0, kNoCap, ends.at(2));
      double r_at_750k = -1, r_at_1100k = -1, f1_rate = -1;
      q.schedule(750'000, [&] { r_at_750k = net.link_bytes(r); });
      q.schedule(1'100'000, [&] {
        r_at_1100k = net.link_bytes(r);
        f1_rate = net.flow_rate_GBps(f1) / kBytePerPs_GBps;
      });
      q.run();
      CHECK(ends.ended[2] == 500'000);
      CHECK(ends.ended[1] == c.f2_end);
      CHECK(ends.ended[0] == (mode == Mode::coupled ? c.f1_end_coupled : c.f1_end));
      CHECK(r_at_750k == doctest::Approx(c.r_at_750k));
      CHECK(r_at_1100k == doctest::Approx(c.r_at_1100k));
      CHECK(f1_rate == doctest::Approx(c.f1_rate_at_1100k));
    }
  }
}

TEST_CASE("coupled: a flow joining a receiver's class that keeps its rate ends at its own end") {
  // A following group's solve moves the clocks and ends of the classes whose rates move alone; a
  // class that flows join has its end worked out as they join. R (1 byte/ps, following) has no
  // room: f1 (1e6 bytes, capped at 0.2 byte/ps) from S1 and f2 (1e7) from S2, which takes the 0.8
  // left. At 1,000,000 ps f3 (100,000, capped at 0.2) joins f1's class at S1 and at R: S1 sends
  // both at 0.2 and R's class for S1 keeps its 0.2, while f2 falls to 0.6. f3 ends at 1,000,000 +
  // 100,000 / 0.2 = 1,500,000 (a receiver that kept its class's end from before f3 joined would
  // end f3 with f1), f1 at 5,000,000. f2 has 800,000 by 1,000,000, 1,100,000 by 1,500,000 and
  // 3,900,000 by 5,000,000, then runs at S2's 1 and ends at 5,000,000 + 6,100,000 = 11,100,000.
  constexpr double kFifthByte_GBps = 0.2 * kBytePerPs_GBps;
  for (const Mode mode : {Mode::coupled, Mode::exact, Mode::local}) {
    INFO(mode_name(mode));
    TwoSendersAndReceivers n(mode, 1, 1);
    Ends ends(3);
    n.net.start_flow({n.s1, n.r}, 1e6, 0, kFifthByte_GBps, ends.at(0));
    n.net.start_flow({n.s2, n.r}, 1e7, 0, kNoCap, ends.at(1));
    n.q.schedule(1'000'000, [&] { n.net.start_flow({n.s1, n.r}, 100'000, 0, kFifthByte_GBps, ends.at(2)); });
    n.q.run();
    CHECK(ends.ended[2] == 1'500'000);
    CHECK(ends.ended[0] == 5'000'000);
    CHECK(ends.ended[1] == 11'100'000);
  }
}

TEST_CASE("coupled: an idle follower takes its sender's rate when flows join it again") {
  // A sender tells only the followers with flows; one that flows join again reads its sender's rate
  // then. S (1 byte/ps) sends f1 (25,000 bytes) to R (10 byte/ps, following) and h (1e7) to X, both
  // capped at 0.375 byte/ps, and m1 and m2 (125,000 each) to Y: 0.25 each, so f1 ends at 100,000
  // ps and R's class for S goes idle. S then shares 1/3 each, until m1 and m2 end at 100,000 +
  // 100,000 / (1/3) = 400,000, when h alone takes its cap, 0.375: S's class moves while R's is idle.
  // At 500,000 f2 (30,000, capped at 0.375) joins S's class, which keeps its 0.375 (h and f2 take
  // 0.75 of S), and R's class for S: f2 ends at 500,000 + 30,000 / 0.375 = 580,000. A receiver that
  // kept the rate it heard before it went idle (1/3 at most) would end f2 at 590,000 or later.
  constexpr double kCap_GBps = 0.375 * kBytePerPs_GBps;
  for (const Mode mode : {Mode::coupled, Mode::exact, Mode::local}) {
    INFO(mode_name(mode));
    EventQueue q;
    FlowNetwork net(q);
    net.set_sharing(epsim::test::sharing(mode));
    const LinkId s = net.add_link("S", kBytePerPs_GBps, 0);
    const LinkId r = net.add_link("R", 10 * kBytePerPs_GBps, 1);
    const LinkId x = net.add_link("X", 10 * kBytePerPs_GBps, 2);
    const LinkId y = net.add_link("Y", 10 * kBytePerPs_GBps, 3);
    if (mode == Mode::coupled) net.couple_group_of(r);
    Ends ends(5);
    net.start_flow({s, r}, 25'000, 0, kCap_GBps, ends.at(0));
    net.start_flow({s, x}, 1e7, 0, kCap_GBps, ends.at(1));
    net.start_flow({s, y}, 125'000, 0, kNoCap, ends.at(2));
    net.start_flow({s, y}, 125'000, 0, kNoCap, ends.at(3));
    q.schedule(500'000, [&] { net.start_flow({s, r}, 30'000, 0, kCap_GBps, ends.at(4)); });
    q.run();
    CHECK(ends.ended[0] == 100'000);
    CHECK(std::abs(ends.ended[2] - 400'000) <= 1);
    CHECK(std::abs(ends.ended[3] - 400'000) <= 1);
    CHECK(ends.ended[4] == 580'000);
  }
}

TEST_CASE("coupled: a receiver's first end that its sender pushes back behind another's comes second") {
  // S1 (1 byte/ps) sends f1 (500,000 bytes) to R (10 byte/ps, following), and f2 (700,000), capped
  // at 1 byte/ps, crosses R alone: R has room for both at 1, and f1's end comes first, at 500,000
  // ps. At 200,000 S1 starts g (2e6) to X (10 byte/ps) and shares itself 0.5 each: R's class for
  // f1 takes its sender's 0.5 (a recap with room), and f1's 300,000 left now end at 200,000 +
  // 600,000 = 800,000, behind f2's 700,000. R's next end is then f2's, which nothing else on its
  // route would bring: a receiver that kept waiting for f1's would end f2 at 800,000. g has
  // 300,000 by 800,000 and ends at 800,000 + 1,700,000.
  for (const Mode mode : {Mode::coupled, Mode::exact}) {
    INFO(mode_name(mode));
    TwoSendersAndReceivers n(mode, 10, 10);
    Ends ends(3);
    n.net.start_flow({n.s1, n.r}, 500'000, 0, kNoCap, ends.at(0));
    n.net.start_flow({n.r}, 700'000, 0, kBytePerPs_GBps, ends.at(1));
    n.q.schedule(200'000, [&] { n.net.start_flow({n.s1, n.x}, 2e6, 0, kNoCap, ends.at(2)); });
    n.q.run();
    CHECK(ends.ended[1] == 700'000);
    CHECK(ends.ended[0] == 800'000);
    CHECK(ends.ended[2] == 2'500'000);
  }
}

TEST_CASE("coupled: a flow that leaves a receiver with room gives its share of the receiver back") {
  // S1 (1 byte/ps) sends f1 (500,000 bytes) to R and h (3e6) to X (10 byte/ps): 0.5 each, f1 done
  // at 1,000,000 ps, h then alone at 1 and done at 3,500,000. S2 (1 byte/ps) sends f2 (2e6) to R
  // alone: 1 byte/ps, done at 2,000,000. R (10 byte/ps, following) has room for both at their
  // senders' rates throughout, so when f1 leaves it, R carries f2 alone at 1: 500,000 + 1,500,000
  // bytes by 1,500,000 (R kept at f1's and f2's 2 byte/ps would show 2,500,000).
  for (const Mode mode : {Mode::coupled, Mode::exact}) {
    INFO(mode_name(mode));
    TwoSendersAndReceivers n(mode, 10, 10);
    FlowNetwork& net = n.net;
    EventQueue& q = n.q;
    const LinkId s1 = n.s1, s2 = n.s2, r = n.r, x = n.x;
    Ends ends(3);
    net.start_flow({s1, r}, 500'000, 0, kNoCap, ends.at(0));
    net.start_flow({s1, x}, 3e6, 0, kNoCap, ends.at(1));
    const auto f2 = net.start_flow({s2, r}, 2e6, 0, kNoCap, ends.at(2));
    double r_bytes = -1, f2_rate = -1;
    q.schedule(1'500'000, [&] {
      r_bytes = net.link_bytes(r);
      f2_rate = net.flow_rate_GBps(f2) / kBytePerPs_GBps;
    });
    q.run();
    CHECK(ends.ended[0] == 1'000'000);
    CHECK(ends.ended[2] == 2'000'000);
    CHECK(ends.ended[1] == 3'500'000);
    CHECK(r_bytes == doctest::Approx(2'000'000));
    CHECK(f2_rate == doctest::Approx(1));
  }
}

TEST_CASE("coupled: a receiver without room lets a held class take its sender's move, its link's level waiting within a bound") {
  // S1 (1 byte/ps) sends f1 (1e6 bytes) to R and g1 (100,000) and g2 (1e7) to X (1,000 byte/ps):
  // a third each, g1 done at 300,000 ps, then half each. S2 sends f2 to R alone, as fast as R takes
  // it. R follows and has no room: it holds f1 at S1's rate and gives f2 the rest, R's level.
  //   R of 100 byte/ps (S2 of 200): f2 gets 99.667 until 300,000, then exact gives it 99.5. S1's
  //   move of f1 from 1/3 to 1/2 stays below R's level and moves R by 0.167 byte/ps, under half a
  //   percent of it: coupled gives f1 its 1/2 and leaves f2 at its level until R's next event. f2
  //   (1e8 bytes) has 70,100,000 to go at 300,000: exact ends it after 704,522.6 ps more, at
  //   1,004,523; coupled after 703,344.5, at 1,003,345, R carrying 0.167 byte/ps more than it can.
  //   R of 10 byte/ps (S2 of 20): the same move is 1.7% of R, so R re-solves in full, and coupled
  //   ends f2 (1e7 bytes: 7,100,000 to go at 9.5 from 300,000) where exact does, at 1,047,369.
  //   Either way f1 ends at 300,000 + 900,000 / 0.5 = 2,100,000.
  struct Case {
    double r_byte_per_ps;
    double f2_bytes;
    epsim::Time_ps f2_end_exact, f2_end_coupled;
  };
  for (const Case& c : {Case{100, 1e8, 1'004'523, 1'003'345}, Case{10, 1e7, 1'047'369, 1'047'369}}) {
    INFO("R of " << c.r_byte_per_ps << " byte/ps");
    for (const Mode mode : {Mode::coupled, Mode::exact}) {
      INFO(mode_name(mode));
      EventQueue q;
      FlowNetwork net(q);
      net.set_sharing(epsim::test::sharing(mode));
      const LinkId s1 = net.add_link("S1", kBytePerPs_GBps, 0);
      const LinkId s2 = net.add_link("S2", 2 * c.r_byte_per_ps * kBytePerPs_GBps, 1);
      const LinkId r = net.add_link("R", c.r_byte_per_ps * kBytePerPs_GBps, 2);
      const LinkId x = net.add_link("X", 1000 * kBytePerPs_GBps, 3);
      if (mode == Mode::coupled) net.couple_group_of(r);
      Ends ends(4);
      net.start_flow({s1, r}, 1e6, 0, kNoCap, ends.at(0));
      net.start_flow({s1, x}, 100'000, 0, kNoCap, ends.at(1));
      net.start_flow({s1, x}, 1e7, 0, kNoCap, ends.at(2));
      net.start_flow({s2, r}, c.f2_bytes, 0, kNoCap, ends.at(3));
      q.run();
      CHECK(ends.ended[1] == 300'000);
      CHECK(ends.ended[3] == (mode == Mode::coupled ? c.f2_end_coupled : c.f2_end_exact));
      CHECK(ends.ended[0] == 2'100'000);
    }
  }
}

TEST_CASE("coupled: a held class whose sender's small move takes it past its link's level re-solves the link") {
  // R (100 byte/ps, following) takes f1 from S1 and 99 flows from S2 (1,000 byte/ps, 10.1 each
  // there). S1 (2.1 byte/ps) also sends g1, and g2 capped at 0.16 byte/ps, to X (1,000 byte/ps):
  // f1 and g1 get 0.97 each, so R holds f1 at 0.97 and its level is (100 - 0.97) / 99 = 1.0003 for
  // the others. g2 (16,000 bytes) ends at 100,000 ps, and S1 moves f1 to 1.05: beyond 5% of f1's
  // rate, so R re-solves at once, but by 0.08 byte/ps, within R's half a percent for a held class's
  // moves. 1.05 is above R's level, though: R solves in full and every flow gets 1.0, as under exact.
  // Taken alone, f1's move would have R carry 100.08 byte/ps until its next event. S2's flows
  // (1e6 bytes each, 100,030.3 by 100,000 ps) end at 100,000 + 899,969.7 / 1.0 = 999,969.7 ps.
  for (const Mode mode : {Mode::coupled, Mode::exact}) {
    INFO(mode_name(mode));
    TwoSendersAndReceivers n(mode, 2.1, 1000, 100, 1000);
    Ends ends(102);
    n.net.start_flow({n.s1, n.r}, 1e6, 0, kNoCap, ends.at(0));
    n.net.start_flow({n.s1, n.x}, 1e7, 0, kNoCap, ends.at(1));
    n.net.start_flow({n.s1, n.x}, 16'000, 0, 0.16 * kBytePerPs_GBps, ends.at(2));
    for (std::size_t k = 3; k < 102; ++k) n.net.start_flow({n.s2, n.r}, 1e6, 0, kNoCap, ends.at(k));
    double r_bytes = -1;
    n.q.schedule(200'000, [&] { r_bytes = n.net.link_bytes(n.r); });
    n.q.run();
    CHECK(ends.ended[2] == 100'000);
    // R is full from the start: 100 byte/ps, never more.
    CHECK(r_bytes == doctest::Approx(2e7).epsilon(1e-9));
    for (std::size_t k = 3; k < 102; ++k) CHECK(std::abs(ends.ended[k] - 999'970) <= 1);
  }
}

TEST_CASE("coupled: a receiver without room whose sender has sent all of a held flow re-solves") {
  // S (1 byte/ps) sends f (1e6 bytes) to R, g (1e7, capped at 100 byte/ps) and h (2,000, capped
  // at 0.04) to X (1,000 byte/ps): a class each, h at 0.04 and f and g at 0.48. R (1 byte/ps,
  // following) also takes f2 from S2 (1,000 byte/ps): it holds f at 0.48 and gives f2 0.52, full.
  // h ends at 50,000 ps and S moves f to 0.5, within 5% of f's 0.48: R keeps f at 0.48. S has sent
  // all of f at 2,002,000 ps (24,000 + 976,000 bytes), when R has 960,960: f is no longer held, R
  // solves again and gives f and f2 0.5 each, and f's last 39,040 bytes take 78,080 ps: f ends at
  // 2,080,080. (Left at 0.48 until its end, it would end at 2,083,334.) Under exact, f ends with S.
  // The same with 40 empty flows from S to X first, each under its own cap, which put f's class at
  // S past the 32 a group keeps a bit for (were its end not read as a leader's, R would keep f held).
  for (const std::size_t empty : {std::size_t{0}, std::size_t{40}}) {
    for (const Mode mode : {Mode::coupled, Mode::exact}) {
      INFO(mode_name(mode) << ", " << empty << " empty flows first");
      TwoSendersAndReceivers n(mode, 1, 1000, 1, 1000);  // S is S1
      Ends ends(4 + empty);
      for (std::size_t k = 0; k < empty; ++k)
        n.net.start_flow({n.s1, n.x}, 0, 0, 1001.0 + static_cast<double>(k), ends.at(4 + k));
      n.net.start_flow({n.s1, n.r}, 1e6, 0, kNoCap, ends.at(0));
      n.net.start_flow({n.s1, n.x}, 1e7, 0, 100 * kBytePerPs_GBps, ends.at(1));
      n.net.start_flow({n.s1, n.x}, 2'000, 0, 0.04 * kBytePerPs_GBps, ends.at(2));
      n.net.start_flow({n.s2, n.r}, 1e7, 0, kNoCap, ends.at(3));
      n.q.run();
      CHECK(ends.ended[2] == 50'000);
      CHECK(ends.ended[0] == (mode == Mode::coupled ? 2'080'080 : 2'002'000));
    }
  }
}

TEST_CASE("coupled: a receiver's class that empties and fills again follows its sender anew") {
  // S sends f1 (500,000 bytes) to R alone: 1 byte/ps, done at 500,000 ps; R's class for S empties.
  // At 1,000,000 S sends f2 (500,000) to R and g (1e6) to X: S gives each 0.5, and R, following,
  // carries f2 at 0.5 with room to spare: R has carried 750,000 bytes by 1,500,000, as under exact
  // (local: 1e6, R running f2 at 1 ahead of S). The flows end alike in all three: f2 at 2,000,000,
  // when S has sent it, and g, alone on S from there, at 2,500,000.
  sender_two_receivers(
      1'500'000, 3,
      [](FlowNetwork& net, EventQueue& q, LinkId s, LinkId r, LinkId x, Ends& ends) {
        net.start_flow({s, r}, 500'000, 0, kNoCap, ends.at(0));
        q.schedule(1'000'000, [&net, &ends, s, r, x] {
          net.start_flow({s, r}, 500'000, 0, kNoCap, ends.at(1));
          net.start_flow({s, x}, 1e6, 0, kNoCap, ends.at(2));
        });
      },
      [](Mode mode, const Ends& ends, double r_bytes) {
        CHECK(ends.ended[0] == 500'000);
        CHECK(r_bytes == doctest::Approx(mode == Mode::local ? 1e6 : 750'000));
        CHECK(ends.ended[1] == 2'000'000);
        CHECK(ends.ended[2] == 2'500'000);
      });
}

TEST_CASE("coupled: a flow that enters a receiver with room adds its sender's rate, and one that takes the room away re-solves") {
  // S1 (1 byte/ps) sends f1 (1e6 bytes) to R (following) at 1 byte/ps from 0; at 200,000 ps S2
  // (1 byte/ps) sends f2 (500,000) to R.
  //   R of 2.5 byte/ps has room for f2 at its sender's 1 beside f1: R has carried 250,000 +
  //   50,000 bytes by 250,000 and f2 ends at 700,000. At 300,000 h (50,000 bytes, capped at 0.25
  //   byte/ps) starts on R alone, which still has room (2.25 of 2.5): h ends at 500,000, and f1
  //   at 1,000,000, as if each ran alone.
  //   R of 1.5 byte/ps has no room for f2 beside f1: both move at 0.75 from 200,000, R has carried
  //   200,000 + 37,500 + 37,500 by 250,000, and f2 ends at 866,666.7, rounded up to 866,667, when
  //   f1 has 700,000. Under exact f1, alone from there at 1, ends at 1,166,666.7 (1,166,667); under
  //   coupled S1 does not learn that R held f1 and has sent it by 1,000,000, when R has 833,333.3
  //   of it and takes the rest at its own 1.5: 1,111,111.1 (1,111,112).
  struct Case {
    double r_byte_per_ps;
    epsim::Time_ps f1_end, f1_end_coupled, f2_end;
    double r_at_250k, f1_rate_at_250k;
  };
  for (const Case& c : {Case{2.5, 1'000'000, 1'000'000, 700'000, 300'000, 1},
                        Case{1.5, 1'166'667, 1'111'112, 866'667, 275'000, 0.75}}) {
    INFO("R of " << c.r_byte_per_ps << " byte/ps");
    for (const Mode mode : {Mode::coupled, Mode::exact}) {
      INFO(mode_name(mode));
      TwoSendersAndReceivers n(mode, c.r_byte_per_ps, 1);
      const bool with_h = c.r_byte_per_ps > 2;
      Ends ends(3);
      const auto f1 = n.net.start_flow({n.s1, n.r}, 1e6, 0, kNoCap, ends.at(0));
      n.q.schedule(200'000, [&] { n.net.start_flow({n.s2, n.r}, 500'000, 0, kNoCap, ends.at(1)); });
      if (with_h)
        n.q.schedule(300'000, [&] { n.net.start_flow({n.r}, 50'000, 0, 0.25 * kBytePerPs_GBps, ends.at(2)); });
      double r_at_250k = -1, f1_rate = -1;
      n.q.schedule(250'000, [&] {
        r_at_250k = n.net.link_bytes(n.r);
        f1_rate = n.net.flow_rate_GBps(f1) / kBytePerPs_GBps;
      });
      n.q.run();
      CHECK(ends.ended[0] == (mode == Mode::coupled ? c.f1_end_coupled : c.f1_end));
      CHECK(ends.ended[1] == c.f2_end);
      if (with_h) CHECK(ends.ended[2] == 500'000);
      CHECK(r_at_250k == doctest::Approx(c.r_at_250k));
      CHECK(f1_rate == doctest::Approx(c.f1_rate_at_250k));
    }
  }
}

TEST_CASE("coupled: a flow that joins a class with flows in a receiver with room adds its rate to the receiver's load") {
  // S1 (1 byte/ps) sends f1 (1e6 bytes, capped at 0.25 byte/ps) to R (1.4 byte/ps, following) from
  // 0, and f3 (the same) from 100,000 ps: one class at S1 and at R, whose rate stays at the cap,
  // 2 x 0.25 of R, with room. At 200,000 S2 (1 byte/ps) sends f2 (400,000 bytes) to R: 0.5 + 1 of
  // 1.4 leaves no room, and max-min keeps f1 and f3 at their caps and gives f2 the 0.9 left: it
  // ends at 644,444.4, rounded up to 644,445 (a receiver that counted f1's class as one flow would
  // take f2 at 1 and end it at 600,000). f1 ends at 4,000,000 and f3 at 4,100,000.
  for (const Mode mode : {Mode::coupled, Mode::exact}) {
    INFO(mode_name(mode));
    TwoSendersAndReceivers n(mode, 1.4, 1);
    Ends ends(3);
    const double cap_GBps = 0.25 * kBytePerPs_GBps;
    n.net.start_flow({n.s1, n.r}, 1e6, 0, cap_GBps, ends.at(0));
    n.q.schedule(100'000, [&] { n.net.start_flow({n.s1, n.r}, 1e6, 0, cap_GBps, ends.at(1)); });
    epsim::FlowId f2 = 0;
    n.q.schedule(200'000, [&] { f2 = n.net.start_flow({n.s2, n.r}, 400'000, 0, kNoCap, ends.at(2)); });
    double f2_rate = -1;
    n.q.schedule(300'000, [&] { f2_rate = n.net.flow_rate_GBps(f2) / kBytePerPs_GBps; });
    n.q.run();
    CHECK(f2_rate == doctest::Approx(0.9));
    CHECK(ends.ended[2] == 644'445);
    CHECK(ends.ended[0] == 4'000'000);
    CHECK(ends.ended[1] == 4'100'000);
  }
}

TEST_CASE("coupled: a sender whose class fills again at the rate it had tells its receiver anew") {
  // S1 (1 byte/ps) sends f1 (250,000 bytes) to R (1.5 byte/ps, following) and g1 (250,000) to X
  // (1 byte/ps): 0.5 byte/ps each, both done at 500,000 ps, when S1's class empties (R takes its
  // sender as done). At 1,000,000 S1 sends f2 and g2, the same again, at the same 0.5, and h
  // (300,000 bytes) starts on R alone. R must hear S1's rate though it did not move: under exact
  // f2 moves at S1's 0.5 and h takes R's other 1 byte/ps, ending at 1,300,000. A receiver that
  // still took S1 as done would share R 0.75 each, as local does: R has carried f2 by 1,333,333.3,
  // and h, alone from there at 1.5, ends at 1,366,666.7, rounded up to 1,366,667. f2 and g2 end
  // when S1 has sent them, at 1,500,000, in every mode.
  for (const Mode mode : {Mode::coupled, Mode::exact, Mode::local}) {
    INFO(mode_name(mode));
    TwoSendersAndReceivers n(mode, 1.5, 1);
    Ends ends(5);
    n.net.start_flow({n.s1, n.r}, 250'000, 0, kNoCap, ends.at(0));
    n.net.start_flow({n.s1, n.x}, 250'000, 0, kNoCap, ends.at(1));
    n.q.schedule(1'000'000, [&] {
      n.net.start_flow({n.s1, n.r}, 250'000, 0, kNoCap, ends.at(2));
      n.net.start_flow({n.s1, n.x}, 250'000, 0, kNoCap, ends.at(3));
      n.net.start_flow({n.r}, 300'000, 0, kNoCap, ends.at(4));
    });
    n.q.run();
    CHECK(ends.ended[0] == 500'000);
    CHECK(ends.ended[1] == 500'000);
    CHECK(ends.ended[2] == 1'500'000);
    CHECK(ends.ended[3] == 1'500'000);
    CHECK(ends.ended[4] == (mode == Mode::local ? 1'366'667 : 1'300'000));
  }
}

namespace {

/// A sender S1 (1 byte/ps), a relay A and a receiver R (both following under coupled, A leading R)
/// and another receiver X (1 byte/ps), a group each; A's and R's rates in bytes per ps.
struct RelayedSender {
  EventQueue q;
  FlowNetwork net{q};
  LinkId s1, a, r, x;
  RelayedSender(Mode mode, double a_byte_per_ps, double r_byte_per_ps) {
    net.set_sharing(epsim::test::sharing(mode));
    s1 = net.add_link("S1", kBytePerPs_GBps, 0);
    a = net.add_link("A", a_byte_per_ps * kBytePerPs_GBps, 1);
    r = net.add_link("R", r_byte_per_ps * kBytePerPs_GBps, 2);
    x = net.add_link("X", kBytePerPs_GBps, 3);
    if (mode == Mode::coupled) {
      net.couple_group_of(a);
      net.couple_group_of(r);
    }
  }
};

}  // namespace

TEST_CASE("coupled: a relay whose recap moves a class tells the receiver it leads") {
  // S1 sends f (1e6 bytes) through the relay A (10 byte/ps, room to spare) to R (1.5 byte/ps), and
  // g (100,000) to X: 0.5 byte/ps each. R also carries h (500,000) alone: R holds f at A's 0.5 and
  // gives h the other 1. g ends at 200,000 ps; S1 then sends f at 1, A's recap takes that move, and
  // R must hear it: R now shares f and h at 0.75 each. h has 300,000 left at 200,000 and ends at
  // 600,000, as under exact (a relay that kept its move to itself would leave h at 1 and end it at
  // 500,000). f has 100,000 + 300,000 by 600,000 at R. Under exact it then runs at S1's 1 and ends
  // at 1,200,000. Under coupled S1 and A, which R's share does not hold back, have sent f at 1 since
  // 200,000 and are done at 1,100,000, when R, released, takes the 100,000 it has left at 1.5:
  // 1,166,667 (a sender under coupled does not hear what its receivers hold).
  for (const Mode mode : {Mode::coupled, Mode::exact}) {
    INFO(mode_name(mode));
    RelayedSender n(mode, 10, 1.5);
    Ends ends(3);
    n.net.start_flow({n.s1, n.a, n.r}, 1e6, 0, kNoCap, ends.at(0));
    n.net.start_flow({n.s1, n.x}, 100'000, 0, kNoCap, ends.at(1));
    n.net.start_flow({n.r}, 500'000, 0, kNoCap, ends.at(2));
    n.q.run();
    CHECK(ends.ended[1] == 200'000);
    CHECK(ends.ended[2] == 600'000);
    CHECK(ends.ended[0] == (mode == Mode::coupled ? 1'166'667 : 1'200'000));
  }
}

TEST_CASE("coupled: a relay without room whose class fills again at the rate it had tells its receiver anew") {
  // The relay A (0.5 byte/ps) also carries k (1e7 bytes) alone, which keeps it full. S1 sends f1
  // (125,000) through A to R (1.5 byte/ps): A shares f1 and k at 0.25 each, and f1 ends at 500,000
  // ps, when A's class for S1 empties (R takes it as done). At 1,000,000 S1 sends f2 (125,000) the
  // same way, which A again gives 0.25, the rate its class had, and h (300,000) starts on R alone.
  // R must hear A's 0.25 though it did not move: R then gives h the other 1.25, and h ends at
  // 1,240,000, as under exact (a receiver that still took A as done would share R at 0.75 each, as
  // local does, and end h later). f2 ends when A has carried it, at 1,500,000; k has 125,000 +
  // 250,000 + 125,000 by then and ends 19,000,000 later, at 20,500,000.
  for (const Mode mode : {Mode::coupled, Mode::exact}) {
    INFO(mode_name(mode));
    RelayedSender n(mode, 0.5, 1.5);
    Ends ends(4);
    n.net.start_flow({n.a}, 1e7, 0, kNoCap, ends.at(0));
    n.net.start_flow({n.s1, n.a, n.r}, 125'000, 0, kNoCap, ends.at(1));
    n.q.schedule(1'000'000, [&] {
      n.net.start_flow({n.s1, n.a, n.r}, 125'000, 0, kNoCap, ends.at(2));
      n.net.start_flow({n.r}, 300'000, 0, kNoCap, ends.at(3));
    });
    n.q.run();
    CHECK(ends.ended[1] == 500'000);
    CHECK(ends.ended[3] == 1'240'000);
    CHECK(ends.ended[2] == 1'500'000);
    CHECK(ends.ended[0] == 20'500'000);
  }
}

TEST_CASE("coupled: groups follow only in coupled mode, before the first flow") {
  EventQueue q;
  FlowNetwork local(q);
  local.set_sharing(epsim::test::sharing(Mode::local));
  const LinkId a = local.add_link("A", kBytePerPs_GBps, 0);
  CHECK_THROWS_AS(local.couple_group_of(a), std::logic_error);
  CHECK_FALSE(local.group_follows(a));

  FlowNetwork net(q);
  net.set_sharing(epsim::test::sharing(Mode::coupled));
  const LinkId b = net.add_link("B", kBytePerPs_GBps, 0);
  CHECK_THROWS_AS(net.couple_group_of(7), std::out_of_range);
  net.start_flow({b}, 100, 0, kNoCap, [](epsim::Time_ps, epsim::Time_ps) {});
  CHECK_THROWS_AS(net.couple_group_of(b), std::logic_error);
}

TEST_CASE("coupled: a share of the GPUs by weight syncs received and as many others by load follow, ties to the lower GPU") {
  using namespace epsim;
  HardwareSpec hw = load_hardware(hardware_with("coupled_busiest", "  bandwidth_sharing: coupled\n  coupled_gpus: 0.25\n"));
  hw.nodes = 2;
  const ModelSpec model = load_model((test::source_dir() / "models/glm5-like-128.yaml").string());
  SimContext context(hw, model, 16);
  // A quarter of 16 is four. Weight syncs reach GPUs 12, 13, 14, 15 and 1 (13 and 15 the most, then
  // 1, 12 and 14 alike): 13, 15, 1 and 12 follow. Then four of the others by load 3, 9, 3, 9, ...:
  // the 9s tie, and 3, 5, 7 and 9 follow.
  std::vector<double> load(16);
  for (int g = 0; g < 16; ++g) load[static_cast<std::size_t>(g)] = g % 2 == 1 ? 9 : 3;
  std::vector<double> first(16, 0.0);
  first[12] = first[14] = first[1] = 1e6;
  first[13] = first[15] = 2e6;
  context.couple_busiest(load, first);
  const Topology& topo = context.topology();
  for (int g = 0; g < 16; ++g) {
    INFO("GPU " << g);
    const bool busiest = g == 13 || g == 15 || g == 1 || g == 12 || g == 3 || g == 5 || g == 7 || g == 9;
    for (const LinkId link : topo.gpu_links(g)) CHECK(context.network().group_follows(link) == busiest);
  }
  // Under local, nothing follows (and nothing is asked of the network).
  hw.engine.bandwidth_sharing = BandwidthSharing::local;
  SimContext local(hw, model, 16);
  local.couple_busiest(load, first);
  CHECK_FALSE(local.network().group_follows(local.topology().nic_in(1)));
}

TEST_CASE("coupled: an EP-backend message across nodes makes its rail peer the busiest, the GPU that follows") {
  using namespace epsim;
  // 16 GPUs on 2 nodes of 8, one expert each with its own rank's 100 tokens, and besides either 1 GB
  // of weights from GPU 1 to a copy of its expert on GPU 10, after the dispatch (no weight sync
  // before it), or, with a token copy per GPU, 100,000 of rank 1's tokens to that copy. Under
  // rail_forward the message crosses GPU 1's NIC into GPU 9, GPU 1's rail peer in node 1, and GPU
  // 9's NVLink into GPU 10: GPU 9 is the busiest (its NIC and its NVLink), and with one GPU in 16
  // following (coupled_gpus 1/16) it is GPU 9. Counted at the two ends alone, GPUs 1 and 10 would
  // tie (each the bytes over its NIC) and GPU 1 would follow.
  for (const bool tokens : {false, true}) {
    INFO(std::string(tokens ? "tokens, a copy per GPU" : "weights"));
    HardwareSpec hw = load_hardware(hardware_with("coupled_rail_peer", "  bandwidth_sharing: coupled\n  coupled_gpus: 0.0625\n"));
    hw.nodes = 2;
    if (tokens) hw.ep_backend.token_copies = TokenCopies::per_gpu;
    REQUIRE(hw.ep_backend.internode_route == "rail_forward");
    const ModelSpec model = load_model((test::source_dir() / "models/glm5-like-128.yaml").string());
    Plan plan;
    plan.balancer = "hand";
    plan.num_gpus = 16;
    plan.gemm_order.resize(16);
    for (int g = 0; g < 16; ++g) {
      plan.instances.push_back({g, g, InstanceKind::static_expert});
      plan.routes.push_back({g, g, 100, Carrier::none, -1, 0});
      plan.gemm_order[static_cast<std::size_t>(g)] = {{g, {g}}};
    }
    plan.instances.push_back({1, 10, InstanceKind::replica});
    plan.gemm_order[10].push_back({10, {16}});
    plan.transfers.push_back({TransferKind::weights, PassKind::forward, Carrier::ep_backend,
                              TransferStart::after_dispatch, 16, 1, 10, tokens ? 1'000 : 1'000'000'000});
    if (tokens) plan.routes.push_back({1, 16, 100'000, Carrier::ep_backend, -1, 0});
    validate_plan(plan, model.num_experts, hw.gpus_per_node);
    SimContext context(hw, model, 16);
    REQUIRE(context.topology().forwarding_gpu(1, 10) == 9);
    const ExchangeFanout fanout(plan, nullptr, model, hw.ep_backend.token_copies, hw.gpus_per_node);
    std::vector<std::int64_t> local(16, 100);
    if (tokens) local[1] += 100'000;
    const LayerRun run(context, plan, fanout, local, false);
    for (int g = 0; g < 16; ++g) {
      INFO("GPU " << g);
      CHECK(context.network().group_follows(context.topology().nic_in(g)) == (g == 9));
    }
  }
}

TEST_CASE("coupled: engine.bandwidth_sharing coupled and engine.coupled_gpus in a hardware file") {
  using namespace epsim;
  const HardwareSpec hw = load_hardware(hardware_with("coupled_hw", "  bandwidth_sharing: coupled\n  coupled_gpus: 0.3\n"));
  CHECK(hw.engine.bandwidth_sharing == BandwidthSharing::coupled);
  CHECK(hw.engine.coupled_gpus == doctest::Approx(0.3));
  CHECK(std::string(to_string(BandwidthSharing::coupled)) == "coupled");
  CHECK(load_hardware(hardware_with("coupled_default", "  bandwidth_sharing: coupled\n")).engine.coupled_gpus ==
        doctest::Approx(0.1));
  for (const char* bad : {"0", "1.5", "-0.1", "a tenth"}) {
    INFO("coupled_gpus: " << bad);
    const std::string path = hardware_with("coupled_bad", std::string("  coupled_gpus: ") + bad + "\n");
    try {
      load_hardware(path);
      FAIL("accepted");
    } catch (const std::exception& e) {
      const std::string what = e.what();
      CHECK(what.find(path) != std::string::npos);
      CHECK(what.find("coupled_gpus") != std::string::npos);
    }
  }
}

// ---- whole layers against the exact mode -------------------------------------------------------

TEST_CASE("coupled: static-EP layers on 2 and 8 nodes within 0.5% of exact, as local") {
  using namespace epsim;
  HardwareSpec hw = load_hardware((test::source_dir() / "models/h100-sxm-8.yaml").string());
  const ModelSpec model = load_model((test::source_dir() / "models/glm5-like-128.yaml").string());
  for (const int ep : {16, 64}) {
    INFO("EP " << ep);
    hw.nodes = std::max(hw.nodes, ep / hw.gpus_per_node);
    hw.ep_backend.token_copies = TokenCopies::per_node;
    const Plan plan = test::random_static_plan(hw, model, ep, 2048, 1);
    const std::vector<std::int64_t> local(static_cast<std::size_t>(ep), 2048);
    const test::SharingError error = test::sharing_error(hw, model, plan, local, BandwidthSharing::coupled);
    CHECK(error.layer <= 0.005);
    CHECK(error.worst_gpu <= 0.005);
  }
}
