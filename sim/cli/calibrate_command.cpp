// epsim calibrate MEASUREMENTS.yaml... --base HARDWARE.yaml -o OUT.yaml: fits the hardware model to
// microbenchmark measurements and writes a complete hardware file (docs/calibration.md).
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "hw/calibration/calibration_fit.hpp"
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

void print_summary(std::ostream& out, const Calibration& cal) {
  for (const auto& c : cal.copies)
    out << "  copy " << to_string(c.kind) << ": alpha " << pm(c.alpha_us, " us") << ", beta " << pm(c.beta_GBps, " GB/s")
        << ", rel. RMS " << fmt(100 * c.rel_rms) << "%\n";
  for (const auto* a : {&cal.all_to_all_intra, &cal.all_to_all_inter})
    if (*a)
      out << "  all_to_all " << ((*a)->intra_node ? "intra" : "inter") << "-node: latency " << pm((*a)->latency_us, " us")
          << ", bw " << pm((*a)->bw_GBps, " GB/s") << ", rel. RMS " << fmt(100 * (*a)->rel_rms) << "%\n";
  if (cal.gemm) {
    const GemmFit& g = *cal.gemm;
    out << "  grouped_gemm: launch " << (g.launch_us.points ? pm(g.launch_us, " us") : std::string("kept")) << ", hbm "
        << pm(g.hbm_GBps, " GB/s") << "; model rel. RMS " << fmt(100 * g.rel_rms) << "%\n";
    for (const auto& e : g.efficiency)
      out << "    eta(" << fmt(e.padded_rows) << " rows) = " << pm(e.efficiency, "") << (e.memory_bound ? " memory bound" : "")
          << "\n";
  }
  if (cal.contention)
    out << "  hbm_traffic_factor " << pm(cal.contention->hbm_traffic_factor, "") << ", rel. RMS "
        << fmt(100 * cal.contention->rel_rms) << "%\n";
  for (const auto& w : cal.warnings) out << "  warning: " << w << "\n";
}

}  // namespace

int calibrate_command(const std::vector<std::string>& args) {
  std::vector<std::string> inputs;
  std::string base_path, output, name;
  bool force = false, quiet = false;
  po::options_description options("epsim calibrate MEASUREMENTS.yaml... --base HARDWARE.yaml -o OUT.yaml [options]");
  options.add_options()
      ("help,h", "show this help")
      ("measurements", po::value(&inputs)->multitoken(), "measurement YAML files (kind: measurements)")
      ("base", po::value(&base_path), "hardware YAML whose values are kept where nothing is fitted")
      ("output,o", po::value(&output), "calibrated hardware YAML to write")
      ("name", po::value(&name), "name: of the written hardware (default: the output file's stem)")
      ("force", po::bool_switch(&force), "replace an existing output file")
      ("quiet,q", po::bool_switch(&quiet), "print nothing on success");
  if (!parse_command_line(args, options, "measurements", -1)) return 0;
  if (inputs.empty()) throw InputError("command line", "", "missing MEASUREMENTS.yaml (see epsim calibrate --help)");
  if (base_path.empty()) throw InputError("command line", "", "missing --base HARDWARE.yaml (see epsim calibrate --help)");
  if (output.empty()) throw InputError("command line", "", "missing -o OUT.yaml (see epsim calibrate --help)");
  // Refused before the fitting, not after it: the same check write_hardware_file makes at the end.
  if (!force && std::filesystem::exists(output))
    throw InputError(output, "", "the output file already exists; pass --force to replace it or choose another output");
  if (name.empty()) name = std::filesystem::path(output).stem().string();

  const HardwareSpec base = load_hardware(base_path);
  std::vector<Measurements> sources;
  for (const auto& path : inputs) sources.push_back(load_measurements(path));
  const Calibration cal = fit_measurements(sources, base);
  write_hardware_file(output, calibrated_hardware_yaml(base, base_path, cal, name), force);
  if (!quiet) {
    std::cout << "epsim calibrate: " << inputs.size() << " measurement file" << (inputs.size() == 1 ? "" : "s")
              << " on base " << base_path << "\n";
    print_summary(std::cout, cal);
    std::cout << "  wrote " << output << "\n";
  }
  return 0;
}

}  // namespace epsim
