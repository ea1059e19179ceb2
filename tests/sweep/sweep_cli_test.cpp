// `epsim sweep` as a user runs it: progress only on request when stderr is not a terminal, --join,
// and a second run that finds everything done.
#include <doctest/doctest.h>

#include <filesystem>

#include "tests/cli/run_cli.hpp"
#include "tests/sweep/sweep_test_files.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim::test;

namespace {

const char* const kGrid = "set:\n  max_records: 1\ngrid:\n  ep_degree: [8, 16]\n";

}  // namespace

TEST_CASE("epsim sweep: progress on stderr only with --progress when stderr is not a terminal") {
  const fs::path dir = scratch_dir("sweep_cli_progress");
  write_file(dir / "s.yaml", sweep_yaml(kGrid));
  const CliResult quiet = run_epsim("sweep s.yaml -o out --threads 2", dir);
  INFO(quiet.err);
  REQUIRE(quiet.status == 0);
  CHECK(quiet.err.empty());
  CHECK(quiet.out.find("2 points x 1 balancers; 0 found in out, 2 computed on 2 threads") != std::string::npos);
  CHECK(quiet.out.find("out/{results.csv,results.jsonl,summary.md}") != std::string::npos);

  const CliResult shown = run_epsim("sweep s.yaml -o out2 --threads 1 --progress", dir);
  REQUIRE(shown.status == 0);
  CHECK(shown.err.find("epsim sweep: 1/2 points, ") != std::string::npos);
  CHECK(shown.err.find("epsim sweep: 2/2 points, ") != std::string::npos);
  CHECK(shown.err.find(", done (ep_degree=16: ") != std::string::npos);
  CHECK(read_file(dir / "out/results.csv") == read_file(dir / "out2/results.csv"));

  // Everything done: nothing computed, the same tables.
  const CliResult again = run_epsim("sweep s.yaml -o out", dir);
  CHECK(again.out.find("2 found in out, 0 computed") != std::string::npos);
  CHECK(leftovers(dir).empty());
}

TEST_CASE("epsim sweep: shards joined with --join give the table of one run") {
  const fs::path dir = scratch_dir("sweep_cli_join");
  write_file(dir / "s.yaml", sweep_yaml(kGrid));
  REQUIRE(run_epsim("sweep s.yaml -o whole", dir).status == 0);
  const CliResult a = run_epsim("sweep s.yaml -o a --shard 0/2", dir);
  CHECK(a.out.find("1 of 2 points are in the folder") != std::string::npos);
  REQUIRE(run_epsim("sweep s.yaml -o b --shard 1/2", dir).status == 0);
  const CliResult j = run_epsim("sweep --join a b -o joined", dir);
  INFO(j.err);
  REQUIRE(j.status == 0);
  for (const char* f : {"results.csv", "results.jsonl", "summary.md"})
    CHECK(read_file(dir / "whole" / f) == read_file(dir / "joined" / f));
  const CliResult other = run_epsim("sweep --join a whole-missing", dir);
  CHECK(other.status == 2);
  CHECK(other.err.find("whole-missing: not a sweep output folder") != std::string::npos);
}

TEST_CASE("epsim sweep: killed (SIGKILL or SIGTERM) mid-run and started again, the tables equal a straight run") {
  const fs::path dir = scratch_dir("sweep_cli_kill");
  write_file(dir / "s.yaml", sweep_yaml("set:\n  max_records: 8\ngrid:\n  ep_degree: [8, 16]\n  gpu.sms: [100, 120, 132]\n"));
  REQUIRE(run_epsim("sweep s.yaml -o straight -j 1", dir).status == 0);
  for (const char* signal : {"KILL", "TERM"}) {
    INFO(signal);
    const fs::path out = dir / (std::string("killed-") + signal);
    // Killed once its first point is written (wherever it lands, the rerun completes the folder).
    const std::string name = out.filename().string();
    const CliResult killed = run_shell("$EPSIM sweep s.yaml -o " + name + " -j 1 -q & pid=$!; "
                                       "until ls " + name + "/points/*.json >/dev/null 2>&1 || ! kill -0 $pid 2>/dev/null; do sleep 0.01; done; "
                                       "kill -" + signal + " $pid; wait $pid; "
                                       "$EPSIM sweep s.yaml -o " + name + " -j 2",
                                       dir);
    INFO(killed.err);
    REQUIRE(killed.status == 0);
    CHECK(killed.out.find(" 0 found in") == std::string::npos);  // the first point survived the signal
    for (const char* f : {"results.csv", "results.jsonl", "summary.md"})
      CHECK(read_file(dir / "straight" / f) == read_file(out / f));
  }
  // SIGTERM removes what it was writing; only SIGKILL may leave a hidden temporary point file.
  CHECK(leftovers(dir / "killed-TERM").empty());
}

