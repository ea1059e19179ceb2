// FasterMoE's shadow broadcast and gradient reduce as NCCL runs them (fastermoe_collective.hpp): the
// edges of each shape worked by hand, the plan's transfers, and the time the weights and gradients
// take on tests/sim/simple_cluster.hpp's hardware (NVLink 100 GB/s with 1 us latency, InfiniBand
// 25 GB/s with 3 us, no protocol losses), where an expert's weights are 1e6 bytes:
//   over NVLink 1e6 / 0.1 byte/ps = 10 us + 1 us; over InfiniBand 1e6 / 0.025 byte/ps = 40 us + 3 us.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "sim/balancers/fastermoe.hpp"
#include "sim/balancers/fastermoe_collective.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

using Edges = std::vector<std::tuple<int, int, std::int64_t>>;

Edges as_tuples(const std::vector<CollectiveEdge>& edges) {
  Edges out;
  for (const CollectiveEdge& e : edges) out.emplace_back(e.src, e.dst, e.bytes);
  return out;
}

/// Bytes each GPU sends across its node boundary (its NIC) and over NVLink.
struct LinkBytes {
  std::map<int, std::int64_t> nic_out, nvlink_out, received;
};

LinkBytes link_bytes(const std::vector<CollectiveEdge>& edges, int gpus_per_node) {
  LinkBytes b;
  for (const CollectiveEdge& e : edges) {
    (e.src / gpus_per_node == e.dst / gpus_per_node ? b.nvlink_out : b.nic_out)[e.src] += e.bytes;
    b.received[e.dst] += e.bytes;
  }
  return b;
}

/// Expert 0 hot from every rank and nothing else: with t_model = 10 us against 2 us per token the
/// paper policy shadows it, so every token is computed where it is and only weights and gradients
/// move.
TraceRecord hot_expert_zero(int gpus, int experts) {
  TraceRecord r;
  r.counts.assign(static_cast<std::size_t>(gpus) * experts, 0);
  for (int s = 0; s < gpus; ++s) r.counts[static_cast<std::size_t>(s) * experts] = 100;
  return r;
}

/// From the first GPU's start to the last GPU's end of the comm kernels named `name`.
Time_ps span_ps(const LayerResult& r, const std::string& name) {
  Time_ps first = -1, last = 0;
  for (const TimelineEvent& e : r.timeline.events) {
    if (e.track != Track::comm_kernel || e.name != name) continue;
    first = first < 0 ? e.start_ps : std::min(first, e.start_ps);
    last = std::max(last, e.end_ps);
  }
  return first < 0 ? 0 : last - first;
}

LayerResult run_shadowed(const HardwareSpec& hw, ShadowCollective collective) {
  const int n = hw.nodes * hw.gpus_per_node;
  const ModelSpec model = test::simple_model(n);
  const TraceRecord rec = hot_expert_zero(n, n);
  FasterMoeOptions options;
  options.collective = collective;
  FasterMoe balancer(options);
  const Plan plan = balancer.plan(rec, test::context_for(model, hw));
  validate_plan(plan, n, hw.gpus_per_node);
  REQUIRE(plan.transfers.size() >= static_cast<std::size_t>(2 * (n - 1)));
  return simulate_layer(hw, model, plan, std::vector<std::int64_t>(n, 100), true, &rec);
}

}  // namespace

TEST_CASE("NCCL's binary and double binary trees, parent by parent") {
  // ncclGetBtree: rank 0 has one child; 4 ranks: 0 -> 2, 2 -> {1, 3}; 5 ranks: 0 -> 4 -> 2 -> {1, 3}.
  CHECK(nccl_btree_parent(0, 4) == -1);
  CHECK(nccl_btree_parent(1, 4) == 2);
  CHECK(nccl_btree_parent(2, 4) == 0);
  CHECK(nccl_btree_parent(3, 4) == 2);
  CHECK(nccl_btree_parent(1, 5) == 2);
  CHECK(nccl_btree_parent(2, 5) == 4);
  CHECK(nccl_btree_parent(3, 5) == 2);
  CHECK(nccl_btree_parent(4, 5) == 0);
  // ncclGetDtree, even: mirrored, r -> 3 - r: parents 3 - btree(3 - r) = {1, 3, 1, root}.
  CHECK(nccl_dtree_parent(0, 4) == 1);
  CHECK(nccl_dtree_parent(1, 4) == 3);
  CHECK(nccl_dtree_parent(2, 4) == 1);
  CHECK(nccl_dtree_parent(3, 4) == -1);
  // Odd: shifted, r -> r - 1: parents btree(r - 1) + 1 = {1, root, 0} for 3 ranks.
  CHECK(nccl_dtree_parent(0, 3) == 1);
  CHECK(nccl_dtree_parent(1, 3) == -1);
  CHECK(nccl_dtree_parent(2, 3) == 0);
}

