// The EP fit's closed form (ep_model_us) and the engine's replay of the same benchmark
// (simulate_ep_bench_us) must predict the same time for the same keys: a fitted point that the engine
// then misses would be the fit's error hidden in the replay. Each synthetic point is fitted and then
// replayed on the h800 preset calibrated with the fit; the two agree within 2%.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "hw/calibration/ep_bench_traffic.hpp"
#include "hw/calibration/ep_comm_fit.hpp"
#include "hw/calibration/fidelity_ep_bench.hpp"
#include "sim/config/loaders.hpp"
#include "tests/test_paths.hpp"

namespace epsim {
namespace ep_agreement {

inline EpCommPoint point(EpKernel kernel, int ep, std::int64_t tokens, int sms) {
  EpCommPoint p;
  p.kernel = kernel;
  p.implementation = "deepep_v1";
  p.ep = ep;
  p.gpus_per_node = 8;
  p.tokens = tokens;
  p.hidden = 7168;
  p.top_k = 8;
  p.experts = 256;
  p.dtype = Dtype::bf16;
  p.sms = sms;
  p.median_us = 1;  // replaced below by the closed form's own time
  p.where = "synthetic";
  return p;
}

}  // namespace ep_agreement

using ep_agreement::point;

TEST_CASE("EP fit: the engine's replay of each fitted point is within 2% of the closed form") {
  HardwareSpec base = load_hardware((test::source_dir() / "models" / "h800.yaml").string());
  base.ep_backend.sm_GBps = 6;
  base.ep_backend.dispatch_fixed_us = 12;
  base.ep_backend.combine_fixed_us = 9;
  // NVLink points over sizes and SM counts (some SM bound, some link bound): measured = closed form
  // at known keys, so the fit has one exact answer.
  std::vector<EpCommPoint> points;
  for (EpKernel k : {EpKernel::dispatch, EpKernel::combine})
    for (std::int64_t tokens : {1, 128, 1024, 4096})
      for (int sms : {8, 24, 64}) points.push_back(point(k, 8, tokens, sms));
  // Timed through the API: both sides add the host's call cost.
  points.push_back(point(EpKernel::dispatch, 8, 2048, 24));
  points.back().kernel_only = false;
  std::vector<EpObservation> obs;
  for (const EpCommPoint& p : points) {
    EpObservation o = ep_geometry(p, base);
    o.measured_us = ep_model_us(o, base, base.ep_backend.nvlink_efficiency, base.ep_backend.sm_GBps,
                                base.ep_backend.dispatch_fixed_us, base.ep_backend.combine_fixed_us);
    obs.push_back(o);
  }
  HardwareSpec start = base;
  start.ep_backend.sm_GBps = 20;
  start.ep_backend.dispatch_fixed_us = 0;
  start.ep_backend.combine_fixed_us = 0;
  std::vector<std::string> warnings;
  const EpCommFit fit = fit_ep_comm(obs, start, true, true, true, warnings);
  CHECK(fit.sm_GBps.value == doctest::Approx(6).epsilon(0.01));
  HardwareSpec fitted = base;
  fitted.ep_backend.nvlink_efficiency = fit.efficiency.value;
  fitted.ep_backend.sm_GBps = fit.sm_GBps.value;
  fitted.ep_backend.dispatch_fixed_us = fit.dispatch_fixed_us.value;
  fitted.ep_backend.combine_fixed_us = fit.combine_fixed_us.value;
  for (const EpObservation& o : obs) {
    const double closed = ep_model_us(o, fitted, fit.efficiency.value, fit.sm_GBps.value,
                                      fit.dispatch_fixed_us.value, fit.combine_fixed_us.value);
    const EpBenchTraffic traffic = ep_bench_traffic(*o.point, 1);
    const double engine = simulate_ep_bench_us(*o.point, traffic, ep_bench_hardware(*o.point, fitted));
    INFO(to_string(o.point->kernel), " ", o.point->tokens, " tok, ", o.sms, " SMs: closed ", closed, " us, engine ",
         engine, " us");
    CHECK(std::abs(engine - closed) / closed < 0.02);
  }
}

TEST_CASE("EP fit: across nodes, the engine's replay of each fitted RDMA point is within 2% of the closed form") {
  HardwareSpec base = load_hardware((test::source_dir() / "models" / "h800.yaml").string());
  base.ep_backend.sm_GBps = 0;
  // NVLink fast enough that InfiniBand binds, so that the fit determines ib_efficiency.
  base.nvlink.port_bw_GBps = 900;
  base.ep_backend.dispatch_fixed_us = 12;
  base.ep_backend.combine_fixed_us = 9;
  std::vector<EpCommPoint> points;
  for (EpKernel k : {EpKernel::dispatch, EpKernel::combine})
    for (std::int64_t tokens : {128, 1024, 4096}) points.push_back(point(k, 16, tokens, 24));
  std::vector<EpObservation> obs;
  for (const EpCommPoint& p : points) {
    EpObservation o = ep_geometry(p, base);
    REQUIRE(o.internode);
    o.measured_us = ep_model_us(o, base, 0.8, 0, 12, 9);
    obs.push_back(o);
  }
  std::vector<std::string> warnings;
  const EpCommFit fit = fit_ep_comm(obs, base, false, true, true, warnings);
  CHECK(fit.efficiency.value == doctest::Approx(0.8).epsilon(0.01));
  HardwareSpec fitted = base;
  fitted.ep_backend.ib_efficiency = fit.efficiency.value;
  fitted.ep_backend.dispatch_fixed_us = fit.dispatch_fixed_us.value;
  fitted.ep_backend.combine_fixed_us = fit.combine_fixed_us.value;
  for (const EpObservation& o : obs) {
    const double closed = ep_model_us(o, fitted, fit.efficiency.value, 0, fit.dispatch_fixed_us.value,
                                      fit.combine_fixed_us.value);
    const EpBenchTraffic traffic = ep_bench_traffic(*o.point, 1);
    const double engine = simulate_ep_bench_us(*o.point, traffic, ep_bench_hardware(*o.point, fitted));
    INFO(to_string(o.point->kernel), " ", o.point->tokens, " tok: closed ", closed, " us, engine ", engine, " us");
    CHECK(std::abs(engine - closed) / closed < 0.02);
  }
}

}  // namespace epsim

