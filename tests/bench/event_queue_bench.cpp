// The event queue in a steady state at 1k to 1M pending events: how many events per second it runs
// as the future-event set grows. Two patterns:
//
//  * Hold: each event that runs schedules one replacement a random delay ahead, so the number pending
//    stays constant (the classic "hold" model of future-event-set studies).
//  * Flow: the pattern of FlowNetwork. A completion that runs schedules a solve event at the same
//    instant; the solve moves the completion events of a few other flows (a new rate means a new
//    finish time, earlier or later) with reschedule(), and starts a replacement flow whose completion
//    is scheduled. The flow network never cancels; EventQueueChurn in engine_bench.cpp adds cancels.
//
// Each benchmark iteration runs one event (run_next); events_per_s counts them, solve events included.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "sim/engine/event_queue.hpp"

namespace {

using epsim::EventQueue;
using epsim::Time_ps;

// Delays uniform in [0, 1 us): the span of completion times in an all-to-all of small messages.
constexpr Time_ps kMaxDelay_ps = 1'000'000;

struct Lcg {
  std::uint64_t state = 88172645463325252ULL;
  std::uint64_t next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  }
  Time_ps delay_ps() { return static_cast<Time_ps>(next() % kMaxDelay_ps); }
};

class Hold {
 public:
  explicit Hold(std::size_t pending) {
    for (std::size_t i = 0; i < pending; ++i) schedule();
    // Run one generation of events so that the pending times have their steady-state spread.
    for (std::size_t i = 0; i < pending; ++i) queue_.run_next();
  }
  void step() { queue_.run_next(); }
  std::uint64_t events_run() const { return queue_.events_run(); }
  std::size_t size() const { return queue_.size(); }

 private:
  void schedule() { queue_.schedule_in(rng_.delay_ps(), [this] { schedule(); }); }

  EventQueue queue_;
  Lcg rng_;
};

class FlowPattern {
 public:
  /// Flows whose completion events a solve moves, as rates change on links they share.
  static constexpr int kMovedPerSolve = 4;

  explicit FlowPattern(std::size_t flows) : completions_(flows) {
    for (std::size_t i = 0; i < flows; ++i) start(i);
    for (std::size_t i = 0; i < flows; ++i) queue_.run_next();
  }
  void step() { queue_.run_next(); }
  std::uint64_t events_run() const { return queue_.events_run(); }
  std::size_t size() const { return queue_.size(); }

 private:
  void start(std::size_t i) {
    completions_[i] = queue_.schedule_in(rng_.delay_ps(), [this, i] { complete(i); });
  }
  void complete(std::size_t i) {
    finished_.push_back(i);
    if (!solve_pending_) {
      solve_pending_ = true;
      queue_.schedule(queue_.now_ps(), [this] { solve(); });
    }
  }
  void solve() {
    solve_pending_ = false;
    for (int k = 0; k < kMovedPerSolve; ++k) {
      const std::size_t j = rng_.next() % completions_.size();
      queue_.reschedule(completions_[j], queue_.now_ps() + rng_.delay_ps());  // false if it just ran
    }
    for (std::size_t i : finished_) start(i);
    finished_.clear();
  }

  EventQueue queue_;
  Lcg rng_;
  std::vector<EventQueue::Handle> completions_;
  std::vector<std::size_t> finished_;
  bool solve_pending_ = false;
};

template <class Pattern>
void run_pattern(benchmark::State& state) {
  Pattern pattern(static_cast<std::size_t>(state.range(0)));
  const std::uint64_t before = pattern.events_run();
  for (auto _ : state) pattern.step();
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(pattern.events_run() - before), benchmark::Counter::kIsRate);
  state.counters["pending"] = static_cast<double>(pattern.size());
}

void BM_EventQueueHold(benchmark::State& state) { run_pattern<Hold>(state); }
void BM_EventQueueFlowPattern(benchmark::State& state) { run_pattern<FlowPattern>(state); }

BENCHMARK(BM_EventQueueHold)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Arg(1'000'000);
BENCHMARK(BM_EventQueueFlowPattern)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Arg(1'000'000);

}  // namespace
