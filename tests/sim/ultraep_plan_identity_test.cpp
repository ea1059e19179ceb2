// UltraEP's plan, checked field by field against its definition on many random records (EP 8 to 64,
// 8 to 256 experts, top-1 to top-8, both placements, UltraEP's parameters varied): the instances are
// the masters and then the quota search's copies, every (source, expert) count is routed exactly once
// in a fixed order, each source's tokens are split over the expert's instances by the documented
// rule (locality first, then in proportion to the remaining quotas, largest remainder first), and the
// transfers, GEMM groups and planner cost follow from the instances. Together with the hand-worked
// cases of ultraep_test.cpp, this pins every field of the plan, so a faster plan() cannot change one
// unnoticed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/balancers/placement.hpp"
#include "sim/balancers/ultraep.hpp"
#include "sim/hardware/dtype.hpp"
#include "sim/plan/plan_json.hpp"
#include "tests/sim/plan_checks.hpp"

using namespace epsim;

namespace {

/// One random case: the record, the model and hardware it is planned on, and UltraEP's parameters.
struct Case {
  int gpus = 8;
  int gpus_per_node = 8;
  ModelSpec model;
  HardwareSpec hw;
  TraceRecord record;
  UltraEpParams params;
};

/// Log-normal expert popularity (sigma 0.3 to 2.5) with a per-rank jitter; some cases drop 30% of a
/// rank's experts (zero counts). Each rank routes `tokens` x top-k assignments, at most `tokens` to one
/// expert.
Case random_case(std::mt19937& rng, int index) {
  static const int kGpus[] = {8, 16, 32, 64};
  Case c;
  c.gpus = kGpus[index % 4];
  c.gpus_per_node = index % 5 == 4 ? 4 : 8;
  const int per_gpu[] = {1, 2, 4};
  c.model.name = "random";
  c.model.hidden_size = 1024;
  c.model.expert_ffn_size = 512;
  c.model.num_experts = c.gpus * per_gpu[(index / 4) % 3];
  c.model.top_k = 1 << (index % 4);
  c.model.gated_ffn = index % 2 == 0;
  c.model.dtype_bytes = 2;
  c.model.moe_layers = 1;
  c.hw.name = "random";
  c.hw.gpus_per_node = c.gpus_per_node;
  c.hw.nodes = c.gpus / c.gpus_per_node;
  const int experts = c.model.num_experts;
  const int tokens = index % 3 == 0 ? 64 : 4096;
  std::lognormal_distribution<double> popularity(0.0, 0.3 + 0.55 * (index % 5));
  std::normal_distribution<double> jitter(0.0, 0.3);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> weight(experts);
  for (double& w : weight) w = popularity(rng);
  c.record.step = static_cast<std::uint32_t>(index);
  c.record.counts.assign(static_cast<std::size_t>(c.gpus) * experts, 0);
  for (int s = 0; s < c.gpus; ++s) {
    std::vector<double> w(experts);
    double sum = 0;
    for (int e = 0; e < experts; ++e) {
      w[e] = index % 4 == 3 && uniform(rng) < 0.3 ? 0.0 : weight[e] * std::exp(jitter(rng));
      sum += w[e];
    }
    for (int e = 0; e < experts; ++e) {
      const double share = sum > 0 ? static_cast<double>(tokens) * c.model.top_k * w[e] / sum : 0.0;
      c.record.counts[static_cast<std::size_t>(s) * experts + e] =
          static_cast<std::uint32_t>(std::min(share, static_cast<double>(tokens)));
    }
  }
  switch (index % 6) {
    case 0: break;  // UltraEP's defaults
    case 1: c.params.oracle_eps = 0; c.params.min_tokens_per_replica = 1; break;
    case 2: c.params.locality_aware = false; c.params.spare_slots_per_gpu = 4; break;
    case 3: c.params.allow_zero_master_quota = true; c.params.min_tokens_per_replica = 16; break;
    case 4: c.params.spare_slots_per_gpu = 1; c.params.balance_threshold = 1.05; break;
    case 5:
      c.params.spare_slots_per_gpu = 3;
      c.params.grad_dtype = Dtype::bf16;
      c.params.planner_time_us = 3.5;
      break;
  }
  return c;
}

/// An instance of an expert as the plan must hold it: its GPU and quota.
struct Piece {
  int gpu = 0;
  std::int64_t quota = 0;
  int instance = 0;
};

/// Per expert, its pieces from the public quota search: the master (its load less what the copies
/// take), then the copies domain by domain, each domain's in the order the search made them.
std::vector<std::vector<Piece>> expected_pieces(const Case& c, Placement placement, std::vector<std::int64_t>& load,
                                                std::vector<int>& home) {
  const int experts = c.model.num_experts;
  load.assign(experts, 0);
  home.assign(experts, 0);
  for (int e = 0; e < experts; ++e) {
    home[e] = home_gpu(e, experts, c.gpus, placement);
    for (int s = 0; s < c.gpus; ++s) load[e] += c.record.count(s, e, experts);
  }
  std::vector<std::vector<Piece>> pieces(experts);
  for (int e = 0; e < experts; ++e) pieces[e].push_back({home[e], load[e], e});
  for (int first = 0; first < c.gpus; first += c.gpus_per_node) {
    const int size = std::min(c.gpus_per_node, c.gpus - first);
    const UltraEpDomainQuotas q = ultraep_domain_quotas(load, home, first, size, c.params);
    // The search's own promises: copies inside the domain, never beside the master, one per (expert,
    // GPU), at most spare_slots_per_gpu per GPU, and every rank at or under the accepted cap.
    std::vector<std::int64_t> rank_load(size, 0);
    for (int e = 0; e < experts; ++e)
      if (home[e] >= first && home[e] < first + size) rank_load[home[e] - first] += load[e];
    std::vector<int> slots(size, 0);
    std::set<std::pair<int, int>> copies;
    for (const UltraEpMove& m : q.moves) {
      REQUIRE(m.gpu >= first);
      REQUIRE(m.gpu < first + size);
      CHECK(m.gpu != home[m.expert]);
      CHECK((home[m.expert] >= first && home[m.expert] < first + size));
      CHECK(copies.insert({m.expert, m.gpu}).second);
      CHECK(++slots[m.gpu - first] <= c.params.spare_slots_per_gpu);
      CHECK(m.tokens >= 1);
      rank_load[m.gpu - first] += m.tokens;
      rank_load[home[m.expert] - first] -= m.tokens;
    }
    for (std::int64_t l : rank_load) CHECK(l <= q.threshold);
    if (q.search == UltraEpSearch::none) CHECK(q.moves.empty());
    for (const UltraEpMove& m : q.moves) {
      pieces[m.expert].push_back({m.gpu, m.tokens, 0});
      pieces[m.expert].front().quota -= m.tokens;
    }
  }
  int next = experts;
  for (int e = 0; e < experts; ++e) {
    // A master keeps at least one token unless allowed to empty; no piece is negative.
    if (load[e] > 0 && !c.params.allow_zero_master_quota) CHECK(pieces[e].front().quota >= 1);
    CHECK(pieces[e].front().quota >= 0);
    for (std::size_t i = 1; i < pieces[e].size(); ++i) pieces[e][i].instance = next++;
  }
  return pieces;
}

/// Checks one source's share of expert e's tokens over instances `eligible`, whose rooms (what is left
/// of their quotas) are `room`: instance i gets floor(left * room_i / total) or one more, the extra
/// tokens going to the largest remainders, ties to the smaller key.
void check_proportional(std::int64_t left, const std::vector<std::int64_t>& room, const std::vector<std::int64_t>& got,
                        const std::vector<int>& key) {
  std::int64_t total = 0;
  for (std::int64_t r : room) total += r;
  REQUIRE(total > 0);
  // In 128 bits: a count near 2^32 times a room past 2^31 is past 2^63.
  using Wide = __int128;
  std::vector<bool> extra(room.size(), false);
  for (std::size_t i = 0; i < room.size(); ++i) {
    const std::int64_t base = static_cast<std::int64_t>(Wide{left} * room[i] / total);
    CHECK((got[i] == base || got[i] == base + 1));
    extra[i] = got[i] == base + 1;
  }
  for (std::size_t a = 0; a < room.size(); ++a)
    for (std::size_t b = 0; b < room.size(); ++b) {
      if (!extra[a] || extra[b]) continue;
      const std::int64_t frac_a = static_cast<std::int64_t>(Wide{left} * room[a] % total);
      const std::int64_t frac_b = static_cast<std::int64_t>(Wide{left} * room[b] % total);
      CHECK((frac_a > frac_b || (frac_a == frac_b && key[a] < key[b])));
    }
}

/// Every field of `plan` against the definition (see the file's comment).
void check_plan(const Plan& plan, const Case& c, Placement placement) {
  const int n = c.gpus;
  const int experts = c.model.num_experts;
  std::vector<std::int64_t> load;
  std::vector<int> home;
  const std::vector<std::vector<Piece>> pieces = expected_pieces(c, placement, load, home);
  REQUIRE_NOTHROW(validate_plan(plan, experts, c.gpus_per_node));
  CHECK(plan.balancer == "ultraep");
  CHECK(plan.step == c.record.step);
  CHECK(plan.num_gpus == n);
  CHECK(plan.exchange_stages == 1);
  test::check_counts_preserved(plan, c.record, experts);

  // Instances: masters 0..E-1 at home, then the copies expert by expert, each expert's in its pieces'
  // order.
  std::vector<int> expert_of_copy;
  for (int e = 0; e < experts; ++e)
    for (std::size_t i = 1; i < pieces[e].size(); ++i) expert_of_copy.push_back(e);
  REQUIRE(plan.instances.size() == static_cast<std::size_t>(experts) + expert_of_copy.size());
  for (int e = 0; e < experts; ++e) {
    for (const Piece& p : pieces[e]) {
      const ExpertInstance& inst = plan.instances[p.instance];
      CHECK(inst.expert == e);
      CHECK(inst.gpu == p.gpu);
      CHECK(inst.kind == (p.instance < experts ? InstanceKind::static_expert : InstanceKind::dynamic_expert));
    }
  }

  // Routes: positive, direct, in (source, expert, instance) order, none repeated.
  std::vector<std::int64_t> routed(static_cast<std::size_t>(n) * plan.instances.size(), 0);
  for (std::size_t k = 0; k < plan.routes.size(); ++k) {
    const TokenRoute& r = plan.routes[k];
    const ExpertInstance& inst = plan.instances[r.instance];
    CHECK(r.tokens > 0);
    CHECK(r.via_gpu == -1);
    CHECK(r.stage == 0);
    CHECK(r.carrier == (r.src_rank == inst.gpu ? Carrier::none : Carrier::ep_backend));
    routed[static_cast<std::size_t>(r.src_rank) * plan.instances.size() + r.instance] = r.tokens;
    if (k == 0) continue;
    const TokenRoute& q = plan.routes[k - 1];
    const auto key = [&](const TokenRoute& t) { return std::make_tuple(t.src_rank, plan.instances[t.instance].expert, t.instance); };
    CHECK(key(q) < key(r));
  }
  const auto tokens_to = [&](int s, int instance) {
    return routed[static_cast<std::size_t>(s) * plan.instances.size() + instance];
  };

  // Each expert's split, and each instance within n tokens of its quota (per-source rounding).
  const std::vector<std::int64_t> per_instance = plan.tokens_per_instance();
  for (int e = 0; e < experts; ++e) {
    const std::vector<Piece>& ps = pieces[e];
    for (const Piece& p : ps) CHECK(std::abs(per_instance[p.instance] - p.quota) <= n);
    if (ps.size() == 1) continue;
    std::vector<std::int64_t> left(n), room(ps.size());
    for (int s = 0; s < n; ++s) left[s] = c.record.count(s, e, experts);
    for (std::size_t i = 0; i < ps.size(); ++i) room[i] = ps[i].quota;
    if (c.params.locality_aware) {
      for (std::size_t i = 0; i < ps.size(); ++i) {
        const std::int64_t local = std::min(left[ps[i].gpu], ps[i].quota);
        CHECK(tokens_to(ps[i].gpu, ps[i].instance) == local);
        left[ps[i].gpu] -= local;
        room[i] -= local;
      }
    }
    for (int s = 0; s < n; ++s) {
      if (left[s] == 0) continue;
      std::vector<std::int64_t> r, got;
      std::vector<int> key;
      for (std::size_t i = 0; i < ps.size(); ++i) {
        if (c.params.locality_aware && (ps[i].gpu == s || room[i] <= 0)) {
          if (ps[i].gpu != s) CHECK(tokens_to(s, ps[i].instance) == 0);
          continue;
        }
        r.push_back(room[i]);
        got.push_back(tokens_to(s, ps[i].instance));
        // Ties: the lower host GPU with locality (then the lower instance), the lower instance without.
        key.push_back(c.params.locality_aware ? ps[i].gpu * static_cast<int>(ps.size()) + static_cast<int>(i)
                                              : static_cast<int>(i));
      }
      check_proportional(left[s], r, got, key);
    }
  }

  // Transfers: per copy in instance order, the weights before the dispatch and again before the
  // backward, then the gradients back to the master in grad_dtype.
  const std::int64_t weight_bytes = c.model.expert_weight_bytes();
  const std::int64_t grad_bytes = static_cast<std::int64_t>(c.model.matrices_per_expert()) * c.model.hidden_size *
                                  c.model.expert_ffn_size * element_bytes(c.params.grad_dtype);
  REQUIRE(plan.transfers.size() == 3 * expert_of_copy.size());
  for (std::size_t k = 0; k < expert_of_copy.size(); ++k) {
    const int inst = experts + static_cast<int>(k);
    const int g = plan.instances[inst].gpu;
    const int h = home[expert_of_copy[k]];
    const Transfer* t = &plan.transfers[3 * k];
    CHECK((t[0].kind == TransferKind::weights && t[0].pass == PassKind::forward));
    CHECK((t[1].kind == TransferKind::weights && t[1].pass == PassKind::backward));
    for (int j = 0; j < 2; ++j) {
      CHECK((t[j].instance == inst && t[j].src_gpu == h && t[j].dst_gpu == g && t[j].bytes == weight_bytes));
      CHECK((t[j].carrier == Carrier::ep_backend && t[j].start == TransferStart::before_dispatch));
    }
    CHECK((t[2].kind == TransferKind::gradients && t[2].pass == PassKind::backward));
    CHECK((t[2].instance == inst && t[2].src_gpu == g && t[2].dst_gpu == h && t[2].bytes == grad_bytes));
    CHECK((t[2].carrier == Carrier::ep_backend && t[2].start == TransferStart::after_dispatch));
  }

  // One grouped GEMM per GPU over its instances in index order; the planner on the GPUs first.
  for (int g = 0; g < n; ++g) {
    REQUIRE(plan.gemm_order[g].size() == 1u);
    const GemmGroup& group = plan.gemm_order[g].front();
    std::vector<int> mine;
    for (std::size_t i = 0; i < plan.instances.size(); ++i)
      if (plan.instances[i].gpu == g) mine.push_back(static_cast<int>(i));
    CHECK(group.gpu == g);
    CHECK(group.instances == mine);
    CHECK_FALSE((group.on_arrival || group.after_planner || group.backward_first));
  }
  CHECK(plan.planner.site == PlannerSite::gpu);
  CHECK(plan.planner.start == PlannerStart::before_dispatch);
  CHECK(plan.planner.duration_ps == us_to_ps(c.params.planner_time_us));
  CHECK(plan.planner.d2h_bytes == 0);
}

}  // namespace

