#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "sim/engine/flow_network.hpp"
#include "sim/hardware/topology.hpp"

using epsim::EventQueue;
using epsim::FlowNetwork;
using epsim::HardwareSpec;
using epsim::LinkId;
using epsim::Time_ps;
using epsim::Topology;

namespace {

// Two nodes of four GPUs, round numbers so that latencies are easy to add by hand.
HardwareSpec two_nodes(const char* route) {
  HardwareSpec hw;
  hw.name = "test";
  hw.nodes = 2;
  hw.gpus_per_node = 4;
  hw.nvlink.port_bw_GBps = 450;
  hw.nvlink.latency_us = 1;
  hw.infiniband.nic_bw_GBps = 50;
  hw.infiniband.latency_us = 3;
  hw.pcie.h2d_GBps = 55;
  hw.pcie.d2h_GBps = 54;
  hw.ep_backend.internode_route = route;
  return hw;
}

}  // namespace

TEST_CASE("Topology: links, names and capacities") {
  EventQueue q;
  FlowNetwork net(q);
  const Topology topo(two_nodes("rail_forward"), 8, net);
  CHECK(topo.num_gpus() == 8);
  CHECK(topo.num_nodes() == 2);
  CHECK(topo.gpus_per_node() == 4);
  CHECK(topo.node_of(3) == 0);
  CHECK(topo.node_of(4) == 1);
  CHECK(topo.same_node(4, 7));
  CHECK_FALSE(topo.same_node(3, 4));
  CHECK(net.link_count() == 6 * 8);
  CHECK(net.link_name(topo.nvlink_out(3)) == "gpu3.nvlink_out");
  CHECK(net.link_name(topo.nvlink_in(3)) == "gpu3.nvlink_in");
  CHECK(net.link_name(topo.nic_out(5)) == "gpu5.nic_out");
  CHECK(net.link_name(topo.nic_in(5)) == "gpu5.nic_in");
  CHECK(net.link_name(topo.pcie_h2d(7)) == "gpu7.pcie_h2d");
  CHECK(net.link_name(topo.pcie_d2h(7)) == "gpu7.pcie_d2h");
  CHECK(net.link_capacity_GBps(topo.nvlink_out(0)) == 450);
  CHECK(net.link_capacity_GBps(topo.nic_in(6)) == 50);
  CHECK(net.link_capacity_GBps(topo.pcie_h2d(1)) == 55);
  CHECK(net.link_capacity_GBps(topo.pcie_d2h(1)) == 54);
  CHECK(topo.nvlink_out(2) != topo.nvlink_out(3));
  CHECK_THROWS_AS(topo.nvlink_out(8), std::out_of_range);
}

TEST_CASE("Topology: routes and latencies with rail forwarding") {
  EventQueue q;
  FlowNetwork net(q);
  const Topology t(two_nodes("rail_forward"), 8, net);
  CHECK(t.ep_route(2, 2).empty());
  CHECK(t.ep_latency_ps(2, 2) == 0);
  // Inside a node: out of the source port, into the destination port.
  CHECK(t.ep_route(0, 1) == std::vector<LinkId>{t.nvlink_out(0), t.nvlink_in(1)});
  CHECK(t.ep_latency_ps(0, 1) == 1'000'000);
  CHECK(t.nvlink_route(3, 0) == std::vector<LinkId>{t.nvlink_out(3), t.nvlink_in(0)});
  // GPU 1 -> GPU 6: IB to GPU 5 (node 1, local index 1), then NVLink 5 -> 6.
  CHECK(t.ep_route(1, 6) == std::vector<LinkId>{t.nic_out(1), t.nic_in(5), t.nvlink_out(5), t.nvlink_in(6)});
  CHECK(t.ep_latency_ps(1, 6) == 3'000'000 + 1'000'000);
  // Same local index: the IB hop alone.
  CHECK(t.ep_route(1, 5) == std::vector<LinkId>{t.nic_out(1), t.nic_in(5)});
  CHECK(t.ep_latency_ps(1, 5) == 3'000'000);
  CHECK(t.ep_route(7, 0) == std::vector<LinkId>{t.nic_out(7), t.nic_in(3), t.nvlink_out(3), t.nvlink_in(0)});
  CHECK_THROWS_AS(t.nvlink_route(0, 4), std::invalid_argument);
  CHECK_THROWS_AS(t.nvlink_route(2, 2), std::invalid_argument);
}

TEST_CASE("Topology: direct inter-node routes") {
  EventQueue q;
  FlowNetwork net(q);
  const Topology t(two_nodes("direct"), 8, net);
  CHECK(t.ep_route(1, 6) == std::vector<LinkId>{t.nic_out(1), t.nic_in(6)});
  CHECK(t.ep_latency_ps(1, 6) == 3'000'000);
  CHECK(t.ep_route(4, 5) == std::vector<LinkId>{t.nvlink_out(4), t.nvlink_in(5)});
}

