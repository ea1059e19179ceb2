// MicroMoE's planner cost on the GLM-5-like case (128 experts, top-8, 4096 tokens per rank, skewed
// like a log-normal expert popularity; the same fixed-seed counts as feplb_planner_bench.cpp): the
// two GLPK solves plus rounding alone (BM_MicroMoeSchedule) and the whole balancer plan()
// (BM_MicroMoePlan/EP/replicas per GPU), for EP=8 (one node) and EP=16 (two nodes), with the default
// 2 replicas per GPU and with 8.
// BM_MicroMoePlan/8/2 is the figure behind kMicroMoeDefaultPlannerTimeUs.
#include <benchmark/benchmark.h>

#include "tests/bench/glm5_like_counts.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sim/balancers/micromoe.hpp"
#include "sim/balancers/placement.hpp"

namespace {

using namespace epsim;

using bench::kExperts;
using bench::kGpusPerNode;
using bench::kTokensPerRank;
using bench::kTopK;
using bench::glm5_like_counts;
using bench::glm5_like_model;

/// max L / mean L over the GPUs.
double token_straggler_ratio(const std::vector<std::int64_t>& load) {
  std::int64_t total = 0;
  for (std::int64_t l : load) total += l;
  const std::int64_t max = *std::max_element(load.begin(), load.end());
  return total == 0 ? 1.0 : static_cast<double>(max) * static_cast<double>(load.size()) / static_cast<double>(total);
}

/// Per expert, its instances' GPUs (the home first, then the replicas by GPU), as MicroMoe::plan builds them.
std::vector<std::vector<int>> instance_gpus(int ranks, const MicroMoeParams& params) {
  std::vector<std::vector<int>> gpus_of(kExperts);
  for (int e = 0; e < kExperts; ++e) gpus_of[e] = {home_gpu(e, kExperts, ranks, Placement::contiguous)};
  const auto layout = micromoe_replica_layout(kExperts, ranks, params.redundant_per_gpu, Placement::contiguous);
  for (int g = 0; g < ranks; ++g)
    for (int e : layout[g]) gpus_of[e].push_back(g);
  return gpus_of;
}

void BM_MicroMoeSchedule(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const TraceRecord record = glm5_like_counts(ranks);
  const MicroMoeParams params;
  const auto gpus_of = instance_gpus(ranks, params);
  for (auto _ : state) {
    auto schedule = micromoe_schedule(record, ranks, kExperts, kGpusPerNode, gpus_of, params);
    benchmark::DoNotOptimize(schedule);
  }
}

void BM_MicroMoePlan(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const TraceRecord record = glm5_like_counts(ranks);
  const ModelSpec model = glm5_like_model();
  HardwareSpec hw;
  hw.gpus_per_node = kGpusPerNode;
  hw.nodes = ranks / kGpusPerNode;
  const BalancerContext context{ranks, kGpusPerNode, Placement::contiguous, &model, &hw};
  MicroMoeParams params;
  params.redundant_per_gpu = static_cast<int>(state.range(1));
  MicroMoe micromoe(params);
  for (auto _ : state) {
    Plan plan = micromoe.plan(record, context);
    benchmark::DoNotOptimize(plan);
  }
  // What the plan buys on these counts (outside the timed loop).
  std::vector<std::int64_t> static_load(ranks, 0);
  std::int64_t total = 0;
  for (int e = 0; e < kExperts; ++e)
    for (int s = 0; s < ranks; ++s) {
      static_load[home_gpu(e, kExperts, ranks, Placement::contiguous)] += record.count(s, e, kExperts);
      total += record.count(s, e, kExperts);
    }
  const double z = micromoe_schedule(record, ranks, kExperts, kGpusPerNode, instance_gpus(ranks, params), params).lp_max_load;
  state.counters["ratio_static"] = token_straggler_ratio(static_load);
  state.counters["ratio_lp"] = z * ranks / static_cast<double>(total);
  state.counters["ratio_micromoe"] = token_straggler_ratio(micromoe.plan(record, context).tokens_per_gpu());
}

BENCHMARK(BM_MicroMoeSchedule)->Arg(8)->Arg(16)->Repetitions(3)->ReportAggregatesOnly(true);
BENCHMARK(BM_MicroMoePlan)->Args({8, 2})->Args({16, 2})->Args({8, 8})->Args({16, 8})->Repetitions(3)->ReportAggregatesOnly(true);

}  // namespace
