// The cluster's wiring, built as a Boost.Graph: GPUs, one NVSwitch per node and the IB fabric are
// vertices; every directional link (NVLink port out of / into a GPU, IB NIC out of / into a GPU, PCIe
// host-to-device / device-to-host) is an edge that owns one FlowNetwork link. Routes are shortest paths
// in that graph; the EP backend's inter-node route can forward over the rail (DeepEP).
// When the EP backend's kernels are SM-limited (ep_backend.sm_GBps > 0), every GPU also has two
// virtual links outside the graph, "ep_sms_out" and "ep_sms_in": every EP-backend message crosses its
// sender's out link and its receiver's in link, so a rank's kernel moves at most comm_sms x sm_GBps of
// payload per direction whatever the fabric allows. Flows carry wire bytes, so the links' capacity is
// comm_sms x sm_GBps / nvlink_efficiency (exact for large NVLink messages).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/time.hpp"
#include "sim/engine/flow_network.hpp"
#include "sim/hardware/hardware_spec.hpp"

namespace epsim {

class Topology {
 public:
  /// Builds the graph for the first `num_gpus` GPUs of `hw` (filling nodes in order) and adds its
  /// links to `network`. Requires 0 < num_gpus <= hw.total_gpus(), NVLink bandwidth when a node holds
  /// two GPUs or more, and IB bandwidth and internode_route "rail_forward" or "direct" when there are
  /// two nodes or more (std::invalid_argument otherwise). PCIe links exist where their bandwidth > 0.
  Topology(const HardwareSpec& hw, int num_gpus, FlowNetwork& network);

  int num_gpus() const;
  int num_nodes() const;
  int gpus_per_node() const;
  int node_of(int gpu) const {
    check_gpu(gpu);
    return gpu / gpus_per_node_;
  }
  bool same_node(int a, int b) const { return node_of(a) == node_of(b); }

  /// Per-GPU links. std::out_of_range for a GPU outside the topology, std::logic_error for a link
  /// whose fabric has no bandwidth configured (e.g. no IB on a single node).
  LinkId nvlink_out(int gpu) const;
  LinkId nvlink_in(int gpu) const;
  LinkId nic_out(int gpu) const;
  LinkId nic_in(int gpu) const;
  LinkId pcie_h2d(int gpu) const;
  LinkId pcie_d2h(int gpu) const;
  /// The SM-limit links of `gpu`'s EP kernels (see the file comment); std::logic_error when the
  /// kernels are not SM-limited (has_ep_sm_links() is false).
  LinkId ep_sms_out(int gpu) const;
  LinkId ep_sms_in(int gpu) const;
  bool has_ep_sm_links() const { return !ep_sms_out_.empty(); }
  /// Every link of `gpu` that exists: its ports, PCIe links and SM-limit links, both directions.
  std::vector<LinkId> gpu_links(int gpu) const;

  /// Links an EP-backend message from `src` to `dst` crosses (empty when src == dst), following
  /// hw.ep_backend.internode_route for inter-node pairs: with rail_forward, src's NIC out, the fabric
  /// into forwarding_gpu(src, dst), then (unless that is dst) its NVLink port out and dst's NVLink port
  /// in, as one message; with direct, src's NIC out and dst's NIC in. With SM-limited kernels the route
  /// starts with ep_sms_out(src) and ends with ep_sms_in(dst).
  std::vector<LinkId> ep_route(int src, int dst) const;
  /// The same into `route` (cleared first), whose capacity a caller sending many messages keeps.
  void ep_route(int src, int dst, std::vector<LinkId>& route) const;
  /// The GPU an inter-node EP message from `src` to `dst` is forwarded through under rail_forward:
  /// the GPU of dst's node with src's local index (dst itself when they share the index). -1 when the
  /// pair is in one node, the route is direct, or that GPU is outside this topology (then the message
  /// goes direct). A caller that moves a token once per destination node (DeepEP) sends it to this
  /// GPU and forwards it from there with intra-node messages.
  int forwarding_gpu(int src, int dst) const {
    check_gpu(src);
    check_gpu(dst);
    return same_node(src, dst) ? -1 : rail_peer(src, dst);
  }
  /// Links a Copy Engine copy crosses inside one node: nvlink_out(src), nvlink_in(dst). src != dst,
  /// same node.
  std::vector<LinkId> nvlink_route(int src, int dst) const;
  /// Per-message latency of ep_route(src, dst): NVLink latency inside a node, IB latency across nodes
  /// (+ NVLink latency for the forwarding hop of rail_forward); 0 when src == dst.
  Time_ps ep_latency_ps(int src, int dst) const;

 private:
  // The boost::adjacency_list lives only inside the constructor: routes are read from BFS trees
  // computed there, so Boost stays out of this header and queries are O(route length).
  enum class Fabric : std::uint8_t { kNvlink, kInfiniband, kPcie };
  struct Edge {
    int source_vertex;
    LinkId link;
    Fabric fabric;
  };

  // Inline: a wide exchange asks about each of its n^2 pairs.
  void check_gpu(int gpu) const {
    if (gpu < 0 || gpu >= num_gpus_) no_gpu(gpu);
  }
  [[noreturn]] static void no_gpu(int gpu);
  LinkId present(const std::vector<LinkId>& links, int gpu, const char* what) const;
  /// One fabric's routes. Every GPU has one port into a fabric (its NVLink port to the node's
  /// NVSwitch, its NIC into the IB fabric), so a shortest path from a GPU is its port and then a
  /// shortest path from the port's far end, a hub: BFS runs from each hub rather than from each GPU.
  /// At 1,024 GPUs that is 128 NVLink trees and one IB tree instead of 1,024 of each (the per-GPU
  /// trees were 10 MB of tables, a twentieth of a wide layer's instructions to build).
  struct FabricRoutes {
    std::vector<std::int32_t> port_edge;  ///< per GPU: index in edges_ of its port, -1 for none
    std::vector<std::int32_t> hub_tree;   ///< per GPU: the tree of its port's far end, -1 for none
    /// [tree * num_vertices_ + v]: index in edges_ of the tree edge into v, -1 if unreachable.
    std::vector<std::int32_t> pred;
  };
  /// Appends the links from GPU `src` to GPU `dst` (src != dst) on `fabric` to `route`.
  void tree_route(const FabricRoutes& fabric, int src, int dst, std::vector<LinkId>& route) const;
  /// GPU that rail_forward forwards through for an inter-node pair, or -1 when the message goes
  /// direct (route "direct", or that GPU is not part of this topology).
  int rail_peer(int src, int dst) const {
    if (!rail_forward_) return -1;
    const int peer = node_of(dst) * gpus_per_node_ + src % gpus_per_node_;
    return peer < num_gpus_ ? peer : -1;  // a partial last node may lack that local index
  }

  int num_gpus_ = 0;
  int gpus_per_node_ = 0;
  int num_nodes_ = 0;
  int num_vertices_ = 0;
  bool rail_forward_ = false;
  Time_ps nvlink_latency_ps_ = 0;
  Time_ps ib_latency_ps_ = 0;
  // Per GPU; -1 where the fabric has no bandwidth configured (see the constructor).
  std::vector<LinkId> nvlink_out_, nvlink_in_, nic_out_, nic_in_, pcie_h2d_, pcie_d2h_;
  /// Per GPU when the EP kernels are SM-limited, empty otherwise.
  std::vector<LinkId> ep_sms_out_, ep_sms_in_;
  std::vector<Edge> edges_;
  FabricRoutes nvlink_routes_, ib_routes_;
};

}  // namespace epsim
