#include "hw/calibration/fidelity_ep_bench.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <memory>
#include <stdexcept>
#include <vector>

#include "sim/core/input_error.hpp"
#include "sim/hardware/model_spec.hpp"
#include "sim/replay/sim_context.hpp"

namespace epsim {

namespace {

/// One hop of one token stream: `from` -> `to` over NVLink or InfiniBand.
struct Leg {
  int from = 0;
  int to = 0;
  double bytes = 0;
};

/// The dispatch's hops (a combine runs each one reversed), one per (from, to) pair: the streams a GPU
/// sends to the same peer (its own tokens and those it forwards) share that pair's links anyway, and
/// one flow per pair keeps a 64-rank benchmark at a few hundred flows instead of thousands.
std::vector<Leg> dispatch_legs(const EpBenchTraffic& t) {
  std::map<std::pair<int, int>, double> pairs;
  const auto add = [&pairs](int from, int to, double bytes) { pairs[{from, to}] += bytes; };
  const int n = t.ep;
  const int gpn = t.gpus_per_node;
  for (int s = 0; s < n; ++s) {
    const int node = s / gpn;
    for (int d = 0; d < n; ++d)
      if (d != s && d / gpn == node && t.rank_bytes[s][d] > 0) add(s, d, t.rank_bytes[s][d]);
    const int nodes = (n + gpn - 1) / gpn;
    for (int m = 0; m < nodes; ++m) {
      if (m == node) continue;
      const int forwarder = m * gpn + s % gpn;
      if (forwarder >= n) continue;
      if (t.node_bytes[s][m] > 0) add(s, forwarder, t.node_bytes[s][m]);
      for (int d = m * gpn; d < std::min(n, (m + 1) * gpn); ++d)
        if (d != forwarder && t.rank_bytes[s][d] > 0) add(forwarder, d, t.rank_bytes[s][d]);
    }
  }
  std::vector<Leg> legs;
  for (const auto& [pair, bytes] : pairs) legs.push_back({pair.first, pair.second, bytes});
  return legs;
}

}  // namespace

HardwareSpec ep_bench_hardware(const EpCommPoint& point, const HardwareSpec& preset) {
  HardwareSpec hw = preset;
  hw.gpus_per_node = point.gpus_per_node > 0 ? point.gpus_per_node : point.ep;
  hw.nodes = (point.ep + hw.gpus_per_node - 1) / hw.gpus_per_node;
  if (point.sms > 0) hw.ep_backend.comm_sms = point.sms;
  return hw;
}

double simulate_ep_bench_us(const EpCommPoint& point, const EpBenchTraffic& traffic, const HardwareSpec& hw) {
  if (hw.ep_backend.comm_sms >= hw.gpu.sms)
    throw InputError(point.where, "", std::to_string(hw.ep_backend.comm_sms) + " communication SMs, but " +
                                           hw.name + " has " + std::to_string(hw.gpu.sms) + " SMs per GPU");
  const ModelSpec model;  // no GEMMs run here
  const bool dispatch = point.kernel == EpKernel::dispatch;
  const double fixed_us = dispatch ? hw.ep_backend.dispatch_fixed_us : hw.ep_backend.combine_fixed_us;
  std::unique_ptr<SimContext> ctx;
  try {
    ctx = std::make_unique<SimContext>(hw, model, traffic.ep);
  } catch (const std::invalid_argument& e) {
    throw InputError(point.where, "", std::string("cannot run this point on ") + hw.name + ": " + e.what());
  }
  const int n = traffic.ep;
  std::vector<Leg> legs = dispatch_legs(traffic);
  if (!dispatch)
    for (Leg& leg : legs) std::swap(leg.from, leg.to);

  std::vector<Time_ps> rank_end(static_cast<std::size_t>(n), us_to_ps(fixed_us));
  const Time_ps start_ps = us_to_ps(fixed_us);
  SimContext& sim = *ctx;
  sim.queue().schedule(start_ps, [&] {
    for (const Leg& leg : legs) {
      const int a = leg.from, b = leg.to;
      sim.ep_message(a, b, leg.bytes, Pass::forward, "leg", [&sim, &rank_end, a, b] {
        const Time_ps end = sim.now_ps();
        rank_end[static_cast<std::size_t>(a)] = std::max(rank_end[static_cast<std::size_t>(a)], end);
        rank_end[static_cast<std::size_t>(b)] = std::max(rank_end[static_cast<std::size_t>(b)], end);
      });
    }
  });
  ctx->queue().run();
  double sum_us = 0;
  for (Time_ps t : rank_end) sum_us += ps_to_us(t);
  return sum_us / n + (point.kernel_only ? 0.0 : kApiHostCost_us);
}

}  // namespace epsim
