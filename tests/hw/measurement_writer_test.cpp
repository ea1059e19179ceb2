// The text epsim-hw writes for the keys of the measurement format that carry dtypes, sources and EP
// kernels (docs/calibration.md): header hardware/source and the command line, GEMM shapes with
// `dtype:`, published rates, ep_comm points. Checked line by line against the documented format.
#include <doctest/doctest.h>

#include <sstream>
#include <string>

#include "hw/calibration/measurements.hpp"
#include "hw/host/measurement_writer.hpp"
#include "tests/test_paths.hpp"

using namespace epsim;
using namespace epsim::hw;

namespace {

MeasurementHeader suite_header() {
  MeasurementHeader h;
  h.gpu = "NVIDIA H100 80GB HBM3";
  h.hardware = "h100-sxm-8";
  h.source = "epsim-hw suite";
  h.driver = "CUDA driver API 13.0";
  h.cuda = "13.0";
  h.sm_clock_MHz = 1980;
  h.mem_clock_MHz = 2619;
  h.date = "2026-11-24";
  h.tool = "epsim-hw 0.1.0";
  return h;
}

}  // namespace

TEST_CASE("a suite's file: header with hardware, source and command line, FP8 GEMM and ep_comm rows") {
  Measurements m;
  m.header = suite_header();
  GemmPoint g;
  g.shape = {8, 128, 7168, 2048, 3, 1, Dtype::fp8};
  g.median_us = 101.5;
  g.repetitions = 30;
  m.grouped_gemm.push_back(g);
  EpCommPoint e;
  e.kernel = EpKernel::dispatch;
  e.implementation = "nccl_alltoallv";
  e.ep = 8;
  e.gpus_per_node = 8;
  e.tokens = 4096;
  e.hidden = 7168;
  e.top_k = 8;
  e.experts = 256;
  e.dtype = Dtype::fp8;
  e.median_us = 512.25;
  m.ep_comm.push_back(e);
  e.kernel = EpKernel::combine;
  e.dtype = Dtype::bf16;
  e.median_us = 990;
  m.ep_comm.push_back(e);
  std::ostringstream out;
  write_measurements(out, m, {"epsim-hw suite: 8 GPU(s)"}, "epsim-hw suite -o set.yaml --hardware h100-sxm-8");
  CHECK(out.str() ==
        "# epsim-hw suite: 8 GPU(s)\n"
        "kind: measurements\n"
        "header:\n"
        "  gpu: \"NVIDIA H100 80GB HBM3\"\n"
        "  hardware: \"h100-sxm-8\"\n"
        "  source: \"epsim-hw suite\"\n"
        "  driver: \"CUDA driver API 13.0\"\n"
        "  cuda: \"13.0\"\n"
        "  sm_clock_MHz: 1980\n"
        "  mem_clock_MHz: 2619\n"
        "  date: \"2026-11-24\"\n"
        "  tool: \"epsim-hw 0.1.0\"\n"
        "  # command: epsim-hw suite -o set.yaml --hardware h100-sxm-8\n"
        "grouped_gemm:\n"
        "  - {experts: 8, tokens_per_expert: 128, hidden_size: 7168, ffn_size: 2048, matrices: 3, dtype: fp8, "
        "median_us: 101.5, repetitions: 30}\n"
        "ep_comm:\n"
        "  - {kernel: dispatch, implementation: \"nccl_alltoallv\", ep: 8, gpus_per_node: 8, tokens: 4096, "
        "hidden: 7168, top_k: 8, experts: 256, dtype: fp8, routing: uniform, timing: kernel, median_us: 512.25, counted: nvlink}\n"
        "  - {kernel: combine, implementation: \"nccl_alltoallv\", ep: 8, gpus_per_node: 8, tokens: 4096, "
        "hidden: 7168, top_k: 8, experts: 256, dtype: bf16, routing: uniform, timing: kernel, median_us: 990, counted: nvlink}\n");
}