TEST_CASE("Topology: a partial last node") {
  EventQueue q;
  FlowNetwork net(q);
  const Topology t(two_nodes("rail_forward"), 6, net);
  CHECK(t.num_nodes() == 2);
  CHECK(net.link_count() == 6 * 6);
  CHECK(t.ep_route(1, 5) == std::vector<LinkId>{t.nic_out(1), t.nic_in(5)});
  CHECK(t.ep_route(0, 5) == std::vector<LinkId>{t.nic_out(0), t.nic_in(4), t.nvlink_out(4), t.nvlink_in(5)});
  // GPU 7 (local index 3 of node 1) is not simulated: GPU 3's messages to node 1 go direct.
  CHECK(t.ep_route(3, 4) == std::vector<LinkId>{t.nic_out(3), t.nic_in(4)});
  CHECK(t.ep_latency_ps(3, 4) == 3'000'000);
}

TEST_CASE("Topology: invalid sizes and missing fabrics") {
  EventQueue q;
  FlowNetwork net(q);
  CHECK_THROWS_AS(Topology(two_nodes("rail_forward"), 0, net), std::invalid_argument);
  CHECK_THROWS_AS(Topology(two_nodes("rail_forward"), 9, net), std::invalid_argument);
  CHECK_THROWS_AS(Topology(two_nodes("rail_forward"), -1, net), std::invalid_argument);
  CHECK_THROWS_AS(Topology(two_nodes("ring"), 8, net), std::invalid_argument);
  HardwareSpec one_node = two_nodes("");
  one_node.infiniband.nic_bw_GBps = 0;  // not needed inside one node
  const Topology t(one_node, 4, net);
  CHECK(t.num_nodes() == 1);
  CHECK(t.ep_route(0, 3) == std::vector<LinkId>{t.nvlink_out(0), t.nvlink_in(3)});
  CHECK_THROWS_AS(t.nic_out(0), std::logic_error);
  CHECK_THROWS_AS(Topology(one_node, 5, net), std::invalid_argument);  // two nodes need IB
}

TEST_CASE("Topology: rail-forwarded flows share the forwarding GPU's NVLink port") {
  EventQueue q;
  FlowNetwork net(q);
  const Topology t(two_nodes("rail_forward"), 8, net);
  // GPU 0 -> 5 forwards through GPU 4, whose own message 4 -> 6 leaves on the same NVLink port; the
  // IB hop (50 GB/s) limits the forwarded flow, so the local one gets 450 - 50 = 400 GB/s.
  const std::vector<LinkId> forwarded = t.ep_route(0, 5);
  const std::vector<LinkId> local = t.ep_route(4, 6);
  const auto fwd = net.start_flow(forwarded, 1e9, t.ep_latency_ps(0, 5), FlowNetwork::kNoRateCap, nullptr);
  const auto loc = net.start_flow(local, 1e9, t.ep_latency_ps(0, 5), FlowNetwork::kNoRateCap, nullptr);
  bool probed = false;
  q.schedule(5'000'000, [&] {
    CHECK(net.flow_rate_GBps(fwd) == doctest::Approx(50));
    CHECK(net.flow_rate_GBps(loc) == doctest::Approx(400));
    probed = true;
  });
  while (!probed && q.run_next()) {
  }
  CHECK(probed);
}

TEST_CASE("Topology: every pair's route follows the rail rule, from per-hub trees") {
  // Three nodes of four, the last one partial (GPUs 8 and 9): each pair's route written out by the
  // rule of the header, against what the BFS trees of the hubs (three NVSwitches and the IB fabric)
  // give.
  HardwareSpec hw = two_nodes("rail_forward");
  hw.nodes = 3;
  EventQueue q;
  FlowNetwork net(q);
  const Topology t(hw, 10, net);
  for (int src = 0; src < 10; ++src) {
    for (int dst = 0; dst < 10; ++dst) {
      CAPTURE(src);
      CAPTURE(dst);
      const auto expected = [&]() -> std::vector<LinkId> {
        if (src == dst) return {};
        if (src / 4 == dst / 4) return {t.nvlink_out(src), t.nvlink_in(dst)};
        const int peer = dst / 4 * 4 + src % 4;
        if (peer >= 10 || peer == dst) return {t.nic_out(src), t.nic_in(dst)};  // direct, or the peer itself
        return {t.nic_out(src), t.nic_in(peer), t.nvlink_out(peer), t.nvlink_in(dst)};
      };
      CHECK(t.ep_route(src, dst) == expected());
    }
  }
}
