// `epsim trace {info|show|stats|merge|slice|derive|import|generate}`: command-line parsing only; the work is done
// by the plain functions of traces/ (docs/trace-format.md describes the format and every subcommand).
#include <boost/program_options.hpp>
#include <cstdint>
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "sim/cli/commands.hpp"
#include "sim/cli/trace_cli.hpp"
#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"
#include "traces/format/trace_info.hpp"
#include "traces/format/trace_layer_summary.hpp"
#include "traces/format/trace_merge.hpp"
#include "traces/format/trace_derive.hpp"
#include "traces/format/trace_slice.hpp"
#include "traces/import/counts_jsonl_export.hpp"
#include "traces/synth/synthetic_trace.hpp"
#include "traces/text/trace_show.hpp"
#include "traces/text/trace_stats.hpp"

namespace epsim {

namespace trace_cli {

const char* const kTraceUsage =
    "usage:\n"
    "  epsim trace info FILE\n"
    "  epsim trace show FILE [--records N] [--tokens]\n"
    "  epsim trace stats FILE [--ep N] [--placement contiguous|interleaved]\n"
    "  epsim trace merge A B... --by ranks|steps -o OUT [--force]\n"
    "  epsim trace slice FILE [--steps A:B] [--micro-batches A:B] [--layers ID,...] -o OUT [--force]\n"
    "  epsim trace derive FILE [--experts E] [--top-k K] [--ranks R] -o OUT [--force]\n"
    "  epsim trace import flame-csv DIR --ranks R -o OUT [--force]\n"
    "  epsim trace import olmoe-counts FILE --ranks R --tokens-per-rank T --micro-batches M --seed S\n"
    "                                  -o OUT [--token-ids] [--provenance P] [--licence L] [--force]\n"
    "  epsim trace import topk-jsonl FILE [--ranks R] [--experts E --top-k K] [--field-experts NAME]\n"
    "                     [--field-layer NAME] [--field-step NAME] [--field-micro-batch NAME] [--field-rank NAME]\n"
    "                     -o OUT [--provenance P] [--licence L] [--force]\n"
    "  epsim trace import counts-jsonl FILE... -o OUT [--provenance P] [--licence L] [--force]\n"
    "  epsim trace import sglang-csv FILE... --experts E --top-k K -o OUT [--provenance P] [--licence L] [--force]\n"
    "  epsim trace import expert-load|deepseek-eplb|vllm-eplb|sglang-stat|megatron-counts FILE --ranks R\n"
    "                     --top-k K [--key NAME] [--layer-ids A,B,...] -o OUT [--provenance P] [--licence L] [--force]\n"
    "  epsim trace export counts-jsonl FILE -o OUT [--force]   (OUT with {rank}: one file per rank)\n"
    "  epsim trace generate --ranks R (--experts E --top-k K | --model FILE) --tokens-per-rank T\n"
    "                       [--groups G --groups-per-token M] [--layers L] [--micro-batches M] [--steps S]\n"
    "                       [--dist uniform|zipf|lognormal] [--zipf-alpha A] [--lognormal-sigma SIG]\n"
    "                       [--rank-skew SIGMA_R] [--drift D] [--seed SEED] [--token-ids] -o OUT [--force]\n"
    "See docs/trace-format.md.\n";

}  // namespace trace_cli

namespace {

using namespace trace_cli;

int show(const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace show";
  po::options_description desc("options");
  desc.add_options()("records", po::value<std::string>(), "print only the first N records (all are still checked)")(
      "tokens", po::bool_switch(), "also print the first tokens of each record");
  po::variables_map vm;
  if (!parse(cmd, "FILE [--records N] [--tokens]", args, desc, "file", vm)) return 0;
  ShowOptions o;
  if (vm.count("records")) o.records = to_uint(cmd, "records", vm["records"].as<std::string>(), 0, UINT64_MAX);
  o.tokens = vm["tokens"].as<bool>();
  write_trace_show(vm["file"].as<std::string>(), o, std::cout);
  return 0;
}

int stats(const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace stats";
  po::options_description desc("options");
  desc.add_options()("ep", po::value<std::string>(), "also the max/mean GPU load under static EP over N GPUs")(
      "placement", po::value<std::string>()->default_value("contiguous"), "contiguous | interleaved");
  po::variables_map vm;
  if (!parse(cmd, "FILE [--ep N] [--placement contiguous|interleaved]", args, desc, "file", vm)) return 0;
  StatsOptions o;
  if (vm.count("ep")) o.ep = u32_opt(cmd, vm, "ep", 1, 65536);
  if (!parse_expert_layout(vm["placement"].as<std::string>(), o.layout))
    throw InputError(cmd, "--placement",
                     "'" + vm["placement"].as<std::string>() + "' is not contiguous or interleaved");
  write_trace_stats(vm["file"].as<std::string>(), o, std::cout);
  write_layer_summary(vm["file"].as<std::string>(), o.ep, o.layout, std::cout);
  return 0;
}

int info(const std::vector<std::string>& args) {
  po::options_description desc("options");
  po::variables_map vm;
  if (!parse("epsim trace info", "FILE", args, desc, "file", vm)) return 0;
  write_trace_info(vm["file"].as<std::string>(), std::cout);
  return 0;
}

int merge(const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace merge";
  po::options_description desc("options");
  desc.add_options()("by", po::value<std::string>()->required(),
                     "ranks: the same records, other source ranks; steps: later steps of the same ranks")(
      "output,o", po::value<std::string>()->required(), "output trace")("force", po::bool_switch(),
                                                                        "replace an existing output");
  po::variables_map vm;
  if (!parse(cmd, "A B... --by ranks|steps -o OUT [--force]", args, desc, "files", vm, true)) return 0;
  const std::string by = vm["by"].as<std::string>();
  if (by != "ranks" && by != "steps") throw InputError(cmd, "--by", "'" + by + "' is not ranks or steps");
  const std::string out = vm["output"].as<std::string>();
  merge_traces(vm["files"].as<std::vector<std::string>>(), by == "ranks" ? MergeBy::ranks : MergeBy::steps, out,
               vm["force"].as<bool>());
  report_written(out);
  return 0;
}

int slice(const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace slice";
  po::options_description desc("options");
  desc.add_options()("steps", po::value<std::string>(), "steps A:B (from A up to, not including, B; A: or :B)")(
      "micro-batches", po::value<std::string>(), "micro-batches A:B")(
      "layers", po::value<std::string>(), "layer ids (the model's numbering), comma-separated")(
      "output,o", po::value<std::string>()->required(), "output trace")("force", po::bool_switch(),
                                                                        "replace an existing output");
  po::variables_map vm;
  if (!parse(cmd, "FILE [--steps A:B] [--micro-batches A:B] [--layers ID,...] -o OUT [--force]", args, desc, "file", vm))
    return 0;
  SliceOptions o;
  for (const char* name : {"steps", "micro-batches"}) {
    if (!vm.count(name)) continue;
    IndexRange& range = std::string(name) == "steps" ? o.steps : o.micro_batches;
    if (!parse_index_range(vm[name].as<std::string>(), range))
      throw InputError(cmd, std::string("--") + name,
                       "'" + vm[name].as<std::string>() + "' is not A:B, A:, :B or A (integers, A <= B)");
  }
  if (vm.count("layers")) {
    const std::string text = vm["layers"].as<std::string>();
    std::size_t start = 0;
    while (start <= text.size()) {
      const std::size_t comma = std::min(text.find(',', start), text.size());
      o.layer_ids.push_back(
          static_cast<std::uint32_t>(to_uint(cmd, "layers", text.substr(start, comma - start), 0, 0xffffffffull)));
      start = comma + 1;
    }
  }
  const std::string out = vm["output"].as<std::string>();
  slice_trace(vm["file"].as<std::string>(), o, out, vm["force"].as<bool>());
  report_written(out);
  return 0;
}

int derive(const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace derive";
  po::options_description desc("options");
  desc.add_options()("experts", po::value<std::string>(), "expert count: a multiple (split) or divisor (merge)")(
      "top-k", po::value<std::string>(), "experts per token")(
      "ranks", po::value<std::string>(), "source ranks: a multiple or divisor of the trace's")(
      "output,o", po::value<std::string>()->required(), "output trace")("force", po::bool_switch(),
                                                                        "replace an existing output");
  po::variables_map vm;
  if (!parse(cmd, "FILE [--experts E] [--top-k K] [--ranks R] -o OUT [--force]", args, desc, "file", vm)) return 0;
  DeriveOptions o;
  if (vm.count("experts")) o.experts = static_cast<std::uint32_t>(to_uint(cmd, "experts", vm["experts"].as<std::string>(), 1, 65536));
  if (vm.count("top-k")) o.top_k = static_cast<std::uint32_t>(to_uint(cmd, "top-k", vm["top-k"].as<std::string>(), 1, 1024));
  if (vm.count("ranks")) o.ranks = static_cast<std::uint32_t>(to_uint(cmd, "ranks", vm["ranks"].as<std::string>(), 1, 65536));
  const std::string out = vm["output"].as<std::string>();
  derive_trace(vm["file"].as<std::string>(), o, out, vm["force"].as<bool>());
  report_written(out);
  return 0;
}

int generate(const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace generate";
  po::options_description desc("options");
  desc.add_options()("ranks", po::value<std::string>()->required(), "source ranks R")(
      "experts", po::value<std::string>(), "experts E (or from --model)")(
      "top-k", po::value<std::string>(), "experts per token K (or from --model)")(
      "model", po::value<std::string>(), "model YAML: experts, top-k and routing groups from it")(
      "groups", po::value<std::string>(), "expert groups G of group-limited routing (or from --model)")(
      "groups-per-token", po::value<std::string>(), "groups GT a token may reach (with --groups)")(
      "tokens-per-rank", po::value<std::string>()->required(), "tokens T per rank and record")(
      "layers", po::value<std::string>()->default_value("1"), "MoE layers L")(
      "micro-batches", po::value<std::string>()->default_value("1"), "micro-batches M per step")(
      "steps", po::value<std::string>()->default_value("1"), "steps S")(
      "dist", po::value<std::string>()->default_value("uniform"), "uniform | zipf | lognormal")(
      "zipf-alpha", po::value<std::string>()->default_value("1.2"), "Zipf exponent")(
      "lognormal-sigma", po::value<std::string>()->default_value("1"), "sigma of log popularity")(
      "rank-skew", po::value<std::string>()->default_value("0"), "sigma of per-rank log factors")(
      "drift", po::value<std::string>()->default_value("0"), "std of the per-micro-batch log step")(
      "seed", po::value<std::string>()->default_value("1"), "random seed")(
      "token-ids", po::bool_switch(), "store per-token ids too")("output,o", po::value<std::string>()->required(),
                                                                 "output trace")("force", po::bool_switch(),
                                                                                 "replace an existing output");
  po::variables_map vm;
  if (!parse(cmd, "--ranks R (--experts E --top-k K | --model FILE) --tokens-per-rank T [options] -o OUT", args, desc,
             "", vm))
    return 0;
  SyntheticOptions o;
  o.ranks = u32_opt(cmd, vm, "ranks", 1, 65536);
  if (vm.count("model")) {
    // The model gives what it knows; an option given as well must agree with it.
    const ModelSpec model = load_model(vm["model"].as<std::string>());
    o.experts = static_cast<std::uint32_t>(model.num_experts);
    o.top_k = static_cast<std::uint32_t>(model.top_k);
    if (model.routing.limited()) {
      o.groups = static_cast<std::uint32_t>(model.routing.groups);
      o.groups_per_token = static_cast<std::uint32_t>(model.routing.groups_per_token);
    }
    const auto agree = [&](const char* name, std::uint32_t from_model) {
      if (vm.count(name) && u32_opt(cmd, vm, name, 0, 65536) != from_model)
        throw InputError(cmd, std::string("--") + name,
                         std::string("--") + name + " " + vm[name].as<std::string>() + " disagrees with the model's " +
                             std::to_string(from_model) + " (" + vm["model"].as<std::string>() + ")");
    };
    agree("experts", o.experts);
    agree("top-k", o.top_k);
    agree("groups", o.groups);
    agree("groups-per-token", o.groups_per_token);
  } else {
    for (const char* name : {"experts", "top-k"})
      if (!vm.count(name))
        throw InputError(cmd, std::string("--") + name,
                         std::string("the option '--") + name + "' is required unless --model gives it (see --help)");
    o.experts = u32_opt(cmd, vm, "experts", 1, 65536);
    o.top_k = u32_opt(cmd, vm, "top-k", 1, 65536);
    if (vm.count("groups")) o.groups = u32_opt(cmd, vm, "groups", 1, 65536);
    if (vm.count("groups-per-token")) o.groups_per_token = u32_opt(cmd, vm, "groups-per-token", 1, 65536);
  }
  o.tokens_per_rank = u32_opt(cmd, vm, "tokens-per-rank");
  o.layers = u32_opt(cmd, vm, "layers");
  o.micro_batches = u32_opt(cmd, vm, "micro-batches");
  o.steps = u32_opt(cmd, vm, "steps");
  if (!parse_popularity_dist(vm["dist"].as<std::string>(), o.dist))
    throw InputError(cmd, "--dist", "'" + vm["dist"].as<std::string>() + "' is not uniform, zipf or lognormal");
  o.zipf_alpha = to_double(cmd, "zipf-alpha", vm["zipf-alpha"].as<std::string>());
  o.lognormal_sigma = to_double(cmd, "lognormal-sigma", vm["lognormal-sigma"].as<std::string>());
  o.rank_skew = to_double(cmd, "rank-skew", vm["rank-skew"].as<std::string>());
  o.drift = to_double(cmd, "drift", vm["drift"].as<std::string>());
  o.seed = to_uint(cmd, "seed", vm["seed"].as<std::string>(), 0, UINT64_MAX);
  o.token_ids = vm["token-ids"].as<bool>();
  const std::string out = vm["output"].as<std::string>();
  generate_trace(o, out, vm["force"].as<bool>());
  report_written(out);
  return 0;
}

int export_trace(const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace export";
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << "usage: epsim trace export counts-jsonl FILE -o OUT [--force]\n"
                 "  OUT with {rank}: one counts-jsonl file per source rank (docs/trace-format.md, section 3.4)\n";
    return 0;
  }
  if (args.empty() || args[0] != "counts-jsonl")
    throw InputError(cmd, "", "expected: epsim trace export counts-jsonl FILE -o OUT [--force] (see --help)");
  po::options_description desc("options");
  desc.add_options()("output,o", po::value<std::string>()->required(),
                     "output file; a path with {rank} writes one file per source rank")(
      "force", po::bool_switch(), "replace existing outputs");
  po::variables_map vm;
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (!parse(cmd + " counts-jsonl", "FILE -o OUT [--force]", rest, desc, "file", vm)) return 0;
  export_counts_jsonl(vm["file"].as<std::string>(), vm["output"].as<std::string>(), vm["force"].as<bool>());
  return 0;
}

}  // namespace

int trace_command(const std::vector<std::string>& args) {
  const char* expected = "expected info, show, stats, merge, slice, derive, import, export or generate";
  if (args.empty()) throw InputError("epsim trace", "", std::string(expected) + " (see --help)");
  const std::string& sub = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::cout << trace_cli::kTraceUsage;
    return 0;
  }
  if (sub == "info") return info(rest);
  if (sub == "merge") return merge(rest);
  if (sub == "slice") return slice(rest);
  if (sub == "derive") return derive(rest);
  if (sub == "show") return show(rest);
  if (sub == "stats") return stats(rest);
  if (sub == "generate") return generate(rest);
  if (sub == "export") return export_trace(rest);
  if (sub == "import") return trace_cli::import_command(rest);
  throw InputError("epsim trace", "", "unknown subcommand '" + sub + "' (" + expected + ")");
}

}  // namespace epsim
