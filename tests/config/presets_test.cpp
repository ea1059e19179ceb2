// The hardware presets of models/: each loads, holds the figures its sources give (worked out by hand
// below), carries a source for every value, and is found by name or file stem.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/config/loaders.hpp"
#include "sim/config/preset_lookup.hpp"
#include "sim/core/input_error.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace {

namespace fs = std::filesystem;
using epsim::HardwareSpec;

const std::vector<std::string> kPresets = {"b200", "gb200-nvl72", "h100-sxm-8", "h20", "h200", "h800"};

std::string models() { return (epsim::test::source_dir() / "models").string(); }
HardwareSpec preset(const std::string& stem) { return epsim::load_hardware(models() + "/" + stem + ".yaml"); }

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const epsim::InputError& e) {
    return e.what();
  }
  return "";
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

TEST_CASE("every hardware preset loads and fills every key, the optional ones included") {
  for (const std::string& stem : kPresets) {
    CAPTURE(stem);
    const HardwareSpec hw = preset(stem);
    CHECK(hw.name == (stem == "h100-sxm-8" ? "h100-sxm-8-ndr" : stem));
    CHECK_FALSE(hw.description.empty());
    CHECK(hw.gpu.fp8_peak_TFLOPs > 0);
    CHECK_FALSE(hw.gemm.fp8_efficiency.empty());
    CHECK(hw.ep_backend.sm_GBps > 0);
    CHECK(hw.ep_backend.dispatch_fixed_us > 0);
    CHECK(hw.ep_backend.combine_fixed_us > 0);
    // Hopper and Blackwell tensor cores run FP8 at twice the dense BF16 rate.
    CHECK(hw.gpu.fp8_peak_TFLOPs == doctest::Approx(2 * hw.gpu.bf16_peak_TFLOPs).epsilon(1e-3));
    // Published efficiencies are below the peak and do not fall as experts get more rows.
    for (const auto* curve : {&hw.gemm.efficiency, &hw.gemm.fp8_efficiency})
      for (std::size_t i = 1; i < curve->size(); ++i) CHECK((*curve)[i].efficiency >= (*curve)[i - 1].efficiency);
    CHECK(hw.gemm.efficiency.back().efficiency < 0.81);  // no GEMM beats MAMF's 80.3% of peak on H100
    // Every cluster here has one 400 Gb/s NIC per GPU and 8 GPUs per node but NVL72's 72.
    CHECK(hw.infiniband.nic_bw_GBps == 50);
    CHECK(hw.gpus_per_node == (stem == "gb200-nvl72" ? 72 : 8));
  }
}

TEST_CASE("the presets hold the published figures") {
  const HardwareSpec h800 = preset("h800");
  CHECK(h800.nvlink.port_bw_GBps == 200);  // 8 links, 400 GB/s bidirectional
  // DeepSeek's measured 160 GB/s is the effective rate: 200 x 0.8.
  CHECK(h800.nvlink.port_bw_GBps * h800.ep_backend.nvlink_efficiency == doctest::Approx(160));
  CHECK(h800.gpu.sms == 132);
  CHECK(h800.gpu.bf16_peak_TFLOPs == doctest::Approx(989.4));
  // DeepEP V1 EP8 on H800 (4096 tokens x 8 ranks, 8 of 256 experts per token): a rank receives the tokens
  // that hit one of its 32 experts, 1 - C(224,8)/C(256,8) = 0.66183 of them, 21687 tokens of 7392 FP8 bytes
  // = 160.31 MB; at 160 GB/s plus the fixed cost that is 153.6 GB/s against the published 153.
  const double received_MB = 4096.0 * 8 * 0.66183 * 7392 / 1e6;
  const double dispatch_us = received_MB / (h800.nvlink.port_bw_GBps * h800.ep_backend.nvlink_efficiency) * 1e3 +
                             h800.ep_backend.dispatch_fixed_us;
  CHECK(received_MB / dispatch_us * 1e3 == doctest::Approx(153).epsilon(0.01));
  // Combine counts the same rows in BF16 (14336 bytes): published 158 GB/s.
  const double combine_us = received_MB * 14336 / 7392 / 160 * 1e3 + h800.ep_backend.combine_fixed_us;
  CHECK(received_MB * 14336 / 7392 / combine_us * 1e3 == doctest::Approx(158).epsilon(0.01));

  const HardwareSpec gb200 = preset("gb200-nvl72");
  CHECK(gb200.gpus_per_node == 72);  // one NVLink domain per rack
  CHECK(gb200.total_gpus() == 144);
  CHECK(gb200.nvlink.port_bw_GBps == 900);
  CHECK(gb200.gpu.bf16_peak_TFLOPs == 2500);  // 180 PF per rack / 72

  const HardwareSpec b200 = preset("b200");
  CHECK(b200.gpu.sms == 148);
  CHECK(b200.gpu.bf16_peak_TFLOPs == 2250);
  CHECK(b200.nvlink.port_bw_GBps == 900);
  CHECK(b200.gpu.hbm_capacity_GB == 180);
  // DeepEP on B200 at 24 SMs: 349 GB/s FP8 dispatch, 420 combine; 24 x sm_GBps lies between them.
  CHECK(24 * b200.ep_backend.sm_GBps > 349);
  CHECK(24 * b200.ep_backend.sm_GBps < 420);

  const HardwareSpec h20 = preset("h20");
  CHECK(h20.gpu.sms == 78);
  CHECK(h20.gpu.bf16_peak_TFLOPs == 148);
  CHECK(h20.gpu.hbm_capacity_GB == 96);
  CHECK(h20.nvlink.port_bw_GBps == 450);
  // DeepEP EP8 on H20 with 24 SMs: 337.35 GB/s, held back by its SMs.
  CHECK(24 * h20.ep_backend.sm_GBps == doctest::Approx(337.35).epsilon(0.01));

  const HardwareSpec h200 = preset("h200");
  CHECK(h200.gpu.hbm_capacity_GB == 141);
  CHECK(h200.gpu.hbm_GBps == doctest::Approx(4800.0 * 2800 / 3350).epsilon(0.001));  // H100's achievable share
  CHECK(h200.copy_engine.bw_GBps == 396);

  const HardwareSpec h100 = preset("h100-sxm-8");
  // DeepGEMM FP8 at 128 rows: (533 + 510) / 2 of 1979 TFLOP/s.
  CHECK(h100.gemm.fp8_efficiency.front().tokens_per_expert == 128);
  CHECK(h100.gemm.fp8_efficiency.front().efficiency == doctest::Approx((533.0 + 510) / 2 / 1979).epsilon(0.002));
}

