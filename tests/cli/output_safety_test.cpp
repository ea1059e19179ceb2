// epsim never loses a user's files: --overwrite replaces only folders epsim wrote, outputs appear
// whole or not at all, write errors are reported, and an interrupted run leaves nothing behind.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim::test;

namespace {

std::string experiment_yaml(int max_records) {
  const fs::path src = source_dir();
  return "kind: experiment\nname: safety\n"
         "trace: " + (src / "traces/samples/glm5-128e-ep16.eptrace").string() + "\n"
         "model: " + (src / "models/glm5-like-128.yaml").string() + "\n"
         "hardware: " + (src / "models/h100-sxm-8.yaml").string() + "\n"
         "ep_degree: 16\nbalancer:\n  name: static_ep\noutput: out\nseed: 1\n"
         "max_records: " + std::to_string(max_records) + "\n";
}

// Every regular file under `dir` with its bytes: what a user would lose.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = read_file(e.path());
  return files;
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

}  // namespace

TEST_CASE("-o . --overwrite refuses and leaves every file of the current folder in place") {
  const fs::path dir = scratch_dir("safety_dot");
  write_file(dir / "exp.yaml", experiment_yaml(1));
  write_file(dir / "thesis.tex", "years of work");
  fs::create_directories(dir / "data");
  write_file(dir / "data/run.csv", "1,2,3");
  const auto before = snapshot(dir);
  for (const char* out : {".", "./", "..", "data/.."}) {
    CAPTURE(out);
    const CliResult r = run_epsim(std::string("run exp.yaml -o ") + out + " --overwrite", dir);
    CHECK(r.status == 2);
    CHECK(one_line(r.err));
    CHECK(r.err.find("current folder") != std::string::npos);
    CHECK(snapshot(dir) == before);
    CHECK(leftovers(dir).empty());
    CHECK(leftovers(dir.parent_path()).empty());
  }
}

TEST_CASE("--overwrite refuses a folder holding anything epsim did not write, and removes nothing") {
  const fs::path dir = scratch_dir("safety_foreign");
  write_file(dir / "exp.yaml", experiment_yaml(1));
  REQUIRE(run_epsim("run exp.yaml", dir).status == 0);
  write_file(dir / "out/my-notes.txt", "mine");
  const auto before = snapshot(dir);
  const CliResult r = run_epsim("run exp.yaml --overwrite", dir);
  CHECK(r.status == 2);
  CHECK(one_line(r.err));
  CHECK(r.err.find("my-notes.txt") != std::string::npos);
  CHECK(r.err.find("did not write") != std::string::npos);
  CHECK(snapshot(dir) == before);
  CHECK(leftovers(dir).empty());

  // A folder epsim did not make at all (no marker) is refused too, whatever it holds.
  fs::create_directories(dir / "theirs/sub");
  write_file(dir / "theirs/metrics.csv", "not epsim's");
  const CliResult r2 = run_epsim("run exp.yaml -o theirs --overwrite", dir);
  CHECK(r2.status == 2);
  CHECK(r2.err.find("sub/") != std::string::npos);
  CHECK(read_file(dir / "theirs/metrics.csv") == "not epsim's");
}

