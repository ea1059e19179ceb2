#include "hw/calibration/calibration_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "hw/calibration/extrapolated_intercept.hpp"
#include "hw/calibration/linear_fit.hpp"
#include "sim/hardware/gemm_cost.hpp"
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

/// fit_alpha_beta, except that one size only (with `allow`) takes alpha from the base file and fits the
/// bandwidth alone through (t - alpha) = x / bw, with a warning.
template <typename P>
void fit_alpha_beta_or_base(const std::vector<Sourced<P>>& pts, const std::vector<double>& x,
                            const std::vector<double>& t, const std::string& what, bool allow, double base_alpha,
                            FittedValue& alpha, FittedValue& bw, double& rel_rms, std::vector<std::string>& warnings) {
  if (!allow || std::set<double>(x.begin(), x.end()).size() >= 2) {
    fit_alpha_beta(pts, x, t, what, alpha, bw, rel_rms);
    // (extrapolated_intercept.hpp: a fixed cost from sizes that barely differ)
    alpha.note = extrapolated_intercept(alpha.value, *std::min_element(x.begin(), x.end()),
                                        *std::max_element(x.begin(), x.end()), *std::min_element(t.begin(), t.end()));
    if (!alpha.note.empty()) warnings.push_back(what + ": the fixed cost " + num(alpha.value) + " us is " + alpha.note);
    return;
  }
  std::vector<double> y;
  for (double ti : t) y.push_back(ti - base_alpha);
  if (*std::min_element(y.begin(), y.end()) <= 0)
    cannot_fit(pts, what + ": one size only and a time not above the base fixed cost " + num(base_alpha) + " us");
  const LinearFit f = fit_proportional(x, y);
  const double b = 1.0 / (f.coef(0) * kBytesPerUsPerGBps);
  alpha = fitted(base_alpha, kNaN, 0, {}, "one size only: kept from the base file");
  bw = fitted(b, f.stderr_(0) / f.coef(0) * b, f.points, files_of(pts), "fixed cost from the base file");
  rel_rms = f.rel_rms;
  warnings.push_back(what + ": one size only; the fixed cost " + num(base_alpha) +
                     " us is kept from the base file and the bandwidth fitted alone");
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
  std::vector<Sourced<GemmWithCopyPoint>> contention;
  for (const auto& m : cal.sources) {
    for (const auto& p : m.copy) copies[p.kind].push_back({&p, &m.file});
    for (const auto& p : m.all_to_all)
      (p.ranks <= base.gpus_per_node ? a2a_intra : a2a_inter).push_back({&p, &m.file});
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
    const std::string what = std::string("copy ") + to_string(kind);
    const double base_alpha = kind == CopyKind::ce_peer                        ? base.copy_engine.fixed_cost_us
                              : kind == CopyKind::h2d || kind == CopyKind::d2h ? base.pcie.latency_us
                                                                               : 0.0;
    fit_alpha_beta_or_base(pts, x, t, what, options.one_size_fixed_from_base, base_alpha, c.alpha_us, c.beta_GBps,
                           c.rel_rms, cal.warnings);
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
    fit_alpha_beta_or_base(*pts, x, t, a.intra_node ? "all_to_all (intra-node)" : "all_to_all (inter-node)",
                           options.one_size_fixed_from_base,
                           a.intra_node ? base.nvlink.latency_us : base.infiniband.latency_us, a.latency_us,
                           a.bw_GBps, a.rel_rms, cal.warnings);
    (a.intra_node ? cal.all_to_all_intra : cal.all_to_all_inter) = a;
  }

  // GEMMs of both series, one roofline (gemm_fit.hpp).
  const int align = base.gemm.row_alignment;
  double launch_us = base.gemm.launch_us;
  double hbm_GBps = base.gpu.hbm_GBps;
  {
    std::vector<GemmObservation> obs;
    for (const auto& m : cal.sources) {
      for (const auto& p : m.grouped_gemm) obs.push_back(observe_gemm(p, m.file, m.header.source, align));
      for (const auto& p : m.gemm) obs.push_back(observe_gemm(p, m.file, m.header.source, align));
    }
    if (!obs.empty()) {
      cal.gemm = fit_gemm(obs, base, options.memory_bound_tolerance, cal.warnings);
      if (cal.gemm->launch_us.points > 0) launch_us = cal.gemm->launch_us.value;
      hbm_GBps = cal.gemm->hbm_GBps.value;
    }
  }

  // EP dispatch/combine: NVLink points first, then RDMA points for what those left open.
  {
    std::vector<EpObservation> nvlink, rdma;
    for (const auto& m : cal.sources)
      for (const auto& p : m.ep_comm) {
        EpObservation o = observe_ep(p, m.file, m.header.source, base);
        (o.internode ? rdma : nvlink).push_back(o);
      }
    HardwareSpec start = base;
    if (!nvlink.empty()) {
      cal.ep_nvlink = fit_ep_comm(nvlink, start, true, true, true, cal.warnings);
      // RDMA points cross NVLink too (forwarding): their model reads the fitted NVLink efficiency.
      if (cal.ep_nvlink->efficiency.points > 0) start.ep_backend.nvlink_efficiency = cal.ep_nvlink->efficiency.value;
      if (cal.ep_nvlink->sm_GBps.points > 0) start.ep_backend.sm_GBps = cal.ep_nvlink->sm_GBps.value;
      if (cal.ep_nvlink->dispatch_fixed_us.points > 0)
        start.ep_backend.dispatch_fixed_us = cal.ep_nvlink->dispatch_fixed_us.value;
      if (cal.ep_nvlink->combine_fixed_us.points > 0)
        start.ep_backend.combine_fixed_us = cal.ep_nvlink->combine_fixed_us.value;
    }
    if (!rdma.empty()) {
      const bool nv = cal.ep_nvlink.has_value();
      // The SM rate is one key for both fabrics: RDMA points fit it only without NVLink points, since a
      // rate set by kernels waiting on the NIC would otherwise slow every NVLink kernel down.
      cal.ep_rdma = fit_ep_comm(rdma, start, !nv,
                                !(nv && cal.ep_nvlink->dispatch_fixed_us.points > 0),
                                !(nv && cal.ep_nvlink->combine_fixed_us.points > 0), cal.warnings);
    }
  }

  // CE contention: speed s = min(1, (1 - p) / f), p = copy_GBps * sides * factor / hbm. The simulator stretches
  // the whole kernel (launch included): t_with = t_alone / s, so 1 - f * t_alone / t_with = factor * x with
  // x = copy_GBps * sides / hbm. `factor` is what the simulator's peer copies add on each of their two GPUs
  // per byte copied; a local copy (epsim-hw's) is both sides on the GEMM's GPU (sides = 2), a peer copy one.
  // A row whose copy ran as a kernel (copy_on_sms: true) measured the GEMM sharing its SMs, which this
  // model does not describe: such rows are left out, and with nothing else there is no fit at all.
  int copy_on_sms = 0;
  for (const auto& p : contention) copy_on_sms += p.point->copy_on_sms.value_or(false) ? 1 : 0;
  if (copy_on_sms > 0) {
    const bool all = copy_on_sms == static_cast<int>(contention.size());
    cal.warnings.push_back(
        "gemm_with_copy: " + std::string(all ? "every row's copy" : std::to_string(copy_on_sms) + " rows' copies") +
        " ran on the SMs (copy_on_sms: true): a copy kernel sharing the GEMM's SMs, not HBM traffic; " +
        (all ? "hbm_traffic_factor kept from the base" : "left out of the hbm_traffic_factor fit"));
  }
  if (copy_on_sms < static_cast<int>(contention.size())) {
    if (!cal.gemm)
      cal.warnings.push_back("gemm_with_copy without grouped_gemm: using the base hbm_GBps and launch_us");
    ContentionFit c;
    c.points_copy_on_sms = copy_on_sms;
    std::vector<double> x, z, f_used;
    std::vector<Sourced<GemmWithCopyPoint>> used;
    for (const auto& p : contention) {
      const GemmWithCopyPoint& g = *p.point;
      if (g.copy_on_sms.value_or(false)) continue;
      const double busy = g.gemm_us - launch_us;
      const double memory = gemm_hbm_bytes(g.shape) / (hbm_GBps * kBytesPerUsPerGBps);
      const double f = busy <= memory * (1.0 + options.memory_bound_tolerance) ? 1.0 : memory / busy;
      if (g.gemm_with_copy_us < g.gemm_us * (1.0 + options.min_slowdown)) {
        ++c.points_without_slowdown;
        continue;
      }
      used.push_back(p);
      const double sides = g.copy == CopyKind::ce_local ? 2.0 : 1.0;
      x.push_back(g.copy_GBps * sides / hbm_GBps);
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

  // Every point against the calibrated hardware, through the same functions as the simulator.
  const HardwareSpec hw = apply_calibration(base, cal);
  for (const auto& m : cal.sources) {
    const std::string& dflt = m.header.source;
    auto row = [&](const std::string& series, const std::string& setting, const std::string& where,
                   const std::string& source, double measured, double model) {
      cal.residuals.push_back(PointResidual{series, setting, where, source.empty() ? dflt : source, measured, model});
    };
    for (const auto& p : m.grouped_gemm) {
      const GemmObservation o = observe_gemm(p, m.file, dflt, align);
      row(o.series, o.setting, o.where, o.source, o.measured_us, predict_gemm_point_us(p, hw));
    }
    for (const auto& p : m.gemm) {
      const GemmObservation o = observe_gemm(p, m.file, dflt, align);
      row(o.series, o.setting, o.where, o.source, o.measured_us, predict_gemm_call_us(p, hw));
    }
    for (const auto& p : m.copy)
      row("copy", std::string(to_string(p.kind)) + " " + num(p.bytes) + " bytes", p.where, p.source, p.median_us,
          predict_copy_point_us(p, hw, cal));
    for (const auto& p : m.all_to_all)
      row("all_to_all", std::to_string(p.ranks) + " ranks, " + num(p.bytes_per_pair) + " bytes per pair", p.where,
          p.source, p.median_us, predict_all_to_all_us(p, hw, cal));
    for (const auto& p : m.ep_comm) {
      const EpObservation o = observe_ep(p, m.file, dflt, base);
      row("ep_comm", o.setting, o.where, o.source, o.measured_us, predict_ep_point_us(p, hw));
    }
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
  if ((h2d && h2d->alpha_us.points > 0) || (d2h && d2h->alpha_us.points > 0))
    hw.pcie.latency_us = std::max(0.0, h2d && d2h ? (h2d->alpha_us.value + d2h->alpha_us.value) / 2
                                                  : (h2d ? h2d : d2h)->alpha_us.value);
  if (cal.all_to_all_intra) {
    if (cal.all_to_all_intra->latency_us.points > 0)
      hw.nvlink.latency_us = std::max(0.0, cal.all_to_all_intra->latency_us.value);
    hw.ep_backend.nvlink_efficiency = std::min(1.0, cal.all_to_all_intra->bw_GBps.value / base.nvlink.port_bw_GBps);
  }
  if (cal.gemm) {
    if (cal.gemm->launch_us.points > 0) hw.gemm.launch_us = cal.gemm->launch_us.value;
    if (cal.gemm->hbm_GBps.points > 0) hw.gpu.hbm_GBps = cal.gemm->hbm_GBps.value;
    // A curve is replaced as a whole, and only for the dtype class that has points.
    if (!cal.gemm->efficiency.empty()) hw.gemm.efficiency.clear();
    for (const auto& e : cal.gemm->efficiency)
      hw.gemm.efficiency.push_back(GemmEfficiencyPoint{e.padded_rows, e.efficiency.value});
    if (!cal.gemm->fp8_efficiency.empty()) hw.gemm.fp8_efficiency.clear();
    for (const auto& e : cal.gemm->fp8_efficiency)
      hw.gemm.fp8_efficiency.push_back(GemmEfficiencyPoint{e.padded_rows, e.efficiency.value});
  }
  for (const auto* ep : {&cal.ep_nvlink, &cal.ep_rdma}) {
    if (!*ep) continue;
    const EpCommFit& f = **ep;
    if (f.efficiency.points > 0)
      (f.internode ? hw.ep_backend.ib_efficiency : hw.ep_backend.nvlink_efficiency) = std::min(1.0, f.efficiency.value);
    if (f.sm_GBps.points > 0) hw.ep_backend.sm_GBps = f.sm_GBps.value;
    if (f.dispatch_fixed_us.points > 0) hw.ep_backend.dispatch_fixed_us = f.dispatch_fixed_us.value;
    if (f.combine_fixed_us.points > 0) hw.ep_backend.combine_fixed_us = f.combine_fixed_us.value;
  }
  if (cal.contention)
    hw.copy_engine.hbm_traffic_factor = std::clamp(cal.contention->hbm_traffic_factor.value, 0.0, 4.0);
  return hw;
}

double predict_gemm_point_us(const GemmPoint& point, const HardwareSpec& hw) {
  const GemmObservation o = observe_gemm(point, "", "", hw.gemm.row_alignment);
  return gemm_roofline_us(hw, point.shape.dtype, o.rows, o.flops, o.hbm_bytes);
}

double predict_gemm_call_us(const GemmCallPoint& point, const HardwareSpec& hw) {
  const int align = hw.gemm.row_alignment;
  return gemm_roofline_us(hw, point.dtype, gemm_call_rows(point, align), gemm_call_flops(point, align),
                          gemm_call_hbm_bytes(point));
}

double predict_copy_point_us(const CopyPoint& point, const HardwareSpec& hw, const Calibration& cal) {
  switch (point.kind) {
    case CopyKind::ce_peer:
      return hw.copy_engine.fixed_cost_us + point.bytes / (hw.copy_engine.bw_GBps * kBytesPerUsPerGBps);
    case CopyKind::h2d:
      return hw.pcie.latency_us + point.bytes / (hw.pcie.h2d_GBps * kBytesPerUsPerGBps);
    case CopyKind::d2h:
      return hw.pcie.latency_us + point.bytes / (hw.pcie.d2h_GBps * kBytesPerUsPerGBps);
    case CopyKind::ce_local:
    case CopyKind::sm_copy:
      break;
  }
  const CopyFit* c = cal.copy(point.kind);
  if (!c) throw std::invalid_argument(std::string("no fit of copy kind ") + to_string(point.kind));
  return c->alpha_us.value + point.bytes / (c->beta_GBps.value * kBytesPerUsPerGBps);
}

double predict_all_to_all_us(const AllToAllPoint& point, const HardwareSpec& hw, const Calibration& cal) {
  const auto& fit = point.ranks <= hw.gpus_per_node ? cal.all_to_all_intra : cal.all_to_all_inter;
  if (!fit) throw std::invalid_argument("no all-to-all fit for " + std::to_string(point.ranks) + " ranks");
  return fit->latency_us.value + (point.ranks - 1) * point.bytes_per_pair / (fit->bw_GBps.value * kBytesPerUsPerGBps);
}

double predict_ep_point_us(const EpCommPoint& point, const HardwareSpec& hw) {
  const EpObservation o = ep_geometry(point, hw);
  const EpBackendSpec& ep = hw.ep_backend;
  return ep_model_us(o, hw, o.internode ? ep.ib_efficiency : ep.nvlink_efficiency, ep.sm_GBps, ep.dispatch_fixed_us,
                     ep.combine_fixed_us);
}

}  // namespace epsim
