// epsim run EXPERIMENT.yaml: replays the experiment's trace and writes metrics.csv, gpus.csv,
// timeline.json and summary.txt into the output folder, printing the summary on stdout. An experiment
// with a `step:` block also gets the step prediction in the summary and in step.json (docs/step.md).
#include <algorithm>
#include <boost/program_options.hpp>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "sim/balancers/oracle.hpp"
#include "sim/balancers/placement.hpp"
#include "sim/cli/command_line.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"
#include "sim/core/number_text.hpp"
#include "sim/plan/plan_json.hpp"
#include "sim/replay/replay.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "sim/report/exact_check.hpp"
#include "sim/report/output_folder.hpp"
#include "sim/report/perfetto_writer.hpp"
#include "sim/report/run_summary.hpp"
#include "sim/step/step_accumulator.hpp"
#include "sim/step/step_report.hpp"

namespace po = boost::program_options;

namespace epsim {

namespace {

std::string join(const std::vector<std::string>& cells) {
  std::string out;
  for (std::size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + cells[i];
  return out;
}

void write_gpu_rows(std::ostream& out, const LayerOutcome& o, int gpus_per_node) {
  const std::vector<std::int64_t> load = o.plan.tokens_per_gpu();
  for (int g = 0; g < o.plan.num_gpus; ++g) {
    const double total_ps = static_cast<double>(std::max<Time_ps>(1, o.result.layer_ps()));
    out << join({std::to_string(o.record.step), std::to_string(o.record.micro_batch), std::to_string(o.record.layer),
                 std::to_string(g), std::to_string(g / gpus_per_node), std::to_string(load[g]),
                 g9(ps_to_us(o.result.routed_gemm_fwd_ps[g])), g9(ps_to_us(o.result.gemm_finish_fwd_ps[g])),
                 g9(o.result.compute_busy_ps[g] / total_ps), g9(o.result.nvlink_out_util[g]),
                 g9(o.result.nic_out_util[g]), g9(o.result.copy_engine_busy_ps[g] / total_ps)})
        << "\n";
  }
}

/// Adds one record to the step prediction, with the oracle's bound for the same work as its floor.
void add_step_record(StepAccumulator& step, const LayerOutcome& o) { step.add(o.local_tokens, o.result, o.bound); }

}  // namespace

int run_command(const std::vector<std::string>& args) {
  std::string experiment_path, output_override;
  bool overwrite = false, quiet = false, write_plans = false;
  int threads = 0;
  int max_records = -1, timeline_records = -1, check_exact = 0;
  po::options_description options("epsim run EXPERIMENT.yaml [options]");
  options.add_options()
      ("help,h", "show this help")
      ("experiment", po::value(&experiment_path), "experiment YAML file")
      ("output,o", po::value(&output_override), "output folder (default: the experiment's `output`)")
      ("overwrite", po::bool_switch(&overwrite), "replace an existing output folder once the new one is complete")
      ("max-records", po::value(&max_records)->notifier(require_non_negative("--max-records")),
       "replay at most N records (0 = all; default: the experiment's)")
      ("timeline-records", po::value(&timeline_records)->notifier(require_non_negative("--timeline-records")),
       "records drawn in timeline.json (default: the experiment's)")
      ("threads,j", po::value(&threads)->notifier(require_non_negative("--threads")),
       "records simulated at once (0 = every core; 1 = one after another; default 0); outputs do not depend on it")
      ("write-plans", po::bool_switch(&write_plans), "also write every Plan to plans.jsonl")
      ("check-exact", po::value(&check_exact)->notifier(require_non_negative("--check-exact")),
       "simulate the first N records again under exact bandwidth sharing and report how far the run's "
       "sharing is from it (summary, exact_check.csv); exact takes seconds to minutes a layer past 256 GPUs")
      ("quiet,q", po::bool_switch(&quiet), "print nothing on success");
  if (!parse_command_line(args, options, "experiment")) return 0;
  if (experiment_path.empty()) throw InputError("command line", "", "missing EXPERIMENT.yaml (see epsim run --help)");

  ExperimentSpec spec = load_experiment(experiment_path);
  if (!output_override.empty()) spec.output_dir = output_override;
  if (max_records >= 0) spec.max_records = max_records;
  if (timeline_records >= 0) spec.timeline_records = timeline_records;

  OutputFolder folder(spec.output_dir, overwrite);
  std::ostream& metrics_csv = folder.open("metrics.csv");
  std::ostream& gpus_csv = folder.open("gpus.csv");
  std::ostream* plans = write_plans ? &folder.open("plans.jsonl") : nullptr;
  PerfettoWriter timeline(folder.open("timeline.json"), spec.ep_degree, spec.hardware.gpus_per_node);
  metrics_csv << "balancer," << join(layer_metric_names()) << "\n";
  gpus_csv << "step,micro_batch,layer,gpu,node,tokens,gemm_fwd_us,gemm_finish_fwd_us,compute_util,"
              "nvlink_out_util,nic_out_util,copy_engine_util\n";

  RunSummary summary(spec.ep_degree);
  std::optional<ExactCheck> check;
  if (check_exact > 0) check.emplace(static_cast<std::size_t>(check_exact));
  std::optional<StepAccumulator> step;
  if (spec.step) step.emplace(spec);
  Time_ps timeline_offset_ps = 0;
  std::size_t drawn = 0;
  const TraceHeader* header_seen = nullptr;
  TraceHeader header_copy;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  replay(spec, [&](const LayerOutcome& o) {
    if (!header_seen) {
      header_copy = o.header;
      header_seen = &header_copy;
    }
    metrics_csv << spec.balancer.name << "," << join(layer_metric_values(o.metrics)) << "\n";
    write_gpu_rows(gpus_csv, o, spec.hardware.gpus_per_node);
    if (plans) {
      write_plan_json(*plans, o.plan);
      *plans << "\n";
    }
    // Each layer is at most kMaxTime_ps long, so the drawing stops before the offsets could overflow.
    if (drawn < static_cast<std::size_t>(spec.timeline_records) &&
        timeline_offset_ps <= kMaxTime_ps - o.result.layer_ps() - 10 * kPsPerUs) {
      timeline.add(o.result.timeline, timeline_offset_ps,
                   "step " + std::to_string(o.record.step) + " mb " + std::to_string(o.record.micro_batch) +
                       " layer " + std::to_string(o.metrics.layer_id));
      // Layers are simulated independently; the timeline lays them end to end with a 10 us gap.
      timeline_offset_ps += o.result.layer_ps() + 10 * kPsPerUs;
      ++drawn;
    }
    summary.add(o.metrics);
    if (step) add_step_record(*step, o);
    if (check) check->add_run(o.metrics, o.result);
  }, threads > 0 ? static_cast<unsigned>(threads) : cores);
  // The same first records again under exact sharing, where the run used another.
  const BandwidthSharing sharing = sharing_for(spec.hardware.engine, spec.ep_degree);
  const bool checking = check && sharing != BandwidthSharing::exact && summary.records() > 0;
  if (checking) {
    check->run_exact(spec, threads > 0 ? static_cast<unsigned>(threads) : cores);
    check->write_csv(folder.open("exact_check.csv"));
  }
  timeline.close();

  std::ostringstream text;
  const int nodes = (spec.ep_degree + spec.hardware.gpus_per_node - 1) / spec.hardware.gpus_per_node;
  text << "epsim run: " << spec.name << " (" << spec.source_file << ")\n";
  if (header_seen)
    text << "  trace     " << spec.trace_path << " (" << header_copy.source_format << ", "
         << header_copy.num_ranks << " ranks, " << header_copy.num_experts << " experts, top-" << header_copy.top_k
         << ", " << summary.records() << " records replayed)\n";
  text << "  model     " << spec.model.name << "   hardware " << spec.hardware.name << " (" << nodes
       << (nodes == 1 ? " node" : " nodes") << " x " << spec.hardware.gpus_per_node << " GPUs)\n";
  text << "  EP " << spec.ep_degree << ", " << to_string(spec.placement) << " placement, balancer "
       << spec.balancer.name << ", backward " << (spec.backward ? "on" : "off") << "\n";
  // The sharing mode changes the figures (epochs within about its tolerance), so the summary says which.
  const EngineSpec& engine = spec.hardware.engine;
  text << "  bandwidth sharing ";
  if (engine.bandwidth_sharing == BandwidthSharing::automatic) {
    text << "auto: " << to_string(sharing) << " at " << spec.ep_degree << " GPUs (" << auto_ranges(engine) << ")";
  } else {
    text << to_string(sharing);
  }
  // The coarse models say how far they were measured from exact: their layer times are close, one
  // GPU's finish may not be, and a user reading stragglers should know which figure to trust.
  const char* measured = nullptr;
  const char* gpu_off = "52%";
  if (sharing == BandwidthSharing::epochs) {
    text << " (tolerance " << engine.epoch_tolerance << ")";
  } else if (sharing == BandwidthSharing::per_link) {
    text << " (each link shared on its own, not max-min)";
    measured = "layer time within 7.3% either way";
  } else if (sharing == BandwidthSharing::local) {
    text << " (max-min within each GPU's sending and receiving links)";
    measured = "layer time within 4.5% (early, most on skewed traffic)";
  } else if (sharing == BandwidthSharing::coupled) {
    text << " (local; the links of the busiest " << engine.coupled_gpus * 100
         << "% of GPUs, and of weight syncs' receivers, following their senders)";
    // The worst measured: the ideal-balance what-if at EP 512 (-1.67%); one GPU of a MicroMoE plan
    // at EP 512 (+5.97%; docs/performance.md, "Every balancer at EP 512").
    measured = "layer time within 1.7%";
    gpu_off = "6.0%";
  }
  text << "\n";
  if (measured != nullptr) {
    text << "    measured against exact: " << measured << ", but one GPU's finish\n"
         << "    up to " << gpu_off << " off under skewed traffic; for per-GPU stragglers set\n"
         << "    engine.bandwidth_sharing: exact (docs/performance.md, \"" << to_string(sharing) << "\")\n";
    // Past the width where exact was measured to take up to about 2 s a layer (auto's default
    // bound), the advice has a price a user should know before taking it.
    if (spec.ep_degree > EngineSpec{}.exact_max_gpus)
      text << "    (exact takes seconds to minutes a layer at " << spec.ep_degree << " GPUs)\n";
    // The cheaper answer first: the error on this trace, from a few records under exact.
    if (!checking) text << "    or measure the error on this trace's first N records: --check-exact N\n";
  }
  if (checking) check->print(text, to_string(sharing));
  else if (check && sharing == BandwidthSharing::exact)
    text << "    --check-exact: the run's sharing is exact; nothing to check\n";
  text << "\n";
  summary.print(text);
  if (step) {
    const StepPrediction prediction = step->prediction();
    print_step(text, prediction);
    folder.open("step.json") << step_to_json(prediction).dump(2) << "\n";
  }
  // summary.txt holds only what the inputs determine, so equal inputs give equal files wherever they go.
  folder.open("summary.txt") << text.str();
  text << "\n  outputs: " << spec.output_dir << "/{metrics.csv,gpus.csv,timeline.json,summary.txt"
       << (write_plans ? ",plans.jsonl" : "") << (step ? ",step.json" : "") << (checking ? ",exact_check.csv" : "")
       << "}\n";

  folder.commit();
  if (!quiet) std::cout << text.str();
  return 0;
}

}  // namespace epsim
