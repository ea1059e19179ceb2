// `epsim trace stats` / `show` text, static EP placements, and the CLI end to end when the epsim
// binary is built.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/trace_writer.hpp"
#include "traces/text/expert_load.hpp"
#include "traces/text/trace_show.hpp"
#include "traces/text/trace_stats.hpp"

namespace fs = std::filesystem;
using namespace epsim;

namespace {

// R=2, E=4, K=1. Expert loads [4, 2, 1, 1]: hottest/mean = 4/2; EP=2 contiguous GPU loads 6, 2
// (max/mean 1.5), interleaved 5, 3 (1.25).
std::string hand_trace(const fs::path& dir) {
  TraceHeader h;
  h.num_ranks = 2;
  h.num_experts = 4;
  h.top_k = 1;
  h.num_layers = 1;
  h.layer_ids = {3};
  h.source_format = "test";
  h.provenance = "hand";
  h.rank_assignment = "hand";
  const std::string path = (dir / "hand.eptrace").string();
  TraceWriter w(path, h);
  TraceRecord r;
  r.counts = {4, 0, 0, 0, /**/ 0, 2, 1, 1};
  w.write(r);
  r.micro_batch = 1;
  r.counts = {1, 1, 1, 1, /**/ 1, 1, 1, 1};
  w.write(r);
  w.close();
  return path;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("static EP placements") {
  CHECK(static_ep_gpu_of_expert(10, 4, ExpertLayout::contiguous) ==
        std::vector<std::uint32_t>{0, 0, 1, 1, 1, 2, 2, 3, 3, 3});
  CHECK(static_ep_gpu_of_expert(8, 4, ExpertLayout::contiguous) == std::vector<std::uint32_t>{0, 0, 1, 1, 2, 2, 3, 3});
  CHECK(static_ep_gpu_of_expert(8, 4, ExpertLayout::interleaved) == std::vector<std::uint32_t>{0, 1, 2, 3, 0, 1, 2, 3});
  ExpertLayout layout;
  CHECK(parse_expert_layout("interleaved", layout));
  CHECK(layout == ExpertLayout::interleaved);
  CHECK_FALSE(parse_expert_layout("round-robin", layout));
}

TEST_CASE("summaries: median of odd and even counts") {
  CHECK(summarize({3, 1, 2}).median == 2);
  CHECK(summarize({4, 1, 3, 2}).median == 2.5);
  CHECK(summarize({4, 1, 3, 2}).min == 1);
  CHECK(summarize({4, 1, 3, 2}).max == 4);
  CHECK(summarize({}).median == 0);
}

TEST_CASE("stats: hand-computed ratios, fixed format") {
  const auto dir = epsim::test::scratch_dir("text_stats");
  const std::string path = hand_trace(dir);
  std::ostringstream plain, contiguous, interleaved;
  write_trace_stats(path, StatsOptions{}, plain);
  write_trace_stats(path, StatsOptions{2, ExpertLayout::contiguous}, contiguous);
  write_trace_stats(path, StatsOptions{2, ExpertLayout::interleaved}, interleaved);
  CHECK(contains(plain.str(), "ranks 2, experts 4, top-k 1, layers 1 (ids 3), token ids: no\n"));
  CHECK_FALSE(contains(plain.str(), "gpu"));
  const std::string expected =
      " record  step micro-batch layer    id     tokens  hot/mean  gpu max/mean\n"
      "      0     0           0     0     3          8    2.0000        1.5000\n"
      "      1     0           1     0     3          8    1.0000        1.0000\n"
      "\n"
      "records: 2, tokens: 16\n"
      "  over non-empty records    median       min       max\n"
      "   hottest expert / mean    1.5000    1.0000    2.0000\n"
      "     max / mean GPU load    1.2500    1.0000    1.5000\n";
  CHECK(contains(contiguous.str(), "static EP: 2 GPUs, contiguous placement\n"));
  CHECK(contains(contiguous.str(), expected));
  CHECK(contains(interleaved.str(), "      0     0           0     0     3          8    2.0000        1.2500\n"));
  std::ostringstream again;
  write_trace_stats(path, StatsOptions{2, ExpertLayout::contiguous}, again);
  CHECK(again.str() == contiguous.str());
  CHECK_THROWS_WITH_AS(write_trace_stats(path, StatsOptions{5, ExpertLayout::contiguous}, again),
                       doctest::Contains("--ep 5 exceeds"), InputError);
}

TEST_CASE("show: header and count rows") {
  const auto dir = epsim::test::scratch_dir("text_show");
  const std::string path = hand_trace(dir);
  std::ostringstream out;
  ShowOptions o;
  o.records = 1;
  o.tokens = true;
  write_trace_show(path, o, out);
  const std::string s = out.str();
  CHECK(contains(s, "record 0: step 0, micro-batch 0, layer 0 (id 3), tokens 8\n"));
  CHECK(contains(s, "  rank 0: 4 0 0 0\n  rank 1: 0 2 1 1\n"));
  CHECK(contains(s, "tokens: none recorded"));
  CHECK_FALSE(contains(s, "record 1:"));
  CHECK(contains(s, "records: 2 (1 shown)"));
}

TEST_CASE("cli: epsim trace generate / stats / show end to end") {
  const std::string binary = epsim::test::epsim_binary();
  if (!fs::exists(binary)) {
    MESSAGE("skipped: " << binary << " is not built");
    return;
  }
  const auto dir = epsim::test::scratch_dir("text_cli");
  const std::string out = (dir / "g.eptrace").string();
  const std::string log = (dir / "log.txt").string();
  const std::string gen = "\"" + binary +
                          "\" trace generate --ranks 4 --experts 8 --top-k 2 --layers 2 "
                          "--tokens-per-rank 64 --dist zipf --zipf-alpha 1.1 --seed 5 --token-ids -o \"" +
                          out + "\"";
  CHECK(std::system((gen + " > \"" + log + "\" 2>&1").c_str()) == 0);
  CHECK(contains(slurp(log), "wrote "));
  CHECK(std::system((gen + " > \"" + log + "\" 2>&1").c_str()) != 0);  // exists, no --force
  CHECK(contains(slurp(log), "--force"));
  CHECK(std::system(
            ("\"" + binary + "\" trace stats \"" + out + "\" --ep 4 --placement interleaved > \"" + log + "\" 2>&1")
                .c_str()) == 0);
  CHECK(contains(slurp(log), "static EP: 4 GPUs, interleaved placement"));
  CHECK(std::system(
            ("\"" + binary + "\" trace show \"" + out + "\" --records 1 --tokens > \"" + log + "\" 2>&1").c_str()) ==
        0);
  CHECK(contains(slurp(log), "token 0: rank 0, experts"));
  CHECK(std::system(("\"" + binary + "\" trace generate --ranks -3 --experts 8 --top-k 2 --tokens-per-rank 4 -o \"" +
                     out + "2\" > \"" + log + "\" 2>&1")
                        .c_str()) != 0);
  CHECK(contains(slurp(log), "--ranks"));
}
