// epsim calibrate MEASUREMENTS.yaml... --base HARDWARE.yaml -o OUT.yaml: fits the hardware model to
// measurements (microbenchmarks or published figures) and writes a complete hardware file; prints the
// fitted values with their standard errors and the residuals per series, or per point with --points
// (docs/calibration.md).
#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "hw/calibration/calibration_fit.hpp"
#include "hw/calibration/gemm_shape_selection.hpp"
#include "hw/calibration/hardware_writer.hpp"
#include "hw/calibration/measurements.hpp"
#include "sim/cli/command_line.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"

namespace po = boost::program_options;

namespace epsim {
namespace {

std::string fmt(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.5g", v);
  return buf;
}

/// "2.5 +- 0.01 us (12 pts)"
std::string pm(const FittedValue& v, const std::string& unit) {
  return fmt(v.value) + " +- " + (std::isnan(v.stderr_) ? std::string("n/a") : fmt(v.stderr_)) + unit + " (" +
         std::to_string(v.points) + " pts)";
}

void print_efficiency(std::ostream& out, const char* dtype, const std::vector<EfficiencyFit>& curve) {
  for (const auto& e : curve)
    out << "    " << dtype << " eta(" << fmt(e.padded_rows) << " rows) = " << pm(e.efficiency, "")
        << (e.memory_bound ? " memory bound: lower bound" : "") << "\n";
}

void print_ep(std::ostream& out, const EpCommFit& f) {
  out << "  ep_comm " << (f.internode ? "RDMA (across nodes)" : "NVLink (one node)") << ", " << f.points
      << " pts: " << (f.internode ? "ib_efficiency " : "nvlink_efficiency ") << pm(f.efficiency, "") << "\n"
      << "    sm_GBps " << (f.sm_GBps.points ? pm(f.sm_GBps, " GB/s") : "kept " + fmt(f.sm_GBps.value)) << ", dispatch_fixed_us "
      << (f.dispatch_fixed_us.points ? pm(f.dispatch_fixed_us, " us") : "kept " + fmt(f.dispatch_fixed_us.value))
      << ", combine_fixed_us "
      << (f.combine_fixed_us.points ? pm(f.combine_fixed_us, " us") : "kept " + fmt(f.combine_fixed_us.value))
      << "; rel. RMS " << fmt(100 * f.rel_rms) << "%\n";
}

void print_summary(std::ostream& out, const Calibration& cal) {
  for (const auto& c : cal.copies)
    out << "  copy " << to_string(c.kind) << ": alpha "
        << (c.alpha_us.points ? pm(c.alpha_us, " us") : "kept " + fmt(c.alpha_us.value) + " us") << ", beta " << pm(c.beta_GBps, " GB/s")
        << ", rel. RMS " << fmt(100 * c.rel_rms) << "%\n";
  for (const auto* a : {&cal.all_to_all_intra, &cal.all_to_all_inter})
    if (*a)
      out << "  all_to_all " << ((*a)->intra_node ? "intra" : "inter") << "-node: latency " << pm((*a)->latency_us, " us")
          << ", bw " << pm((*a)->bw_GBps, " GB/s") << ((*a)->latency_us.points ? "" : " (latency kept)") << ", rel. RMS " << fmt(100 * (*a)->rel_rms) << "%\n";
  if (cal.gemm) {
    const GemmFit& g = *cal.gemm;
    out << "  gemm (" << g.points << " pts): launch " << (g.launch_us.points ? pm(g.launch_us, " us") : std::string("kept"))
        << ", hbm " << (g.hbm_GBps.points ? pm(g.hbm_GBps, " GB/s") : "kept " + fmt(g.hbm_GBps.value)) << "; model rel. RMS " << fmt(100 * g.rel_rms) << "%\n";
    print_efficiency(out, "bf16", g.efficiency);
    print_efficiency(out, "fp8", g.fp8_efficiency);
  }
  for (const auto* ep : {&cal.ep_nvlink, &cal.ep_rdma})
    if (*ep) print_ep(out, **ep);
  if (cal.contention)
    out << "  hbm_traffic_factor " << pm(cal.contention->hbm_traffic_factor, "") << ", rel. RMS "
        << fmt(100 * cal.contention->rel_rms) << "%\n";
  for (const auto& w : cal.warnings) out << "  warning: " << w << "\n";
}

/// Per series: points, median and largest |residual| (with the point), in first-seen order.
void print_residual_summary(std::ostream& out, const std::vector<PointResidual>& rows) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const PointResidual*>> by_series;
  for (const auto& r : rows) {
    if (by_series[r.series].empty()) order.push_back(r.series);
    by_series[r.series].push_back(&r);
  }
  if (!order.empty()) out << "  residuals (measured - model) / measured; --points lists every point:\n";
  for (const auto& series : order) {
    auto pts = by_series[series];
    std::vector<double> abs_res;
    const PointResidual* worst = pts.front();
    for (const auto* p : pts) {
      abs_res.push_back(std::abs(p->residual()));
      if (std::abs(p->residual()) > std::abs(worst->residual())) worst = p;
    }
    std::sort(abs_res.begin(), abs_res.end());
    const std::size_t n = abs_res.size();
    const double median = n % 2 ? abs_res[n / 2] : (abs_res[n / 2 - 1] + abs_res[n / 2]) / 2;
    out << "    " << series << ": " << n << " pts, median |res| " << fmt(100 * median) << "%, max "
        << fmt(100 * worst->residual()) << "% at " << worst->where << " (" << worst->setting << ")\n";
  }
}

/// Every point, grouped per series: where, setting, measured, model, residual, source.
void print_points(std::ostream& out, const std::vector<PointResidual>& rows) {
  std::vector<std::string> order;
  for (const auto& r : rows)
    if (std::find(order.begin(), order.end(), r.series) == order.end()) order.push_back(r.series);
  for (const auto& series : order) {
    out << "  " << series << ":\n";
    for (const auto& r : rows) {
      if (r.series != series) continue;
      char line[160];
      const double res = std::abs(r.residual()) < 5e-5 ? 0.0 : r.residual();  // no "-0.00%"
      std::snprintf(line, sizeof line, "%12.4g %12.4g %+8.2f%%", r.measured_us, r.model_us, 100 * res);
      out << "    " << r.where << "  " << r.setting << "\n      measured/model us " << line << "  " << r.source << "\n";
    }
  }
}

/// The ep_backend keys model one EP library: keeps the ep_comm points of `implementation` (all of
/// them when it is empty) and refuses a set whose points name several implementations, or none of
/// the one asked for.
void select_implementation(std::vector<Measurements>& sources, const std::string& implementation) {
  std::set<std::string> names;
  for (Measurements& m : sources) {
    for (const EpCommPoint& p : m.ep_comm) names.insert(p.implementation);
    if (!implementation.empty())
      m.ep_comm.erase(std::remove_if(m.ep_comm.begin(), m.ep_comm.end(),
                                     [&](const EpCommPoint& p) { return p.implementation != implementation; }),
                      m.ep_comm.end());
  }
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + (n.empty() ? std::string("(none)") : n);
  if (!implementation.empty() && !names.count(implementation))
    throw InputError("command line", "--implementation",
                     "no ep_comm point of implementation '" + implementation + "' (the files have: " +
                         (known.empty() ? std::string("no ep_comm points") : known) + ")");
  if (implementation.empty() && names.size() > 1)
    throw InputError("command line", "",
                     "the ep_comm points mix implementations (" + known +
                         "), but the ep_backend keys model one; pick one with --implementation NAME");
}

}  // namespace

