// The CPU side of epsim-hw (hw/host): argument parsing, measurement files that `epsim calibrate` reads
// back, plan -> per-GPU tasks, checksum arithmetic and the measured-timeline document. No GPU needed.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "hw/calibration/measurements.hpp"
#include "hw/host/checksum.hpp"
#include "hw/host/hw_args.hpp"
#include "hw/host/measurement_writer.hpp"
#include "hw/host/plan_tasks.hpp"
#include "hw/host/timeline_writer.hpp"
#include "sim/core/input_error.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/plan_json.hpp"
#include "tests/test_paths.hpp"

using namespace epsim;
using namespace epsim::hw;

namespace {

Plan two_gpu_plan() {
  Plan plan;
  plan.balancer = "hand";
  plan.step = 3;
  plan.micro_batch = 1;
  plan.layer = 2;
  plan.num_gpus = 2;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {0, 1, InstanceKind::dynamic_expert},
                    {1, 1, InstanceKind::static_expert}};
  plan.routes = {{0, 0, 5, Carrier::none, -1, 0},
                 {1, 1, 7, Carrier::copy_engine, 0, 0},  // two-phase: rank 1 -> GPU 0 (EP), GPU 0 -> GPU 1 (CE)
                 {0, 2, 4, Carrier::ep_backend, -1, 0},
                 {1, 2, 6, Carrier::none, -1, 0}};
  plan.transfers = {{TransferKind::weights, PassKind::forward, Carrier::copy_engine, TransferStart::after_dispatch, 1,
                     0, 1, 4096},
                    {TransferKind::gradients, PassKind::backward, Carrier::copy_engine, TransferStart::after_dispatch,
                     1, 1, 0, 2048},
                    {TransferKind::weights, PassKind::forward, Carrier::ep_backend, TransferStart::after_dispatch, 1, 0,
                     1, 999}};
  plan.gemm_order = {{{0, {0}}}, {{1, {1, 2}}}};
  return plan;
}

}  // namespace

TEST_CASE("epsim-hw arguments: options, switches, lists, sizes and refusals") {
  const HwArgs a = parse_hw_args({"bench", "gemm", "--experts", "1,4:16:pow2", "--reps=7", "-o", "out.yaml", "--no-verify"},
                                 {"experts", "reps", "o", "tokens"}, {"no-verify"});
  CHECK(a.command == "bench");
  CHECK(a.positional == std::vector<std::string>{"gemm"});
  CHECK(a.integers("experts", {}, 1, 100) == std::vector<std::int64_t>{1, 4, 8, 16});
  CHECK(a.integer("reps", 50, 1, 100) == 7);
  CHECK(a.integer("warmup", 5, 0, 100) == 5);
  CHECK(a.integers("tokens", {3}, 1, 10) == std::vector<std::int64_t>{3});
  CHECK(a.text("o", "") == "out.yaml");
  CHECK(a.flags.count("no-verify") == 1);
  CHECK_THROWS_AS(parse_hw_args({"bench", "--bogus", "1"}, {"o"}), std::invalid_argument);
  CHECK_THROWS_AS(parse_hw_args({"bench", "-o"}, {"o"}), std::invalid_argument);
  CHECK_THROWS_AS(parse_hw_args({"bench", "--reps", "x"}, {"reps"}).integer("reps", 1, 1, 9), std::invalid_argument);
  CHECK_THROWS_AS(parse_hw_args({"bench", "--reps", "0"}, {"reps"}).integer("reps", 1, 1, 9), std::invalid_argument);
  CHECK(parse_sizes("4K,1M,1G,100") == std::vector<std::int64_t>{4096, 1048576, 1073741824, 100});
  CHECK_THROWS_AS(parse_sizes("4K,,1M"), std::invalid_argument);
  CHECK_THROWS_AS(parse_sizes("-1"), std::invalid_argument);
  const HwArgs t = parse_hw_args({"bench", "--nccl-timeout-s", "0.5", "--x", "1e400", "--y", "nan", "--z", "2s"},
                                 {"nccl-timeout-s", "x", "y", "z"});
  CHECK(t.number("nccl-timeout-s", 120, 1e-3, 86400) == 0.5);
  CHECK(t.number("w", 120, 1e-3, 86400) == 120);
  CHECK_THROWS_AS(t.number("x", 1, 0, 1e9), std::invalid_argument);  // out of double range
  CHECK_THROWS_AS(t.number("y", 1, 0, 1e9), std::invalid_argument);  // NaN
  CHECK_THROWS_AS(t.number("z", 1, 0, 1e9), std::invalid_argument);  // trailing text
  CHECK_THROWS_AS(t.number("nccl-timeout-s", 1, 1, 10), std::invalid_argument);  // below the range
  CHECK(median({3, 1, 2}) == 2);
  CHECK(median({4, 1, 2, 3}) == 2.5);
}

