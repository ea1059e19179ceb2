// Rank remapping: merging sums rows, splitting shares counts evenly (counts only) or slices tokens.
#include "traces/format/rank_remap.hpp"

#include <doctest/doctest.h>

#include <vector>

#include "sim/core/input_error.hpp"
#include "traces/format/trace_check.hpp"

using namespace epsim;

namespace {

TraceHeader header(std::uint32_t ranks, std::uint32_t experts, std::uint32_t top_k, bool token_ids) {
  TraceHeader h;
  h.num_ranks = ranks;
  h.num_experts = experts;
  h.top_k = top_k;
  h.num_layers = 1;
  h.layer_ids = {0};
  h.has_token_ids = token_ids;
  h.rank_assignment = "test";
  return h;
}

std::vector<std::uint64_t> expert_totals(const TraceRecord& r, std::uint32_t experts) {
  std::vector<std::uint64_t> t(experts, 0);
  for (std::size_t i = 0; i < r.counts.size(); ++i) t[i % experts] += r.counts[i];
  return t;
}

}  // namespace

TEST_CASE("merging ranks sums rows (hand example)") {
  const TraceHeader h = header(4, 3, 1, false);
  TraceRecord r;
  r.step = 1;
  r.micro_batch = 2;
  r.counts = {1, 2, 3, /**/ 4, 5, 6, /**/ 0, 1, 0, /**/ 2, 2, 2};
  const TraceRecord m = remap_ranks(r, h, 2);
  CHECK(m.step == 1);
  CHECK(m.micro_batch == 2);
  CHECK(m.counts == std::vector<std::uint32_t>{5, 7, 9, /**/ 2, 3, 2});
  CHECK(remap_ranks(r, h, 1).counts == std::vector<std::uint32_t>{7, 10, 11});
  CHECK(remap_ranks(r, h, 4).counts == r.counts);
  CHECK(remap_header(h, 2).num_ranks == 2);
}

TEST_CASE("splitting ranks shares every count evenly, remainders to the lowest new rank") {
  const TraceHeader h = header(2, 3, 1, false);
  TraceRecord r;
  r.counts = {1, 2, 7, /**/ 4, 0, 5};
  const TraceRecord s = remap_ranks(r, h, 6);  // each rank into 3
  CHECK(s.counts == std::vector<std::uint32_t>{1, 1, 3, /**/ 0, 1, 2, /**/ 0, 0, 2,
                                               /**/ 2, 0, 2, /**/ 1, 0, 2, /**/ 1, 0, 1});
  CHECK(expert_totals(s, 3) == expert_totals(r, 3));
  std::vector<std::uint32_t> scratch;
  TraceHeader h6 = remap_header(h, 6);
  CHECK(check_trace_record(s, h6, record_num_tokens(s, h6), scratch).empty());
}

TEST_CASE("splitting with token ids slices each rank's tokens and recomputes counts") {
  const TraceHeader h = header(2, 4, 2, true);
  TraceRecord r;
  // rank 0: tokens 0,1,2 ; rank 1: tokens 3,4 (interleaved in the arrays on purpose)
  r.token_src_rank = {0, 1, 0, 1, 0};
  r.token_experts = {0, 1, /**/ 2, 3, /**/ 0, 2, /**/ 1, 3, /**/ 1, 2};
  r.counts = {2, 2, 2, 0, /**/ 0, 1, 1, 2};
  std::vector<std::uint32_t> scratch;
  REQUIRE(check_trace_record(r, h, 5, scratch).empty());
  const TraceRecord s = remap_ranks(r, h, 4);
  // rank 0's 3 tokens -> new ranks 0,0,1 (floor(k*2/3)); rank 1's 2 tokens -> new ranks 2,3.
  CHECK(s.token_src_rank == std::vector<std::uint32_t>{0, 2, 0, 3, 1});
  CHECK(s.token_experts == r.token_experts);
  CHECK(s.counts == std::vector<std::uint32_t>{2, 1, 1, 0, /**/ 0, 1, 1, 0, /**/ 0, 0, 1, 1, /**/ 0, 1, 0, 1});
  const TraceHeader h4 = remap_header(h, 4);
  CHECK(check_trace_record(s, h4, 5, scratch).empty());
  CHECK(expert_totals(s, 4) == expert_totals(r, 4));

  const TraceRecord m = remap_ranks(r, h, 1);
  CHECK(m.token_src_rank == std::vector<std::uint32_t>{0, 0, 0, 0, 0});
  CHECK(m.counts == std::vector<std::uint32_t>{2, 3, 3, 2});
}

TEST_CASE("ratios that are neither multiple nor divisor are refused") {
  const TraceHeader h = header(4, 3, 1, false);
  TraceRecord r;
  r.counts.assign(12, 1);
  CHECK_THROWS_WITH_AS(remap_ranks(r, h, 3), doctest::Contains("multiple or a divisor"), InputError);
  CHECK_THROWS_AS(remap_ranks(r, h, 0), InputError);
  CHECK_THROWS_AS(remap_header(h, 6), InputError);
  CHECK(ranks_remappable(16, 8));
  CHECK(ranks_remappable(8, 16));
  CHECK_FALSE(ranks_remappable(16, 12));
}

TEST_CASE("the remap error names the trace file when given") {
  const TraceHeader h = header(4, 3, 1, false);
  TraceRecord r;
  r.counts.assign(12, 1);
  CHECK_THROWS_WITH_AS(remap_ranks(r, h, 3, "x.eptrace"), doctest::Contains("x.eptrace:header: cannot remap"),
                       InputError);
}
