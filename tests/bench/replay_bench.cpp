// How fast one MoE layer (forward + backward, static EP) goes through the engine, as a function of
// the EP degree: the number a what-if sweep is limited by. The second argument is the exchange's token
// copies: 0 per (token, expert) pair, each pair its own inter-node flow; 2 per node (the preset's,
// DeepEP's), one RDMA flow per source GPU and destination node, forwarded inside the node. The third is
// the bandwidth sharing (engine.bandwidth_sharing): 0 exact, n > 0 epochs with engine.epoch_tolerance
// n / 10,000. The layer_us counter is the simulated layer time, for the error of epochs against exact.
//
// BM_WideEpLayer goes on to EP 2,048 on a model wide enough to hold whole experts at every degree, and
// counts what the engine did: events run, rate re-solves, flows they covered, rates that moved. Its
// third argument is the sharing: 0 exact (max-min), 1 per_link (each link shared on its own), 2 local
// (max-min inside each GPU's sending and receiving links), 3 coupled (local, the busiest tenth of the
// GPUs' links following their senders); 1 to 3 count no re-solves, so those counters read 0.
// BM_ExchangeFanout and BM_ExchangeShape time two parts of its set-up alone. BM_WideFasterMoeLayer is
// FasterMoE's plan and layer on BM_WideEpLayer's log-normal layer, and BM_WideLaerMoeLayer LAER-MoE's.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/balancers/fastermoe.hpp"
#include "sim/balancers/laer_moe.hpp"
#include "sim/balancers/oracle.hpp"
#include "sim/balancers/placement.hpp"
#include "sim/balancers/static_ep.hpp"
#include "sim/plan/plan.hpp"
#include "sim/config/loaders.hpp"
#include "sim/replay/exchange_fanout.hpp"
#include "sim/replay/exchange_shape.hpp"
#include "sim/replay/layer_metrics.hpp"
#include "sim/replay/layer_run.hpp"
#include "sim/replay/sim_context.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "traces/synth/synthetic_trace.hpp"

using namespace epsim;

namespace {

// A deterministic skewed count matrix: rank s sends to expert e a count that varies by both.
TraceRecord skewed_record(int ranks, int experts, int tokens_per_rank, int top_k) {
  TraceRecord r;
  r.counts.assign(static_cast<std::size_t>(ranks) * experts, 0);
  const int per_rank = tokens_per_rank * top_k;
  std::uint64_t x = 88172645463325252ull;
  for (int s = 0; s < ranks; ++s) {
    std::uint64_t weight_sum = 0;
    std::vector<std::uint64_t> w(experts);
    for (int e = 0; e < experts; ++e) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      w[e] = 1 + (x % 100) * (e % 7 == 0 ? 3 : 1);
      weight_sum += w[e];
    }
    for (int e = 0; e < experts; ++e) r.counts[s * experts + e] = static_cast<std::uint32_t>(per_rank * w[e] / weight_sum);
  }
  return r;
}

// The first record `epsim trace generate --ranks EP --experts E --top-k K --tokens-per-rank 4096
// --dist lognormal --lognormal-sigma 0.6 --rank-skew 0.2 --seed 1` writes: the counts of the
// `epsim run` figures in docs/performance.md, "Wide EP".
TraceRecord lognormal_record(int ranks, int experts, int top_k) {
  SyntheticOptions o;
  o.ranks = static_cast<std::uint32_t>(ranks);
  o.experts = static_cast<std::uint32_t>(experts);
  o.top_k = static_cast<std::uint32_t>(top_k);
  o.tokens_per_rank = 4096;
  o.dist = PopularityDist::lognormal;
  o.lognormal_sigma = 0.6;
  o.rank_skew = 0.2;
  o.seed = 1;
  SyntheticTrace trace(o);
  TraceRecord r;
  trace.next(r);
  return r;
}

// One static-EP layer of the GLM-5-like model with `experts` experts (0: the file's 256), 4,096 tokens
// per rank with skewed_record's counts (or lognormal_record's), on enough H100 nodes of 8 for `ep` GPUs.
struct StaticLayer {
  HardwareSpec hw;
  ModelSpec model;
  TraceRecord record;
  Plan plan;
  std::vector<std::int64_t> local;

