// The cluster's wiring, built as a Boost.Graph: GPUs, one NVSwitch per node and the IB fabric are
// vertices; every directional link (NVLink port out of / into a GPU, IB NIC out of / into a GPU, PCIe
// host-to-device / device-to-host) is an edge that owns one FlowNetwork link. Routes are shortest paths
// in that graph; the EP backend's inter-node route can forward over the rail (DeepEP).
#pragma once

#include <vector>

#include "sim/core/time.hpp"
#include "sim/engine/flow_network.hpp"
#include "sim/hardware/hardware_spec.hpp"

namespace epsim {

class Topology {
 public:
  /// Builds the graph for the first `num_gpus` GPUs of `hw` (filling nodes in order) and adds its
  /// links to `network`. Requires 0 < num_gpus <= hw.total_gpus().
  Topology(const HardwareSpec& hw, int num_gpus, FlowNetwork& network);

  int num_gpus() const;
  int num_nodes() const;
  int gpus_per_node() const;
  int node_of(int gpu) const;
  bool same_node(int a, int b) const { return node_of(a) == node_of(b); }

  LinkId nvlink_out(int gpu) const;
  LinkId nvlink_in(int gpu) const;
  LinkId nic_out(int gpu) const;
  LinkId nic_in(int gpu) const;
  LinkId pcie_h2d(int gpu) const;
  LinkId pcie_d2h(int gpu) const;

  /// Links an EP-backend message from `src` to `dst` crosses (empty when src == dst), following
  /// hw.ep_backend.internode_route for inter-node pairs.
  std::vector<LinkId> ep_route(int src, int dst) const;
  /// Links a Copy Engine copy crosses inside one node: nvlink_out(src), nvlink_in(dst). src != dst,
  /// same node.
  std::vector<LinkId> nvlink_route(int src, int dst) const;
  /// Per-message latency of ep_route(src, dst): NVLink latency inside a node, IB latency across nodes
  /// (+ NVLink latency for the forwarding hop of rail_forward); 0 when src == dst.
  Time_ps ep_latency_ps(int src, int dst) const;

 private:
  // Implementation's choice (a boost::adjacency_list with edge -> LinkId).
};

}  // namespace epsim
