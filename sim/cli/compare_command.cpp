// epsim compare COMPARISON.yaml: replays every case at every EP degree under every balancer and writes
// one summary row per replay (comparison.csv) and a Markdown table (comparison.md, also printed on
// stdout). Format and columns: docs/compare.md.
#include <algorithm>
#include <mutex>
#include <string>
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "sim/balancers/placement.hpp"
#include "sim/cli/command_line.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/comparison_spec.hpp"
#include "sim/core/input_error.hpp"
#include "sim/hardware/hardware_spec.hpp"
#include "sim/replay/replay.hpp"
#include "sim/report/comparison_exact_check.hpp"
#include "sim/report/comparison_table.hpp"
#include "sim/report/output_folder.hpp"
#include "sim/sweep/work_pool.hpp"

namespace po = boost::program_options;

namespace epsim {

namespace {

/// The bandwidth sharing each EP degree ran with: a fast model's figures differ from exact ones (the
/// run summary says by how much), and `auto` picks by the degree, so a table may mix two models.
std::string sharing_sentence(const EngineSpec& engine, const std::vector<int>& ep_degrees) {
  std::ostringstream out;
  out << "Bandwidth sharing `" << to_string(engine.bandwidth_sharing) << "`";
  if (engine.bandwidth_sharing != BandwidthSharing::automatic) {
    out << ".";
    return out.str();
  }
  // The degrees in the file's order, each mode once, in the order first met.
  std::vector<std::pair<BandwidthSharing, std::vector<int>>> picked;
  for (const int ep : ep_degrees) {
    const BandwidthSharing mode = sharing_for(engine, ep);
    auto it = std::find_if(picked.begin(), picked.end(), [mode](const auto& p) { return p.first == mode; });
    if (it == picked.end()) it = picked.insert(picked.end(), {mode, {}});
    it->second.push_back(ep);
  }
  for (std::size_t i = 0; i < picked.size(); ++i) {
    out << (i == 0 ? ": " : "; ") << to_string(picked[i].first) << " at EP ";
    for (std::size_t k = 0; k < picked[i].second.size(); ++k) out << (k ? ", " : "") << picked[i].second[k];
  }
  out << " (" << auto_ranges(engine, " GPUs") << "; `engine.bandwidth_sharing` in the hardware file, docs/config.md).";
  return out.str();
}

/// comparison.md: a title, what was compared (names only, so that the file does not depend on where
/// the command ran), the table and the cases that were skipped.
std::string markdown_document(const ComparisonSpec& spec, const std::vector<ComparisonRow>& rows,
                              const ComparisonExactCheck* check) {
  std::ostringstream out;
  out << "# Comparison: " << spec.name << "\n\n";
  out << "Hardware " << spec.hardware.name << ", " << to_string(spec.placement) << " placement, backward "
      << (spec.backward ? "on" : "off") << ", "
      << (spec.max_records > 0 ? "at most " + std::to_string(spec.max_records) + " records" : "all records")
      << " per replay. Cases:";
  for (std::size_t i = 0; i < spec.cases.size(); ++i) {
    const ComparisonCase& c = spec.cases[i];
    out << (i ? "," : "") << " " << c.name << " (model " << c.model.name << ", trace "
        << std::filesystem::path(c.trace_path).filename().string() << ")";
  }
  out << ".\n\n";
  out << sharing_sentence(spec.hardware.engine, spec.ep_degrees) << "\n\n";
  out << "Ratios, times and the NVLink-domain floor are medians over records; bytes and utilisation are means. "
         "Reductions are 1 - median excess / median excess of the baseline `"
      << spec.baseline << "` on the same case and EP degree (n/a where the baseline has no excess). "
      << "Columns: docs/compare.md.\n\n";
  out << comparison_markdown(rows);
  for (const SkippedCase& s : spec.skipped)
    out << "\nSkipped case " << s.name << ": trace " << std::filesystem::path(s.trace_path).filename().string()
        << " not found (optional).\n";
  if (check != nullptr) out << "\n" << check->markdown(spec.baseline);
  return out.str();
}

/// One replay of a comparison and what it gave.
struct CompareJob {
  const ComparisonCase* c = nullptr;
  int ep = 0;
  const ComparisonBalancer* b = nullptr;
  ComparisonRow row;
  bool served = true;
  std::string unserved;             ///< why not, when the balancer cannot serve the case
  std::size_t records = 0;
  BandwidthSharing sharing = BandwidthSharing::exact;
  std::optional<ExactCheck> check;  ///< its records under exact, when its sharing is not

