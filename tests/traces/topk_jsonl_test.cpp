// Generic top-k JSON lines importer.
#include "traces/import/topk_jsonl.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/trace_reader.hpp"

namespace fs = std::filesystem;
using namespace epsim;

namespace {

std::string write_lines(const fs::path& dir, const std::vector<std::string>& lines) {
  const std::string path = (dir / "in.jsonl").string();
  std::ofstream out(path);
  for (const std::string& l : lines) out << l << "\n";
  return path;
}

const char* kHeader = R"({"format":"epsim-topk-jsonl","version":1,"num_experts":4,"top_k":2})";

}  // namespace

TEST_CASE("topk-jsonl: contiguous slices when src_rank is absent") {
  const auto dir = epsim::test::scratch_dir("jsonl_slices");
  const std::string in =
      write_lines(dir, {
                           kHeader,
                           R"({"step":0,"micro_batch":0,"layer":2,"experts":[0,1]})",
                           R"({"step":0,"micro_batch":0,"layer":2,"experts":[1,2]})",
                           R"({"step":0,"micro_batch":0,"layer":2,"experts":[3,0]})",
                           "",
                           R"({"step":0,"micro_batch":0,"layer":6,"experts":[2,3],"scores":[0.5,0.1]})",
                           R"({"step":0,"micro_batch":1,"layer":2,"experts":[0,3]})",
                       });
  const std::string out = (dir / "out.eptrace").string();
  import_topk_jsonl(in, 2, out, false);
  TraceReader reader(out);
  const TraceHeader& h = reader.header();
  CHECK(h.layer_ids == std::vector<std::uint32_t>{2, 6});
  CHECK(h.num_ranks == 2);
  CHECK(h.has_token_ids);
  CHECK(h.source_format == "topk-jsonl");
  TraceRecord r;
  REQUIRE(reader.next(r));  // 3 tokens, R=2 -> ranks 0, 0, 1
  CHECK(r.layer == 0);
  CHECK(r.token_src_rank == std::vector<std::uint32_t>{0, 0, 1});
  CHECK(r.counts == std::vector<std::uint32_t>{1, 2, 1, 0, /**/ 1, 0, 0, 1});
  REQUIRE(reader.next(r));  // 1 token -> rank 0
  CHECK(r.layer == 1);
  CHECK(r.counts == std::vector<std::uint32_t>{0, 0, 1, 1, /**/ 0, 0, 0, 0});
  REQUIRE(reader.next(r));
  CHECK(r.micro_batch == 1);
  CHECK(r.layer == 0);
  CHECK_FALSE(reader.next(r));
}

TEST_CASE("topk-jsonl: recorded src_rank and header num_ranks and layer_ids") {
  const auto dir = epsim::test::scratch_dir("jsonl_src");
  const std::string in = write_lines(
      dir, {R"({"format":"epsim-topk-jsonl","version":1,"num_experts":4,"top_k":1,"num_ranks":3,"layer_ids":[5,1]})",
            R"({"layer":5,"experts":[3],"src_rank":2})", R"({"layer":5,"experts":[3],"src_rank":0})",
            R"({"layer":1,"experts":[1],"src_rank":1})"});
  const std::string out = (dir / "out.eptrace").string();
  import_topk_jsonl(in, 0, out, false);
  TraceReader reader(out);
  CHECK(reader.header().layer_ids == std::vector<std::uint32_t>{5, 1});
  CHECK(reader.header().rank_assignment.find("recorded") != std::string::npos);
  TraceRecord r;
  REQUIRE(reader.next(r));
  CHECK(r.token_src_rank == std::vector<std::uint32_t>{2, 0});
  CHECK(r.counts == std::vector<std::uint32_t>{0, 0, 0, 1, /**/ 0, 0, 0, 0, /**/ 0, 0, 0, 1});
  REQUIRE(reader.next(r));
  CHECK(r.layer == 1);
  CHECK_THROWS_WITH_AS(import_topk_jsonl(in, 4, (dir / "x.eptrace").string(), false),
                       doctest::Contains("differs from --ranks"), InputError);
}

