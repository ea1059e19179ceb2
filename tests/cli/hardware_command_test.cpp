// `epsim hardware list` and `epsim hardware show NAME`, run as a user runs them.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace {

namespace fs = std::filesystem;
using epsim::test::CliResult;
using epsim::test::run_epsim;

// The tests below read the source tree's presets whatever the calling environment says.
const char* kDefaultFolder = "unset EPSIM_MODELS_DIR;";

}  // namespace

TEST_CASE("epsim hardware list prints one line per preset, sorted by name") {
  const fs::path dir = epsim::test::scratch_dir("hardware-list");
  const CliResult r = run_epsim("hardware list", dir, kDefaultFolder);
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::size_t last = 0;
  for (const char* line : {"\nb200 ", "\ngb200-nvl72 ", "\nh100-sxm-8-ndr ", "\nh20 ", "\nh200 ", "\nh800 "}) {
    CAPTURE(line);
    const std::size_t at = r.out.find(line);
    REQUIRE(at != std::string::npos);
    CHECK(at > last);
    last = at;
  }
  // GPUs as nodes x GPUs per NVLink domain, and the NVLink and NIC rates of the H800 line.
  CHECK(r.out.find("144 = 2x72") != std::string::npos);
  const std::string h800 = r.out.substr(r.out.find("\nh800 "));
  CHECK(h800.find(" 64 = 8x8 ") != std::string::npos);
  CHECK(h800.find("  200      50  H800 SXM") != std::string::npos);
}

TEST_CASE("epsim hardware show prints each value with its unit and source") {
  const fs::path dir = epsim::test::scratch_dir("hardware-show");
  const CliResult r = run_epsim("hardware show h800", dir, kDefaultFolder);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("hardware preset h800 (") != std::string::npos);
  CHECK(r.out.find("  nvlink.port_bw_GBps = 200 GB/s per direction\n"
                   "      source: 8 NVLink links: 400 GB/s bidirectional = 200 per direction") != std::string::npos);
  CHECK(r.out.find("  ep_backend.nvlink_efficiency = 0.8 fraction of line rate\n      source: derived: 160 / 200") !=
        std::string::npos);
  CHECK(r.out.find("      128 rows: 0.264   # dense M=128: (533 + 510) / 2 / 1979") != std::string::npos);
  CHECK(r.out.find("      1048576 bytes: 1") != std::string::npos);
  // The engine settings a run on the preset gets: the presets name none, so the loader's defaults.
  CHECK(r.out.find("  engine.bandwidth_sharing = auto (exact up to 256 GPUs, coupled up to 1024, local beyond)\n"
                   "      source: not in the file: the loader's default\n") != std::string::npos);
  CHECK(r.out.find("  engine.exact_max_gpus = 256 GPUs (auto: exact up to this many)\n") != std::string::npos);
  CHECK(r.out.find("  engine.coupled_gpus = 0.1 share of GPUs whose links follow their senders (coupled)\n") !=
        std::string::npos);
  // By file stem too.
  const CliResult stem = run_epsim("hardware show h100-sxm-8", dir, kDefaultFolder);
  CHECK(stem.status == 0);
  CHECK(stem.out.find("hardware preset h100-sxm-8-ndr (") != std::string::npos);
}

TEST_CASE("epsim hardware show with an unknown name exits 2 and lists the known names") {
  const fs::path dir = epsim::test::scratch_dir("hardware-unknown");
  const CliResult r = run_epsim("hardware show h900", dir, kDefaultFolder);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("epsim: error: command line: unknown hardware preset 'h900'; known presets: b200, gb200-nvl72, "
                   "h100-sxm-8-ndr (file h100-sxm-8.yaml), h20, h200, h800") == 0);
  CHECK(run_epsim("hardware show", dir, kDefaultFolder).status == 2);
  CHECK(run_epsim("hardware frobnicate", dir, kDefaultFolder).status == 2);
  CHECK(run_epsim("hardware", dir, kDefaultFolder).status == 2);
}