TEST_CASE("broadcast edges: ring, tree and star by hand") {
  SUBCASE("ring: the chain from the owner along 0 -> 1 -> ... -> n - 1 -> 0") {
    // Owner 5 of 8 GPUs on two nodes of 4: 5 6 7 | 0 1 2 3 | 4, crossing twice (7 -> 0, 3 -> 4).
    CHECK(as_tuples(broadcast_edges(ShadowCollective::ring, 5, 8, 4, 1000)) ==
          Edges{{5, 6, 1000}, {6, 7, 1000}, {7, 0, 1000}, {0, 1, 1000}, {1, 2, 1000}, {2, 3, 1000}, {3, 4, 1000}});
    // An owner that starts its node crosses once per boundary: 4 5 6 7 | 0 1 2 3.
    const LinkBytes b = link_bytes(broadcast_edges(ShadowCollective::ring, 4, 8, 4, 1000), 4);
    CHECK(b.nic_out == std::map<int, std::int64_t>{{7, 1000}});
    for (int g = 0; g < 8; ++g) CHECK((b.received.count(g) ? b.received.at(g) : 0) == (g == 4 ? 0 : 1000));
  }
  SUBCASE("star: the owner sends every copy") {
    CHECK(as_tuples(broadcast_edges(ShadowCollective::star, 1, 3, 8, 7)) == Edges{{1, 0, 7}, {1, 2, 7}});
    // EP 16 on two nodes of 8: 8 copies leave GPU 0's NIC where the ring sends one (from GPU 7).
    CHECK(link_bytes(broadcast_edges(ShadowCollective::star, 0, 16, 8, 1000), 8).nic_out ==
          std::map<int, std::int64_t>{{0, 8000}});
    CHECK(link_bytes(broadcast_edges(ShadowCollective::ring, 0, 16, 8, 1000), 8).nic_out ==
          std::map<int, std::int64_t>{{7, 1000}});
  }
  SUBCASE("tree on two nodes: both trees are the one edge between the heads") {
    // Owner 5 (node 1, local 1): node 0's head is GPU 1; each tree carries half; chains from the heads.
    CHECK(as_tuples(broadcast_edges(ShadowCollective::tree, 5, 8, 4, 1000)) ==
          Edges{{5, 1, 500}, {5, 1, 500}, {1, 2, 1000}, {2, 3, 1000}, {3, 0, 1000}, {5, 6, 1000}, {6, 7, 1000},
                {7, 4, 1000}});
  }
  SUBCASE("tree on four nodes of two: two trees over the heads, half each") {
    // Owner 2 = node 1, local 0; relative node r is node (1 + r) mod 4, its head GPU 2 * node.
    //   first tree  (btree 4):  0 -> 2, 2 -> 1, 2 -> 3  =  nodes 1 -> 3, 3 -> 2, 3 -> 0  =  GPUs 2 -> 6, 6 -> 4, 6 -> 0
    //   second tree (dtree 4):  edges 0-1, 1-3, 2-1 away from 0: 0 -> 1, 1 -> 2, 1 -> 3
    //                           =  nodes 1 -> 2, 2 -> 3, 2 -> 0  =  GPUs 2 -> 4, 4 -> 6, 4 -> 0
    CHECK(as_tuples(broadcast_edges(ShadowCollective::tree, 2, 8, 2, 1000)) ==
          Edges{{2, 6, 500}, {6, 4, 500}, {6, 0, 500}, {2, 4, 500}, {4, 6, 500}, {4, 0, 500},
                {0, 1, 1000}, {2, 3, 1000}, {4, 5, 1000}, {6, 7, 1000}});
    // Every NIC sends at most the whole message and every GPU receives it once.
    const LinkBytes b = link_bytes(broadcast_edges(ShadowCollective::tree, 2, 8, 2, 1000), 2);
    CHECK(b.nic_out == std::map<int, std::int64_t>{{2, 1000}, {4, 1000}, {6, 1000}});
    for (int g = 0; g < 8; ++g) CHECK((b.received.count(g) ? b.received.at(g) : 0) == (g == 2 ? 0 : 1000));
    // An odd byte rides on the first tree.
    const auto odd = broadcast_edges(ShadowCollective::tree, 2, 8, 2, 1001);
    CHECK(odd[0].bytes == 501);
    CHECK(odd[3].bytes == 500);
  }
  SUBCASE("one node: the tree is the ring's chain; one GPU: nothing") {
    CHECK(as_tuples(broadcast_edges(ShadowCollective::tree, 2, 4, 8, 9)) ==
          as_tuples(broadcast_edges(ShadowCollective::ring, 2, 4, 8, 9)));
    CHECK(broadcast_edges(ShadowCollective::ring, 0, 1, 8, 9).empty());
  }
}

