#include "sim/sweep/sweep_runner.hpp"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <sstream>

#include "sim/core/atomic_file.hpp"
#include "sim/core/created_folders.hpp"
#include "sim/core/input_error.hpp"
#include "sim/core/output_lock.hpp"
#include "sim/sweep/balancer_jobs.hpp"
#include "sim/sweep/point_check.hpp"
#include "sim/sweep/point_result.hpp"
#include "sim/sweep/progress_line.hpp"
#include "sim/sweep/results_tables.hpp"
#include "sim/sweep/sweep_lock.hpp"
#include "sim/sweep/work_pool.hpp"
#include "traces/synth/synthetic_trace.hpp"

namespace fs = std::filesystem;

namespace epsim {
namespace {

const char* const kLockFile = "sweep.lock.json";

bool present_at(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

std::string point_file(const std::string& dir, const std::string& id) {
  return (fs::path(dir) / "points" / (id + ".json")).string();
}

/// A point's check against exact on its first `records` records (point_check.hpp).
std::string check_file(const std::string& dir, const std::string& id, std::size_t records) {
  return (fs::path(dir) / "points" / (id + ".check-" + std::to_string(records) + ".json")).string();
}

const char* const kCheckTable = "exact_check.csv";

/// The trace a point replays: generated or derived into OUTDIR/traces, else the experiment's own.
std::string point_trace(const std::string& dir, const SweepPoint& p) {
  return p.trace || p.derive ? (fs::path(dir) / "traces" / p.trace_file).string() : p.experiments.front().trace_path;
}

/// The point id of a check file's name (ID.check-N.json, N digits), or "" for any other name.
std::string check_file_point(const std::string& name) {
  const std::size_t at = name.rfind(".check-");
  const std::size_t digits = at == std::string::npos ? 0 : at + 7;
  if (digits == 0 || name.size() <= digits + 5 || name.compare(name.size() - 5, 5, ".json") != 0) return "";
  if (name.find_first_not_of("0123456789", digits) != name.size() - 5) return "";
  return name.substr(0, at);
}

/// Writes `text` to `path` atomically. A file that appeared there meanwhile (another shard or run of
/// the same sweep wrote the same point) is left as it is: both hold the same result.
void write_new(const std::string& path, const std::string& text) {
  if (present_at(path)) return;
  try {
    AtomicFile file(path, false);
    file.stream() << text;
    file.commit();
  } catch (const InputError&) {
    if (!present_at(path)) throw;
  }
}

/// Writes `text` to `path` atomically, replacing the file epsim wrote there before.
void write_replacing(const std::string& path, const std::string& text) {
  AtomicFile file(path, true);
  file.stream() << text;
  file.commit();
}

void remove_file(const fs::path& p) {
  std::error_code ec;
  fs::remove(p, ec);
  if (ec) throw InputError(p.string(), "", "cannot remove: " + ec.message());
}

void remove_if_empty(const fs::path& p) {
  std::error_code ec;
  if (fs::is_directory(p, ec) && fs::is_empty(p, ec)) fs::remove(p, ec);
}

/// The current folder, a folder above it and the root are never a sweep's output.
void check_not_above_cwd(const std::string& dir) {
  std::error_code ec;
  const fs::path target = fs::weakly_canonical(fs::absolute(dir), ec);
  const fs::path cwd = fs::weakly_canonical(fs::current_path(), ec);
  auto t = target.begin();
  auto c = cwd.begin();
  for (; t != target.end() && c != cwd.end() && *t == *c; ++t, ++c) {
  }
  if (t == target.end() || (t != target.end() && t->empty()))
    throw InputError(dir, "", "the output folder may not be the current folder or one above it");
}

/// Removes what an earlier sweep wrote into `dir` (as its lock lists it), nothing else.
void remove_old_results(const std::string& dir, const SweepLock& old) {
  const fs::path root(dir);
  for (const SweepLock::Point& p : old.points) remove_file(point_file(dir, p.id));
  // The points' checks against exact, for any N (ID.check-N.json), of the points the lock lists.
  std::set<std::string> ids;
  for (const SweepLock::Point& p : old.points) ids.insert(p.id);
  std::error_code ec;
  std::vector<fs::path> checks;
  for (const auto& entry : fs::directory_iterator(root / "points", ec)) {
    const std::string id = check_file_point(entry.path().filename().string());
    if (!id.empty() && ids.count(id) > 0) checks.push_back(entry.path());
  }
  for (const fs::path& c : checks) remove_file(c);
  remove_file(root / kCheckTable);
  for (const std::string& t : old.traces) remove_file(root / "traces" / t);
  for (const std::string& f : sweep_table_files()) remove_file(root / f);
  remove_if_empty(root / "points");
  remove_if_empty(root / "traces");
  remove_file(root / kLockFile);
}

/// Makes `dir` the output folder of `lock`: creates it, or checks that it is empty or already
/// belongs to the same sweep. The returned folders are kept once the lock is in place.
std::unique_ptr<CreatedFolders> claim_folder(const std::string& dir, const SweepLock& lock, bool restart) {
  check_not_above_cwd(dir);
  std::error_code ec;
  if (present_at(dir) && !fs::is_directory(dir, ec)) throw InputError(dir, "", "the output exists and is not a folder");
  auto created = std::make_unique<CreatedFolders>(dir, dir);
  const std::string lock_path = (fs::path(dir) / kLockFile).string();
  if (present_at(lock_path)) {
    const SweepLock old = SweepLock::read(lock_path);
    if (old.hash == lock.hash) return created;
    if (!restart)
      throw InputError(dir, "",
                       "this folder holds the results of another sweep ('" + old.name + "', hash " + old.hash +
                           "; this one: '" + lock.name + "', hash " + lock.hash +
                           "): the sweep file, a --set value or a file it reads has changed, or the mode "
                           "engine.bandwidth_sharing: auto picks. Pass --restart to remove "
                           "the results epsim wrote there and start over, or choose another output folder");
    remove_old_results(dir, old);
  } else {
    // Shards started together on a new folder race to write the lock: another one's temporary lock
    // file is not a stranger's file, and anything else may be from a shard whose lock is now there.
    const std::string temp_lock = std::string(".") + kLockFile + ".epsim-tmp-";
    std::string first;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(temp_lock, 0) == 0) continue;
      first = name;
      break;
    }
    if (!first.empty()) {
      if (present_at(lock_path)) return claim_folder(dir, lock, restart);
      throw InputError(dir, "",
                       "the output folder exists and holds files no epsim sweep wrote (first: " + first +
                           "); choose an empty or new folder");
    }
  }
  write_new(lock_path, lock.json());
  const SweepLock written = SweepLock::read(lock_path);
  if (written.hash != lock.hash)
    throw InputError(dir, "", "another sweep (hash " + written.hash + ") claimed this folder at the same time");
  return created;
}

/// Builds the tables from the folder's point files if every point of `lock` is there.
bool write_tables_if_complete(const std::string& dir, const SweepLock& lock, std::size_t& present) {
  present = 0;
  for (const SweepLock::Point& p : lock.points) present += present_at(point_file(dir, p.id));
  if (present < lock.points.size()) return false;
  std::map<std::string, PointResult> results;
  for (const SweepLock::Point& p : lock.points) {
    const std::string path = point_file(dir, p.id);
    PointResult r = read_point_json(path);
    if (r.id != p.id) throw InputError(path, "", "the file is point '" + r.id + "', not '" + p.id + "'");
    if (r.balancers.size() != lock.balancers.size())
      throw InputError(path, "", "the point has " + std::to_string(r.balancers.size()) + " balancers, the sweep " +
                                     std::to_string(lock.balancers.size()));
    results.emplace(p.id, std::move(r));
  }
  const SweepTables tables = sweep_tables(lock, results);
  write_replacing((fs::path(dir) / "results.csv").string(), tables.csv);
  write_replacing((fs::path(dir) / "results.jsonl").string(), tables.jsonl);
  write_replacing((fs::path(dir) / "summary.md").string(), tables.summary_md);
  return true;
}

/// Builds exact_check.csv from the folder's check files if every point of `lock` that runs a fast
/// sharing has its check for `records`.
bool write_check_if_complete(const std::string& dir, const SweepLock& lock, std::size_t records,
                             std::size_t& to_check, std::size_t& present) {
  to_check = present = 0;
  std::map<std::string, PointCheck> checks;
  for (const SweepLock::Point& p : lock.points) {
    if (p.sharing.empty() || p.sharing == "exact") continue;
    ++to_check;
    const std::string path = check_file(dir, p.id, records);
    if (!present_at(path)) continue;
    ++present;
    PointCheck c = read_point_check_json(path);
    if (c.id != p.id || c.wanted != records) throw InputError(path, "", "the file is not the check of point '" + p.id + "' on " + std::to_string(records) + " records");
    if (c.balancers.size() != lock.balancers.size())
      throw InputError(path, "", "the check has " + std::to_string(c.balancers.size()) + " balancers, the sweep " +
                                     std::to_string(lock.balancers.size()));
    checks.emplace(p.id, std::move(c));
  }
  if (to_check == 0 || present < to_check) return false;
  write_replacing((fs::path(dir) / kCheckTable).string(), sweep_check_csv(lock, checks));
  return true;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  if (!in && !in.eof()) throw InputError(path, "", "cannot read");
  return s.str();
}

}  // namespace

