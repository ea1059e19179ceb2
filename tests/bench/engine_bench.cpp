// Engine throughput: the event queue under cancel/reschedule churn, and max-min fluid flows for an
// all-to-all-v (a distinct size per (src, dst) pair) on H100-like nodes of 8 GPUs with rail-forwarded
// inter-node traffic.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "sim/engine/event_queue.hpp"
#include "sim/engine/flow_network.hpp"
#include "sim/hardware/topology.hpp"

namespace {

using epsim::EventQueue;
using epsim::FlowNetwork;
using epsim::HardwareSpec;
using epsim::Time_ps;
using epsim::Topology;

struct Lcg {
  std::uint64_t state = 88172645463325252ULL;
  std::uint64_t next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  }
};

// Keeps `pending` events alive: each event that runs schedules its replacement, and every other one
// also cancels one pending event (and replaces it) or reschedules one, as a flow network does.
class Churn {
 public:
  explicit Churn(std::size_t pending) : handles_(pending) {
    for (std::size_t i = 0; i < pending; ++i) handles_[i] = schedule(i);
  }
  void step() { queue_.run_next(); }
  std::uint64_t events_run() const { return queue_.events_run(); }

 private:
  EventQueue::Handle schedule(std::size_t i) {
    return queue_.schedule_in(static_cast<Time_ps>(rng_.next() % 1'000'000), [this, i] { fire(i); });
  }
  void fire(std::size_t i) {
    handles_[i] = schedule(i);
    const std::size_t j = rng_.next() % handles_.size();
    switch (rng_.next() % 4) {
      case 0:
        if (queue_.cancel(handles_[j])) handles_[j] = schedule(j);
        break;
      case 1:
        queue_.reschedule(handles_[j], queue_.now_ps() + static_cast<Time_ps>(rng_.next() % 1'000'000));
        break;
      default:
        break;
    }
  }

  EventQueue queue_;
  Lcg rng_;
  std::vector<EventQueue::Handle> handles_;
};

void BM_EventQueueChurn(benchmark::State& state) {
  Churn churn(static_cast<std::size_t>(state.range(0)));
  const std::uint64_t before = churn.events_run();
  for (auto _ : state) churn.step();
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(churn.events_run() - before), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EventQueueChurn)->Arg(1'000)->Arg(100'000);

HardwareSpec h100_nodes(int gpus) {
  HardwareSpec hw;
  hw.gpus_per_node = 8;
  hw.nodes = (gpus + 7) / 8;
  hw.nvlink.port_bw_GBps = 450;
  hw.nvlink.latency_us = 1;
  hw.infiniband.nic_bw_GBps = 50;
  hw.infiniband.latency_us = 3;
  hw.pcie.h2d_GBps = 55;
  hw.pcie.d2h_GBps = 55;
  hw.ep_backend.internode_route = "rail_forward";
  return hw;
}

// One all-to-all-v per iteration: every ordered pair (src != dst) sends a size of its own, between
// 100 and 200 kB, all started at t = 0 with the pair's route latency. The second argument is the
// bandwidth sharing: 0 exact, n > 0 epochs with tolerance n / 10,000. Counters: the rate re-solves
// and the time the last flow ends (for the error of epochs against exact).
void BM_AllToAllV(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const HardwareSpec hw = h100_nodes(gpus);
  FlowNetwork::Sharing sharing;
  sharing.mode = state.range(1) == 0 ? FlowNetwork::SharingMode::exact : FlowNetwork::SharingMode::epochs;
  sharing.tolerance = static_cast<double>(state.range(1)) / 10'000;
  std::uint64_t flows = 0;
  std::uint64_t events = 0;
  std::uint64_t solves = 0;
  Time_ps last_ps = 0;
  for (auto _ : state) {
    EventQueue queue;
    FlowNetwork network(queue);
    network.set_sharing(sharing);
    const Topology topo(hw, gpus, network);
    std::uint64_t done = 0;
    for (int src = 0; src < gpus; ++src) {
      for (int dst = 0; dst < gpus; ++dst) {
        if (src == dst) continue;
        const std::uint64_t pair = static_cast<std::uint64_t>(src) * static_cast<std::uint64_t>(gpus) + static_cast<std::uint64_t>(dst);
        const double bytes = 1e5 + static_cast<double>((pair * 2654435761ULL) % 100'000) + static_cast<double>(pair) * 1e-3;
        network.start_flow(topo.ep_route(src, dst), bytes, topo.ep_latency_ps(src, dst), FlowNetwork::kNoRateCap,
                           [&done](Time_ps, Time_ps) { ++done; });
      }
    }
    queue.run();
    flows += done;
    events += queue.events_run();
    solves = network.solves();
    last_ps = queue.now_ps();
    benchmark::DoNotOptimize(done);
  }
  state.counters["flows_per_s"] = benchmark::Counter(static_cast<double>(flows), benchmark::Counter::kIsRate);
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["flows"] = static_cast<double>(gpus) * (gpus - 1);
  state.counters["solves"] = static_cast<double>(solves);
  state.counters["last_us"] = epsim::ps_to_us(last_ps);
}
BENCHMARK(BM_AllToAllV)
    ->ArgNames({"gpus", "epoch_tol_1e4"})
    ->ArgsProduct({{8, 64, 256}, {0, 10, 50}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