  StaticLayer(int ep, int experts, const std::function<void(HardwareSpec&)>& adjust, bool lognormal = false)
      : hw(load_hardware(std::string(EPSIM_SOURCE_DIR) + "/models/h100-sxm-8.yaml")),
        model(load_model(std::string(EPSIM_SOURCE_DIR) + "/models/glm5-like-256.yaml")),
        local(static_cast<std::size_t>(ep), 4096) {
    adjust(hw);
    hw.nodes = std::max(hw.nodes, (ep + hw.gpus_per_node - 1) / hw.gpus_per_node);
    if (experts > 0) model.num_experts = experts;
    record = lognormal ? lognormal_record(ep, model.num_experts, model.top_k)
                       : skewed_record(ep, model.num_experts, 4096, model.top_k);
    plan = StaticEp().plan(record, context());
  }

  /// What a balancer is told of this layer's cluster and model.
  BalancerContext context() const {
    BalancerContext c;
    c.num_gpus = static_cast<int>(local.size());
    c.gpus_per_node = hw.gpus_per_node;
    c.model = &model;
    c.hardware = &hw;
    return c;
  }
};

void BM_StaticEpLayer(benchmark::State& state) {
  const StaticLayer layer(static_cast<int>(state.range(0)), 0, [&](HardwareSpec& hw) {
    hw.ep_backend.token_copies = state.range(1) == 0 ? TokenCopies::per_expert : TokenCopies::per_node;
    hw.engine.bandwidth_sharing = state.range(2) == 0 ? BandwidthSharing::exact : BandwidthSharing::epochs;
    hw.engine.epoch_tolerance = static_cast<double>(state.range(2)) / 10'000;
  });
  const HardwareSpec& hw = layer.hw;
  const ModelSpec& model = layer.model;
  const Plan& plan = layer.plan;
  const std::vector<std::int64_t>& local = layer.local;
  std::size_t events = 0;
  Time_ps layer_ps = 0;
  for (auto _ : state) {
    const LayerResult r = simulate_layer(hw, model, plan, local, true);
    events = r.timeline.events.size();
    layer_ps = r.layer_ps();
    benchmark::DoNotOptimize(r.forward_ps);
  }
  state.counters["timeline_events"] = static_cast<double>(events);
  state.counters["layer_us"] = ps_to_us(layer_ps);
  state.counters["layers_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// One GLM-5-like layer (hidden 6144, top-8), static EP, forward and backward, 4,096 tokens per rank,
// per-node copies (the preset's), exact sharing, on H100 nodes of 8. counts 0: skewed_record's
// near-uniform counts over 2,048 experts (EP 128 holds 16 experts a GPU, EP 2,048 one); counts 1:
// lognormal_record's over 1,024 experts, the layer of docs/performance.md's "Wide EP" runs.
void BM_WideEpLayer(benchmark::State& state) {
  const bool lognormal = state.range(1) == 1;
  const BandwidthSharing sharing = state.range(2) == 3   ? BandwidthSharing::coupled
                                   : state.range(2) == 2 ? BandwidthSharing::local
                                   : state.range(2) == 1 ? BandwidthSharing::per_link
                                                         : BandwidthSharing::exact;
  const StaticLayer layer(
      static_cast<int>(state.range(0)), lognormal ? 1024 : 2048,
      [sharing](HardwareSpec& hw) { hw.engine.bandwidth_sharing = sharing; }, lognormal);
  const HardwareSpec& hw = layer.hw;
  const ModelSpec& model = layer.model;
  const Plan& plan = layer.plan;
  const std::vector<std::int64_t>& local = layer.local;
  std::uint64_t events = 0, solves = 0, resolved = 0, changes = 0;
  Time_ps layer_ps = 0;
  for (auto _ : state) {
    // simulate_layer's steps, keeping the context to read its counters. Hops go unnamed, as for
    // every record `epsim run` does not draw.
    SimContext context(hw, model, plan.num_gpus);
    context.set_transfer_names(false);
    const ExchangeFanout fanout(plan, nullptr, model, hw.ep_backend.token_copies, hw.gpus_per_node);
    LayerRun run(context, plan, fanout, local, true);
    const LayerResult r = run.run();
    layer_ps = r.layer_ps();
    events = context.queue().events_run();
    solves = context.network().solves();
    resolved = context.network().flows_resolved();
    changes = context.network().rate_changes();
    benchmark::DoNotOptimize(r.forward_ps);
  }
  state.counters["layer_us"] = ps_to_us(layer_ps);
  state.counters["events"] = static_cast<double>(events);
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["solves"] = static_cast<double>(solves);
  state.counters["flows_resolved"] = static_cast<double>(resolved);
  state.counters["rate_changes"] = static_cast<double>(changes);
}

/// The expected token copies of a wide layer's plan alone (ExchangeFanout: a pass over the plan's
/// millions of routes and the expectation rule for each (source, GPU or node) leg), the near-uniform
/// layer of BM_WideEpLayer with per-node copies.
void BM_ExchangeFanout(benchmark::State& state) {
  const StaticLayer layer(static_cast<int>(state.range(0)), 2048, [](HardwareSpec&) {});
  std::size_t legs = 0;
  for (auto _ : state) {
    const ExchangeFanout fanout(layer.plan, nullptr, layer.model, layer.hw.ep_backend.token_copies,
                                layer.hw.gpus_per_node);
    legs = fanout.gpu_legs(0).size() + fanout.node_legs(0).size();
    benchmark::DoNotOptimize(legs);
  }
  state.counters["legs"] = static_cast<double>(legs);
}

/// A wide layer's two exchange shapes (its dispatch's and its combine's), built from the fanout's legs
/// as LayerRun builds them: each leg's tokens into a GPU-by-GPU payload and a source-by-node one, then
/// ExchangeShape's walks over the pairs, its hops and the links between them. The near-uniform layer
/// of BM_WideEpLayer with per-node copies.
void BM_ExchangeShape(benchmark::State& state) {
  const StaticLayer layer(static_cast<int>(state.range(0)), 2048, [](HardwareSpec&) {});
  const HardwareSpec& hw = layer.hw;
  const int n = layer.plan.num_gpus;
  const SimContext context(hw, layer.model, n);
  const Topology& topology = context.topology();
  const ExchangeFanout fanout(layer.plan, nullptr, layer.model, hw.ep_backend.token_copies, hw.gpus_per_node);
  std::size_t hops = 0;
  ExchangePayload payload;  // one for both, refilled, as LayerRun keeps one
  payload.gpu_bytes.resize(static_cast<std::size_t>(n));
  payload.node_bytes.resize(static_cast<std::size_t>(n));
  for (auto _ : state) {
    for (const bool reverse : {false, true}) {
      payload.to_sources = reverse;
      for (std::vector<double>& row : payload.gpu_bytes) row.assign(static_cast<std::size_t>(n), 0.0);
      for (const LegTokens& leg : fanout.gpu_legs(0)) {
        if (reverse) payload.gpu_bytes[leg.dst][leg.src] += leg.tokens;
        else payload.gpu_bytes[leg.src][leg.dst] += leg.tokens;
      }
      for (std::vector<double>& row : payload.node_bytes) row.assign(static_cast<std::size_t>(topology.num_nodes()), 0.0);
      for (const LegTokens& leg : fanout.node_legs(0)) payload.node_bytes[leg.src][leg.dst] += leg.tokens;
      const ExchangeShape shape(topology, payload, hw.ep_backend.dispatch_engine);
      hops = shape.hops().size();
      benchmark::DoNotOptimize(hops);
    }
  }
  state.counters["hops"] = static_cast<double>(hops);
}

/// One record as `epsim run` handles it, beyond the engine: static EP's plan and its check, the
/// layer simulated (local sharing, hops unnamed), the oracle's bound and the layer's metrics, on the
/// near-uniform wide layer of BM_WideEpLayer. BM_WideEpLayer is the engine's part alone.
void BM_WideEpRecord(benchmark::State& state) {
  const int ep = static_cast<int>(state.range(0));
  const StaticLayer layer(ep, 2048, [](HardwareSpec& hw) { hw.engine.bandwidth_sharing = BandwidthSharing::local; });
  const HardwareSpec& hw = layer.hw;
  const ModelSpec& model = layer.model;
  const TraceRecord& record = layer.record;
  const std::vector<std::int64_t>& local = layer.local;
  std::vector<int> home(static_cast<std::size_t>(model.num_experts));
  for (int e = 0; e < model.num_experts; ++e) home[static_cast<std::size_t>(e)] = home_gpu(e, model.num_experts, ep, Placement::contiguous);
  const BalancerContext context = layer.context();
  StaticEp balancer;
  double layer_us = 0;
  for (auto _ : state) {
    const Plan plan = balancer.plan(record, context);
    validate_plan(plan, model.num_experts, hw.gpus_per_node);
    const LayerResult result = simulate_layer(hw, model, plan, local, true, &record, false);
    const LayerBound bound = oracle_bound(record, hw, model, ep, local, model.top_k, true);
    MetricsInput in;
    in.record = &record;
    in.num_experts = model.num_experts;
    in.gpus_per_node = hw.gpus_per_node;
    in.home_gpu = &home;
    in.plan = &plan;
    in.result = &result;
    in.bound = &bound;
    const LayerMetrics metrics = compute_layer_metrics(in);
    layer_us = ps_to_us(result.layer_ps());
    benchmark::DoNotOptimize(metrics);
  }
  state.counters["layer_us"] = layer_us;
}

/// FasterMoE's plan and layer at wide EP, with its defaults (the paper's shadowing policy, smart
/// scheduling in groups of 4: 256 pipelined stages at EP 1,024, each exchange a stage's pairs) and auto
/// sharing (exact at EP 256, coupled at 1,024), on the log-normal layer of BM_WideEpLayer: what one
/// record of a wide comparison's FasterMoE replay costs, beside BM_WideEpRecord's static EP.
void BM_WideFasterMoeLayer(benchmark::State& state) {
  const int ep = static_cast<int>(state.range(0));
  const StaticLayer layer(ep, 1024, [](HardwareSpec& hw) { hw.engine.bandwidth_sharing = BandwidthSharing::automatic; }, true);
  const BalancerContext context = layer.context();
  FasterMoe balancer{FasterMoeOptions{}};
  std::size_t events = 0;
  double layer_us = 0;
  for (auto _ : state) {
    const Plan plan = balancer.plan(layer.record, context);
    const LayerResult result = simulate_layer(layer.hw, layer.model, plan, layer.local, true, &layer.record, false);
    events = result.timeline.events.size();
    layer_us = ps_to_us(result.layer_ps());
    benchmark::DoNotOptimize(result.forward_ps);
  }
  state.counters["layer_us"] = layer_us;
  state.counters["timeline_events"] = static_cast<double>(events);
}

/// LAER-MoE's plan and layer at wide EP, with its defaults (a layout re-planned from the window on
/// every record, two copies a GPU, FSEP's all-gather of every instance's weights and reduce-scatter
/// of its gradients: 4.19 million transfers at EP 1,024, relayed by the rail peers) and auto sharing
/// (exact at EP 256, coupled at 1,024), on the same layer: the replay where coupled's relays, groups
/// that follow and lead with hundreds of classes with flows each, cost the most. The record is
/// planned once before the timed loop, so that every timed plan uses a layout from history.
void BM_WideLaerMoeLayer(benchmark::State& state) {
  const int ep = static_cast<int>(state.range(0));
  const StaticLayer layer(ep, 1024, [](HardwareSpec& hw) { hw.engine.bandwidth_sharing = BandwidthSharing::automatic; }, true);
  const BalancerContext context = layer.context();
  LaerMoe balancer{LaerMoeParams{}};
  benchmark::DoNotOptimize(balancer.plan(layer.record, context));
  std::size_t transfers = 0;
  double layer_us = 0;
  for (auto _ : state) {
    const Plan plan = balancer.plan(layer.record, context);
    const LayerResult result = simulate_layer(layer.hw, layer.model, plan, layer.local, true, &layer.record, false);
    transfers = plan.transfers.size();
    layer_us = ps_to_us(result.layer_ps());
    benchmark::DoNotOptimize(result.forward_ps);
  }
  state.counters["layer_us"] = layer_us;
  state.counters["transfers"] = static_cast<double>(transfers);
}

}  // namespace

BENCHMARK(BM_WideFasterMoeLayer)->ArgName("ep")->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WideLaerMoeLayer)->ArgName("ep")->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);

BENCHMARK(BM_WideEpRecord)->ArgName("ep")->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);

BENCHMARK(BM_ExchangeFanout)->ArgName("ep")->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);

BENCHMARK(BM_ExchangeShape)->ArgName("ep")->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);

BENCHMARK(BM_WideEpLayer)
    ->ArgNames({"ep", "counts", "sharing"})
    ->ArgsProduct({{128, 256, 512, 1024, 2048}, {0}, {0, 1, 2, 3}})
    ->ArgsProduct({{256, 512, 1024}, {1}, {0, 1, 2, 3}})
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_StaticEpLayer)
    ->ArgNames({"ep", "copies", "epoch_tol_1e4"})
    ->ArgsProduct({{8, 16, 64, 128}, {0, 2}, {0, 10, 50}})
    ->Args({256, 2, 0})
    ->Args({256, 2, 10})
    ->Args({256, 2, 50})
    ->Unit(benchmark::kMillisecond);