namespace epsim {

TEST_CASE("EP fit: an efficiency above 1 is held at 1, as the replay's links can carry no more") {
  HardwareSpec base = load_hardware((test::source_dir() / "models" / "h800.yaml").string());
  base.ep_backend.sm_GBps = 0;
  std::vector<EpObservation> obs;
  std::vector<EpCommPoint> points;
  for (std::int64_t tokens : {1024, 4096}) points.push_back(point(EpKernel::dispatch, 8, tokens, 24));
  for (const EpCommPoint& p : points) {
    EpObservation o = ep_geometry(p, base);
    o.measured_us = ep_model_us(o, base, 1.6, 0, 10, 10);  // 1.6x the line rate
    obs.push_back(o);
  }
  std::vector<std::string> warnings;
  const EpCommFit fit = fit_ep_comm(obs, base, false, true, false, warnings);
  CHECK(fit.efficiency.value == 1.0);
  CHECK(fit.efficiency.points == 2);
  CHECK(fit.efficiency.note.find("held at 1") != std::string::npos);
  // The fixed cost is refitted with the efficiency held: the residual is what the held bound costs.
  CHECK(fit.rel_rms > 0.01);
}

}  // namespace epsim

namespace epsim {

TEST_CASE("EP fit: one SM count under a binding base SM rate that the points outrun sets sm_GBps to 0") {
  HardwareSpec base = load_hardware((test::source_dir() / "models" / "h800.yaml").string());
  std::vector<EpObservation> obs;
  std::vector<EpCommPoint> points;
  for (std::int64_t tokens : {256, 1024, 4096}) points.push_back(point(EpKernel::dispatch, 8, tokens, 20));
  for (const EpCommPoint& p : points) {
    EpObservation o = ep_geometry(p, base);
    o.measured_us = ep_model_us(o, base, 0.95, 0, 10, 10);  // link bound at 0.95 of 200 GB/s (base: 0.8)
    obs.push_back(o);
  }
  HardwareSpec start = base;
  start.ep_backend.sm_GBps = 2;  // 20 SMs x 2 GB/s = 40 GB/s, far below the points' rate
  std::vector<std::string> warnings;
  const EpCommFit fit = fit_ep_comm(obs, start, true, true, false, warnings);
  CHECK(fit.sm_GBps.value == 0);
  CHECK(fit.sm_GBps.points == 3);
  CHECK(fit.efficiency.value == doctest::Approx(0.95).epsilon(0.01));
  CHECK(fit.dispatch_fixed_us.value == doctest::Approx(10).epsilon(0.01));
}

}  // namespace epsim
