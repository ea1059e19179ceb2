#include "hw/calibration/ep_comm_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "hw/calibration/ep_bench_traffic.hpp"
#include "hw/calibration/extrapolated_intercept.hpp"
#include "hw/calibration/fidelity_ep_bench.hpp"
#include "hw/calibration/fit_error.hpp"
#include "hw/calibration/nonlinear_fit.hpp"
#include "sim/hardware/log2_curve.hpp"

namespace epsim {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kBytesPerUsPerGBps = 1e3;

/// The four parameters and which of them the fit moves.
struct EpParams {
  double efficiency = 1, sm_GBps = 0, dispatch_fixed_us = 0, combine_fixed_us = 0;
  bool free_eff = true, free_sm = false, free_dispatch = false, free_combine = false;

  Eigen::VectorXd pack() const {
    std::vector<double> v;
    if (free_eff) v.push_back(std::log(efficiency));
    if (free_sm) v.push_back(std::log(sm_GBps));
    if (free_dispatch) v.push_back(dispatch_fixed_us);
    if (free_combine) v.push_back(combine_fixed_us);
    return Eigen::Map<Eigen::VectorXd>(v.data(), static_cast<Eigen::Index>(v.size()));
  }
  EpParams unpack(const Eigen::VectorXd& q) const {
    EpParams p = *this;
    Eigen::Index i = 0;
    if (free_eff) p.efficiency = std::exp(q(i++));
    if (free_sm) p.sm_GBps = std::exp(q(i++));
    if (free_dispatch) p.dispatch_fixed_us = q(i++);
    if (free_combine) p.combine_fixed_us = q(i++);
    return p;
  }
};

struct Solved {
  EpParams params;
  NonlinearFit fit;
};

Solved solve(const std::vector<EpObservation>& obs, const HardwareSpec& hw, const EpParams& start) {
  auto residuals = [&](const Eigen::VectorXd& q) {
    const EpParams p = start.unpack(q);
    Eigen::VectorXd r(static_cast<Eigen::Index>(obs.size()));
    for (std::size_t i = 0; i < obs.size(); ++i) {
      const double model = ep_model_us(obs[i], hw, p.efficiency, p.sm_GBps, p.dispatch_fixed_us, p.combine_fixed_us);
      r(static_cast<Eigen::Index>(i)) = (obs[i].measured_us - model) / obs[i].measured_us;
    }
    return r;
  };
  Solved s;
  s.fit = fit_levenberg_marquardt(residuals, start.pack());
  s.params = start.unpack(s.fit.params);
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}


std::string num(double v) {
  std::ostringstream out;
  out.precision(4);
  out << v;
  return out.str();
}

/// Fills o's per-rank loads from the hops the engine runs (fidelity_ep_bench.cpp): inside a node
/// rank -> rank; across nodes rank -> the destination node's GPU with the sender's local index over
/// InfiniBand, which forwards to each destination rank there over NVLink.
void rank_loads(const EpBenchTraffic& t, EpObservation& o) {
  const std::size_t n = static_cast<std::size_t>(t.ep);
  const int gpn = t.gpus_per_node;
  std::vector<double> nv_out(n, 0), nv_in(n, 0), ib_out(n, 0), ib_in(n, 0);
  const int nodes = (t.ep + gpn - 1) / gpn;
  for (int s = 0; s < t.ep; ++s) {
    const int node = s / gpn;
    for (int d = 0; d < t.ep; ++d)
      if (d != s && d / gpn == node) {
        nv_out[s] += t.rank_bytes[s][d];
        nv_in[d] += t.rank_bytes[s][d];
      }
    for (int m = 0; m < nodes; ++m) {
      if (m == node) continue;
      const int fwd = m * gpn + s % gpn;
      if (fwd >= t.ep) continue;
      ib_out[s] += t.node_bytes[s][m];
      ib_in[fwd] += t.node_bytes[s][m];
      for (int d = m * gpn; d < std::min(t.ep, (m + 1) * gpn); ++d)
        if (d != fwd) {
          nv_out[fwd] += t.rank_bytes[s][d];
          nv_in[d] += t.rank_bytes[s][d];
        }
    }
  }
  o.nvlink_bytes.assign(n, 0);
  o.rdma_bytes.assign(n, 0);
  o.sm_nvlink_bytes.assign(n, 0);
  o.sm_rdma_bytes.assign(n, 0);
  for (std::size_t r = 0; r < n; ++r) {
    o.nvlink_bytes[r] = std::max(nv_out[r], nv_in[r]);
    o.rdma_bytes[r] = std::max(ib_out[r], ib_in[r]);
    // The SM links carry both kinds: the side (out or in) with more bytes, each kind as sent.
    const bool out = nv_out[r] + ib_out[r] >= nv_in[r] + ib_in[r];
    o.sm_nvlink_bytes[r] = out ? nv_out[r] : nv_in[r];
    o.sm_rdma_bytes[r] = out ? ib_out[r] : ib_in[r];
  }
}

}  // namespace

