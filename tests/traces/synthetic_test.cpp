// Synthetic generator and the random numbers under it.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/trace_check.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/synth/rng.hpp"
#include "traces/synth/synthetic_trace.hpp"
#include "traces/text/expert_load.hpp"

namespace fs = std::filesystem;
using namespace epsim;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

SyntheticOptions small_options() {
  SyntheticOptions o;
  o.ranks = 4;
  o.experts = 16;
  o.top_k = 2;
  o.layers = 2;
  o.micro_batches = 2;
  o.steps = 2;
  o.tokens_per_rank = 200;
  o.dist = PopularityDist::lognormal;
  o.lognormal_sigma = 0.8;
  o.rank_skew = 0.3;
  o.drift = 0.1;
  o.seed = 42;
  return o;
}

}  // namespace

TEST_CASE("rng: SplitMix64 reference values and sane uniforms and normals") {
  SplitMix64 sm(0);
  CHECK(sm.next() == 0xe220a8397b1dcdafull);
  CHECK(sm.next() == 0x6e789e6aa1b965f4ull);
  Xoshiro256ss rng(123);
  double sum = 0, sum_sq = 0, nsum = 0, nsq = 0;
  const int n = 200000;
  bool in_range = true;
  for (int i = 0; i < n; ++i) {
    const double u = rng.uniform();
    in_range = in_range && u >= 0.0 && u < 1.0 && rng.below(7) < 7;
    sum += u;
    sum_sq += u * u;
    const double z = rng.normal();
    nsum += z;
    nsq += z * z;
  }
  CHECK(in_range);
  CHECK(sum / n == doctest::Approx(0.5).epsilon(0.01));
  CHECK(sum_sq / n == doctest::Approx(1.0 / 3.0).epsilon(0.01));
  CHECK(std::abs(nsum / n) < 0.01);
  CHECK(nsq / n == doctest::Approx(1.0).epsilon(0.02));
  CHECK(mix_seed(1, {2, 3}) != mix_seed(1, {3, 2}));
  CHECK(mix_seed(1, {2, 3}) == mix_seed(1, {2, 3}));
}

TEST_CASE("generate: the same seed gives the same bytes, another seed other bytes") {
  const auto dir = epsim::test::scratch_dir("synth_seed");
  const std::string a = (dir / "a.eptrace").string(), b = (dir / "b.eptrace").string(),
                    c = (dir / "c.eptrace").string(), d = (dir / "d.eptrace").string();
  SyntheticOptions o = small_options();
  generate_trace(o, a, false);
  generate_trace(o, b, false);
  CHECK(slurp(a) == slurp(b));
  o.seed = 43;
  generate_trace(o, c, false);
  CHECK(slurp(a) != slurp(c));
  o = small_options();
  o.token_ids = true;
  generate_trace(o, d, false);  // the reader checks counts == token histogram
  TraceReader reader(d);
  TraceRecord r;
  int records = 0;
  while (reader.next(r)) {
    ++records;
    CHECK(r.num_tokens() == 4 * 200);
    CHECK(r.token_src_rank[200] == 1);
  }
  CHECK(records == 2 * 2 * 2);
  CHECK(reader.header().provenance.find("--seed 42") != std::string::npos);
  CHECK(reader.header().provenance.find("--lognormal-sigma 0.8 ") != std::string::npos);
}

TEST_CASE("generate: the first records do not depend on how many micro-batches follow") {
  SyntheticOptions o = small_options();
  o.steps = 1;
  SyntheticTrace shorter(o);
  o.micro_batches = 5;
  SyntheticTrace longer(o);
  TraceRecord x, y;
  int n = 0;
  while (shorter.next(x)) {
    REQUIRE(longer.next(y));
    CHECK(x.counts == y.counts);
    ++n;
  }
  CHECK(n == 4);
}

TEST_CASE("generate: every record has R*T*K assignments and R*T tokens") {
  SyntheticTrace trace(small_options());
  TraceRecord r;
  std::vector<std::uint32_t> scratch;
  while (trace.next(r)) {
    CHECK(record_assignments(r) == 4 * 200 * 2);
    CHECK(check_trace_record(r, trace.header(), 800, scratch).empty());
    for (std::uint32_t s = 0; s < 4; ++s) {
      std::uint64_t row = 0;
      for (std::uint32_t e = 0; e < 16; ++e) row += r.count(s, e, 16);
      CHECK(row == 400);
    }
  }
}

TEST_CASE("generate: uniform popularity has little skew") {
  SyntheticOptions o;
  o.ranks = 4;
  o.experts = 16;
  o.top_k = 2;
  o.tokens_per_rank = 10000;
  o.dist = PopularityDist::uniform;
  SyntheticTrace trace(o);
  TraceRecord r;
  REQUIRE(trace.next(r));
  const RecordLoad load = record_load(r, trace.header(), static_ep_gpu_of_expert(16, 4, ExpertLayout::contiguous), 4);
  CHECK(load.hot_over_mean < 1.05);
  CHECK(load.gpu_max_over_mean < 1.03);
}

TEST_CASE("generate: zipf alpha=1.2 gives the hottest expert its share 1/H(E, 1.2)") {
  SyntheticOptions o;
  o.ranks = 4;
  o.experts = 64;
  o.top_k = 1;
  o.tokens_per_rank = 25000;
  o.dist = PopularityDist::zipf;
  o.zipf_alpha = 1.2;
  o.layers = 2;
  SyntheticTrace trace(o);
  double harmonic = 0;
  for (int i = 1; i <= 64; ++i) harmonic += std::pow(i, -1.2);
  const double expected_share = 1.0 / harmonic;  // ~0.2715
  TraceRecord r;
  std::vector<std::uint32_t> hottest;
  while (trace.next(r)) {
    const RecordLoad load = record_load(r, trace.header(), {}, 0);
    const double share = load.hot_over_mean / 64.0;
    CHECK(share == doctest::Approx(expected_share).epsilon(0.02));
    hottest.push_back(load.hottest_expert);
  }
  REQUIRE(hottest.size() == 2);
  CHECK(hottest[0] != hottest[1]);  // the popularity order is shuffled per layer (seed 1)
}

TEST_CASE("generate: impossible options are refused") {
  SyntheticOptions o;
  o.top_k = 65;
  o.experts = 64;
  CHECK_THROWS_WITH_AS(SyntheticTrace{o}, doctest::Contains("--top-k"), InputError);
  o = SyntheticOptions();
  o.drift = -1;
  CHECK_THROWS_WITH_AS(SyntheticTrace{o}, doctest::Contains("--drift"), InputError);
}
