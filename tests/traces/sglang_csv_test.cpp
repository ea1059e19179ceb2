// SGLang expert-distribution per-rank CSV importer.
#include "traces/import/sglang_csv.hpp"

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

std::string fixture(const char* name) { return (epsim::test::source_dir() / "tests/fixtures/import" / name).string(); }

}  // namespace

TEST_CASE("sglang-csv: one file per rank, the rank from the name, absent experts 0") {
  const auto dir = epsim::test::scratch_dir("sglang_csv");
  SglangCsvOptions o;
  o.experts = 4;
  o.top_k = 2;
  o.labels.licence = "Apache-2.0";
  const std::string out = (dir / "s.eptrace").string();
  // Given rank 1 first: the names decide.
  import_sglang_csv({fixture("expert_distribution_rank1_timestamp1744347750.01.csv"),
                     fixture("expert_distribution_rank0_timestamp1744347750.37.csv")},
                    o, out, false);
  TraceReader reader(out);
  const TraceHeader& h = reader.header();
  CHECK(h.num_ranks == 2);
  CHECK(h.layer_ids == std::vector<std::uint32_t>{3, 5});
  CHECK(h.source_format == "sglang-expert-distribution-csv");
  CHECK(h.provenance ==
        "SGLang expert-distribution dump expert_distribution_rank1_timestamp1744347750.01.csv and 1 more; licence: "
        "Apache-2.0");
  TraceRecord r;
  REQUIRE(reader.next(r));
  CHECK(r.counts == std::vector<std::uint32_t>{2, 0, 0, 2, /**/ 0, 0, 4, 0});
  REQUIRE(reader.next(r));
  CHECK(r.counts == std::vector<std::uint32_t>{0, 4, 0, 0, /**/ 1, 2, 0, 1});
  CHECK_FALSE(reader.next(r));
}

TEST_CASE("sglang-csv: bad rows name the file and line") {
  const auto dir = epsim::test::scratch_dir("sglang_csv_bad");
  SglangCsvOptions o;
  o.experts = 4;
  o.top_k = 2;
  const std::string in = (dir / "dump_rank0.csv").string(), out = (dir / "o.eptrace").string();
  const auto error_of = [&](const std::string& text) -> std::string {
    { std::ofstream(in) << text; }
    try {
      import_sglang_csv({in}, o, out, false);
    } catch (const InputError& e) {
      CHECK_FALSE(fs::exists(out));
      return e.what();
    }
    return "";
  };
  CHECK(error_of("layer_id,expert_id,count\n3,4,2\n").find("dump_rank0.csv:line 2: expert_id 4 is above 3") !=
        std::string::npos);
  CHECK(error_of("layer_id,expert_id,count\n3,1,2\n3,1,2\n").find("dump_rank0.csv:line 3: layer 3, expert 1 again (first at line 2)") !=
        std::string::npos);
  CHECK(error_of("layer_id,expert_id,count\n3,1,-2\n").find("dump_rank0.csv:line 2: count '-2' is not a non-negative integer") !=
        std::string::npos);
  CHECK(error_of("layer_id,expert_id,count\n3,1,3\n").find("dump_rank0.csv:layer 3: counts sum to 3, not a multiple of --top-k 2") !=
        std::string::npos);
  // Each count alone a multiple of top-k 2, their sum (2 + 1 + 2 = 5) not: the sum is what is checked.
  CHECK(error_of("layer_id,expert_id,count\n3,0,2\n3,1,1\n3,2,2\n").find("dump_rank0.csv:layer 3: counts sum to 5, not a multiple of --top-k 2") !=
        std::string::npos);
  CHECK(error_of("layer,expert,count\n").find("dump_rank0.csv:line 1: the first line must be the header") !=
        std::string::npos);
}

TEST_CASE("sglang-csv: the rank is the number after the last 'rank' of the name, blank lines are skipped") {
  const auto dir = epsim::test::scratch_dir("sglang_csv_names");
  SglangCsvOptions o;
  o.experts = 2;
  o.top_k = 1;
  // "ranking" comes first in both names: the rank is the number after the last "rank".
  const std::string a = (dir / "ranking_rank1.csv").string(), b = (dir / "ranking_rank0.csv").string();
  { std::ofstream(a) << "layer_id,expert_id,count\n\n7,0,5\n\n"; }
  { std::ofstream(b) << "layer_id,expert_id,count\n7,1,3\n"; }
  const std::string out = (dir / "s.eptrace").string();
  import_sglang_csv({a, b}, o, out, false);
  TraceReader reader(out);
  CHECK(reader.header().rank_assignment == "recorded: one file per source rank, the rank taken from the file name");
  TraceRecord r;
  REQUIRE(reader.next(r));
  CHECK(r.counts == std::vector<std::uint32_t>{0, 3, /**/ 5, 0});  // rank 0 from the second file, rank 1 from the first

  // A name with "rank" and no number after it: the ranks are the order the files were given.
  const std::string c = (dir / "rank_a.csv").string(), d = (dir / "rank_b.csv").string();
  { std::ofstream(c) << "layer_id,expert_id,count\n7,0,5\n"; }
  { std::ofstream(d) << "layer_id,expert_id,count\n7,1,3\n"; }
  const std::string out2 = (dir / "t.eptrace").string();
  import_sglang_csv({c, d}, o, out2, false);
  TraceReader reader2(out2);
  CHECK(reader2.header().rank_assignment == "recorded: one file per source rank, in the order the files were given");
  REQUIRE(reader2.next(r));
  CHECK(r.counts == std::vector<std::uint32_t>{5, 0, /**/ 0, 3});
}
