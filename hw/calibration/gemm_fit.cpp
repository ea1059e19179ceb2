#include "hw/calibration/gemm_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "hw/calibration/fit_error.hpp"
#include "hw/calibration/linear_fit.hpp"
#include "hw/calibration/nonlinear_fit.hpp"

namespace epsim {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kBytesPerUsPerGBps = 1e3;  // 1 GB/s = 1e3 bytes per us
constexpr double kFlopsPerUsPerTFLOPs = 1e6;

std::int64_t pad(std::int64_t rows, int alignment) { return (rows + alignment - 1) / alignment * alignment; }

std::string num(double v) {
  std::ostringstream out;
  out.precision(4);
  out << v;
  return out.str();
}

std::vector<std::string> files_of(const std::vector<const GemmObservation*>& pts) {
  std::vector<std::string> files;
  for (const auto* p : pts)
    if (std::find(files.begin(), files.end(), p->file) == files.end()) files.push_back(p->file);
  return files;
}

[[noreturn]] void cannot_fit(const GemmObservation& o, const std::string& message) {
  throw_at_point(o.file, o.where, o.series + ": " + message);
}

struct Knot {
  bool fp8 = false;
  double rows = 0;
  std::vector<const GemmObservation*> points;
  double eta = 1;
  bool memory_bound = false;
  double lower_bound = 0;
  FittedValue fitted;
};

}  // namespace

double gemm_call_rows(const GemmCallPoint& p, int row_alignment) {
  return static_cast<double>(p.layout == GemmLayout::contiguous ? pad(p.m, row_alignment) : p.m);
}

double gemm_call_flops(const GemmCallPoint& p, int row_alignment) {
  return 2.0 * p.groups * gemm_call_rows(p, row_alignment) * static_cast<double>(p.n) * static_cast<double>(p.k);
}

double gemm_call_hbm_bytes(const GemmCallPoint& p) {
  const double e = element_bytes(p.dtype), m = static_cast<double>(p.m), n = static_cast<double>(p.n),
               k = static_cast<double>(p.k);
  return p.groups * ((n * k + m * k) * e + m * n * 2.0);
}

GemmObservation observe_gemm(const GemmPoint& p, const std::string& file, const std::string& default_source,
                             int row_alignment) {
  const GemmShape& s = p.shape;
  GemmObservation o;
  o.fp8 = s.dtype == Dtype::fp8;
  o.rows = static_cast<double>(pad(s.tokens_per_expert, row_alignment));
  o.flops = 2.0 * s.matrices * static_cast<double>(s.hidden_size) * s.ffn_size * o.rows * s.experts;
  const double m = s.matrices, h = s.hidden_size, f = s.ffn_size, b = s.dtype_bytes;
  o.hbm_bytes = s.experts * (m * h * f * b + static_cast<double>(s.tokens_per_expert) * b * (2.0 * h + 2.0 * (m - 1.0) * f));
  o.measured_us = p.median_us;
  o.series = "grouped_gemm";
  o.setting = std::string(to_string(s.dtype)) + " expert FFN " + std::to_string(s.experts) + " x " +
              std::to_string(s.tokens_per_expert) + " rows, " + std::to_string(s.hidden_size) + "x" +
              std::to_string(s.ffn_size) + " x" + std::to_string(s.matrices);
  o.where = p.where;
  o.source = p.source.empty() ? default_source : p.source;
  o.file = file;
  return o;
}

GemmObservation observe_gemm(const GemmCallPoint& p, const std::string& file, const std::string& default_source,
                             int row_alignment) {
  GemmObservation o;
  o.fp8 = p.dtype == Dtype::fp8;
  o.rows = gemm_call_rows(p, row_alignment);
  o.flops = gemm_call_flops(p, row_alignment);
  o.hbm_bytes = gemm_call_hbm_bytes(p);
  o.measured_us = p.median_us;
  o.series = "gemm";
  o.setting = std::string(to_string(p.dtype)) + " " + to_string(p.layout) + " " + std::to_string(p.groups) + " x " +
              std::to_string(p.m) + " x " + std::to_string(p.n) + " x " + std::to_string(p.k);
  o.where = p.where;
  o.source = p.source.empty() ? default_source : p.source;
  o.file = file;
  return o;
}

