// epsim's own command line, before any command runs: the exit status a script reads (0 for help and
// the version, 2 for a mistake in the command line, as for bad input) and the message beside it.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using epsim::test::check_refused;
using epsim::test::CliResult;
using epsim::test::run_epsim;
using epsim::test::says;
using epsim::test::scratch_dir;

TEST_CASE("epsim without a command prints its usage and exits 2, and -h and --help exit 0") {
  const fs::path dir = scratch_dir("exit_usage");
  const CliResult none = run_epsim("", dir);
  CHECK(none.status == 2);
  CHECK(says(none.out, "usage: epsim COMMAND [ARGS]"));
  for (const char* help : {"-h", "--help"}) {
    CAPTURE(help);
    const CliResult r = run_epsim(help, dir);
    CHECK(r.status == 0);
    CHECK(says(r.out, "usage: epsim COMMAND [ARGS]"));
    CHECK(r.err.empty());
  }
}

TEST_CASE("an unknown command is named, with the usage, and exits 2") {
  const fs::path dir = scratch_dir("exit_unknown_command");
  const CliResult r = run_epsim("rnu x.yaml", dir);
  CHECK(r.status == 2);
  CHECK(says(r.err, "epsim: error: unknown command 'rnu'"));
  CHECK(says(r.err, "usage: epsim COMMAND [ARGS]"));
  CHECK(r.out.empty());
}

TEST_CASE("an unknown option, a missing value and a second file are command-line errors that exit 2") {
  const fs::path dir = scratch_dir("exit_bad_options");
  struct Case {
    const char* args;
    const char* message;
  };
  for (const Case& c : {Case{"run x.yaml --treads 2", "unrecognised option '--treads'"},
                        Case{"run x.yaml --threads", "the required argument for option '--threads' is missing"},
                        Case{"run x.yaml y.yaml", "too many positional options have been specified on the command line"},
                        Case{"compare --threads two c.yaml", "the argument ('two') for option '--threads' is invalid"}}) {
    CAPTURE(c.args);
    check_refused(run_epsim(c.args, dir), std::string("epsim: error: command line: ") + c.message);
  }
  CHECK(fs::is_empty(dir));  // nothing was read or written
}

TEST_CASE("epsim run without its experiment file says what is missing and exits 2") {
  const fs::path dir = scratch_dir("exit_run_no_file");
  const CliResult r = run_epsim("run -q", dir);
  CHECK(r.status == 2);
  CHECK(says(r.err, "epsim: error: command line: missing EXPERIMENT.yaml (see epsim run --help)"));
  CHECK(fs::is_empty(dir));
}
