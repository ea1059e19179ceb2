// LAER-MoE's FSEP runtime and its default capacity, against numbers worked out by hand. The simple
// model's expert has 2 x 1000 x 500 = 1e6 parameters (1e6 bytes at dtype_bytes 1); on N GPUs every
// restored copy gathers (N - 1) shards of 1e6 / N bytes and reduce-scatters as many gradient shards.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>

#include "sim/balancers/laer_moe.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

/// Bytes of `kind` transfers into (weights) or out of (gradients) each GPU.
std::map<int, std::int64_t> bytes_per_gpu(const Plan& plan, TransferKind kind) {
  std::map<int, std::int64_t> out;
  for (const Transfer& t : plan.transfers)
    if (t.kind == kind) out[kind == TransferKind::weights ? t.dst_gpu : t.src_gpu] += t.bytes;
  return out;
}

/// The cost model as the source states it, source by source and copy by copy (the balancer's version
/// sums per node).
double reference_cost(const std::vector<std::vector<double>>& tokens, const LaerLayout& layout, int gpn,
                      const LaerCostModel& cost) {
  const int n = static_cast<int>(tokens.size());
  const int experts = static_cast<int>(layout.size());
  double comm = 0;
  std::vector<double> comp(n, 0.0);
  for (int s = 0; s < n; ++s)
    for (int e = 0; e < experts; ++e) {
      std::vector<int> to;
      for (int g = 0; g < n; ++g)
        if (layout[e][g] > 0 && g / gpn == s / gpn) to.push_back(g);
      if (to.empty())
        for (int g = 0; g < n; ++g)
          if (layout[e][g] > 0) to.push_back(g);
      int units = 0;
      for (int g : to) units += layout[e][g];
      for (int g : to) {
        const double share = tokens[s][e] * layout[e][g] / units;
        const double bw = g == s ? 1e9 : g / gpn == s / gpn ? cost.intra_GBps : cost.inter_GBps;
        comm += cost.token_bytes * share * 1e-9 / bw;
        comp[g] += share * cost.comp_s_per_token;
      }
    }
  return 4 * comm + 3 * *std::max_element(comp.begin(), comp.end());
}

}  // namespace

