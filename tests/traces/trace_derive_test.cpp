// Derived traces (trace_derive.hpp): another expert count, top-k or rank count from one recording,
// against counts worked out by hand from the documented rules.
#include "traces/format/trace_derive.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/format/trace_writer.hpp"

using namespace epsim;

namespace {

// 2 ranks, 4 experts, top-2: rank 0 has 3 tokens (counts 3, 1, 0, 2), rank 1 has 2 (1, 1, 1, 1).
TraceHeader small_header() {
  TraceHeader h;
  h.num_ranks = 2;
  h.num_experts = 4;
  h.top_k = 2;
  h.num_layers = 1;
  h.layer_ids = {7};
  h.source_format = "synthetic";
  h.provenance = "hand example";
  h.rank_assignment = "test";
  return h;
}

TraceRecord small_record(std::uint32_t micro_batch = 0) {
  TraceRecord r;
  r.micro_batch = micro_batch;
  r.counts = {3, 1, 0, 2, /**/ 1, 1, 1, 1};
  return r;
}

std::vector<std::uint32_t> derived(const DeriveOptions& o) {
  return derive_record(small_record(), small_header(), o, "t.eptrace").counts;
}

}  // namespace

TEST_CASE("derive: splitting experts shares each count as evenly as possible, the remainder to the lower ones") {
  DeriveOptions o;
  o.experts = 8;
  // Expert 0's 3 on rank 0 become 2 + 1, expert 3's 2 become 1 + 1; the row still sums to 3 x 2.
  CHECK(derived(o) == std::vector<std::uint32_t>{2, 1, 1, 0, 0, 0, 1, 1, /**/ 1, 0, 1, 0, 1, 0, 1, 0});
  CHECK(derive_header(small_header(), o, "t").num_experts == 8);
}

TEST_CASE("derive: merging experts sums them") {
  DeriveOptions o;
  o.experts = 2;
  CHECK(derived(o) == std::vector<std::uint32_t>{4, 2, /**/ 2, 2});
}

TEST_CASE("derive: a smaller top-k keeps each rank's tokens and its experts' shares (largest remainder)") {
  DeriveOptions o;
  o.top_k = 1;
  // Rank 0: 3 tokens, shares 3/6, 1/6, 0, 2/6 of 3 -> 1.5, 0.5, 0, 1: floors 1, 0, 0, 1 and the last
  // one to expert 0 (remainders 0.5 and 0.5 tie: the lower expert). Rank 1: 2 tokens, 0.5 each: experts 0, 1.
  CHECK(derived(o) == std::vector<std::uint32_t>{2, 0, 0, 1, /**/ 1, 1, 0, 0});
}

TEST_CASE("derive: equal remainders go to the lower experts, over 40 of them") {
  // One rank, 40 experts, top-2: 20 tokens, one assignment each expert. Top-1 keeps 20 assignments,
  // 0.5 for every expert: the 20 equal remainders go to experts 0 to 19 (more than a sort keeps in
  // order by insertion, stable or not).
  TraceHeader h = small_header();
  h.num_ranks = 1;
  h.num_experts = 40;
  TraceRecord r;
  r.counts.assign(40, 1);
  DeriveOptions o;
  o.top_k = 1;
  std::vector<std::uint32_t> lower(40, 0);
  for (int e = 0; e < 20; ++e) lower[static_cast<std::size_t>(e)] = 1;
  CHECK(derive_record(r, h, o, "t.eptrace").counts == lower);
}

TEST_CASE("derive: a larger top-k never gives an expert more assignments than the rank has tokens") {
  DeriveOptions o;
  o.top_k = 4;
  // Top-4 of 4 experts: every token takes every expert, whatever the shares were.
  CHECK(derived(o) == std::vector<std::uint32_t>{3, 3, 3, 3, /**/ 2, 2, 2, 2});
  o.top_k = 3;
  // Rank 0: 9 assignments; expert 0's share (4.5) and expert 3's (3) reach the cap of 3 tokens; the
  // other 3 go to expert 1 (weight 1; expert 2 has none), also at the cap.
  CHECK(derived(o) == std::vector<std::uint32_t>{3, 3, 0, 3, /**/ 2, 2, 1, 1});
}

TEST_CASE("derive: ranks are remapped after experts and top-k") {
  DeriveOptions o;
  o.experts = 2;
  o.ranks = 4;
  // Merged rows (4, 2) and (2, 2), each split over two ranks evenly.
  CHECK(derived(o) == std::vector<std::uint32_t>{2, 1, /**/ 2, 1, /**/ 1, 1, /**/ 1, 1});
}

TEST_CASE("derive: unsupported targets name the trace and the rule") {
  DeriveOptions o;
  o.experts = 3;
  CHECK_THROWS_WITH_AS(derive_header(small_header(), o, "t.eptrace"),
                       doctest::Contains("--experts 3 is neither a multiple nor a divisor of the trace's 4 experts"),
                       InputError);
  o.experts = 0;
  o.top_k = 5;
  CHECK_THROWS_WITH_AS(derive_header(small_header(), o, "t.eptrace"), doctest::Contains("--top-k 5 exceeds the 4 experts"),
                       InputError);
}

TEST_CASE("derive: the command streams every record, keeps the micro-batch order and records the rule") {
  const std::filesystem::path dir = test::scratch_dir("derive-cli");
  const std::string in = (dir / "in.eptrace").string();
  {
    TraceWriter w(in, small_header());
    for (std::uint32_t mb = 0; mb < 3; ++mb) w.write(small_record(mb));
    w.close();
  }
  const test::CliResult r = test::run_epsim("trace derive in.eptrace --experts 8 --top-k 1 -o out.eptrace", dir);
  REQUIRE(r.status == 0);
  TraceReader reader((dir / "out.eptrace").string());
  CHECK(reader.header().num_experts == 8);
  CHECK(reader.header().top_k == 1);
  CHECK(reader.header().provenance.find("derived by epsim trace derive: experts split 4 -> 8; top-k 2 -> 1") !=
        std::string::npos);
  TraceRecord rec;
  std::uint32_t mb = 0;
  while (reader.next(rec)) {
    CHECK(rec.micro_batch == mb++);
    std::uint64_t rank0 = 0;
    for (int e = 0; e < 8; ++e) rank0 += rec.counts[static_cast<std::size_t>(e)];
    CHECK(rank0 == 3);  // rank 0 keeps its 3 tokens, now one assignment each
  }
  CHECK(mb == 3);
  // An existing output is not replaced without --force, and a bad target leaves nothing behind.
  CHECK(test::run_epsim("trace derive in.eptrace --experts 8 -o out.eptrace", dir).status == 2);
  const test::CliResult bad = test::run_epsim("trace derive in.eptrace --experts 3 -o bad.eptrace", dir);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("in.eptrace") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "bad.eptrace"));
}
