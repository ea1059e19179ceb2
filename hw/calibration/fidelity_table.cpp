#include "hw/calibration/fidelity_table.hpp"

#include <cmath>
#include <map>
#include <memory>
#include <sstream>

#include "hw/calibration/calibration_fit.hpp"
#include "hw/calibration/ep_bench_traffic.hpp"
#include "hw/calibration/ep_comm_fit.hpp"
#include "sim/config/loaders.hpp"
#include "sim/config/preset_lookup.hpp"
#include "sim/core/input_error.hpp"

namespace epsim {

double relative_error(const FidelityPrediction& predicted, double measured_us) {
  return (predicted.us - measured_us) / measured_us;
}

namespace {

/// The parameters a point informs: points of one family are fitted together (a copy kind, a GEMM
/// dtype, an EP kernel, else a whole series).
std::string family(const Measurements& m, FidelitySeries series, std::size_t i) {
  switch (series) {
    case FidelitySeries::grouped_gemm: return "grouped_gemm";
    case FidelitySeries::gemm: return std::string("gemm ") + to_string(m.gemm[i].dtype);
    case FidelitySeries::copy: return std::string("copy ") + to_string(m.copy[i].kind);
    case FidelitySeries::all_to_all: return "all_to_all";
    case FidelitySeries::ep_comm: return std::string("ep ") + to_string(m.ep_comm[i].kernel);
  }
  return "";
}

std::string point_where(const Measurements& m, FidelitySeries series, std::size_t i) {
  switch (series) {
    case FidelitySeries::grouped_gemm: return m.grouped_gemm[i].where;
    case FidelitySeries::gemm: return m.gemm[i].where;
    case FidelitySeries::copy: return m.copy[i].where;
    case FidelitySeries::all_to_all: return m.all_to_all[i].where;
    case FidelitySeries::ep_comm: return m.ep_comm[i].where;
  }
  return "";
}

std::size_t family_size(const std::vector<Measurements>& files, FidelitySeries series, const std::string& name) {
  std::size_t n = 0;
  for (const Measurements& m : files)
    for (std::size_t i = 0; i < series_size(m, series); ++i) n += family(m, series, i) == name ? 1 : 0;
  return n;
}

/// The EP points of one preset measured with one library, timed one way (kernel or API call): the
/// preset's ep_backend keys model one library, so each such group gets its own EP fit.
struct EpGroup {
  std::vector<std::size_t> obs;  ///< indices in PresetGroup::ep_obs
  std::unique_ptr<Calibration> cal;
  HardwareSpec fitted;
  std::string fit_error;
};

/// The EP group an ep_comm point belongs to: its implementation, and "API" for a point timed through
/// the framework's call.
std::string ep_group_name(const EpCommPoint& p) {
  return (p.implementation.empty() ? std::string("ep") : p.implementation) + (p.kernel_only ? "" : " API");
}

/// One preset and the measurement files that name it.
struct PresetGroup {
  HardwareSpec preset;
  std::vector<std::size_t> files;  ///< indices in the whole set
  std::unique_ptr<Calibration> cal;
  HardwareSpec fitted;
  std::string fit_error;  ///< why the whole set's fit failed; empty when it did not
  std::map<std::string, std::string> failed;  ///< families the fit refused, and why
  std::vector<EpObservation> ep_obs;                       ///< every ep_comm point of the group, drawn once
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> ep_index;  ///< (file, index) -> ep_obs
  std::map<std::string, EpGroup> ep_groups;  ///< by ep_group_name
};

FidelityPrediction failed(const std::string& why) { return {0, false, why}; }

/// The preset file `name` stands for: a preset's name: or file stem (find_preset), else the one preset
/// whose stem or name is `name` followed by a variant ("h100-sxm" for h100-sxm-8: published sets name
/// the GPU, the folder holds one cluster of it). InputError at the measurement file's header otherwise.
std::string preset_path(const std::string& name, const std::string& dir, const std::string& file) {
  const std::vector<PresetFile> presets = list_presets(dir);
  for (const PresetFile& p : presets)
    if (p.name == name || p.stem == name) return p.path;
  const PresetFile* family = nullptr;
  int matches = 0;
  for (const PresetFile& p : presets) {
    if (p.stem.rfind(name + "-", 0) == 0 || p.name.rfind(name + "-", 0) == 0) {
      family = &p;
      ++matches;
    }
  }
  if (matches == 1) return family->path;
  std::string known;
  for (const PresetFile& p : presets) known += (known.empty() ? "" : ", ") + p.name;
  throw InputError(file, "header.hardware", "no hardware preset '" + name + "' in " + dir + " (known: " + known + ")");
}

/// Drops every point of `fam` (series `series`) from `set`.
void drop_family(std::vector<Measurements>& set, FidelitySeries series, const std::string& fam) {
  for (Measurements& m : set)
    for (std::size_t i = series_size(m, series); i-- > 0;)
      if (family(m, series, i) == fam) m = without_point(m, series, i);
}

/// fit_measurements, except that a family of points the fit refuses (one size only, a time below the
/// launch) is left out with its reason in `failed`, and the rest is fitted: one series that cannot
/// determine its parameters does not take every other fit of the preset with it.
Calibration fit_what_can_be(std::vector<Measurements> set, const HardwareSpec& base,
                            std::map<std::string, std::string>& failed) {
  for (const auto& [fam, why] : failed)
    for (FidelitySeries series : {FidelitySeries::grouped_gemm, FidelitySeries::gemm, FidelitySeries::copy,
                                  FidelitySeries::all_to_all, FidelitySeries::ep_comm})
      drop_family(set, series, fam);
  for (;;) {
    try {
      return fit_measurements(set, base);
    } catch (const InputError& e) {
      bool dropped = false;
      for (const Measurements& m : set) {
        for (FidelitySeries series : {FidelitySeries::grouped_gemm, FidelitySeries::gemm, FidelitySeries::copy,
                                      FidelitySeries::all_to_all, FidelitySeries::ep_comm}) {
          for (std::size_t i = 0; i < series_size(m, series) && !dropped; ++i) {
            const std::string where = point_where(m, series, i);
            if (where.empty() || (where != e.file() && where != e.file() + ":" + e.place())) continue;
            const std::string fam = family(m, series, i);
            failed[fam] = e.what();
            drop_family(set, series, fam);
            dropped = true;
          }
          if (dropped) break;
        }
        if (dropped) break;
      }
      if (!dropped) throw;
    }
  }
}

/// The EP step of fit_measurements (NVLink points first, then RDMA points for what those left open) on
/// observations drawn once, so that a leave-one-out refit of an EP point does not redraw every other
/// point's traffic. Fits the observations `use` of `obs` except `skip` (or none).
void fit_ep(const std::vector<EpObservation>& obs, const std::vector<std::size_t>& use, const EpObservation* skip,
            const HardwareSpec& base, Calibration& cal) {
  std::vector<EpObservation> nvlink, rdma;
  for (std::size_t i : use)
    if (&obs[i] != skip) (obs[i].internode ? rdma : nvlink).push_back(obs[i]);
  cal.ep_nvlink.reset();
  cal.ep_rdma.reset();
  std::vector<std::string> warnings;
  HardwareSpec start = base;
  if (!nvlink.empty()) {
    cal.ep_nvlink = fit_ep_comm(nvlink, start, true, true, true, warnings);
    if (cal.ep_nvlink->efficiency.points > 0) start.ep_backend.nvlink_efficiency = cal.ep_nvlink->efficiency.value;
    if (cal.ep_nvlink->sm_GBps.points > 0) start.ep_backend.sm_GBps = cal.ep_nvlink->sm_GBps.value;
    if (cal.ep_nvlink->dispatch_fixed_us.points > 0) start.ep_backend.dispatch_fixed_us = cal.ep_nvlink->dispatch_fixed_us.value;
    if (cal.ep_nvlink->combine_fixed_us.points > 0) start.ep_backend.combine_fixed_us = cal.ep_nvlink->combine_fixed_us.value;
  }
  if (!rdma.empty()) {
    const bool nv = cal.ep_nvlink.has_value();
    cal.ep_rdma = fit_ep_comm(rdma, start, !nv, !(nv && cal.ep_nvlink->dispatch_fixed_us.points > 0),
                              !(nv && cal.ep_nvlink->combine_fixed_us.points > 0), warnings);
  }
}

std::string num(double v) {
  std::ostringstream out;
  out.precision(3);
  out << v;
  return out.str();
}

/// Why a leave-one-out EP refit cannot stand for a prediction (empty when it can): a fitted parameter
/// at a bound of meaning (a link efficiency near 0 or far above 1, an SM rate that collapses), or one
/// that moves by more than a factor of 3 from the whole group's fit, i.e. the points left do not
/// determine it and the refit extrapolates.
std::string ep_refit_problem(const Calibration& loo, const Calibration& whole) {
  const std::pair<const std::optional<EpCommFit>*, const std::optional<EpCommFit>*> fits[] = {
      {&loo.ep_nvlink, &whole.ep_nvlink}, {&loo.ep_rdma, &whole.ep_rdma}};
  for (const auto& [a, b] : fits) {
    if (!a->has_value()) continue;
    const EpCommFit& f = **a;
    const std::string link = f.internode ? "RDMA" : "NVLink";
    if (f.efficiency.points > 0 && (f.efficiency.value < 0.05 || f.efficiency.value > 1.5))
      return link + " efficiency refitted to " + num(f.efficiency.value) + ", outside 0.05..1.5";
    if (f.sm_GBps.points > 0 && f.sm_GBps.value > 0 && f.sm_GBps.value < 0.5)
      return "sm_GBps refitted to " + num(f.sm_GBps.value) + " GB/s per SM: collapsed";
    if (!b->has_value()) continue;
    const EpCommFit& g = **b;
    const std::pair<const FittedValue*, const FittedValue*> pairs[] = {{&f.efficiency, &g.efficiency},
                                                                       {&f.sm_GBps, &g.sm_GBps}};
    const char* names[] = {"efficiency", "sm_GBps"};
    for (int k = 0; k < 2; ++k) {
      const FittedValue& x = *pairs[k].first;
      const FittedValue& y = *pairs[k].second;
      if (x.points > 0 && y.points > 0 && y.value > 0 && x.value > 0 &&
          std::abs(std::log(x.value / y.value)) > std::log(3.0))
        return link + " " + names[k] + " refitted to " + num(x.value) + " (whole group " + num(y.value) +
               "): the other points do not determine it";
    }
  }
  return "";
}

}  // namespace

std::vector<FidelityRow> fidelity_rows(const std::vector<Measurements>& sources, const std::string& models_dir,
                                       const std::string& default_hardware) {
  const std::vector<FidelityPoint> points = fidelity_points(sources, default_hardware);
  std::map<std::string, PresetGroup> groups;
  for (std::size_t f = 0; f < sources.size(); ++f) {
    const std::string& name = sources[f].header.hardware.empty() ? default_hardware : sources[f].header.hardware;
    auto it = groups.find(name);
    if (it == groups.end()) {
      PresetGroup g;
      g.preset = load_hardware(preset_path(name, models_dir, sources[f].file));
      it = groups.emplace(name, std::move(g)).first;
    }
    it->second.files.push_back(f);
  }
  for (auto& [name, g] : groups) {
    std::vector<Measurements> set;
    for (std::size_t f : g.files) set.push_back(sources[f]);
    for (std::size_t f : g.files)
      for (std::size_t i = 0; i < sources[f].ep_comm.size(); ++i) {
        g.ep_index[{f, i}] = g.ep_obs.size();
        g.ep_obs.push_back(observe_ep(sources[f].ep_comm[i], sources[f].file, sources[f].header.source, g.preset));
      }
    // The non-EP fits run without the ep_comm series: EP points are fitted per group below.
    for (Measurements& m : set) m.ep_comm.clear();
    try {
      g.cal = std::make_unique<Calibration>(fit_what_can_be(set, g.preset, g.failed));
      g.fitted = apply_calibration(g.preset, *g.cal);
    } catch (const InputError& e) {
      g.fit_error = e.what();
    }
    for (const auto& [key, i] : g.ep_index) {
      (void)i;
      const auto [f, k] = key;
      g.ep_groups[ep_group_name(sources[f].ep_comm[k])].obs.push_back(g.ep_index.at(key));
    }
    if (!g.cal) continue;
    for (auto& [gname, eg] : g.ep_groups) {
      try {
        eg.cal = std::make_unique<Calibration>(*g.cal);
        fit_ep(g.ep_obs, eg.obs, nullptr, g.preset, *eg.cal);
        eg.fitted = apply_calibration(g.preset, *eg.cal);
      } catch (const InputError& e) {
        eg.cal.reset();
        eg.fit_error = e.what();
      }
    }
  }

  std::vector<FidelityRow> rows;
  for (const FidelityPoint& p : points) {
    const Measurements& file = sources[p.file];
    PresetGroup& g = groups.at(p.hardware);
    std::unique_ptr<EpBenchTraffic> traffic;
    if (p.series == FidelitySeries::ep_comm)
      traffic = std::make_unique<EpBenchTraffic>(ep_bench_traffic(file.ep_comm[p.index]));
    FidelityRow row;
    row.point = p;
    row.preset = predict_point(p, file, g.preset, nullptr, traffic.get());
    if (p.series == FidelitySeries::ep_comm) {
      const EpCommPoint& ep = file.ep_comm[p.index];
      const std::string gname = ep_group_name(ep);
      const EpGroup* eg = g.ep_groups.count(gname) ? &g.ep_groups.at(gname) : nullptr;
      if (!g.cal || !eg) {
        row.fitted = failed("fit failed: " + g.fit_error);
        row.loo = row.fitted;
      } else if (!eg->cal) {
        row.fitted = failed("EP fit of " + gname + " refused: " + eg->fit_error);
        row.loo = row.fitted;
      } else {
        row.fitted = predict_point(p, file, eg->fitted, eg->cal.get(), traffic.get());
        const EpObservation& self = g.ep_obs[g.ep_index.at({p.file, p.index})];
        std::size_t same_link = 0;
        for (std::size_t i : eg->obs)
          if (&g.ep_obs[i] != &self && g.ep_obs[i].internode == self.internode) ++same_link;
        if (same_link < 2) {
          row.loo = failed("n/a: " + std::to_string(same_link) + " other " + gname + " point(s) over " +
                           (self.internode ? "RDMA" : "NVLink") + " on this preset: too few to fit it from");
        } else {
          try {
            Calibration cal = *eg->cal;
            fit_ep(g.ep_obs, eg->obs, &self, g.preset, cal);
            const std::string problem = ep_refit_problem(cal, *eg->cal);
            if (!problem.empty()) {
              row.loo = failed("n/a: " + problem);
            } else {
              const HardwareSpec hw = apply_calibration(g.preset, cal);
              row.loo = predict_point(p, file, hw, &cal, traffic.get());
            }
          } catch (const InputError& e) {
            row.loo = failed(std::string("n/a: fit without it fails: ") + e.what());
          }
        }
      }
      rows.push_back(std::move(row));
      continue;
    }
    const std::string fam = family(file, p.series, p.index);
    const auto refused = g.failed.find(fam);
    if (refused != g.failed.end()) {
      row.fitted = failed("fit refused: " + refused->second);
      row.loo = row.fitted;
      rows.push_back(std::move(row));
      continue;
    }
    if (g.cal)
      row.fitted = predict_point(p, file, g.fitted, g.cal.get(), traffic.get());
    else
      row.fitted = failed("fit failed: " + g.fit_error);

    // Leave-one-out: the preset's files with this point removed from its own file, without the ep_comm
    // series (the other fits never read it; EP points are refitted per group above).
    std::vector<Measurements> set;
    for (std::size_t f : g.files) set.push_back(f == p.file ? without_point(file, p.series, p.index) : sources[f]);
    if (family_size(set, p.series, fam) == 0) {
      row.loo = failed("only point of its kind (" + fam + "): nothing left to fit it from");
    } else if (!g.cal) {
      row.loo = failed("fit failed: " + g.fit_error);
    } else {
      try {
        for (Measurements& m : set) m.ep_comm.clear();
        std::map<std::string, std::string> refused_here = g.failed;
        Calibration cal = fit_what_can_be(set, g.preset, refused_here);
        const HardwareSpec hw = apply_calibration(g.preset, cal);
        row.loo = predict_point(p, file, hw, &cal, traffic.get());
      } catch (const InputError& e) {
        row.loo = failed(std::string("fit without it fails: ") + e.what());
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace epsim
