// epsim sweep SWEEP.yaml -o OUTDIR: runs every point of a what-if sweep on several threads into a
// resumable output folder and writes results.csv, results.jsonl and summary.md; `--join DIR...`
// gathers the folders of a sharded sweep into one table; under mpirun each rank is one shard of a
// shared folder. Format and rules: docs/sweep.md.
#include <boost/program_options.hpp>
#include <cstdlib>
#include <iostream>
#include <thread>
#include <unistd.h>

#include "sim/cli/command_line.hpp"
#include "sim/cli/commands.hpp"
#include "sim/core/input_error.hpp"
#include "sim/sweep/sweep_loader.hpp"
#include "sim/sweep/sweep_runner.hpp"

namespace po = boost::program_options;

namespace epsim {

namespace {

/// "i/n" with 0 <= i < n.
void parse_shard(const std::string& text, unsigned& index, unsigned& count) {
  const std::size_t slash = text.find('/');
  auto number = [&](const std::string& s) -> unsigned {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
      throw InputError("command line", "--shard " + text, "expected i/n with integers 0 <= i < n, e.g. --shard 0/4");
    return static_cast<unsigned>(std::stoul(s));
  };
  if (slash == std::string::npos)
    throw InputError("command line", "--shard " + text, "expected i/n with integers 0 <= i < n, e.g. --shard 0/4");
  index = number(text.substr(0, slash));
  count = number(text.substr(slash + 1));
  if (count == 0 || index >= count)
    throw InputError("command line", "--shard " + text, "expected i/n with integers 0 <= i < n, e.g. --shard 0/4");
}

std::string outputs(const std::string& dir) { return dir + "/{results.csv,results.jsonl,summary.md}"; }

/// An environment variable that holds an integer >= 0, or -1.
long env_number(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  const std::string s = v;
  if (s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stol(s);
}

/// Under `mpirun -n N` (Open MPI, or an MPICH-style launcher) each process is one shard: rank r of N
/// computes the points p with p % N == r into the shared output folder, and whichever finishes the set
/// writes the tables. No MPI library is needed: the launcher's environment says the rank.
bool shard_from_launcher(unsigned& index, unsigned& count) {
  for (const auto& [rank, size] : {std::pair<const char*, const char*>{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                   std::pair<const char*, const char*>{"PMI_RANK", "PMI_SIZE"}}) {
    const long r = env_number(rank), n = env_number(size);
    if (r >= 0 && n > 1 && r < n) {
      index = static_cast<unsigned>(r);
      count = static_cast<unsigned>(n);
      return true;
    }
  }
  return false;
}

}  // namespace

int sweep_command(const std::vector<std::string>& args) {
  std::vector<std::string> inputs, sets;
  std::string output, shard;
  int threads = 0, check_exact = 0;
  bool join = false, restart = false, progress = false, quiet = false;
  po::options_description options(
      "epsim sweep SWEEP.yaml -o OUTDIR [--threads N] [--shard i/n] [--set KEY=VALUE]... [--restart]\n"
      "epsim sweep --join OUTDIR... [-o OUTDIR]\n"
      "mpirun -n N epsim sweep SWEEP.yaml -o SHARED_OUTDIR\n\n"
      "Runs every point of a sweep (docs/sweep.md); a run started again computes only the missing points");
  options.add_options()
      ("help,h", "show this help")
      ("inputs", po::value(&inputs), "the sweep file (or, with --join, the output folders)")
      ("output,o", po::value(&output), "output folder (default: the sweep's `output`; with --join: the first folder)")
      ("threads,j", po::value(&threads)->notifier(require_non_negative("--threads")),
       "threads (0 = every core; default 0): up to N replays (point, balancer) at once, each simulating its "
       "records on its share; outputs do not depend on it")
      ("shard", po::value(&shard), "compute only the points p with p % n == i (job arrays), e.g. --shard 3/16")
      ("set", po::value(&sets), "KEY=VALUE for every point, e.g. --set gpu.sms=120 (repeatable)")
      ("restart", po::bool_switch(&restart),
       "the output folder belongs to an earlier, different sweep: remove what epsim wrote there and start over")
      ("join", po::bool_switch(&join), "gather the output folders of a sharded sweep and write its tables")
      ("progress", po::bool_switch(&progress), "show progress even when stderr is not a terminal (one line per point)")
      ("check-exact", po::value(&check_exact)->notifier(require_non_negative("--check-exact")),
       "simulate each balancer's first N records of every point that runs a fast sharing again under exact "
       "bandwidth sharing and report how far it is (exact_check.csv); on a finished folder only the checks run")
      ("quiet,q", po::bool_switch(&quiet), "print nothing on success");
  if (!parse_command_line(args, options, "inputs", -1)) return 0;

  if (join) {
    if (!sets.empty() || !shard.empty() || restart || check_exact > 0)
      throw InputError("command line", "--join",
                       "--join takes output folders only (and -o); run the sweep with --check-exact on the joined "
                       "folder to check it against exact");
    const SweepRunReport r = join_sweeps(inputs, output);
    const std::string out = output.empty() ? inputs.front() : output;
    if (!quiet)
      std::cout << "epsim sweep: joined " << r.total << " points (" << r.computed << " copied)\n  outputs: "
                << outputs(out) << "\n";
    return 0;
  }
  if (inputs.size() != 1)
    throw InputError("command line", "",
                     inputs.empty() ? "missing SWEEP.yaml (see epsim sweep --help)"
                                    : "expected one SWEEP.yaml, got " + std::to_string(inputs.size()) +
                                          " arguments (output folders go with --join)");
  SweepRunOptions o;
  bool launched = false;
  if (!shard.empty())
    parse_shard(shard, o.shard_index, o.shard_count);
  else
    launched = shard_from_launcher(o.shard_index, o.shard_count);
  const SweepSpec spec = load_sweep(inputs.front(), sets);
  o.output_dir = output.empty() ? spec.output_dir : output;
  if (o.output_dir.empty())
    throw InputError(inputs.front(), "", "no output folder: give -o OUTDIR or `output:` in the sweep file");
  // Ranks launched together on one machine share its cores.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  o.threads = threads > 0 ? static_cast<unsigned>(threads)
                          : launched ? std::max(1u, cores / o.shard_count) : cores;
  o.restart = restart;
  o.check_exact = static_cast<std::size_t>(check_exact);
  o.terminal = ::isatty(STDERR_FILENO) == 1;
  o.progress = !quiet && (progress || o.terminal);
  const SweepRunReport r = run_sweep(spec, o, std::cerr);
  // Under a launcher one line from the rank that wrote the tables is enough.
  if (quiet || (launched && !r.tables_written)) return 0;
  std::cout << "epsim sweep: " << spec.name << ": " << r.total << " points x " << spec.balancers.size()
            << " balancers; ";
  if (launched)
    std::cout << "rank " << o.shard_index << " of " << o.shard_count << " finished the set, ";
  else if (o.shard_count > 1)
    std::cout << "shard " << o.shard_index << "/" << o.shard_count << " has " << r.in_shard << ", ";
  std::cout << r.found << " found in " << o.output_dir << ", " << r.computed << " computed on " << o.threads
            << (o.threads == 1 ? " thread\n" : " threads\n");
  if (r.tables_written)
    std::cout << "  outputs: " << outputs(o.output_dir) << "\n";
  else
    std::cout << "  " << r.present << " of " << r.total
              << " points are in the folder; the tables are written once all are (run the other shards into the "
                 "same folder, or join their folders with epsim sweep --join)\n";
  if (o.check_exact > 0) {
    std::cout << "  --check-exact " << o.check_exact << ": ";
    if (r.to_check == 0)
      std::cout << "every point runs exact sharing; nothing to check\n";
    else if (r.check_written)
      std::cout << r.to_check << (r.to_check == 1 ? " point" : " points") << " checked against exact ("
                << r.checked << " by this run): " << o.output_dir << "/exact_check.csv\n";
    else
      std::cout << r.checks_present << " of " << r.to_check
                << " points checked against exact; exact_check.csv is written once all are (run the other shards "
                   "with the option)\n";
  }
  return 0;
}

}  // namespace epsim
