// epsim-hw's command line (hw/host/hw_commands.hpp): every command's --help, the overview, and one clear
// line for every refusal. CPU-only: main() only prints what parse_invocation returns.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "hw/host/hw_commands.hpp"

using namespace epsim::hw;

namespace {

std::vector<std::string> words_of(const std::string& name) {
  std::vector<std::string> w;
  std::string cur;
  for (char c : name) {
    if (c == ' ') {
      w.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  w.push_back(cur);
  return w;
}

std::string refusal(const std::vector<std::string>& argv) {
  try {
    parse_invocation(argv, "epsim-hw 0.1.0");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("epsim-hw COMMAND --help and -h print that command's usage with every option it accepts") {
  REQUIRE(hw_commands().size() == 7);
  for (const auto& c : hw_commands()) {
    CAPTURE(c.name);
    for (const char* help : {"--help", "-h"}) {
      auto argv = words_of(c.name);
      argv.push_back(help);
      const HwInvocation inv = parse_invocation(argv, "epsim-hw 0.1.0");
      CHECK(inv.action == HwInvocation::Action::help);
      CHECK(inv.command == &c);
      CHECK(inv.text == c.usage);
    }
    CHECK(c.usage.rfind("usage: epsim-hw " + c.name, 0) == 0);
    for (const auto& key : c.options) CHECK(c.usage.find(key == "o" ? "-o" : "--" + key) != std::string::npos);
    for (const auto& key : c.switches) CHECK(c.usage.find("--" + key) != std::string::npos);
    // Help wins over anything else on the line, a bad option or a missing -o included.
    auto bad = words_of(c.name);
    bad.insert(bad.end(), {"--bogus", "--help"});
    CHECK(parse_invocation(bad, "v").action == HwInvocation::Action::help);
  }
}

TEST_CASE("epsim-hw --help lists every command, bench --help lists the bench kinds, --version") {
  for (const char* help : {"--help", "-h"}) {
    const HwInvocation inv = parse_invocation({help}, "epsim-hw 0.1.0");
    CHECK(inv.action == HwInvocation::Action::help);
    for (const auto& c : hw_commands()) CHECK(inv.text.find("  " + c.name + " ") != std::string::npos);
  }
  const HwInvocation bench = parse_invocation({"bench", "--help"}, "v");
  CHECK(bench.action == HwInvocation::Action::help);
  for (const char* kind : {"gemm", "copy", "contention", "alltoall", "ep_comm"})
    CHECK(bench.text.find(std::string("  ") + kind + " ") != std::string::npos);
  const HwInvocation version = parse_invocation({"--version"}, "epsim-hw 0.1.0");
  CHECK(version.action == HwInvocation::Action::version);
  CHECK(version.text == "epsim-hw 0.1.0\n");
}

TEST_CASE("epsim-hw refuses with one line naming the command and where its help is") {
  CHECK(refusal({"bench", "gemm", "--bogus", "1", "-o", "g.yaml"}) ==
        "epsim-hw bench gemm: unknown option '--bogus' (epsim-hw bench gemm --help)");
  CHECK(refusal({"suite", "-o", "s.yaml", "--sizes=4K"}) == "epsim-hw suite: unknown option '--sizes' (epsim-hw suite --help)");
  CHECK(refusal({"suite", "-x"}) == "epsim-hw suite: unknown option '-x' (epsim-hw suite --help)");
  CHECK(refusal({"suite", "--quick"}) == "epsim-hw suite: missing -o FILE (epsim-hw suite --help)");
  CHECK(refusal({"suite", "-o"}) == "epsim-hw suite: option '-o' needs a value (epsim-hw suite --help)");
  CHECK(refusal({"suite", "--quick=yes", "-o", "s.yaml"}) == "epsim-hw suite: --quick takes no value (epsim-hw suite --help)");
  CHECK(refusal({"suite", "extra", "-o", "s.yaml"}) == "epsim-hw suite: unexpected argument 'extra' (epsim-hw suite --help)");
  CHECK(refusal({"run", "--gpu", "0", "-o", "t.json"}) == "epsim-hw run: needs one PLANS.jsonl (epsim-hw run --help)");
  CHECK(refusal({"run", "p.jsonl", "-o", "t.json"}) == "epsim-hw run: missing --gpu (epsim-hw run --help)");
  CHECK(refusal({"bench", "gemm", "--gpus", "2", "-o", "g.yaml"}) ==
        "epsim-hw bench gemm: unknown option '--gpus' (epsim-hw bench gemm --help)");  // a multi-GPU option
  CHECK(refusal({"bench", "nccl", "-o", "x.yaml"}) ==
        "epsim-hw bench: unknown kind 'nccl' (gemm, copy, contention, alltoall, ep_comm)");
  CHECK(refusal({"bench"}) == "epsim-hw bench: needs a kind: gemm, copy, contention, alltoall, ep_comm (epsim-hw bench --help)");
  CHECK(refusal({"calibrate"}) == "epsim-hw: unknown command 'calibrate' (epsim-hw --help lists the commands)");
  CHECK(refusal({}) == "epsim-hw: missing command (epsim-hw --help lists them)");
  for (const auto& c : hw_commands()) {
    auto argv = words_of(c.name);
    argv.push_back("--no-such-option");
    const std::string line = refusal(argv);
    CHECK(line.find('\n') == std::string::npos);
    CHECK(line.rfind("epsim-hw " + c.name + ": unknown option '--no-such-option'", 0) == 0);
  }
}

TEST_CASE("a command to run gets its options, and the command line as typed for the file's header") {
  const HwInvocation inv =
      parse_invocation({"suite", "-o", "my set.yaml", "--gpus", "4", "--quick", "--hardware", "h100-sxm-8"}, "v");
  CHECK(inv.action == HwInvocation::Action::run);
  REQUIRE(inv.command != nullptr);
  CHECK(inv.command->name == "suite");
  CHECK(inv.args.text("o", "") == "my set.yaml");
  CHECK(inv.args.integer("gpus", 0, 1, 8) == 4);
  CHECK(inv.args.flags.count("quick") == 1);
  CHECK(inv.args.text("hardware", "") == "h100-sxm-8");
  CHECK(inv.args.command_line == "epsim-hw suite -o 'my set.yaml' --gpus 4 --quick --hardware h100-sxm-8");

  const HwInvocation run = parse_invocation({"run", "plans.jsonl", "--gpu", "3", "-o", "t.json"}, "v");
  CHECK(run.command->name == "run");
  CHECK(run.args.positional == std::vector<std::string>{"plans.jsonl"});
  CHECK(run.args.integer("gpu", 0, 0, 7) == 3);

  const HwInvocation ep = parse_invocation({"bench", "ep_comm", "--top-k", "6", "--dtype", "fp8", "-o", "e.yaml"}, "v");
  CHECK(ep.command->name == "bench ep_comm");
  CHECK(ep.args.integer("top-k", 8, 1, 64) == 6);
}