TEST_CASE("no preset file says placeholder or leaves a value to be calibrated") {
  for (const epsim::PresetFile& p : epsim::list_presets(models())) {
    CAPTURE(p.path);
    const std::string text = lower(epsim::test::read_file(p.path));
    CHECK(text.find("placeholder") == std::string::npos);
    CHECK(text.find("assumption to be calibrated") == std::string::npos);
  }
}

TEST_CASE("every value of a preset has a source comment") {
  for (const std::string& stem : kPresets) {
    CAPTURE(stem);
    const epsim::PresetComments c = epsim::read_preset_comments(models() + "/" + stem + ".yaml");
    for (const char* key :
         {"nodes", "gpus_per_node", "gpu.sms", "gpu.bf16_peak_TFLOPs", "gpu.fp8_peak_TFLOPs", "gpu.hbm_GBps",
          "gpu.hbm_capacity_GB", "gemm.row_alignment", "gemm.launch_us", "gemm.efficiency", "gemm.fp8_efficiency",
          "copy_engine.bw_GBps", "copy_engine.fixed_cost_us", "copy_engine.hbm_traffic_factor", "nvlink.port_bw_GBps",
          "nvlink.latency_us", "infiniband.nic_bw_GBps", "infiniband.latency_us", "pcie.h2d_GBps", "pcie.d2h_GBps",
          "pcie.latency_us", "ep_backend.comm_sms", "ep_backend.sm_GBps", "ep_backend.dispatch_fixed_us",
          "ep_backend.combine_fixed_us", "ep_backend.dispatch_engine", "ep_backend.combine_engine",
          "ep_backend.internode_route", "ep_backend.token_copies", "ep_backend.nvlink_efficiency", "ep_backend.ib_efficiency",
          "ep_backend.message_efficiency"}) {
      CAPTURE(key);
      CHECK(c.keys.count(key) == 1);
    }
    const HardwareSpec hw = preset(stem);
    // Each point of a curve carries its own arithmetic or source.
    REQUIRE(c.points.count("gemm.fp8_efficiency") == 1);
    CHECK(c.points.at("gemm.fp8_efficiency").size() == hw.gemm.fp8_efficiency.size());
    for (const std::string& note : c.points.at("gemm.fp8_efficiency")) CHECK_FALSE(note.empty());
  }
}

