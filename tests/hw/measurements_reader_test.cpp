// The measurement format of docs/measurements.md: published sets (rates, sources, no machine details),
// the bundled sets in models/measurements/, the older epsim-hw files, and one clear error per bad row.
#include "hw/calibration/measurements.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "tests/test_paths.hpp"

using namespace epsim;

namespace {

std::string fixture(const std::string& name) {
  return (test::source_dir() / "tests/fixtures/measurements" / name).string();
}

/// Writes `text` to a fresh scratch file and returns the InputError message of loading it ("" if none).
std::string error_of_text(const std::string& name, const std::string& text, std::string* path_out = nullptr) {
  const std::string path = (test::scratch_dir("measurements-reader-" + name) / "m.yaml").string();
  std::ofstream(path) << text;
  if (path_out) *path_out = path;
  try {
    load_measurements(path);
  } catch (const InputError& e) {
    return std::string(e.what()).substr(path.size());
  }
  return "";
}

/// A file whose header names a default source, with one series holding `line` as its only point
/// (the point's `{` is at 4:5).
std::string one_point(const std::string& series, const std::string& line) {
  return "kind: measurements\nheader: {gpu: H800, source: s}\n" + series + ":\n" + line + "\n";
}

const char* kEpPoint =
    "  - {kernel: dispatch, implementation: x, ep: %EP%, gpus_per_node: %GPN%, tokens: 64, hidden: 64, top_k: %K%, "
    "experts: %E%, dtype: fp8, routing: uniform, timing: kernel, median_us: 50}";

std::string ep_point(const std::string& ep, const std::string& gpn, const std::string& k, const std::string& e) {
  std::string s = kEpPoint;
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"%EP%", ep}, {"%GPN%", gpn}, {"%K%", k}, {"%E%", e}})
    s.replace(s.find(from), from.size(), to);
  return s;
}

}  // namespace

TEST_CASE("published rates become times: TFLOP/s over 2*groups*m*n*k, GB/s over bytes") {
  const Measurements m = load_measurements(fixture("published-every-series.yaml"));
  CHECK(m.header.gpu == "NVIDIA H800 SXM5");
  CHECK(m.header.hardware == "h800");
  CHECK(m.header.driver.empty());
  CHECK(m.header.sm_clock_MHz == 0);

  REQUIRE(m.gemm.size() == 2);
  // 2 * 4 * 8192 * 4096 * 7168 = 1.924145e12 FLOP at 1346e12 FLOP/s = 1429.528 us (DeepGEMM's own table
  // lists 1429.5 for this shape).
  CHECK(m.gemm[0].groups == 4);
  CHECK(m.gemm[0].layout == GemmLayout::contiguous);
  CHECK(m.gemm[0].dtype == Dtype::fp8);
  CHECK(m.gemm[0].published_TFLOPs == 1346);
  CHECK(m.gemm[0].median_us == doctest::Approx(1429.528).epsilon(1e-6));
  CHECK(m.gemm[0].repetitions == 0);
  CHECK(m.gemm[1].groups == 1);  // the default
  CHECK(m.gemm[1].layout == GemmLayout::dense);
  CHECK(m.gemm[1].median_us == 200);
  CHECK(m.gemm[1].published_TFLOPs == 0);
  CHECK(m.gemm[1].repetitions == 20);

  REQUIRE(m.copy.size() == 2);
  // 1e9 bytes at 390e9 bytes/s = 2564.103 us.
  CHECK(m.copy[0].published_GBps == 390);
  CHECK(m.copy[0].median_us == doctest::Approx(2564.103).epsilon(1e-6));
  CHECK(m.copy[1].median_us == 21.9);
  CHECK(m.copy[1].published_GBps == 0);

  REQUIRE(m.grouped_gemm.size() == 2);
  CHECK(m.grouped_gemm[0].shape.dtype == Dtype::fp8);
  CHECK(m.grouped_gemm[0].shape.dtype_bytes == 1);
  CHECK(m.grouped_gemm[0].repetitions == 0);
  CHECK(m.grouped_gemm[1].shape.dtype == Dtype::bf16);  // from dtype_bytes: 2
  CHECK(m.grouped_gemm[1].shape.dtype_bytes == 2);

  REQUIRE(m.ep_comm.size() == 3);
  const EpCommPoint& d = m.ep_comm[0];
  CHECK(d.kernel == EpKernel::dispatch);
  CHECK(d.implementation == "deepep_v1");
  CHECK(d.ep == 16);
  CHECK(d.gpus_per_node == 8);
  CHECK(d.experts == 256);
  CHECK(d.sms == 20);
  CHECK(d.routing == BenchRouting::group_limited);
  CHECK(d.max_nodes == 2);
  CHECK(d.kernel_only);
  CHECK(d.published_GBps == 43);
  CHECK(d.median_us == 0);  // worked out where the routing is drawn, never by the reader
  CHECK(d.counted == CountedBandwidth::rdma);
  const EpCommPoint& c = m.ep_comm[1];
  CHECK(c.kernel == EpKernel::combine);
  CHECK(c.sms == 0);  // not stated
  CHECK_FALSE(c.kernel_only);
  CHECK(c.median_us == 500);
  CHECK(c.counted == CountedBandwidth::algorithm);
  CHECK(m.ep_comm[2].routing == BenchRouting::balanced);
  CHECK(m.ep_comm[2].max_nodes == 0);
  CHECK(m.ep_comm[2].where == fixture("published-every-series.yaml") + ":22:5");
}

