// FEPLB's claim checked on the timeline, not assumed: the Copy Engine moves dynamic experts' weights
// and tokens while the static-expert GEMMs run.
#include <doctest/doctest.h>

#include "sim/balancers/feplb.hpp"
#include "sim/config/loaders.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/test_paths.hpp"

using namespace epsim;

TEST_CASE("FEPLB on one H100 node: Copy Engine copies overlap the static GEMMs of the same GPU") {
  const HardwareSpec hw = load_hardware((test::source_dir() / "models/h100-sxm-8.yaml").string());
  const ModelSpec model = load_model((test::source_dir() / "models/glm5-like-128.yaml").string());
  const int n = 8, experts = model.num_experts;
  // Every rank sends 32 tokens to each expert, and 2,000 more to expert 0 (home GPU 0): GPU 0 is hot.
  TraceRecord rec;
  rec.counts.assign(static_cast<std::size_t>(n) * experts, 32);
  for (int s = 0; s < n; ++s) rec.counts[static_cast<std::size_t>(s) * experts] += 2000;
  BalancerContext c;
  c.num_gpus = n;
  c.gpus_per_node = hw.gpus_per_node;
  c.model = &model;
  c.hardware = &hw;
  Feplb feplb{FeplbParams{}};
  const Plan plan = feplb.plan(rec, c);
  validate_plan(plan, experts, hw.gpus_per_node);
  REQUIRE_FALSE(plan.transfers.empty());

  const std::vector<std::int64_t> local(n, 32 * experts / model.top_k + 2000 / model.top_k);
  const LayerResult r = simulate_layer(hw, model, plan, local, false);
  // GPU 0 sends the weights of a dynamic expert to a helper while it computes its static experts
  // (expert 0, too heavy to move whole, stays; its lighter dynamic expert 1 moves).
  bool overlap = false;
  for (const TimelineEvent& copy : r.timeline.events) {
    if (copy.gpu != 0 || copy.track != Track::copy_engine || copy.name.rfind("weights", 0) != 0) continue;
    for (const TimelineEvent& gemm : r.timeline.events)
      if (gemm.gpu == 0 && gemm.track == Track::compute && gemm.name == "gemm fwd" &&
          gemm.start_ps < copy.end_ps && copy.start_ps < gemm.end_ps)
        overlap = true;
  }
  CHECK(overlap);
  // And the planner ran on the host after the dispatch, not before it.
  Time_ps dispatch_end = 0, planner_start = -1;
  for (const TimelineEvent& e : r.timeline.events) {
    if (e.track == Track::comm_kernel && e.name == "dispatch") dispatch_end = std::max(dispatch_end, e.end_ps);
    if (e.track == Track::host_cpu && e.name == "planner") planner_start = e.start_ps;
  }
  CHECK(planner_start >= dispatch_end);
}
