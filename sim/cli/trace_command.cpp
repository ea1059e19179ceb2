// `epsim trace {show|stats|import|generate}`: command-line parsing only; the work is done by the plain
// functions of traces/ (docs/trace-format.md describes the format and every subcommand).
#include <boost/program_options.hpp>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "sim/cli/commands.hpp"
#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/import/flame_csv.hpp"
#include "traces/import/olmoe_counts.hpp"
#include "traces/import/topk_jsonl.hpp"
#include "traces/synth/synthetic_trace.hpp"
#include "traces/text/trace_show.hpp"
#include "traces/text/trace_stats.hpp"

namespace epsim {

namespace po = boost::program_options;

namespace {

const char* kUsage =
    "usage:\n"
    "  epsim trace show FILE [--records N] [--tokens]\n"
    "  epsim trace stats FILE [--ep N] [--placement contiguous|interleaved]\n"
    "  epsim trace import flame-csv DIR --ranks R -o OUT [--force]\n"
    "  epsim trace import olmoe-counts FILE --ranks R --tokens-per-rank T --micro-batches M --seed S\n"
    "                                  -o OUT [--token-ids] [--force]\n"
    "  epsim trace import topk-jsonl FILE [--ranks R] -o OUT [--force]\n"
    "  epsim trace generate --ranks R (--experts E --top-k K | --model FILE) --tokens-per-rank T\n"
    "                       [--groups G --groups-per-token M] [--layers L] [--micro-batches M] [--steps S]\n"
    "                       [--dist uniform|zipf|lognormal] [--zipf-alpha A] [--lognormal-sigma SIG]\n"
    "                       [--rank-skew SIGMA_R] [--drift D] [--seed SEED] [--token-ids] -o OUT [--force]\n"
    "See docs/trace-format.md.\n";

/// Parses `args` against the visible options plus one hidden positional argument named `positional`
/// (none when empty) into `vm`. Returns false when --help was asked (the help is then printed).
bool parse(const std::string& command, const std::string& usage, const std::vector<std::string>& args,
           po::options_description& visible, const std::string& positional, po::variables_map& vm) {
  visible.add_options()("help,h", "print this help");
  po::options_description all;
  all.add(visible);
  po::positional_options_description pos;
  if (!positional.empty()) {
    all.add_options()(positional.c_str(), po::value<std::string>(), "");
    pos.add(positional.c_str(), 1);
  }
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: " << command << " " << usage << "\n" << visible;
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw InputError(command, "", std::string(e.what()) + " (see --help)");
  }
  if (!positional.empty() && !vm.count(positional))
    throw InputError(command, "", "expected " + usage + " (see --help)");
  return true;
}

std::uint64_t to_uint(const std::string& command, const std::string& option, const std::string& text, std::uint64_t min,
                      std::uint64_t max) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || text[0] == '+' || end != text.c_str() + text.size() || errno != 0 || v < min ||
      v > max)
    throw InputError(command, "--" + option,
                     "'" + text + "' is not an integer between " + std::to_string(min) + " and " + std::to_string(max));
  return v;
}

double to_double(const std::string& command, const std::string& option, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(v))
    throw InputError(command, "--" + option, "'" + text + "' is not a number");
  return v;
}

std::uint32_t u32_opt(const std::string& command, const po::variables_map& vm, const std::string& name,
                      std::uint64_t min = 1, std::uint64_t max = 0xffffffffull) {
  return static_cast<std::uint32_t>(to_uint(command, name, vm[name].as<std::string>(), min, max));
}

void report_written(const std::string& path) {
  TraceReader reader(path);
  TraceRecord record;
  while (reader.next(record)) {
  }
  const TraceHeader& h = reader.header();
  std::cout << "wrote " << path << ": " << reader.records_read() << " records, ranks " << h.num_ranks << ", experts "
            << h.num_experts << ", top-k " << h.top_k << ", layers " << h.num_layers << ", token ids "
            << (h.has_token_ids ? "yes" : "no") << "\n";
}

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
  return 0;
}

int import_flame(const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace import flame-csv";
  po::options_description desc("options");
  desc.add_options()("ranks", po::value<std::string>()->required(), "source ranks R")(
      "output,o", po::value<std::string>()->required(), "output trace")("force", po::bool_switch(),
                                                                        "replace an existing output");
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
      "seed", po::value<std::string>()->required(), "random seed")(
      "token-ids", po::bool_switch(), "store per-token ids too")("output,o", po::value<std::string>()->required(),
                                                                 "output trace")("force", po::bool_switch(),
                                                                                 "replace an existing output");
  po::variables_map vm;
  const char* usage = "FILE --ranks R --tokens-per-rank T --micro-batches M --seed S -o OUT [--token-ids] [--force]";
  if (!parse(cmd, usage, args, desc, "file", vm)) return 0;
  OlmoeImportOptions o;
  o.ranks = u32_opt(cmd, vm, "ranks", 1, 65536);
  o.tokens_per_rank = u32_opt(cmd, vm, "tokens-per-rank");
  o.micro_batches = u32_opt(cmd, vm, "micro-batches");
  o.seed = to_uint(cmd, "seed", vm["seed"].as<std::string>(), 0, UINT64_MAX);
  o.token_ids = vm["token-ids"].as<bool>();
  const std::string out = vm["output"].as<std::string>();
  import_olmoe_counts(vm["file"].as<std::string>(), o, out, vm["force"].as<bool>());
  report_written(out);
  return 0;
}

int import_jsonl(const std::vector<std::string>& args) {
  const std::string cmd = "epsim trace import topk-jsonl";
  po::options_description desc("options");
  desc.add_options()("ranks", po::value<std::string>(), "source ranks R (when the file gives none)")(
      "output,o", po::value<std::string>()->required(), "output trace")("force", po::bool_switch(),
                                                                        "replace an existing output");
  po::variables_map vm;
  if (!parse(cmd, "FILE [--ranks R] -o OUT [--force]", args, desc, "file", vm)) return 0;
  const std::uint32_t ranks = vm.count("ranks") ? u32_opt(cmd, vm, "ranks", 1, 65536) : 0;
  const std::string out = vm["output"].as<std::string>();
  import_topk_jsonl(vm["file"].as<std::string>(), ranks, out, vm["force"].as<bool>());
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

}  // namespace

int trace_command(const std::vector<std::string>& args) {
  if (args.empty()) throw InputError("epsim trace", "", "expected show, stats, import or generate (see --help)");
  const std::string& sub = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (sub == "show") return show(rest);
  if (sub == "stats") return stats(rest);
  if (sub == "generate") return generate(rest);
  if (sub == "import") {
    if (rest.empty() || rest[0] == "--help" || rest[0] == "-h") {
      if (rest.empty()) throw InputError("epsim trace import", "", "expected flame-csv, olmoe-counts or topk-jsonl");
      std::cout << kUsage;
      return 0;
    }
    const std::vector<std::string> tail(rest.begin() + 1, rest.end());
    if (rest[0] == "flame-csv") return import_flame(tail);
    if (rest[0] == "olmoe-counts") return import_olmoe(tail);
    if (rest[0] == "topk-jsonl") return import_jsonl(tail);
    throw InputError("epsim trace import", "",
                     "unknown format '" + rest[0] + "' (expected flame-csv, olmoe-counts or topk-jsonl)");
  }
  throw InputError("epsim trace", "", "unknown subcommand '" + sub + "' (expected show, stats, import or generate)");
}

}  // namespace epsim