EpObservation ep_geometry(const EpCommPoint& p, const HardwareSpec& base) {
  const EpBenchTraffic traffic = ep_bench_traffic(p, 1);
  EpObservation o;
  o.point = &p;
  o.internode = ep_point_internode(p);
  o.bottleneck_bytes = o.internode ? busiest_rdma_bytes(traffic) : busiest_nvlink_bytes(traffic);
  rank_loads(traffic, o);
  o.sms = p.sms > 0 ? p.sms : base.ep_backend.comm_sms;
  const int nodes = (traffic.ep + traffic.gpus_per_node - 1) / traffic.gpus_per_node;
  const int peers = o.internode ? nodes - 1 : std::min(traffic.ep, traffic.gpus_per_node) - 1;
  o.message_bytes = peers > 0 ? o.bottleneck_bytes / peers : o.bottleneck_bytes;
  o.where = p.where;
  return o;
}

EpObservation observe_ep(const EpCommPoint& p, const std::string& file, const std::string& default_source,
                         const HardwareSpec& base) {
  const EpBenchTraffic traffic = ep_bench_traffic(p, 1);
  EpObservation o = ep_geometry(p, base);
  o.measured_us = ep_point_time_us(p, traffic);
  std::ostringstream s;
  s << (p.implementation.empty() ? "ep" : p.implementation) << " " << to_string(p.kernel) << " " << to_string(p.dtype)
    << " EP" << p.ep;
  if (o.internode) s << " (" << p.ep / traffic.gpus_per_node << " nodes)";
  s << ", " << p.tokens << " tok, " << o.sms << (p.sms > 0 ? " SMs" : " SMs (base)");
  if (!p.kernel_only) s << ", API";
  o.setting = s.str();
  o.source = p.source.empty() ? default_source : p.source;
  o.file = file;
  return o;
}

double ep_model_us(const EpObservation& o, const HardwareSpec& hw, double efficiency, double sm_GBps,
                   double dispatch_fixed_us, double combine_fixed_us) {
  const double nvl_eff = o.internode ? hw.ep_backend.nvlink_efficiency : efficiency;
  const double ib_eff = o.internode ? efficiency : hw.ep_backend.ib_efficiency;
  const double nvl_GBps = hw.nvlink.port_bw_GBps * nvl_eff;
  const double ib_GBps = hw.infiniband.nic_bw_GBps * ib_eff;
  const double sm_rate_GBps = o.sms * sm_GBps;
  double sum_bytes_per_GBps = 0;
  for (std::size_t r = 0; r < o.nvlink_bytes.size(); ++r) {
    double t = 0;
    if (o.nvlink_bytes[r] > 0) t = std::max(t, o.nvlink_bytes[r] / nvl_GBps);
    if (o.rdma_bytes[r] > 0) t = std::max(t, o.rdma_bytes[r] / ib_GBps);
    if (sm_GBps > 0) {
      const double sm_wire = o.sm_nvlink_bytes[r] + (o.sm_rdma_bytes[r] > 0 ? o.sm_rdma_bytes[r] * nvl_eff / ib_eff : 0);
      t = std::max(t, sm_wire / sm_rate_GBps);
    }
    sum_bytes_per_GBps += t;
  }
  const double busy = o.nvlink_bytes.empty() ? 0 : sum_bytes_per_GBps / static_cast<double>(o.nvlink_bytes.size());
  const double fixed = o.point->kernel == EpKernel::dispatch ? dispatch_fixed_us : combine_fixed_us;
  const double latency_us = o.internode ? hw.infiniband.latency_us : hw.nvlink.latency_us;
  const double curve = message_efficiency_at(hw.ep_backend.message_efficiency, o.message_bytes);
  // An API point pays the host's call cost on top of the kernel, as the replay charges it.
  const double host_us = o.point->kernel_only ? 0.0 : kApiHostCost_us;
  return fixed + host_us + latency_us + busy / (curve * kBytesPerUsPerGBps);
}

