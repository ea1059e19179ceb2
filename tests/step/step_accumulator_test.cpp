// A step from hand-made layer results: the MoE layers' mean scaled to the model's MoE layers, the
// dense layers and the floor from the oracle's bound, without and with two-micro-batch overlap.
#include <doctest/doctest.h>

#include "sim/step/step_accumulator.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

TimelineEvent event(int gpu, Track track, Pass pass, double start_us, double end_us) {
  TimelineEvent e;
  e.gpu = gpu;
  e.track = track;
  e.pass = pass;
  e.start_ps = static_cast<Time_ps>(start_us * kPsPerUs);
  e.end_ps = static_cast<Time_ps>(end_us * kPsPerUs);
  return e;
}

/// Two GPUs; per GPU and pass: compute from the pass start to `split`, data moving from there to the
/// pass's end (forward runs from 0 to `fwd_end_us`, backward from there to 3 * fwd_end_us).
LayerResult layer(double fwd_us, double bwd_us, double fwd_end_us, const double fwd_split[2],
                  const double bwd_split[2]) {
  LayerResult r;
  r.forward_ps = static_cast<Time_ps>(fwd_us * kPsPerUs);
  r.backward_ps = static_cast<Time_ps>(bwd_us * kPsPerUs);
  for (int g = 0; g < 2; ++g) {
    r.timeline.events.push_back(event(g, Track::compute, Pass::forward, 0, fwd_split[g]));
    r.timeline.events.push_back(event(g, Track::nic_out, Pass::forward, fwd_split[g], fwd_end_us));
    r.timeline.events.push_back(event(g, Track::compute, Pass::backward, fwd_end_us, bwd_split[g]));
    r.timeline.events.push_back(event(g, Track::nic_out, Pass::backward, bwd_split[g], 3 * fwd_end_us));
  }
  return r;
}

/// 5 layers, the first dense: 4 MoE layers. With 100 tokens per rank on a 1 TFLOP/s GPU at full
/// efficiency: projections 2 * 1e6 * 100 FLOP = 200 us, router 2 * 1000 * 2 * 100 FLOP = 0.4 us,
/// scores and norms nothing to speak of: N = 200.4 us forward, 400.8 backward. The dense layer:
/// 200 us of projections and 2 * 2 * 1000 * 500 * 100 FLOP = 200 us of FFN: 400 forward, 1200 in all.
ExperimentSpec experiment(StepOverlap overlap) {
  ExperimentSpec x;
  x.hardware = test::simple_hardware();
  x.hardware.gpu.hbm_GBps = 1e6;
  x.model = test::simple_model();
  NonMoeSpec& n = x.model.non_moe;
  n.layers = 5;
  n.dense_layers = 1;
  n.dense_ffn_size = 500;
  n.attention_params = 1'000'000;
  n.attention_gemm_calls = 1;
  n.elementwise_bytes_per_token = 1e-9;
  x.ep_degree = 2;
  x.step = StepSpec{StepMode::training, 1, overlap};
  return x;
}

const double kFwdSplit[2] = {600, 300};
const double kBwdSplit[2] = {2200, 1600};
/// An oracle bound: forward compute term 450 us, egress 800 us; backward compute 1500 us, ingress 1600.
LayerBound bound(double fwd_compute_us = 450, double fwd_egress_us = 800, double bwd_compute_us = 1500,
                 double bwd_ingress_us = 1600) {
  LayerBound b;
  b.forward.compute_ps = fwd_compute_us * kPsPerUs;
  b.forward.egress_ps = fwd_egress_us * kPsPerUs;
  b.backward.compute_ps = bwd_compute_us * kPsPerUs;
  b.backward.ingress_ps = bwd_ingress_us * kPsPerUs;
  return b;
}

}  // namespace

