#include "tests/hw/synthetic_measurements.hpp"

#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <vector>

#include "hw/calibration/calibration_fit.hpp"
#include "sim/hardware/gemm_cost.hpp"

namespace epsim::test {
namespace {

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// Relative errors within +-scale on the times handed to it, the same for the same draw.
class Noise {
 public:
  /// Draw 0: a fixed pattern, scale x sin(2.4 i) on the i-th time. Any other draw: independent
  /// errors, uniform within +-scale, from a generator seeded with it (a measurement repeated); its
  /// words are scaled here, as std's distributions differ from one library to the next.
  explicit Noise(double scale, int draw = 0) : scale_(scale), draw_(draw), rng_(static_cast<unsigned>(draw)) {}
  double operator()(double t) {
    if (draw_ == 0) return t * (1.0 + scale_ * std::sin(2.4 * static_cast<double>(++i_)));
    const double uniform = static_cast<double>(rng_()) / 4294967296.0;  // [0, 1): a 32-bit word over 2^32
    return t * (1.0 + scale_ * (2.0 * uniform - 1.0));
  }

 private:
  double scale_;
  int draw_;
  std::mt19937 rng_;
  int i_ = 0;
};

ModelSpec expert_model(int hidden, int ffn) {
  ModelSpec m;
  m.name = "synthetic";
  m.hidden_size = hidden;
  m.expert_ffn_size = ffn;
  m.gated_ffn = true;
  m.dtype_bytes = 2;
  return m;
}

std::string shape(int experts, int tokens, int hidden, int ffn) {
  return "experts: " + std::to_string(experts) + ", tokens_per_expert: " + std::to_string(tokens) +
         ", hidden_size: " + std::to_string(hidden) + ", ffn_size: " + std::to_string(ffn) +
         ", matrices: 3, dtype_bytes: 2";
}

}  // namespace

CalibrationTruth::CalibrationTruth() {
  hw.name = "truth";
  hw.nodes = 1;
  hw.gpus_per_node = 8;
  hw.gpu.sms = 132;
  hw.gpu.bf16_peak_TFLOPs = 989.4;
  hw.gpu.hbm_GBps = 3000;
  hw.gemm.row_alignment = 128;
  hw.gemm.launch_us = 5.0;
  // 128 rows: memory bound with these shapes, so only a lower bound is recoverable there.
  hw.gemm.efficiency = {{128, 0.5}, {256, 0.3}, {512, 0.4}, {1024, 0.5}, {2048, 0.6}, {4096, 0.7}, {8192, 0.75}};
  hw.gpu.fp8_peak_TFLOPs = 1979;
  // 64 rows are memory bound (a lower bound only); the other knots compute bound for every synthetic shape.
  hw.gemm.fp8_efficiency = {{64, 0.3}, {128, 0.25}, {256, 0.45}, {1024, 0.55}, {4096, 0.65}};
  hw.nvlink.port_bw_GBps = 450;
  hw.infiniband.nic_bw_GBps = 50;
  hw.ep_backend.comm_sms = 24;
  hw.ep_backend.nvlink_efficiency = 0.8;  // 360 GB/s: SM bound below 18 SMs at 20 GB/s per SM
  hw.ep_backend.ib_efficiency = 0.85;
  hw.ep_backend.sm_GBps = 20;
  hw.ep_backend.dispatch_fixed_us = 15;
  hw.ep_backend.combine_fixed_us = 25;
}

Measurements synthetic_gemm_calls(const CalibrationTruth& truth, double noise_scale, const std::string& file) {
  Noise noise(noise_scale);
  Measurements m;
  m.file = file;
  m.header.gpu = "synthetic";
  int line = 1;
  auto add = [&](int groups, std::int64_t rows, std::int64_t n, std::int64_t k, Dtype dtype, GemmLayout layout) {
    GemmCallPoint p;
    p.groups = groups;
    p.m = rows;
    p.n = n;
    p.k = k;
    p.dtype = dtype;
    p.layout = layout;
    p.median_us = noise(predict_gemm_call_us(p, truth.hw));
    p.source = "synthetic";
    p.where = file + ":" + std::to_string(++line) + ":5";
    m.gemm.push_back(p);
  };
  // Every knot of both curves gets compute-bound points of two shapes; 64 rows are memory bound
  // (FP8), which with several byte counts fixes launch and hbm.
  for (Dtype d : {Dtype::fp8, Dtype::bf16}) {
    const auto& curve = d == Dtype::fp8 ? truth.hw.gemm.fp8_efficiency : truth.hw.gemm.efficiency;
    for (const auto& knot : curve) {
      const auto rows = static_cast<std::int64_t>(knot.tokens_per_expert);
      if (rows < 128) continue;
      add(8, rows, 4096, 7168, d, GemmLayout::contiguous);
      add(4, rows, 7168, 2048, d, GemmLayout::masked);
    }
  }
  for (std::int64_t n : {2048, 4096, 7168, 16384}) add(1, 64, n, 7168, Dtype::fp8, GemmLayout::dense);
  add(8, 64, 4096, 7168, Dtype::fp8, GemmLayout::masked);
  return m;
}

Measurements synthetic_ep_comm(const CalibrationTruth& truth, double noise_scale, bool with_rdma,
                               const std::string& file, int draw) {
  Noise noise(noise_scale, draw);
  Measurements m;
  m.file = file;
  m.header.gpu = "synthetic";
  int line = 1;
  auto add = [&](EpKernel kernel, int ep, int gpus_per_node, std::int64_t tokens, int sms, Dtype dtype) {
    EpCommPoint p;
    p.kernel = kernel;
    p.implementation = "synthetic";
    p.ep = ep;
    p.gpus_per_node = gpus_per_node;
    p.tokens = tokens;
    p.hidden = 7168;
    p.top_k = 8;
    p.experts = 256;
    p.dtype = dtype;
    p.sms = sms;
    p.routing = BenchRouting::uniform;
    p.where = file + ":" + std::to_string(++line) + ":5";
    p.source = "synthetic";
    p.median_us = noise(predict_ep_point_us(p, truth.hw));
    m.ep_comm.push_back(p);
  };
  for (EpKernel kernel : {EpKernel::dispatch, EpKernel::combine}) {
    const Dtype dtype = kernel == EpKernel::dispatch ? Dtype::fp8 : Dtype::bf16;
    for (int sms : {4, 8, 12, 16, 24, 32, 48}) add(kernel, 8, 8, 4096, sms, dtype);
    for (std::int64_t tokens : {16, 64, 256, 1024}) add(kernel, 8, 8, tokens, 24, dtype);
    add(kernel, 8, 8, 2048, 0, dtype);  // SMs not stated: the base's comm_sms
    if (with_rdma)
      for (std::int64_t tokens : {512, 4096})
        for (int sms : {16, 24}) add(kernel, 16, 8, tokens, sms, dtype);
  }
  return m;
}

std::string synthetic_measurements_yaml(const CalibrationTruth& truth, double noise_scale, int draw) {
  Noise noise(noise_scale, draw);
  std::ostringstream y;
  y << "kind: measurements\n"
       "header:\n"
       "  gpu: synthetic H100 (generated by tests/hw, not measured)\n"
       "  driver: \"0.0\"\n"
       "  cuda: \"0.0\"\n"
       "  sm_clock_MHz: 1980\n"
       "  mem_clock_MHz: 2619\n"
       "  date: 2026-01-01\n"
       "  tool: tests/hw/synthetic_measurements.cpp\n";
  y << "copy:\n";
  struct Kind {
    const char* name;
    double alpha, beta;
  };
  for (const Kind& k : {Kind{"ce_peer", truth.ce_alpha_us, truth.ce_beta_GBps},
                        Kind{"ce_local", truth.local_alpha_us, truth.local_beta_GBps},
                        Kind{"h2d", truth.h2d_alpha_us, truth.h2d_beta_GBps},
                        Kind{"d2h", truth.d2h_alpha_us, truth.d2h_beta_GBps}}) {
    for (double bytes = 4096; bytes <= 1024.0 * 1024 * 1024; bytes *= 4)
      y << "  - {kind: " << k.name << ", bytes: " << num(bytes)
        << ", median_us: " << num(noise(k.alpha + bytes / (k.beta * 1e3))) << ", repetitions: 20}\n";
  }
  y << "all_to_all:\n";
  for (int ranks : {4, 8})
    for (double bytes = 65536; bytes <= 256.0 * 1024 * 1024; bytes *= 4)
      y << "  - {ranks: " << ranks << ", bytes_per_pair: " << num(bytes) << ", median_us: "
        << num(noise(truth.a2a_latency_us + (ranks - 1) * bytes / (truth.a2a_bw_GBps * 1e3))) << ", repetitions: 20}\n";

  const int hidden = 6144, ffn = 2048;
  const ModelSpec model = expert_model(hidden, ffn);
  const GemmCost cost(truth.hw, model);
  auto gemm_us = [&](int experts, int tokens) {
    return ps_to_us(cost.grouped_time_ps(std::vector<std::int64_t>(experts, tokens), ffn));
  };
  y << "grouped_gemm:\n";
  std::vector<std::pair<int, int>> points;
  for (int tokens : {1, 32, 64, 128})
    for (int experts : {1, 4, 8, 16}) points.emplace_back(experts, tokens);
  for (int tokens : {200, 256, 512, 1000, 1024, 2048, 4096, 8192})
    for (int experts : {4, 8}) points.emplace_back(experts, tokens);
  for (const auto& [experts, tokens] : points)
    y << "  - {" << shape(experts, tokens, hidden, ffn) << ", median_us: " << num(noise(gemm_us(experts, tokens)))
      << ", repetitions: 20}\n";

  // The SmPool model: speed min(1, (1 - p) / f), p = copy_GBps * factor / hbm; the whole kernel stretches.
  y << "gemm_with_copy:\n";
  struct Contended {
    int experts, tokens;
    double copy_GBps;
  };
  for (const Contended& c : {Contended{8, 32, 100}, Contended{8, 64, 200}, Contended{8, 128, 390},
                             Contended{16, 128, 390}, Contended{8, 256, 1200}, Contended{8, 4096, 390}}) {
    const std::vector<std::int64_t> rows(c.experts, c.tokens);
    const double alone = ps_to_us(cost.grouped_time_ps(rows, ffn));
    const double f = cost.hbm_fraction(rows, ffn);
    const double p = c.copy_GBps * truth.hbm_traffic_factor / truth.hw.gpu.hbm_GBps;  // a peer copy: one side
    const double speed = std::min(1.0, (1.0 - p) / f);
    y << "  - {" << shape(c.experts, c.tokens, hidden, ffn) << ", gemm_us: " << num(noise(alone))
      << ", gemm_with_copy_us: " << num(noise(alone / speed)) << ", copy_GBps: " << num(c.copy_GBps)
      << ", copy: ce_peer, repetitions: 20}\n";
  }
  return y.str();
}

}  // namespace epsim::test