TEST_CASE("epsim sweep: ranks of a launcher (mpirun -n 2 and 3) started together give the table of one process") {
  const fs::path dir = scratch_dir("sweep_cli_ranks");
  write_file(dir / "s.yaml", sweep_yaml("set:\n  max_records: 2\ngrid:\n  ep_degree: [8, 16]\n  gpu.sms: [100, 120, 132]\n"));
  REQUIRE(run_epsim("sweep s.yaml -o one -j 1", dir).status == 0);
  for (const int n : {2, 3}) {
    INFO(n << " ranks");
    // Open MPI's environment, as mpirun sets it, for every rank at once into one new folder.
    const std::string out = "ranks" + std::to_string(n);
    std::string script;
    for (int r = 0; r < n; ++r)
      script += "OMPI_COMM_WORLD_SIZE=" + std::to_string(n) + " OMPI_COMM_WORLD_RANK=" + std::to_string(r) +
                " $EPSIM sweep s.yaml -o " + out + " & p" + std::to_string(r) + "=$!; ";
    for (int r = 0; r < n; ++r) script += "wait $p" + std::to_string(r) + " || exit 1; ";
    const CliResult ranks = run_shell(script, dir);
    INFO(ranks.err);
    REQUIRE(ranks.status == 0);
    CHECK(ranks.out.find(" of " + std::to_string(n) + " finished the set") != std::string::npos);
    CHECK(folder_files(dir / "one") == folder_files(dir / out));
  }
  // The same with the real launcher, where one is installed (Debian: openmpi-bin).
  if (run_shell("command -v mpirun", dir).status != 0) {
    MESSAGE("mpirun not found: the launcher itself is not tried");
    return;
  }
  const CliResult mpi = run_shell("mpirun --allow-run-as-root --oversubscribe -n 3 $EPSIM sweep s.yaml -o mpi", dir);
  INFO(mpi.err);
  REQUIRE(mpi.status == 0);
  CHECK(folder_files(dir / "one") == folder_files(dir / "mpi"));
}

TEST_CASE("epsim sweep: a launcher's variables that name no sharding run the whole sweep in one process") {
  // One rank of one (mpirun -n 1), or a rank past its world's size: no sharding to take from them.
  const fs::path dir = scratch_dir("sweep_cli_no_launcher");
  write_file(dir / "s.yaml", sweep_yaml(kGrid));
  REQUIRE(run_epsim("sweep s.yaml -o one -j 1", dir).status == 0);
  int k = 0;
  for (const char* env : {"OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=0", "PMI_SIZE=1 PMI_RANK=0",
                          "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=2"}) {
    CAPTURE(env);
    const std::string out = "out" + std::to_string(k++);
    const CliResult r = run_shell(std::string(env) + " $EPSIM sweep s.yaml -j 1 -o " + out, dir);
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("2 points x 1 balancers; 0 found in " + out + ", 2 computed") != std::string::npos);
    CHECK(r.out.find("finished the set") == std::string::npos);
    CHECK(folder_files(dir / "one") == folder_files(dir / out));
  }
}

TEST_CASE("epsim sweep: its command line refuses what it cannot honour, with one line and exit 2") {
  const fs::path dir = scratch_dir("sweep_cli_refused");
  write_file(dir / "s.yaml", sweep_yaml(kGrid));
  REQUIRE(run_epsim("sweep s.yaml -o done -j 1 -q", dir).status == 0);
  struct Case {
    const char* args;
    const char* message;
  };
  for (const Case& c : {Case{"sweep s.yaml -o a --shard 1x/4", "--shard 1x/4: expected i/n with integers 0 <= i < n"},
                        Case{"sweep s.yaml -o a --shard a/4", "--shard a/4: expected i/n with integers 0 <= i < n"},
                        Case{"sweep s.yaml -o a --shard +1/4", "--shard +1/4: expected i/n with integers 0 <= i < n"},
                        Case{"sweep --join done --restart", "--join takes output folders only"},
                        Case{"sweep --join done --set gpu.sms=100", "--join takes output folders only"},
                        Case{"sweep s.yaml s.yaml -o a", "expected one SWEEP.yaml, got 2 arguments (output folders go with --join)"},
                        Case{"sweep s.yaml", "no output folder: give -o OUTDIR or `output:` in the sweep file"}}) {
    CAPTURE(c.args);
    check_refused(run_epsim(c.args, dir), c.message);
    CHECK_FALSE(fs::exists(dir / "a"));
  }
}

