// replay() on several threads: records planned in order, simulated at once, delivered in trace order,
// with the outcomes and the error of the sequential replay whatever the thread count.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"
#include "sim/plan/plan_json.hpp"
#include "sim/replay/ordered_pool.hpp"
#include "sim/replay/replay.hpp"
#include "tests/sim/simple_cluster.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/trace_writer.hpp"

namespace fs = std::filesystem;
using namespace epsim;

namespace {

/// One delivered record, as far as the tests compare them.
struct Seen {
  std::uint32_t step = 0, micro_batch = 0, layer = 0;
  std::string plan_json;
  Time_ps forward_ps = 0, backward_ps = 0;
  std::size_t timeline_events = 0;
  double gemm_excess = 0, bound_us = 0;
  bool warmup = false;

  bool operator==(const Seen& o) const {
    return step == o.step && micro_batch == o.micro_batch && layer == o.layer && plan_json == o.plan_json &&
           forward_ps == o.forward_ps && backward_ps == o.backward_ps && timeline_events == o.timeline_events &&
           gemm_excess == o.gemm_excess && bound_us == o.bound_us && warmup == o.warmup;
  }
};

std::vector<Seen> replay_all(const ExperimentSpec& spec, unsigned threads) {
  std::vector<Seen> seen;
  replay(spec, [&](const LayerOutcome& o) {
    seen.push_back(Seen{o.record.step, o.record.micro_batch, o.record.layer, plan_to_json(o.plan).dump(),
                        o.result.forward_ps, o.result.backward_ps, o.result.timeline.events.size(),
                        o.metrics.gemm_excess, o.metrics.bound_layer_time_us, o.metrics.warmup});
  }, threads);
  return seen;
}

/// Two GPUs, two experts, top-1 on the round-number cluster of simple_cluster.hpp, at 1e-9 TFLOP/s:
/// a token's 2e6 FLOPs take 2e15 ps, so 10 tokens on a GPU take 2e16 ps and 1,000 take 2e18 ps, beyond
/// the 1e18 ps horizon.
ExperimentSpec slow_spec(const fs::path& trace) {
  ExperimentSpec spec;
  spec.name = "slow";
  spec.source_file = "slow.yaml";
  spec.trace_path = trace.string();
  spec.model = test::simple_model(2, 1);
  spec.hardware = test::simple_hardware(1, 2);
  spec.hardware.source_file = "slow-hw.yaml";
  spec.hardware.gpu.bf16_peak_TFLOPs = 1e-9;
  spec.balancer.name = "static_ep";
  spec.ep_degree = 2;
  spec.backward = false;
  return spec;
}

/// `records` records of steps 0, 1, ...: each rank sends 10 tokens to each expert, except in record
/// `huge` (if any), where rank 0 sends 1,000 to expert 0.
fs::path write_trace(const fs::path& path, int records, int huge) {
  TraceHeader h;
  h.num_ranks = 2;
  h.num_experts = 2;
  h.top_k = 1;
  h.num_layers = 1;
  h.layer_ids = {0};
  h.source_format = "synthetic";
  TraceWriter writer(path.string(), h, true);
  for (int i = 0; i < records; ++i) {
    TraceRecord r = test::record_of({{i == huge ? 1000u : 10u, 10}, {10, 10}});
    r.step = static_cast<std::uint32_t>(i);
    writer.write(r);
  }
  writer.close();
  return path;
}

struct Failure {
  std::string message;
  std::vector<std::uint32_t> delivered;  ///< steps on_layer saw before the error
};

Failure replay_failure(const ExperimentSpec& spec, unsigned threads) {
  Failure f;
  try {
    replay(spec, [&](const LayerOutcome& o) { f.delivered.push_back(o.record.step); }, threads);
  } catch (const InputError& e) {
    f.message = e.what();
  }
  return f;
}

}  // namespace

TEST_CASE("OrderedPool: jobs are collected in the order pushed, with the exception each threw") {
  OrderedPool pool(3);
  std::vector<int> finished;
  std::mutex finished_mutex;
  // Earlier jobs sleep longer, so on three workers they finish after the later ones.
  for (int i = 0; i < 6; ++i)
    pool.push([i, &finished, &finished_mutex] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5 * (6 - i)));
      if (i == 4) throw std::runtime_error("job 4");
      std::lock_guard<std::mutex> lock(finished_mutex);
      finished.push_back(i);
    });
  CHECK(pool.in_flight() == 6);
  for (int i = 0; i < 4; ++i) CHECK_NOTHROW(pool.collect_oldest());
  CHECK_THROWS_WITH(pool.collect_oldest(), "job 4");
  CHECK_NOTHROW(pool.collect_oldest());
  CHECK(pool.in_flight() == 0);
  CHECK(finished.size() == 5);
}

TEST_CASE("OrderedPool: destroyed with jobs pending, it finishes the running ones and drops the rest") {
  std::atomic<int> ran{0};
  {
    OrderedPool pool(1);
    for (int i = 0; i < 50; ++i)
      pool.push([&ran] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ++ran;
      });
  }
  // The single worker had time for a few jobs at most before the destructor stopped it.
  CHECK(ran.load() < 50);
}

