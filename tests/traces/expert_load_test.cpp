// Aggregated expert loads (DeepSeek EPLB weight, vLLM EPLB window, ...): exact counts, spread over
// ranks without sampling, fractional loads rounded by the largest-remainder rule.
#include "traces/import/expert_load.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/import/count_rounding.hpp"
#include "traces/text/expert_load.hpp"

namespace fs = std::filesystem;
using namespace epsim;

namespace {

std::string fixture(const char* name) { return (epsim::test::source_dir() / "tests/fixtures/import" / name).string(); }

using Counts = std::vector<std::uint32_t>;

}  // namespace

TEST_CASE("round_loads: largest remainder to the nearest multiple of top-k") {
  // 3.4 / 2 = 1.7 -> 4; floors 1 1 0 -> the two .6 parts get a unit each.
  CHECK(round_loads({1.6, 1.6, 0.2}, 2) == std::vector<std::uint64_t>{2, 2, 0});
  // 5.7 / 4 -> 4; floors 3; the tie of equal parts goes to the lower expert id.
  CHECK(round_loads({1.9, 1.9, 1.9}, 4) == std::vector<std::uint64_t>{2, 1, 1});
  // 5.5 / 4 -> 4; the floors (5) exceed it: a unit is taken back from the smallest fractional part,
  // the later expert of a tie first.
  CHECK(round_loads({2, 2, 1.5}, 4) == std::vector<std::uint64_t>{2, 1, 1});
  CHECK(round_loads({5.5, 1.5, 1, 0}, 2) == std::vector<std::uint64_t>{6, 1, 1, 0});
  // 5.4 / 4 -> 4, floors 5: the smallest part is the empty last expert's, which has no unit to give;
  // the unit comes from the next smallest (expert 3), and no count goes below zero.
  CHECK(round_loads({1, 1, 1, 1, 1.4, 0}, 4) == std::vector<std::uint64_t>{1, 1, 1, 0, 1, 0});
  // 11.5 / 8 -> 8, floors 11: three units back from two loads, so the second round starts again at
  // the smallest part (expert 1, the later of the tie): 5 - 1, 6 - 2.
  CHECK(round_loads({5.25, 6.25}, 8) == std::vector<std::uint64_t>{4, 4});
  // 40 equal parts (more than a sort puts in order by insertion): 20 / 1 -> 20, to experts 0 to 19.
  std::vector<std::uint64_t> first_half(40, 0);
  for (int e = 0; e < 20; ++e) first_half[static_cast<std::size_t>(e)] = 1;
  CHECK(round_loads(std::vector<double>(40, 0.5), 1) == first_half);
}

TEST_CASE("spread_load: floor(c/R) each, the remainder from rank e on") {
  Counts c(3 * 4, 0);
  CHECK(spread_load(7, 0, 3, 4, c));
  CHECK(spread_load(2, 1, 3, 4, c));
  CHECK(spread_load(3, 3, 3, 4, c));
  CHECK(c == Counts{3, 0, 0, 1, /**/ 2, 1, 0, 1, /**/ 2, 1, 0, 1});
  Counts big(2, 0xffffffffu);
  CHECK_FALSE(spread_load(1, 0, 1, 2, big));
}

TEST_CASE("expert-load: DeepSeek EPLB weight as JSON and as text give the same exact counts") {
  const auto dir = epsim::test::scratch_dir("expert_load_eplb");
  ExpertLoadOptions o;
  o.ranks = 3;
  o.top_k = 2;
  o.layer_ids = {3, 4};
  o.source = "deepseek-eplb-weight";
  for (const char* name : {"deepseek-eplb-weight.json", "deepseek-eplb-weight.txt"}) {
    CAPTURE(name);
    const std::string out = (dir / (std::string(name) + ".eptrace")).string();
    import_expert_load(fixture(name), o, out, false);
    TraceReader reader(out);
    const TraceHeader& h = reader.header();
    CHECK(h.num_ranks == 3);
    CHECK(h.num_experts == 4);
    CHECK(h.layer_ids == std::vector<std::uint32_t>{3, 4});
    CHECK(h.source_format == "deepseek-eplb-weight");
    TraceRecord r;
    REQUIRE(reader.next(r));  // [7 2 0 3]: 7 = 2+2+2 and 1 to rank 0; 2 to ranks 1, 2; 3 = 1 each
    CHECK(r.counts == Counts{3, 0, 0, 1, /**/ 2, 1, 0, 1, /**/ 2, 1, 0, 1});
    REQUIRE(reader.next(r));  // [1 1 4 0]: expert e's remainder starts at rank e
    CHECK(r.counts == Counts{1, 0, 1, 0, /**/ 0, 1, 1, 0, /**/ 0, 0, 2, 0});
    CHECK_FALSE(reader.next(r));
  }
  TraceReader json_trace((dir / "deepseek-eplb-weight.json.eptrace").string());
  CHECK(json_trace.header().provenance == "hand-made EPLB weight: 2 layers x 4 logical experts; licence: CC0-1.0");
  TraceReader text_trace((dir / "deepseek-eplb-weight.txt.eptrace").string());
  CHECK(text_trace.header().provenance == "aggregated expert loads of deepseek-eplb-weight.txt");
}

