// trace info, merge (by ranks, by steps), slice and the per-layer part of stats, on hand-made traces.
#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/trace_info.hpp"
#include "traces/format/trace_layer_summary.hpp"
#include "traces/format/trace_merge.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/format/trace_slice.hpp"
#include "traces/format/trace_writer.hpp"

namespace fs = std::filesystem;
using namespace epsim;

namespace {

using Counts = std::vector<std::uint32_t>;

struct Rec {
  std::uint32_t step, micro_batch, layer;
  Counts counts;
};

/// One source rank, two experts, top-1, layers [4, 9].
std::string write_trace(const fs::path& dir, const std::string& name, const std::vector<Rec>& records,
                        std::uint32_t experts = 2) {
  TraceHeader h;
  h.num_ranks = static_cast<std::uint32_t>(records[0].counts.size() / experts);
  h.num_experts = experts;
  h.top_k = 1;
  h.num_layers = 2;
  h.layer_ids = {4, 9};
  h.source_format = "hand";
  h.provenance = name;
  h.rank_assignment = "hand";
  const std::string path = (dir / name).string();
  TraceWriter w(path, h);
  for (const Rec& r : records) {
    TraceRecord t;
    t.step = r.step;
    t.micro_batch = r.micro_batch;
    t.layer = r.layer;
    t.counts = r.counts;
    w.write(t);
  }
  w.close();
  return path;
}

const std::vector<Rec> kA = {{0, 0, 0, {3, 1}}, {0, 0, 1, {0, 2}}, {1, 0, 0, {1, 3}}, {1, 0, 1, {2, 0}}, {1, 1, 0, {2, 2}}};
const std::vector<Rec> kB = {{0, 0, 0, {0, 4}}, {0, 0, 1, {1, 1}}, {1, 0, 0, {2, 2}}, {1, 0, 1, {0, 2}}, {1, 1, 0, {1, 1}}};

std::vector<Rec> read_all(const std::string& path) {
  TraceReader reader(path);
  std::vector<Rec> out;
  TraceRecord r;
  while (reader.next(r)) out.push_back({r.step, r.micro_batch, r.layer, r.counts});
  return out;
}

bool same(const std::vector<Rec>& a, const std::vector<Rec>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].step != b[i].step || a[i].micro_batch != b[i].micro_batch || a[i].layer != b[i].layer ||
        a[i].counts != b[i].counts)
      return false;
  return true;
}

}  // namespace

TEST_CASE("trace info: records, steps, micro-batches, layers, tokens and bytes") {
  const auto dir = epsim::test::scratch_dir("trace_info");
  const std::string a = write_trace(dir, "a.eptrace", kA);
  const TraceInfo i = read_trace_info(a);
  CHECK(i.records == 5);
  CHECK(i.steps == 2);
  CHECK(i.first_step == 0);
  CHECK(i.last_step == 1);
  CHECK(i.min_micro_batches == 1);  // step 0 has micro-batch 0 only, step 1 has 0 and 1
  CHECK(i.max_micro_batches == 2);
  CHECK(i.min_layers == 1);  // (1, 1) has layer 4 only
  CHECK(i.max_layers == 2);
  CHECK(i.tokens == 16);  // top-1: 4 + 2 + 4 + 2 + 4
  CHECK(i.file_bytes == fs::file_size(a));
  std::ostringstream text;
  write_trace_info(a, text);
  CHECK(text.str().find("steps: 2 (0 to 1)\nmicro-batches per step: 1 to 2\nlayers per micro-batch: 1 to 2\n"
                        "tokens: 16 (expert assignments 16)\n") != std::string::npos);
}

