// A sweep's output folder: resuming after a stop, shards, thread counts and changed sweeps all end in
// the tables of one uninterrupted run, byte for byte.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "sim/core/input_error.hpp"
#include "sim/sweep/sweep_loader.hpp"
#include "sim/sweep/sweep_runner.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/sweep/sweep_test_files.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/trace_reader.hpp"

namespace fs = std::filesystem;
using namespace epsim;
using namespace epsim::test;

namespace {

// 6 points x 2 balancers at EP 8 and 16, two records each: about a second in all.
const char* const kGrid =
    "balancers:\n  - name: static_ep\n  - name: feplb\nset:\n  max_records: 2\n"
    "grid:\n  ep_degree: [8, 16]\n  gpu.sms: [100, 120, 132]\n";

SweepRunReport run(const SweepSpec& spec, const fs::path& out, unsigned threads, unsigned shard = 0,
                   unsigned shards = 1, std::size_t stop_after = 0) {
  SweepRunOptions o;
  o.output_dir = out.string();
  o.threads = threads;
  o.shard_index = shard;
  o.shard_count = shards;
  o.stop_after = stop_after;
  std::ostringstream log;
  return run_sweep(spec, o, log);
}

std::string table(const fs::path& out, const char* name) { return read_file(out / name); }

void same_tables(const fs::path& a, const fs::path& b) {
  for (const char* f : {"results.csv", "results.jsonl", "summary.md"}) {
    INFO(f);
    CHECK(table(a, f) == table(b, f));
  }
}

}  // namespace

TEST_CASE("sweep: a sweep stopped after k points and started again equals a straight run byte for byte") {
  const fs::path dir = scratch_dir("sweep_resume");
  write_file(dir / "s.yaml", sweep_yaml(kGrid));
  const SweepSpec spec = load_sweep((dir / "s.yaml").string(), {});
  REQUIRE(spec.points.size() == 6);

  const SweepRunReport straight = run(spec, dir / "straight", 2);
  CHECK(straight.computed == 6);
  CHECK(straight.tables_written);

  // Stopped after 2 points (as a kill would leave it: finished points only, no tables).
  const SweepRunReport first = run(spec, dir / "resumed", 1, 0, 1, 2);
  CHECK(first.computed == 2);
  CHECK_FALSE(first.tables_written);
  CHECK_FALSE(fs::exists(dir / "resumed/results.csv"));
  const SweepRunReport second = run(spec, dir / "resumed", 2);
  CHECK(second.found == 2);
  CHECK(second.computed == 4);
  CHECK(second.tables_written);
  CHECK(folder_files(dir / "straight") == folder_files(dir / "resumed"));

  // Points removed from a finished folder are the only ones computed again.
  fs::remove(dir / "straight/points" / (spec.points[1].id + ".json"));
  fs::remove(dir / "straight/points" / (spec.points[4].id + ".json"));
  fs::remove(dir / "straight/results.csv");
  const SweepRunReport again = run(spec, dir / "straight", 1);
  CHECK(again.found == 4);
  CHECK(again.computed == 2);
  CHECK(folder_files(dir / "straight") == folder_files(dir / "resumed"));
}