TEST_CASE("the plan's weights follow the broadcast edges and its gradients run them backwards") {
  const HardwareSpec hw = test::simple_hardware(2, 2);
  const ModelSpec model = test::simple_model(4);
  const TraceRecord rec = hot_expert_zero(4, 4);
  FasterMoe balancer{FasterMoeOptions{}};  // ring by default
  const Plan plan = balancer.plan(rec, test::context_for(model, hw));
  validate_plan(plan, 4, 2);
  // Expert 0 (owner GPU 0) shadowed on GPUs 1, 2, 3: weights 0 -> 1 -> 2 -> 3, gradients 3 -> 2 -> 1 -> 0,
  // each piece serving the instance at its far end from the owner.
  REQUIRE(plan.transfers.size() == 6);
  const std::vector<std::pair<int, int>> weights{{0, 1}, {1, 2}, {2, 3}};
  const std::vector<std::pair<int, int>> gradients{{1, 0}, {2, 1}, {3, 2}};
  for (int k = 0; k < 3; ++k) {
    const Transfer& w = plan.transfers[k];
    const Transfer& g = plan.transfers[3 + k];
    CHECK(w.kind == TransferKind::weights);
    CHECK(w.pass == PassKind::forward);
    CHECK(std::make_pair(w.src_gpu, w.dst_gpu) == weights[k]);
    CHECK(plan.instances[w.instance].gpu == w.dst_gpu);
    CHECK(g.kind == TransferKind::gradients);
    CHECK(g.pass == PassKind::backward);
    CHECK(std::make_pair(g.src_gpu, g.dst_gpu) == gradients[k]);
    CHECK(plan.instances[g.instance].gpu == g.src_gpu);
    CHECK(w.bytes == 1'000'000);
    CHECK(g.bytes == 1'000'000);
    CHECK(w.carrier == Carrier::ep_backend);
  }
}

TEST_CASE("the collective's time: a ring's links work at once, a star queues on the owner's port") {
  SUBCASE("one node of four GPUs") {
    // Ring: 0 -> 1, 1 -> 2, 2 -> 3 on four different ports: 10 us + 1 us. Star: three copies share
    // GPU 0's NVLink port: 30 us + 1 us. The reduce is the same each way.
    const HardwareSpec hw = test::simple_hardware(1, 4);
    const LayerResult ring = run_shadowed(hw, ShadowCollective::ring);
    const LayerResult star = run_shadowed(hw, ShadowCollective::star);
    const LayerResult tree = run_shadowed(hw, ShadowCollective::tree);
    CHECK(span_ps(ring, "weights") == us_to_ps(11));
    CHECK(span_ps(ring, "grad reduce e0") == us_to_ps(11));
    CHECK(span_ps(star, "weights") == us_to_ps(31));
    CHECK(span_ps(star, "grad reduce e0") == us_to_ps(31));
    CHECK(span_ps(tree, "weights") == us_to_ps(11));
    CHECK(ring.weight_bytes == doctest::Approx(3e6));
    CHECK(star.weight_bytes == doctest::Approx(3e6));
    CHECK(ring.gradient_bytes == doctest::Approx(3e6));
    // 20 us less each way in a layer where nothing else moves.
    CHECK(star.layer_ps() - ring.layer_ps() == us_to_ps(40));
  }
  SUBCASE("two nodes of two GPUs") {
    // Ring: 0 -> 1 (NVLink, 11 us), 1 -> 2 (InfiniBand, 43 us), 2 -> 3 (NVLink): 43 us.
    // Star: 0 -> 2 and 0 -> 3 share GPU 0's NIC: 2e6 bytes, 80 us + 3 us.
    // Tree: both halves 0 -> 2 on GPU 0's NIC (1e6 bytes, 43 us), chains 0 -> 1 and 2 -> 3.
    const HardwareSpec hw = test::simple_hardware(2, 2);
    CHECK(span_ps(run_shadowed(hw, ShadowCollective::ring), "weights") == us_to_ps(43));
    CHECK(span_ps(run_shadowed(hw, ShadowCollective::star), "weights") == us_to_ps(83));
    CHECK(span_ps(run_shadowed(hw, ShadowCollective::tree), "weights") == us_to_ps(43));
    CHECK(span_ps(run_shadowed(hw, ShadowCollective::ring), "grad reduce e0") == us_to_ps(43));
    CHECK(span_ps(run_shadowed(hw, ShadowCollective::star), "grad reduce e0") == us_to_ps(83));
  }
}
