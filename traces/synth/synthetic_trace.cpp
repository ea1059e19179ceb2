#include "traces/synth/synthetic_trace.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "sim/core/input_error.hpp"
#include "traces/format/trace_writer.hpp"
#include "traces/synth/sampled_record.hpp"

namespace epsim {

namespace {

const char* kWhere = "epsim trace generate";

void require(bool ok, const std::string& message) {
  if (!ok) throw InputError(kWhere, "", message);
}

/// The shortest %g text that reads back as the same double (0.6, not 0.59999999999999998).
std::string number_text(double v) {
  char buf[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace

void check_synthetic_options(const SyntheticOptions& o) {
  require(o.ranks >= 1 && o.ranks <= 65536, "--ranks must be between 1 and 65536");
  require(o.experts >= 1 && o.experts <= 65536, "--experts must be between 1 and 65536");
  require(o.top_k >= 1 && o.top_k <= o.experts, "--top-k must be between 1 and --experts");
  require(o.layers >= 1 && o.layers <= 100000, "--layers must be between 1 and 100000");
  require(o.micro_batches >= 1, "--micro-batches must be at least 1");
  require(o.steps >= 1, "--steps must be at least 1");
  require(o.tokens_per_rank >= 1, "--tokens-per-rank must be at least 1");
  require(static_cast<std::uint64_t>(o.ranks) * o.tokens_per_rank <= 0xffffffffull,
          "--ranks * --tokens-per-rank must stay below 2^32 tokens per record");
  require(std::isfinite(o.zipf_alpha) && o.zipf_alpha >= 0 && o.zipf_alpha <= 20,
          "--zipf-alpha must be between 0 and 20");
  require(std::isfinite(o.lognormal_sigma) && o.lognormal_sigma >= 0 && o.lognormal_sigma <= 10,
          "--lognormal-sigma must be between 0 and 10");
  require(std::isfinite(o.rank_skew) && o.rank_skew >= 0 && o.rank_skew <= 10, "--rank-skew must be between 0 and 10");
  require(std::isfinite(o.drift) && o.drift >= 0 && o.drift <= 10, "--drift must be between 0 and 10");
  require((o.groups == 0) == (o.groups_per_token == 0), "--groups and --groups-per-token go together");
  if (o.groups == 0) return;
  require(o.groups <= o.experts && o.experts % o.groups == 0,
          "--groups must divide --experts into equal groups");
  require(o.groups_per_token <= o.groups, "--groups-per-token must be between 1 and --groups");
  require(static_cast<std::uint64_t>(o.experts / o.groups) * o.groups_per_token >= o.top_k,
          "--groups-per-token groups of --experts / --groups experts hold fewer than --top-k experts");
}

std::string synthetic_command(const SyntheticOptions& o) {
  std::string s = "epsim trace generate --ranks " + std::to_string(o.ranks) + " --experts " +
                  std::to_string(o.experts) + " --top-k " + std::to_string(o.top_k) + " --layers " +
                  std::to_string(o.layers) + " --micro-batches " + std::to_string(o.micro_batches) + " --steps " +
                  std::to_string(o.steps) + " --tokens-per-rank " + std::to_string(o.tokens_per_rank) + " --dist " +
                  popularity_dist_name(o.dist);
  if (o.dist == PopularityDist::zipf) s += " --zipf-alpha " + number_text(o.zipf_alpha);
  if (o.dist == PopularityDist::lognormal) s += " --lognormal-sigma " + number_text(o.lognormal_sigma);
  s += " --rank-skew " + number_text(o.rank_skew) + " --drift " + number_text(o.drift) + " --seed " +
       std::to_string(o.seed);
  if (o.token_ids) s += " --token-ids";
  if (o.groups > 0)
    s += " --groups " + std::to_string(o.groups) + " --groups-per-token " + std::to_string(o.groups_per_token);
  return s;
}

SyntheticTrace::SyntheticTrace(const SyntheticOptions& options) : opt_(options) {
  check_synthetic_options(opt_);
  header_.num_ranks = opt_.ranks;
  header_.num_experts = opt_.experts;
  header_.top_k = opt_.top_k;
  header_.num_layers = opt_.layers;
  for (std::uint32_t l = 0; l < opt_.layers; ++l) header_.layer_ids.push_back(l);
  header_.has_token_ids = opt_.token_ids;
  header_.source_format = "synthetic";
  header_.provenance = "synthetic, made by: " + synthetic_command(opt_);
  header_.rank_assignment = "synthetic: every source rank draws its own " + std::to_string(opt_.tokens_per_rank) +
                            " tokens per record (token t belongs to rank floor(t / " +
                            std::to_string(opt_.tokens_per_rank) + "))";
  for (std::uint32_t l = 0; l < opt_.layers; ++l) {
    Xoshiro256ss base_rng(mix_seed(opt_.seed, {1, l}));
    log_pop_.push_back(base_log_popularity(opt_.dist, opt_.experts, opt_.zipf_alpha, opt_.lognormal_sigma, base_rng));
    drift_rng_.emplace_back(mix_seed(opt_.seed, {3, l}));
    if (opt_.rank_skew > 0) {
      Xoshiro256ss skew_rng(mix_seed(opt_.seed, {2, l}));
      std::vector<std::vector<double>> per_rank(opt_.ranks, std::vector<double>(opt_.experts));
      for (auto& row : per_rank)
        for (double& v : row) v = opt_.rank_skew * skew_rng.normal();
      skew_.push_back(std::move(per_rank));
    }
  }
}

void SyntheticTrace::advance_drift() {
  const std::uint64_t m = static_cast<std::uint64_t>(step_) * opt_.micro_batches + micro_batch_;
  if (opt_.drift <= 0) {
    drift_at_ = m;
    return;
  }
  for (; drift_at_ < m; ++drift_at_)
    for (std::uint32_t l = 0; l < opt_.layers; ++l)
      for (double& v : log_pop_[l]) v += opt_.drift * drift_rng_[l].normal();
}

bool SyntheticTrace::next(TraceRecord& record) {
  if (done_) return false;
  advance_drift();
  const std::uint32_t l = layer_;
  const std::size_t num_samplers = skew_.empty() ? 1 : opt_.ranks;
  samplers_.resize(num_samplers);
  std::vector<double> logs(opt_.experts);
  for (std::size_t s = 0; s < num_samplers; ++s) {
    for (std::uint32_t e = 0; e < opt_.experts; ++e) logs[e] = log_pop_[l][e] + (skew_.empty() ? 0.0 : skew_[l][s][e]);
    const std::vector<double> weights = weights_from_logs(logs);
    if (count_positive(weights) < opt_.top_k)
      throw InputError(kWhere, "",
                       "the popularity is so skewed that fewer than --top-k experts have a weight "
                       "above zero in double precision; lower --zipf-alpha, --lognormal-sigma, "
                       "--rank-skew or --drift");
    if (opt_.group_limited() && !group_limited_feasible(weights, opt_.top_k, opt_.groups, opt_.groups_per_token))
      throw InputError(kWhere, "",
                       "the popularity is so skewed that some --groups-per-token groups hold fewer than --top-k "
                       "experts with a weight above zero in double precision; lower --zipf-alpha, "
                       "--lognormal-sigma, --rank-skew or --drift");
    samplers_[s].reset(weights, opt_.top_k, opt_.groups, opt_.groups_per_token);
  }
  record.step = step_;
  record.micro_batch = micro_batch_;
  record.layer = l;
  Xoshiro256ss rng(record_stream_seed(opt_.seed, 4, step_, micro_batch_, l));
  fill_sampled_record(record, samplers_, opt_.ranks, opt_.experts, opt_.tokens_per_rank, opt_.token_ids, rng);

  if (++layer_ == opt_.layers) {
    layer_ = 0;
    if (++micro_batch_ == opt_.micro_batches) {
      micro_batch_ = 0;
      if (++step_ == opt_.steps) done_ = true;
    }
  }
  return true;
}

void generate_trace(const SyntheticOptions& options, const std::string& path, bool overwrite) {
  SyntheticTrace trace(options);
  TraceWriter writer(path, trace.header(), overwrite);
  TraceRecord record;
  while (trace.next(record)) writer.write(record);
  writer.close();
}

}  // namespace epsim
