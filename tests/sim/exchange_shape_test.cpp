// ExchangeShape: an exchange's hops built once and run at any bytes per unit. The hops of a small
// rail-forwarded dispatch are worked out by hand; a shape built from tokens and run at B bytes per
// token must move exactly (to the bit, to the picosecond) what a payload of those bytes moves, and a
// shape run twice must run the same both times.
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "sim/replay/all_to_all.hpp"
#include "sim/replay/exchange_shape.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

// `nodes` nodes of `per_node` GPUs, DeepEP's route: RDMA to the rail peer, then NVLink inside the node.
HardwareSpec rail_hardware(int nodes, int per_node) {
  HardwareSpec hw = test::simple_hardware(nodes, per_node);
  hw.ep_backend.internode_route = "rail_forward";
  return hw;
}

struct Matrix {
  std::vector<std::vector<double>> rows;
  Matrix(int n, int m) : rows(static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(m), 0.0)) {}
};

// A skewed dispatch or combine of `n` GPUs on nodes of `per_node`, in tokens: fractional counts (the
// fanout's expectations), some pairs empty (most, when sparse), and each source's distinct tokens
// per other node.
ExchangePayload random_tokens(int n, int per_node, bool to_sources, std::uint64_t seed, bool sparse = false) {
  const int nodes = n / per_node;
  std::uint64_t x = seed;
  const auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  Matrix gpu(n, n);
  Matrix node(n, nodes);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b || (sparse ? next() % 6 != 0 : next() % 5 == 0)) continue;
      gpu.rows[a][b] = static_cast<double>(next() % 4000) / 7.0 + 1.0 / 3.0;
    }
  }
  // A rank's node traffic: a fraction of its pairs' with that node (tokens reaching several GPUs there).
  for (int r = 0; r < n; ++r)
    for (int m = 0; m < nodes; ++m) {
      if (m == r / per_node) continue;
      double sum = 0;
      for (int d = m * per_node; d < (m + 1) * per_node; ++d) sum += to_sources ? gpu.rows[d][r] : gpu.rows[r][d];
      node.rows[r][m] = sum * 0.6;
    }
  ExchangePayload p(gpu.rows);
  p.node_bytes = node.rows;
  p.to_sources = to_sources;
  return p;
}

ExchangePayload scaled(const ExchangePayload& tokens, double bytes_per_token) {
  ExchangePayload bytes = tokens;
  for (auto* m : {&bytes.gpu_bytes, &bytes.node_bytes})
    for (std::vector<double>& row : *m)
      for (double& v : row) v = 0.0 + v * bytes_per_token;  // as LayerRun filled a byte payload
  return bytes;
}

// The same payload as lists: its pairs and node amounts that move, in (from, to) order.
ExchangePayload listed(const ExchangePayload& matrices) {
  ExchangePayload out;
  out.to_sources = matrices.to_sources;
  out.per_node = !matrices.node_bytes.empty();
  for (std::size_t a = 0; a < matrices.gpu_bytes.size(); ++a)
    for (std::size_t b = 0; b < matrices.gpu_bytes[a].size(); ++b)
      if (matrices.gpu_bytes[a][b] > 0) out.pairs.push_back({static_cast<int>(a), static_cast<int>(b), matrices.gpu_bytes[a][b]});
  for (std::size_t r = 0; r < matrices.node_bytes.size(); ++r)
    for (std::size_t m = 0; m < matrices.node_bytes[r].size(); ++m)
      if (matrices.node_bytes[r][m] > 0) out.node_pairs.push_back({static_cast<int>(r), static_cast<int>(m), matrices.node_bytes[r][m]});
  return out;
}

// Two shapes alike in every hop, rank, term and index.
void check_same_shape(const ExchangeShape& x, const ExchangeShape& y) {
  REQUIRE(x.hops().size() == y.hops().size());
  for (std::size_t h = 0; h < x.hops().size(); ++h) {
    CAPTURE(h);
    const ExchangeShape::Hop& a = x.hops()[h];
    const ExchangeShape::Hop& b = y.hops()[h];
    CHECK((a.from == b.from && a.to == b.to && a.by_copy_engine == b.by_copy_engine && a.first == b.first &&
           a.internode == b.internode && a.pending == b.pending && a.inputs == b.inputs && a.terms_begin == b.terms_begin &&
           a.terms_end == b.terms_end));
  }
  REQUIRE(x.ranks().size() == y.ranks().size());
  for (std::size_t r = 0; r < x.ranks().size(); ++r)
    CHECK((x.ranks()[r].moves == y.ranks()[r].moves && x.ranks()[r].holds_sms == y.ranks()[r].holds_sms &&
           x.ranks()[r].hops == y.ranks()[r].hops));
  CHECK(x.terms() == y.terms());
  CHECK(x.kernels() == y.kernels());
  CHECK(x.start_offsets() == y.start_offsets());
  CHECK(x.start_hops() == y.start_hops());
  CHECK(x.ready_offsets() == y.ready_offsets());
  CHECK(x.ready_hops() == y.ready_hops());
  CHECK(x.feed_offsets() == y.feed_offsets());
  CHECK(x.feeds() == y.feeds());
}

