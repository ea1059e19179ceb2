// Group-limited (node-limited) routing in the synthetic generator: each token reaches at most
// groups_per_token expert groups, expert loads still follow the popularity, and a seed gives the same
// bytes every time.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/synth/synthetic_trace.hpp"
#include "traces/synth/topk_sampler.hpp"

namespace fs = std::filesystem;
using namespace epsim;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// 64 experts in 8 groups of 8 (one group per rank at EP 8), top-6 within 2 groups.
SyntheticOptions grouped_options() {
  SyntheticOptions o;
  o.ranks = 8;
  o.experts = 64;
  o.top_k = 6;
  o.tokens_per_rank = 2000;
  o.dist = PopularityDist::lognormal;
  o.lognormal_sigma = 0.5;
  o.seed = 7;
  o.token_ids = true;
  o.groups = 8;
  o.groups_per_token = 2;
  return o;
}

/// Assignments per expert over all records, as shares of the total.
std::vector<double> expert_shares(const SyntheticOptions& o) {
  SyntheticTrace trace(o);
  std::vector<double> load(o.experts, 0.0);
  double total = 0;
  TraceRecord record;
  while (trace.next(record))
    for (std::size_t i = 0; i < record.counts.size(); ++i) {
      load[i % o.experts] += record.counts[i];
      total += record.counts[i];
    }
  for (double& v : load) v /= total;
  return load;
}

}  // namespace

TEST_CASE("group-limited generator: no token reaches more than groups_per_token groups") {
  const SyntheticOptions o = grouped_options();
  SyntheticTrace trace(o);
  TraceRecord record;
  REQUIRE(trace.next(record));
  REQUIRE(record.token_experts.size() == static_cast<std::size_t>(o.ranks) * o.tokens_per_rank * o.top_k);
  const std::uint32_t per_group = o.experts / o.groups;
  std::size_t widest = 0, two_groups = 0;
  for (std::size_t t = 0; t < record.token_src_rank.size(); ++t) {
    std::set<std::uint32_t> groups, experts;
    for (std::uint32_t j = 0; j < o.top_k; ++j) {
      groups.insert(record.token_experts[t * o.top_k + j] / per_group);
      experts.insert(record.token_experts[t * o.top_k + j]);
    }
    CHECK(experts.size() == o.top_k);
    widest = std::max(widest, groups.size());
    two_groups += groups.size() == 2 ? 1 : 0;
  }
  // With contiguous placement at EP 8 a group is a rank: every token reaches at most 2 of 8 ranks.
  CHECK(widest == 2);
  // Six draws in 16 experts of two groups nearly always touch both (so the bound is what limits).
  CHECK(two_groups > record.token_src_rank.size() * 9 / 10);
  // Unrestricted, 6 draws over 8 groups reach 2 groups or fewer only rarely.
  SyntheticOptions free_options = o;
  free_options.groups = free_options.groups_per_token = 0;
  SyntheticTrace free_trace(free_options);
  REQUIRE(free_trace.next(record));
  std::size_t wide = 0;
  for (std::size_t t = 0; t < record.token_src_rank.size(); ++t) {
    std::set<std::uint32_t> groups;
    for (std::uint32_t j = 0; j < o.top_k; ++j) groups.insert(record.token_experts[t * o.top_k + j] / per_group);
    wide += groups.size() > 2 ? 1 : 0;
  }
  CHECK(wide > record.token_src_rank.size() * 9 / 10);
}

TEST_CASE("group-limited generator: expert loads follow the popularity") {
  SUBCASE("uniform popularity stays uniform") {
    SyntheticOptions o = grouped_options();
    o.dist = PopularityDist::uniform;
    o.token_ids = false;
    o.steps = 4;
    const std::vector<double> shares = expert_shares(o);
    // 4 x 16000 tokens x 6 = 384000 assignments, 6000 per expert: sampling noise ~1.3%.
    for (double s : shares) CHECK(s == doctest::Approx(1.0 / 64).epsilon(0.06));
  }
  SUBCASE("skewed popularity: within 15% of the unrestricted top-k's loads, same order of hot experts") {
    SyntheticOptions o = grouped_options();
    o.token_ids = false;
    o.steps = 4;
    const std::vector<double> limited = expert_shares(o);
    SyntheticOptions free_options = o;
    free_options.groups = free_options.groups_per_token = 0;
    const std::vector<double> free_shares = expert_shares(free_options);
    for (std::uint32_t e = 0; e < o.experts; ++e) CHECK(limited[e] == doctest::Approx(free_shares[e]).epsilon(0.15));
    const auto hottest = [](const std::vector<double>& v) {
      return std::max_element(v.begin(), v.end()) - v.begin();
    };
    CHECK(hottest(limited) == hottest(free_shares));
  }
}