TEST_CASE("a written measurements file is read back by load_measurements: header, copy and all_to_all") {
  Measurements m;
  m.header.gpu = "NVIDIA H100 80GB HBM3";
  m.header.driver = "CUDA driver API 13.0";
  m.header.cuda = "13.0";
  m.header.sm_clock_MHz = 1980;
  m.header.mem_clock_MHz = 2619;
  m.header.date = "2026-11-22";
  m.header.tool = "epsim-hw 0.1.0";
  CopyPoint c;
  c.kind = CopyKind::ce_local;
  c.bytes = 4096;
  c.median_us = 3.125;
  c.repetitions = 100;
  m.copy.push_back(c);
  c.kind = CopyKind::sm_copy;
  c.bytes = 1073741824;
  c.median_us = 701.5;
  m.copy.push_back(c);
  AllToAllPoint a;
  a.ranks = 8;
  a.bytes_per_pair = 4194304;
  a.median_us = 99.6;
  a.repetitions = 30;
  m.all_to_all.push_back(a);
  const auto path = (test::scratch_dir("cuda_host_measurements") / "m.yaml").string();
  write_measurements_file(path, m, {"a comment: with a colon", "two\nlines"});
  const Measurements back = load_measurements(path);
  CHECK(back.header.gpu == m.header.gpu);
  CHECK(back.header.driver == m.header.driver);
  CHECK(back.header.cuda == "13.0");
  CHECK(back.header.sm_clock_MHz == 1980);
  CHECK(back.header.date == "2026-11-22");
  REQUIRE(back.copy.size() == 2);
  CHECK(back.copy[1].kind == CopyKind::sm_copy);
  CHECK(back.copy[1].bytes == 1073741824);
  REQUIRE(back.all_to_all.size() == 1);
  CHECK(back.all_to_all[0].ranks == 8);
  CHECK(format_number(0.1) == "0.1");
  CHECK(format_number(3) == "3");
  CHECK(yaml_quote("a\"b") == "\"a\\\"b\"");
}

TEST_CASE("measurement numbers are the shortest text that reads back the same, and quoted text escapes what YAML must") {
  // 16 digits are the fewest that give 1/3 back (17 would be 0.33333333333333331).
  CHECK(format_number(1.0 / 3) == "0.3333333333333333");
  CHECK(std::strtod(format_number(1.0 / 3).c_str(), nullptr) == 1.0 / 3);
  CHECK(format_number(0.1 + 0.2) == "0.30000000000000004");
  // A whole number past 10^15 is written with an exponent, not as 301 digits into a short buffer.
  CHECK(format_number(1e300) == "1e+300");
  CHECK(format_number(123456789012345.0) == "123456789012345");
  CHECK_THROWS_AS(format_number(std::nan("")), std::runtime_error);
  CHECK(yaml_quote("a\\b") == "\"a\\\\b\"");       // a backslash doubled
  CHECK(yaml_quote("a\tb\nc") == "\"a\\x09b\\nc\"");  // a tab as \x09, a newline as \n
}