TEST_CASE("epsim sweep -q prints nothing, --progress included") {
  const fs::path dir = scratch_dir("sweep_cli_quiet");
  write_file(dir / "s.yaml", sweep_yaml(kGrid));
  const CliResult r = run_epsim("sweep s.yaml -o out -j 1 -q --progress", dir);
  CHECK(r.status == 0);
  CHECK(r.out.empty());
  CHECK(r.err.empty());
  CHECK(fs::exists(dir / "out/results.csv"));
}

TEST_CASE("epsim sweep: summary.md names the bandwidth sharing each point ran with") {
  const fs::path dir = scratch_dir("sweep_cli_sharing");
  write_file(dir / "s.yaml", sweep_yaml(kGrid));
  // auto (the default) with exact up to 8 GPUs: EP 8 runs exact, EP 16 coupled.
  const CliResult r = run_epsim("sweep s.yaml -o out -q --set engine.exact_max_gpus=8", dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string summary = read_file(dir / "out/summary.md");
  CHECK(summary.find("| point | ep_degree | sharing | balancer ") != std::string::npos);
  CHECK(summary.find("|     0 | 8         | exact   | static_ep ") != std::string::npos);
  CHECK(summary.find("|     1 | 16        | coupled | static_ep ") != std::string::npos);
  // results.csv and results.jsonl carry it last on every row.
  const std::string csv = read_file(dir / "out/results.csv");
  CHECK(csv.rfind("point,point_id,ep_degree,balancer,balancer_name,metric,records,mean,p50,p95,min,max,"
                  "mean_vs_baseline,not_served,sharing\n", 0) == 0);
  CHECK(csv.find(",exact\n1,") != std::string::npos);  // point 0's last row, then point 1's first
  CHECK(csv.substr(csv.size() - 9) == ",coupled\n");
  CHECK(read_file(dir / "out/results.jsonl").find(",\"sharing\":\"coupled\"}") != std::string::npos);
  const std::string lock = read_file(dir / "out/sweep.lock.json");
  CHECK(lock.find("\"sharing\": \"coupled\"") != std::string::npos);

  // A lock written before the sharing was kept, joined without the sweep file: the cell is empty.
  std::string old_lock = lock;
  for (const std::string mode : {"\"sharing\": \"exact\"", "\"sharing\": \"coupled\""}) {
    const std::size_t at = old_lock.find(mode);
    REQUIRE(at != std::string::npos);
    const std::size_t comma = old_lock.rfind(',', at);  // (the key follows the point's values)
    old_lock.erase(comma, at + mode.size() - comma);
  }
  write_file(dir / "out/sweep.lock.json", old_lock);
  const CliResult joined = run_epsim("sweep --join out -o joined -q", dir);
  INFO(joined.err);
  REQUIRE(joined.status == 0);
  CHECK(read_file(dir / "joined/summary.md").find("|     1 | 16        |         | static_ep ") != std::string::npos);
  // A lock whose sharing is not a mode is not one of epsim's: one error, nothing joined.
  std::string bad_lock = lock;
  const std::string coupled = "\"sharing\": \"coupled\"";
  bad_lock.replace(bad_lock.find(coupled), coupled.size(), "\"sharing\": \"a|b\"");
  write_file(dir / "out/sweep.lock.json", bad_lock);
  const CliResult bad = run_epsim("sweep --join out -o joined2 -q", dir);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("'a|b' is not a bandwidth sharing") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "joined2"));
  // auto is what a hardware file asks for, never what a point ran with.
  bad_lock.replace(bad_lock.find("\"sharing\": \"a|b\""), std::string("\"sharing\": \"a|b\"").size(),
                   "\"sharing\": \"auto\"");
  write_file(dir / "out/sweep.lock.json", bad_lock);
  const CliResult automatic = run_epsim("sweep --join out -o joined3 -q", dir);
  CHECK(automatic.status == 2);
  CHECK(automatic.err.find("'auto' is not a bandwidth sharing") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "joined3"));
}