namespace {

/// Case c planned under both placements, each plan checked field by field and against the one-source
/// split (CPUs without AVX2), byte for byte. Returns how many of the two plans have copies.
int check_both_placements(const Case& c) {
  int with_copies = 0;
  for (Placement placement : {Placement::contiguous, Placement::interleaved}) {
    CAPTURE(static_cast<int>(placement));
    const BalancerContext ctx{c.gpus, c.gpus_per_node, placement, &c.model, &c.hw};
    UltraEp ultraep(c.params);
    const Plan plan = ultraep.plan(c.record, ctx);
    check_plan(plan, c, placement);
    with_copies += plan.instances.size() > static_cast<std::size_t>(c.model.num_experts) ? 1 : 0;
    UltraEp one_source(c.params);
    one_source.use_vector_split(false);
    CHECK(plan_to_json(one_source.plan(c.record, ctx)).dump() == plan_to_json(plan).dump());
  }
  return with_copies;
}

}  // namespace

TEST_CASE("UltraEP's plans follow their definition field by field on random records, EP 8 to 64") {
  std::mt19937 rng(20261124);
  int with_copies = 0;
  for (int index = 0; index < 60; ++index) {
    CAPTURE(index);
    with_copies += check_both_placements(random_case(rng, index));
  }
  // The random set exercises the split, not only static EP's plan.
  CHECK(with_copies >= 60);
}