TEST_CASE("group-limited generator: byte-identical per seed, different across seeds and from unrestricted") {
  const fs::path dir = test::scratch_dir("group_limited_bytes");
  SyntheticOptions o = grouped_options();
  o.tokens_per_rank = 300;
  generate_trace(o, (dir / "a.eptrace").string(), true);
  generate_trace(o, (dir / "b.eptrace").string(), true);
  CHECK(slurp((dir / "a.eptrace").string()) == slurp((dir / "b.eptrace").string()));
  o.seed = 8;
  generate_trace(o, (dir / "c.eptrace").string(), true);
  CHECK(slurp((dir / "a.eptrace").string()) != slurp((dir / "c.eptrace").string()));
  o.seed = 7;
  o.groups = o.groups_per_token = 0;
  generate_trace(o, (dir / "d.eptrace").string(), true);
  CHECK(slurp((dir / "a.eptrace").string()) != slurp((dir / "d.eptrace").string()));
  // The provenance names the routing, so the trace can be made again.
  TraceReader reader((dir / "a.eptrace").string());
  CHECK(reader.header().provenance.find("--groups 8 --groups-per-token 2") != std::string::npos);
}

TEST_CASE("group-limited generator: impossible groups are refused with one line") {
  SyntheticOptions o = grouped_options();
  auto message = [&] {
    try {
      check_synthetic_options(o);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  o.groups = 7;
  CHECK(message().find("--groups must divide --experts") != std::string::npos);
  o.groups = 8;
  o.groups_per_token = 0;
  CHECK(message().find("go together") != std::string::npos);
  o.groups_per_token = 1;
  o.top_k = 9;  // one group of 8 experts cannot hold 9
  CHECK(message().find("fewer than --top-k") != std::string::npos);
}

TEST_CASE("group_limited_feasible: the fewest positive experts of any drawable groups must reach k") {
  // Groups of 4: group 0 has 1 positive expert, group 1 has 4, group 2 none.
  const std::vector<double> w = {1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0};
  CHECK(group_limited_feasible(w, 5, 3, 2));   // groups 0 and 1 are the only ones drawable: 5 experts
  CHECK_FALSE(group_limited_feasible(w, 2, 3, 1));  // drawing group 0 alone leaves 1 expert
  CHECK_FALSE(group_limited_feasible(w, 1, 3, 3));  // only 2 groups have weight
}

TEST_CASE("epsim trace generate --model takes experts, top-k and routing groups from the model") {
  const fs::path dir = test::scratch_dir("group_limited_cli");
  const std::string model = (test::source_dir() / "models" / "deepseek-v3.yaml").string();
  const test::CliResult r = test::run_epsim(
      "trace generate --ranks 8 --model '" + model + "' --tokens-per-rank 64 --token-ids -o v3.eptrace --force", dir);
  REQUIRE(r.status == 0);
  TraceReader reader((dir / "v3.eptrace").string());
  CHECK(reader.header().num_experts == 256);
  CHECK(reader.header().top_k == 8);
  TraceRecord record;
  REQUIRE(reader.next(record));
  REQUIRE(record.token_src_rank.size() == 8 * 64);
  for (std::size_t t = 0; t < record.token_src_rank.size(); ++t) {
    std::set<int> groups;
    for (int j = 0; j < 8; ++j) groups.insert(record.token_experts[t * 8 + j] / 32);
    CHECK(groups.size() <= 4);
  }
  const test::CliResult clash = test::run_epsim(
      "trace generate --ranks 8 --model '" + model + "' --top-k 6 --tokens-per-rank 64 -o v3.eptrace --force", dir);
  CHECK(clash.status == 2);
  CHECK(clash.err.find("--top-k 6 disagrees with the model's 8") != std::string::npos);
  const test::CliResult missing = test::run_epsim("trace generate --ranks 8 --top-k 2 --tokens-per-rank 4 -o x.eptrace", dir);
  CHECK(missing.status == 2);
  CHECK(missing.err.find("'--experts' is required unless --model gives it") != std::string::npos);
}
