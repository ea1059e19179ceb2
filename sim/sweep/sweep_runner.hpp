// Running a sweep into its output folder (docs/sweep.md, "Output folder"):
//
//   OUTDIR/sweep.lock.json    what the folder belongs to (sweep_lock.hpp); a different sweep is refused
//   OUTDIR/points/ID.json     one file per finished point, written atomically
//   OUTDIR/traces/*.eptrace   generated traces, when the sweep generates them
//   OUTDIR/results.csv, results.jsonl, summary.md   once every point is there
//   OUTDIR/points/ID.check-N.json, OUTDIR/exact_check.csv   with --check-exact N (point_check.hpp)
//
// A run computes only the points of its shard that have no file yet, so a killed sweep started again
// picks up where it stopped, and shards of a job array can write into one shared folder. The tables
// are built from the point files alone, so they are the same whichever run, shard or thread count
// computed which point.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "sim/sweep/sweep_spec.hpp"

namespace epsim {

struct SweepRunOptions {
  std::string output_dir;
  unsigned threads = 1;
  unsigned shard_index = 0;  ///< this run computes the points p with p % shard_count == shard_index
  unsigned shard_count = 1;
  bool restart = false;      ///< remove what an earlier, different sweep wrote in output_dir first
  bool progress = false;     ///< progress on `log`
  bool terminal = false;     ///< `log` is a terminal: one line rewritten in place
  std::size_t stop_after = 0;  ///< tests: stop once this many points were computed (0: never)
  /// --check-exact N: the first N records of each point that runs a fast sharing, checked against
  /// exact (0: no check).
  std::size_t check_exact = 0;
};

struct SweepRunReport {
  std::size_t total = 0;     ///< points in the sweep
  std::size_t in_shard = 0;  ///< points of this run's shard
  std::size_t found = 0;     ///< of those, already in the folder
  std::size_t computed = 0;  ///< of those, computed by this run
  std::size_t present = 0;   ///< points of the whole sweep in the folder at the end
  bool tables_written = false;
  std::size_t checked = 0;         ///< points of this run's shard checked against exact by this run
  std::size_t to_check = 0;        ///< points of the whole sweep that run a fast sharing
  std::size_t checks_present = 0;  ///< of those, with their check in the folder at the end
  bool check_written = false;      ///< exact_check.csv written
};

/// Throws InputError for a folder that belongs to another sweep (without restart), that holds files
/// no sweep wrote, or a point that fails.
SweepRunReport run_sweep(const SweepSpec& spec, const SweepRunOptions& options, std::ostream& log);

/// `epsim sweep --join DIR...`: gathers the point files of the folders (every one written by the same
/// sweep) into `output_dir` (the first folder when empty) and writes the tables there. InputError
/// when the folders belong to different sweeps or some point is in none of them.
SweepRunReport join_sweeps(const std::vector<std::string>& dirs, const std::string& output_dir);

/// The files of the folder's tables, for messages: "results.csv", "results.jsonl", "summary.md".
const std::vector<std::string>& sweep_table_files();

}  // namespace epsim
