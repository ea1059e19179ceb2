// The EP exchange with one copy per GPU or per node (DeepEP-style) against per (token, expert)
// copies: bytes on each fabric and the forwarding hop's timing, worked out by hand on the
// round-number cluster of simple_cluster.hpp (IB 25 GB/s and 3 us, NVLink 100 GB/s and 1 us).
#include <doctest/doctest.h>

#include <string>

#include "sim/balancers/static_ep.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

constexpr Time_ps us = kPsPerUs;

// Rank 0's tokens A -> {4, 5} (GPU 2) and B -> {4, 6} (GPUs 2 and 3), 1000 bytes each.
LayerResult run(TokenCopies copies) {
  HardwareSpec hw = test::simple_hardware(2, 2);
  hw.ep_backend.internode_route = "rail_forward";
  hw.ep_backend.token_copies = copies;
  const ModelSpec model = test::simple_model(8, 2);
  TraceRecord record = test::record_of({{0, 0, 0, 0, 2, 1, 1, 0}, {0, 0, 0, 0, 0, 0, 0, 0},
                                        {0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}});
  record.token_src_rank = {0, 0};
  record.token_experts = {4, 5, 4, 6};
  const Plan plan = StaticEp().plan(record, test::context_for(model, hw));
  return simulate_layer(hw, model, plan, {2, 0, 0, 0}, false, &record);
}

const TimelineEvent* find_event(const Timeline& t, int gpu, Track track, const std::string& name) {
  for (const TimelineEvent& e : t.events)
    if (e.gpu == gpu && e.track == track && e.name == name) return &e;
  return nullptr;
}

}  // namespace

TEST_CASE("token copies set the bytes: 4 assignments, 3 GPU copies, 2 node copies") {
  const LayerResult per_expert = run(TokenCopies::per_expert);
  const LayerResult per_gpu = run(TokenCopies::per_gpu);
  const LayerResult per_node = run(TokenCopies::per_node);
  // Dispatch and combine each: 4000, 3000 and 2000 bytes leave GPU 0's node.
  CHECK(per_expert.ep_token_bytes == doctest::Approx(8000));
  CHECK(per_expert.internode_token_bytes == doctest::Approx(8000));
  CHECK(per_gpu.ep_token_bytes == doctest::Approx(6000));
  CHECK(per_gpu.internode_token_bytes == doctest::Approx(6000));
  CHECK(per_node.ep_token_bytes == doctest::Approx(4000));
  CHECK(per_node.internode_token_bytes == doctest::Approx(4000));
}

TEST_CASE("per_node: one RDMA message to the rail peer, which forwards B over NVLink") {
  const LayerResult r = run(TokenCopies::per_node);
  // RDMA 0 -> 2 (GPU 2 is GPU 0's rail peer in node 1): 2000 bytes at 0.025 B/ps after 3 us = 3.08 us.
  const TimelineEvent* rdma = find_event(r.timeline, 0, Track::nic_out, "dispatch 0->2");
  REQUIRE(rdma != nullptr);
  CHECK(rdma->bytes == doctest::Approx(2000));
  CHECK(rdma->end_ps == 3 * us + 80'000);
  // The forward 2 -> 3 moves B's 1000 bytes in 1 us + 10 ns, concurrently (chunks are pipelined) ...
  const TimelineEvent* forward = find_event(r.timeline, 2, Track::nvlink_out, "dispatch 2->3");
  REQUIRE(forward != nullptr);
  CHECK(forward->bytes == doctest::Approx(1000));
  CHECK(forward->end_ps == 1 * us + 10'000);
  // ... but GPU 3 has B only once the RDMA message has arrived: its dispatch ends at 3.08 us.
  const TimelineEvent* kernel3 = find_event(r.timeline, 3, Track::comm_kernel, "dispatch");
  REQUIRE(kernel3 != nullptr);
  CHECK(kernel3->end_ps == 3 * us + 80'000);
  // No message goes from GPU 0 to GPU 3 directly.
  CHECK(find_event(r.timeline, 0, Track::nic_out, "dispatch 0->3") == nullptr);
}

TEST_CASE("per_node on a partial last node: a pair whose rail peer is missing travels on its own") {
  // GPUs 0 and 1 in node 0, GPU 2 alone in node 1 (local index 0). Rank 0's token goes to expert 2 on
  // GPU 2, its own rail peer there: one RDMA message 0 -> 2. Rank 1's rail peer in node 1 would be
  // local index 1, which node 1 lacks: its token crosses IB on its own, 1 -> 2, and comes back 2 -> 1.
  HardwareSpec hw = test::simple_hardware(2, 2);
  hw.ep_backend.internode_route = "rail_forward";
  hw.ep_backend.token_copies = TokenCopies::per_node;
  const ModelSpec model = test::simple_model(3, 1);
  TraceRecord record = test::record_of({{0, 0, 1}, {0, 0, 1}, {0, 0, 0}});
  record.token_src_rank = {0, 1};
  record.token_experts = {2, 2};
  BalancerContext context = test::context_for(model, hw);
  context.num_gpus = 3;
  const Plan plan = StaticEp().plan(record, context);
  const LayerResult r = simulate_layer(hw, model, plan, {1, 1, 0}, false, &record);
  // 1000 bytes a message at 0.025 B/ps after IB's 3 us. The dispatch's two messages share GPU 2's NIC
  // (80 ns each). Back, 2 -> 0 is GPU 0's node sum; 2 -> 1 travels alone, but on rail_forward's route
  // for it: IB into GPU 2's rail peer in node 0 (GPU 0), then NVLink on, 1 us more.
  const struct {
    int gpu;
    const char* name;
    Time_ps took_ps;
  } expected[] = {{0, "dispatch 0->2", 3 * us + 80'000},
                  {1, "dispatch 1->2", 3 * us + 80'000},
                  {2, "combine 2->0", 3 * us + 40'000},
                  {2, "combine 2->1", 4 * us + 40'000}};
  for (const auto& x : expected) {
    CAPTURE(std::string(x.name));
    const TimelineEvent* e = find_event(r.timeline, x.gpu, Track::nic_out, x.name);
    REQUIRE(e != nullptr);
    CHECK(e->bytes == doctest::Approx(1000));
    CHECK(e->end_ps - e->start_ps == x.took_ps);
  }
  CHECK(r.ep_token_bytes == doctest::Approx(4000));
  CHECK(r.internode_token_bytes == doctest::Approx(4000));
}