TEST_CASE("a plan's per-GPU tasks: GEMMs in plan order for both passes, the Copy Engine copies it sends") {
  const Plan plan = two_gpu_plan();
  const int hidden = 16;
  const GpuTasks g0 = extract_gpu_tasks(plan, 0, hidden, 2);
  CHECK(g0.step == 3);
  CHECK(g0.layer == 2);
  REQUIRE(g0.gemms.size() == 3);
  CHECK(g0.gemms[0].name == "gemm fwd g0");
  CHECK(g0.gemms[0].pass == Pass::forward);
  CHECK(g0.gemms[0].tokens == std::vector<std::int64_t>{5});
  CHECK(g0.gemms[1].name == "gemm dgrad g0");
  CHECK(g0.gemms[2].name == "gemm wgrad g0");
  CHECK(g0.gemms[2].pass == Pass::backward);
  REQUIRE(g0.copies.size() == 2);  // the CE weights and the CE leg of the two-phase route; not the EP transfer
  CHECK(g0.copies[0].name == "weights e0");
  CHECK(g0.copies[0].bytes == 4096);
  CHECK(g0.copies[1].name == "tokens");
  CHECK(g0.copies[1].bytes == 7 * hidden * 2);
  CHECK(g0.copies[0].after_gemm == -1);
  CHECK(g0.copies[1].after_gemm == -1);

  const GpuTasks g1 = extract_gpu_tasks(plan, 1, hidden, 2);
  REQUIRE(g1.gemms.size() == 3);
  CHECK(g1.gemms[0].instances == std::vector<int>{1, 2});
  CHECK(g1.gemms[0].tokens == std::vector<std::int64_t>{7, 10});
  REQUIRE(g1.copies.size() == 3);
  CHECK(g1.copies[0].name == "outputs");
  CHECK(g1.copies[0].pass == Pass::forward);
  CHECK(g1.copies[0].after_gemm == 0);  // after its forward group
  CHECK(g1.copies[1].name == "input grads");
  CHECK(g1.copies[1].pass == Pass::backward);
  CHECK(g1.copies[1].after_gemm == 1);  // after its data-gradient GEMM
  CHECK(g1.copies[2].name == "grads e0");
  CHECK(g1.copies[2].after_gemm == 2);  // after its weight-gradient GEMM
  CHECK_THROWS_AS(extract_gpu_tasks(plan, 2, hidden, 2), std::invalid_argument);
  // A Copy Engine leg from the instance's own GPU (the dispatch brought the tokens there already)
  // copies nothing, on either GPU.
  Plan there = plan;
  there.routes.push_back({0, 2, 3, Carrier::copy_engine, 1, 0});
  REQUIRE_FALSE(find_plan_defect(there, 2, 2));
  CHECK(extract_gpu_tasks(there, 0, hidden, 2).copies.size() == 2);
  CHECK(extract_gpu_tasks(there, 1, hidden, 2).copies.size() == 3);
}

TEST_CASE("plans.jsonl is read line by line, with the line in errors") {
  const auto dir = test::scratch_dir("cuda_host_plans");
  const auto path = (dir / "plans.jsonl").string();
  {
    Plan next_layer = two_gpu_plan();  // one plan per (step, micro-batch, layer)
    next_layer.layer = 3;
    std::ofstream out(path);
    out << plan_to_json(two_gpu_plan()).dump() << "\n\n" << plan_to_json(next_layer).dump() << "\n";
  }
  CHECK(load_gpu_tasks(path, 0, 0, 64, 2).size() == 2);
  CHECK(load_gpu_tasks(path, 1, 0, 64, 2).size() == 1);
  const auto bad = (dir / "bad.jsonl").string();
  {
    std::ofstream out(bad);
    out << plan_to_json(two_gpu_plan()).dump() << "\n{not json\n";
  }
  try {
    load_gpu_tasks(bad, 0, 0, 64, 2);
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("bad.jsonl") != std::string::npos);
    CHECK(std::string(e.what()).find("2") != std::string::npos);
  }
}

