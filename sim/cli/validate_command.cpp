// epsim validate --plans PLANS.jsonl --measured MEASURED.json --hardware HW.yaml --model MODEL.yaml -o DIR:
// compares the simulator's predictions of the plans with their measured timelines and writes
// tasks.csv, layers.csv, unmatched.csv and summary.md (docs/validation.md), printing the summary.
#include <boost/program_options.hpp>
#include <iostream>
#include <sstream>

#include "sim/cli/command_line.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"
#include "sim/report/output_folder.hpp"
#include "sim/validate/measured_timeline.hpp"
#include "sim/validate/plans_file.hpp"
#include "sim/validate/validation.hpp"

namespace po = boost::program_options;

namespace epsim {

int validate_command(const std::vector<std::string>& args) {
  std::string plans_path, measured_path, hardware_path, model_path, output;
  bool backward = false, overwrite = false, quiet = false;
  po::options_description options(
      "epsim validate --plans PLANS.jsonl --measured MEASURED.json --hardware HW.yaml --model MODEL.yaml -o DIR "
      "[options]");
  options.add_options()
      ("help,h", "show this help")
      ("plans", po::value(&plans_path), "plans.jsonl written by `epsim run --write-plans`")
      ("measured", po::value(&measured_path), "measured timeline written by `epsim-hw run` (docs/validation.md)")
      ("hardware", po::value(&hardware_path), "hardware YAML to predict with (a calibrated one)")
      ("model", po::value(&model_path), "model YAML the plans were made for")
      ("backward", po::bool_switch(&backward), "also simulate the backward pass (when it was measured)")
      ("output,o", po::value(&output), "output folder")
      ("overwrite", po::bool_switch(&overwrite), "replace an existing output folder once the new one is complete")
      ("quiet,q", po::bool_switch(&quiet), "print nothing on success");
  if (!parse_command_line(args, options)) return 0;
  for (const auto& [value, flag] : {std::pair{&plans_path, "--plans PLANS.jsonl"},
                                    {&measured_path, "--measured MEASURED.json"},
                                    {&hardware_path, "--hardware HW.yaml"},
                                    {&model_path, "--model MODEL.yaml"},
                                    {&output, "-o DIR"}})
    if (value->empty())
      throw InputError("command line", "", std::string("missing ") + flag + " (see epsim validate --help)");

  const HardwareSpec hw = load_hardware(hardware_path);
  const ModelSpec model = load_model(model_path);
  // Every plan is checked here, but only where each one starts is kept: a plan is read back when its
  // measured record comes, so memory follows the measured records, not the plans file.
  PlansIndex plans(plans_path);
  const MeasuredTimeline measured = read_measured_timeline(measured_path);
  OutputFolder folder(output, overwrite);
  const ValidationReport report = validate_measurements(
      [&](const RecordId& id) { return plans.find(id.step, id.micro_batch, id.layer); }, measured, hw, model,
      backward, plans_path, measured_path);

  write_tasks_csv(folder.open("tasks.csv"), report);
  write_layers_csv(folder.open("layers.csv"), report);
  write_unmatched_csv(folder.open("unmatched.csv"), report);
  std::ostringstream summary;
  write_summary_md(summary, report,
                   {"plans: " + plans_path + " (" + std::to_string(plans.size()) +
                        (plans.size() == 1 ? " plan)" : " plans)"),
                    "measured: " + measured_path, "hardware: " + hw.name + " (" + hardware_path + ")",
                    "model: " + model.name + " (" + model_path + ")",
                    std::string("backward: ") + (backward ? "simulated" : "not simulated")});
  folder.open("summary.md") << summary.str();
  folder.commit();
  if (!quiet)
    std::cout << summary.str() << "\n  outputs: " << output << "/{tasks.csv,layers.csv,unmatched.csv,summary.md}\n";
  return 0;
}

}  // namespace epsim
