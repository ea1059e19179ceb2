#include "hw/calibration/calibration_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "hw/calibration/linear_fit.hpp"
#include "sim/core/input_error.hpp"

namespace epsim {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kBytesPerUsPerGBps = 1e3;  // 1 GB/s = 1e9 B/s = 1e3 B/us

/// A point of any series with the file it came from.
template <typename P>
struct Sourced {
  const P* point;
  const std::string* file;
};

template <typename P>
std::vector<std::string> files_of(const std::vector<Sourced<P>>& pts) {
  std::vector<std::string> files;
  for (const auto& p : pts)
    if (std::find(files.begin(), files.end(), *p.file) == files.end()) files.push_back(*p.file);
  return files;
}

FittedValue fitted(double value, double se, int points, std::vector<std::string> files, std::string note = "") {
  return FittedValue{value, se, points, std::move(files), std::move(note)};
}

/// Throws an InputError at the first point's place (file:line:col of the series' first point).
template <typename P>
[[noreturn]] void cannot_fit(const std::vector<Sourced<P>>& pts, const std::string& message) {
  const std::string& where = pts.front().point->where;  // "file:line:col"
  const std::string file = *pts.front().file;
  const std::string place = where.size() > file.size() + 1 ? where.substr(file.size() + 1) : "";
  throw InputError(file, place, message);
}

/// Intercept a (us) and reciprocal slope (bytes per us -> GB/s) of t = a + x / bw, with errors.
template <typename P>
void fit_alpha_beta(const std::vector<Sourced<P>>& pts, const std::vector<double>& x, const std::vector<double>& t,
                    const std::string& what, FittedValue& alpha, FittedValue& bw, double& rel_rms) {
  if (std::set<double>(x.begin(), x.end()).size() < 2)
    cannot_fit(pts, what + ": need at least two different sizes to separate the fixed cost from the bandwidth");
  const LinearFit f = fit_line(x, t);
  const double slope = f.coef(1);  // us per byte
  if (!(slope > 0)) cannot_fit(pts, what + ": time does not grow with size (fitted slope " + std::to_string(slope) + ")");
  const auto files = files_of(pts);
  alpha = fitted(f.coef(0), f.stderr_(0), f.points, files);
  const double bw_GBps = 1.0 / (slope * kBytesPerUsPerGBps);
  bw = fitted(bw_GBps, f.stderr_(1) / slope * bw_GBps, f.points, files);  // d(1/s) = ds / s^2
  rel_rms = f.rel_rms;
}

std::string num(double v) {
  std::ostringstream out;
  out.precision(4);
  out << v;
  return out.str();
}

}  // namespace

std::int64_t padded_rows(std::int64_t tokens, int row_alignment) {
  return (tokens + row_alignment - 1) / row_alignment * row_alignment;
}

double gemm_flops(const GemmShape& s, int row_alignment) {
  return 2.0 * s.matrices * static_cast<double>(s.hidden_size) * s.ffn_size *
         static_cast<double>(padded_rows(s.tokens_per_expert, row_alignment)) * s.experts;
}

double gemm_hbm_bytes(const GemmShape& s) {
  const double m = s.matrices, h = s.hidden_size, f = s.ffn_size, b = s.dtype_bytes;
  const double weights = m * h * f * b;
  const double activations = static_cast<double>(s.tokens_per_expert) * b * (2.0 * h + 2.0 * (m - 1.0) * f);
  return s.experts * (weights + activations);
}

const CopyFit* Calibration::copy(CopyKind kind) const {
  for (const auto& c : copies)
    if (c.kind == kind) return &c;
  return nullptr;
}