TEST_CASE("without overlap a step is the plain sum of its layers, MoE layers scaled from the trace's mean") {
  const ExperimentSpec x = experiment(StepOverlap::none);
  StepAccumulator acc(x);
  acc.add({100, 100}, layer(1000, 2000, 1000, kFwdSplit, kBwdSplit), bound());
  acc.add({100, 100}, layer(1200, 2400, 1000, kFwdSplit, kBwdSplit), bound());
  const StepPrediction p = acc.prediction();
  CHECK(p.moe_layers == 4);
  CHECK(p.records == 2);
  // Records: 601.2 + 3000 and 601.2 + 3600; mean 3901.2. Bound: each pass's largest term,
  // 601.2 + 800 + 1600 = 3001.2.
  CHECK(p.moe_layer_us == doctest::Approx(3901.2));
  CHECK(p.bound_moe_layer_us == doctest::Approx(3001.2));
  CHECK(p.dense_layer_us == doctest::Approx(1200));
  CHECK(p.head_us == 0);
  CHECK(p.step_us == doctest::Approx(4 * 3901.2 + 1200));
  CHECK(p.bound_step_us == doctest::Approx(4 * 3001.2 + 1200));
  CHECK(p.gap_to_bound_us() == doctest::Approx(3600));
  CHECK(p.tokens_per_gpu == 100);
  CHECK(p.tokens_per_s_per_gpu() == doctest::Approx(100 / (p.step_us * 1e-6)));
  CHECK(p.non_moe_us == doctest::Approx(4 * 601.2 + 1200));
  // The slowest GPU's compute: 600 forward + 1200 backward per layer.
  CHECK(p.moe_compute_us == doctest::Approx(4 * 1800));
  CHECK(p.moe_exposed_comm_us() == doctest::Approx(p.step_us - p.non_moe_us - p.moe_compute_us));
}

TEST_CASE("with two micro-batches each pass takes the max-based time of its slowest GPU") {
  const ExperimentSpec x = experiment(StepOverlap::two_micro_batch);
  StepAccumulator acc(x);
  // Record 1, forward: GPU 0 max(200.4, 400/2) + max(600, 200) = 800.4; GPU 1 max(200.4, 350) +
  // max(300, 350) = 700. Backward: GPU 0 max(400.8, 400) + max(1200, 400) = 1600.8; GPU 1
  // max(400.8, 700) + max(600, 700) = 1400. Layer 2401.2.
  acc.add({100, 100}, layer(1000, 2000, 1000, kFwdSplit, kBwdSplit), bound());
  // Record 2: the same work in passes 200 and 400 us longer, time no GPU was busy and nothing
  // hides: 1000.4 + 2000.8 = 3001.2.
  acc.add({100, 100}, layer(1200, 2400, 1000, kFwdSplit, kBwdSplit), bound());
  const StepPrediction p = acc.prediction();
  CHECK(p.moe_layer_us == doctest::Approx(2701.2));
  // Bound under overlap: N plus the compute term (communication may hide entirely): 200.4 + 450
  // forward, 400.8 + 1500 backward.
  CHECK(p.bound_moe_layer_us == doctest::Approx(2551.2));
  CHECK(p.step_us == doctest::Approx(4 * 2701.2 + 1200));
  CHECK(p.bound_step_us == doctest::Approx(4 * 2551.2 + 1200));
  CHECK(p.gap_to_bound_us() == doctest::Approx(600));
}

TEST_CASE("inference modes time the forward pass only") {
  ExperimentSpec x = experiment(StepOverlap::none);
  x.step->mode = StepMode::prefill;
  StepAccumulator acc(x);
  acc.add({100, 100}, layer(1000, 0, 1000, kFwdSplit, kBwdSplit), bound());
  const StepPrediction p = acc.prediction();
  CHECK(p.moe_layer_us == doctest::Approx(1200.4));
  CHECK(p.dense_layer_us == doctest::Approx(400));
  CHECK(p.step_us == doctest::Approx(4 * 1200.4 + 400));
  CHECK(p.moe_compute_us == doctest::Approx(4 * 600));
}

TEST_CASE("the slowest rank's tokens set the non-MoE work, the mean sets the throughput") {
  const ExperimentSpec x = experiment(StepOverlap::none);
  StepAccumulator acc(x);
  const LayerResult r = layer(1000, 2000, 1000, kFwdSplit, kBwdSplit);
  acc.add({50, 150}, r, bound(1000, 0, 2000, 0));  // 150 tokens: N = 300.6 forward, 601.2 backward
  const StepPrediction p = acc.prediction();
  CHECK(p.moe_layer_us == doctest::Approx(901.8 + 3000));
  CHECK(p.tokens_per_gpu == 100);
  CHECK(p.gap_to_bound_us() == doctest::Approx(0));
}
