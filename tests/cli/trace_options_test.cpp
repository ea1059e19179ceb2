// `epsim trace`'s options as a user types them: each number checked against its range, each option
// reaching what it names, --help running nothing, and what each subcommand writes counted by hand
// from the trace generated here (2 steps x 3 micro-batches x 2 layers = 12 records of 4 ranks).
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim::test;

namespace {

/// A fresh folder holding t.eptrace: 4 ranks, 8 experts, top-2, 16 tokens per rank, 2 layers,
/// 3 micro-batches, 2 steps.
fs::path with_trace(const std::string& name) {
  const fs::path dir = scratch_dir(name);
  const CliResult r = run_epsim(
      "trace generate --ranks 4 --experts 8 --top-k 2 --tokens-per-rank 16 --layers 2 --micro-batches 3 --steps 2 "
      "--seed 3 -o t.eptrace",
      dir);
  REQUIRE(r.status == 0);
  REQUIRE(r.out == "wrote t.eptrace: 12 records, ranks 4, experts 8, top-k 2, layers 2, token ids no\n");
  return dir;
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

/// The command exits 2 with one line naming the subcommand, the option and what was expected, and
/// writes nothing.
void refused(const fs::path& dir, const std::string& args, const std::string& message) {
  CAPTURE(args);
  const std::set<std::string> before = files_in(dir);
  const CliResult r = run_epsim(args, dir);
  CHECK(r.status == 2);
  CHECK(r.err == "epsim: error: " + message + "\n");
  CHECK(r.out.empty());
  CHECK(files_in(dir) == before);
}

fs::path fixture(const std::string& name) { return source_dir() / "tests" / "fixtures" / name; }

/// `epsim trace show FILE`'s records (what follows its header), the provenance left out.
std::string records_of(const fs::path& dir, const std::string& file) {
  const CliResult r = run_epsim("trace show " + file, dir);
  REQUIRE(r.status == 0);
  const std::size_t first = r.out.find("\n\nrecord 0:");
  REQUIRE(first != std::string::npos);
  return r.out.substr(first);
}

}  // namespace

TEST_CASE("epsim trace: integers below their least, signed or with text after them are refused by name") {
  const fs::path dir = with_trace("trace_options_integers");
  refused(dir, "trace stats t.eptrace --ep 0", "epsim trace stats:--ep: '0' is not an integer between 1 and 65536");
  refused(dir, "trace derive t.eptrace --top-k 0 -o d.eptrace",
          "epsim trace derive:--top-k: '0' is not an integer between 1 and 1024");
  refused(dir, "trace generate --ranks 0 --experts 8 --top-k 2 --tokens-per-rank 4 -o g.eptrace",
          "epsim trace generate:--ranks: '0' is not an integer between 1 and 65536");
  refused(dir, "trace generate --ranks 4 --experts 8 --top-k 2 --tokens-per-rank 4 --seed -1 -o g.eptrace",
          "epsim trace generate:--seed: '-1' is not an integer between 0 and 18446744073709551615");
  refused(dir, "trace derive t.eptrace --ranks 8x -o d.eptrace",
          "epsim trace derive:--ranks: '8x' is not an integer between 1 and 65536");
  refused(dir, "trace generate --ranks 4 --experts 8 --top-k 2 --tokens-per-rank 4 --zipf-alpha inf -o g.eptrace",
          "epsim trace generate:--zipf-alpha: 'inf' is not a number");
}

TEST_CASE("epsim trace slice --layers: an empty id, after a comma or alone, is refused") {
  const fs::path dir = with_trace("trace_options_layer_list");
  for (const char* layers : {"1,", "''", ",1"}) {
    refused(dir, std::string("trace slice t.eptrace --layers ") + layers + " -o s.eptrace",
            "epsim trace slice:--layers: '' is not an integer between 0 and 4294967295");
  }
}

TEST_CASE("epsim trace: a subcommand without its FILE says what it expected, and --help runs nothing") {
  const fs::path dir = with_trace("trace_options_file_and_help");
  refused(dir, "trace info", "epsim trace info: expected FILE (see --help)");
  refused(dir, "trace stats --ep 4",
          "epsim trace stats: expected FILE [--ep N] [--placement contiguous|interleaved] (see --help)");
  const CliResult help = run_epsim("trace slice t.eptrace --steps 1:2 -o s.eptrace --help", dir);
  CHECK(help.status == 0);
  CHECK(says(help.out, "usage: epsim trace slice FILE [--steps A:B]"));
  CHECK(help.err.empty());
  CHECK_FALSE(fs::exists(dir / "s.eptrace"));
}

TEST_CASE("epsim trace stats: --placement interleaved is taken, another name refused") {
  const fs::path dir = with_trace("trace_options_placement");
  refused(dir, "trace stats t.eptrace --ep 4 --placement bogus",
          "epsim trace stats:--placement: 'bogus' is not contiguous or interleaved");
  const CliResult contiguous = run_epsim("trace stats t.eptrace --ep 4", dir);
  const CliResult interleaved = run_epsim("trace stats t.eptrace --ep 4 --placement interleaved", dir);
  REQUIRE(contiguous.status == 0);
  REQUIRE(interleaved.status == 0);
  CHECK(says(contiguous.out, "static EP: 4 GPUs, contiguous placement"));
  CHECK(says(interleaved.out, "static EP: 4 GPUs, interleaved placement"));
}

TEST_CASE("epsim trace slice: --steps and --micro-batches each cut their own dimension") {
  const fs::path dir = with_trace("trace_options_slice");
  struct Case {
    const char* args;
    const char* records;  // steps x micro-batches x layers kept
  };
  for (const Case& c : {Case{"--steps 1:2", "6 records"}, Case{"--micro-batches 1:2", "4 records"},
                        Case{"--micro-batches 1: --steps :1", "4 records"}, Case{"--layers 1", "6 records"},
                        Case{"--layers 0,1 --micro-batches 2", "4 records"}}) {
    CAPTURE(c.args);
    const CliResult r = run_epsim(std::string("trace slice t.eptrace ") + c.args + " -o s.eptrace --force", dir);
    CHECK(r.status == 0);
    CHECK(r.out == std::string("wrote s.eptrace: ") + c.records + ", ranks 4, experts 8, top-k 2, layers " +
                       (std::string(c.args) == "--layers 1" ? "1" : "2") + ", token ids no\n");
  }
}

TEST_CASE("epsim trace derive: --ranks sets the source ranks, --experts the experts") {
  const fs::path dir = with_trace("trace_options_derive");
  const CliResult ranks = run_epsim("trace derive t.eptrace --ranks 2 -o d.eptrace", dir);
  CHECK(ranks.status == 0);
  CHECK(ranks.out == "wrote d.eptrace: 12 records, ranks 2, experts 8, top-k 2, layers 2, token ids no\n");
  const CliResult experts = run_epsim("trace derive t.eptrace --experts 16 -o e.eptrace", dir);
  CHECK(experts.status == 0);
  CHECK(experts.out == "wrote e.eptrace: 12 records, ranks 4, experts 16, top-k 2, layers 2, token ids no\n");
}

TEST_CASE("epsim trace generate: --rank-skew and --groups-per-token reach the trace") {
  const fs::path dir = with_trace("trace_options_generate");
  const std::string base = "trace generate --ranks 4 --experts 8 --top-k 2 --tokens-per-rank 64 --seed 3 ";
  REQUIRE(run_epsim(base + "-o flat.eptrace", dir).status == 0);
  REQUIRE(run_epsim(base + "--rank-skew 0.5 -o skewed.eptrace", dir).status == 0);
  // The same seed: with each rank's popularity skewed, the counts differ.
  CHECK(records_of(dir, "flat.eptrace") != records_of(dir, "skewed.eptrace"));
  // Group-limited routing: 4 groups of 2 experts, each token within 1 group, so its top-2 are one
  // group's two experts and every rank's counts come in equal pairs (experts 0 and 1, 2 and 3, ...).
  REQUIRE(run_epsim(base + "--groups 4 --groups-per-token 1 -o grouped.eptrace", dir).status == 0);
  const std::string grouped = records_of(dir, "grouped.eptrace");
  std::size_t rows = 0;
  for (std::size_t at = grouped.find("  rank "); at != std::string::npos; at = grouped.find("  rank ", at + 1)) {
    const std::size_t colon = grouped.find(':', at);
    std::istringstream counts(grouped.substr(colon + 1, grouped.find('\n', colon) - colon - 1));
    int a = 0, b = 0;
    while (counts >> a >> b) CHECK(a == b);
    ++rows;
  }
  CHECK(rows == 4);
}

TEST_CASE("epsim trace export counts-jsonl: an existing output is kept without --force, other formats refused") {
  const fs::path dir = with_trace("trace_options_export");
  REQUIRE(run_epsim("trace export counts-jsonl t.eptrace -o c.jsonl", dir).status == 0);
  const std::string first = read_file(dir / "c.jsonl");
  write_file(dir / "c.jsonl", "the user's file\n");
  const CliResult again = run_epsim("trace export counts-jsonl t.eptrace -o c.jsonl", dir);
  CHECK(again.status == 2);
  CHECK(again.err ==
        "epsim: error: c.jsonl: the output file already exists; pass --force to replace it or choose another output\n");
  CHECK(read_file(dir / "c.jsonl") == "the user's file\n");
  CHECK(run_epsim("trace export counts-jsonl t.eptrace -o c.jsonl --force", dir).status == 0);
  CHECK(read_file(dir / "c.jsonl") == first);
  const CliResult other = run_epsim("trace export topk-jsonl t.eptrace -o k.jsonl", dir);
  CHECK(other.status == 2);
  CHECK(other.err == "epsim: error: epsim trace export: expected: epsim trace export counts-jsonl FILE -o OUT "
                     "[--force] (see --help)\n");
  CHECK_FALSE(fs::exists(dir / "k.jsonl"));
}

TEST_CASE("epsim trace import: --force, --seed and --micro-batches reach the importers") {
  const fs::path dir = scratch_dir("trace_options_import");
  const std::string batch = (fixture("flame-tiny") / "Encoder_Batch_tiny").string();
  const std::string flame = "trace import flame-csv '" + batch + "' --ranks 2 -o f.eptrace";
  REQUIRE(run_epsim(flame, dir).status == 0);
  write_file(dir / "f.eptrace", "the user's file\n");
  const CliResult kept = run_epsim(flame, dir);
  CHECK(kept.status == 2);
  CHECK(read_file(dir / "f.eptrace") == "the user's file\n");
  CHECK(run_epsim(flame + " --force", dir).status == 0);

  const std::string counts = fixture("olmoe-tiny.counts.json").string();
  const std::string olmoe = "trace import olmoe-counts '" + counts + "' --ranks 2 --tokens-per-rank 8 ";
  const CliResult two = run_epsim(olmoe + "--micro-batches 2 --seed 5 -o o5.eptrace", dir);
  CHECK(two.out == "wrote o5.eptrace: 4 records, ranks 2, experts 4, top-k 2, layers 2, token ids no\n");
  const CliResult three = run_epsim(olmoe + "--micro-batches 3 --seed 5 -o o5x3.eptrace", dir);
  CHECK(three.out == "wrote o5x3.eptrace: 6 records, ranks 2, experts 4, top-k 2, layers 2, token ids no\n");
  REQUIRE(run_epsim(olmoe + "--micro-batches 2 --seed 6 -o o6.eptrace", dir).status == 0);
  CHECK(records_of(dir, "o5.eptrace") != records_of(dir, "o6.eptrace"));
}

TEST_CASE("epsim trace import topk-jsonl: the field names given are read, and the labels given replace the file's") {
  const fs::path dir = scratch_dir("trace_options_topk");
  const std::string fields = "trace import topk-jsonl '" + (fixture("import") / "routing-topk-ids.jsonl").string() +
                             "' --field-layer layer_id --field-experts topk_ids --field-rank rank --experts 4 "
                             "--ranks 2 ";
  const CliResult r =
      run_epsim(fields + "--top-k 2 --provenance 'made by hand' --licence CC0-1.0 -o k.eptrace", dir);
  REQUIRE(r.status == 0);
  const std::string shown = run_epsim("trace show k.eptrace", dir).out;
  CHECK(says(shown, "provenance: made by hand; licence: CC0-1.0; imported by epsim trace import topk-jsonl"));
  // Layer 2's three tokens: rank 1 sends [1, 0] and [2, 3], rank 0 sends [3, 1] (the file's `rank`).
  CHECK(says(shown, "record 0: step 0, micro-batch 0, layer 0 (id 2), tokens 3\n"
                    "counts (row = source rank, column = expert 0..3):\n"
                    "  rank 0: 0 1 0 1\n"
                    "  rank 1: 1 1 1 1\n"));
  refused(dir, fields + "--top-k 0 -o z.eptrace",
          "epsim trace import topk-jsonl:--top-k: '0' is not an integer between 1 and 1024");
}

TEST_CASE("epsim trace import of expert loads: --key names the loads and --layer-ids takes no empty id") {
  const fs::path dir = scratch_dir("trace_options_loads");
  const fs::path imports = fixture("import");
  // The EPLB weight fixture with its loads under a key of the user's own.
  std::string weights = read_file(imports / "deepseek-eplb-weight.json");
  weights.replace(weights.find("\"weight\""), 8, "\"my_loads\"");
  write_file(dir / "w.json", weights);
  const std::string import = "trace import expert-load w.json --ranks 2 --top-k 2 --key my_loads ";
  const CliResult keyed = run_epsim(import + "-o w.eptrace", dir);
  CHECK(keyed.status == 0);
  CHECK(keyed.out == "wrote w.eptrace: 2 records, ranks 2, experts 4, top-k 2, layers 2, token ids no\n");
  refused(dir, import + "--layer-ids 3, -o x.eptrace",
          "epsim trace import expert-load:--layer-ids: '' is not an integer between 0 and 4294967295");
}

TEST_CASE("epsim trace import vllm-eplb names its source, and sglang-csv's --top-k stays within 1,024") {
  const fs::path dir = scratch_dir("trace_options_frameworks");
  const fs::path imports = fixture("import");
  const std::string window = (imports / "vllm-eplb-window.json").string();
  REQUIRE(run_epsim("trace import vllm-eplb '" + window + "' --ranks 2 --top-k 2 -o v.eptrace", dir).status == 0);
  CHECK(says(run_epsim("trace info v.eptrace", dir).out, "format version 1, source format vllm-eplb-load\n"));
  const std::string csv = (imports / "expert_distribution_rank0_timestamp1744347750.37.csv").string();
  refused(dir, "trace import sglang-csv '" + csv + "' --experts 4 --top-k 1025 -o s.eptrace",
          "epsim trace import sglang-csv:--top-k: '1025' is not an integer between 1 and 1024");
}