struct Outcome {
  std::vector<Time_ps> done;
  double total = 0, internode = 0, copy_engine = 0;
  std::vector<double> message_bytes;  ///< every hop's bytes, as the timeline recorded them, in its order
};

Outcome run(const HardwareSpec& hw, const std::function<std::unique_ptr<AllToAllV>(SimContext&, std::vector<Time_ps>&)>& make) {
  const ModelSpec model = test::simple_model();
  SimContext ctx(hw, model, hw.nodes * hw.gpus_per_node);
  Outcome out;
  out.done.assign(static_cast<std::size_t>(hw.nodes * hw.gpus_per_node), -1);
  std::unique_ptr<AllToAllV> a2a = make(ctx, out.done);
  // Staggered starts, as ranks reach an exchange when their own GEMMs end.
  for (int g = 0; g < static_cast<int>(out.done.size()); ++g)
    ctx.queue().schedule(static_cast<Time_ps>(g % 3) * 700'000 + g * 1'000, [&a2a, g] { a2a->start(g); });
  ctx.queue().run();
  out.total = a2a->total_bytes();
  out.internode = a2a->internode_bytes();
  out.copy_engine = a2a->copy_engine_bytes();
  for (const TimelineEvent& e : ctx.timeline().events)
    if (e.bytes > 0) out.message_bytes.push_back(e.bytes);
  return out;
}

}  // namespace

