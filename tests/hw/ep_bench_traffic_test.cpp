// The traffic of a dispatch/combine benchmark, drawn the way DeepEP-family tests draw it, against
// cases worked out by hand: rows kept local, one copy per destination rank and per destination node,
// the three counted rules, and the points that cannot be drawn.
#include <doctest/doctest.h>

#include <cmath>

#include "hw/calibration/ep_bench_traffic.hpp"
#include "sim/core/input_error.hpp"

using namespace epsim;

namespace {

EpCommPoint point(int ep, int gpus_per_node, int experts, int top_k, std::int64_t tokens, BenchRouting routing) {
  EpCommPoint p;
  p.ep = ep;
  p.gpus_per_node = gpus_per_node;
  p.experts = experts;
  p.top_k = top_k;
  p.tokens = tokens;
  p.hidden = 1000;  // BF16: 2000 bytes a token
  p.dtype = Dtype::bf16;
  p.routing = routing;
  p.where = "set.yaml:7:5";
  return p;
}

}  // namespace

TEST_CASE("balanced routing, EP 2 on one node, top-1 of 2 experts: half of every rank's rows stay local") {
  const EpBenchTraffic t = ep_bench_traffic(point(2, 8, 2, 1, 100, BenchRouting::balanced));
  CHECK(t.ep == 2);
  CHECK(t.gpus_per_node == 2);
  CHECK(t.token_bytes == 2000);
  for (int s = 0; s < 2; ++s)
    for (int d = 0; d < 2; ++d) CHECK(t.rank_bytes[s][d] == 50 * 2000.0);
  CHECK(t.node_bytes[0][0] == 0);
  // nvlink rule: rows received, own included: 100 rows.
  CHECK(t.counted_bytes[0] == 100 * 2000.0);
  CHECK(t.mean_counted_bytes == 100 * 2000.0);
  // Only the 50 rows to the other rank cross NVLink, each way.
  CHECK(busiest_nvlink_bytes(t) == 50 * 2000.0);
  CHECK(busiest_rdma_bytes(t) == 0);
  CHECK_FALSE(ep_point_internode(point(2, 8, 2, 1, 100, BenchRouting::balanced)));
}

TEST_CASE("uniform routing, EP 2, top-1 of 2 experts: about half of the rows stay local") {
  const EpBenchTraffic t = ep_bench_traffic(point(2, 2, 2, 1, 20000, BenchRouting::uniform));
  for (int s = 0; s < 2; ++s) {
    CHECK(t.rank_bytes[s][0] + t.rank_bytes[s][1] == 20000 * 2000.0);  // every token sent exactly once
    CHECK(std::abs(t.rank_bytes[s][s] / (20000 * 2000.0) - 0.5) < 0.02);
  }
}

TEST_CASE("a token choosing several experts on one rank is sent to it once (DeepEP dedup)") {
  // 2 experts per rank, top-4 of 4: every token picks every expert, so it reaches each rank once, not twice.
  const EpBenchTraffic t = ep_bench_traffic(point(2, 2, 4, 4, 10, BenchRouting::uniform));
  for (int s = 0; s < 2; ++s)
    for (int d = 0; d < 2; ++d) CHECK(t.rank_bytes[s][d] == 10 * 2000.0);
  CHECK(t.counted_bytes[1] == 2 * 10 * 2000.0);  // rows received from both ranks
}