TEST_CASE("laer_moe FSEP: every copy gathers params x precision x (N-1)/N, prefetched, and reduce-scatters its gradients") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  const BalancerContext ctx = test::context_for(model, hw);
  LaerMoeParams p;
  p.grad_bytes_per_param = 4;  // FP32 gradients
  LaerMoe laer(p);
  const TraceRecord flat = test::record_of({{10, 10, 10, 10}, {10, 10, 10, 10}, {10, 10, 10, 10}, {10, 10, 10, 10}});
  // Record 0 runs the static layout: one copy per GPU, still sharded, so still gathered.
  const Plan first = laer.plan(flat, ctx);
  CHECK(first.transfers.size() == 4u * 6u);
  for (const Transfer& t : first.transfers) {
    CHECK(t.carrier == Carrier::ep_backend);
    if (t.kind == TransferKind::weights) {
      CHECK(t.pass == PassKind::forward);
      CHECK(t.start == TransferStart::prefetch);
      CHECK(t.bytes == 250'000);  // 1e6 params x 1 byte / 4 GPUs
    } else {
      CHECK(t.pass == PassKind::backward);
      CHECK(t.bytes == 1'000'000);  // 1e6 params x 4 bytes / 4 GPUs
    }
  }
  for (int g = 0; g < 4; ++g) {
    CHECK(bytes_per_gpu(first, TransferKind::weights)[g] == 750'000);      // 1e6 x 1 x 3/4
    CHECK(bytes_per_gpu(first, TransferKind::gradients)[g] == 3'000'000);  // 1e6 x 4 x 3/4
  }
  // Record 1 re-plans with the default capacity 2 E/N = 2: two copies per GPU, twice the bytes.
  const Plan second = laer.plan(flat, ctx);
  CHECK(second.instances.size() == 8u);
  for (int g = 0; g < 4; ++g) {
    CHECK(bytes_per_gpu(second, TransferKind::weights)[g] == 1'500'000);
    CHECK(bytes_per_gpu(second, TransferKind::gradients)[g] == 6'000'000);
  }
  // The gradient precision defaults to the model's dtype_bytes.
  LaerMoe plain{LaerMoeParams{}};
  for (const Transfer& t : plain.plan(flat, ctx).transfers) CHECK(t.bytes == 250'000);
}

TEST_CASE("laer_moe default capacity is 2 E/N, so the even candidate exists and the cost model chooses") {
  CHECK(laer_default_capacity(4, 4) == 2);
  CHECK(laer_default_capacity(8, 4) == 4);
  for (int n : {8, 16, 32, 64}) {
    const int c = laer_default_capacity(128, n);
    CHECK(c == 256 / n);
    CHECK(c * n % 128 == 0);  // r_e = C N / E = 2 copies each
  }
  CHECK(laer_default_capacity(8, 32) == 1);  // fewer experts than GPUs: one copy per GPU
  // 8 experts on one node of 4 GPUs: capacity 4 gives 16 slots, 2 copies of each expert on flat
  // loads (E/N + 1 = 3 would leave 12 slots: four experts with one copy).
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  const BalancerContext ctx = test::context_for(model, hw);
  LaerMoe laer{LaerMoeParams{}};
  const TraceRecord flat = test::record_of(std::vector<std::vector<std::uint32_t>>(4, std::vector<std::uint32_t>(8, 10)));
  laer.plan(flat, ctx);
  const Plan plan = laer.plan(flat, ctx);
  std::map<int, int> instances_of;
  for (const ExpertInstance& i : plan.instances) ++instances_of[i.expert];
  CHECK(instances_of.size() == 8u);
  for (const auto& [e, count] : instances_of) CHECK(count == 2);
  // A hot expert: the precise candidate (expert 0: 9 copies, the rest 1) beats even (2 each).
  std::vector<std::vector<std::uint32_t>> hot(4, std::vector<std::uint32_t>(8, 1));
  for (auto& row : hot) row[0] = 400;
  LaerMoe hot_laer{LaerMoeParams{}};
  hot_laer.plan(test::record_of(hot), ctx);
  const Plan hot_plan = hot_laer.plan(test::record_of(hot), ctx);
  int gpus_with_e0 = 0;
  for (const ExpertInstance& i : hot_plan.instances) gpus_with_e0 += i.expert == 0 ? 1 : 0;
  CHECK(gpus_with_e0 == 4);
  const auto load = hot_plan.tokens_per_gpu();
  // GPU 0 holds 3 of expert 0's 9 copies: 4 x (3 x 44 + at most 3 left-over tokens) <= 540 of its 1600
  // tokens, and one other expert's 4; even would put 800 on each of two GPUs.
  CHECK(*std::max_element(load.begin(), load.end()) <= 544);
  CHECK(*std::max_element(load.begin(), load.end()) >= 528);
}

TEST_CASE("laer cost model summed per node equals the source's per-copy sum on random layouts") {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> count(0, 50), copies(0, 2);
  LaerCostModel cost;
  cost.token_bytes = 4096;
  cost.comp_s_per_token = 3e-7;
  cost.intra_GBps = 216.269;
  cost.inter_GBps = 88.9539;
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 8, experts = 6, gpn = trial % 2 == 0 ? 4 : 2;
    std::vector<std::vector<double>> tokens(n, std::vector<double>(experts));
    for (auto& row : tokens)
      for (double& t : row) t = count(rng);
    LaerLayout layout(experts, std::vector<int>(n, 0));
    for (int e = 0; e < experts; ++e) {
      for (int g = 0; g < n; ++g) layout[e][g] = copies(rng) == 2 ? 1 + trial % 2 : 0;
      if (std::all_of(layout[e].begin(), layout[e].end(), [](int c) { return c == 0; })) layout[e][e] = 1;
    }
    CHECK(laer_layout_cost(tokens, layout, gpn, cost) == doctest::Approx(reference_cost(tokens, layout, gpn, cost)));
  }
}