GemmFit fit_gemm(const std::vector<GemmObservation>& obs, const HardwareSpec& base, double tolerance,
                 std::vector<std::string>& warnings) {
  GemmFit g;
  g.points = static_cast<int>(obs.size());
  if (obs.empty()) return g;
  for (const auto& o : obs) {
    if (o.fp8 && !(base.gpu.fp8_peak_TFLOPs > 0))
      cannot_fit(o, "an FP8 GEMM point needs gpu.fp8_peak_TFLOPs in the base hardware file " +
                        (base.source_file.empty() ? base.name : base.source_file) + " (the efficiency is relative to it)");
    if (!(o.measured_us > 0)) cannot_fit(o, "the time must be > 0");
  }
  const double peak_bf16 = base.gpu.bf16_peak_TFLOPs * kFlopsPerUsPerTFLOPs;
  const double peak_fp8 = base.gpu.fp8_peak_TFLOPs * kFlopsPerUsPerTFLOPs;
  auto peak = [&](const GemmObservation& o) { return o.fp8 ? peak_fp8 : peak_bf16; };

  // Start: launch and hbm from the smallest rows, where the weight read dominates: t = launch + bytes / hbm.
  std::map<double, std::vector<const GemmObservation*>> by_rows;
  for (const auto& o : obs) by_rows[o.rows].push_back(&o);
  const auto& small = by_rows.begin()->second;
  double launch_us = base.gemm.launch_us;
  double hbm_GBps = base.gpu.hbm_GBps;
  bool launch_free = false;
  {
    std::vector<double> x, t;
    for (const auto* p : small) {
      x.push_back(p->hbm_bytes);
      t.push_back(p->measured_us);
    }
    if (std::set<double>(x.begin(), x.end()).size() >= 2) {
      const LinearFit f = fit_line(x, t);
      const double slope = f.coef(1);
      if (!(slope > 0)) cannot_fit(*small.front(), "time does not grow with HBM bytes at the smallest rows");
      launch_us = f.coef(0);
      hbm_GBps = 1.0 / (slope * kBytesPerUsPerGBps);
      g.launch_us = FittedValue{launch_us, f.stderr_(0), f.points, files_of(small), "intercept at the smallest rows"};
      g.hbm_GBps = FittedValue{hbm_GBps, f.stderr_(1) / slope * hbm_GBps, f.points, files_of(small), ""};
      g.memory_rel_rms = f.rel_rms;
      launch_free = true;
      if (launch_us < 0) {
        warnings.push_back("gemm: negative launch_us " + num(launch_us) + " fitted at the smallest rows; using 0");
        launch_us = 0;
        g.launch_us.value = 0;
        launch_free = false;
      }
    } else {
      // One size only: keep the base launch and fit hbm through (t - launch) = bytes / hbm.
      std::vector<double> y;
      for (double ti : t) y.push_back(ti - launch_us);
      if (*std::min_element(y.begin(), y.end()) <= 0)
        cannot_fit(*small.front(), "measured time below the base launch_us " + num(launch_us) + " us");
      const LinearFit f = fit_proportional(x, y);
      hbm_GBps = 1.0 / (f.coef(0) * kBytesPerUsPerGBps);
      g.hbm_GBps = FittedValue{hbm_GBps, f.stderr_(0) / f.coef(0) * hbm_GBps, f.points, files_of(small),
                               "launch_us kept from the base file (one size only at the smallest rows)"};
      g.memory_rel_rms = f.rel_rms;
    }
  }
  // The start line assumes the smallest rows sit on the HBM floor. A bandwidth outside 0.5-1.2x the base's
  // (the achievable streaming rate, which memory-bound GEMMs approach) says
  // they do not (compute-bound points only, e.g. a best-shape matmul): then neither hbm nor launch is
  // known from these points, and both stay at the base values.
  bool hbm_free = true;
  if (hbm_GBps > 1.2 * base.gpu.hbm_GBps || hbm_GBps < 0.5 * base.gpu.hbm_GBps) {
    warnings.push_back("gemm: the smallest rows do not look memory bound (they imply hbm_GBps " + num(hbm_GBps) +
                       ", base " + num(base.gpu.hbm_GBps) + "); hbm_GBps and launch_us kept from the base file");
    hbm_GBps = base.gpu.hbm_GBps;
    launch_us = base.gemm.launch_us;
    g.hbm_GBps = FittedValue{hbm_GBps, kNaN, 0, {}, "not determined by these points: kept from the base file"};
    g.launch_us = FittedValue{launch_us, kNaN, 0, {}, "not determined by these points: kept from the base file"};
    launch_free = false;
    hbm_free = false;
  } else if (!launch_free && g.launch_us.points == 0) {
    warnings.push_back("gemm: the smallest rows have one size only; launch_us kept from the base file");
  }

  // Start of each knot: (t - launch) = FLOPs / peak * (1 / eta) over its compute-bound points.
  std::vector<Knot> knots;
  {
    std::map<std::pair<bool, double>, std::vector<const GemmObservation*>> by_knot;
    for (const auto& o : obs) by_knot[{o.fp8, o.rows}].push_back(&o);
    for (auto& [key, pts] : by_knot) {
      Knot k;
      k.fp8 = key.first;
      k.rows = key.second;
      k.points = pts;
      knots.push_back(k);
    }
  }
  auto classify = [&](Knot& k) {
    std::vector<double> xc, yc;
    k.lower_bound = 0;
    for (const auto* p : k.points) {
      const double busy = p->measured_us - launch_us;
      if (busy <= 0) cannot_fit(*p, "median_us is not above launch_us " + num(launch_us) + " us");
      const double flops = p->flops / peak(*p);
      const double memory = p->hbm_bytes / (hbm_GBps * kBytesPerUsPerGBps);
      if (busy <= memory * (1.0 + tolerance)) {
        k.lower_bound = std::max(k.lower_bound, flops / busy);
      } else {
        xc.push_back(flops);
        yc.push_back(busy);
      }
    }
    k.memory_bound = xc.empty();
    if (!k.memory_bound) {
      const LinearFit f = fit_proportional(xc, yc);
      k.eta = 1.0 / f.coef(0);
      k.fitted = FittedValue{k.eta, f.stderr_(0) * k.eta * k.eta, f.points, files_of(k.points),
                             k.lower_bound > 0 ? "points on the HBM floor at these rows were left out" : ""};
    }
  };
  for (auto& k : knots) classify(k);

  // Joint refinement: launch (when the smallest rows determine it), log hbm, log eta of every knot that
  // is not memory bound. Memory-bound knots stay off the fit at eta 1 (their points on the floor).
  std::vector<std::size_t> free_knots;
  for (std::size_t i = 0; i < knots.size(); ++i)
    if (!knots[i].memory_bound) free_knots.push_back(i);
  const int offset = (launch_free ? 1 : 0) + (hbm_free ? 1 : 0);  // index of the first knot parameter
  const int hbm_index = launch_free ? 1 : 0;
  std::vector<std::size_t> knot_of(obs.size());
  for (std::size_t i = 0; i < knots.size(); ++i)
    for (const auto* p : knots[i].points) knot_of[static_cast<std::size_t>(p - obs.data())] = i;
  Eigen::VectorXd start(offset + static_cast<Eigen::Index>(free_knots.size()));
  if (launch_free) start(0) = launch_us;
  if (hbm_free) start(hbm_index) = std::log(hbm_GBps);
  for (std::size_t j = 0; j < free_knots.size(); ++j)
    start(offset + static_cast<Eigen::Index>(j)) = std::log(knots[free_knots[j]].eta);
  std::vector<int> param_of_knot(knots.size(), -1);
  for (std::size_t j = 0; j < free_knots.size(); ++j) param_of_knot[free_knots[j]] = offset + static_cast<int>(j);
  const double fixed_launch = launch_us, fixed_hbm = hbm_GBps;
  auto residuals = [&](const Eigen::VectorXd& q) {
    const double launch = launch_free ? q(0) : fixed_launch;
    const double hbm = (hbm_free ? std::exp(q(hbm_index)) : fixed_hbm) * kBytesPerUsPerGBps;
    Eigen::VectorXd r(static_cast<Eigen::Index>(obs.size()));
    for (std::size_t i = 0; i < obs.size(); ++i) {
      const int pk = param_of_knot[knot_of[i]];
      const double eta = pk >= 0 ? std::exp(q(pk)) : 1.0;
      const double model = launch + std::max(obs[i].flops / (eta * peak(obs[i])), obs[i].hbm_bytes / hbm);
      r(static_cast<Eigen::Index>(i)) = (obs[i].measured_us - model) / obs[i].measured_us;
    }
    return r;
  };
  if (start.size() > 0) {
    const NonlinearFit nl = fit_levenberg_marquardt(residuals, start);
    const double start_rms = residuals(start).norm() / std::sqrt(static_cast<double>(obs.size()));
    if (nl.rel_rms < start_rms || start_rms == 0) {
      if (launch_free) {
        launch_us = std::max(0.0, nl.params(0));
        g.launch_us = FittedValue{launch_us, nl.stderr_(0), nl.points, g.launch_us.files, "joint fit of every GEMM point"};
      }
      if (hbm_free) {
        hbm_GBps = std::exp(nl.params(hbm_index));
        g.hbm_GBps.value = hbm_GBps;
        g.hbm_GBps.stderr_ = hbm_GBps * nl.stderr_(hbm_index);
        g.hbm_GBps.points = nl.points;
      }
      for (std::size_t j = 0; j < free_knots.size(); ++j) {
        Knot& k = knots[free_knots[j]];
        const Eigen::Index pj = offset + static_cast<Eigen::Index>(j);
        k.eta = std::exp(nl.params(pj));
        k.fitted.value = k.eta;
        k.fitted.stderr_ = nl.determined[static_cast<std::size_t>(pj)] ? k.eta * nl.stderr_(pj) : kNaN;
      }
    }
  }
  std::set<std::string> all_files;
  for (const auto& o : obs) all_files.insert(o.file);
  if (hbm_free) g.hbm_GBps.files.assign(all_files.begin(), all_files.end());
  if (hbm_free && (hbm_GBps > 1.2 * base.gpu.hbm_GBps || hbm_GBps < 0.5 * base.gpu.hbm_GBps))
    warnings.push_back("gemm: fitted hbm_GBps " + num(hbm_GBps) + " is far from the base " + num(base.gpu.hbm_GBps) +
                       "; are the smallest-rows points really memory bound?");
  const double hbm_rel_se = std::isnan(g.hbm_GBps.stderr_) ? kNaN : g.hbm_GBps.stderr_ / hbm_GBps;

  // Memory-bound knots: the largest eta that keeps every one of their points on the floor.
  for (auto& k : knots) {
    if (!k.memory_bound) continue;
    k.lower_bound = 0;
    for (const auto* p : k.points)
      k.lower_bound = std::max(k.lower_bound, p->flops / peak(*p) / std::max(p->measured_us - launch_us, 1e-9));
    k.eta = k.lower_bound;
    k.fitted = FittedValue{k.eta, k.eta * hbm_rel_se, static_cast<int>(k.points.size()), files_of(k.points),
                           "memory bound: lower bound, time set by the HBM floor"};
  }
  for (auto& k : knots) {
    if (k.eta > 1.0) {
      warnings.push_back(std::string("gemm: ") + (k.fp8 ? "FP8" : "BF16") + " efficiency " + num(k.eta) + " at " +
                         num(k.rows) + " rows exceeds 1 (is the peak right?); clamped to 1");
      k.eta = 1.0;
      k.fitted.value = 1.0;
    }
    EfficiencyFit e{k.rows, k.fitted, k.memory_bound};
    (k.fp8 ? g.fp8_efficiency : g.efficiency).push_back(e);
  }

  // The whole model against every point.
  double sum = 0;
  for (std::size_t i = 0; i < obs.size(); ++i) {
    const Knot& k = knots[knot_of[i]];
    const double model = launch_us + std::max(obs[i].flops / (k.eta * peak(obs[i])),
                                              obs[i].hbm_bytes / (hbm_GBps * kBytesPerUsPerGBps));
    const double r = (obs[i].measured_us - model) / obs[i].measured_us;
    sum += r * r;
  }
  g.rel_rms = std::sqrt(sum / static_cast<double>(obs.size()));
  return g;
}

}  // namespace epsim