TEST_CASE("trace info: a trace that starts past step 0, fewer micro-batches in a later step, every micro-batch whole") {
  // Steps 3 and 5; step 3 has micro-batches 0 and 1, step 5 only 0; every micro-batch both layers.
  const auto dir = epsim::test::scratch_dir("trace_info_later");
  const std::string c = write_trace(dir, "c.eptrace",
                                    {{3, 0, 0, {1, 1}}, {3, 0, 1, {2, 0}}, {3, 1, 0, {0, 2}}, {3, 1, 1, {1, 1}},
                                     {5, 0, 0, {2, 0}}, {5, 0, 1, {0, 2}}});
  const TraceInfo i = read_trace_info(c);
  CHECK(i.records == 6);
  CHECK(i.steps == 2);
  CHECK(i.first_step == 3);
  CHECK(i.last_step == 5);
  CHECK(i.min_micro_batches == 1);  // step 5, after step 3's 2
  CHECK(i.max_micro_batches == 2);
  CHECK(i.min_layers == 2);
  CHECK(i.max_layers == 2);
  CHECK(i.tokens == 12);  // top-1, 2 tokens a record
  std::ostringstream text;
  write_trace_info(c, text);
  CHECK(text.str().find("steps: 2 (3 to 5)\nmicro-batches per step: 1 to 2\nlayers per micro-batch: 2\n"
                        "tokens: 12 (expert assignments 12)\n") != std::string::npos);
}

