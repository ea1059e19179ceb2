// The oracle's terms that the round-number cases of oracle_bound_test.cpp leave open, each worked
// out by hand: the HBM slots after the shared experts, the GEMM floor at the curve's best point and
// at the HBM rate, counts of one kept in place, which term and which GPU are named on a tie, each
// phase's tokens in its own format, and the bound rounded down (a bound rounded up is not one).
#include <doctest/doctest.h>

#include <string>

#include "sim/balancers/oracle.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;
using test::record_of;

TEST_CASE("the oracle's HBM slots: a layer's share of HBM less its shared experts in whole experts") {
  HardwareSpec hw = test::simple_hardware(1, 2);
  hw.gpu.hbm_capacity_GB = 0.0035;                 // 3.5 MB
  ModelSpec model = test::simple_model(4, 1, 1);   // 1 MB an expert; one 1 MB shared expert
  CHECK(hbm_expert_slots(hw, model) == 2);          // (3.5 - 1) MB / 1 MB, rounded down
  model.moe_layers = 2;                             // 1.75 MB a layer: 0.75 MB after the shared expert
  CHECK(hbm_expert_slots(hw, model) == 0);
  model.moe_layers = 1;
  hw.gpu.hbm_capacity_GB = 0.0005;                  // the shared expert alone does not fit
  CHECK(hbm_expert_slots(hw, model) == 0);
  hw.gpu.hbm_capacity_GB = 80;                      // every expert fits: at most the model's 4
  CHECK(hbm_expert_slots(hw, model) == 4);
  model.expert_ffn_size = 0;                        // experts without weights all fit
  hw.gpu.hbm_capacity_GB = 0.0035;
  CHECK(hbm_expert_slots(hw, model) == 4);
}

TEST_CASE("the oracle's GEMM floor: the efficiency curve's best point and the HBM rate for weights and rows") {
  HardwareSpec hw = test::simple_hardware(1, 2);
  // The best efficiency is in the middle of the curve, not at either end.
  hw.gemm.efficiency = {{1, 0.5}, {64, 0.8}, {4096, 0.6}};
  const ModelSpec model = test::simple_model(2, 1);
  const TraceRecord rec = record_of({{6, 2}, {4, 0}});
  // 12 rows x 2e6 FLOPs at 0.8 FLOP/ps, over 2 GPUs.
  const LayerBound b = oracle_bound(rec, hw, model, 2, {8, 4}, 1, false);
  CHECK(b.forward.compute_ps == doctest::Approx(15e6));
  // At 0.1 GB/s of HBM the floor is the bytes: both experts' weights (2 x 1 MB) and each row's hidden
  // state read and written and its 500-wide intermediate written and read (12 x (2,000 + 1,000)
  // bytes): 2,036,000 bytes at 1e-4 bytes/ps, over 2 GPUs.
  hw.gpu.hbm_GBps = 0.1;
  const LayerBound slow = oracle_bound(rec, hw, model, 2, {8, 4}, 1, false);
  CHECK(slow.forward.compute_ps == doctest::Approx(2'036'000 / 1e-4 / 2));
}

TEST_CASE("the oracle's traffic term keeps counts of one like any other") {
  HardwareSpec hw = test::simple_hardware(1, 2);
  hw.gpu.hbm_capacity_GB = 0.0025;                 // two 1 MB experts a GPU
  const ModelSpec model = test::simple_model(4, 1);
  // Rank 0 sends one token to each of two experts: both stay, nothing leaves. Rank 1 has three
  // counts of one: one leaves, 1,000 bytes at 0.1 byte/ps.
  const LayerBound b = oracle_bound(record_of({{1, 1, 0, 0}, {0, 1, 1, 1}}), hw, model, 2, {2, 3}, 1, false);
  CHECK(b.slots == 2);
  CHECK(b.forward.egress_ps == doctest::Approx(10'000));
  CHECK(b.forward.egress_gpu == 1);
}

TEST_CASE("the oracle names compute on a tie with traffic and egress on a tie with ingress") {
  PassBound p;
  p.compute_ps = 5;
  p.egress_ps = 5;
  p.ingress_ps = 5;
  CHECK(std::string(p.binding()) == "compute");
  p.compute_ps = 4;
  CHECK(std::string(p.binding()) == "egress");
  p.ingress_ps = 6;
  CHECK(std::string(p.binding()) == "ingress");
}

TEST_CASE("the oracle's layer bound is rounded down to the picosecond") {
  // Rounded up, a bound of 100.75 ps would claim 101 ps where 100.75 can be reached.
  LayerBound b;
  b.forward.compute_ps = 100.75;
  CHECK(b.layer_ps() == 100);
  b.backward.egress_ps = 0.5;
  CHECK(b.layer_ps() == 101);  // 101.25
}

TEST_CASE("the oracle's traffic term moves each phase's tokens in that phase's format") {
  HardwareSpec hw = test::simple_hardware(1, 2);
  hw.gpu.hbm_capacity_GB = 0.0015;  // one 1 MB expert a GPU
  ModelSpec model = test::simple_model(2, 1);
  model.precision.set = true;
  model.precision.dispatch = Dtype::fp8;       // 1,000 bytes + 8 FP32 scales = 1,032 bytes a token
  model.precision.combine = Dtype::bf16;       // 2,000
  model.precision.grad_dispatch = Dtype::fp32; // 4,000
  model.precision.grad_combine = Dtype::bf16;  // 2,000
  // Rank 0 keeps its 6 tokens for expert 0; 2 leave (out) and their results come back (in), at 0.1 byte/ps.
  const LayerBound b = oracle_bound(record_of({{6, 2}, {4, 0}}), hw, model, 2, {8, 4}, 1, true);
  CHECK(b.forward.egress_ps == doctest::Approx(2 * 1032 / 0.1));
  CHECK(b.forward.ingress_ps == doctest::Approx(2 * 2000 / 0.1));
  CHECK(b.backward.egress_ps == doctest::Approx(2 * 4000 / 0.1));
  CHECK(b.backward.ingress_ps == doctest::Approx(2 * 2000 / 0.1));
}

TEST_CASE("the oracle names the lowest GPU among those whose traffic ties") {
  HardwareSpec hw = test::simple_hardware(1, 2);
  hw.gpu.hbm_capacity_GB = 0.0015;
  const ModelSpec model = test::simple_model(2, 1);
  // Each rank keeps 3 tokens and sends 1: the same traffic out of and into both.
  const LayerBound b = oracle_bound(record_of({{3, 1}, {1, 3}}), hw, model, 2, {4, 4}, 1, false);
  CHECK(b.forward.egress_ps == doctest::Approx(10'000));
  CHECK(b.forward.egress_gpu == 0);
  CHECK(b.forward.ingress_gpu == 0);
}