TEST_CASE("node bytes count a token once per destination node, the three counted rules") {
  // EP 4 on 2 nodes of 2, one expert per rank, top-4: every token reaches every rank; across nodes it
  // goes once to the other node although two of its experts live there.
  EpCommPoint p = point(4, 2, 4, 4, 10, BenchRouting::uniform);
  p.counted = CountedBandwidth::rdma;
  const EpBenchTraffic t = ep_bench_traffic(p);
  CHECK(ep_point_internode(p));
  for (int s = 0; s < 4; ++s) {
    const int own = s / 2;
    CHECK(t.node_bytes[s][own] == 0);
    CHECK(t.node_bytes[s][1 - own] == 10 * 2000.0);
    CHECK(t.counted_bytes[s] == 10 * 2000.0);
    for (int d = 0; d < 4; ++d) CHECK(t.rank_bytes[s][d] == 10 * 2000.0);
  }
  // The NIC of each rank sends 10 tokens and receives 10 (from the rank with its local index).
  CHECK(busiest_rdma_bytes(t) == 10 * 2000.0);
  CHECK(busiest_nvlink_bytes(t) == 3 * 10 * 2000.0);
  // Time from a published rate: 20000 bytes at 100 GB/s = 0.2 us.
  p.published_GBps = 100;
  CHECK(ep_point_time_us(p, t) == doctest::Approx(0.2));
  p.median_us = 7;
  CHECK(ep_point_time_us(p, t) == 7);

  p.counted = CountedBandwidth::nvlink;
  CHECK(ep_bench_traffic(p).counted_bytes[2] == 4 * 10 * 2000.0);  // 4 ranks' rows, its own included
  p.counted = CountedBandwidth::algorithm;
  p.top_k = 8;
  p.experts = 8;
  CHECK(ep_bench_traffic(p).counted_bytes[0] == 10 * 4 * 2000.0);  // tokens * min(ep, top_k) * bytes
}

TEST_CASE("balanced routing across nodes: window of consecutive ranks, node bytes by hand") {
  // EP 4 on 2 nodes, top-2: a token goes to ranks {o, o+1 mod 4} for o = 0..3 evenly (tokens / 4 each).
  // From rank 0 (node 0): o = 0 {0,1} stays home; o = 1 {1,2}, o = 2 {2,3}, o = 3 {3,0} reach node 1.
  const EpBenchTraffic t = ep_bench_traffic(point(4, 2, 8, 2, 40, BenchRouting::balanced));
  CHECK(t.rank_bytes[0][3] == 40 * 2 / 4 * 2000.0);
  CHECK(t.node_bytes[0][1] == 3 * 10 * 2000.0);
  CHECK(t.node_bytes[0][0] == 0);
}

TEST_CASE("group-limited routing keeps every token inside max_nodes nodes") {
  EpCommPoint p = point(4, 2, 8, 2, 4000, BenchRouting::group_limited);
  p.max_nodes = 1;
  const EpBenchTraffic t = ep_bench_traffic(p, 3);
  for (int s = 0; s < 4; ++s) {
    const int own = s / 2;
    double home = 0, away = 0;
    for (int d = 0; d < 4; ++d) (d / 2 == own ? home : away) += t.rank_bytes[s][d];
    // A token on the other node reaches it once: node bytes are the tokens sent there, about half.
    CHECK(t.node_bytes[s][1 - own] / (4000 * 2000.0) == doctest::Approx(0.5).epsilon(0.05));
    CHECK(away >= t.node_bytes[s][1 - own]);
    CHECK(away <= 2 * t.node_bytes[s][1 - own]);
  }
  // Same seed, same traffic.
  CHECK(ep_bench_traffic(p, 3).rank_bytes == t.rank_bytes);
  CHECK(ep_bench_traffic(p, 4).rank_bytes != t.rank_bytes);
  // top-5 inside one node of 4 experts cannot be drawn.
  p.top_k = 5;
  CHECK_THROWS_WITH_AS(ep_bench_traffic(p), doctest::Contains("set.yaml:7:5: dispatch point: top_k 5 exceeds the 4"),
                       InputError);
}

TEST_CASE("FP8 tokens carry their scales, points that cannot be drawn are InputErrors at the point") {
  EpCommPoint p = point(8, 8, 256, 8, 1, BenchRouting::uniform);
  p.hidden = 7168;
  p.dtype = Dtype::fp8;
  CHECK(ep_bench_traffic(p).token_bytes == 7392);
  p.experts = 100;  // not divisible by 8
  try {
    ep_bench_traffic(p);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(e.file() == "set.yaml");
    CHECK(e.place() == "7:5");
  }
  EpCommPoint q = point(12, 8, 24, 2, 1, BenchRouting::uniform);  // 12 ranks over nodes of 8
  CHECK_THROWS_AS(ep_bench_traffic(q), InputError);
}
