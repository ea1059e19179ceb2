// topk-jsonl without a header line and with other field names (a routing dump of another tool).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/import/topk_jsonl.hpp"

using namespace epsim;

namespace {

std::string fixture() { return (epsim::test::source_dir() / "tests/fixtures/import/routing-topk-ids.jsonl").string(); }

}  // namespace

TEST_CASE("topk-jsonl: no header line, fields mapped by name") {
  const auto dir = epsim::test::scratch_dir("topk_fields");
  TopkJsonlOptions o;
  o.ranks = 2;
  o.experts = 4;
  o.top_k = 2;
  o.field_layer = "layer_id";
  o.field_experts = "topk_ids";
  o.field_rank = "rank";
  o.labels.provenance = "router dump of run 3";
  const std::string out = (dir / "t.eptrace").string();
  import_topk_jsonl(fixture(), o, out, false);
  TraceReader reader(out);
  const TraceHeader& h = reader.header();
  CHECK(h.layer_ids == std::vector<std::uint32_t>{2, 6});
  CHECK(h.provenance == "router dump of run 3; imported by epsim trace import topk-jsonl from routing-topk-ids.jsonl");
  CHECK(h.rank_assignment == "recorded: every token carries its source rank (rank)");
  TraceRecord r;
  REQUIRE(reader.next(r));  // rank 0: [3 1]; rank 1: [1 0], [2 3]
  CHECK(r.token_src_rank == std::vector<std::uint32_t>{1, 0, 1});
  CHECK(r.counts == std::vector<std::uint32_t>{0, 1, 0, 1, /**/ 1, 1, 1, 1});
  REQUIRE(reader.next(r));
  CHECK(r.counts == std::vector<std::uint32_t>{1, 0, 1, 0, /**/ 0, 0, 0, 0});
  CHECK_FALSE(reader.next(r));

  // Without --experts and --top-k a file without header is refused at line 1.
  TopkJsonlOptions bare = o;
  bare.experts = 0;
  CHECK_THROWS_WITH_AS(import_topk_jsonl(fixture(), bare, (dir / "b.eptrace").string(), false),
                       doctest::Contains("routing-topk-ids.jsonl:line 1: line 1 is not an epsim-topk-jsonl header"),
                       InputError);
  // The default field names do not find "topk_ids".
  TopkJsonlOptions plain = o;
  plain.field_experts = "experts";
  CHECK_THROWS_WITH_AS(import_topk_jsonl(fixture(), plain, (dir / "c.eptrace").string(), false),
                       doctest::Contains("line 1: the token lacks \"experts\""), InputError);
}

TEST_CASE("topk-jsonl: field options on the command line") {
  const auto dir = epsim::test::scratch_dir("topk_fields_cli");
  const auto r = epsim::test::run_epsim("trace import topk-jsonl '" + fixture() +
                                            "' --experts 4 --top-k 2 --field-layer layer_id --field-experts topk_ids "
                                            "--field-rank rank --ranks 2 -o t.eptrace",
                                        dir);
  CHECK(r.status == 0);
  CHECK(r.out == "wrote t.eptrace: 2 records, ranks 2, experts 4, top-k 2, layers 2, token ids yes\n");
}
