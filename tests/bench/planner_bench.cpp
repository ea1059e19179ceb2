// Every history- or count-driven planner's plan() at EP 8, 16, 32 and 64 on the GLM-5-like counts
// (128 experts, top-8, 4,096 tokens per rank; tests/bench/glm5_like_counts.hpp) with each balancer's
// default parameters and H100-like hardware figures (8 GPUs per node). Balancers that plan from
// history (LAER-MoE, DeepSeek EPLB) are fed the record first so that every timed call re-plans.
// BM_PlannerLaerLayout times LAER-MoE's layout search alone; BM_PlannerLaerPaperCase is the setting
// of LAER-MoE's planner figure (scripts_ae/planner.py: 32 experts, C_e = 1, counts uniform in
// [0, 1000), 64 devices: 0.49 ms in the paper's artifact). BM_PlannerMicroMoeSolve is MicroMoE's
// schedule alone, flow solver (0) against the GLPK LP (1).
// BM_PlannerFasterMoe reads the H100 preset's GEMM curve, which its shadowing policy prices.
// Each planner's row shows the mean time of a call and, as the counter min_us, the fewest.
//   build/tests/epsim_bench --benchmark_filter=BM_Planner --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include "tests/bench/glm5_like_counts.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/balancers/cannot_serve.hpp"
#include "sim/balancers/deepseek_eplb.hpp"
#include "sim/balancers/fastermoe.hpp"
#include "sim/balancers/feplb.hpp"
#include "sim/balancers/laer_moe.hpp"
#include "sim/balancers/micromoe.hpp"
#include "sim/balancers/placement.hpp"
#include "sim/balancers/ultraep.hpp"
#include "sim/config/loaders.hpp"

