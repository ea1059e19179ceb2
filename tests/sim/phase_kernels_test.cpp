// Precision per phase and the EP kernels as deployed (SM limit, fixed cost, Copy Engine phases),
// each against figures worked out by hand on the round-number cluster of simple_cluster.hpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>

#include "sim/balancers/static_ep.hpp"
#include "sim/replay/all_to_all.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

constexpr Time_ps us = kPsPerUs;

// 2 ranks, expert e on GPU e, top-1: rank 0 sends 50 tokens to expert 1 and keeps 100; rank 1 keeps 100.
Plan two_gpu_plan(const ModelSpec& model, const HardwareSpec& hw) {
  return StaticEp().plan(test::record_of({{100, 50}, {0, 100}}), test::context_for(model, hw));
}

// DeepSeek-V3's token: hidden 7168, FP8 dispatch (7168 + 56 scales x 4 = 7392 bytes), BF16 combine
// (14336 bytes), the same for the gradients.
ModelSpec fp8_dispatch_model() {
  ModelSpec m = test::simple_model();
  m.hidden_size = 7168;
  m.dtype_bytes = 2;
  m.precision.dispatch = Dtype::fp8;
  m.precision.combine = Dtype::bf16;
  m.precision.grad_dispatch = Dtype::fp8;
  m.precision.grad_combine = Dtype::bf16;
  m.precision.set = true;
  return m;
}

const TimelineEvent* find_event(const Timeline& t, int gpu, Track track, const std::string& name) {
  for (const TimelineEvent& e : t.events)
    if (e.gpu == gpu && e.track == track && e.name == name) return &e;
  return nullptr;
}

int count_track(const Timeline& t, Track track, const std::string& name) {
  return static_cast<int>(std::count_if(t.events.begin(), t.events.end(), [&](const TimelineEvent& e) {
    return e.track == track && e.name == name;
  }));
}

}  // namespace