TEST_CASE("epsim hardware --help, list --help and show --help describe the commands") {
  const fs::path dir = epsim::test::scratch_dir("hardware-help");
  const CliResult top = run_epsim("hardware --help", dir);
  CHECK(top.status == 0);
  CHECK(top.out.find("epsim hardware show NAME") != std::string::npos);
  const CliResult list = run_epsim("hardware list --help", dir);
  CHECK(list.status == 0);
  CHECK(list.out.find("epsim hardware list") != std::string::npos);
  const CliResult show = run_epsim("hardware show --help", dir);
  CHECK(show.status == 0);
  CHECK(show.out.find("epsim hardware show NAME") != std::string::npos);
  CHECK(run_epsim("--help", dir).out.find("hardware list|show") != std::string::npos);
}

TEST_CASE("EPSIM_MODELS_DIR points epsim hardware at another folder") {
  const fs::path dir = epsim::test::scratch_dir("hardware-env");
  fs::create_directories(dir / "presets");
  fs::copy_file(epsim::test::source_dir() / "models/h20.yaml", dir / "presets/h20.yaml");
  fs::copy_file(epsim::test::source_dir() / "models/glm5-like-128.yaml", dir / "presets/glm5-like-128.yaml");
  const std::string env = "export EPSIM_MODELS_DIR='" + (dir / "presets").string() + "';";
  const CliResult list = run_epsim("hardware list", dir, env);
  INFO(list.err);
  REQUIRE(list.status == 0);
  CHECK(list.out.find("\nh20 ") != std::string::npos);
  CHECK(list.out.find("h800") == std::string::npos);
  CHECK(list.out.find("glm5") == std::string::npos);
  CHECK(run_epsim("hardware show h20", dir, env).out.find("  gpu.sms = 78 SMs\n") != std::string::npos);
  const CliResult missing = run_epsim("hardware show h800", dir, env);
  CHECK(missing.status == 2);
  CHECK(missing.err.find("known presets: h20 (the kind: hardware files of " + (dir / "presets").string()) !=
        std::string::npos);
}

TEST_CASE("epsim hardware show: a missing NAME is named, a description has no source, a point without a note none, a curve not given its default, FP8 absent its reason") {
  const fs::path dir = epsim::test::scratch_dir("hardware-show-details");
  const CliResult none = run_epsim("hardware show", dir, kDefaultFolder);
  CHECK(none.status == 2);
  CHECK(none.err == "epsim: error: command line: missing NAME (see epsim hardware list)\n");
  // The H100 preset with the note of one point of its message-efficiency curve taken out.
  fs::create_directories(dir / "presets");
  std::string preset = epsim::test::read_file(epsim::test::source_dir() / "models/h100-sxm-8.yaml");
  const std::string noted = "    - [4096, 1.0]         # 4 KiB\n";
  REQUIRE(preset.find(noted) != std::string::npos);
  preset.replace(preset.find(noted), noted.size(), "    - [4096, 1.0]\n");
  // ... and without its FP8 efficiency curve, which the loader then leaves empty.
  const std::size_t fp8 = preset.find("  fp8_efficiency:\n");
  REQUIRE(fp8 != std::string::npos);
  preset.erase(fp8, preset.find("copy_engine:\n", fp8) - fp8);
  // ... and, as a GPU without FP8 tensor cores, an FP8 peak of 0.
  const std::string peak = "  fp8_peak_TFLOPs: 1978.9";
  REQUIRE(preset.find(peak) != std::string::npos);
  preset.replace(preset.find(peak), peak.size(), "  fp8_peak_TFLOPs: 0");
  epsim::test::write_file(dir / "presets/h100-sxm-8.yaml", preset);
  const CliResult r =
      run_epsim("hardware show h100-sxm-8", dir, "export EPSIM_MODELS_DIR='" + (dir / "presets").string() + "';");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("\n      4096 bytes: 1\n      1048576 bytes: 1   # 1 MiB and above\n") != std::string::npos);
  CHECK(r.out.find("  gpu.fp8_peak_TFLOPs = 0 (no FP8 tensor cores: FP8 GEMMs are refused)\n") != std::string::npos);
  CHECK(r.out.find("  gemm.fp8_efficiency (fraction of gpu.fp8_peak_TFLOPs vs padded rows per expert): not given\n"
                   "      source: not in the file: the loader's default\n") != std::string::npos);
  // The name and the description are the file's own words: no source line follows them.
  const std::size_t description = r.out.find("\n  description = H100 SXM 80GB");
  REQUIRE(description != std::string::npos);
  CHECK(r.out.compare(r.out.find('\n', description + 1), 9, "\n  nodes ") == 0);
}