EpCommFit fit_ep_comm(const std::vector<EpObservation>& obs, const HardwareSpec& hw, bool fit_sm, bool fit_dispatch_fixed,
                      bool fit_combine_fixed,
                      std::vector<std::string>& warnings) {
  EpCommFit result;
  result.points = static_cast<int>(obs.size());
  if (obs.empty()) return result;
  const bool inter = obs.front().internode;
  result.internode = inter;
  const std::string what = inter ? "ep_comm (RDMA)" : "ep_comm (NVLink)";
  const double link_GBps = inter ? hw.infiniband.nic_bw_GBps : hw.nvlink.port_bw_GBps;
  if (!(link_GBps > 0))
    throw_at_point(obs.front().file, obs.front().where,
                   what + ": the base hardware has no " + (inter ? "infiniband.nic_bw_GBps" : "nvlink.port_bw_GBps"));
  for (const auto& o : obs)
    if (!(o.bottleneck_bytes > 0))
      throw_at_point(o.file, o.where, what + ": no bytes cross a link in this point (one rank, or no other node)");

  // With one SM count in every point, an SM-bound and a link-bound rate look the same: the link
  // efficiency takes the rate and the SM rate is not fitted.
  std::set<int> sm_counts;
  for (const auto& o : obs) sm_counts.insert(o.sms);
  // Unless the base file's SM rate already binds below the link: then the SMs take the rate (sm_GBps is
  // fitted, the link efficiency kept), else a kept SM rate would cap every prediction below the points.
  bool sm_takes_rate = false;
  if (fit_sm && sm_counts.size() < 2) {
    const double base_eff = inter ? hw.ep_backend.ib_efficiency : hw.ep_backend.nvlink_efficiency;
    sm_takes_rate = hw.ep_backend.sm_GBps > 0 && *sm_counts.begin() * hw.ep_backend.sm_GBps < link_GBps * base_eff;
    fit_sm = sm_takes_rate;
    warnings.push_back(what + ": every point has " + std::to_string(*sm_counts.begin()) + " SMs; " +
                       (sm_takes_rate ? "the base file's SM rate binds, so sm_GBps takes the rate and the link "
                                        "efficiency is kept from the base file"
                                      : "the rate is taken as link bound and sm_GBps is kept from the base file"));
  }
  EpParams start;
  start.efficiency = inter ? hw.ep_backend.ib_efficiency : hw.ep_backend.nvlink_efficiency;
  start.sm_GBps = hw.ep_backend.sm_GBps;
  start.dispatch_fixed_us = hw.ep_backend.dispatch_fixed_us;
  start.combine_fixed_us = hw.ep_backend.combine_fixed_us;
  // A kernel's fixed cost is separable from the bandwidth only with two or more bottleneck sizes.
  std::set<double> sizes[2];
  for (const auto& o : obs) sizes[o.point->kernel == EpKernel::dispatch ? 0 : 1].insert(o.bottleneck_bytes);
  const bool fit_fixed[2] = {fit_dispatch_fixed, fit_combine_fixed};
  start.free_dispatch = fit_fixed[0] && sizes[0].size() >= 2;
  start.free_combine = fit_fixed[1] && sizes[1].size() >= 2;
  for (int k = 0; k < 2; ++k)
    if (fit_fixed[k] && sizes[k].size() == 1)
      warnings.push_back(what + ": " + (k == 0 ? "dispatch" : "combine") +
                         " points have one size only; its fixed cost is kept from the base file");
  if (start.free_dispatch) start.dispatch_fixed_us = 0;
  if (start.free_combine) start.combine_fixed_us = 0;

  // Rates implied by each point with the starting fixed costs: a start for the link and SM rates.
  std::vector<double> link_eff, per_sm;
  for (const auto& o : obs) {
    const double fixed = o.point->kernel == EpKernel::dispatch ? start.dispatch_fixed_us : start.combine_fixed_us;
    const double busy = o.measured_us - fixed > 0 ? o.measured_us - fixed : o.measured_us;
    const double rate = o.bottleneck_bytes / (busy * kBytesPerUsPerGBps);
    link_eff.push_back(rate / link_GBps);
    per_sm.push_back(rate / o.sms);
  }
  start.efficiency = std::clamp(*std::max_element(link_eff.begin(), link_eff.end()), 1e-3, 2.0);
  if (sm_takes_rate) {
    start.efficiency = inter ? hw.ep_backend.ib_efficiency : hw.ep_backend.nvlink_efficiency;
    start.free_eff = false;
  }

  // Several starts of the SM rate (the min() has a kink: a start far off may leave every point on one side).
  std::vector<double> sm_starts;
  if (fit_sm) {
    std::sort(per_sm.begin(), per_sm.end());
    sm_starts = {per_sm.front(), median(per_sm), per_sm.back(), 4 * per_sm.back()};
  }
  Solved best;
  bool have = false;
  for (double sm : fit_sm ? sm_starts : std::vector<double>{start.sm_GBps}) {
    EpParams s = start;
    s.free_sm = fit_sm;
    s.sm_GBps = sm;
    Solved t = solve(obs, hw, s);
    if (!have || t.fit.rel_rms < best.fit.rel_rms) {
      best = t;
      have = true;
    }
  }
  // Parameters no point is sensitive to go back to the base values and the rest is fitted again.
  auto index_of = [](const EpParams& p, int which) {
    int i = 0;
    const bool flags[4] = {p.free_eff, p.free_sm, p.free_dispatch, p.free_combine};
    for (int j = 0; j < which; ++j) i += flags[j] ? 1 : 0;
    return flags[which] ? i : -1;
  };
  bool held_at_zero[2] = {false, false};
  bool sm_zeroed = false;
  for (int round = 0; round < 4; ++round) {
    EpParams s = best.params;
    bool changed = false;
    const int ie = index_of(best.params, 0), is = index_of(best.params, 1);
    if (is >= 0 && !best.fit.determined[static_cast<std::size_t>(is)] && sm_takes_rate) {
      // The points run faster than the kept link allows through any SM rate: the SMs never limit
      // (sm_GBps 0, written as fitted) and the link efficiency takes the rate. Refitted from the start,
      // as the fixed costs found with the SM rate stuck are meaningless.
      s = start;
      s.free_sm = false;
      s.sm_GBps = 0;
      s.free_eff = true;
      sm_zeroed = true;
      sm_takes_rate = false;
      warnings.push_back(what + ": the points are faster than the base's SM rate allows and no SM rate binds; "
                         "sm_GBps is set to 0 (the SMs never limit) and the link efficiency is fitted");
      best = solve(obs, hw, s);
      continue;
    }
    // A negative fixed cost has no meaning (two sizes whose times do not follow fixed + bytes / rate):
    // it is held at 0 and the rest fitted again, so that the written file predicts what was fitted.
    for (auto [is_free, fixed, name, held] :
         {std::make_tuple(&s.free_dispatch, &s.dispatch_fixed_us, "dispatch", &held_at_zero[0]),
          std::make_tuple(&s.free_combine, &s.combine_fixed_us, "combine", &held_at_zero[1])})
      if (*is_free && *fixed < 0) {
        *held = true;
        warnings.push_back(what + ": the " + name + " points give a negative fixed cost (" + num(*fixed) +
                           " us); it is held at 0");
        *is_free = false;
        *fixed = 0;
        changed = true;
      }
    if (is >= 0 && !best.fit.determined[static_cast<std::size_t>(is)]) {
      s.free_sm = false;
      s.sm_GBps = hw.ep_backend.sm_GBps;
      changed = true;
      warnings.push_back(what + ": no point is SM bound; sm_GBps is kept from the base file");
    }
    if (ie >= 0 && !best.fit.determined[static_cast<std::size_t>(ie)]) {
      s.free_eff = false;
      s.efficiency = inter ? hw.ep_backend.ib_efficiency : hw.ep_backend.nvlink_efficiency;
      changed = true;
      warnings.push_back(what + ": no point is link bound; the link efficiency is kept from the base file");
    }
    if (!changed) break;
    if (!s.free_eff && !s.free_sm && !s.free_dispatch && !s.free_combine) {
      // E.g. RDMA points whose time the NVLink forwarding sets: nothing here to fit, nothing to refuse.
      warnings.push_back(what + ": the points determine none of efficiency, sm_GBps and the fixed costs; "
                         "every key is kept from the base file");
      best.params = s;
      break;
    }
    best = solve(obs, hw, s);
  }

  // Logical bytes above the line rate cannot be run (the replay's links carry at most their line
  // rate): an efficiency above 1 is held at 1 and the rest fitted again, so that the written file
  // predicts what was fitted, and the miss shows in the residual instead of in the replay.
  bool held_at_one = false;
  if (best.params.free_eff && best.params.efficiency > 1) {
    held_at_one = true;
    warnings.push_back(what + ": link efficiency " + num(best.params.efficiency) +
                       " exceeds 1 (logical bytes above the line rate: check the counted rule and the link figure);"
                       " it is held at 1");
    EpParams s = best.params;
    s.free_eff = false;
    s.efficiency = 1;
    if (s.free_sm || s.free_dispatch || s.free_combine) {
      best = solve(obs, hw, s);
    } else {
      best.params = s;
    }
  }

  const EpParams& p = best.params;
  std::vector<std::string> files;
  for (const auto& o : obs)
    if (std::find(files.begin(), files.end(), o.file) == files.end()) files.push_back(o.file);
  auto value = [&](int which, double v, bool log_scale) {
    const int i = index_of(p, which);
    if (which == 1 && sm_zeroed)
      return FittedValue{0, kNaN, static_cast<int>(obs.size()), files, "0: the SMs never limit these points"};
    if (which == 0 && held_at_one)
      return FittedValue{1, kNaN, static_cast<int>(obs.size()), files, "held at 1: the points give more than the line rate"};
    if (which >= 2 && held_at_zero[which - 2])
      return FittedValue{0, kNaN, best.fit.points, files, "held at 0: the points give a negative fixed cost"};
    if (i < 0) return FittedValue{v, kNaN, 0, {}, "not determined by these points: kept from the base file"};
    const double se = best.fit.stderr_(i);
    return FittedValue{v, log_scale ? v * se : se, best.fit.points, files, ""};
  };
  result.efficiency = value(0, p.efficiency, true);
  result.sm_GBps = value(1, p.sm_GBps, true);
  result.dispatch_fixed_us = value(2, p.dispatch_fixed_us, false);
  result.combine_fixed_us = value(3, p.combine_fixed_us, false);
  // A fixed cost fitted from sizes that barely differ is where the line meets zero bytes, and takes
  // whatever the rate model misses (extrapolated_intercept.hpp).
  for (int k = 0; k < 2; ++k) {
    FittedValue& fixed = k == 0 ? result.dispatch_fixed_us : result.combine_fixed_us;
    if (fixed.points == 0 || !fixed.note.empty()) continue;  // (kept, or held at 0)
    double smallest = kInf, largest = 0, fastest_us = kInf;
    for (const auto& o : obs) {
      if ((o.point->kernel == EpKernel::dispatch) != (k == 0)) continue;
      smallest = std::min(smallest, o.bottleneck_bytes);
      largest = std::max(largest, o.bottleneck_bytes);
      fastest_us = std::min(fastest_us, o.measured_us);
    }
    if (!(largest > 0)) continue;  // (no point of this kernel)
    fixed.note = extrapolated_intercept(fixed.value, smallest, largest, fastest_us);
    if (!fixed.note.empty())
      warnings.push_back(what + ": the " + (k == 0 ? "dispatch" : "combine") + " fixed cost " + num(fixed.value) +
                         " us is " + fixed.note);
  }
  result.rel_rms = held_at_one && !(p.free_sm || p.free_dispatch || p.free_combine)
                       ? [&] {
                           double sum = 0;
                           for (const auto& o : obs) {
                             const double m = ep_model_us(o, hw, p.efficiency, p.sm_GBps, p.dispatch_fixed_us,
                                                          p.combine_fixed_us);
                             sum += std::pow((o.measured_us - m) / o.measured_us, 2);
                           }
                           return std::sqrt(sum / static_cast<double>(obs.size()));
                         }()
                       : best.fit.rel_rms;
  return result;
}

}  // namespace epsim