TEST_CASE("an FP8 dispatch moves hidden + 4 bytes per 128 channels per token, the BF16 combine twice hidden") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = fp8_dispatch_model();
  const LayerResult r = simulate_layer(hw, model, two_gpu_plan(model, hw), {150, 100}, /*backward=*/true);
  // The one dispatch message, 50 tokens 0 -> 1: 50 x 7392 = 369600 bytes at 0.1 B/ps = 3.696 us after
  // 1 us of latency.
  const TimelineEvent* dispatch = find_event(r.timeline, 0, Track::nvlink_out, "dispatch 0->1");
  REQUIRE(dispatch != nullptr);
  CHECK(dispatch->bytes == doctest::Approx(369'600));
  CHECK(dispatch->end_ps - dispatch->start_ps == 4 * us + 696'000);
  const TimelineEvent* combine = find_event(r.timeline, 1, Track::nvlink_out, "combine 1->0");
  REQUIRE(combine != nullptr);
  CHECK(combine->bytes == doctest::Approx(716'800));  // 50 x 14336
  const TimelineEvent* grad_dispatch = find_event(r.timeline, 0, Track::nvlink_out, "grad dispatch 0->1");
  REQUIRE(grad_dispatch != nullptr);
  CHECK(grad_dispatch->bytes == doctest::Approx(369'600));
  const TimelineEvent* grad_combine = find_event(r.timeline, 1, Track::nvlink_out, "grad combine 1->0");
  REQUIRE(grad_combine != nullptr);
  CHECK(grad_combine->bytes == doctest::Approx(716'800));
  CHECK(r.ep_token_bytes == doctest::Approx(2 * (369'600 + 716'800)));
}

TEST_CASE("a model whose precision was never set moves hidden x dtype_bytes in every phase") {
  const HardwareSpec hw = test::simple_hardware();
  ModelSpec model = test::simple_model();  // dtype_bytes 1, precision left at its defaults
  {
    SimContext ctx(hw, model, 2);
    CHECK(ctx.token_bytes(TokenPhase::dispatch) == 1000);
    CHECK(ctx.token_bytes(TokenPhase::grad_combine) == 1000);
  }
  // Set precisions are honoured (BF16 combine of a 1-byte model: 2 bytes per channel).
  model.precision.dispatch = Dtype::fp8;
  model.precision.set = true;
  SimContext ctx(hw, model, 2);
  CHECK(ctx.token_bytes(TokenPhase::dispatch) == 1000 + 8 * 4);  // 1000 channels: 8 scale blocks of 128
  CHECK(ctx.token_bytes(TokenPhase::combine) == 2000);
}

TEST_CASE("an SM-limited kernel sends at comm_sms x sm_GBps even where NVLink allows more") {
  HardwareSpec hw = test::simple_hardware(1, 4);
  hw.nvlink.port_bw_GBps = 370;
  hw.ep_backend.comm_sms = 20;
  hw.ep_backend.sm_GBps = 8;  // 160 GB/s per direction for the kernel
  const ModelSpec model = test::simple_model();
  SUBCASE("one message") {
    SimContext ctx(hw, model, 4);
    std::vector<std::vector<double>> bytes(4, std::vector<double>(4, 0.0));
    bytes[0][1] = 1.6e6;  // 10 us at 160 GB/s (4.32 us at 370)
    std::vector<Time_ps> done(4, -1);
    AllToAllV a2a(ctx, "dispatch", Pass::forward, bytes, [&](int g) { done[g] = ctx.now_ps(); });
    for (int g = 0; g < 4; ++g) a2a.start(g);
    ctx.queue().run();
    CHECK(done[0] == 11 * us);  // 1 us latency + 10 us
    CHECK(done[1] == 11 * us);
  }
  SUBCASE("three messages share the sender's limit") {
    SimContext ctx(hw, model, 4);
    std::vector<std::vector<double>> bytes(4, std::vector<double>(4, 0.0));
    for (int d = 1; d < 4; ++d) bytes[0][d] = 1.6e6;  // 4.8 MB out of GPU 0 at 160 GB/s: 30 us
    Time_ps end = 0;
    AllToAllV a2a(ctx, "dispatch", Pass::forward, bytes, [&](int) { end = std::max(end, ctx.now_ps()); });
    for (int g = 0; g < 4; ++g) a2a.start(g);
    ctx.queue().run();
    CHECK(std::llabs(end - 31 * us) <= 1);  // three flows at 160/3 GB/s: rounding of the thirds
  }
  SUBCASE("the limit is on payload: 160 GB/s of payload with NVLink's protocol efficiency 0.8") {
    hw.ep_backend.nvlink_efficiency = 0.8;  // 296 GB/s of payload on the link: the SMs still bind
    SimContext ctx(hw, model, 4);
    std::vector<std::vector<double>> bytes(4, std::vector<double>(4, 0.0));
    bytes[0][1] = 1.6e6;  // 2e6 wire bytes through a 200 GB/s SM link: 10 us
    Time_ps end = 0;
    AllToAllV a2a(ctx, "dispatch", Pass::forward, bytes, [&](int) { end = std::max(end, ctx.now_ps()); });
    for (int g = 0; g < 4; ++g) a2a.start(g);
    ctx.queue().run();
    CHECK(std::llabs(end - 11 * us) <= 1);
  }
  SUBCASE("without the limit the link sets the pace") {
    hw.ep_backend.sm_GBps = 0;
    SimContext ctx(hw, model, 4);
    std::vector<std::vector<double>> bytes(4, std::vector<double>(4, 0.0));
    bytes[0][1] = 3.7e6;  // 10 us at 370 GB/s
    Time_ps end = 0;
    AllToAllV a2a(ctx, "dispatch", Pass::forward, bytes, [&](int) { end = std::max(end, ctx.now_ps()); });
    for (int g = 0; g < 4; ++g) a2a.start(g);
    ctx.queue().run();
    CHECK(end == 11 * us);
  }
}

TEST_CASE("a kernel's fixed cost shifts its end by exactly that cost") {
  HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model();
  const LayerResult before = simulate_layer(hw, model, two_gpu_plan(model, hw), {150, 100}, false);
  hw.ep_backend.dispatch_fixed_us = 5;
  hw.ep_backend.combine_fixed_us = 3;
  const LayerResult r = simulate_layer(hw, model, two_gpu_plan(model, hw), {150, 100}, false);
  // Dispatch: 1.5 us without a fixed cost (layer_run_test), 6.5 us with 5 us on both ranks.
  const TimelineEvent* k0_before = find_event(before.timeline, 0, Track::comm_kernel, "dispatch");
  const TimelineEvent* k0 = find_event(r.timeline, 0, Track::comm_kernel, "dispatch");
  REQUIRE(k0_before != nullptr);
  REQUIRE(k0 != nullptr);
  CHECK(k0_before->end_ps == 1 * us + us / 2);
  CHECK(k0->end_ps == k0_before->end_ps + 5 * us);
  const TimelineEvent* message = find_event(r.timeline, 0, Track::nvlink_out, "dispatch 0->1");
  REQUIRE(message != nullptr);
  CHECK(message->start_ps == 5 * us);  // no byte before the fixed cost is paid
  // GEMMs wait for the dispatch: 5 us later each (201.5 and 301.5 us before).
  CHECK(r.gemm_finish_fwd_ps[0] == 206 * us + us / 2);
  CHECK(r.gemm_finish_fwd_ps[1] == 306 * us + us / 2);
  // Combine 1 -> 0 from 306.5 us: 3 us fixed, 1.5 us to move: 311 us (303 us before, + 5 + 3).
  CHECK(r.forward_ps == 311 * us);
}

TEST_CASE("a Copy Engine dispatch holds no SMs and takes the copy's fixed cost plus bytes over its bandwidth") {
  HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model(2, 1, /*shared_experts=*/1);
  SUBCASE("layer") {
    hw.ep_backend.dispatch_engine = CommEngine::copy_engine;
    const LayerResult r = simulate_layer(hw, model, two_gpu_plan(model, hw), {150, 100}, false);
    // 50 tokens x 1000 bytes on GPU 0's Copy Engine: 2 us fixed + 5e4 B at 50 GB/s (1 us) = 3 us.
    const TimelineEvent* copy = find_event(r.timeline, 0, Track::copy_engine, "dispatch 0->1");
    REQUIRE(copy != nullptr);
    CHECK(copy->start_ps == 0);
    CHECK(copy->end_ps == 3 * us);
    CHECK(count_track(r.timeline, Track::comm_kernel, "dispatch") == 0);
    // GPU 0's shared expert (150 tokens, 300 us) is not slowed by any SM holding (300.3 us with the
    // EP kernel, layer_run_test); its routed GEMM follows: 500 us.
    CHECK(r.gemm_finish_fwd_ps[0] == 500 * us);
    CHECK(r.ce_token_bytes == doctest::Approx(50'000));
    CHECK(r.ep_token_bytes == doctest::Approx(50'000));  // the combine stays on the EP kernel
  }
  SUBCASE("inter-node messages of that phase stay on the kernel") {
    hw = test::simple_hardware(2, 2);
    hw.ep_backend.dispatch_engine = CommEngine::copy_engine;
    SimContext ctx(hw, model, 4);
    std::vector<std::vector<double>> bytes(4, std::vector<double>(4, 0.0));
    bytes[0][1] = 5e4;  // same node: Copy Engine, 3 us
    bytes[2][3] = 5e4;  // same node: Copy Engine, 3 us
    bytes[0][2] = 2.5e4;  // across nodes: IB 25 GB/s, 3 us latency + 1 us = 4 us
    AllToAllV a2a(ctx, "dispatch", Pass::forward, bytes, [](int) {}, ctx.comm_kernel(TokenPhase::dispatch));
    for (int g = 0; g < 4; ++g) a2a.start(g);
    CHECK(ctx.sms(0).held_sms() == 20);  // sends across nodes
    CHECK(ctx.sms(2).held_sms() == 20);  // receives across nodes
    CHECK(ctx.sms(1).held_sms() == 0);
    CHECK(ctx.sms(3).held_sms() == 0);
    ctx.queue().run();
    CHECK(a2a.copy_engine_bytes() == doctest::Approx(1e5));
    CHECK(ctx.sms(0).held_sms() == 0);
    const TimelineEvent* kernel = find_event(ctx.timeline(), 0, Track::comm_kernel, "dispatch");
    REQUIRE(kernel != nullptr);
    CHECK(kernel->end_ps == 4 * us);
  }
}

TEST_CASE("a rank with nothing to move in an exchange passes it at once, its kernel's fixed cost unpaid") {
  // 3 GPUs, a 5 us dispatch kernel: GPU 0 sends 1e5 bytes to GPU 1 over NVLink (100 GB/s, 1 us
  // latency): 5 us fixed, then 1 + 1 us, both done at 7 us. GPU 2 sends and receives nothing: its
  // kernel takes its SMs and gives them back at once, done at 0, and leaves no slice.
  HardwareSpec hw = test::simple_hardware(1, 3);
  hw.ep_backend.dispatch_fixed_us = 5;
  const ModelSpec model = test::simple_model(3, 1);
  SimContext ctx(hw, model, 3);
  std::vector<std::vector<double>> bytes(3, std::vector<double>(3, 0.0));
  bytes[0][1] = 1e5;
  std::vector<Time_ps> done(3, -1);
  AllToAllV a2a(ctx, "dispatch", Pass::forward, bytes, [&](int rank) { done[rank] = ctx.now_ps(); },
                ctx.comm_kernel(TokenPhase::dispatch));
  for (int g = 0; g < 3; ++g) a2a.start(g);
  CHECK(ctx.sms(0).held_sms() == 20);
  CHECK(ctx.sms(2).held_sms() == 0);
  CHECK(done[2] == 0);
  ctx.queue().run();
  CHECK(done[0] == 7 * us);
  CHECK(done[1] == 7 * us);
  CHECK(done[2] == 0);
  CHECK(find_event(ctx.timeline(), 2, Track::comm_kernel, "dispatch") == nullptr);
  const TimelineEvent* kernel = find_event(ctx.timeline(), 0, Track::comm_kernel, "dispatch");
  REQUIRE(kernel != nullptr);
  CHECK(kernel->end_ps == 7 * us);
}