TEST_CASE("optional keys are written only when set: published rates, sources, sms, max_nodes, timing api") {
  Measurements m;
  m.header = suite_header();
  m.header.hardware.clear();
  m.header.source.clear();
  CopyPoint c;
  c.kind = CopyKind::ce_peer;
  c.bytes = 1073741824;
  c.published_GBps = 389.5;
  c.source = "https://example.org/p2p";
  m.copy.push_back(c);
  EpCommPoint e;
  e.kernel = EpKernel::combine;
  e.implementation = "deepep_v1";
  e.ep = 16;
  e.gpus_per_node = 8;
  e.tokens = 4096;
  e.hidden = 7168;
  e.top_k = 8;
  e.experts = 256;
  e.sms = 24;
  e.routing = BenchRouting::group_limited;
  e.max_nodes = 2;
  e.kernel_only = false;
  e.published_GBps = 43;
  e.counted = CountedBandwidth::rdma;
  e.source = "deepseek-ai/DeepEP:README.md";
  m.ep_comm.push_back(e);
  std::ostringstream out;
  write_measurements(out, m);
  const std::string text = out.str();
  CHECK(text.find("hardware:") == std::string::npos);
  CHECK(text.find("source: \"epsim") == std::string::npos);
  CHECK(text.find("# command") == std::string::npos);
  CHECK(text.find("copy:\n  - {kind: ce_peer, bytes: 1073741824, GBps: 389.5, "
                  "source: \"https://example.org/p2p\"}\n") != std::string::npos);
  CHECK(text.find("  - {kernel: combine, implementation: \"deepep_v1\", ep: 16, gpus_per_node: 8, tokens: 4096, "
                  "hidden: 7168, top_k: 8, experts: 256, dtype: bf16, sms: 24, routing: group_limited, max_nodes: 2, "
                  "timing: api, GBps: 43, counted: rdma, source: \"deepseek-ai/DeepEP:README.md\"}\n") !=
        std::string::npos);
}

TEST_CASE("what epsim-hw writes, load_measurements reads back: dtype, sources, hardware, ep_comm") {
  Measurements m;
  m.header = suite_header();
  GemmPoint g;
  g.shape = {8, 128, 7168, 2048, 3, 1, Dtype::fp8};
  g.median_us = 101.5;
  g.repetitions = 30;
  m.grouped_gemm.push_back(g);
  g.shape.dtype = Dtype::bf16;
  g.shape.dtype_bytes = 2;
  g.median_us = 180.25;
  m.grouped_gemm.push_back(g);
  GemmWithCopyPoint w;
  w.shape = {8, 64, 7168, 2048, 3, 2, Dtype::bf16};
  w.gemm_us = 210.1;
  w.gemm_with_copy_us = 258.3;
  w.copy_GBps = 390.25;
  w.repetitions = 30;
  m.gemm_with_copy.push_back(w);  // not probed: no copy_on_sms
  w.copy_on_sms = true;
  m.gemm_with_copy.push_back(w);
  w.copy_on_sms = false;
  m.gemm_with_copy.push_back(w);
  CopyPoint c;
  c.kind = CopyKind::ce_peer;
  c.bytes = 1073741824;
  c.published_GBps = 389.5;
  c.source = "https://example.org/p2p";
  m.copy.push_back(c);
  EpCommPoint e;
  e.kernel = EpKernel::combine;
  e.implementation = "nccl_alltoallv";
  e.ep = 8;
  e.gpus_per_node = 8;
  e.tokens = 4096;
  e.hidden = 7168;
  e.top_k = 8;
  e.experts = 256;
  e.median_us = 990;
  m.ep_comm.push_back(e);
  const auto path = (test::scratch_dir("measurement_writer_round_trip") / "set.yaml").string();
  write_measurements_file(path, m, {"suite"}, false, "epsim-hw suite -o set.yaml");
  const Measurements back = load_measurements(path);
  CHECK(back.header.hardware == "h100-sxm-8");
  CHECK(back.header.source == "epsim-hw suite");
  REQUIRE(back.grouped_gemm.size() == 2);
  CHECK(back.grouped_gemm[0].shape.dtype == Dtype::fp8);
  CHECK(back.grouped_gemm[0].median_us == 101.5);
  CHECK(back.grouped_gemm[0].source == "epsim-hw suite");  // the header's source
  CHECK(back.grouped_gemm[1].shape.dtype == Dtype::bf16);
  REQUIRE(back.gemm_with_copy.size() == 3);
  CHECK(back.gemm_with_copy[0].shape.dtype == Dtype::bf16);
  CHECK(back.gemm_with_copy[0].copy_GBps == 390.25);
  CHECK_FALSE(back.gemm_with_copy[0].copy_on_sms.has_value());
  CHECK(back.gemm_with_copy[1].copy_on_sms == std::optional<bool>(true));
  CHECK(back.gemm_with_copy[2].copy_on_sms == std::optional<bool>(false));
  REQUIRE(back.copy.size() == 1);
  CHECK(back.copy[0].published_GBps == 389.5);
  CHECK(back.copy[0].source == "https://example.org/p2p");
  REQUIRE(back.ep_comm.size() == 1);
  const EpCommPoint& r = back.ep_comm[0];
  CHECK(r.kernel == EpKernel::combine);
  CHECK(r.implementation == "nccl_alltoallv");
  CHECK(r.ep == 8);
  CHECK(r.gpus_per_node == 8);
  CHECK(r.tokens == 4096);
  CHECK(r.top_k == 8);
  CHECK(r.experts == 256);
  CHECK(r.dtype == Dtype::bf16);
  CHECK(r.sms == 0);
  CHECK(r.routing == BenchRouting::uniform);
  CHECK(r.kernel_only);
  CHECK(r.median_us == 990);
  CHECK(r.counted == CountedBandwidth::nvlink);
}
