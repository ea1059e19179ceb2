// `epsim trace import KIND ...`: command-line parsing of the importers only; each importer is a plain
// function of traces/import/ (docs/trace-format.md, section 3, describes every format and its source).
#include <iostream>
#include <string>
#include <vector>

#include "sim/cli/trace_cli.hpp"
#include "sim/core/input_error.hpp"
#include "traces/import/counts_jsonl.hpp"
#include "traces/import/flame_csv.hpp"
#include "traces/import/olmoe_counts.hpp"
#include "traces/import/topk_jsonl.hpp"

namespace epsim::trace_cli {

namespace {

void add_output_options(po::options_description& desc) {
  desc.add_options()("output,o", po::value<std::string>()->required(), "output trace")("force", po::bool_switch(),
                                                                                     "replace an existing output");
}

int import_flame(const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace import flame-csv";
  po::options_description desc("options");
  desc.add_options()("ranks", po::value<std::string>()->required(), "source ranks R");
  add_output_options(desc);
  po::variables_map vm;
  if (!parse(cmd, "DIR --ranks R -o OUT [--force]", args, desc, "dir", vm)) return 0;
  const std::string out = vm["output"].as<std::string>();
  import_flame_csv(vm["dir"].as<std::string>(), u32_opt(cmd, vm, "ranks", 1, 65536), out, vm["force"].as<bool>());
  report_written(out);
  return 0;
}

int import_olmoe(const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace import olmoe-counts";
  po::options_description desc("options");
  desc.add_options()("ranks", po::value<std::string>()->required(), "source ranks R")(
      "tokens-per-rank", po::value<std::string>()->required(), "tokens T per rank and record")(
      "micro-batches", po::value<std::string>()->required(), "micro-batches M to sample")(
      "seed", po::value<std::string>()->required(), "random seed")("token-ids", po::bool_switch(),
                                                                   "store per-token ids too");
  add_label_options(desc);
  add_output_options(desc);
  po::variables_map vm;
  const char* usage =
      "FILE --ranks R --tokens-per-rank T --micro-batches M --seed S -o OUT [--token-ids] [--provenance P] "
      "[--licence L] [--force]";
  if (!parse(cmd, usage, args, desc, "file", vm)) return 0;
  OlmoeImportOptions o;
  o.ranks = u32_opt(cmd, vm, "ranks", 1, 65536);
  o.tokens_per_rank = u32_opt(cmd, vm, "tokens-per-rank");
  o.micro_batches = u32_opt(cmd, vm, "micro-batches");
  o.seed = to_uint(cmd, "seed", vm["seed"].as<std::string>(), 0, UINT64_MAX);
  o.token_ids = vm["token-ids"].as<bool>();
  o.labels = label_options(vm);
  const std::string out = vm["output"].as<std::string>();
  import_olmoe_counts(vm["file"].as<std::string>(), o, out, vm["force"].as<bool>());
  report_written(out);
  return 0;
}

int import_topk(const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace import topk-jsonl";
  po::options_description desc("options");
  desc.add_options()("ranks", po::value<std::string>(), "source ranks R (when the file gives none)");
  add_output_options(desc);
  po::variables_map vm;
  if (!parse(cmd, "FILE [--ranks R] -o OUT [--force]", args, desc, "file", vm)) return 0;
  const std::uint32_t ranks = vm.count("ranks") ? u32_opt(cmd, vm, "ranks", 1, 65536) : 0;
  const std::string out = vm["output"].as<std::string>();
  import_topk_jsonl(vm["file"].as<std::string>(), ranks, out, vm["force"].as<bool>());
  report_written(out);
  return 0;
}

int import_counts(const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace import counts-jsonl";
  po::options_description desc("options");
  add_label_options(desc);
  add_output_options(desc);
  po::variables_map vm;
  if (!parse(cmd, "FILE... -o OUT [--provenance P] [--licence L] [--force]", args, desc, "files", vm, true)) return 0;
  const std::string out = vm["output"].as<std::string>();
  import_counts_jsonl(vm["files"].as<std::vector<std::string>>(), label_options(vm), out, vm["force"].as<bool>());
  report_written(out);
  return 0;
}

const char* kKinds = "flame-csv, olmoe-counts, topk-jsonl or counts-jsonl";

}  // namespace

int import_command(const std::vector<std::string>& rest) {
  if (rest.empty()) throw InputError("epsim trace import", "", std::string("expected ") + kKinds);
  if (rest[0] == "--help" || rest[0] == "-h") {
    std::cout << kTraceUsage;
    return 0;
  }
  const std::vector<std::string> tail(rest.begin() + 1, rest.end());
  if (rest[0] == "flame-csv") return import_flame(tail);
  if (rest[0] == "olmoe-counts") return import_olmoe(tail);
  if (rest[0] == "topk-jsonl") return import_topk(tail);
  if (rest[0] == "counts-jsonl") return import_counts(tail);
  throw InputError("epsim trace import", "", "unknown format '" + rest[0] + "' (expected " + kKinds + ")");
}

}  // namespace epsim::trace_cli