const std::vector<std::string>& sweep_table_files() {
  static const std::vector<std::string> files = {"results.csv", "results.jsonl", "summary.md"};
  return files;
}

SweepRunReport run_sweep(const SweepSpec& spec, const SweepRunOptions& o, std::ostream& log) {
  if (o.output_dir.empty()) throw InputError(spec.source_file, "", "no output folder: give -o OUTDIR or `output:`");
  if (o.shard_count == 0 || o.shard_index >= o.shard_count)
    throw InputError("command line", "--shard", "expected i/n with 0 <= i < n");
  const std::string& dir = o.output_dir;
  const SweepLock lock = SweepLock::of(spec);

  // One process per folder and shard; shards of one sweep may share the folder.
  const std::string lock_target = fs::absolute(dir).lexically_normal().string() +
                                  (o.shard_count > 1 ? ".shard-" + std::to_string(o.shard_index) + "-of-" +
                                                           std::to_string(o.shard_count)
                                                     : std::string());
  std::unique_ptr<CreatedFolders> created = std::make_unique<CreatedFolders>(fs::path(lock_target).parent_path().string(), dir);
  OutputLock process_lock(lock_target, dir);
  std::unique_ptr<CreatedFolders> folder = claim_folder(dir, lock, o.restart);
  folder->keep();
  created->keep();
  // Made here, before the threads, which then only add files to them.
  CreatedFolders((fs::path(dir) / "points").string(), dir).keep();
  if (!lock.traces.empty()) CreatedFolders((fs::path(dir) / "traces").string(), dir).keep();

  SweepRunReport report;
  report.total = spec.points.size();
  std::vector<const SweepPoint*> todo;
  for (const SweepPoint& p : spec.points) {
    if (p.index % o.shard_count != o.shard_index) continue;
    ++report.in_shard;
    const std::string path = point_file(dir, p.id);
    if (present_at(path)) {
      const PointResult r = read_point_json(path);
      if (r.hash != p.hash)
        throw InputError(path, "", "this point was computed from other inputs (hash " + r.hash + ", now " + p.hash +
                                       "); remove the file, or use --restart");
      ++report.found;
    } else {
      todo.push_back(&p);
    }
  }
  const unsigned threads = std::max(1u, o.threads);
  // With --check-exact, the points of the shard that run a fast sharing and have no check yet.
  std::vector<const SweepPoint*> to_check;
  if (o.check_exact > 0) {
    for (const SweepPoint& p : spec.points) {
      if (p.index % o.shard_count != o.shard_index || !point_runs_fast(p)) continue;
      const std::string path = check_file(dir, p.id, o.check_exact);
      if (!present_at(path)) {
        to_check.push_back(&p);
      } else if (read_point_check_json(path).hash != p.hash) {
        throw InputError(path, "", "this check was computed from other inputs; remove the file, or use --restart");
      }
    }
  }

  // Generated traces of the points to compute or check, each once (a joined folder has none).
  std::map<std::string, const SweepPoint*> traces;
  for (const std::vector<const SweepPoint*>* list : {&todo, &to_check})
    for (const SweepPoint* p : *list)
      if ((p->trace || p->derive) && !present_at(fs::path(dir) / "traces" / p->trace_file)) traces.emplace(p->trace_file, p);
  std::vector<const SweepPoint*> to_generate;
  for (const auto& [file, p] : traces) to_generate.push_back(p);
  run_jobs(to_generate.size(), threads, [&](std::size_t i) {
    const SweepPoint& p = *to_generate[i];
    const std::string path = point_trace(dir, p);
    try {
      if (p.trace) generate_trace(*p.trace, path, false);
      else derive_trace(p.derive_source, *p.derive, path, false);
    } catch (const InputError&) {
      if (!present_at(path)) throw;  // else another run of the sweep made the same trace
    }
  });

  // Tests stop a sweep after its first points, as a kill would leave it.
  if (o.stop_after > 0 && todo.size() > o.stop_after) todo.resize(o.stop_after);
  // One job per (point, balancer) (balancer_jobs.hpp). A point is written once its last balancer is
  // done; its balancers' outcomes go to their places in the sweep's order, whichever ends first, so
  // the folder does not depend on the threads.
  std::vector<PointResult> results(todo.size());
  std::vector<std::size_t> balancers(todo.size());
  for (std::size_t i = 0; i < todo.size(); ++i) {
    results[i].id = todo[i]->id;
    results[i].hash = todo[i]->hash;
    balancers[i] = todo[i]->experiments.size();
    results[i].balancers.resize(balancers[i]);
  }
  ProgressLine progress(log, o.terminal, report.found, todo.size(), report.in_shard);
  std::atomic<std::size_t> computed{0};
  try {
    run_balancer_jobs(
        balancers, threads,
        [&](std::size_t i, std::size_t b, unsigned threads_each) {
          const SweepPoint& p = *todo[i];
          try {
            results[i].balancers[b] = run_point_balancer(p, b, point_trace(dir, p), threads_each);
          } catch (const InputError& e) {
            // Which point failed matters more than where in the engine; the points done so far stay.
            throw InputError(spec.source_file, "", "point " + std::to_string(p.index) + " (" + p.describe() +
                                                       "): " + e.what());
          }
        },
        [&](std::size_t i, double seconds) {
          write_new(point_file(dir, todo[i]->id), point_json(results[i]));
          ++computed;
          if (o.progress) progress.finished(todo[i]->describe(), seconds);
        });
  } catch (...) {
    progress.close();
    throw;
  }
  progress.close();
  report.computed = computed.load();
  report.tables_written = write_tables_if_complete(dir, lock, report.present);
  if (o.check_exact > 0) {
    // Each point's replays again on its first records, under its sharing and under exact (most of
    // the time), a job per (point, balancer) as above: a wide sweep checks a point or two, and exact
    // takes seconds to minutes a layer past 256 GPUs.
    std::vector<PointCheck> checks(to_check.size());
    std::vector<std::size_t> check_balancers(to_check.size());
    for (std::size_t i = 0; i < to_check.size(); ++i) {
      checks[i] = point_check_of(*to_check[i], o.check_exact);
      check_balancers[i] = checks[i].balancers.size();
    }
    std::mutex log_lock;
    run_balancer_jobs(
        check_balancers, threads,
        [&](std::size_t i, std::size_t b, unsigned threads_each) {
          const SweepPoint& p = *to_check[i];
          try {
            checks[i].balancers[b] = check_point_balancer(p, b, point_trace(dir, p), o.check_exact, threads_each);
          } catch (const InputError& e) {
            throw InputError(spec.source_file, "", "point " + std::to_string(p.index) + " (" + p.describe() +
                                                       "), checking against exact: " + e.what());
          }
        },
        [&](std::size_t i, double seconds) {
          const SweepPoint& p = *to_check[i];
          write_new(check_file(dir, p.id, o.check_exact), point_check_json(checks[i]));
          if (!o.progress) return;
          // A line per check: exact takes seconds to minutes a layer past 256 GPUs.
          const std::lock_guard<std::mutex> hold(log_lock);
          char text[32];
          std::snprintf(text, sizeof text, "%.1f", seconds);
          log << "epsim sweep: point " << p.index << " (" << p.describe() << ") checked against exact in " << text
              << " s\n";
        });
    report.checked = to_check.size();
    report.check_written = write_check_if_complete(dir, lock, o.check_exact, report.to_check, report.checks_present);
  }
  return report;
}

