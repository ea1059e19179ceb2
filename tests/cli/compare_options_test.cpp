// `epsim compare`'s own options against its file: --max-records replaces the file's (0: every
// record), and a missing COMPARISON.yaml is named before anything is read or written.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim::test;

TEST_CASE("epsim compare --max-records replaces the file's, 0 for every record") {
  // The sample trace holds 16 records; the file asks for 2.
  const fs::path dir = scratch_dir("compare_max_records");
  const fs::path src = source_dir();
  write_file(dir / "cmp.yaml",
             "kind: comparison\n"
             "name: records\n"
             "hardware: " + (src / "models/h100-sxm-8.yaml").string() + "\n"
             "cases:\n"
             "  - name: sample\n"
             "    trace: " + (src / "traces/samples/glm5-128e-ep16.eptrace").string() + "\n"
             "    model: " + (src / "models/glm5-like-128.yaml").string() + "\n"
             "ep_degrees: [16]\n"
             "balancers:\n"
             "  - name: static_ep\n"
             "output: out\n"
             "max_records: 2\n");
  struct Case {
    const char* options;
    const char* records;
  };
  for (const Case& c : {Case{"--max-records 0", "16"}, Case{"--max-records 5", "5"}, Case{"", "2"}}) {
    CAPTURE(c.options);
    fs::remove_all(dir / "out");
    const CliResult r = run_epsim(std::string("compare cmp.yaml -q -j 1 ") + c.options, dir);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto rows = csv_rows(read_file(dir / "out/comparison.csv"));
    REQUIRE(rows.size() == 2);
    CHECK(csv_column(rows, "records") == std::vector<std::string>{c.records});
  }
}

TEST_CASE("epsim compare without its file says what is missing and exits 2") {
  const fs::path dir = scratch_dir("compare_no_file");
  const CliResult r = run_epsim("compare -q", dir);
  CHECK(r.status == 2);
  CHECK(r.err.find("epsim: error: command line: missing COMPARISON.yaml (see epsim compare --help)") !=
        std::string::npos);
  CHECK(fs::is_empty(dir));
}