  ComparisonKey key() const { return ComparisonKey{c->name, ep, b->label, b->choice.name}; }
};

/// Replays job's case at its EP degree under its balancer on `threads` threads; with `check_records`
/// > 0 and a fast sharing, its first records again under exact.
void run_compare_job(const ComparisonSpec& spec, CompareJob& job, std::size_t check_records, unsigned threads) {
  job.sharing = sharing_for(spec.hardware.engine, job.ep);
  const ExperimentSpec experiment = spec.experiment(*job.c, job.ep, *job.b);
  ComparisonAccumulator acc;
  // The records to check are kept while the replay runs, then simulated again under exact.
  if (check_records > 0 && job.sharing != BandwidthSharing::exact) job.check.emplace(check_records);
  try {
    replay(experiment, [&](const LayerOutcome& o) {
      acc.add(o.metrics);
      if (job.check) job.check->add_run(o.metrics, o.result);
    }, threads);
  } catch (const BalancerCannotServe& e) {
    // One balancer that cannot serve this case and EP degree does not stop the comparison.
    job.served = false;
    job.unserved = e.what();
    job.row = unserved_row(job.key(), e.what());
    job.check.reset();
    return;
  }
  if (acc.records() == 0)
    throw InputError(job.c->trace_path, "", "case '" + job.c->name + "': the trace has no records to replay");
  job.records = acc.records();
  job.row = acc.row(job.key());
  if (job.check) job.check->run_exact(experiment, threads);
}

}  // namespace

int compare_command(const std::vector<std::string>& args) {
  std::string comparison_path, output_override;
  bool overwrite = false, quiet = false;
  int threads = 0;
  int max_records = -1, check_exact = 0;
  po::options_description options("epsim compare COMPARISON.yaml [options]");
  options.add_options()
      ("help,h", "show this help")
      ("comparison", po::value(&comparison_path), "comparison YAML file (kind: comparison)")
      ("output,o", po::value(&output_override), "output folder (default: the comparison's `output`)")
      ("overwrite", po::bool_switch(&overwrite), "replace an existing output folder once the new one is complete")
      ("max-records", po::value(&max_records)->notifier(require_non_negative("--max-records")),
       "replay at most N records per replay (0 = all; default: the file's)")
      ("threads,j", po::value(&threads)->notifier(require_non_negative("--threads")),
       "threads (0 = every core; 1 = one replay and one record after another; default 0): up to N replays side "
       "by side, each simulating its records on its share; outputs do not depend on it")
      ("check-exact", po::value(&check_exact)->notifier(require_non_negative("--check-exact")),
       "simulate each replay's first N records again under exact bandwidth sharing and report how far the fast "
       "sharing is from it, and whether the balancers keep their order (comparison.md, exact_check.csv); exact "
       "takes seconds to minutes a layer past 256 GPUs")
      ("quiet,q", po::bool_switch(&quiet), "print nothing on success (no table, no progress)");
  if (!parse_command_line(args, options, "comparison")) return 0;
  if (comparison_path.empty())
    throw InputError("command line", "", "missing COMPARISON.yaml (see epsim compare --help)");

  ComparisonSpec spec = load_comparison(comparison_path);
  if (!output_override.empty()) spec.output_dir = output_override;
  if (max_records >= 0) spec.max_records = max_records;
  for (const SkippedCase& s : spec.skipped) std::cerr << "epsim compare: " << s.message() << "\n";

  OutputFolder folder(spec.output_dir, overwrite);
  const unsigned replay_threads =
      threads > 0 ? static_cast<unsigned>(threads) : std::max(1u, std::thread::hardware_concurrency());
  std::optional<ComparisonExactCheck> check;
  if (check_exact > 0) check.emplace(static_cast<std::size_t>(check_exact));
  // One job per replay (case, EP degree, balancer), in the table's order. Replays run side by side
  // when there are threads to spare: a replay of one wide record (a what-if at EP 1,024) has no
  // records to share among threads, where eight balancers' replays have eight. Each of R replays at
  // once gets threads / R threads for its records. The rows, the check and the first error come
  // out in the table's order whatever ran first, so the outputs do not depend on the threads.
  std::vector<CompareJob> jobs;
  for (const ComparisonCase& c : spec.cases)
    for (const int ep : spec.ep_degrees)
      for (const ComparisonBalancer& b : spec.balancers) {
        CompareJob job;
        job.c = &c;
        job.ep = ep;
        job.b = &b;
        jobs.push_back(std::move(job));
      }
  const unsigned side_by_side = static_cast<unsigned>(std::min<std::size_t>(replay_threads, jobs.size()));
  const unsigned threads_each = std::max(1u, replay_threads / std::max(1u, side_by_side));
  std::mutex progress_lock;
  // run_jobs raises the first error in the table's order, the one a run on one thread meets.
  run_jobs(jobs.size(), side_by_side, [&](std::size_t i) {
    CompareJob& job = jobs[i];
    run_compare_job(spec, job, check ? check->wanted() : 0, threads_each);
    if (quiet && job.served) return;
    const std::lock_guard<std::mutex> hold(progress_lock);
    const std::string where = "epsim compare: " + job.c->name + " EP " + std::to_string(job.ep) + " " + job.b->label + ": ";
    if (!job.served) {
      std::cerr << where << "n/a: " << job.unserved << "\n";
      return;
    }
    std::cerr << where << job.records << " records\n";
    if (job.check) std::cerr << where << job.check->checked() << " checked against exact\n";
  });
  std::vector<ComparisonRow> rows;
  for (CompareJob& job : jobs) {
    rows.push_back(std::move(job.row));
    if (!check || !job.served) continue;
    if (job.check) check->add(job.key(), job.sharing, std::move(*job.check));
    else check->add_exact_replay(job.ep);
  }
  apply_reductions(rows, spec.baseline);

  const std::string markdown = markdown_document(spec, rows, check ? &*check : nullptr);
  folder.open("comparison.csv") << comparison_csv(rows);
  folder.open("comparison.md") << markdown;
  const bool checked = check && check->any();
  if (checked) check->write_csv(folder.open("exact_check.csv"));
  folder.commit();
  if (!quiet)
    std::cout << markdown << "\n  outputs: " << spec.output_dir << "/{comparison.csv,comparison.md"
              << (checked ? ",exact_check.csv" : "") << "}\n";
  return 0;
}

}  // namespace epsim