int calibrate_command(const std::vector<std::string>& args) {
  std::vector<std::string> inputs;
  std::string base_path, output, name, implementation, gemm_shapes;
  bool force = false, quiet = false, points = false;
  po::options_description options("epsim calibrate MEASUREMENTS.yaml... --base HARDWARE.yaml -o OUT.yaml [options]");
  options.add_options()
      ("help,h", "show this help")
      ("measurements", po::value(&inputs)->multitoken(), "measurement YAML files (kind: measurements)")
      ("base", po::value(&base_path), "hardware YAML whose values are kept where nothing is fitted")
      ("output,o", po::value(&output), "calibrated hardware YAML to write")
      ("name", po::value(&name), "name: of the written hardware (default: the output file's stem)")
      ("force", po::bool_switch(&force), "replace an existing output file")
      ("implementation", po::value(&implementation),
       "fit the ep_backend keys to the ep_comm points of this implementation only (deepep_v1, hybrid_ep, ...); "
       "needed when the files hold several")
      ("gemm-shapes", po::value(&gemm_shapes),
       "fit the GEMM curve to the grouped_gemm points of these expert shapes only, HIDDENxFFN[,...] "
       "(e.g. 6144x2048: your model's, or the nearest measured); other GEMM points are left out")
      ("points", po::bool_switch(&points), "print every point's measured and model time and residual, per series")
      ("quiet,q", po::bool_switch(&quiet), "print nothing on success");
  if (!parse_command_line(args, options, "measurements", -1)) return 0;
  if (inputs.empty()) throw InputError("command line", "", "missing MEASUREMENTS.yaml (see epsim calibrate --help)");
  if (base_path.empty()) throw InputError("command line", "", "missing --base HARDWARE.yaml (see epsim calibrate --help)");
  if (output.empty()) throw InputError("command line", "", "missing -o OUT.yaml (see epsim calibrate --help)");
  // Refused before the fitting, not after it: the same check write_hardware_file makes at the end.
  if (!force && std::filesystem::exists(output))
    throw InputError(output, "", "the output file already exists; pass --force to replace it or choose another output");
  if (name.empty()) name = std::filesystem::path(output).stem().string();

  // (Read before any file, so that a malformed list is one line whatever the files hold.)
  const std::vector<ExpertShape> shapes =
      gemm_shapes.empty() ? std::vector<ExpertShape>{} : parse_expert_shapes(gemm_shapes, "--gemm-shapes");
  const HardwareSpec base = load_hardware(base_path);
  std::vector<Measurements> sources;
  for (const auto& path : inputs) sources.push_back(load_measurements(path));
  select_implementation(sources, implementation);
  GemmShapeSelection selection;
  if (!shapes.empty()) selection = select_gemm_shapes(sources, shapes, "--gemm-shapes");
  FitOptions fit_options;
  fit_options.one_size_fixed_from_base = true;  // published rates come at one size
  const Calibration cal = fit_measurements(sources, base, fit_options);
  write_hardware_file(output, calibrated_hardware_yaml(base, base_path, cal, name), force);
  if (!quiet) {
    std::cout << "epsim calibrate: " << inputs.size() << " measurement file" << (inputs.size() == 1 ? "" : "s")
              << " on base " << base_path << "\n";
    if (!shapes.empty()) {
      std::cout << "  gemm: fitted to the " << selection.kept << " grouped_gemm point" << (selection.kept == 1 ? "" : "s")
                << " of shape" << (shapes.size() == 1 ? " " : "s ") << to_string(shapes) << " (--gemm-shapes); "
                << selection.left_out << " other GEMM point" << (selection.left_out == 1 ? "" : "s") << " left out\n";
      for (const ExpertShape& s : selection.absent)
        std::cout << "  warning: gemm: no grouped_gemm point of shape " << to_string(s)
                  << " (--gemm-shapes); the curve is fitted to the other shapes named\n";
    }
    print_summary(std::cout, cal);
    print_residual_summary(std::cout, cal.residuals);
    if (points) print_points(std::cout, cal.residuals);
    std::cout << "  wrote " << output << "\n";
  }
  return 0;
}

}  // namespace epsim