TEST_CASE("checksums: the CPU value of a pattern, and a wrong copy gives another value") {
  std::vector<std::uint32_t> buf(1000);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = pattern_word(7, i);
  const std::uint64_t good = expected_pattern_checksum(7, buf.size());
  CHECK(checksum_words(buf.data(), buf.size()) == good);
  CHECK(checksum_words(buf.data() + 1, buf.size() - 1) != expected_pattern_checksum(7, buf.size() - 1));  // shifted
  CHECK(expected_pattern_checksum(7, buf.size() - 1) != good);  // truncated
  std::vector<std::uint32_t> zeros(1000, 0);
  CHECK(checksum_words(zeros.data(), zeros.size()) != good);  // nothing copied
  std::swap(buf[3], buf[4]);
  CHECK(checksum_words(buf.data(), buf.size()) != good);  // reordered
  CHECK(checksum_word_count(4095) == 1023);
  CHECK(pattern_word(1, 0) != pattern_word(2, 0));
}

TEST_CASE("the runner's output is a measured-timeline document in the simulator's event schema") {
  RunRecord r;
  r.step = 1;
  r.layer = 4;
  TimelineEvent e;
  e.gpu = 3;
  e.track = Track::copy_engine;
  e.pass = Pass::backward;
  e.name = "gradients i1 3->0";
  e.start_ps = ms_to_ps(0.001);
  e.end_ps = ms_to_ps(0.0025);
  e.bytes = 2048;
  r.events.push_back(e);
  const auto j = run_records_to_json("NVIDIA H100", {r});
  CHECK(j["format"] == "epsim-measured-timeline");
  CHECK(j["version"] == 1);
  CHECK(j["gpu_name"] == "NVIDIA H100");
  const auto& ev = j["records"][0]["events"][0];
  CHECK(j["records"][0]["layer"] == 4);
  CHECK(ev["track"] == "copy_engine");
  CHECK(ev["pass"] == "backward");
  CHECK(ev["start_ps"] == 1000000);
  CHECK(ev["end_ps"] == 2500000);
  CHECK(ev["bytes"] == 2048.0);
  CHECK(ev.size() == 7);
  CHECK(ms_to_ps(-1) == 0);
  // 0.2544586 ms is 254458599.99999997 ps in doubles: the nearest picosecond, not the one below.
  CHECK(ms_to_ps(0.2544586) == 254458600);
}

TEST_CASE("epsim-hw lists and sizes too large to hold are refused, not wrapped") {
  // Doubling up to the largest 64-bit integer: 2^0 .. 2^62 are listed, and the next doubling, which
  // would pass 2^63, ends the list (before, it wrapped and the list grew without end).
  const HwArgs a = parse_hw_args({"bench", "--tokens", "1:9223372036854775807:pow2"}, {"tokens"});
  const std::vector<std::int64_t> all = a.integers("tokens", {}, 1, INT64_MAX);
  REQUIRE(all.size() == 63);
  CHECK(all.front() == 1);
  CHECK(all.back() == (std::int64_t{1} << 62));
  CHECK_THROWS_WITH_AS(a.integers("tokens", {}, 1, 1 << 20), doctest::Contains("outside [1, 1048576]"),
                       std::invalid_argument);
  // 2^33 G is 2^63 bytes: one past the largest; 2^33 - 1 G fits.
  CHECK_THROWS_WITH_AS(parse_sizes("8589934592G"), doctest::Contains("size '8589934592G' is too large"),
                       std::invalid_argument);
  CHECK(parse_sizes("8589934591G") == std::vector<std::int64_t>{(std::int64_t{8589934591}) << 30});
}