SweepRunReport join_sweeps(const std::vector<std::string>& dirs, const std::string& output_dir) {
  if (dirs.empty()) throw InputError("command line", "--join", "expected the output folders of the shards");
  std::vector<SweepLock> locks;
  for (const std::string& d : dirs) {
    const std::string path = (fs::path(d) / kLockFile).string();
    if (!present_at(path)) throw InputError(d, "", "not a sweep output folder (no " + std::string(kLockFile) + ")");
    locks.push_back(SweepLock::read(path));
    if (locks.back().hash != locks.front().hash)
      throw InputError(d, "", "belongs to another sweep ('" + locks.back().name + "', hash " + locks.back().hash +
                                  ") than " + dirs.front() + " ('" + locks.front().name + "', hash " +
                                  locks.front().hash + ")");
  }
  const SweepLock& lock = locks.front();
  const std::string out = output_dir.empty() ? dirs.front() : output_dir;
  std::unique_ptr<CreatedFolders> folder = claim_folder(out, lock, false);
  folder->keep();
  OutputLock process_lock(fs::absolute(out).lexically_normal().string(), out);

  SweepRunReport report;
  report.total = lock.points.size();
  std::size_t missing = 0;
  std::string first_missing;
  for (const SweepLock::Point& p : lock.points) {
    const std::string target = point_file(out, p.id);
    if (present_at(target)) continue;
    bool found = false;
    for (const std::string& d : dirs) {
      const std::string source = point_file(d, p.id);
      if (!present_at(source)) continue;
      read_point_json(source);  // a damaged file is reported, not copied
      write_new(target, read_bytes(source));
      found = true;
      ++report.computed;
      break;
    }
    if (!found && missing++ == 0) first_missing = p.id;
  }
  if (missing > 0)
    throw InputError(out, "",
                     std::to_string(missing) + " of " + std::to_string(lock.points.size()) +
                         " points are in none of the folders (first: " + first_missing +
                         "); run the shards that computed them, then join again");
  report.tables_written = write_tables_if_complete(out, lock, report.present);
  return report;
}

}  // namespace epsim
