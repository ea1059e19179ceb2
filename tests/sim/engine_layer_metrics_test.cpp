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

/// What compute_layer_metrics reads of a simulated layer.
MetricsInput metrics_input(const TraceRecord& record, int experts, int gpus_per_node, const std::vector<int>& home,
                           const Plan& plan, const LayerResult& result, const LayerBound& bound) {
  MetricsInput in;
  in.record = &record;
  in.num_experts = experts;
  in.gpus_per_node = gpus_per_node;
  in.home_gpu = &home;
  in.plan = &plan;
  in.result = &result;
  in.bound = &bound;
  return in;
}

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

  MetricsInput input() const { return metrics_input(record, 2, 2, home, plan, result, bound); }
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

TEST_CASE("a layer's token shares, busy fractions and lower bounds, worked by hand") {
  // The two-GPU layer: GPU 0 holds 100 tokens, GPU 1 150 (mean 125). Its forward ends at 303 us
  // (tests/sim/phase_kernels_test.cpp): GEMMs of 200 and 300 us, and 5e4 bytes (50 tokens of 1,000
  // bytes) out of each GPU's NVLink port at 100 GB/s, GPU 0's dispatch and GPU 1's combine.
  const TwoGpuLayer layer;
  const LayerMetrics m = compute_layer_metrics(layer.input());
  REQUIRE(m.layer_time_us == doctest::Approx(303));
  CHECK(m.token_straggler_ratio == doctest::Approx(1.2));
  CHECK(m.token_idle_fraction == doctest::Approx(1.0 - 125.0 / 150.0));
  CHECK(m.token_straggler_gpu == 1);
  CHECK(m.compute_util_max == doctest::Approx(300.0 / 303.0));
  CHECK(m.compute_util_mean == doctest::Approx(250.0 / 303.0));
  CHECK(m.nvlink_out_util_max == doctest::Approx(5e4 / (0.1 * 303e6)));  // 0.1 byte per ps x 303 us
  CHECK(m.nvlink_out_util_mean == doctest::Approx(5e4 / (0.1 * 303e6)));
  CHECK(m.nic_out_util_max == 0);
  CHECK(m.copy_engine_util_max == 0);
  // One node: the NVLink domain's floor is the mean itself; the largest expert (150) over the mean.
  CHECK(m.bound_nvlink_domain == doctest::Approx(1.0));
  CHECK(m.bound_unsplit_expert == doctest::Approx(1.2));

  // Three GPUs on nodes of two, the last node one GPU: experts 0, 1, 2 on GPUs 0, 1, 2 with 30, 30
  // and 60 tokens (mean 40). Node 0 holds 60 tokens over 2 GPUs (30 each), node 1 60 over its one
  // GPU: the floor is 60 / 40 = 1.5; the largest expert too is 1.5 times the mean.
  const HardwareSpec hw = test::simple_hardware(2, 2);
  const ModelSpec model = test::simple_model(3);
  const TraceRecord record = test::record_of({{10, 10, 20}, {10, 10, 20}, {10, 10, 20}});
  BalancerContext context = test::context_for(model, hw);
  context.num_gpus = 3;
  const Plan plan = StaticEp().plan(record, context);
  const LayerResult result = simulate_layer(hw, model, plan, {40, 40, 40}, false);
  const std::vector<int> home = {0, 1, 2};
  const LayerBound bound = oracle_bound(record, hw, model, 3, {40, 40, 40}, 1, false);
  const LayerMetrics three = compute_layer_metrics(metrics_input(record, 3, 2, home, plan, result, bound));
  CHECK(three.token_straggler_ratio == doctest::Approx(1.5));
  CHECK(three.token_idle_fraction == doctest::Approx(1.0 - 40.0 / 60.0));
  CHECK(three.token_straggler_gpu == 2);
  CHECK(three.bound_nvlink_domain == doctest::Approx(1.5));
  CHECK(three.bound_unsplit_expert == doctest::Approx(1.5));
}