TEST_CASE("sweep: 1 and 2 threads give byte-identical folders") {
  const fs::path dir = scratch_dir("sweep_threads");
  write_file(dir / "s.yaml", sweep_yaml(kGrid));
  const SweepSpec spec = load_sweep((dir / "s.yaml").string(), {});
  run(spec, dir / "one", 1);
  run(spec, dir / "two", 2);
  const auto one = folder_files(dir / "one");
  CHECK(one.size() == 6 + 4);  // points, lock, three tables
  CHECK(one == folder_files(dir / "two"));
  // One row per point, balancer and metric, after the header.
  const std::string csv = table(dir / "one", "results.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 6 * 2 * 28);
}

TEST_CASE("sweep: a point's balancers run side by side, its file the same bytes for any thread count") {
  const fs::path dir = scratch_dir("sweep_balancers_side_by_side");
  // One point, four balancers (one of which cannot serve EP 16's layout, an n/a row), four records:
  // with 3 threads, three replays at once; with 8, four replays of two threads each.
  write_file(dir / "s.yaml", sweep_yaml("balancers:\n  - name: static_ep\n  - name: feplb\n  - name: fastermoe\n"
                                        "  - name: ideal-balance\nset:\n  max_records: 4\ngrid:\n  ep_degree: [16]\n"));
  const SweepSpec spec = load_sweep((dir / "s.yaml").string(), {});
  REQUIRE(spec.points.size() == 1);
  const SweepRunReport one = run(spec, dir / "one", 1);
  CHECK(one.computed == 1);
  CHECK(one.tables_written);
  for (const unsigned threads : {2u, 3u, 8u}) {
    CAPTURE(threads);
    const fs::path out = dir / ("t" + std::to_string(threads));
    const SweepRunReport r = run(spec, out, threads);
    CHECK(r.computed == 1);
    CHECK(folder_files(out) == folder_files(dir / "one"));
  }
  const std::string csv = table(dir / "one", "results.csv");
  for (const char* balancer : {"static_ep", "feplb", "fastermoe", "ideal-balance"}) CHECK(csv.find(balancer) != std::string::npos);

  // Its checks against exact run a job per balancer too: the same check file for any thread count.
  const SweepSpec local = load_sweep((dir / "s.yaml").string(), {"engine.bandwidth_sharing=local"});
  std::map<std::string, std::string> first_checked;
  for (const unsigned threads : {1u, 3u}) {
    SweepRunOptions o;
    o.output_dir = (dir / ("checked" + std::to_string(threads))).string();
    o.threads = threads;
    o.check_exact = 2;
    std::ostringstream log;
    const SweepRunReport r = run_sweep(local, o, log);
    CHECK(r.checked == 1);
    CHECK(r.check_written);
    const auto files = folder_files(o.output_dir);
    CHECK(files.count("points/" + local.points[0].id + ".check-2.json") == 1);
    if (threads == 1) first_checked = files;
    CHECK(files == first_checked);
  }

  // A record that breaks (its checksum): every balancer of both points fails on it. The error is the
  // first in point order, whichever job failed first, and names its point; no point file is left.
  std::string bytes = read_file(source_dir() / "traces/samples/glm5-128e-ep16.eptrace");
  const std::size_t header = bytes.size() - 20 - 16 * 8220;  // 16 records of 8,220 bytes, a 20-byte footer
  bytes[header + 2 * 8220 + 100] ^= 0x5a;
  write_file(dir / "bad.eptrace", bytes);
  const fs::path src = source_dir();
  write_file(dir / "bad.yaml", "kind: experiment\nname: bad\ntrace: bad.eptrace\nmodel: " +
                                   (src / "models/glm5-like-128.yaml").string() + "\nhardware: " +
                                   (src / "models/h100-sxm-8.yaml").string() + "\nep_degree: 16\nbalancer:\n  name: static_ep\noutput: out\n");
  write_file(dir / "bad-sweep.yaml", "kind: sweep\nname: bad\nexperiment: bad.yaml\nbalancers:\n  - name: static_ep\n"
                                         "  - name: feplb\n  - name: ideal-balance\nset:\n  max_records: 4\n"
                                         "grid:\n  gpu.sms: [120, 132]\n");
  const SweepSpec bad = load_sweep((dir / "bad-sweep.yaml").string(), {});
  for (const unsigned threads : {1u, 3u, 8u}) {
    CAPTURE(threads);
    const fs::path out = dir / ("bad" + std::to_string(threads));
    const std::string expected = "point 0 (gpu.sms=120): " + (dir / "bad.eptrace").string() + ":record 2 at byte " +
                                 std::to_string(header + 2 * 8220) + ": checksum mismatch";
    CHECK_THROWS_WITH_AS(run(bad, out, threads), doctest::Contains(expected.c_str()), InputError);
    CHECK(fs::is_empty(out / "points"));
  }
}

TEST_CASE("sweep: shards in their own folders joined, or in one folder, equal the whole") {
  const fs::path dir = scratch_dir("sweep_shards");
  write_file(dir / "s.yaml", sweep_yaml(kGrid));
  const SweepSpec spec = load_sweep((dir / "s.yaml").string(), {});
  run(spec, dir / "whole", 2);

  std::vector<std::string> parts;
  for (unsigned i = 0; i < 3; ++i) {
    const fs::path part = dir / ("part" + std::to_string(i));
    const SweepRunReport r = run(spec, part, 1, i, 3);
    CHECK(r.in_shard == 2);  // points i and i + 3
    CHECK_FALSE(r.tables_written);
    CHECK(fs::exists(part / "points" / (spec.points[i].id + ".json")));
    CHECK(fs::exists(part / "points" / (spec.points[i + 3].id + ".json")));
    parts.push_back(part.string());
  }
  // Two parts are not the whole: refused, naming a missing point, no tables.
  CHECK_THROWS_WITH_AS(join_sweeps({parts[0], parts[1]}, (dir / "partial").string()),
                       doctest::Contains("2 of 6 points are in none of the folders"), InputError);
  const SweepRunReport joined = join_sweeps(parts, (dir / "joined").string());
  CHECK(joined.tables_written);
  same_tables(dir / "whole", dir / "joined");

  // Shards writing into one shared folder: the last one to finish writes the tables.
  for (unsigned i = 0; i < 3; ++i) {
    const SweepRunReport r = run(spec, dir / "shared", 1, i, 3);
    CHECK(r.tables_written == (i == 2));
  }
  CHECK(folder_files(dir / "whole") == folder_files(dir / "shared"));
}

TEST_CASE("sweep: a changed sweep is refused, --restart removes only what epsim wrote") {
  const fs::path dir = scratch_dir("sweep_changed");
  write_file(dir / "s.yaml", sweep_yaml(kGrid));
  const SweepSpec spec = load_sweep((dir / "s.yaml").string(), {});
  run(spec, dir / "out", 2);
  write_file(dir / "out/notes.txt", "mine\n");
  write_file(dir / "out/points/mine.json", "{}\n");

  // Another value of gpu.sms: a different sweep.
  std::string changed = kGrid;
  changed.replace(changed.find("132"), 3, "140");
  write_file(dir / "s.yaml", sweep_yaml(changed));
  const SweepSpec other = load_sweep((dir / "s.yaml").string(), {});
  CHECK(other.hash != spec.hash);
  CHECK_THROWS_WITH_AS(run(other, dir / "out", 1), doctest::Contains("holds the results of another sweep"), InputError);
  // --set values are part of the sweep too.
  const SweepSpec with_set = load_sweep((dir / "s.yaml").string(), {"gpu.bf16_peak_TFLOPs=900"});
  CHECK(with_set.hash != other.hash);

  SweepRunOptions o;
  o.output_dir = (dir / "out").string();
  o.threads = 2;
  o.restart = true;
  std::ostringstream log;
  const SweepRunReport r = run_sweep(other, o, log);
  CHECK(r.computed == 6);
  CHECK(read_file(dir / "out/notes.txt") == "mine\n");
  CHECK(read_file(dir / "out/points/mine.json") == "{}\n");
  CHECK_FALSE(fs::exists(dir / "out/points" / (spec.points[5].id + ".json")));  // sms 132: the old sweep's
  CHECK(fs::exists(dir / "out/points" / (other.points[5].id + ".json")));

  // A folder that holds someone's files and no sweep lock is never used.
  fs::create_directories(dir / "theirs");
  write_file(dir / "theirs/data.csv", "x\n");
  CHECK_THROWS_WITH_AS(run(other, dir / "theirs", 1), doctest::Contains("holds files no epsim sweep wrote"), InputError);
  CHECK(folder_files(dir / "theirs").size() == 1);
}

TEST_CASE("sweep: derived traces are made once in the output folder and replayed by their points") {
  const fs::path dir = scratch_dir("sweep_derived_run");
  write_file(dir / "s.yaml", sweep_yaml("set:\n  max_records: 1\ngrid:\n  experts: [64, 256]\n"));
  const SweepSpec spec = load_sweep((dir / "s.yaml").string(), {});
  run(spec, dir / "out", 2);
  int derived = 0;
  for (const auto& entry : fs::directory_iterator(dir / "out" / "traces")) {
    if (entry.path().filename().string().rfind("derived-", 0) != 0) continue;
    ++derived;
    TraceReader reader(entry.path().string());
    CHECK((reader.header().num_experts == 64 || reader.header().num_experts == 256));
    CHECK(reader.header().provenance.find("derived by epsim trace derive") != std::string::npos);
  }
  CHECK(derived == 2);
  CHECK(fs::exists(dir / "out" / "results.csv"));
}