namespace {

using namespace epsim;

using bench::kExperts;
using bench::kGpusPerNode;
using bench::glm5_like_counts;
using bench::glm5_like_model;

/// H100 SXM figures the planners read (peak, NVLink port and NIC bandwidth, HBM).
HardwareSpec h100_like(int ranks) {
  HardwareSpec hw;
  hw.name = "h100-like";
  hw.gpus_per_node = kGpusPerNode;
  hw.nodes = (ranks + kGpusPerNode - 1) / kGpusPerNode;
  hw.gpu = {132, 989.0, 1979.0, 3350.0, 80.0};
  hw.nvlink = {450, 1};
  hw.infiniband = {50, 3};
  return hw;
}

/// Times `balancer.plan()` on the GLM-5-like record, after `warm_calls` untimed calls. Besides the
/// mean, the counter min_us is the fewest microseconds one call took (the plan's destruction
/// included, as in the mean): on a machine shared with other work the mean moves with the load, the
/// fewest much less, so it is the figure to compare between builds.
template <typename B>
void time_plan(benchmark::State& state, B& balancer, int warm_calls, const HardwareSpec* hardware = nullptr) {
  const int ranks = static_cast<int>(state.range(0));
  const TraceRecord record = glm5_like_counts(ranks);
  const ModelSpec model = glm5_like_model();
  const HardwareSpec hw = hardware != nullptr ? *hardware : h100_like(ranks);
  const BalancerContext context{ranks, kGpusPerNode, Placement::contiguous, &model, &hw};
  try {
    for (int k = 0; k < warm_calls; ++k) benchmark::DoNotOptimize(balancer.plan(record, context));
    std::size_t instances = 0;
    auto fewest = std::chrono::steady_clock::duration::max();
    for (auto _ : state) {
      const auto start = std::chrono::steady_clock::now();
      {
        Plan plan = balancer.plan(record, context);
        instances = plan.instances.size();
        benchmark::DoNotOptimize(plan);
      }
      fewest = std::min(fewest, std::chrono::steady_clock::now() - start);
    }
    state.counters["instances"] = static_cast<double>(instances);
    state.counters["min_us"] = std::chrono::duration<double, std::micro>(fewest).count();
  } catch (const CannotServe& e) {
    state.SkipWithError(e.what());
  }
}

void BM_PlannerLaerMoe(benchmark::State& state) {
  LaerMoe laer(LaerMoeParams{});  // period 1: every call after the first re-plans
  time_plan(state, laer, 1);
}

void BM_PlannerMicroMoe(benchmark::State& state) {
  MicroMoe micromoe(MicroMoeParams{});
  time_plan(state, micromoe, 0);
}

void BM_PlannerUltraEp(benchmark::State& state) {
  UltraEp ultraep(UltraEpParams{});
  time_plan(state, ultraep, 0);
}

void BM_PlannerDeepseekEplb(benchmark::State& state) {
  DeepseekEplbParams params;
  // Re-plan on every call, as the timed figure should: the records schedule counts calls, not the
  // record's trace step (which is the same on every call here).
  params.schedule = EplbSchedule::records;
  params.period = 1;
  params.window = 1;
  DeepseekEplb eplb(params);
  time_plan(state, eplb, 1);
}

void BM_PlannerFeplb(benchmark::State& state) {
  Feplb feplb(FeplbParams{});
  time_plan(state, feplb, 0);
}

void BM_PlannerFasterMoe(benchmark::State& state) {
  // Its shadowing policy prices each expert's GEMM, so it reads the H100 preset's GEMM curve.
  HardwareSpec hw = load_hardware(std::string(EPSIM_SOURCE_DIR) + "/models/h100-sxm-8.yaml");
  hw.nodes = (static_cast<int>(state.range(0)) + hw.gpus_per_node - 1) / hw.gpus_per_node;
  FasterMoe fastermoe(FasterMoeOptions{});  // the paper's shadowing policy, groups of 4
  time_plan(state, fastermoe, 0, &hw);
}

/// LAER-MoE's layout search alone on the counts summed over its window (5 copies of the record).
void BM_PlannerLaerLayout(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const TraceRecord record = glm5_like_counts(ranks);
  const ModelSpec model = glm5_like_model();
  std::vector<std::vector<double>> tokens(ranks, std::vector<double>(kExperts));
  for (int s = 0; s < ranks; ++s)
    for (int e = 0; e < kExperts; ++e) tokens[s][e] = 5.0 * record.count(s, e, kExperts);
  LaerCostModel cost;
  cost.token_bytes = static_cast<double>(model.token_bytes());
  cost.comp_s_per_token = model.expert_flops_per_token() / 989e12;
  const int capacity = laer_default_capacity(kExperts, ranks);
  for (auto _ : state) benchmark::DoNotOptimize(laer_plan_layout(tokens, capacity, kGpusPerNode, cost));
}

/// The paper artifact's planner benchmark: 32 experts, capacity 1, counts uniform in [0, 1000),
/// hidden 4096 (M_token = 8192 bytes, as planner.py passes), v_comp 0.
void BM_PlannerLaerPaperCase(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  constexpr int kPaperExperts = 32;
  std::uint64_t lcg = 20260211;  // a 64-bit LCG: the same counts with every standard library
  std::vector<std::vector<double>> tokens(devices, std::vector<double>(kPaperExperts));
  for (auto& row : tokens)
    for (double& t : row) {
      lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
      t = static_cast<double>((lcg >> 33) % 1000);
    }
  LaerCostModel cost;
  cost.token_bytes = 8192;
  for (auto _ : state) benchmark::DoNotOptimize(laer_plan_layout(tokens, 1, kGpusPerNode, cost));
}

void BM_PlannerMicroMoeSolve(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const TraceRecord record = glm5_like_counts(ranks);
  MicroMoeParams params;
  params.solver = state.range(1) == 0 ? MicroMoeSolver::flow : MicroMoeSolver::lp;
  std::vector<std::vector<int>> gpus_of(kExperts);
  for (int e = 0; e < kExperts; ++e) gpus_of[e] = {home_gpu(e, kExperts, ranks, Placement::contiguous)};
  const auto layout = micromoe_replica_layout(kExperts, ranks, micromoe_redundant_per_gpu(params, kExperts, ranks),
                                              Placement::contiguous);
  for (int g = 0; g < ranks; ++g)
    for (int e : layout[g]) gpus_of[e].push_back(g);
  double z = 0;
  for (auto _ : state) {
    MicroMoeSchedule schedule = micromoe_schedule(record, ranks, kExperts, kGpusPerNode, gpus_of, params);
    z = schedule.lp_max_load;
    benchmark::DoNotOptimize(schedule);
  }
  state.counters["max_load"] = z;
}

#define EPSIM_EP_DEGREES ->Arg(8)->Arg(16)->Arg(32)->Arg(64)
BENCHMARK(BM_PlannerLaerMoe) EPSIM_EP_DEGREES;
BENCHMARK(BM_PlannerLaerLayout) EPSIM_EP_DEGREES;
BENCHMARK(BM_PlannerLaerPaperCase)->Arg(64);
BENCHMARK(BM_PlannerMicroMoe) EPSIM_EP_DEGREES;
BENCHMARK(BM_PlannerMicroMoeSolve)->ArgsProduct({{8, 16, 32, 64}, {0, 1}});
BENCHMARK(BM_PlannerUltraEp) EPSIM_EP_DEGREES;
BENCHMARK(BM_PlannerDeepseekEplb) EPSIM_EP_DEGREES;
BENCHMARK(BM_PlannerFeplb) EPSIM_EP_DEGREES;
BENCHMARK(BM_PlannerFasterMoe) EPSIM_EP_DEGREES;
#undef EPSIM_EP_DEGREES

}  // namespace
