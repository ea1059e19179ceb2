// epsim fidelity [MEASUREMENTS.yaml...] [-o docs/fidelity.md] [--force]: every published point of the
// measurement set predicted by the simulator (on its preset, calibrated, and leave-one-out), the errors
// per kind against the targets, and the DeepSeek-V3 layer at EP 8 to 64; written as one markdown file
// (docs/fidelity.md by default, regenerated with --force).
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "hw/calibration/fidelity_deepseek.hpp"
#include "hw/calibration/fidelity_markdown.hpp"
#include "hw/calibration/fidelity_table.hpp"
#include "hw/calibration/measurements.hpp"
#include "sim/cli/command_line.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/loaders.hpp"
#include "sim/core/atomic_file.hpp"
#include "sim/core/input_error.hpp"

namespace po = boost::program_options;

namespace epsim {
namespace {

/// The measurement files of `dir` (*.yaml), sorted, so that the default set does not depend on the
/// order the file system lists them in.
std::vector<std::string> default_measurements(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw InputError(dir, "", "no measurement folder here; give MEASUREMENTS.yaml files or run from the repository root");
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") files.push_back(entry.path().generic_string());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw InputError(dir, "", "no *.yaml measurement files in this folder");
  return files;
}

}  // namespace

int fidelity_command(const std::vector<std::string>& args) {
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::string> inputs;
  std::string output = "docs/fidelity.md", models = "models", default_hardware = "h100-sxm-8";
  std::string measurements_dir = "models/measurements";
  std::string deepseek_model = "models/deepseek-v3.yaml", deepseek_hardware = "h800";
  bool force = false, no_deepseek = false;
  po::options_description options(
      "epsim fidelity [MEASUREMENTS.yaml...] [options]\n"
      "Predicts every measured point (on its preset, calibrated with the whole set, and leave-one-out) and\n"
      "writes the errors per kind and the DeepSeek-V3 layer as markdown. Without files it reads every\n"
      "*.yaml of --measurements-dir. An existing output is replaced only with --force, which is how\n"
      "docs/fidelity.md is regenerated");
  options.add_options()
      ("help,h", "show this help")
      ("measurements", po::value(&inputs)->multitoken(), "measurement YAML files (kind: measurements)")
      ("measurements-dir", po::value(&measurements_dir)->default_value(measurements_dir), "where the default set lives")
      ("models", po::value(&models)->default_value(models), "folder of the hardware presets (NAME.yaml)")
      ("hardware", po::value(&default_hardware)->default_value(default_hardware),
       "preset of files whose header names none")
      ("output,o", po::value(&output)->default_value(output), "markdown file to write")
      ("force", po::bool_switch(&force), "replace an existing output file")
      ("deepseek-model", po::value(&deepseek_model)->default_value(deepseek_model), "model of the DeepSeek-V3 section")
      ("deepseek-hardware", po::value(&deepseek_hardware)->default_value(deepseek_hardware),
       "preset of the DeepSeek-V3 section")
      ("no-deepseek", po::bool_switch(&no_deepseek), "leave the DeepSeek-V3 section out");
  if (!parse_command_line(args, options, "measurements", -1)) return 0;
  // Refused before the work, not after it (AtomicFile checks again when it creates the file).
  if (!force && std::filesystem::exists(output))
    throw InputError(output, "", "the output file already exists; pass --force to regenerate it or choose another output");
  if (inputs.empty()) inputs = default_measurements(measurements_dir);

  std::vector<Measurements> sources;
  for (const std::string& path : inputs) sources.push_back(load_measurements(path));
  const std::vector<FidelityRow> rows = fidelity_rows(sources, models, default_hardware);

  std::string deepseek;
  if (!no_deepseek) {
    const std::string hw_path = models + "/" + deepseek_hardware + ".yaml";
    const ModelSpec model = load_model(deepseek_model);
    const HardwareSpec hw = load_hardware(hw_path);
    deepseek = deepseek_section(model, hw, {8, 16, 32, 64}, deepseek_model, hw_path);
  }

  FidelityDocHeader header;
  std::ostringstream command;
  command << "epsim fidelity";
  for (const std::string& a : args)
    if (a != "--force") command << " " << a;
  header.command = command.str();
  header.files = inputs;
  header.models_dir = models;

  AtomicFile file(output, force);
  write_fidelity_markdown(file.stream(), header, rows, deepseek);
  file.commit();
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cerr << "epsim fidelity: " << rows.size() << " points from " << inputs.size() << " files, wrote " << output
            << " in " << static_cast<int>(wall_s * 10 + 0.5) / 10.0 << " s\n";
  return 0;
}

}  // namespace epsim