TEST_CASE("replay on 2, 3 and 8 threads delivers the sequential replay's outcomes in trace order") {
  const fs::path dir = test::scratch_dir("replay_threads_same");
  const ExperimentSpec spec = slow_spec(write_trace(dir / "t.eptrace", 13, -1));
  const std::vector<Seen> sequential = replay_all(spec, 1);
  REQUIRE(sequential.size() == 13);
  for (std::size_t i = 0; i < sequential.size(); ++i) CHECK(sequential[i].step == i);
  // Hand-worked: each GPU runs its expert's 20 tokens, 2e15 ps each, so the layer is at least 4e16 ps.
  CHECK(sequential[0].forward_ps >= 40'000'000'000'000'000);
  for (const unsigned threads : {2u, 3u, 8u}) {
    INFO("threads " << threads);
    CHECK(replay_all(spec, threads) == sequential);
  }
}

TEST_CASE("replay on several threads: DeepSeek EPLB's plans, made from its history, are the sequential ones") {
  ExperimentSpec spec = load_experiment((test::source_dir() / "experiments/default.yaml").string());
  spec.balancer.name = "deepseek_eplb";
  spec.balancer.params = YAML::Load("{window: 2, period: 2}");
  spec.max_records = 12;
  spec.backward = false;
  const std::vector<Seen> sequential = replay_all(spec, 1);
  REQUIRE(sequential.size() == 12);
  // Re-balanced from history: the plans change along the trace and some records are warm-up.
  int warmup = 0;
  for (const Seen& s : sequential) warmup += s.warmup;
  CHECK(warmup > 0);
  CHECK(warmup < 12);
  for (const unsigned threads : {2u, 3u}) {
    INFO("threads " << threads);
    CHECK(replay_all(spec, threads) == sequential);
  }
}

TEST_CASE("a record beyond the horizon in the middle: the sequential replay's error after the same records") {
  const fs::path dir = test::scratch_dir("replay_threads_error");
  const ExperimentSpec spec = slow_spec(write_trace(dir / "t.eptrace", 12, 5));
  const Failure sequential = replay_failure(spec, 1);
  REQUIRE(sequential.delivered == std::vector<std::uint32_t>{0, 1, 2, 3, 4});
  CHECK(sequential.message.rfind("slow-hw.yaml:record 5 (step 5, micro-batch 0, layer 0): ", 0) == 0);
  CHECK(sequential.message.find("beyond the simulation horizon") != std::string::npos);
  for (const unsigned threads : {2u, 3u, 8u}) {
    INFO("threads " << threads);
    const Failure parallel = replay_failure(spec, threads);
    CHECK(parallel.message == sequential.message);
    CHECK(parallel.delivered == sequential.delivered);
  }
}

TEST_CASE("a failing record followed by a corrupt one: the failing record's error, as in the sequential replay") {
  // Record 6 is cut short; on several threads it is read (and fails) while record 5 is still being
  // simulated, but the error reported is record 5's.
  const fs::path dir = test::scratch_dir("replay_threads_error_then_corrupt");
  const fs::path trace = write_trace(dir / "t.eptrace", 8, 5);
  // A record is 20 + 4 x 2 x 2 + 8 = 44 bytes and the end block 20 (docs/trace-format.md): the file
  // of the first seven records less its end block and 8 bytes ends 36 bytes into record 6.
  const fs::path seven = write_trace(dir / "seven.eptrace", 7, 5);
  fs::resize_file(trace, fs::file_size(seven) - 20 - 8);
  const ExperimentSpec spec = slow_spec(trace);
  const Failure sequential = replay_failure(spec, 1);
  REQUIRE(sequential.delivered.size() == 5);
  CHECK(sequential.message.find("record 5 (step 5") != std::string::npos);
  for (const unsigned threads : {2u, 3u, 8u}) {
    INFO("threads " << threads);
    const Failure parallel = replay_failure(spec, threads);
    CHECK(parallel.message == sequential.message);
    CHECK(parallel.delivered == sequential.delivered);
  }
  // Without the failing record the corrupt one is what stops the replay, after the six before it.
  const fs::path plain = write_trace(dir / "plain.eptrace", 8, -1);
  fs::resize_file(plain, fs::file_size(trace));
  const Failure corrupt = replay_failure(slow_spec(plain), 1);
  CHECK(corrupt.delivered.size() == 6);
  CHECK(corrupt.message.rfind(plain.string() + ":record 6 at byte ", 0) == 0);
  CHECK(corrupt.message.find("truncated") != std::string::npos);
  for (const unsigned threads : {2u, 3u}) {
    const Failure parallel = replay_failure(slow_spec(plain), threads);
    CHECK(parallel.message == corrupt.message);
    CHECK(parallel.delivered == corrupt.delivered);
  }
}

TEST_CASE("an exception from on_layer stops a replay on several threads at that record") {
  const fs::path dir = test::scratch_dir("replay_threads_callback_throws");
  const ExperimentSpec spec = slow_spec(write_trace(dir / "t.eptrace", 20, -1));
  for (const unsigned threads : {1u, 3u}) {
    std::vector<std::uint32_t> delivered;
    CHECK_THROWS_WITH(replay(spec, [&](const LayerOutcome& o) {
      delivered.push_back(o.record.step);
      if (o.record.step == 3) throw std::runtime_error("stop at 3");
    }, threads), "stop at 3");
    CHECK(delivered == std::vector<std::uint32_t>{0, 1, 2, 3});
  }
}