TEST_CASE("comments are read per key path, from the key's line or the lines above it") {
  const fs::path dir = epsim::test::scratch_dir("preset-comments");
  epsim::test::write_file(dir / "c.yaml",
                          "kind: hardware   # top\n"
                          "gpu:\n"
                          "  sms: 7          # seven 'quoted # not a comment'\n"
                          "  # the block above\n"
                          "  # a second line\n"
                          "  hbm_GBps: 1\n"
                          "gemm:\n"
                          "  efficiency:\n"
                          "    - [1, 0.5]    # first\n"
                          "    - [2, 0.6]\n"
                          "  launch_us: 2\n"
                          "\n"
                          "# a comment cut off by a blank line\n"
                          "\n"
                          "nodes: 1\n"
                          "sms: 3 # a top-level sms, not gpu.sms\n");
  const epsim::PresetComments c = epsim::read_preset_comments((dir / "c.yaml").string());
  CHECK(c.keys.at("kind") == "top");
  CHECK(c.keys.at("gpu.sms") == "seven 'quoted # not a comment'");
  CHECK(c.keys.at("gpu.hbm_GBps") == "the block above a second line");
  CHECK(c.keys.count("gemm.efficiency") == 0);
  CHECK(c.points.at("gemm.efficiency") == std::vector<std::string>{"first", ""});
  CHECK(c.keys.count("gemm.launch_us") == 0);
  CHECK(c.keys.count("nodes") == 0);
  CHECK(c.keys.at("sms") == "a top-level sms, not gpu.sms");
}

TEST_CASE("presets are found by name: or by file stem, an unknown name lists the known ones") {
  const std::vector<epsim::PresetFile> all = epsim::list_presets(models());
  std::vector<std::string> names;
  for (const auto& p : all) names.push_back(p.name);
  CHECK(std::is_sorted(names.begin(), names.end()));
  for (const char* name : {"b200", "gb200-nvl72", "h100-sxm-8-ndr", "h20", "h200", "h800"})
    CHECK(std::count(names.begin(), names.end(), name) == 1);
  // Model files share the folder and are not presets.
  CHECK(std::count(names.begin(), names.end(), "glm5-like-128") == 0);

  const std::string by_stem = epsim::find_preset("h100-sxm-8", models()).path;
  CHECK(by_stem == epsim::find_preset("h100-sxm-8-ndr", models()).path);
  CHECK(fs::path(by_stem).filename() == "h100-sxm-8.yaml");

  const std::string message = error_of([] { epsim::find_preset("h900", models()); });
  CHECK(message.find("unknown hardware preset 'h900'") != std::string::npos);
  CHECK(message.find("b200, gb200-nvl72, h100-sxm-8-ndr (file h100-sxm-8.yaml), h20, h200, h800") !=
        std::string::npos);
}

TEST_CASE("EPSIM_MODELS_DIR overrides the compiled-in models folder") {
  const fs::path dir = epsim::test::scratch_dir("preset-override");
  fs::copy_file(epsim::test::source_dir() / "models/h800.yaml", dir / "mine.yaml");
  epsim::test::write_file(dir / "model.yaml", "kind: model\nname: not-a-preset\n");
  epsim::test::write_file(dir / "notes.txt", "kind: hardware\n");  // not a .yaml file
  const char* saved = std::getenv("EPSIM_MODELS_DIR");
  const std::string restore = saved ? saved : "";
  setenv("EPSIM_MODELS_DIR", dir.string().c_str(), 1);
  const std::string found = epsim::models_dir();
  const std::vector<epsim::PresetFile> presets = epsim::list_presets(found);
  if (saved)
    setenv("EPSIM_MODELS_DIR", restore.c_str(), 1);
  else
    unsetenv("EPSIM_MODELS_DIR");
  CHECK(found == dir.string());
  REQUIRE(presets.size() == 1);
  CHECK(presets[0].name == "h800");  // its name: key, not the file stem
  CHECK(presets[0].stem == "mine");

  // Unset (or empty), the source tree's folder is used.
  unsetenv("EPSIM_MODELS_DIR");
  CHECK(fs::equivalent(epsim::models_dir(), models()));
  if (saved) setenv("EPSIM_MODELS_DIR", restore.c_str(), 1);
}

TEST_CASE("a models folder with two presets of one name, a broken YAML file, or no folder at all is an error") {
  const fs::path dir = epsim::test::scratch_dir("preset-duplicates");
  fs::copy_file(epsim::test::source_dir() / "models/h800.yaml", dir / "a.yaml");
  fs::copy_file(epsim::test::source_dir() / "models/h800.yaml", dir / "b.yaml");
  CHECK(error_of([&] { epsim::list_presets(dir.string()); }) ==
        (dir / "b.yaml").string() + ":name: hardware preset name 'h800' is also the name of " + (dir / "a.yaml").string() +
            "; each preset in the models folder needs its own name");
  fs::remove(dir / "b.yaml");
  epsim::test::write_file(dir / "broken.yaml", "kind: hardware\nname: [unclosed\n");
  CHECK(error_of([&] { epsim::list_presets(dir.string()); }).rfind((dir / "broken.yaml").string() + ":", 0) == 0);
  CHECK(error_of([&] { epsim::list_presets((dir / "missing").string()); })
            .find("the models folder does not exist") != std::string::npos);
}
