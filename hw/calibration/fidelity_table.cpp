#include "hw/calibration/fidelity_table.hpp"

#include <map>
#include <memory>

#include "hw/calibration/calibration_fit.hpp"
#include "hw/calibration/ep_bench_traffic.hpp"
#include "sim/config/loaders.hpp"
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
};

FidelityPrediction failed(const std::string& why) { return {0, false, why}; }

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
      g.preset = load_hardware(models_dir + "/" + name + ".yaml");
      it = groups.emplace(name, std::move(g)).first;
    }
    it->second.files.push_back(f);
  }
  for (auto& [name, g] : groups) {
    std::vector<Measurements> set;
    for (std::size_t f : g.files) set.push_back(sources[f]);
    try {
      g.cal = std::make_unique<Calibration>(fit_measurements(set, g.preset));
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
    if (g.cal)
      row.fitted = predict_point(p, file, g.fitted, g.cal.get(), traffic.get());
    else
      row.fitted = failed("fit failed: " + g.fit_error);

    // Leave-one-out: the preset's files with this point removed from its own file.
    std::vector<Measurements> set;
    for (std::size_t f : g.files) set.push_back(f == p.file ? without_point(file, p.series, p.index) : sources[f]);
    const std::string fam = family(file, p.series, p.index);
    if (family_size(set, p.series, fam) == 0) {
      row.loo = failed("only point of its kind (" + fam + "): nothing left to fit it from");
    } else {
      try {
        const Calibration cal = fit_measurements(set, g.preset);
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
