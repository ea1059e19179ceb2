// Random skewed layers for comparing bandwidth-sharing modes on whole layers
// (tests/engine/flow_fast_path_test.cpp, per_link_sharing_test.cpp, group_sharing_test.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/balancers/static_ep.hpp"
#include "sim/core/time.hpp"
#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"
#include "sim/replay/layer_result.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/engine/flow_ends.hpp"
#include "traces/format/trace_types.hpp"

namespace epsim::test {

/// A random skewed count matrix: rank s sends expert e about tokens x top_k x w(s, e) / sum, where w
/// is a per-expert popularity (up to 20 x apart for one seed in three, 4 x otherwise) times a
/// per-pair draw.
inline TraceRecord random_record(int ranks, int experts, int tokens_per_rank, int top_k, std::uint64_t seed) {
  TraceRecord r;
  r.counts.assign(static_cast<std::size_t>(ranks) * static_cast<std::size_t>(experts), 0);
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 7;
  const auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  std::vector<std::uint64_t> hot(static_cast<std::size_t>(experts));
  for (std::uint64_t& h : hot) h = 1 + next() % (seed % 3 == 0 ? 20 : 4);
  for (int s = 0; s < ranks; ++s) {
    std::vector<std::uint64_t> w(static_cast<std::size_t>(experts));
    std::uint64_t sum = 0;
    for (std::size_t e = 0; e < w.size(); ++e) sum += w[e] = hot[e] * (1 + next() % 100);
    for (std::size_t e = 0; e < w.size(); ++e)
      r.counts[static_cast<std::size_t>(s) * w.size() + e] = static_cast<std::uint32_t>(
          static_cast<std::uint64_t>(tokens_per_rank) * static_cast<std::uint64_t>(top_k) * w[e] / sum);
  }
  return r;
}

/// Static EP's plan of random_record(ep, model's experts, tokens_per_rank, model's top-k, seed) on
/// `ep` GPUs of `hw`.
inline Plan random_static_plan(const HardwareSpec& hw, const ModelSpec& model, int ep, int tokens_per_rank,
                               std::uint64_t seed) {
  const TraceRecord rec = random_record(ep, model.num_experts, tokens_per_rank, model.top_k, seed);
  BalancerContext c;
  c.num_gpus = ep;
  c.gpus_per_node = hw.gpus_per_node;
  c.model = &model;
  c.hardware = &hw;
  return StaticEp().plan(rec, c);
}

/// When each GPU's last task of the layer ends (compute, transfers, copies).
inline std::vector<Time_ps> gpu_finish(const LayerResult& r, int gpus) {
  std::vector<Time_ps> finish(static_cast<std::size_t>(gpus), 0);
  for (const TimelineEvent& e : r.timeline.events) {
    Time_ps& f = finish[static_cast<std::size_t>(e.gpu)];
    f = std::max(f, e.end_ps);
  }
  return finish;
}

/// How far a layer simulated with `sharing` is from the same layer under exact sharing: the error of
/// its layer time, and the largest error of a GPU's finish (gpu_finish), both relative.
struct SharingError {
  double layer = 0;
  double worst_gpu = 0;
};
inline SharingError sharing_error(HardwareSpec hw, const ModelSpec& model, const Plan& plan,
                                  const std::vector<std::int64_t>& local_tokens, BandwidthSharing sharing) {
  const int gpus = plan.num_gpus;
  hw.engine.bandwidth_sharing = BandwidthSharing::exact;
  const LayerResult exact = simulate_layer(hw, model, plan, local_tokens, true);
  hw.engine.bandwidth_sharing = sharing;
  const LayerResult fast = simulate_layer(hw, model, plan, local_tokens, true);
  SharingError error;
  error.layer = relative(fast.layer_ps(), exact.layer_ps());
  const std::vector<Time_ps> exact_gpus = gpu_finish(exact, gpus);
  const std::vector<Time_ps> fast_gpus = gpu_finish(fast, gpus);
  for (std::size_t g = 0; g < exact_gpus.size(); ++g)
    error.worst_gpu = std::max(error.worst_gpu, relative(fast_gpus[g], exact_gpus[g]));
  return error;
}

}  // namespace epsim::test