TEST_CASE("UltraEP plans the same record the same way whatever it planned before") {
  std::mt19937 rng(7);
  const Case a = random_case(rng, 3);   // EP 64
  const Case b = random_case(rng, 10);  // EP 32, another model and record
  const BalancerContext ctx_a{a.gpus, a.gpus_per_node, Placement::contiguous, &a.model, &a.hw};
  const BalancerContext ctx_b{b.gpus, b.gpus_per_node, Placement::interleaved, &b.model, &b.hw};
  UltraEp ultraep(a.params);
  const std::string first = plan_to_json(ultraep.plan(a.record, ctx_a)).dump();
  ultraep.plan(b.record, ctx_b);
  CHECK(plan_to_json(ultraep.plan(a.record, ctx_a)).dump() == first);
  CHECK(plan_to_json(UltraEp(a.params).plan(a.record, ctx_a)).dump() == first);
}

TEST_CASE("UltraEP plans records whose loads pass 2^32 by its definition, and the same with one source at a time") {
  // A record's counts are 32-bit, and an expert's load may pass 2^32 (a trace file holds fewer than
  // 2^32 tokens a record, a record built in memory need not). plan() sums the loads in 32 bits while
  // that is exact, splits four sources at a time in double precision while counts times rooms stay
  // below 2^50, and takes a count times a room in 128 bits past 2^63: counts near 2^32 take all three
  // past their bounds. (Before, the 64-bit products wrapped: instances came out 12 billion tokens off
  // their quotas.)
  std::mt19937 rng(20261129);
  int past_32_bits = 0;
  for (int index = 0; index < 12; ++index) {
    Case c = random_case(rng, index);
    std::uint32_t most = 1;
    for (const std::uint32_t count : c.record.counts) most = std::max(most, count);
    // As large as a count may be, with the record under kMaxPlanTokens.
    std::uint64_t total = 0;
    for (const std::uint32_t count : c.record.counts) total += count;
    const std::uint64_t scale = std::min<std::uint64_t>(std::numeric_limits<std::uint32_t>::max() / most,
                                                        static_cast<std::uint64_t>(kMaxPlanTokens / 2) / total);
    for (std::uint32_t& count : c.record.counts) count = static_cast<std::uint32_t>(count * scale);
    const int experts = c.model.num_experts;
    for (int e = 0; e < experts; ++e) {
      std::uint64_t load = 0;
      for (int s = 0; s < c.gpus; ++s) load += c.record.count(s, e, experts);
      past_32_bits += load > std::numeric_limits<std::uint32_t>::max() ? 1 : 0;
    }
    CAPTURE(index);
    check_both_placements(c);
  }
  // Loads past 2^32 are what the set is for.
  CHECK(past_32_bits >= 100);
}
