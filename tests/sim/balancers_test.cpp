#include <doctest/doctest.h>

#include <algorithm>

#include "sim/balancers/ideal_balance.hpp"
#include "sim/balancers/placement.hpp"
#include "sim/balancers/static_ep.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

TraceRecord record_of(const std::vector<std::vector<std::uint32_t>>& rows) {
  TraceRecord r;
  for (const auto& row : rows) r.counts.insert(r.counts.end(), row.begin(), row.end());
  return r;
}

BalancerContext context_for(const ModelSpec& model, const HardwareSpec& hw, int gpus, Placement placement) {
  BalancerContext c;
  c.num_gpus = gpus;
  c.gpus_per_node = hw.gpus_per_node;
  c.placement = placement;
  c.model = &model;
  c.hardware = &hw;
  return c;
}

}  // namespace

TEST_CASE("contiguous and interleaved placement") {
  // 8 experts on 4 GPUs.
  CHECK(home_gpu(0, 8, 4, Placement::contiguous) == 0);
  CHECK(home_gpu(1, 8, 4, Placement::contiguous) == 0);
  CHECK(home_gpu(2, 8, 4, Placement::contiguous) == 1);
  CHECK(home_gpu(7, 8, 4, Placement::contiguous) == 3);
  CHECK(home_gpu(1, 8, 4, Placement::interleaved) == 1);
  CHECK(home_gpu(5, 8, 4, Placement::interleaved) == 1);
  CHECK(home_gpu(7, 8, 4, Placement::interleaved) == 3);
}

TEST_CASE("static EP sends every token to its expert's home GPU") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware();
  // 2 ranks x 4 experts; contiguous: experts 0,1 on GPU 0 and 2,3 on GPU 1.
  const TraceRecord rec = record_of({{5, 0, 3, 1}, {2, 7, 0, 4}});
  StaticEp balancer;
  const Plan plan = balancer.plan(rec, context_for(model, hw, 2, Placement::contiguous));
  validate_plan(plan, 4);
  REQUIRE(plan.instances.size() == 4);
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{5 + 2 + 7, 3 + 1 + 4});
  // Tokens that stay on their GPU use no carrier; the others use the EP backend.
  for (const TokenRoute& r : plan.routes) {
    const int dst = plan.instances[r.instance].gpu;
    CHECK((r.carrier == Carrier::none) == (r.src_rank == dst));
  }
  CHECK(plan.routes.size() == 6);  // zero counts make no route
  CHECK(plan.transfers.empty());
  CHECK(plan.gemm_order[0].size() == 1);
  CHECK(plan.gemm_order[0][0].instances == std::vector<int>{0, 1});

  const Plan inter = balancer.plan(rec, context_for(model, hw, 2, Placement::interleaved));
  // Interleaved: experts 0,2 on GPU 0 and 1,3 on GPU 1.
  CHECK(inter.tokens_per_gpu() == std::vector<std::int64_t>{5 + 2 + 3, 7 + 1 + 4});
}

TEST_CASE("ideal balance gives every GPU the mean load, to the token") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  // One hot expert (expert 0, home GPU 0) carries 90 of 101 tokens.
  const TraceRecord rec = record_of({{30, 1, 0, 0}, {30, 0, 2, 0}, {20, 0, 0, 3}, {10, 2, 0, 3}});
  IdealBalance oracle;
  const Plan plan = oracle.plan(rec, context_for(model, hw, 4, Placement::contiguous));
  validate_plan(plan, 4);
  const auto load = plan.tokens_per_gpu();
  // 101 tokens over 4 GPUs: 26, 25, 25, 25.
  CHECK(load == std::vector<std::int64_t>{26, 25, 25, 25});
  // Per expert, the pieces add up to the expert's load.
  std::vector<std::int64_t> per_expert(4, 0);
  const auto inst_tokens = plan.tokens_per_instance();
  for (std::size_t i = 0; i < plan.instances.size(); ++i) per_expert[plan.instances[i].expert] += inst_tokens[i];
  CHECK(per_expert == std::vector<std::int64_t>{90, 3, 2, 6});
  CHECK(plan.transfers.empty());  // at zero cost
  CHECK(plan.planner.duration_ps == 0);
}

TEST_CASE("ideal balance handles a micro-batch without tokens") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(1, 2);
  const TraceRecord rec = record_of({{0, 0, 0, 0}, {0, 0, 0, 0}});
  IdealBalance oracle;
  const Plan plan = oracle.plan(rec, context_for(model, hw, 2, Placement::contiguous));
  validate_plan(plan, 4);
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{0, 0});
  CHECK(plan.routes.empty());
}
