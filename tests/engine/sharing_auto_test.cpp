// engine.bandwidth_sharing: auto. Exact max-min sharing up to engine.exact_max_gpus simulated GPUs,
// coupled up to engine.coupled_max_gpus, local beyond: read from a hardware file, resolved by the GPU
// count, and what a layer then runs with (the same times, to the picosecond, as the mode it resolves
// to).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/engine/random_layer.hpp"
#include "tests/test_paths.hpp"

namespace {

/// The H100 preset with `engine` appended as its engine block.
std::string preset_with_engine(const std::string& engine) {
  std::ifstream in((epsim::test::source_dir() / "models/h100-sxm-8.yaml").string());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = (epsim::test::scratch_dir("sharing_auto") / "hw.yaml").string();
  std::ofstream(path) << text << "\nengine:\n" << engine;
  return path;
}

}  // namespace

TEST_CASE("auto sharing: read from a hardware file, with its GPU threshold") {
  using namespace epsim;
  const HardwareSpec plain = load_hardware(preset_with_engine("  bandwidth_sharing: auto\n"));
  CHECK(plain.engine.bandwidth_sharing == BandwidthSharing::automatic);
  CHECK(plain.engine.exact_max_gpus == 256);
  CHECK(plain.engine.coupled_max_gpus == 1024);
  CHECK(std::string(to_string(BandwidthSharing::automatic)) == "auto");
  const HardwareSpec set =
      load_hardware(preset_with_engine("  bandwidth_sharing: auto\n  exact_max_gpus: 16\n"));
  CHECK(set.engine.exact_max_gpus == 16);
  CHECK_THROWS_AS(load_hardware(preset_with_engine("  exact_max_gpus: 0\n")), InputError);
  CHECK_THROWS_AS(load_hardware(preset_with_engine("  exact_max_gpus: 12.5\n")), InputError);
  CHECK_THROWS_AS(load_hardware(preset_with_engine("  exact_max_gpus: many\n")), InputError);
  // 0 (or any count not above exact_max_gpus) leaves auto no coupled range.
  CHECK(load_hardware(preset_with_engine("  coupled_max_gpus: 0\n")).engine.coupled_max_gpus == 0);
  CHECK(load_hardware(preset_with_engine("  coupled_max_gpus: 2048\n")).engine.coupled_max_gpus == 2048);
  for (const char* bad : {"  coupled_max_gpus: -1\n", "  coupled_max_gpus: 600.5\n", "  coupled_max_gpus: all\n"}) {
    INFO(bad);
    try {
      load_hardware(preset_with_engine(bad));
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find("coupled_max_gpus") != std::string::npos);
      CHECK(std::string(e.what()).find("hw.yaml") != std::string::npos);
    }
  }
}

TEST_CASE("a bandwidth sharing's name reads back as its mode, and no other name does") {
  using namespace epsim;
  const std::vector<std::pair<BandwidthSharing, std::string>> modes = {
      {BandwidthSharing::exact, "exact"},       {BandwidthSharing::epochs, "epochs"},
      {BandwidthSharing::per_link, "per_link"}, {BandwidthSharing::local, "local"},
      {BandwidthSharing::coupled, "coupled"},   {BandwidthSharing::automatic, "auto"}};
  for (const auto& [mode, name] : modes) {
    CHECK(std::string(to_string(mode)) == name);
    CHECK(bandwidth_sharing_from_string(name) == mode);
  }
  for (const char* other : {"", "automatic", "Exact", "per-link", "local ", "max-min"})
    CHECK_FALSE(bandwidth_sharing_from_string(other).has_value());
}

TEST_CASE("auto sharing: exact up to exact_max_gpus, coupled up to coupled_max_gpus, local beyond, other modes whatever the size") {
  using namespace epsim;
  EngineSpec engine;
  engine.bandwidth_sharing = BandwidthSharing::automatic;
  CHECK(sharing_for(engine, 1) == BandwidthSharing::exact);
  CHECK(sharing_for(engine, 256) == BandwidthSharing::exact);
  CHECK(sharing_for(engine, 257) == BandwidthSharing::coupled);
  CHECK(sharing_for(engine, 1024) == BandwidthSharing::coupled);
  CHECK(sharing_for(engine, 1025) == BandwidthSharing::local);
  CHECK(sharing_for(engine, 2048) == BandwidthSharing::local);
  engine.exact_max_gpus = 16;
  CHECK(sharing_for(engine, 16) == BandwidthSharing::exact);
  CHECK(sharing_for(engine, 17) == BandwidthSharing::coupled);
  // A coupled bound not above the exact one leaves no coupled range.
  for (const int none : {0, 8, 16}) {
    engine.coupled_max_gpus = none;
    CHECK(sharing_for(engine, 16) == BandwidthSharing::exact);
    CHECK(sharing_for(engine, 17) == BandwidthSharing::local);
  }
  for (const BandwidthSharing fixed : {BandwidthSharing::exact, BandwidthSharing::epochs, BandwidthSharing::per_link,
                                       BandwidthSharing::local, BandwidthSharing::coupled}) {
    engine.bandwidth_sharing = fixed;
    CHECK(sharing_for(engine, 8) == fixed);
    CHECK(sharing_for(engine, 2048) == fixed);
  }
}

TEST_CASE("auto sharing: a layer runs with the mode its GPU count picks") {
  // Local and exact give different times on 4 nodes with skewed traffic (within 0.2%, but not to the
  // picosecond: a GPU's sending and receiving sides run on their own), so the test tells which ran.
  using namespace epsim;
  HardwareSpec hw = load_hardware((test::source_dir() / "models/h100-sxm-8.yaml").string());
  const ModelSpec model = load_model((test::source_dir() / "models/glm5-like-128.yaml").string());
  const int ep = 32;
  hw.nodes = std::max(hw.nodes, ep / hw.gpus_per_node);
  const Plan plan = test::random_static_plan(hw, model, ep, 2048, 1);
  const std::vector<std::int64_t> local(static_cast<std::size_t>(ep), 2048);
  const auto run = [&](BandwidthSharing sharing, int exact_max_gpus, int coupled_max_gpus = 0) {
    hw.engine.bandwidth_sharing = sharing;
    hw.engine.exact_max_gpus = exact_max_gpus;
    hw.engine.coupled_max_gpus = coupled_max_gpus;
    return test::gpu_finish(simulate_layer(hw, model, plan, local, true), ep);
  };
  const std::vector<Time_ps> exact = run(BandwidthSharing::exact, 64);
  const std::vector<Time_ps> local_times = run(BandwidthSharing::local, 64);
  // coupled_gpus 1: every group follows, so that coupled differs from local here for certain.
  hw.engine.coupled_gpus = 1;
  const std::vector<Time_ps> coupled_times = run(BandwidthSharing::coupled, 64);
  REQUIRE(exact != local_times);
  REQUIRE(coupled_times != local_times);
  REQUIRE(coupled_times != exact);
  CHECK(run(BandwidthSharing::automatic, 32) == exact);
  CHECK(run(BandwidthSharing::automatic, 64) == exact);
  CHECK(run(BandwidthSharing::automatic, 31) == local_times);
  CHECK(run(BandwidthSharing::automatic, 8) == local_times);
  CHECK(run(BandwidthSharing::automatic, 31, 32) == coupled_times);
  CHECK(run(BandwidthSharing::automatic, 8, 512) == coupled_times);
  CHECK(run(BandwidthSharing::automatic, 8, 31) == local_times);
  CHECK(run(BandwidthSharing::automatic, 32, 512) == exact);
}
