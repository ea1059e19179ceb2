#include "sim/hardware/topology.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/range/iterator_range.hpp>

namespace epsim {

namespace {

struct EdgeProps {
  int edge = -1;  // index into Topology::edges_
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, EdgeProps>;
using GraphEdge = boost::graph_traits<Graph>::edge_descriptor;

// Keeps the edges of one fabric, so that a route inside a node can only use NVLink and a route
// between nodes only InfiniBand.
template <typename Fabric, typename Edge>
struct FabricOnly {
  const Graph* graph = nullptr;
  const std::vector<Edge>* edges = nullptr;
  Fabric fabric{};
  bool operator()(const GraphEdge& e) const { return (*edges)[static_cast<std::size_t>((*graph)[e].edge)].fabric == fabric; }
};

// Records, for every vertex BFS reaches, the tree edge it was reached by.
struct RecordTreeEdges : boost::default_bfs_visitor {
  const Graph* graph = nullptr;
  std::int32_t* pred = nullptr;
  template <typename E, typename G>
  void tree_edge(const E& e, const G& g) const {
    pred[boost::target(e, g)] = (*graph)[e].edge;
  }
};

}  // namespace

Topology::Topology(const HardwareSpec& hw, int num_gpus, FlowNetwork& network) {
  if (hw.gpus_per_node <= 0) throw std::invalid_argument("Topology: gpus_per_node must be > 0");
  if (num_gpus <= 0 || num_gpus > hw.total_gpus()) {
    throw std::invalid_argument("Topology: num_gpus " + std::to_string(num_gpus) + " outside (0, " +
                                std::to_string(hw.total_gpus()) + "]");
  }
  num_gpus_ = num_gpus;
  gpus_per_node_ = hw.gpus_per_node;
  num_nodes_ = (num_gpus + gpus_per_node_ - 1) / gpus_per_node_;
  // A fabric no route can use may be left without bandwidth (e.g. no InfiniBand on one node);
  // its links are then absent and their accessors throw.
  const bool needs_nvlink = std::min(num_gpus_, gpus_per_node_) > 1;
  const bool needs_ib = num_nodes_ > 1;
  if (needs_nvlink && !(hw.nvlink.port_bw_GBps > 0)) throw std::invalid_argument("Topology: nvlink.port_bw_GBps must be > 0");
  if (needs_ib && !(hw.infiniband.nic_bw_GBps > 0)) throw std::invalid_argument("Topology: infiniband.nic_bw_GBps must be > 0");
  if (needs_ib) {
    const std::string& route = hw.ep_backend.internode_route;
    if (route != "rail_forward" && route != "direct") {
      throw std::invalid_argument("Topology: ep_backend.internode_route must be rail_forward or direct, not '" + route + "'");
    }
    rail_forward_ = route == "rail_forward";
  }
  nvlink_latency_ps_ = us_to_ps(hw.nvlink.latency_us);
  ib_latency_ps_ = us_to_ps(hw.infiniband.latency_us);

  // Vertices: GPUs [0, N), one NVSwitch per node, the IB fabric, one host per node.
  const int switch0 = num_gpus_;
  const int fabric = switch0 + num_nodes_;
  const int host0 = fabric + 1;
  num_vertices_ = host0 + num_nodes_;
  Graph graph(static_cast<std::size_t>(num_vertices_));

  // Link groups for the network's local sharing: a GPU's sending links (2g) are solved max-min
  // together, and so are its receiving links (2g + 1), each side on its own.
  const auto sending = [](int gpu) { return 2 * gpu; };
  const auto receiving = [](int gpu) { return 2 * gpu + 1; };
  const auto add = [&](int from, int to, Fabric kind, double bw_GBps, const std::string& name, int group) -> LinkId {
    if (!(bw_GBps > 0)) return -1;
    const LinkId link = network.add_link(name, bw_GBps, group);
    const int index = static_cast<int>(edges_.size());
    edges_.push_back(Edge{from, link, kind});
    boost::add_edge(static_cast<std::size_t>(from), static_cast<std::size_t>(to), EdgeProps{index}, graph);
    return link;
  };
  for (int g = 0; g < num_gpus_; ++g) {
    const std::string gpu = "gpu" + std::to_string(g) + ".";
    const int node = node_of(g);
    nvlink_out_.push_back(add(g, switch0 + node, Fabric::kNvlink, hw.nvlink.port_bw_GBps, gpu + "nvlink_out", sending(g)));
    nvlink_in_.push_back(add(switch0 + node, g, Fabric::kNvlink, hw.nvlink.port_bw_GBps, gpu + "nvlink_in", receiving(g)));
    nic_out_.push_back(add(g, fabric, Fabric::kInfiniband, hw.infiniband.nic_bw_GBps, gpu + "nic_out", sending(g)));
    nic_in_.push_back(add(fabric, g, Fabric::kInfiniband, hw.infiniband.nic_bw_GBps, gpu + "nic_in", receiving(g)));
    pcie_h2d_.push_back(add(host0 + node, g, Fabric::kPcie, hw.pcie.h2d_GBps, gpu + "pcie_h2d", receiving(g)));
    pcie_d2h_.push_back(add(g, host0 + node, Fabric::kPcie, hw.pcie.d2h_GBps, gpu + "pcie_d2h", sending(g)));
  }

  // The SM limit of the EP kernels is not wiring: its links stay out of the graph and are added to
  // EP routes explicitly. Flows carry wire bytes (payload over the fabric's efficiency), and the
  // limit is on payload: dividing by the NVLink efficiency makes a large NVLink message's payload
  // rate exactly comm_sms x sm_GBps (the SM limit binds inside a node; IB is far slower).
  const EpBackendSpec& ep = hw.ep_backend;
  if (ep.sm_GBps > 0 && ep.comm_sms > 0) {
    const double payload_GBps = ep.comm_sms * ep.sm_GBps;
    const double sms_GBps = ep.nvlink_efficiency > 0 ? payload_GBps / ep.nvlink_efficiency : payload_GBps;
    for (int g = 0; g < num_gpus_; ++g) {
      const std::string gpu = "gpu" + std::to_string(g) + ".";
      ep_sms_out_.push_back(network.add_link(gpu + "ep_sms_out", sms_GBps, sending(g)));
      ep_sms_in_.push_back(network.add_link(gpu + "ep_sms_in", sms_GBps, receiving(g)));
    }
  }

  // One BFS per hub of each fabric (FabricRoutes); the trees answer every later route query.
  const auto trees = [&](Fabric kind, FabricRoutes& routes) {
    using Filter = FabricOnly<Fabric, Edge>;
    const boost::filtered_graph<Graph, Filter> view(graph, Filter{&graph, &edges_, kind});
    routes.port_edge.assign(static_cast<std::size_t>(num_gpus_), -1);
    routes.hub_tree.assign(static_cast<std::size_t>(num_gpus_), -1);
    std::vector<int> hubs;                                                // vertex of each tree
    std::vector<std::int32_t> tree_of(static_cast<std::size_t>(num_vertices_), -1);  // per vertex
    for (int g = 0; g < num_gpus_; ++g) {
      for (const auto e : boost::make_iterator_range(boost::out_edges(static_cast<std::size_t>(g), view))) {
        if (routes.port_edge[static_cast<std::size_t>(g)] >= 0)
          throw std::logic_error("Topology: GPU " + std::to_string(g) + " has two ports into one fabric");
        routes.port_edge[static_cast<std::size_t>(g)] = graph[e].edge;
        const int hub = static_cast<int>(boost::target(e, view));
        std::int32_t& tree = tree_of[static_cast<std::size_t>(hub)];
        if (tree < 0) {
          tree = static_cast<std::int32_t>(hubs.size());
          hubs.push_back(hub);
        }
        routes.hub_tree[static_cast<std::size_t>(g)] = tree;
      }
    }
    routes.pred.assign(hubs.size() * static_cast<std::size_t>(num_vertices_), -1);
    RecordTreeEdges visitor;
    visitor.graph = &graph;
    for (std::size_t tree = 0; tree < hubs.size(); ++tree) {
      visitor.pred = routes.pred.data() + tree * static_cast<std::size_t>(num_vertices_);
      boost::breadth_first_search(view, static_cast<std::size_t>(hubs[tree]), boost::visitor(visitor));
    }
  };
  trees(Fabric::kNvlink, nvlink_routes_);
  trees(Fabric::kInfiniband, ib_routes_);
}

int Topology::num_gpus() const { return num_gpus_; }
int Topology::num_nodes() const { return num_nodes_; }
int Topology::gpus_per_node() const { return gpus_per_node_; }

void Topology::no_gpu(int gpu) { throw std::out_of_range("Topology: no GPU " + std::to_string(gpu)); }

LinkId Topology::present(const std::vector<LinkId>& links, int gpu, const char* what) const {
  check_gpu(gpu);
  const LinkId link = links[static_cast<std::size_t>(gpu)];
  if (link < 0) throw std::logic_error(std::string("Topology: no ") + what + " link (zero bandwidth configured)");
  return link;
}

LinkId Topology::nvlink_out(int gpu) const { return present(nvlink_out_, gpu, "nvlink_out"); }
LinkId Topology::nvlink_in(int gpu) const { return present(nvlink_in_, gpu, "nvlink_in"); }
LinkId Topology::nic_out(int gpu) const { return present(nic_out_, gpu, "nic_out"); }
LinkId Topology::nic_in(int gpu) const { return present(nic_in_, gpu, "nic_in"); }
LinkId Topology::pcie_h2d(int gpu) const { return present(pcie_h2d_, gpu, "pcie_h2d"); }
LinkId Topology::pcie_d2h(int gpu) const { return present(pcie_d2h_, gpu, "pcie_d2h"); }

std::vector<LinkId> Topology::gpu_links(int gpu) const {
  check_gpu(gpu);
  std::vector<LinkId> links;
  for (const std::vector<LinkId>* kind : {&nvlink_out_, &nvlink_in_, &nic_out_, &nic_in_, &pcie_h2d_, &pcie_d2h_, &ep_sms_out_, &ep_sms_in_})
    if (!kind->empty() && (*kind)[static_cast<std::size_t>(gpu)] >= 0) links.push_back((*kind)[static_cast<std::size_t>(gpu)]);
  return links;
}

LinkId Topology::ep_sms_out(int gpu) const {
  check_gpu(gpu);
  if (!has_ep_sm_links()) throw std::logic_error("Topology: no ep_sms_out link (ep_backend.sm_GBps is 0)");
  return ep_sms_out_[static_cast<std::size_t>(gpu)];
}

LinkId Topology::ep_sms_in(int gpu) const {
  check_gpu(gpu);
  if (!has_ep_sm_links()) throw std::logic_error("Topology: no ep_sms_in link (ep_backend.sm_GBps is 0)");
  return ep_sms_in_[static_cast<std::size_t>(gpu)];
}

void Topology::tree_route(const FabricRoutes& fabric, int src, int dst, std::vector<LinkId>& route) const {
  const std::int32_t port = fabric.port_edge[static_cast<std::size_t>(src)];
  const auto no_route = [&] {
    return std::logic_error("Topology: no route from GPU " + std::to_string(src) + " to vertex " + std::to_string(dst));
  };
  if (port < 0) throw no_route();
  const std::size_t tree = static_cast<std::size_t>(fabric.hub_tree[static_cast<std::size_t>(src)]);
  const std::int32_t* row = fabric.pred.data() + tree * static_cast<std::size_t>(num_vertices_);
  route.push_back(edges_[static_cast<std::size_t>(port)].link);
  const std::size_t first = route.size();
  // Up the hub's tree from dst to the hub, the tree's root and its only reached vertex without an
  // edge into it: a dst the tree did not reach has none either, and no route.
  for (int v = dst;;) {
    const std::int32_t e = row[v];
    if (e < 0) break;
    route.push_back(edges_[static_cast<std::size_t>(e)].link);
    v = edges_[static_cast<std::size_t>(e)].source_vertex;
  }
  if (route.size() == first) throw no_route();
  std::reverse(route.begin() + static_cast<std::ptrdiff_t>(first), route.end());
}

std::vector<LinkId> Topology::nvlink_route(int src, int dst) const {
  check_gpu(src);
  check_gpu(dst);
  if (src == dst || !same_node(src, dst)) {
    throw std::invalid_argument("Topology: nvlink_route needs two distinct GPUs of one node");
  }
  std::vector<LinkId> route;
  tree_route(nvlink_routes_, src, dst, route);
  return route;
}

std::vector<LinkId> Topology::ep_route(int src, int dst) const {
  std::vector<LinkId> route;
  ep_route(src, dst, route);
  return route;
}

void Topology::ep_route(int src, int dst, std::vector<LinkId>& route) const {
  check_gpu(src);
  check_gpu(dst);
  route.clear();
  if (src == dst) return;
  if (has_ep_sm_links()) route.push_back(ep_sms_out_[static_cast<std::size_t>(src)]);
  if (same_node(src, dst)) {
    tree_route(nvlink_routes_, src, dst, route);
  } else {
    const int peer = rail_peer(src, dst);
    if (peer < 0) {
      tree_route(ib_routes_, src, dst, route);
    } else {
      tree_route(ib_routes_, src, peer, route);
      if (peer != dst) tree_route(nvlink_routes_, peer, dst, route);
    }
  }
  if (has_ep_sm_links()) route.push_back(ep_sms_in_[static_cast<std::size_t>(dst)]);
}

Time_ps Topology::ep_latency_ps(int src, int dst) const {
  check_gpu(src);
  check_gpu(dst);
  if (src == dst) return 0;
  if (same_node(src, dst)) return nvlink_latency_ps_;
  const int peer = rail_peer(src, dst);
  return ib_latency_ps_ + (peer >= 0 && peer != dst ? nvlink_latency_ps_ : 0);
}

}  // namespace epsim