TEST_CASE("trace merge --by ranks stacks the count matrices, --by steps renumbers the later steps") {
  const auto dir = epsim::test::scratch_dir("trace_merge");
  const std::string a = write_trace(dir, "a.eptrace", kA), b = write_trace(dir, "b.eptrace", kB);
  const std::string ranks = (dir / "ranks.eptrace").string();
  merge_traces({a, b}, MergeBy::ranks, ranks, false);
  CHECK(TraceReader(ranks).header().num_ranks == 2);
  CHECK(TraceReader(ranks).header().provenance == "a.eptrace | b.eptrace");
  CHECK(same(read_all(ranks), {{0, 0, 0, {3, 1, 0, 4}},
                               {0, 0, 1, {0, 2, 1, 1}},
                               {1, 0, 0, {1, 3, 2, 2}},
                               {1, 0, 1, {2, 0, 0, 2}},
                               {1, 1, 0, {2, 2, 1, 1}}}));
  const std::string steps = (dir / "steps.eptrace").string();
  merge_traces({a, b}, MergeBy::steps, steps, false);
  std::vector<Rec> want = kA;
  for (Rec r : kB) {
    r.step += 2;  // b's steps 0, 1 follow a's last step 1
    want.push_back(r);
  }
  CHECK(same(read_all(steps), want));

  // By ranks, the records must match; any merge, the shapes must.
  const std::string c = write_trace(dir, "c.eptrace", {{0, 0, 0, {3, 1}}, {0, 0, 1, {0, 2}}, {2, 0, 0, {1, 3}}});
  const std::string out = (dir / "bad.eptrace").string();
  CHECK_THROWS_WITH_AS(merge_traces({a, c}, MergeBy::ranks, out, false),
                       doctest::Contains("c.eptrace:record 2: record (step 2, micro-batch 0, layer 0) where"), InputError);
  const std::string wide = write_trace(dir, "e3.eptrace", {{0, 0, 0, {1, 1, 1}}}, 3);
  CHECK_THROWS_WITH_AS(merge_traces({a, wide}, MergeBy::steps, out, false),
                       doctest::Contains("e3.eptrace:header: num_experts 3 differs from"), InputError);
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("trace slice keeps the chosen steps, micro-batches and layers") {
  const auto dir = epsim::test::scratch_dir("trace_slice");
  const std::string a = write_trace(dir, "a.eptrace", kA);
  SliceOptions o;
  REQUIRE(parse_index_range("1:", o.steps));
  o.layer_ids = {4};
  const std::string out = (dir / "s.eptrace").string();
  slice_trace(a, o, out, false);
  CHECK(TraceReader(out).header().layer_ids == std::vector<std::uint32_t>{4});
  CHECK(same(read_all(out), {{1, 0, 0, {1, 3}}, {1, 1, 0, {2, 2}}}));
  SliceOptions m;
  REQUIRE(parse_index_range("0:1", m.micro_batches));
  REQUIRE(parse_index_range("1", m.steps));
  const std::string out2 = (dir / "m.eptrace").string();
  slice_trace(a, m, out2, false);
  CHECK(same(read_all(out2), {{1, 0, 0, {1, 3}}, {1, 0, 1, {2, 0}}}));
  // One index is that step alone, not the ones after it.
  SliceOptions first;
  REQUIRE(parse_index_range("0", first.steps));
  CHECK(first.steps.begin == 0);
  CHECK(first.steps.end == 1);
  const std::string out3 = (dir / "f.eptrace").string();
  slice_trace(a, first, out3, false);
  CHECK(same(read_all(out3), {{0, 0, 0, {3, 1}}, {0, 0, 1, {0, 2}}}));
  IndexRange r;
  CHECK_FALSE(parse_index_range("3:1", r));
  CHECK_FALSE(parse_index_range("x", r));
  SliceOptions bad;
  bad.layer_ids = {5};
  CHECK_THROWS_WITH_AS(slice_trace(a, bad, (dir / "b.eptrace").string(), false),
                       doctest::Contains("--layers: the trace has no layer 5"), InputError);
}

TEST_CASE("trace stats per layer: imbalance, hottest experts and drift between steps") {
  const auto dir = epsim::test::scratch_dir("trace_layer_summary");
  const std::string a = write_trace(dir, "a.eptrace", kA);
  const std::vector<LayerSummary> s = summarize_layers(a, 2, ExpertLayout::contiguous);
  REQUIRE(s.size() == 2);
  // Layer 4: hot/mean 3/2, 3/2, 2/2 -> mean 4/3, max 1.5; loads 6 and 6 -> 50% each, e0 first.
  CHECK(s[0].layer_id == 4);
  CHECK(s[0].records == 3);
  CHECK(s[0].hot_mean == doctest::Approx(4.0 / 3));
  CHECK(s[0].hot_max == doctest::Approx(1.5));
  CHECK(s[0].gpu_max == doctest::Approx(1.5));  // two GPUs of one expert each
  REQUIRE(s[0].hottest.size() == 2);
  CHECK(s[0].hottest[0].first == 0);
  CHECK(s[0].hottest[0].second == doctest::Approx(0.5));
  // Step 0: [3 1] -> (.75 .25); step 1: [1 3] + [2 2] = [3 5] -> (.375 .625); TV = .375.
  CHECK(s[0].drift_pairs == 1);
  CHECK(s[0].drift_mean == doctest::Approx(0.375));
  // Layer 9: [0 2] then [2 0]: disjoint experts, TV = 1.
  CHECK(s[1].hot_mean == doctest::Approx(2.0));
  CHECK(s[1].drift_mean == doctest::Approx(1.0));
  std::ostringstream text;
  write_layer_summary(a, 0, ExpertLayout::contiguous, text);
  CHECK(text.str().find("     0     4        3    1.3333  1.5000  0.3750  0.3750  e0 50.0% e1 50.0%\n") !=
        std::string::npos);
}

TEST_CASE("trace stats per layer: three steps, an empty record, and --ep past the experts") {
  const auto dir = epsim::test::scratch_dir("trace_layer_summary_steps");
  // Layer 4: [2 2], [4 0], [0 4]; layer 9: [0 0] (no tokens), [1 1], [2 0]; one step each.
  const std::string t = write_trace(dir, "t.eptrace",
                                    {{0, 0, 0, {2, 2}}, {0, 0, 1, {0, 0}}, {1, 0, 0, {4, 0}}, {1, 0, 1, {1, 1}},
                                     {2, 0, 0, {0, 4}}, {2, 0, 1, {2, 0}}});
  const std::vector<LayerSummary> s = summarize_layers(t, 0, ExpertLayout::contiguous);
  REQUIRE(s.size() == 2);
  // Layer 4: shares (.5 .5), (1 0), (0 1): TV .5 then 1 (each step on its own, not added up).
  CHECK(s[0].drift_pairs == 2);
  CHECK(s[0].drift_mean == doctest::Approx(0.75));
  CHECK(s[0].drift_max == doctest::Approx(1.0));
  CHECK(s[0].hot_mean == doctest::Approx(5.0 / 3));  // hot / mean 1, 2, 2
  // Layer 9: the empty record counts as a record, not in the means; the drift starts at step 1:
  // (.5 .5) -> (1 0), TV .5.
  CHECK(s[1].records == 3);
  CHECK(s[1].nonempty == 2);
  CHECK(s[1].hot_mean == doctest::Approx(1.5));  // hot / mean 1, 2
  CHECK(s[1].drift_pairs == 1);
  CHECK(s[1].drift_mean == doctest::Approx(0.5));
  CHECK_THROWS_WITH_AS(summarize_layers(t, 3, ExpertLayout::contiguous),
                       doctest::Contains("--ep 3 exceeds the trace's 2 experts"), InputError);
  CHECK(summarize_layers(t, 2, ExpertLayout::contiguous).size() == 2);
}

TEST_CASE("trace info, merge and slice on the command line") {
  const auto dir = epsim::test::scratch_dir("trace_tools_cli");
  write_trace(dir, "a.eptrace", kA);
  write_trace(dir, "b.eptrace", kB);
  auto r = epsim::test::run_epsim("trace merge a.eptrace b.eptrace --by ranks -o m.eptrace", dir);
  CHECK(r.status == 0);
  CHECK(r.out == "wrote m.eptrace: 5 records, ranks 2, experts 2, top-k 1, layers 2, token ids no\n");
  r = epsim::test::run_epsim("trace slice m.eptrace --steps :1 -o s.eptrace", dir);
  CHECK(r.status == 0);
  CHECK(r.out.find("wrote s.eptrace: 2 records") != std::string::npos);
  r = epsim::test::run_epsim("trace info s.eptrace", dir);
  CHECK(r.status == 0);
  CHECK(r.out.find("records: 2\nsteps: 1 (0 to 0)\n") != std::string::npos);
  r = epsim::test::run_epsim("trace merge a.eptrace b.eptrace --by layers -o x.eptrace", dir);
  CHECK(r.status == 2);
  CHECK(r.err.find("--by: 'layers' is not ranks or steps") != std::string::npos);
  r = epsim::test::run_epsim("trace stats a.eptrace", dir);
  CHECK(r.status == 0);
  CHECK(r.out.find("hottest experts") != std::string::npos);
}

TEST_CASE("trace merge --by ranks keeps token ids, their source ranks shifted") {
  const auto dir = epsim::test::scratch_dir("trace_merge_tokens");
  const auto write = [&](const std::string& name, std::vector<std::uint32_t> src, std::vector<std::uint16_t> experts) {
    TraceHeader h;
    h.num_ranks = 1;
    h.num_experts = 2;
    h.top_k = 1;
    h.num_layers = 1;
    h.layer_ids = {0};
    h.has_token_ids = true;
    h.source_format = "hand";
    const std::string path = (dir / name).string();
    TraceWriter w(path, h);
    TraceRecord r;
    r.counts = {0, 0};
    for (std::uint16_t e : experts) ++r.counts[e];
    r.token_src_rank = src;
    r.token_experts = experts;
    w.write(r);
    w.close();
    return path;
  };
  const std::string a = write("a.eptrace", {0, 0}, {0, 1}), b = write("b.eptrace", {0}, {1});
  const std::string out = (dir / "m.eptrace").string();
  merge_traces({a, b}, MergeBy::ranks, out, false);
  TraceReader reader(out);
  CHECK(reader.header().has_token_ids);
  TraceRecord r;
  REQUIRE(reader.next(r));
  CHECK(r.counts == Counts{1, 1, 0, 1});
  CHECK(r.token_src_rank == std::vector<std::uint32_t>{0, 0, 1});
  CHECK(r.token_experts == std::vector<std::uint16_t>{0, 1, 1});
  // Three traces: the third's rank 0 is rank 2 of the merged trace, after a's and b's.
  const std::string c = write("c.eptrace", {0}, {0});
  const std::string out3 = (dir / "m3.eptrace").string();
  merge_traces({a, b, c}, MergeBy::ranks, out3, false);
  TraceReader three(out3);
  REQUIRE(three.next(r));
  CHECK(r.counts == Counts{1, 1, 0, 1, 1, 0});
  CHECK(r.token_src_rank == std::vector<std::uint32_t>{0, 0, 1, 2});
  CHECK(r.token_experts == std::vector<std::uint16_t>{0, 1, 1, 0});
}