TEST_CASE("every point has a source: its own, else the header's source, else the header's tool") {
  const Measurements m = load_measurements(fixture("published-every-series.yaml"));
  CHECK(m.gemm[0].source == "https://example.org/header-source");
  CHECK(m.gemm[1].source == "owner/repo:bench.md@0123456789abcdef0123456789abcdef01234567");
  CHECK(m.all_to_all[0].source == "https://example.org/a2a");
  CHECK(m.ep_comm[0].source == "https://example.org/header-source");

  const Measurements legacy = load_measurements(fixture("small.yaml"));
  for (const auto& p : legacy.copy) CHECK(p.source == "hand-written fixture");

  std::string path;
  CHECK(error_of_text("no-source",
                      "kind: measurements\nheader: {gpu: H800}\ncopy:\n"
                      "  - {kind: ce_peer, bytes: 1000, median_us: 2.5, source: a}\n"
                      "  - {kind: ce_peer, bytes: 2000, median_us: 3.5}\n",
                      &path) ==
        ":5:5: copy[1]: no source: give the point a source: (URL or owner/repo:path@commit), or the header a "
        "source: or tool:");
}

TEST_CASE("files written before the published format still load unchanged") {
  const Measurements small = load_measurements(fixture("small.yaml"));
  CHECK(small.header.driver == "550.54.15");
  CHECK(small.header.sm_clock_MHz == 1980);
  CHECK(small.copy[0].repetitions == 50);
  CHECK(small.copy[0].published_GBps == 0);
  const Measurements synth = load_measurements(fixture("synthetic-h100.yaml"));
  REQUIRE(!synth.grouped_gemm.empty());
  CHECK(synth.grouped_gemm[0].shape.dtype_bytes == 2);
  CHECK(synth.grouped_gemm[0].shape.dtype == Dtype::bf16);
  REQUIRE(!synth.gemm_with_copy.empty());
  CHECK(synth.gemm_with_copy[0].shape.dtype == Dtype::bf16);
  CHECK(synth.gemm.empty());
  CHECK(synth.ep_comm.empty());
}

TEST_CASE("a header gives the machine's driver, cuda and clocks all together or not at all") {
  CHECK(error_of_text("header-driver-only",
                      "kind: measurements\nheader: {gpu: H100, driver: \"550\", tool: t}\n"
                      "copy:\n  - {kind: ce_peer, bytes: 1000, median_us: 2.5}\n") ==
        ":2:1: missing key 'cuda' in header");
  CHECK(error_of_text("header-hardware-empty",
                      "kind: measurements\nheader: {gpu: H100, hardware: \"\", source: s}\n"
                      "copy:\n  - {kind: ce_peer, bytes: 1000, median_us: 2.5}\n") ==
        ":2:31: header.hardware: expected a non-empty string, got ''");
}