TEST_CASE("expert-load: a vLLM window folds replicas, skips an empty slot and rounds fractions") {
  const auto dir = epsim::test::scratch_dir("expert_load_vllm");
  ExpertLoadOptions o;
  o.ranks = 1;
  o.top_k = 2;
  o.labels.licence = "Apache-2.0";
  const std::string out = (dir / "v.eptrace").string();
  import_expert_load(fixture("vllm-eplb-window.json"), o, out, false);
  TraceReader reader(out);
  CHECK(reader.header().num_experts == 4);
  CHECK(reader.header().provenance ==
        "hand-made vLLM EPLB window: 2 passes, 2 layers, 5 physical experts for 4 logical; licence: Apache-2.0");
  TraceRecord r;
  REQUIRE(reader.next(r));  // pass 0 is all zeros: skipped; pass 1 is step 1
  CHECK(r.step == 1);
  // physical [2.5 1.5 1 0 3] -> logical [5.5 1.5 1 0] -> rounded to 8 = 4 tokens x 2: [6 1 1 0]
  CHECK(r.counts == Counts{6, 1, 1, 0});
  REQUIRE(reader.next(r));  // [1 1 1 1 2] -> [1 1 1 3], integers kept
  CHECK(r.counts == Counts{1, 1, 1, 3});
  CHECK_FALSE(reader.next(r));
}

TEST_CASE("expert-load: bad input names the file and the place") {
  const auto dir = epsim::test::scratch_dir("expert_load_bad");
  ExpertLoadOptions o;
  o.ranks = 2;
  o.top_k = 2;
  const std::string in = (dir / "in.json").string(), out = (dir / "o.eptrace").string();
  const auto error_of = [&](const std::string& text) -> std::string {
    { std::ofstream(in) << text; }
    try {
      import_expert_load(in, o, out, false);
    } catch (const InputError& e) {
      CHECK_FALSE(fs::exists(out));
      return e.what();
    }
    return "";
  };
  CHECK(error_of(R"({"weight": [[1, 2], [3, 4, 5]]})").find("in.json:weight[1]: 3 loads, the first layer has 2") !=
        std::string::npos);
  CHECK(error_of(R"({"weight": [[1, 2], [3, -4]]})").find("in.json:weight[1][1]: value -4 outside") !=
        std::string::npos);
  CHECK(error_of(R"({"weight": [[1, 2], [3, 4]]})").find("in.json:weight[0]: the loads sum to 3, not a multiple of --top-k 2") !=
        std::string::npos);
  CHECK(error_of(R"({"something": [[1, 1]]})").find("in.json: no loads found") != std::string::npos);
  const std::string txt = (dir / "in.txt").string();
  { std::ofstream(txt) << "1 1\n2 x\n"; }
  try {
    import_expert_load(txt, o, out, false);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("in.txt:line 2: 'x' is not a number") != std::string::npos);
  }
}

TEST_CASE("expert-load: the framework names on the command line") {
  const auto dir = epsim::test::scratch_dir("expert_load_cli");
  auto r = epsim::test::run_epsim("trace import deepseek-eplb '" + fixture("deepseek-eplb-weight.txt") +
                                      "' --ranks 3 --top-k 2 --layer-ids 3,4 -o e.eptrace",
                                  dir);
  CHECK(r.status == 0);
  CHECK(r.out.find("wrote e.eptrace: 2 records, ranks 3, experts 4, top-k 2, layers 2") != std::string::npos);
  r = epsim::test::run_epsim("trace import vllm-eplb '" + fixture("vllm-eplb-window.json") +
                                 "' --ranks 2 --top-k 2 --layer-ids 3 -o v.eptrace",
                             dir);
  CHECK(r.status == 2);
  CHECK(r.err.find("--layer-ids: 1 ids given") != std::string::npos);
}

TEST_CASE("expert-load: the real OLMoE arXiv profile, kept exactly, when ../shared/traces-raw is present") {
  const fs::path file =
      epsim::test::shared_dir() / "traces-raw/olmoe-routing-analysis/olmoe/expert_counts/arxiv.counts.json";
  if (!fs::exists(file)) {
    MESSAGE("skipped: " << file.string() << " is absent");
    return;
  }
  const auto dir = epsim::test::scratch_dir("expert_load_olmoe");
  ExpertLoadOptions o;
  o.ranks = 8;
  o.top_k = 8;
  o.key = "counts";
  o.layer_ids = {0, 7, 15};
  o.labels.licence = "Apache-2.0";
  const std::string out = (dir / "arxiv.eptrace").string();
  import_expert_load(file.string(), o, out, false);
  // Exact counts keep the recorded skew: the contiguous EP=8 max/mean GPU load averaged over the three
  // layers is the 1.66 that SOURCE.md gives for arXiv (the sampling importer gets ~1.46-1.58).
  TraceReader reader(out);
  const auto gpu_of = static_ep_gpu_of_expert(64, 8, ExpertLayout::contiguous);
  TraceRecord r;
  double sum = 0;
  int records = 0;
  while (reader.next(r)) {
    sum += record_load(r, reader.header(), gpu_of, 8).gpu_max_over_mean;
    ++records;
  }
  CHECK(records == 3);
  CHECK(sum / records == doctest::Approx(1.66).epsilon(0.005));
}
