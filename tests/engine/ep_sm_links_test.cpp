// The SM limit of the EP kernels as links of the flow network, and the forwarding GPU of rail_forward.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "sim/engine/flow_network.hpp"
#include "sim/hardware/topology.hpp"

using namespace epsim;

namespace {

HardwareSpec two_nodes(const char* route, double sm_GBps) {
  HardwareSpec hw;
  hw.name = "test";
  hw.nodes = 2;
  hw.gpus_per_node = 4;
  hw.nvlink.port_bw_GBps = 370;
  hw.nvlink.latency_us = 1;
  hw.infiniband.nic_bw_GBps = 50;
  hw.infiniband.latency_us = 3;
  hw.ep_backend.internode_route = route;
  hw.ep_backend.comm_sms = 20;
  hw.ep_backend.sm_GBps = sm_GBps;
  return hw;
}

}  // namespace

TEST_CASE("SM-limited EP kernels: every EP route starts at the sender's SM link and ends at the receiver's") {
  EventQueue q;
  FlowNetwork net(q);
  const Topology topo(two_nodes("rail_forward", 8), 8, net);
  REQUIRE(topo.has_ep_sm_links());
  CHECK(net.link_capacity_GBps(topo.ep_sms_out(3)) == doctest::Approx(160));  // 20 SMs x 8 GB/s
  // In wire bytes: with NVLink's protocol efficiency 0.8 the link carries 160 / 0.8 = 200 GB/s.
  HardwareSpec lossy = two_nodes("rail_forward", 8);
  lossy.ep_backend.nvlink_efficiency = 0.8;
  FlowNetwork net2(q);
  const Topology lossy_topo(lossy, 8, net2);
  CHECK(net2.link_capacity_GBps(lossy_topo.ep_sms_in(0)) == doctest::Approx(200));
  CHECK(net.link_name(topo.ep_sms_in(5)) == "gpu5.ep_sms_in");
  CHECK(topo.ep_route(0, 2) ==
        std::vector<LinkId>{topo.ep_sms_out(0), topo.nvlink_out(0), topo.nvlink_in(2), topo.ep_sms_in(2)});
  // Rail forward 1 -> 6: IB into GPU 5 (local index 1 of node 1), NVLink on to 6.
  CHECK(topo.ep_route(1, 6) == std::vector<LinkId>{topo.ep_sms_out(1), topo.nic_out(1), topo.nic_in(5),
                                                   topo.nvlink_out(5), topo.nvlink_in(6), topo.ep_sms_in(6)});
  // Copy Engine routes never cross them.
  CHECK(topo.nvlink_route(0, 2) == std::vector<LinkId>{topo.nvlink_out(0), topo.nvlink_in(2)});
  CHECK(topo.ep_route(4, 4).empty());
}

TEST_CASE("EP kernels without an SM limit have no SM links, and their routes are the fabric's alone") {
  EventQueue q;
  FlowNetwork net(q);
  const Topology topo(two_nodes("rail_forward", 0), 8, net);
  CHECK_FALSE(topo.has_ep_sm_links());
  CHECK_THROWS_AS(topo.ep_sms_out(0), std::logic_error);
  CHECK(topo.ep_route(0, 2) == std::vector<LinkId>{topo.nvlink_out(0), topo.nvlink_in(2)});
}

TEST_CASE("forwarding_gpu: the destination node's GPU with the sender's local index, under rail_forward only") {
  EventQueue q;
  FlowNetwork net(q);
  const Topology rail(two_nodes("rail_forward", 0), 8, net);
  CHECK(rail.forwarding_gpu(1, 6) == 5);
  CHECK(rail.forwarding_gpu(1, 5) == 5);  // the same local index: the message lands on dst itself
  CHECK(rail.forwarding_gpu(6, 0) == 2);
  CHECK(rail.forwarding_gpu(1, 2) == -1);  // one node
  // A node-level message addressed to the forwarding GPU is IB alone.
  CHECK(rail.ep_route(1, 5) == std::vector<LinkId>{rail.nic_out(1), rail.nic_in(5)});
  FlowNetwork net2(q);
  const Topology direct(two_nodes("direct", 0), 8, net2);
  CHECK(direct.forwarding_gpu(1, 6) == -1);
  // A partial last node may lack the sender's local index: then the message goes direct.
  FlowNetwork net3(q);
  const Topology partial(two_nodes("rail_forward", 0), 6, net3);
  CHECK(partial.forwarding_gpu(3, 4) == -1);
  CHECK(partial.ep_route(3, 4) == std::vector<LinkId>{partial.nic_out(3), partial.nic_in(4)});
}
