// Reading sweep files: what each point sees (grid values, --set, presets, generated traces) and the
// one clear error for each kind of mistake.
#include <doctest/doctest.h>

#include <filesystem>

#include "sim/core/input_error.hpp"
#include "sim/sweep/point_result.hpp"
#include "sim/sweep/sweep_loader.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/sweep/sweep_test_files.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim;
using namespace epsim::test;

namespace {

SweepSpec load(const std::string& name, const std::string& body, const std::vector<std::string>& sets = {}) {
  const fs::path dir = scratch_dir(name);
  write_file(dir / "s.yaml", sweep_yaml(body));
  return load_sweep((dir / "s.yaml").string(), sets);
}

/// The InputError message a sweep file gives.
std::string error_of(const std::string& body, const std::vector<std::string>& sets = {}) {
  try {
    load("sweep_errors", body, sets);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("sweep: the grid's first axis varies slowest, ids are stable and distinct") {
  const SweepSpec s = load("sweep_grid", "grid:\n  ep_degree: [8, 16]\n  nvlink.port_bw_GBps: [100, 450]\n");
  REQUIRE(s.points.size() == 4);
  CHECK(s.columns == std::vector<std::string>{"ep_degree", "nvlink.port_bw_GBps"});
  const int ep[] = {8, 8, 16, 16};
  const double bw[] = {100, 450, 100, 450};
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(s.points[i].experiments.at(0).ep_degree == ep[i]);
    CHECK(s.points[i].experiments.at(0).hardware.nvlink.port_bw_GBps == bw[i]);
  }
  CHECK(s.points[0].id.rfind("ep_degree-8_port_bw_GBps-100-", 0) == 0);
  const SweepSpec again = load("sweep_grid2", "grid:\n  ep_degree: [8, 16]\n  nvlink.port_bw_GBps: [100, 450]\n");
  CHECK(again.points[3].id == s.points[3].id);
  CHECK(again.hash == s.hash);
}

TEST_CASE("sweep: --set changes the hardware every point sees, and overrides the file's set:") {
  // The H100 preset has 132 SMs (models/h100-sxm-8.yaml).
  const SweepSpec base = load("sweep_set0", "grid:\n  ep_degree: [8, 16]\n");
  CHECK(base.points[0].experiments[0].hardware.gpu.sms == 132);
  const SweepSpec s = load("sweep_set1", "set:\n  gpu.sms: 100\ngrid:\n  ep_degree: [8, 16]\n", {"gpu.sms=120"});
  for (const SweepPoint& p : s.points) CHECK(p.experiments[0].hardware.gpu.sms == 120);
  CHECK(s.points[0].hash != base.points[0].hash);
  const SweepSpec f = load("sweep_set2", "set:\n  gpu.sms: 100\ngrid:\n  ep_degree: [8, 16]\n");
  CHECK(f.points[1].experiments[0].hardware.gpu.sms == 100);
  // A hardware preset by name, then one of its keys changed in the same point.
  const SweepSpec h = load("sweep_set3", "points:\n  - {hardware: h800}\n  - {hardware: h800, gpu.sms: 100}\n");
  CHECK(h.points[0].experiments[0].hardware.name == "h800");
  CHECK(h.points[1].experiments[0].hardware.gpu.sms == 100);
  CHECK(h.points[0].experiments[0].hardware.source_file.find("h800.yaml") != std::string::npos);
}

TEST_CASE("sweep: every bundled sweep file loads") {
  int sweeps = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(source_dir() / "experiments")) {
    if (entry.path().extension() != ".yaml" || read_file(entry.path()).find("\nkind: sweep\n") == std::string::npos)
      continue;
    INFO(entry.path().string());
    const SweepSpec s = load_sweep(entry.path().string(), {});
    CHECK(!s.points.empty());
    ++sweeps;
  }
  CHECK(sweeps >= 4);  // sweep-ep, sweep-ep-wide, sweep-ep-1024, sweep-ultraep-nvl72
}

TEST_CASE("sweep: the bandwidth sharing is a hardware key a sweep may set or vary") {
  // The preset has no engine block: the key creates it.
  const SweepSpec s = load("sweep_sharing", "grid:\n  engine.bandwidth_sharing: [exact, per_link]\n");
  REQUIRE(s.points.size() == 2);
  CHECK(s.columns == std::vector<std::string>{"engine.bandwidth_sharing"});
  CHECK(s.points[0].experiments[0].hardware.engine.bandwidth_sharing == BandwidthSharing::exact);
  CHECK(s.points[1].experiments[0].hardware.engine.bandwidth_sharing == BandwidthSharing::per_link);
  CHECK(s.points[0].hash != s.points[1].hash);
  const SweepSpec set = load("sweep_sharing_set", "grid:\n  ep_degree: [8, 16]\n", {"engine.bandwidth_sharing=per_link"});
  for (const SweepPoint& p : set.points) CHECK(p.experiments[0].hardware.engine.bandwidth_sharing == BandwidthSharing::per_link);
  // The hardware loader still checks the value.
  CHECK(error_of("grid:\n  engine.bandwidth_sharing: [exact, fast]\n").find("bandwidth_sharing") != std::string::npos);
}

TEST_CASE("sweep: another expert count gets a generated trace with the point's experts and EP ranks") {
  const SweepSpec s = load("sweep_trace",
                           "trace:\n  tokens_per_rank: 512\n  zipf_alpha: 1.1\ngrid:\n  experts: [128, 256]\n"
                           "  ep_degree: [8, 16]\n");
  REQUIRE(s.points.size() == 4);
  const SweepPoint& p = s.points[3];  // 256 experts at EP 16
  REQUIRE(p.trace.has_value());
  CHECK(p.trace->experts == 256);
  CHECK(p.trace->top_k == 8);  // glm5-like-128's top-k
  CHECK(p.trace->ranks == 16);
  CHECK(p.trace->tokens_per_rank == 512);
  CHECK(p.trace->seed == 1);  // the experiment's seed
  CHECK(p.experiments[0].model.num_experts == 256);
  CHECK(s.points[0].trace_file != p.trace_file);
  // The same parameters give the same file name.
  const SweepSpec again = load("sweep_trace2",
                               "trace:\n  tokens_per_rank: 512\n  zipf_alpha: 1.1\ngrid:\n  experts: [128, 256]\n"
                               "  ep_degree: [8, 16]\n");
  CHECK(again.points[3].trace_file == p.trace_file);
}

TEST_CASE("sweep: without a trace block another expert count or top-k derives the experiment's trace") {
  const SweepSpec s = load("sweep_derive", "grid:\n  experts: [64, 128, 256]\n  top_k: [4, 8]\n");
  REQUIRE(s.points.size() == 6);
  // 128 experts, top-8 is the bundled trace itself; the others are derived from it.
  const SweepPoint& same = s.points[3];
  CHECK_FALSE(same.derive.has_value());
  CHECK(same.trace_file.empty());
  const SweepPoint& split = s.points[5];  // 256 experts, top-8
  REQUIRE(split.derive.has_value());
  CHECK(split.derive->experts == 256);
  CHECK(split.derive->top_k == 8);
  CHECK(split.derive_source.find("glm5-128e-ep16.eptrace") != std::string::npos);
  CHECK(split.trace_file.rfind("derived-", 0) == 0);
  const SweepPoint& merged = s.points[0];  // 64 experts, top-4
  REQUIRE(merged.derive.has_value());
  CHECK(merged.derive->experts == 64);
  CHECK(merged.derive->top_k == 4);
  CHECK(merged.trace_file != split.trace_file);
  CHECK(merged.hash != s.points[1].hash);
}

TEST_CASE("sweep: each mistake in a sweep file is one error naming the file, the line and what was expected") {
  CHECK(error_of("gird:\n  ep_degree: [8]\n").find("s.yaml:4:1: unknown key 'gird'") != std::string::npos);
  CHECK(error_of("gird:\n  ep_degree: [8]\n").find("did you mean 'grid'?") != std::string::npos);
  CHECK(error_of("grid:\n  ep_degre: [8]\n").find("s.yaml:5:3: cannot vary 'ep_degre'") != std::string::npos);
  CHECK(error_of("grid:\n  ep_degre: [8]\n").find("did you mean 'ep_degree'?") != std::string::npos);
  CHECK(error_of("grid:\n  ep_degree: 8\n").find("s.yaml:5:3: grid.ep_degree: expected a non-empty list") !=
        std::string::npos);
  CHECK(error_of("grid:\n  ep_degree: [8, 8]\n").find("s.yaml:5:18: grid.ep_degree: value 8 is listed twice") !=
        std::string::npos);
  // A wrong type is reported by the experiment loader's rule, for the point that has it.
  const std::string eight = error_of("grid:\n  ep_degree: [\"8\"]\n");
  CHECK(eight.find("point 0 (ep_degree=\"8\")") != std::string::npos);
  CHECK(eight.find("ep_degree: expected an integer") != std::string::npos);
  CHECK(error_of("grid:\n  ep_degree: [12]\n").find("does not divide the 128 experts") != std::string::npos);
  // 192 is neither a multiple nor a divisor of the bundled trace's 128 experts: no rule derives it.
  CHECK(error_of("grid:\n  experts: [192]\n").find("--experts 192 is neither a multiple nor a divisor of the trace's 128 experts") !=
        std::string::npos);
  CHECK(error_of("grid:\n  tokens_per_rank: [256]\n").find("trace keys need a `trace:` block") != std::string::npos);
  CHECK(error_of("grid:\n  ep_degree: [8]\npoints:\n  - {ep_degree: 8}\n").find("not both") != std::string::npos);
  CHECK(error_of("balancers:\n  - name: feplbb\n").find("did you mean 'feplb'?") != std::string::npos);
  CHECK(error_of("grid:\n  balancers.x.params.k: [1]\n").find("no balancer labelled 'x'") != std::string::npos);
  CHECK(error_of("grid:\n  ep_degree: [8]\n", {"ep_degree=16"}).find("varied by the grid and also set") !=
        std::string::npos);
  CHECK(error_of("", {"gpu.sms"}).find("expected --set KEY=VALUE") != std::string::npos);
  CHECK(error_of("points:\n  - {ep_degree: 8}\n  - {ep_degree: 8}\n").find("same values as point 0") !=
        std::string::npos);
}

TEST_CASE("sweep: mean, p50 and p95 interpolate between sorted records") {
  const MetricStats s = summarise({4, 1, 3, 2});
  CHECK(s[0] == doctest::Approx(2.5));   // mean
  CHECK(s[1] == doctest::Approx(2.5));   // p50: position 1.5
  CHECK(s[2] == doctest::Approx(3.85));  // p95: position 2.85, 3 + 0.85 x (4 - 3)
  CHECK(s[3] == 1);
  CHECK(s[4] == 4);
  const MetricStats one = summarise({7});
  CHECK(one[1] == 7);
  CHECK(one[2] == 7);
}

TEST_CASE("sweep: a balancer parameter as an axis reaches that balancer only, and is checked by it") {
  const SweepSpec s = load("sweep_params",
                           "balancers:\n  - name: static_ep\n  - name: feplb\n"
                           "grid:\n  balancers.feplb.params.dynamic_experts_per_gpu: [1, 3]\n");
  REQUIRE(s.points.size() == 2);
  CHECK(s.points[1].labels == std::vector<std::string>{"static_ep", "feplb"});
  CHECK(s.points[1].experiments[1].balancer.params["dynamic_experts_per_gpu"].as<int>() == 3);
  CHECK_FALSE(s.points[1].experiments[0].balancer.params.IsMap());
  CHECK(s.points[0].hash != s.points[1].hash);
  const std::string typo = error_of("balancers:\n  - name: feplb\ngrid:\n  balancers.feplb.params.dynamic_expert_per_gpu: [1]\n");
  CHECK(typo.find("point 0") != std::string::npos);
  CHECK(typo.find("unknown key 'dynamic_expert_per_gpu'") != std::string::npos);
}