TEST_CASE("bad rows are refused one at a time with file:line:col") {
  // A time and a rate for the same point.
  CHECK(error_of_text("time-and-rate",
                      one_point("copy", "  - {kind: ce_peer, bytes: 1000, median_us: 2.5, GBps: 390}")) ==
        ":4:50: copy[0]: give either median_us or GBps, not both (a median time, or the rate the source published)");
  // Neither.
  CHECK(error_of_text("no-time", one_point("copy", "  - {kind: ce_peer, bytes: 1000}")) ==
        ":4:5: missing key 'median_us' or 'GBps' in copy[0] (a median time, or the rate the source published)");
  // Neither, but one misspelt: the typo is named.
  CHECK(error_of_text("tflops-typo", one_point("gemm", "  - {m: 64, n: 64, k: 64, dtype: bf16, TFLOPS: 100}")) ==
        ":4:40: unknown key 'TFLOPS' in gemm[0]; did you mean 'TFLOPs'?");
  CHECK(error_of_text("dense-groups",
                      one_point("gemm", "  - {groups: 2, m: 64, n: 64, k: 64, dtype: bf16, TFLOPs: 100}")) ==
        ":4:6: gemm[0].groups: a dense GEMM has one group, got 2 (give layout: contiguous or masked)");
  CHECK(error_of_text("negative-rate", one_point("gemm", "  - {m: 64, n: 64, k: 64, dtype: bf16, TFLOPs: -3}")) ==
        ":4:48: gemm[0].TFLOPs: expected a number > 0, got -3");
  CHECK(error_of_text("nan-rate", one_point("copy", "  - {kind: ce_peer, bytes: 1000, GBps: .nan}")) ==
        ":4:40: copy[0].GBps: expected a number, got '.nan'");
  CHECK(error_of_text("dtype-twice",
                      one_point("grouped_gemm",
                                "  - {experts: 8, tokens_per_expert: 64, hidden_size: 64, ffn_size: 64, matrices: 3, "
                                "dtype: bf16, dtype_bytes: 2, median_us: 9}")) ==
        ":4:98: grouped_gemm[0]: give either dtype or dtype_bytes, not both (the GEMM's input format)");
  CHECK(error_of_text("dtype-bytes-3",
                      one_point("grouped_gemm",
                                "  - {experts: 8, tokens_per_expert: 64, hidden_size: 64, ffn_size: 64, matrices: 3, "
                                "dtype_bytes: 3, median_us: 9}")) ==
        ":4:98: grouped_gemm[0].dtype_bytes: expected one of 1, 2, 4, got '3'");
  CHECK(error_of_text("ep-not-nodes", one_point("ep_comm", ep_point("12", "8", "8", "96"))) ==
        ":4:43: ep_comm[0].ep: expected a multiple of gpus_per_node (8) when the run spans nodes, got 12");
  CHECK(error_of_text("experts-not-dividing", one_point("ep_comm", ep_point("16", "8", "8", "250"))) ==
        ":4:103: ep_comm[0].experts: expected a multiple of ep (16), got 250");
  CHECK(error_of_text("top-k-above-experts", one_point("ep_comm", ep_point("8", "8", "9", "8"))) ==
        ":4:92: ep_comm[0].top_k: expected at most experts (8), got 9");
  CHECK(error_of_text("gpn-above-ep", one_point("ep_comm", ep_point("8", "16", "8", "64"))) ==
        ":4:65: ep_comm[0].gpus_per_node: expected an integer in [1, 8], got 16");
}

TEST_CASE("group-limited routing needs max_nodes within the run's nodes, and only it takes one") {
  const std::string base =
      "  - {kernel: dispatch, implementation: x, ep: 16, gpus_per_node: 8, tokens: 64, hidden: 64, top_k: 8, "
      "experts: 256, dtype: fp8, routing: ";
  // 16 ranks of 8 per node: 2 nodes.
  CHECK(error_of_text("max-nodes-4",
                      one_point("ep_comm", base + "group_limited, max_nodes: 4, timing: kernel, median_us: 50}")) ==
        ":4:164: ep_comm[0].max_nodes: expected an integer in [1, 2], got 4");
  CHECK(error_of_text("max-nodes-missing",
                      one_point("ep_comm", base + "group_limited, timing: kernel, median_us: 50}")) ==
        ":4:5: missing key 'max_nodes' in ep_comm[0]");
  CHECK(error_of_text("max-nodes-uniform",
                      one_point("ep_comm", base + "uniform, max_nodes: 2, timing: kernel, median_us: 50}")) ==
        ":4:147: ep_comm[0].max_nodes: only for routing: group_limited (routing is uniform)");
}

