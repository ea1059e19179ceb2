// OLMoE counts importer: deterministic sampling from a popularity profile.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/import/olmoe_counts.hpp"
#include "traces/text/expert_load.hpp"

namespace fs = std::filesystem;
using namespace epsim;

namespace {

std::string fixture() { return (epsim::test::source_dir() / "tests/fixtures/olmoe-tiny.counts.json").string(); }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("olmoe-counts: same seed same bytes, other seed other bytes, totals R*T*K") {
  const auto dir = epsim::test::scratch_dir("olmoe_seed");
  OlmoeImportOptions o;
  o.ranks = 4;
  o.tokens_per_rank = 100;
  o.micro_batches = 3;
  o.seed = 7;
  const std::string a = (dir / "a.eptrace").string(), b = (dir / "b.eptrace").string(),
                    c = (dir / "c.eptrace").string();
  import_olmoe_counts(fixture(), o, a, false);
  import_olmoe_counts(fixture(), o, b, false);
  o.seed = 8;
  import_olmoe_counts(fixture(), o, c, false);
  CHECK(slurp(a) == slurp(b));
  CHECK(slurp(a) != slurp(c));

  TraceReader reader(a);
  const TraceHeader& h = reader.header();
  CHECK(h.num_ranks == 4);
  CHECK(h.num_experts == 4);
  CHECK(h.top_k == 2);
  CHECK(h.layer_ids == std::vector<std::uint32_t>{0, 7});
  CHECK_FALSE(h.has_token_ids);
  CHECK(h.source_format == "olmoe-counts");
  TraceRecord r;
  int records = 0;
  while (reader.next(r)) {
    ++records;
    std::uint64_t total = 0;
    for (std::uint32_t s = 0; s < 4; ++s) {
      std::uint64_t row = 0;
      for (std::uint32_t e = 0; e < 4; ++e) row += r.count(s, e, 4);
      CHECK(row == 100 * 2);
      total += row;
    }
    CHECK(total == 4 * 100 * 2);
    if (r.layer == 1)  // layer 7 has exactly two experts with counts: every token picks both
      for (std::uint32_t s = 0; s < 4; ++s)
        CHECK(std::vector<std::uint32_t>(r.counts.begin() + 4 * s, r.counts.begin() + 4 * s + 4) ==
              std::vector<std::uint32_t>{0, 100, 100, 0});
  }
  CHECK(records == 3 * 2);
}

TEST_CASE("olmoe-counts: each micro-batch is its own sample, and --token-ids is stated in the provenance") {
  // Layer 0 of the fixture has more than top-k experts with counts: three micro-batches of 400
  // sampled tokens each drawing the same counts would mean one sample repeated, not three.
  const auto dir = epsim::test::scratch_dir("olmoe_micro_batches");
  OlmoeImportOptions o;
  o.ranks = 4;
  o.tokens_per_rank = 100;
  o.micro_batches = 3;
  o.seed = 7;
  o.token_ids = true;
  const std::string a = (dir / "a.eptrace").string();
  import_olmoe_counts(fixture(), o, a, false);
  TraceReader reader(a);
  CHECK(reader.header().has_token_ids);
  CHECK(reader.header().provenance.find("--seed 7 --token-ids") != std::string::npos);
  std::vector<std::vector<std::uint32_t>> layer0;
  TraceRecord r;
  while (reader.next(r))
    if (r.layer == 0) layer0.push_back(r.counts);
  REQUIRE(layer0.size() == 3);
  CHECK(layer0[0] != layer0[1]);
  CHECK(layer0[1] != layer0[2]);
  CHECK(layer0[0] != layer0[2]);
}

TEST_CASE("olmoe-counts: sampled popularity follows the counts") {
  const auto dir = epsim::test::scratch_dir("olmoe_law");
  OlmoeImportOptions o;
  o.ranks = 2;
  o.tokens_per_rank = 20000;
  o.micro_batches = 1;
  o.seed = 3;
  o.token_ids = true;
  const std::string path = (dir / "t.eptrace").string();
  import_olmoe_counts(fixture(), o, path, false);
  TraceReader reader(path);
  CHECK(reader.header().has_token_ids);
  TraceRecord r;
  REQUIRE(reader.next(r));  // layer 0, weights 10:20:30:40, top-2 without replacement
  const auto load = expert_loads(r, reader.header());
  // Inclusion probabilities of a weighted top-2 draw without replacement, computed by hand:
  // P(e) = w_e + sum_{f != e} w_f * w_e / (1 - w_f) with w = 0.1, 0.2, 0.3, 0.4.
  const double w[4] = {0.1, 0.2, 0.3, 0.4};
  for (int e = 0; e < 4; ++e) {
    double p = w[e];
    for (int f = 0; f < 4; ++f)
      if (f != e) p += w[f] * w[e] / (1 - w[f]);
    CAPTURE(e);
    CHECK(static_cast<double>(load[e]) / 40000.0 == doctest::Approx(p).epsilon(0.03));
  }
}

TEST_CASE("olmoe-counts: errors name the file and key") {
  const auto dir = epsim::test::scratch_dir("olmoe_bad");
  const std::string bad = (dir / "bad.counts.json").string();
  const std::string out = (dir / "o.eptrace").string();
  OlmoeImportOptions o;
  { std::ofstream(bad) << "{\"layers\": [0], \"num_experts\": 3, \"top_k_counted\": 2, \"counts\": [[5, 0, 0]]}"; }
  CHECK_THROWS_WITH_AS(import_olmoe_counts(bad, o, out, false), doctest::Contains("bad.counts.json:counts[0]"),
                       InputError);
  { std::ofstream(bad) << "{\"layers\": [0],\n \"num_experts\": 3,, }"; }
  CHECK_THROWS_WITH_AS(import_olmoe_counts(bad, o, out, false), doctest::Contains("bad.counts.json:line 2"),
                       InputError);
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("olmoe-counts: a real OLMoE profile when ../shared/traces-raw is present") {
  const fs::path file =
      epsim::test::shared_dir() / "traces-raw/olmoe-routing-analysis/olmoe/expert_counts/c4.counts.json";
  if (!fs::exists(file)) {
    MESSAGE("skipped: " << file.string() << " is absent");
    return;
  }
  const auto dir = epsim::test::scratch_dir("olmoe_real");
  OlmoeImportOptions o;
  o.ranks = 8;
  o.tokens_per_rank = 512;
  o.micro_batches = 2;
  const std::string path = (dir / "c4.eptrace").string();
  import_olmoe_counts(file.string(), o, path, false);
  TraceReader reader(path);
  CHECK(reader.header().top_k == 8);
  CHECK(reader.header().layer_ids == std::vector<std::uint32_t>{0, 7, 15});
  TraceRecord r;
  int records = 0;
  while (reader.next(r)) ++records;
  CHECK(records == 6);
}

TEST_CASE("olmoe-counts: huge numbers, fractions and deep nesting are refused with their place") {
  const auto dir = epsim::test::scratch_dir("olmoe_numbers");
  const std::string bad = (dir / "bad.counts.json").string();
  const std::string out = (dir / "o.eptrace").string();
  OlmoeImportOptions o;
  o.ranks = 2;
  o.tokens_per_rank = 4;
  struct Case {
    std::string text;
    const char* expect;
  };
  const std::vector<Case> cases = {
      // The number spans columns 17 to 21 of line 2; the parser stops at its last character.
      {"{\"layers\": [0],\n \"num_experts\": 1e400, \"top_k_counted\": 1, \"counts\": [[5, 2, 1]]}",
       "bad.counts.json:line 2, column 21: invalid JSON: number overflow parsing '1e400'"},
      {"{\"layers\": [0], \"num_experts\": 3.5, \"top_k_counted\": 1, \"counts\": [[5, 2, 1]]}",
       "bad.counts.json:num_experts: expected an integer, found a fraction: 3.5"},
      {"{\"layers\": [1e300], \"num_experts\": 3, \"top_k_counted\": 1, \"counts\": [[5, 2, 1]]}",
       "bad.counts.json:layers[0]: value 1e+300 outside [0, 4294967295]"},
      {"{\"layers\": [0], \"num_experts\": 3, \"top_k_counted\": 1, \"counts\": [[5, -1e300, 1]]}",
       "bad.counts.json:counts[0][1]: value -1e+300 outside [0, 1e+300]"},
      {"{\"layers\": [0], \"num_experts\": 3, \"top_k_counted\": 1, \"counts\": [[5, 2, 1]], \"x\": " +
           std::string(100000, '[') + std::string(100000, ']') + "}",
       // The object is level 1; the arrays of "x" open levels 2, 3, ... from column 83, so level 65
       // opens at column 83 + 63 = 146.
       "bad.counts.json:line 1, column 146: invalid JSON: arrays and objects nested deeper than 64 levels"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.expect);
    { std::ofstream(bad) << c.text; }
    CHECK_THROWS_WITH_AS(import_olmoe_counts(bad, o, out, false), doctest::Contains(c.expect), InputError);
    CHECK_FALSE(fs::exists(out));
  }
  // Integral floating-point counts are the integers they spell: the same trace as integers give.
  { std::ofstream(bad) << "{\"layers\": [0], \"num_experts\": 3, \"top_k_counted\": 1, \"counts\": [[5.0, 2, 1e0]]}"; }
  import_olmoe_counts(bad, o, out, false);
  const std::string ints = (dir / "ints.counts.json").string();
  const std::string ints_out = (dir / "ints.eptrace").string();
  { std::ofstream(ints) << "{\"layers\": [0], \"num_experts\": 3, \"top_k_counted\": 1, \"counts\": [[5, 2, 1]]}"; }
  import_olmoe_counts(ints, o, ints_out, false);
  TraceReader a(out), b(ints_out);
  TraceRecord ra, rb;
  REQUIRE(a.next(ra));
  REQUIRE(b.next(rb));
  CHECK(ra.counts == rb.counts);
}
