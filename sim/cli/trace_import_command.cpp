// `epsim trace import KIND ...`: command-line parsing of the importers only; each importer is a plain
// function of traces/import/ (docs/trace-format.md, section 3, describes every format and its source).
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "sim/cli/trace_cli.hpp"
#include "sim/core/input_error.hpp"
#include "traces/import/counts_jsonl.hpp"
#include "traces/import/expert_load.hpp"
#include "traces/import/flame_csv.hpp"
#include "traces/import/olmoe_counts.hpp"
#include "traces/import/sglang_csv.hpp"
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
  desc.add_options()("ranks", po::value<std::string>(), "source ranks R (when the file gives none)")(
      "experts", po::value<std::string>(), "experts E, for a file without header line")(
      "top-k", po::value<std::string>(), "experts per token K, for a file without header line")(
      "field-step", po::value<std::string>()->default_value("step"), "name of the step field")(
      "field-micro-batch", po::value<std::string>()->default_value("micro_batch"), "name of the micro-batch field")(
      "field-layer", po::value<std::string>()->default_value("layer"), "name of the layer field")(
      "field-experts", po::value<std::string>()->default_value("experts"), "name of the top-k ids field (e.g. topk_ids)")(
      "field-rank", po::value<std::string>()->default_value("src_rank"), "name of the source-rank field");
  add_label_options(desc);
  add_output_options(desc);
  po::variables_map vm;
  if (!parse(cmd, "FILE [--ranks R] [--experts E --top-k K] [--field-NAME NAME ...] -o OUT [--force]", args, desc,
             "file", vm))
    return 0;
  TopkJsonlOptions o;
  if (vm.count("ranks")) o.ranks = u32_opt(cmd, vm, "ranks", 1, 65536);
  if (vm.count("experts")) o.experts = u32_opt(cmd, vm, "experts", 1, 65536);
  if (vm.count("top-k")) o.top_k = u32_opt(cmd, vm, "top-k", 1, 1024);
  o.field_step = vm["field-step"].as<std::string>();
  o.field_micro_batch = vm["field-micro-batch"].as<std::string>();
  o.field_layer = vm["field-layer"].as<std::string>();
  o.field_experts = vm["field-experts"].as<std::string>();
  o.field_rank = vm["field-rank"].as<std::string>();
  o.labels = label_options(vm);
  const std::string out = vm["output"].as<std::string>();
  import_topk_jsonl(vm["file"].as<std::string>(), o, out, vm["force"].as<bool>());
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

/// "3,4,5" -> {3, 4, 5}.
std::vector<std::uint32_t> id_list(const std::string& cmd, const std::string& option, const std::string& text) {
  std::vector<std::uint32_t> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    out.push_back(static_cast<std::uint32_t>(to_uint(cmd, option, text.substr(start, comma - start), 0, 0xffffffffull)));
    start = comma + 1;
  }
  return out;
}

/// expert-load and the framework names that read the same kind of file (`source` = source_format).
int import_load(const std::string& kind, const std::string& source, const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace import " + kind;
  po::options_description desc("options");
  desc.add_options()("ranks", po::value<std::string>()->required(), "source ranks R to spread the loads over")(
      "top-k", po::value<std::string>()->required(), "experts per token K of the model")(
      "key", po::value<std::string>(), "the JSON key holding the loads (default: the usual names)")(
      "layer-ids", po::value<std::string>(), "the model's ids of the layers, comma-separated (default 0..L-1)");
  add_label_options(desc);
  add_output_options(desc);
  po::variables_map vm;
  const char* usage = "FILE --ranks R --top-k K [--key NAME] [--layer-ids A,B,...] -o OUT [--provenance P] "
                      "[--licence L] [--force]";
  if (!parse(cmd, usage, args, desc, "file", vm)) return 0;
  ExpertLoadOptions o;
  o.ranks = u32_opt(cmd, vm, "ranks", 1, 65536);
  o.top_k = u32_opt(cmd, vm, "top-k", 1, 1024);
  if (vm.count("key")) o.key = vm["key"].as<std::string>();
  if (vm.count("layer-ids")) o.layer_ids = id_list(cmd, "layer-ids", vm["layer-ids"].as<std::string>());
  o.source = source;
  o.labels = label_options(vm);
  const std::string out = vm["output"].as<std::string>();
  import_expert_load(vm["file"].as<std::string>(), o, out, vm["force"].as<bool>());
  report_written(out);
  return 0;
}

int import_sglang(const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace import sglang-csv";
  po::options_description desc("options");
  desc.add_options()("experts", po::value<std::string>()->required(), "routed experts E of the model")(
      "top-k", po::value<std::string>()->required(), "experts per token K");
  add_label_options(desc);
  add_output_options(desc);
  po::variables_map vm;
  if (!parse(cmd, "FILE... --experts E --top-k K -o OUT [--provenance P] [--licence L] [--force]", args, desc, "files",
             vm, true))
    return 0;
  SglangCsvOptions o;
  o.experts = u32_opt(cmd, vm, "experts", 1, 65536);
  o.top_k = u32_opt(cmd, vm, "top-k", 1, 1024);
  o.labels = label_options(vm);
  const std::string out = vm["output"].as<std::string>();
  import_sglang_csv(vm["files"].as<std::vector<std::string>>(), o, out, vm["force"].as<bool>());
  report_written(out);
  return 0;
}

const char* kKinds =
    "flame-csv, olmoe-counts, topk-jsonl, counts-jsonl, sglang-csv, expert-load, deepseek-eplb, vllm-eplb, "
    "sglang-stat or megatron-counts";

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
  if (rest[0] == "sglang-csv") return import_sglang(tail);
  if (rest[0] == "expert-load") return import_load(rest[0], "expert-load", tail);
  if (rest[0] == "deepseek-eplb") return import_load(rest[0], "deepseek-eplb-weight", tail);
  if (rest[0] == "vllm-eplb") return import_load(rest[0], "vllm-eplb-load", tail);
  if (rest[0] == "sglang-stat") return import_load(rest[0], "sglang-stat-logical-count", tail);
  if (rest[0] == "megatron-counts") return import_load(rest[0], "megatron-tokens-per-expert", tail);
  throw InputError("epsim trace import", "", "unknown format '" + rest[0] + "' (expected " + kKinds + ")");
}

}  // namespace epsim::trace_cli