Calibration fit_measurements(const std::vector<Measurements>& sources, const HardwareSpec& base,
                             const FitOptions& options) {
  Calibration cal;
  cal.sources = sources;
  std::map<CopyKind, std::vector<Sourced<CopyPoint>>> copies;
  std::vector<Sourced<AllToAllPoint>> a2a_intra, a2a_inter;
  std::vector<Sourced<GemmPoint>> gemms;
  std::vector<Sourced<GemmWithCopyPoint>> contention;
  for (const auto& m : cal.sources) {
    for (const auto& p : m.copy) copies[p.kind].push_back({&p, &m.file});
    for (const auto& p : m.all_to_all)
      (p.ranks <= base.gpus_per_node ? a2a_intra : a2a_inter).push_back({&p, &m.file});
    for (const auto& p : m.grouped_gemm) gemms.push_back({&p, &m.file});
    for (const auto& p : m.gemm_with_copy) contention.push_back({&p, &m.file});
  }

  // Copies: t = alpha + bytes / beta, per kind.
  for (const auto& [kind, pts] : copies) {
    CopyFit c;
    c.kind = kind;
    std::vector<double> x, t;
    for (const auto& p : pts) {
      x.push_back(p.point->bytes);
      t.push_back(p.point->median_us);
    }
    fit_alpha_beta(pts, x, t, std::string("copy ") + to_string(kind), c.alpha_us, c.beta_GBps, c.rel_rms);
    if (c.alpha_us.value < 0)
      cal.warnings.push_back(std::string("copy ") + to_string(kind) + ": negative fixed cost " + num(c.alpha_us.value) +
                             " us (measure smaller copies)");
    cal.copies.push_back(c);
  }

  // All-to-all: t = latency + (ranks - 1) * bytes_per_pair / bw, intra- and inter-node apart.
  for (auto* pts : {&a2a_intra, &a2a_inter}) {
    if (pts->empty()) continue;
    AllToAllFit a;
    a.intra_node = pts == &a2a_intra;
    std::vector<double> x, t;
    for (const auto& p : *pts) {
      x.push_back((p.point->ranks - 1) * p.point->bytes_per_pair);
      t.push_back(p.point->median_us);
    }
    fit_alpha_beta(*pts, x, t, a.intra_node ? "all_to_all (intra-node)" : "all_to_all (inter-node)", a.latency_us,
                   a.bw_GBps, a.rel_rms);
    (a.intra_node ? cal.all_to_all_intra : cal.all_to_all_inter) = a;
  }

  // Grouped GEMM.
  const int align = base.gemm.row_alignment;
  const double peak_flops_per_us = base.gpu.bf16_peak_TFLOPs * 1e6;  // 1 TFLOP/s = 1e6 FLOP per us
  double launch_us = base.gemm.launch_us;
  double hbm_GBps = base.gpu.hbm_GBps;
  if (!gemms.empty()) {
    GemmFit g;
    std::map<std::int64_t, std::vector<Sourced<GemmPoint>>> by_rows;
    for (const auto& p : gemms) by_rows[padded_rows(p.point->shape.tokens_per_expert, align)].push_back(p);
    // launch and hbm from the smallest padded rows, where the weight read dominates: t = launch + bytes / hbm.
    const auto& small = by_rows.begin()->second;
    std::vector<double> x, t;
    for (const auto& p : small) {
      x.push_back(gemm_hbm_bytes(p.point->shape));
      t.push_back(p.point->median_us);
    }
    if (std::set<double>(x.begin(), x.end()).size() >= 2) {
      const LinearFit f = fit_line(x, t);
      const double slope = f.coef(1);
      if (!(slope > 0)) cannot_fit(small, "grouped_gemm: time does not grow with HBM bytes at the smallest rows");
      launch_us = f.coef(0);
      hbm_GBps = 1.0 / (slope * kBytesPerUsPerGBps);
      g.launch_us = fitted(launch_us, f.stderr_(0), f.points, files_of(small), "intercept at the smallest rows");
      g.hbm_GBps = fitted(hbm_GBps, f.stderr_(1) / slope * hbm_GBps, f.points, files_of(small));
      g.memory_rel_rms = f.rel_rms;
      if (launch_us < 0) {
        cal.warnings.push_back("grouped_gemm: negative launch_us " + num(launch_us) + " fitted; using 0");
        launch_us = 0;
        g.launch_us.value = 0;
      }
    } else {
      // One size only: keep the base launch and fit hbm through (t - launch) = bytes / hbm.
      std::vector<double> y;
      for (double ti : t) y.push_back(ti - launch_us);
      if (*std::min_element(y.begin(), y.end()) <= 0)
        cannot_fit(small, "grouped_gemm: measured time below the base launch_us " + num(launch_us) + " us");
      const LinearFit f = fit_proportional(x, y);
      hbm_GBps = 1.0 / (f.coef(0) * kBytesPerUsPerGBps);
      g.hbm_GBps = fitted(hbm_GBps, f.stderr_(0) / f.coef(0) * hbm_GBps, f.points, files_of(small),
                          "launch_us kept from the base file (one size only at the smallest rows)");
      g.memory_rel_rms = f.rel_rms;
      cal.warnings.push_back("grouped_gemm: the smallest rows have one size only; launch_us kept from the base file");
    }
    if (hbm_GBps > 1.2 * base.gpu.hbm_GBps || hbm_GBps < 0.3 * base.gpu.hbm_GBps)
      cal.warnings.push_back("grouped_gemm: fitted hbm_GBps " + num(hbm_GBps) + " is far from the base " +
                             num(base.gpu.hbm_GBps) + "; are the smallest-rows points really memory bound?");
    const double hbm_rel_se = std::isnan(g.hbm_GBps.stderr_) ? kNaN : g.hbm_GBps.stderr_ / hbm_GBps;

    // eta(R): (t - launch) = FLOPs / peak * (1 / eta) over the compute-bound points at R.
    for (const auto& [rows, pts] : by_rows) {
      std::vector<double> xc, yc;
      double lower_bound = 0;
      for (const auto& p : pts) {
        const double busy = p.point->median_us - launch_us;
        if (busy <= 0) cannot_fit(std::vector<Sourced<GemmPoint>>{p}, "grouped_gemm: median_us is not above launch_us " + num(launch_us));
        const double flops = gemm_flops(p.point->shape, align) / peak_flops_per_us;
        const double memory = gemm_hbm_bytes(p.point->shape) / (hbm_GBps * kBytesPerUsPerGBps);
        if (busy <= memory * (1.0 + options.memory_bound_tolerance)) {
          lower_bound = std::max(lower_bound, flops / busy);
        } else {
          xc.push_back(flops);
          yc.push_back(busy);
        }
      }
      EfficiencyFit e;
      e.padded_rows = static_cast<double>(rows);
      if (!xc.empty()) {
        const LinearFit f = fit_proportional(xc, yc);
        const double eta = 1.0 / f.coef(0);
        e.efficiency = fitted(eta, f.stderr_(0) * eta * eta, f.points, files_of(pts));
        if (lower_bound > 0) e.efficiency.note = "points on the HBM floor at these rows were left out";
      } else {
        e.memory_bound = true;
        e.efficiency = fitted(lower_bound, lower_bound * hbm_rel_se, static_cast<int>(pts.size()), files_of(pts),
                              "memory bound: lower bound, time set by the HBM floor");
      }
      if (e.efficiency.value > 1.0) {
        cal.warnings.push_back("grouped_gemm: efficiency " + num(e.efficiency.value) + " at " + num(rows) +
                               " rows exceeds 1 (is bf16_peak_TFLOPs right?); clamped to 1");
        e.efficiency.value = 1.0;
      }
      g.efficiency.push_back(e);
    }

    // The whole model against every point.
    double sum = 0;
    for (const auto& [rows, pts] : by_rows) {
      double eta = 1;
      for (const auto& e : g.efficiency)
        if (e.padded_rows == static_cast<double>(rows)) eta = e.efficiency.value;
      for (const auto& p : pts) {
        const double model = launch_us + std::max(gemm_flops(p.point->shape, align) / (eta * peak_flops_per_us),
                                                   gemm_hbm_bytes(p.point->shape) / (hbm_GBps * kBytesPerUsPerGBps));
        const double r = (p.point->median_us - model) / p.point->median_us;
        sum += r * r;
      }
    }
    g.rel_rms = std::sqrt(sum / static_cast<double>(gemms.size()));
    cal.gemm = g;
  }

  // CE contention: speed s = min(1, (1 - p) / f), p = copy_GBps * factor / hbm. The simulator stretches the
  // whole kernel (launch included): t_with = t_alone / s, so 1 - f * t_alone / t_with = factor * copy_GBps / hbm.
  if (!contention.empty()) {
    if (!cal.gemm)
      cal.warnings.push_back("gemm_with_copy without grouped_gemm: using the base hbm_GBps and launch_us");
    ContentionFit c;
    std::vector<double> x, z, f_used;
    std::vector<Sourced<GemmWithCopyPoint>> used;
    for (const auto& p : contention) {
      const GemmWithCopyPoint& g = *p.point;
      const double busy = g.gemm_us - launch_us;
      const double memory = gemm_hbm_bytes(g.shape) / (hbm_GBps * kBytesPerUsPerGBps);
      const double f = busy <= memory * (1.0 + options.memory_bound_tolerance) ? 1.0 : memory / busy;
      if (g.gemm_with_copy_us < g.gemm_us * (1.0 + options.min_slowdown)) {
        ++c.points_without_slowdown;
        continue;
      }
      used.push_back(p);
      x.push_back(g.copy_GBps / hbm_GBps);
      z.push_back(1.0 - f * g.gemm_us / g.gemm_with_copy_us);
      f_used.push_back(f);
    }
    if (used.empty())
      cannot_fit(contention, "gemm_with_copy: no GEMM slowed down by a concurrent copy (measure memory-bound GEMMs, "
                             "small tokens_per_expert)");
    // Plain least squares through the origin: z = factor * x.
    double sxx = 0, sxz = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      sxx += x[i] * x[i];
      sxz += x[i] * z[i];
    }
    const double factor = sxz / sxx;
    double rss = 0, rel = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      rss += (z[i] - factor * x[i]) * (z[i] - factor * x[i]);
      const double speed = std::min(1.0, (1.0 - factor * x[i]) / f_used[i]);
      const double predicted = used[i].point->gemm_us / std::max(speed, 0.05);
      const double r = (used[i].point->gemm_with_copy_us - predicted) / used[i].point->gemm_with_copy_us;
      rel += r * r;
    }
    const int n = static_cast<int>(x.size());
    const double se = n > 1 ? std::sqrt(rss / (n - 1) / sxx) : kNaN;
    c.hbm_traffic_factor = fitted(factor, se, n, files_of(used));
    c.rel_rms = std::sqrt(rel / n);
    if (factor < 0 || factor > 4)
      cal.warnings.push_back("gemm_with_copy: hbm_traffic_factor " + num(factor) + " outside [0, 4]; clamped");
    cal.contention = c;
  }
  return cal;
}