TEST_CASE("a rail-forwarded dispatch's shape: one RDMA hop per source and node, one NVLink forward per peer and expert GPU") {
  // 2 nodes of 2 GPUs. GPU 0 sends 10 tokens to GPU 2 and 20 to GPU 3, 25 distinct ones to node 1;
  // GPU 1 sends 5 to GPU 0 (same node). Its rail peer in node 1 is GPU 2 (local index 0), which takes
  // the RDMA hop and forwards GPU 3's share; the pair 0 -> 2 rides the RDMA hop alone.
  const HardwareSpec hw = rail_hardware(2, 2);
  const ModelSpec model = test::simple_model();
  const SimContext ctx(hw, model, 4);
  Matrix gpu(4, 4);
  gpu.rows[0][2] = 10;
  gpu.rows[0][3] = 20;
  gpu.rows[1][0] = 5;
  Matrix node(4, 2);
  node.rows[0][1] = 25;
  ExchangePayload p(gpu.rows);
  p.node_bytes = node.rows;
  const ExchangeShape shape(ctx.topology(), p, CommEngine::sms);
  const auto& hops = shape.hops();
  REQUIRE(hops.size() == 3);
  // In order: the pair that travels alone, the forwards, the RDMA hops.
  CHECK((hops[0].from == 1 && hops[0].to == 0 && hops[0].first && !hops[0].internode));
  CHECK((hops[1].from == 2 && hops[1].to == 3 && !hops[1].first && !hops[1].internode));
  CHECK((hops[2].from == 0 && hops[2].to == 2 && hops[2].first && hops[2].internode));
  const auto terms = [&](const ExchangeShape::Hop& h) {
    return std::vector<double>(shape.terms().begin() + h.terms_begin, shape.terms().begin() + h.terms_end);
  };
  CHECK(terms(hops[0]) == std::vector<double>{5});
  CHECK(terms(hops[1]) == std::vector<double>{20});
  CHECK(terms(hops[2]) == std::vector<double>{25});
  // The forward waits for its source (GPU 0) to start and its sender's kernel (GPU 2) to be ready,
  // and for its one input, the RDMA hop, which feeds it.
  CHECK(hops[1].pending == 2);
  CHECK(hops[1].inputs == 1);
  CHECK(std::vector<int>(shape.feeds().begin() + shape.feed_offsets()[2], shape.feeds().begin() + shape.feed_offsets()[3]) ==
        std::vector<int>{1});
  // Every GPU runs a kernel (the sms engine) and GPU 1 ... 3 all move something, as does GPU 0.
  CHECK(shape.kernels() == 4);
  CHECK(shape.ranks()[2].hops == 2);

  // Run at 1,000 bytes per token: 5,000 + 25,000 bytes leave their sources, 25,000 cross nodes.
  SimContext run_ctx(hw, model, 4);
  AllToAllV a2a(run_ctx, "dispatch", Pass::forward, std::make_shared<const ExchangeShape>(shape), 1000.0, [](int) {});
  CHECK(a2a.total_bytes() == 30'000);
  CHECK(a2a.internode_bytes() == 25'000);
}

TEST_CASE("a shape built from tokens moves exactly the bytes of a payload of those tokens' bytes") {
  // 4 nodes: a forwarding GPU serves one source in each other node, so a forward sums 3 of them.
  for (const int per_node : {2, 4, 8}) {
    for (const bool to_sources : {false, true}) {
      for (const CommEngine engine : {CommEngine::sms, CommEngine::copy_engine}) {
        CAPTURE(per_node);
        CAPTURE(to_sources);
        const HardwareSpec hw = rail_hardware(4, per_node);
        const int n = 4 * per_node;
        const ExchangePayload tokens = random_tokens(n, per_node, to_sources, 88172645463325252ull + static_cast<std::uint64_t>(n));
        const double bytes_per_token = 7392;  // an FP8 token of hidden 7168 with its scales
        const CommKernel kernel{engine, 2'000'000};
        const ModelSpec model = test::simple_model();
        const SimContext topo(hw, model, n);
        const auto shape = std::make_shared<const ExchangeShape>(topo.topology(), tokens, engine);
        const Outcome from_bytes = run(hw, [&](SimContext& ctx, std::vector<Time_ps>& done) {
          return std::make_unique<AllToAllV>(ctx, "x", Pass::forward, scaled(tokens, bytes_per_token),
                                             [&ctx, &done](int g) { done[g] = ctx.now_ps(); }, kernel);
        });
        const Outcome from_shape = run(hw, [&](SimContext& ctx, std::vector<Time_ps>& done) {
          return std::make_unique<AllToAllV>(ctx, "x", Pass::forward, shape, bytes_per_token,
                                             [&ctx, &done](int g) { done[g] = ctx.now_ps(); }, kernel);
        });
        CHECK(from_shape.done == from_bytes.done);
        // Every hop's bytes, forwards (a sum over their sources) included, to the bit.
        CHECK(from_shape.message_bytes == from_bytes.message_bytes);
        CHECK(from_bytes.message_bytes.size() > static_cast<std::size_t>(n));
        CHECK(from_shape.total == from_bytes.total);  // to the bit: the same sums in the same order
        CHECK(from_shape.internode == from_bytes.internode);
        CHECK(from_shape.copy_engine == from_bytes.copy_engine);
        CHECK(from_bytes.total > 0);
        for (const Time_ps t : from_bytes.done) CHECK(t > 0);  // every rank finished
        // Run again from the same shape: the runs keep their state, the shape none.
        const Outcome again = run(hw, [&](SimContext& ctx, std::vector<Time_ps>& done) {
          return std::make_unique<AllToAllV>(ctx, "x", Pass::forward, shape, bytes_per_token,
                                             [&ctx, &done](int g) { done[g] = ctx.now_ps(); }, kernel);
        });
        CHECK(again.done == from_shape.done);
      }
    }
  }
}

TEST_CASE("a payload listed as pairs builds the shape of its matrices") {
  // The hand-worked dispatch above, listed: the same three hops.
  {
    const HardwareSpec hw = rail_hardware(2, 2);
    const SimContext ctx(hw, test::simple_model(), 4);
    ExchangePayload p;
    p.per_node = true;
    p.pairs = {{0, 2, 10}, {0, 3, 20}, {1, 0, 5}};
    p.node_pairs = {{0, 1, 25}};
    const ExchangeShape shape(ctx.topology(), p, CommEngine::sms);
    REQUIRE(shape.hops().size() == 3);
    CHECK((shape.hops()[0].from == 1 && shape.hops()[0].to == 0));
    CHECK((shape.hops()[1].from == 2 && shape.hops()[1].to == 3 && shape.hops()[1].inputs == 1));
    CHECK((shape.hops()[2].from == 0 && shape.hops()[2].to == 2 && shape.hops()[2].internode));
    CHECK(shape.terms() == std::vector<double>{5, 20, 25});
  }
  // Random dispatches and combines, dense and sparse, forwarded by node or not, on both engines;
  // nodes of 72 GPUs too, past the 64 whose combine a matrix gathers by mask.
  for (const int per_node : {2, 4, 8, 72}) {
    for (const bool to_sources : {false, true}) {
      for (const bool sparse : {false, true}) {
        for (const bool by_node : {false, true}) {
          for (const CommEngine engine : {CommEngine::sms, CommEngine::copy_engine}) {
            CAPTURE(per_node);
            CAPTURE(to_sources);
            CAPTURE(sparse);
            CAPTURE(by_node);
            const HardwareSpec hw = rail_hardware(4, per_node);
            const int n = 4 * per_node;
            ExchangePayload matrices = random_tokens(n, per_node, to_sources, 2463534242ull + static_cast<std::uint64_t>(n), sparse);
            if (!by_node) matrices.node_bytes.clear();
            const SimContext ctx(hw, test::simple_model(), n);
            const ExchangeShape from_matrices(ctx.topology(), matrices, engine);
            const ExchangeShape from_lists(ctx.topology(), listed(matrices), engine);
            CHECK(!from_matrices.hops().empty());
            check_same_shape(from_matrices, from_lists);
          }
        }
      }
    }
  }
}
