// FEPLB's planner cost on the GLM-5-like case (128 experts, top-8, 4096 tokens per rank, skewed like
// a log-normal expert popularity): the scheduler alone on one node, what one node's host does after
// the counts arrive (reduce the count matrix to its experts' loads, then schedule), and the whole
// balancer plan() for EP=8 (one node) and EP=16 (two nodes). BM_FeplbNodePlanner/8 is the figure
// behind kFeplbDefaultPlannerTimeUs. Counts come from a fixed-seed generator, so runs compare.
#include <benchmark/benchmark.h>

#include "tests/bench/glm5_like_counts.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sim/balancers/feplb.hpp"
#include "sim/balancers/placement.hpp"

namespace {

using namespace epsim;

using bench::kExperts;
using bench::kGpusPerNode;
using bench::kTokensPerRank;
using bench::kTopK;
using bench::glm5_like_counts;
using bench::glm5_like_model;

/// Node 0's home experts and their loads, as its host would hand them to the scheduler.
std::vector<std::vector<HomeExpert>> node0_home_experts(const TraceRecord& record, int ranks) {
  std::vector<std::vector<HomeExpert>> home(kGpusPerNode);
  for (int e = 0; e < kExperts; ++e) {
    const int g = home_gpu(e, kExperts, ranks, Placement::contiguous);
    if (g >= kGpusPerNode) continue;
    std::int64_t load = 0;
    for (int s = 0; s < ranks; ++s) load += record.count(s, e, kExperts);
    home[g].push_back({e, load});
  }
  return home;
}

/// max L / mean L over the GPUs.
double token_straggler_ratio(const std::vector<std::int64_t>& load) {
  std::int64_t total = 0;
  for (std::int64_t l : load) total += l;
  const std::int64_t max = *std::max_element(load.begin(), load.end());
  return total == 0 ? 1.0 : static_cast<double>(max) * static_cast<double>(load.size()) / static_cast<double>(total);
}

void BM_FeplbNodeScheduler(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const auto home = node0_home_experts(glm5_like_counts(ranks), ranks);
  const FeplbScheduler scheduler(FeplbSchedulerParams{});
  std::size_t moves = 0;
  for (auto _ : state) {
    auto result = scheduler.schedule(home);
    moves = result.size();
    benchmark::DoNotOptimize(result);
  }
  state.counters["moves"] = static_cast<double>(moves);
}

void BM_FeplbNodePlanner(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const TraceRecord record = glm5_like_counts(ranks);
  const FeplbScheduler scheduler(FeplbSchedulerParams{});
  for (auto _ : state) {
    benchmark::DoNotOptimize(record.counts.data());
    auto result = scheduler.schedule(node0_home_experts(record, ranks));
    benchmark::DoNotOptimize(result);
  }
}

void BM_FeplbPlan(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const TraceRecord record = glm5_like_counts(ranks);
  const ModelSpec model = glm5_like_model();
  HardwareSpec hw;
  hw.gpus_per_node = kGpusPerNode;
  hw.nodes = ranks / kGpusPerNode;
  const BalancerContext context{ranks, kGpusPerNode, Placement::contiguous, &model, &hw};
  Feplb feplb(FeplbParams{});
  std::size_t instances = 0;
  for (auto _ : state) {
    Plan plan = feplb.plan(record, context);
    instances = plan.instances.size();
    benchmark::DoNotOptimize(plan);
  }
  // What the plan buys on these counts (outside the timed loop): the token straggler ratio under
  // static EP (every expert's load on its home GPU) and after FEPLB.
  std::vector<std::int64_t> static_load(ranks, 0);
  for (int e = 0; e < kExperts; ++e)
    for (int s = 0; s < ranks; ++s)
      static_load[home_gpu(e, kExperts, ranks, Placement::contiguous)] += record.count(s, e, kExperts);
  state.counters["dynamic_instances"] = static_cast<double>(instances - kExperts);
  state.counters["ratio_static"] = token_straggler_ratio(static_load);
  // The NVLink-domain floor: a node-confined balancer can at best give each GPU its node's mean.
  std::vector<std::int64_t> floor_load(static_load);
  for (int first = 0; first < ranks; first += kGpusPerNode) {
    std::int64_t node_total = 0;
    for (int g = first; g < first + kGpusPerNode; ++g) node_total += static_load[g];
    for (int g = first; g < first + kGpusPerNode; ++g) floor_load[g] = (node_total + kGpusPerNode - 1) / kGpusPerNode;
  }
  state.counters["ratio_node_floor"] = token_straggler_ratio(floor_load);
  state.counters["ratio_feplb"] = token_straggler_ratio(feplb.plan(record, context).tokens_per_gpu());
}

BENCHMARK(BM_FeplbNodeScheduler)->Arg(8)->Arg(16)->Repetitions(3)->ReportAggregatesOnly(true);
BENCHMARK(BM_FeplbNodePlanner)->Arg(8)->Arg(16)->Repetitions(3)->ReportAggregatesOnly(true);
BENCHMARK(BM_FeplbPlan)->Arg(8)->Arg(16)->Repetitions(3)->ReportAggregatesOnly(true);

}  // namespace
