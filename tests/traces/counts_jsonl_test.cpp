// counts-jsonl importer: per-rank files merged exactly, and one error naming file and line per defect.
#include "traces/import/counts_jsonl.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "sim/core/input_error.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/format/trace_writer.hpp"
#include "traces/import/counts_jsonl_export.hpp"
#include "traces/synth/synthetic_trace.hpp"

namespace fs = std::filesystem;
using namespace epsim;

namespace {

std::string fixture(const char* name) { return (epsim::test::source_dir() / "tests/fixtures/import" / name).string(); }

std::string write_lines(const fs::path& dir, const std::string& name, const std::vector<std::string>& lines) {
  const std::string path = (dir / name).string();
  std::ofstream out(path);
  for (const std::string& l : lines) out << l << "\n";
  return path;
}

const std::string kHeader =
    R"({"format":"epsim-counts-jsonl","version":1,"num_experts":4,"top_k":2,"num_ranks":2,"layer_ids":[7],"provenance":"test"})";

/// Imports `lines` (header first) as one file and returns the error message ("" when it imports).
std::string import_error(const std::string& name, const std::vector<std::string>& lines) {
  const auto dir = epsim::test::scratch_dir("counts_jsonl_bad_" + name);
  const std::string in = write_lines(dir, "in.jsonl", lines);
  try {
    import_counts_jsonl({in}, {}, (dir / "out.eptrace").string(), false);
  } catch (const InputError& e) {
    CHECK_FALSE(fs::exists(dir / "out.eptrace"));
    CHECK(epsim::test::leftovers(dir).empty());
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("counts-jsonl: two per-rank files, lines in any order, merge into exactly the counts written") {
  const auto dir = epsim::test::scratch_dir("counts_jsonl_merge");
  const std::string out = (dir / "run.eptrace").string();
  import_counts_jsonl({fixture("counts-rank0.jsonl"), fixture("counts-rank1.jsonl")}, {}, out, false);
  TraceReader reader(out);
  const TraceHeader& h = reader.header();
  CHECK(h.num_ranks == 2);
  CHECK(h.num_experts == 4);
  CHECK(h.top_k == 2);
  CHECK(h.layer_ids == std::vector<std::uint32_t>{5, 3});  // the header's order, not sorted
  CHECK_FALSE(h.has_token_ids);
  CHECK(h.source_format == "counts-jsonl");
  CHECK(h.provenance == "hand-made counts of a two-rank run; licence: CC0-1.0");
  TraceRecord r;
  // (step 0, layer 5): rank 0 [0 0 0 2], rank 1 [2 2 0 0]: 6 assignments = 3 tokens of top-2.
  REQUIRE(reader.next(r));
  CHECK(r.step == 0);
  CHECK(r.layer == 0);
  CHECK(r.counts == std::vector<std::uint32_t>{0, 0, 0, 2, 2, 2, 0, 0});
  REQUIRE(reader.next(r));  // (step 0, layer 3)
  CHECK(r.layer == 1);
  CHECK(r.counts == std::vector<std::uint32_t>{1, 0, 2, 1, 0, 3, 0, 1});
  REQUIRE(reader.next(r));  // (step 1, layer 5)
  CHECK(r.step == 1);
  CHECK(r.layer == 0);
  CHECK(r.counts == std::vector<std::uint32_t>{1, 1, 0, 0, 0, 0, 1, 1});
  REQUIRE(reader.next(r));  // (step 1, layer 3)
  CHECK(r.counts == std::vector<std::uint32_t>{2, 0, 0, 0, 0, 0, 0, 2});
  CHECK_FALSE(reader.next(r));
}

TEST_CASE("counts-jsonl: one file with every rank, and the user's labels replace the file's") {
  const auto dir = epsim::test::scratch_dir("counts_jsonl_one");
  const std::string in = write_lines(dir, "all.jsonl",
                                     {kHeader, R"({"counts":[1,1,0,0],"rank":1,"layer":7,"micro_batch":2,"step":0})",
                                      R"({"step":0,"micro_batch":2,"layer":7,"rank":0,"counts":[0,0,3,1]})", ""});
  const std::string out = (dir / "t.eptrace").string();
  ProvenanceOptions labels;
  labels.provenance = "my run 17";
  labels.licence = "Apache-2.0";
  import_counts_jsonl({in}, labels, out, false);
  TraceReader reader(out);
  CHECK(reader.header().provenance == "my run 17; licence: Apache-2.0");
  TraceRecord r;
  REQUIRE(reader.next(r));
  CHECK(r.micro_batch == 2);
  CHECK(r.counts == std::vector<std::uint32_t>{0, 0, 3, 1, 1, 1, 0, 0});
  CHECK_FALSE(reader.next(r));
  // An existing output is kept without --force.
  CHECK_THROWS_AS(import_counts_jsonl({in}, {}, out, false), InputError);
  import_counts_jsonl({in}, {}, out, true);
  CHECK(TraceReader(out).header().provenance == "test");
}

TEST_CASE("counts-jsonl: every defect is one error naming the file and the line") {
  const std::string ok0 = R"({"step":0,"micro_batch":0,"layer":7,"rank":0,"counts":[1,1,0,0]})";
  const std::string ok1 = R"({"step":0,"micro_batch":0,"layer":7,"rank":1,"counts":[0,0,1,1]})";
  CHECK(import_error("fine", {kHeader, ok0, ok1}).empty());

  std::string e = import_error("json", {kHeader, ok0, R"({"step":0,"micro_batch":0,"layer":7,"rank":1,"counts":[0,0,1,1])"});
  CHECK(has(e, "in.jsonl:line 3"));
  CHECK(has(e, "invalid JSON"));
  e = import_error("unknown", {kHeader, ok0, R"({"step":0,"micro_batch":0,"layer":7,"rank":1,"count":[0,0,1,1]})"});
  CHECK(has(e, "in.jsonl:line 3: unknown key \"count\""));
  e = import_error("type", {kHeader, R"({"step":"0","micro_batch":0,"layer":7,"rank":0,"counts":[1,1,0,0]})", ok1});
  CHECK(has(e, "in.jsonl:line 2: \"step\" must be an integer"));
  e = import_error("negative", {kHeader, ok0, R"({"step":0,"micro_batch":0,"layer":7,"rank":1,"counts":[0,0,-1,3]})"});
  CHECK(has(e, "in.jsonl:line 3: \"counts\"[2] must be a non-negative integer"));
  e = import_error("float", {kHeader, ok0, R"({"step":0,"micro_batch":0,"layer":7,"rank":1,"counts":[0,0,1.0,1]})"});
  CHECK(has(e, "in.jsonl:line 3: \"counts\"[2]"));
  CHECK(has(e, "1.0"));
  e = import_error("topk", {kHeader, ok0, R"({"step":0,"micro_batch":0,"layer":7,"rank":1,"counts":[0,0,1,2]})"});
  CHECK(has(e, "in.jsonl:line 3: \"counts\" sum to 3, not a multiple of top_k = 2"));
  e = import_error("length", {kHeader, ok0, R"({"step":0,"micro_batch":0,"layer":7,"rank":1,"counts":[0,0,2]})"});
  CHECK(has(e, "in.jsonl:line 3: \"counts\" must be an array of num_experts = 4 integers, found 3 entries"));
  e = import_error("layer", {kHeader, ok0, R"({"step":0,"micro_batch":0,"layer":8,"rank":1,"counts":[0,0,1,1]})"});
  CHECK(has(e, "in.jsonl:line 3: \"layer\" 8 is not one of the header's layer_ids [7]"));
  e = import_error("rank", {kHeader, ok0, R"({"step":0,"micro_batch":0,"layer":7,"rank":2,"counts":[0,0,1,1]})"});
  CHECK(has(e, "in.jsonl:line 3: \"rank\" 2 is not below num_ranks = 2"));
  e = import_error("lacks", {kHeader, ok0, R"({"step":0,"layer":7,"rank":1,"counts":[0,0,1,1]})"});
  CHECK(has(e, "in.jsonl:line 3: the line lacks \"micro_batch\""));
  e = import_error("duplicate", {kHeader, ok0, ok1, ok0});
  CHECK(has(e, "in.jsonl:line 4: duplicate line for (step 0, micro_batch 0, layer 7, rank 0): already at "));
  CHECK(has(e, "in.jsonl:line 2 (each"));
  e = import_error("missing", {kHeader, ok0, ok1, R"({"step":1,"micro_batch":0,"layer":7,"rank":1,"counts":[0,0,1,1]})"});
  CHECK(has(e, "in.jsonl:line 4: no line for (step 1, micro_batch 0, layer 7, rank 0)"));
  // The same two defects in a file whose lines are out of order (read through the index of lines).
  const std::string later0 = R"({"step":1,"micro_batch":0,"layer":7,"rank":0,"counts":[2,0,0,0]})";
  const std::string later1 = R"({"step":1,"micro_batch":0,"layer":7,"rank":1,"counts":[2,0,0,0]})";
  e = import_error("duplicate_unsorted", {kHeader, later0, ok0, ok1, later1, later0});
  CHECK(has(e, "in.jsonl:line 6: duplicate line for (step 1, micro_batch 0, layer 7, rank 0): already at "));
  CHECK(has(e, "in.jsonl:line 2 (each"));
  e = import_error("missing_unsorted", {kHeader, later1, ok0, ok1});
  CHECK(has(e, "in.jsonl:line 2: no line for (step 1, micro_batch 0, layer 7, rank 0)"));
  CHECK(import_error("fine_unsorted", {kHeader, later1, ok0, ok1, later0}).empty());
  e = import_error("noprov", {R"({"format":"epsim-counts-jsonl","version":1,"num_experts":4,"top_k":2,"num_ranks":2,"layer_ids":[7]})", ok0, ok1});
  CHECK(has(e, "in.jsonl:line 1: the header lacks \"provenance\""));
  e = import_error("version", {R"({"format":"epsim-counts-jsonl","version":2,"num_experts":4,"top_k":2,"num_ranks":2,"layer_ids":[7],"provenance":"x"})"});
  CHECK(has(e, "in.jsonl:line 1: unsupported epsim-counts-jsonl version 2"));
  e = import_error("hkey", {R"({"format":"epsim-counts-jsonl","version":1,"num_experts":4,"top_k":2,"num_ranks":2,"layer_ids":[7],"provenance":"x","ranks":2})"});
  CHECK(has(e, "in.jsonl:line 1: unknown header key \"ranks\""));
  e = import_error("notheader", {ok0, ok1});
  CHECK(has(e, "in.jsonl:line 1: the first line must be the header {\"format\":\"epsim-counts-jsonl\""));
  e = import_error("empty", {});
  CHECK(has(e, "in.jsonl: empty file"));
}

TEST_CASE("counts-jsonl: headers of the files must agree, and a file's header rank binds its lines") {
  const auto dir = epsim::test::scratch_dir("counts_jsonl_files");
  const std::string h0 =
      R"({"format":"epsim-counts-jsonl","version":1,"num_experts":4,"top_k":2,"num_ranks":2,"layer_ids":[7],"rank":0,"provenance":"p"})";
  const std::string h1 =
      R"({"format":"epsim-counts-jsonl","version":1,"num_experts":4,"top_k":2,"num_ranks":2,"layer_ids":[7],"rank":1,"provenance":"p"})";
  const std::string a = write_lines(dir, "r0.jsonl", {h0, R"({"step":0,"micro_batch":0,"layer":7,"rank":0,"counts":[1,1,0,0]})"});
  const std::string out = (dir / "o.eptrace").string();
  const auto error_of = [&](const std::vector<std::string>& files) -> std::string {
    try {
      import_counts_jsonl(files, {}, out, false);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  // Rank 1's file lacks the line: the error names that file.
  const std::string b_empty = write_lines(dir, "r1.jsonl", {h1});
  std::string e = error_of({a, b_empty});
  CHECK(has(e, "r1.jsonl: no line for (step 0, micro_batch 0, layer 7, rank 1)"));
  const std::string b_wrong = write_lines(dir, "r1w.jsonl", {h1, R"({"step":0,"micro_batch":0,"layer":7,"rank":0,"counts":[1,1,0,0]})"});
  e = error_of({a, b_wrong});
  CHECK(has(e, "r1w.jsonl:line 2: \"rank\" 0 differs from the header's rank 1"));
  const std::string b_e8 = write_lines(
      dir, "r1e.jsonl",
      {R"({"format":"epsim-counts-jsonl","version":1,"num_experts":8,"top_k":2,"num_ranks":2,"layer_ids":[7],"rank":1,"provenance":"p"})"});
  e = error_of({a, b_e8});
  CHECK(has(e, "r1e.jsonl:line 1: header mismatch: num_experts 8, but"));
  CHECK(has(e, "r0.jsonl has 4"));
  const std::string b_layers = write_lines(
      dir, "r1l.jsonl",
      {R"({"format":"epsim-counts-jsonl","version":1,"num_experts":4,"top_k":2,"num_ranks":2,"layer_ids":[7,9],"rank":1,"provenance":"p"})"});
  e = error_of({a, b_layers});
  CHECK(has(e, "header mismatch: layer_ids [7,9], but"));
  const std::string b_k4 = write_lines(
      dir, "r1k.jsonl",
      {R"({"format":"epsim-counts-jsonl","version":1,"num_experts":4,"top_k":4,"num_ranks":2,"layer_ids":[7],"rank":1,"provenance":"p"})"});
  e = error_of({a, b_k4});
  CHECK(has(e, "r1k.jsonl:line 1: header mismatch: top_k 4, but"));
  // A header's rank must be below num_ranks: rank 2 of ranks 0 and 1 is the first one past the end.
  const std::string b_r2 = write_lines(
      dir, "r2.jsonl",
      {R"({"format":"epsim-counts-jsonl","version":1,"num_experts":4,"top_k":2,"num_ranks":2,"layer_ids":[7],"rank":2,"provenance":"p"})"});
  e = error_of({a, b_r2});
  CHECK(has(e, "r2.jsonl:line 1: \"rank\" 2 is not below num_ranks = 2"));
  // The same file twice duplicates every line.
  e = error_of({a, a});
  CHECK(has(e, "duplicate line for (step 0, micro_batch 0, layer 7, rank 0)"));
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("counts-jsonl: the command line merges files and exits 2 on bad input") {
  const auto dir = epsim::test::scratch_dir("counts_jsonl_cli");
  auto r = epsim::test::run_epsim("trace import counts-jsonl '" + fixture("counts-rank0.jsonl") + "' '" +
                                      fixture("counts-rank1.jsonl") + "' -o run.eptrace",
                                  dir);
  CHECK(r.status == 0);
  CHECK(has(r.out, "wrote run.eptrace: 4 records, ranks 2, experts 4, top-k 2, layers 2, token ids no"));
  r = epsim::test::run_epsim("trace import counts-jsonl '" + fixture("counts-rank0.jsonl") + "' -o half.eptrace", dir);
  CHECK(r.status == 2);
  CHECK(has(r.err, "counts-rank1.jsonl") == false);
  CHECK(has(r.err, "no line for (step 0, micro_batch 0, layer 5, rank 1)"));
  CHECK_FALSE(fs::exists(dir / "half.eptrace"));
}

TEST_CASE("counts-jsonl: export then import gives back the same records, from one file or one file per rank") {
  const auto dir = epsim::test::scratch_dir("counts_jsonl_roundtrip");
  SyntheticOptions o;
  o.ranks = 4;
  o.experts = 8;
  o.top_k = 2;
  o.layers = 3;
  o.micro_batches = 2;
  o.steps = 2;
  o.tokens_per_rank = 16;
  o.dist = PopularityDist::zipf;
  o.rank_skew = 0.5;
  const std::string trace = (dir / "t.eptrace").string();
  generate_trace(o, trace, false);
  export_counts_jsonl(trace, (dir / "all.jsonl").string(), false);
  export_counts_jsonl(trace, (dir / "r{rank}.jsonl").string(), false);
  // Every rank's file holds 2 steps x 2 micro-batches x 3 layers = 12 lines after its header.
  std::ifstream r3(dir / "r3.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(r3, line)) ++lines;
  CHECK(lines == 13);
  import_counts_jsonl({(dir / "all.jsonl").string()}, {}, (dir / "a.eptrace").string(), false);
  import_counts_jsonl({(dir / "r2.jsonl").string(), (dir / "r0.jsonl").string(), (dir / "r3.jsonl").string(),
                       (dir / "r1.jsonl").string()},
                      {}, (dir / "b.eptrace").string(), false);
  for (const char* name : {"a.eptrace", "b.eptrace"}) {
    TraceReader original(trace), back((dir / name).string());
    CHECK(back.header().provenance == original.header().provenance);
    TraceRecord x, y;
    int records = 0;
    while (original.next(x)) {
      REQUIRE(back.next(y));
      CHECK(std::tie(x.step, x.micro_batch, x.layer) == std::tie(y.step, y.micro_batch, y.layer));
      CHECK(x.counts == y.counts);
      ++records;
    }
    CHECK_FALSE(back.next(y));
    CHECK(records == 12);
  }
}

TEST_CASE("counts-jsonl export: layer ids as the trace names them, each rank's file says its rank, a provenance always") {
  const auto dir = epsim::test::scratch_dir("counts_jsonl_export_ids");
  TraceHeader h;
  h.num_ranks = 2;
  h.num_experts = 2;
  h.top_k = 1;
  h.num_layers = 2;
  h.layer_ids = {4, 9};
  h.source_format = "hand";
  h.provenance = "";  // nothing said: the export names the trace it came from
  h.rank_assignment = "hand";
  const std::string trace = (dir / "t.eptrace").string();
  {
    TraceWriter w(trace, h);
    TraceRecord r;
    r.layer = 1;  // layer id 9
    r.counts = {1, 0, /**/ 0, 2};
    w.write(r);
    w.close();
  }
  export_counts_jsonl(trace, (dir / "r{rank}.jsonl").string(), false);
  std::ifstream in(dir / "r1.jsonl");
  std::string header, line;
  REQUIRE(std::getline(in, header));
  REQUIRE(std::getline(in, line));
  CHECK(header.find("\"rank\":1") != std::string::npos);
  CHECK(header.find("\"provenance\":\"exported from " + trace + "\"") != std::string::npos);
  CHECK(line == R"({"step":0,"micro_batch":0,"layer":9,"rank":1,"counts":[0,2]})");
  // And it imports back as the same record.
  import_counts_jsonl({(dir / "r0.jsonl").string(), (dir / "r1.jsonl").string()}, {}, (dir / "b.eptrace").string(),
                      false);
  TraceReader back((dir / "b.eptrace").string());
  CHECK(back.header().layer_ids == std::vector<std::uint32_t>{4, 9});
  TraceRecord y;
  REQUIRE(back.next(y));
  CHECK(y.layer == 1);
  CHECK(y.counts == std::vector<std::uint32_t>{1, 0, 0, 2});
}
