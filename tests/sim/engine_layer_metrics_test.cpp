// A layer's metrics from a simulated layer worked by hand (tests/sim/layer_run_test.cpp's two-GPU
// layer on the round-number cluster): the GEMM straggler as a ratio and as an absolute time.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/balancers/static_ep.hpp"
#include "sim/replay/layer_metrics.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "sim/report/layer_metrics.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

// Rank 0 routes 100 tokens to expert 0 (GPU 0) and 50 to expert 1 (GPU 1); rank 1 routes 100 to
// expert 1. GEMM times at 2 us per token: GPU 0 200 us, GPU 1 300 us. The layer simulated, and what
// its metrics read.
struct TwoGpuLayer {
  HardwareSpec hw = test::simple_hardware();
  ModelSpec model = test::simple_model();
  TraceRecord record = test::record_of({{100, 50}, {0, 100}});
  Plan plan = StaticEp().plan(record, test::context_for(model, hw));
  LayerResult result = simulate_layer(hw, model, plan, {150, 100}, false);
  std::vector<int> home = {0, 1};
  LayerBound bound = oracle_bound(record, hw, model, 2, {150, 100}, 1, false);

  MetricsInput input() const {
    MetricsInput in;
    in.record = &record;
    in.num_experts = 2;
    in.gpus_per_node = 2;
    in.home_gpu = &home;
    in.plan = &plan;
    in.result = &result;
    in.bound = &bound;
    return in;
  }
};

}  // namespace

TEST_CASE("the GEMM straggler in microseconds is the slowest GPU's GEMM time minus the mean") {
  const TwoGpuLayer layer;
  const LayerMetrics m = compute_layer_metrics(layer.input());
  // max 300 us, mean 250 us: 50 us absolute, 1.2 as a ratio.
  CHECK(m.gemm_max_us == doctest::Approx(300));
  CHECK(m.gemm_mean_us == doctest::Approx(250));
  CHECK(m.gemm_straggler_us == doctest::Approx(50));
  CHECK(m.gemm_straggler_ratio == doctest::Approx(1.2));
  // metrics.csv carries it beside the ratio.
  const std::vector<std::string>& names = layer_metric_names();
  const auto at = std::find(names.begin(), names.end(), "gemm_straggler_us");
  REQUIRE(at != names.end());
  CHECK(*(at - 1) == "gemm_straggler_ratio");
  CHECK(layer_metric_values(m)[static_cast<std::size_t>(at - names.begin())] == "50");
  // The oracle: 250 rows at 2 us over 2 GPUs, every expert fits everywhere: 250 us, set by compute;
  // the layer is above it by its imbalance and its exchange.
  CHECK(m.bound_layer_time_us == doctest::Approx(250));
  CHECK(std::string(m.bound_term) == "compute");
  CHECK(m.gap_to_bound_us == doctest::Approx(m.layer_time_us - 250));
  CHECK(m.gap_to_bound_us > 50);
  // Its critical path ends on GPU 1, whose 300 us GEMM holds it longest.
  CHECK(std::string(m.crit_bound) == "SM");
  CHECK(m.crit_sm_share >= 300 / m.layer_time_us - 1e-9);
  CHECK(m.crit_sm_share + m.crit_copy_engine_share + m.crit_nvlink_share + m.crit_nic_share + m.crit_host_share +
            m.crit_wait_share ==
        doctest::Approx(1));
}

TEST_CASE("the last GPU's lead is its forward GEMM finish minus the next latest GPU's, 0 on a tie") {
  TwoGpuLayer layer;
  const MetricsInput in = layer.input();
  LayerResult& result = layer.result;
  // The two GPUs of the layer above: GPU 1's 300 us of GEMMs end after GPU 0's 200 us.
  const LayerMetrics simulated = compute_layer_metrics(in);
  CHECK(simulated.last_gpu == 1);
  CHECK(simulated.last_gpu_lead_us ==
        doctest::Approx(ps_to_us(result.gemm_finish_fwd_ps[1] - result.gemm_finish_fwd_ps[0])));
  CHECK(simulated.last_gpu_lead_us >= 100 - 1e-6);  // at least the 100 us more of GEMMs
  // Finishes set by hand (the metric reads them alone): the latest, 900 us on GPU 3, leads the next,
  // 880 us on GPU 1, by 20 us, whatever the order they come in.
  for (const std::vector<double>& finish_us : {std::vector<double>{500, 880, 700, 900},
                                               std::vector<double>{900, 880, 700, 500},
                                               std::vector<double>{880, 900, 500, 700}}) {
    result.gemm_finish_fwd_ps.clear();
    for (const double us : finish_us) result.gemm_finish_fwd_ps.push_back(static_cast<Time_ps>(us * kPsPerUs));
    const LayerMetrics m = compute_layer_metrics(in);
    CHECK(m.last_gpu_lead_us == doctest::Approx(20));
  }
  // Two GPUs ending together: the lowest-numbered is named, with no lead.
  result.gemm_finish_fwd_ps = {100 * kPsPerUs, 900 * kPsPerUs, 900 * kPsPerUs};
  const LayerMetrics tie = compute_layer_metrics(in);
  CHECK(tie.last_gpu == 1);
  CHECK(tie.last_gpu_lead_us == 0);
  result.gemm_finish_fwd_ps = {900 * kPsPerUs};
  CHECK(compute_layer_metrics(in).last_gpu_lead_us == 0);
  // metrics.csv carries it as its last column.
  const std::vector<std::string>& names = layer_metric_names();
  CHECK(names.back() == "last_gpu_lead_us");
  result.gemm_finish_fwd_ps = {500 * kPsPerUs, 880 * kPsPerUs};
  CHECK(layer_metric_values(compute_layer_metrics(in)).back() == "380");
}