TEST_CASE("--overwrite replaces a folder epsim wrote, whole, and a user's DIR.partial is never touched") {
  const fs::path dir = scratch_dir("safety_replace");
  write_file(dir / "exp.yaml", experiment_yaml(1));
  fs::create_directories(dir / "out.partial");
  write_file(dir / "out.partial/keep.txt", "a user's folder that happens to have this name");
  REQUIRE(run_epsim("run exp.yaml --write-plans", dir).status == 0);
  REQUIRE(fs::exists(dir / "out/plans.jsonl"));
  // The second run writes 2 records and no plans: the old plans.jsonl must go with the old result.
  write_file(dir / "exp.yaml", experiment_yaml(2));
  const CliResult r = run_epsim("run exp.yaml --overwrite", dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_FALSE(fs::exists(dir / "out/plans.jsonl"));
  const std::string metrics = read_file(dir / "out/metrics.csv");
  CHECK(std::count(metrics.begin(), metrics.end(), '\n') == 3);  // header and 2 records
  CHECK(read_file(dir / "out.partial/keep.txt") == "a user's folder that happens to have this name");
  CHECK(leftovers(dir) == std::vector<std::string>{"out.partial"});  // the user's, by name only
}

TEST_CASE("an empty folder the user made is used, missing parents are created, and removed on failure") {
  const fs::path dir = scratch_dir("safety_parents");
  write_file(dir / "exp.yaml", experiment_yaml(1));
  fs::create_directories(dir / "empty");
  CHECK(run_epsim("run exp.yaml -o empty", dir).status == 0);
  CHECK(fs::exists(dir / "empty/metrics.csv"));
  CHECK(run_epsim("run exp.yaml -o a/b/c", dir).status == 0);
  CHECK(fs::exists(dir / "a/b/c/summary.txt"));

  // A failing run (the trace is missing) leaves none of the parents it would have created.
  std::string yaml = experiment_yaml(1);
  yaml.replace(yaml.find("trace: ") + 7, yaml.find('\n', yaml.find("trace: ")) - yaml.find("trace: ") - 7,
               (dir / "missing.eptrace").string());
  write_file(dir / "bad.yaml", yaml);
  CHECK(run_epsim("run bad.yaml -o x/y/z", dir).status == 2);
  CHECK_FALSE(fs::exists(dir / "x"));
}

TEST_CASE("a write error (file-size limit) is reported with the file, exit 2, and no partial output") {
  const fs::path dir = scratch_dir("safety_write_error");
  write_file(dir / "exp.yaml", experiment_yaml(2));
  REQUIRE(run_epsim("run exp.yaml", dir).status == 0);
  const auto before = snapshot(dir);
  // 64 blocks (32-64 KiB): metrics.csv fits, the timeline does not.
  const CliResult r = run_epsim("run exp.yaml --overwrite --write-plans", dir, "ulimit -f 64;");
  CHECK(r.status == 2);
  CHECK(one_line(r.err));
  CHECK(r.err.find("out/") != std::string::npos);
  CHECK(r.err.find("File too large") != std::string::npos);
  CHECK(snapshot(dir) == before);  // the old result, untouched
  CHECK(leftovers(dir).empty());

  // A trace import that fails to write leaves no file and no temporary file.
  const CliResult t = run_epsim("trace generate --ranks 16 --experts 128 --top-k 8 --layers 2 --tokens-per-rank 4096 "
                                "--micro-batches 2 --seed 3 -o traces/big.eptrace",
                                dir, "ulimit -f 8;");
  CHECK(t.status == 2);
  CHECK(t.err.find("big.eptrace") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "traces"));
}

TEST_CASE("Ctrl-C during a run leaves the old result as it was and nothing else") {
  const fs::path dir = scratch_dir("safety_sigint");
  write_file(dir / "exp.yaml", experiment_yaml(1));
  REQUIRE(run_epsim("run exp.yaml", dir).status == 0);
  const auto before = snapshot(dir);
  write_file(dir / "exp.yaml", experiment_yaml(0));
  // Interrupt as soon as the staging folder appears (or let the run end if it wins the race: then the
  // new result must be complete). Either way: no mix, no leftovers.
  const CliResult r = run_shell(
      "\"$EPSIM\" run exp.yaml --overwrite -q & pid=$!\n"
      "while kill -0 $pid 2>/dev/null && [ ! -d .out.epsim-stage ]; do :; done\n"
      "kill -INT $pid 2>/dev/null; wait $pid; echo $?",
      dir);
  const std::string status = r.out.substr(0, r.out.find('\n'));
  CHECK(leftovers(dir).empty());
  if (status == "0") {
    MESSAGE("the run finished before the signal; its result must be whole");
    const std::string metrics = read_file(dir / "out/metrics.csv");
    CHECK(std::count(metrics.begin(), metrics.end(), '\n') == 17);
  } else {
    CHECK(status == "130");  // 128 + SIGINT: ended by the signal, after cleaning up
    auto after = snapshot(dir);
    after.erase("exp.yaml");
    auto old = before;
    old.erase("exp.yaml");
    CHECK(after == old);
  }
}

TEST_CASE("--force and --overwrite are one flag: every command takes either spelling") {
  const fs::path dir = scratch_dir("safety_flag_spellings");
  const std::string gen = "trace generate --ranks 2 --experts 4 --top-k 1 --layers 1 --tokens-per-rank 8 -o t.eptrace";
  REQUIRE(run_epsim(gen, dir).status == 0);
  CHECK(run_epsim(gen, dir).status == 2);                 // refuses to replace the file
  CHECK(run_epsim(gen + " --overwrite", dir).status == 0);  // a folder command's spelling
  CHECK(run_epsim(gen + " --force", dir).status == 0);
  write_file(dir / "exp.yaml", experiment_yaml(1));
  REQUIRE(run_epsim("run exp.yaml -q", dir).status == 0);
  CHECK(run_epsim("run exp.yaml -q", dir).status == 2);
  CHECK(run_epsim("run exp.yaml -q --force", dir).status == 0);  // a file command's spelling
  CHECK(leftovers(dir).empty());
}
