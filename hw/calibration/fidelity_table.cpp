#include "hw/calibration/fidelity_table.hpp"

#include <map>
#include <memory>

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
/// point's traffic. `skip` is the observation left out (or none).
void fit_ep(const std::vector<EpObservation>& obs, const EpObservation* skip, const HardwareSpec& base, Calibration& cal) {
  std::vector<EpObservation> nvlink, rdma;
  for (const EpObservation& o : obs)
    if (&o != skip) (o.internode ? rdma : nvlink).push_back(o);
  cal.ep_nvlink.reset();
  cal.ep_rdma.reset();
  std::vector<std::string> warnings;
  HardwareSpec start = base;
  if (!nvlink.empty()) {
    cal.ep_nvlink = fit_ep_comm(nvlink, start, true, true, true, warnings);
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
    try {
      g.cal = std::make_unique<Calibration>(fit_what_can_be(set, g.preset, g.failed));
      g.fitted = apply_calibration(g.preset, *g.cal);
    } catch (const InputError& e) {
      g.fit_error = e.what();
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

    // Leave-one-out: the preset's files with this point removed from its own file. The EP fit reads
    // only ep_comm points and the other fits never read them, so an EP point's refit replaces the EP
    // fits of the whole-set calibration, and any other point's refit runs without the ep_comm series
    // and takes the whole set's EP fits: the same calibration as refitting everything, far cheaper.
    std::vector<Measurements> set;
    for (std::size_t f : g.files) set.push_back(f == p.file ? without_point(file, p.series, p.index) : sources[f]);
    if (family_size(set, p.series, fam) == 0) {
      row.loo = failed("only point of its kind (" + fam + "): nothing left to fit it from");
    } else if (!g.cal) {
      row.loo = failed("fit failed: " + g.fit_error);
    } else {
      try {
        Calibration cal;
        if (p.series == FidelitySeries::ep_comm) {
          cal = *g.cal;
          fit_ep(g.ep_obs, &g.ep_obs[g.ep_index.at({p.file, p.index})], g.preset, cal);
        } else {
          for (Measurements& m : set) m.ep_comm.clear();
          std::map<std::string, std::string> refused_here = g.failed;
          cal = fit_what_can_be(set, g.preset, refused_here);
          cal.ep_nvlink = g.cal->ep_nvlink;
          cal.ep_rdma = g.cal->ep_rdma;
        }
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