TEST_CASE("an ep_comm rate names what it counts, timing is kernel or api") {
  const std::string base =
      "  - {kernel: combine, implementation: x, ep: 8, gpus_per_node: 8, tokens: 64, hidden: 64, top_k: 8, "
      "experts: 64, dtype: bf16, routing: uniform, ";
  CHECK(error_of_text("rate-uncounted", one_point("ep_comm", base + "timing: kernel, GBps: 300}")) ==
        ":4:5: missing key 'counted' in ep_comm[0]");
  CHECK(error_of_text("kernel-only-key", one_point("ep_comm", base + "kernel_only: false, median_us: 50}")) ==
        ":4:5: missing key 'timing' in ep_comm[0]");
  const std::string bad_timing = error_of_text("timing-torch", one_point("ep_comm", base + "timing: torch, median_us: 50}"));
  CHECK(bad_timing.find("ep_comm[0].timing: expected one of kernel, api, got 'torch'") != std::string::npos);
}

TEST_CASE("to_string names the format's words") {
  CHECK(std::string(to_string(GemmLayout::masked)) == "masked");
  CHECK(std::string(to_string(EpKernel::combine)) == "combine");
  CHECK(std::string(to_string(BenchRouting::group_limited)) == "group_limited");
  CHECK(std::string(to_string(CountedBandwidth::algorithm)) == "algorithm");
}

TEST_CASE("every bundled measurement set in models/measurements loads, each point with a source") {
  const std::filesystem::path dir = test::source_dir() / "models/measurements";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  REQUIRE(!files.empty());
  const std::set<std::string> presets{"h100-sxm-8", "h800", "h200", "h20", "b200", "gb200-nvl72"};
  std::size_t points = 0;
  for (const auto& file : files) {
    CAPTURE(file.string());
    Measurements m;
    REQUIRE_NOTHROW(m = load_measurements(file.string()));
    if (!m.header.hardware.empty()) CHECK(presets.count(m.header.hardware) == 1);
    auto check_sources = [&](const auto& series) {
      for (const auto& p : series) {
        CHECK(!p.source.empty());
        ++points;
      }
    };
    check_sources(m.grouped_gemm);
    check_sources(m.gemm);
    check_sources(m.copy);
    check_sources(m.all_to_all);
    check_sources(m.ep_comm);
  }
  CHECK(points > 300);

  // One bundled row against the figure worked out by hand: DeepGEMM's contiguous 4 x 8192 x 4096 x 7168 at
  // 1346 TFLOP/s is 1429.5 us, the time DeepGEMM's README table implies.
  const Measurements dg = load_measurements((dir / "deepgemm-fp8-h800.yaml").string());
  bool found = false;
  for (const auto& p : dg.gemm) {
    if (p.groups == 4 && p.m == 8192 && p.n == 4096 && p.k == 7168) {
      CHECK(p.median_us == doctest::Approx(1429.5).epsilon(1e-4));
      found = true;
    }
  }
  CHECK(found);
}

TEST_CASE("a gemm_with_copy row may say whether its copy ran on the SMs, as a yes or no") {
  const std::string row =
      "  - {experts: 8, tokens_per_expert: 64, hidden_size: 7168, ffn_size: 2048, matrices: 3, dtype: bf16, "
      "gemm_us: 180, gemm_with_copy_us: 405, copy_GBps: 1300, copy: ce_local";
  std::string path;
  for (const auto& c : std::vector<std::pair<std::string, std::optional<bool>>>{
           {"", std::nullopt}, {", copy_on_sms: true", true}, {", copy_on_sms: false", false}}) {
    const std::string& field = c.first;  // a reference: clang's C++17 lets no capture name a structured binding
    const std::optional<bool>& want = c.second;
    CAPTURE(field);
    REQUIRE(error_of_text("copy-on-sms", one_point("gemm_with_copy", row + field + "}"), &path) == "");
    const Measurements m = load_measurements(path);
    REQUIRE(m.gemm_with_copy.size() == 1);
    CHECK(m.gemm_with_copy[0].copy_on_sms == want);
  }
  // Column 186: the value (worked out from the row text above).
  CHECK(error_of_text("copy-on-sms-word", one_point("gemm_with_copy", row + ", copy_on_sms: sometimes}")) ==
        ":4:186: gemm_with_copy[0].copy_on_sms: expected true or false, got 'sometimes'");
}