TEST_CASE("topk-jsonl: errors name the file and the line number") {
  const auto dir = epsim::test::scratch_dir("jsonl_bad");
  const std::string out = (dir / "out.eptrace").string();
  struct Case {
    std::vector<std::string> lines;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {{kHeader, R"({"layer":0,"experts":[0,1]})", R"({"layer":0,"experts":[0,1])"}, "in.jsonl:line 3, column"},
      {{kHeader, R"({"layer":0,"experts":[0,1]})", "", R"({"layer":0,"experts":[0,7]})"},
       "in.jsonl:line 4: expert id 7"},
      {{kHeader, R"({"layer":0,"experts":[1,1]})"}, "in.jsonl:line 2: expert 1 appears twice"},
      {{kHeader, R"({"layer":0,"experts":[1]})"}, "in.jsonl:line 2: \"experts\" has 1 ids"},
      {{kHeader, R"({"experts":[0,1]})"}, "in.jsonl:line 2: the token lacks \"layer\""},
      {{kHeader, R"({"layer":1,"experts":[0,1]})", R"({"layer":0,"experts":[0,1]})"}, "in.jsonl:line 3: token of"},
      {{kHeader, R"({"layer":0,"experts":[0,1]})", R"({"layer":1,"experts":[0,1]})", R"({"layer":0,"experts":[0,1]})"},
       "in.jsonl:line 4"},
      {{kHeader, R"({"layer":0,"experts":[0,1],"src_rank":0})", R"({"layer":0,"experts":[0,1]})"},
       "in.jsonl:line 3: \"src_rank\" must be given on every token or on none"},
      {{kHeader, R"({"layer":0,"experts":[0,1],"src_rank":5})"}, "in.jsonl:line 2: src_rank 5"},
      // The first rank past the end (ranks 0 and 1 with --ranks 2).
      {{kHeader, R"({"layer":0,"experts":[0,1],"src_rank":2})"}, "in.jsonl:line 2: src_rank 2 is not below the number of ranks 2"},
      {{R"({"format":"epsim-topk-jsonl","version":1,"num_experts":4,"top_k":2,"layer_ids":[3,1,3]})",
        R"({"layer":3,"experts":[0,1]})"},
       "in.jsonl:line 1: \"layer_ids\" repeats an id"},
      {{R"({"format":"other"})"}, "in.jsonl:line 1"},
      {{kHeader}, "no token lines"},
      {{R"({"format":"epsim-topk-jsonl","version":2,"num_experts":4,"top_k":2})"}, "version"},
      {{R"({"format":"epsim-topk-jsonl","version":1,"num_experts":4,"top_k":2,"layer_ids":[1]})",
        R"({"layer":0,"experts":[0,1]})"},
       "in.jsonl:line 2: layer 0 is not in the header's layer_ids"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.expect);
    const std::string in = write_lines(dir, c.lines);
    CHECK_THROWS_WITH_AS(import_topk_jsonl(in, 2, out, false), doctest::Contains(c.expect), InputError);
    CHECK_FALSE(fs::exists(out));
    CHECK(epsim::test::leftovers(dir).empty());
  }
  const std::string in = write_lines(dir, {kHeader, R"({"layer":0,"experts":[0,1]})"});
  CHECK_THROWS_WITH_AS(import_topk_jsonl(in, 0, out, false), doctest::Contains("--ranks"), InputError);
}

TEST_CASE("topk-jsonl: a deeply nested value is refused at its line without recursing over it") {
  // 100000 nested arrays as an expert id: dumping it into the message overflowed the stack.
  const auto dir = epsim::test::scratch_dir("jsonl_deep");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string in = write_lines(
      dir, {R"({"format":"epsim-topk-jsonl","version":1,"num_experts":4,"top_k":1})", R"({"layer":0,"experts":[0]})",
            R"({"layer":0,"experts":[)" + deep + "]}"});
  const std::string out = (dir / "out.eptrace").string();
  // The 64th array inside the line's object is the 65th level: column 22 of `{"layer":0,"experts":[`
  // opens level 2, so level 65 opens at column 22 + 63 = 85.
  CHECK_THROWS_WITH_AS(import_topk_jsonl(in, 2, out, false),
                       doctest::Contains("in.jsonl:line 3, column 85: invalid JSON: arrays and objects nested deeper "
                                         "than 64 levels"),
                       InputError);
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("topk-jsonl: numbers beyond a double and fractions are refused with line and key") {
  const auto dir = epsim::test::scratch_dir("jsonl_numbers");
  const std::string out = (dir / "out.eptrace").string();
  struct Case {
    std::string line;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {R"({"layer":0,"experts":[1e400,1]})", "in.jsonl:line 2, column 27: invalid JSON: number overflow"},
      {R"({"layer":0.5,"experts":[0,1]})", "in.jsonl:line 2: \"layer\" must be an integer"},
      {R"({"layer":0,"step":1e300,"experts":[0,1]})", "in.jsonl:line 2: \"step\" must be an integer"},
      {R"({"layer":0,"experts":[0,1.5]})", "in.jsonl:line 2: expert id 1.5 is not an integer"},
      {R"({"layer":0,"experts":[0,-1e300]})", "in.jsonl:line 2: expert id -1e+300 is not an integer"},
      {R"({"layer":0,"experts":[0,"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"]})",
       "expert id \"abcdefghijklmnopqrstuvwxyzabcdefghijklmn\"... is not"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.expect);
    const std::string in = write_lines(dir, {kHeader, c.line});
    CHECK_THROWS_WITH_AS(import_topk_jsonl(in, 2, out, false), doctest::Contains(c.expect), InputError);
    CHECK_FALSE(fs::exists(out));
  }
  // An integral floating-point value is the integer it spells.
  const std::string in = write_lines(dir, {kHeader, R"({"layer":2.0,"experts":[1.0,3]})"});
  import_topk_jsonl(in, 1, out, false);
  TraceReader reader(out);
  CHECK(reader.header().layer_ids == std::vector<std::uint32_t>{2});
  TraceRecord r;
  REQUIRE(reader.next(r));
  CHECK(r.counts == std::vector<std::uint32_t>{0, 1, 0, 1});
}

TEST_CASE("topk-jsonl: a line of blanks is skipped, and the header's licence reaches the provenance") {
  const auto dir = epsim::test::scratch_dir("jsonl_blank_licence");
  const std::string in = write_lines(
      dir, {R"({"format":"epsim-topk-jsonl","version":1,"num_experts":4,"top_k":2,"provenance":"a run","licence":"CC-BY-4.0"})",
            R"({"layer":0,"experts":[0,1]})", " \t ", R"({"layer":0,"experts":[2,3]})"});
  const std::string out = (dir / "out.eptrace").string();
  import_topk_jsonl(in, 2, out, false);
  TraceReader reader(out);
  CHECK(reader.header().provenance.find("a run") != std::string::npos);
  CHECK(reader.header().provenance.find("licence: CC-BY-4.0") != std::string::npos);
  TraceRecord r;
  REQUIRE(reader.next(r));
  CHECK(r.token_experts == std::vector<std::uint16_t>{0, 1, 2, 3});  // both tokens, the blank line between
  CHECK_FALSE(reader.next(r));
}