HardwareSpec apply_calibration(const HardwareSpec& base, const Calibration& cal) {
  HardwareSpec hw = base;
  if (const CopyFit* c = cal.copy(CopyKind::ce_peer)) {
    hw.copy_engine.bw_GBps = c->beta_GBps.value;
    hw.copy_engine.fixed_cost_us = std::max(0.0, c->alpha_us.value);
  }
  const CopyFit* h2d = cal.copy(CopyKind::h2d);
  const CopyFit* d2h = cal.copy(CopyKind::d2h);
  if (h2d) hw.pcie.h2d_GBps = h2d->beta_GBps.value;
  if (d2h) hw.pcie.d2h_GBps = d2h->beta_GBps.value;
  if (h2d || d2h)
    hw.pcie.latency_us = std::max(0.0, h2d && d2h ? (h2d->alpha_us.value + d2h->alpha_us.value) / 2
                                                  : (h2d ? h2d : d2h)->alpha_us.value);
  if (cal.all_to_all_intra) {
    hw.nvlink.latency_us = std::max(0.0, cal.all_to_all_intra->latency_us.value);
    hw.ep_backend.nvlink_efficiency = std::min(1.0, cal.all_to_all_intra->bw_GBps.value / base.nvlink.port_bw_GBps);
  }
  if (cal.gemm) {
    if (cal.gemm->launch_us.points > 0) hw.gemm.launch_us = cal.gemm->launch_us.value;
    hw.gpu.hbm_GBps = cal.gemm->hbm_GBps.value;
    hw.gemm.efficiency.clear();
    for (const auto& e : cal.gemm->efficiency)
      hw.gemm.efficiency.push_back(GemmEfficiencyPoint{e.padded_rows, e.efficiency.value});
  }
  if (cal.contention)
    hw.copy_engine.hbm_traffic_factor = std::clamp(cal.contention->hbm_traffic_factor.value, 0.0, 4.0);
  return hw;
}

}  // namespace epsim
