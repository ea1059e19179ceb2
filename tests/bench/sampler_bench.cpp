// The synthetic generator's top-k draw (traces/synth/topk_sampler.hpp): one token's k = 8 distinct
// experts per iteration, over E experts of log-normal popularity (sigma 0.6, as the wide sweeps
// draw them) or near-uniform popularity. A wide sweep draws tens of millions of them per point.
//   build/tests/epsim_bench --benchmark_filter=BM_TopkSample
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "traces/synth/popularity.hpp"
#include "traces/synth/rng.hpp"
#include "traces/synth/topk_sampler.hpp"

namespace {

using namespace epsim;

void BM_TopkSample(benchmark::State& state) {
  const auto experts = static_cast<std::size_t>(state.range(0));
  const double sigma = state.range(1) == 1 ? 0.6 : 0.0;
  Xoshiro256ss popularity(5);
  std::vector<double> logs(experts);
  for (double& v : logs) v = sigma * popularity.normal();
  TopkSampler sampler;
  sampler.reset(weights_from_logs(logs), 8);
  Xoshiro256ss rng(7);
  std::uint16_t out[8];
  for (auto _ : state) {
    sampler.sample(rng, out);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * 8);
}

}  // namespace

BENCHMARK(BM_TopkSample)->ArgNames({"experts", "lognormal"})->ArgsProduct({{256, 1024, 2048}, {0, 1}});
