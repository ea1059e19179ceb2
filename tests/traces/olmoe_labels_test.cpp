// The per-layer profile importer (olmoe-counts) takes its labels from the file or the user, never
// from itself, and accepts other key names and fractional counts.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/test_paths.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/import/olmoe_counts.hpp"

using namespace epsim;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

TEST_CASE("olmoe-counts: provenance and licence from the file or the options, nothing hard-coded") {
  const auto dir = epsim::test::scratch_dir("olmoe_labels");
  const std::string fixture = (epsim::test::source_dir() / "tests/fixtures/olmoe-tiny.counts.json").string();
  OlmoeImportOptions o;
  o.ranks = 2;
  o.tokens_per_rank = 8;
  const std::string a = (dir / "a.eptrace").string();
  import_olmoe_counts(fixture, o, a, false);
  const std::string pa = TraceReader(a).header().provenance;
  CHECK(starts_with(pa, "model 'none'; derived from 'hand-made test fixture (not real data)'; used as a popularity "
                        "profile, micro-batches sampled by: epsim trace import olmoe-counts olmoe-tiny.counts.json"));
  CHECK(pa.find("OLMoE") == std::string::npos);
  CHECK(pa.find("Apache") == std::string::npos);

  o.labels.provenance = "router counts of my run 4";
  o.labels.licence = "CC-BY-4.0";
  const std::string b = (dir / "b.eptrace").string();
  import_olmoe_counts(fixture, o, b, false);
  CHECK(starts_with(TraceReader(b).header().provenance,
                    "router counts of my run 4; licence: CC-BY-4.0; used as a popularity profile"));
}

TEST_CASE("olmoe-counts: top_k and layer_ids as key names, fractional counts as weights, labels in the file") {
  const auto dir = epsim::test::scratch_dir("olmoe_keys");
  const std::string in = (dir / "avg.json").string();
  // Layer 9 has only experts 1 and 2: every top-2 token takes both, whatever their weights.
  std::ofstream(in) << R"({"layer_ids": [9], "top_k": 2, "counts": [[0, 0.25, 1.75, 0]],)"
                       R"( "provenance": "averaged loads", "licence": "MIT"})";
  OlmoeImportOptions o;
  o.ranks = 1;
  o.tokens_per_rank = 5;
  const std::string out = (dir / "o.eptrace").string();
  import_olmoe_counts(in, o, out, false);
  TraceReader reader(out);
  CHECK(reader.header().num_experts == 4);  // from the rows
  CHECK(reader.header().top_k == 2);
  CHECK(reader.header().layer_ids == std::vector<std::uint32_t>{9});
  CHECK(starts_with(reader.header().provenance, "averaged loads; licence: MIT; used as a popularity profile"));
  TraceRecord r;
  REQUIRE(reader.next(r));
  CHECK(r.counts == std::vector<std::uint32_t>{0, 5, 5, 0});
}
