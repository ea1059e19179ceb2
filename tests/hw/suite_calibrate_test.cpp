// The contract of `epsim-hw suite`: the file it writes (every series it measures, written by
// hw/host/measurement_writer) is what `epsim calibrate` reads and fits. The points are made from
// hand-chosen costs, so the fitted Copy Engine values are known.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <utility>

#include "hw/calibration/measurements.hpp"
#include "hw/host/ep_comm_traffic.hpp"
#include "hw/host/measurement_writer.hpp"
#include "sim/config/loaders.hpp"
#include "sim/hardware/dtype.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

using namespace epsim;
using namespace epsim::hw;

namespace {

/// A set shaped like `epsim-hw suite --quick` on 8 GPUs: BF16 and FP8 GEMMs, the four copies that
/// reach the header's GPU, GEMM beside copies, all-to-all and ep_comm dispatch/combine.
Measurements suite_shaped_set() {
  Measurements m;
  m.header.gpu = "NVIDIA H100 80GB HBM3";
  m.header.hardware = "h100-sxm-8";
  m.header.source = "epsim-hw suite";
  m.header.driver = "CUDA driver API 13.0";
  m.header.cuda = "13.0";
  m.header.sm_clock_MHz = 1980;
  m.header.mem_clock_MHz = 2619;
  m.header.date = "2026-11-24";
  m.header.tool = "epsim-hw 0.1.0";
  for (Dtype dtype : {Dtype::bf16, Dtype::fp8})
    for (std::int64_t t : {16, 64, 128, 256, 512, 1024, 2048, 4096}) {
      GemmPoint g;
      g.shape = {8, t, 7168, 2048, 3, element_bytes(dtype), dtype};
      const double flop = 2.0 * 3 * 7168 * 2048 * static_cast<double>(t) * 8;
      const double peak_flop_per_us = (dtype == Dtype::fp8 ? 1300e12 : 700e12) * 1e-6;
      const double weight_bytes = 8.0 * 3 * 7168 * 2048 * element_bytes(dtype);
      g.median_us = 8 + std::max(flop / peak_flop_per_us, weight_bytes / 3e6);
      g.repetitions = 10;
      m.grouped_gemm.push_back(g);
    }
  // Copies: fixed cost + bytes / bandwidth (GB/s = 1e3 bytes per us).
  struct Copy {
    CopyKind kind;
    double fixed_us, GBps;
  };
  for (const Copy& c : {Copy{CopyKind::ce_local, 3, 1300}, Copy{CopyKind::ce_peer, 4, 380}, Copy{CopyKind::h2d, 6, 52},
                        Copy{CopyKind::d2h, 6, 52}, Copy{CopyKind::sm_copy, 4, 1500}})
    for (double bytes : {65536.0, 1048576.0, 16777216.0, 268435456.0}) {
      CopyPoint p;
      p.kind = c.kind;
      p.bytes = bytes;
      p.median_us = c.fixed_us + bytes / (c.GBps * 1e3);
      p.repetitions = 20;
      m.copy.push_back(p);
    }
  for (std::int64_t t : {64, 1024}) {
    GemmWithCopyPoint w;
    w.shape = {8, t, 7168, 2048, 3, 2, Dtype::bf16};
    w.gemm_us = 100 + 0.2 * static_cast<double>(t);
    w.gemm_with_copy_us = 1.2 * w.gemm_us;
    w.copy_GBps = 600;
    w.repetitions = 10;
    m.gemm_with_copy.push_back(w);
  }
  for (double bytes : {65536.0, 1048576.0, 16777216.0}) {
    AllToAllPoint a;
    a.ranks = 8;
    a.bytes_per_pair = bytes;
    a.median_us = 20 + 7 * bytes / 150e3;
    a.repetitions = 10;
    m.all_to_all.push_back(a);
  }
  for (std::int64_t t : {512, 4096}) {
    const auto received = received_rows(uniform_pair_rows(8, t, 8, 256, 1));
    for (auto [kernel, dtype] : {std::pair{EpKernel::dispatch, Dtype::fp8}, std::pair{EpKernel::dispatch, Dtype::bf16},
                                 std::pair{EpKernel::combine, Dtype::bf16}}) {
      EpCommPoint e;
      e.kernel = kernel;
      e.implementation = "nccl_alltoallv";
      e.ep = 8;
      e.gpus_per_node = 8;
      e.tokens = t;
      e.hidden = 7168;
      e.top_k = 8;
      e.experts = 256;
      e.dtype = dtype;
      e.median_us = 25 + static_cast<double>(received[0]) * static_cast<double>(activation_bytes(dtype, 7168, 128)) / 150e3;
      m.ep_comm.push_back(e);
    }
  }
  return m;
}

}  // namespace

TEST_CASE("epsim calibrate reads and fits what epsim-hw suite writes, every series") {
  if (test::epsim_binary() == "none") return;  // built without the binary
  const auto dir = test::scratch_dir("suite-calibrate");
  write_measurements_file((dir / "set.yaml").string(), suite_shaped_set(), {"epsim-hw suite --quick: 8 GPU(s)"}, false,
                          "epsim-hw suite --quick -o set.yaml --hardware h100-sxm-8");
  const std::string base = (test::source_dir() / "models/h100-sxm-8.yaml").string();
  const test::CliResult r = test::run_epsim("calibrate set.yaml --base '" + base + "' -o my-cluster.yaml", dir);
  CHECK(r.status == 0);
  CHECK(r.err == "");
  for (const char* series : {"grouped_gemm", "ce_peer", "all_to_all", "ep_comm"}) CHECK(r.out.find(series) != std::string::npos);
  // The Copy Engine over NVLink is the ce_peer line: 4 us + bytes / 380 GB/s, fitted exactly.
  const HardwareSpec hw = load_hardware((dir / "my-cluster.yaml").string());
  CHECK(hw.copy_engine.bw_GBps == doctest::Approx(380).epsilon(1e-4));
  CHECK(hw.copy_engine.fixed_cost_us == doctest::Approx(4).epsilon(1e-3));
}
