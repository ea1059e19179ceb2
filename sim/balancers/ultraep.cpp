#include "sim/balancers/ultraep.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

#include "sim/balancers/placement.hpp"

namespace epsim {

namespace {

// plan() stands for a kernel on the critical path of every layer (UltraEP's takes about 70 us at EP
// 64) and runs for every record replayed, so it is written to cost little more than writing the Plan
// itself: no allocation inside the search's loops (the oracle's state lives in Domain and is reset
// per cap), flat arrays indexed by expert instead of a vector per expert, the counts read in memory
// order, each source's split computed where its routes are written, and every output vector sized
// once, so that the large routes vector is never copied while it grows.

/// One domain's loads, in domain-local GPU indices, and the oracle's state for the cap it tries.
struct Domain {
  int first = 0;
  std::vector<std::int64_t> rank_load;  ///< L_r from master experts only
  /// Master experts rank by rank, each rank's by descending load (ties: lower id): rank r's are
  /// masters[masters_begin[r] .. masters_begin[r + 1]).
  std::vector<int> masters;
  std::vector<int> masters_begin;
  std::vector<int> sources;  ///< ranks by descending load (ties: lower index)
  // The oracle's state, sized once and reset for every cap.
  std::vector<std::int64_t> slack;
  std::vector<int> slots_used;
  std::vector<char> has_copy;  ///< whether the expert being exported already has a copy on the rank
  std::vector<UltraEpMove> moves;  ///< the moves of the last cap tried
  std::vector<int> fill;           ///< a cursor per rank while `masters` is filled
};

/// Whether the domain's total slack under cap T covers its total excess (the kernel's coarse test).
bool capacity_feasible(std::int64_t cap, const Domain& d) {
  std::int64_t excess = 0;
  std::int64_t slack = 0;
  for (std::int64_t l : d.rank_load) {
    excess += std::max<std::int64_t>(l - cap, 0);
    slack += std::max<std::int64_t>(cap - l, 0);
  }
  return excess <= slack;
}

/// The oracle for cap T; fills d.moves (global GPU ids) and returns true when every rank fits under
/// T. The floor a copy's quota must reach is ceil(need / feasible targets) with `dynamic_floor` (the
/// fast path), else min_tokens_per_replica.
bool quotas_for(std::int64_t cap, Domain& d, const std::vector<std::int64_t>& expert_load, const UltraEpParams& p,
                bool dynamic_floor) {
  const int g_count = static_cast<int>(d.rank_load.size());
  std::vector<UltraEpMove>& moves = d.moves;
  moves.clear();
  if (!capacity_feasible(cap, d)) return false;
  for (int r = 0; r < g_count; ++r) {
    d.slack[r] = std::max<std::int64_t>(cap - d.rank_load[r], 0);
    d.slots_used[r] = 0;
    d.has_copy[r] = 0;
  }
  for (int src : d.sources) {
    std::int64_t need = d.rank_load[src] - cap;
    if (need <= 0) continue;
    for (int m = d.masters_begin[src]; m < d.masters_begin[src + 1]; ++m) {
      const int e = d.masters[m];
      const std::int64_t keep = !p.allow_zero_master_quota && expert_load[e] > 0 ? 1 : 0;
      std::int64_t available = expert_load[e] - keep;
      const std::size_t first_move = moves.size();
      while (need > 0 && available > 0) {
        // A source's own rank has no slack (it is above T), and neither has a master's home when its
        // expert is exported: a copy never lands beside its master.
        auto open = [&](int t) { return d.slack[t] > 0 && d.slots_used[t] < p.spare_slots_per_gpu && !d.has_copy[t]; };
        std::int64_t floor_q = p.min_tokens_per_replica;
        if (dynamic_floor) {
          std::int64_t feasible = 0;
          for (int t = 0; t < g_count; ++t) feasible += open(t) ? 1 : 0;
          if (feasible == 0) break;
          floor_q = std::max<std::int64_t>(1, (need + feasible - 1) / feasible);
        }
        int target = -1;
        for (int t = 0; t < g_count; ++t) {
          if (!open(t) || std::min({need, d.slack[t], available}) < floor_q) continue;
          if (target < 0 || d.slack[t] > d.slack[target]) target = t;  // largest slack, ties: lower index
        }
        if (target < 0) break;
        const std::int64_t q = std::min({need, d.slack[target], available});
        moves.push_back({e, d.first + target, q});
        d.slack[target] -= q;
        ++d.slots_used[target];
        d.has_copy[target] = 1;
        available -= q;
        need -= q;
      }
      // An expert is exported from its home rank only, once per cap, so the copies marked are this
      // expert's alone: unmark them for the next one.
      for (std::size_t k = first_move; k < moves.size(); ++k) d.has_copy[moves[k].gpu - d.first] = 0;
      if (need == 0) break;
    }
    if (need > 0) return false;
  }
  return true;
}

__extension__ typedef unsigned __int128 Wide;

/// a / b, remainder in `rem`, for a >= 0 and b > 0, with `inverse` = floor((2^64 - 1) / b): the high
/// half of a x inverse is a / b rounded down or one less (it is within a / 2^64 < 1/2 of a / b), and
/// one comparison corrects it. A multiplication instead of a 64-bit division, which is several times
/// slower and is done for every (source, instance) pair of a split expert.
std::int64_t divide(std::int64_t a, std::int64_t b, std::uint64_t inverse, std::int64_t& rem) {
  std::int64_t q = static_cast<std::int64_t>((static_cast<Wide>(static_cast<std::uint64_t>(a)) * inverse) >> 64);
  std::int64_t r = a - q * b;
  if (r >= b) {
    ++q;
    r -= b;
  }
  rem = r;
  return q;
}

/// One instance of an expert with copies.
struct SplitInstance {
  int gpu = 0;
  int instance = 0;  ///< its index in the plan
  std::int64_t quota = 0;
  std::int64_t room = 0;  ///< what is left of the quota once its host has kept its own tokens (locality)
  int tie = 0;            ///< its rank among equal remainders (lower first)
};

/// How the sources split an expert's tokens over its instances, worked out once per plan so that each
/// source's split is computed where its routes are written. Locality first: each instance's host keeps
/// its own tokens up to the quota. Then every source splits what is left over the other instances in
/// proportion to their remaining quotas (their room), largest remainder first (ties: lower host GPU,
/// then lower instance). Without locality every source splits all its tokens in proportion to the
/// quotas (ties: lower instance).
struct ExpertSplit {
  const SplitInstance* instances = nullptr;  ///< the master, then the copies as the oracle made them
  int k = 0;
  /// With locality, a source that hosts an instance has either kept all its tokens there or filled
  /// that instance's quota, so every source with tokens left splits them over the same instances: those
  /// with room. Without locality, over all of them. eligible[0 .. m) index `instances`.
  const int* eligible = nullptr;
  int m = 0;
  std::int64_t total_room = 0;  ///< the rooms' sum (every source's leftover tokens together)
  std::uint64_t inverse = 0;  ///< floor((2^64 - 1) / total_room), for divide()
  bool locality_aware = true;
  int expert = 0;
  std::size_t table = 0;  ///< where its sources' splits start in plan()'s table (k entries a source)
};

/// The most eligible instances over which share_left picks the extra tokens' instances one by one.
constexpr int kSelectedSplit = 8;

/// share_left with two eligible instances: the general case below with one division and at most one
/// token left over.
inline void share_two(const ExpertSplit& x, std::int64_t left, std::int64_t* tokens) {
  const int a = x.eligible[0];
  const int b = x.eligible[1];
  std::int64_t frac_a = 0;
  const std::int64_t share = divide(left * x.instances[a].room, x.total_room, x.inverse, frac_a);
  tokens[a] += share;
  if (frac_a == 0) {
    tokens[b] += left - share;
    return;
  }
  // b's remainder is total_room - frac_a; the larger remainder takes the token (ties: lower tie).
  const std::int64_t frac_b = x.total_room - frac_a;
  const bool to_b = frac_b != frac_a ? frac_b > frac_a : x.instances[b].tie < x.instances[a].tie;
  tokens[b] += left - share - (to_b ? 0 : 1);
  tokens[a] += to_b ? 0 : 1;
}

/// Shares `left` tokens of a source over the expert's eligible instances in proportion to their
/// room, largest remainder first: tokens[i] += instance i's share. `frac` and `order` are working
/// space (k entries each).
void share_left(const ExpertSplit& x, std::int64_t left, std::int64_t* tokens, std::int64_t* frac, int* order) {
  const int m = x.m;
  const int* eligible = x.eligible;
  if (m == 1) {  // its room is all the room there is: the whole share, nothing left over
    tokens[eligible[0]] += left;
    return;
  }
  if (m == 2) {
    share_two(x, left, tokens);
    return;
  }
  // All but the last eligible instance by division. The rooms add up to total_room, so the last
  // one's share and remainder follow from the sums: with R the others' remainders, the source has
  // extra = ceil(R / total_room) tokens left over (fewer than m), the last instance takes what the
  // others' shares and the extra tokens leave, and its remainder is extra * total_room - R.
  const std::int64_t total = x.total_room;
  std::int64_t given = 0;
  std::int64_t rest = 0;
  for (int t = 0; t + 1 < m; ++t) {
    const int i = eligible[t];
    // Token counts per expert and micro-batch stay far below 2^31, so the product fits.
    const std::int64_t share = divide(left * x.instances[i].room, total, x.inverse, frac[i]);
    tokens[i] += share;
    given += share;
    rest += frac[i];
  }
  std::int64_t extra = 0;
  while (extra * total < rest) ++extra;
  const int last = eligible[m - 1];
  tokens[last] += left - given - extra;
  frac[last] = extra * total - rest;
  // The `extra` first instances in this order get one token more: a strict order (an expert's
  // instances are on distinct GPUs), so they are one set however they are selected.
  auto before = [&](int a, int b) {
    return frac[a] != frac[b] ? frac[a] > frac[b] : x.instances[a].tie < x.instances[b].tie;
  };
  if (extra == 0) return;
  if (extra == 1) {
    int best = eligible[0];
    for (int t = 1; t < m; ++t)
      if (before(eligible[t], best)) best = eligible[t];
    ++tokens[best];
    return;
  }
  if (extra == m - 1) {  // all but the last in that order
    int worst = eligible[0];
    for (int t = 0; t < m; ++t) {
      ++tokens[eligible[t]];
      if (before(worst, eligible[t])) worst = eligible[t];
    }
    --tokens[worst];
    return;
  }
  std::copy(eligible, eligible + m, order);
  if (m <= kSelectedSplit) {  // picked one by one: fewer comparisons than nth_element makes for a few
    for (int r = 0; r < extra; ++r) {
      int best = r;
      for (int t = r + 1; t < m; ++t)
        if (before(order[t], order[best])) best = t;
      std::swap(order[r], order[best]);
      ++tokens[order[r]];
    }
    return;
  }
  std::nth_element(order, order + (extra - 1), order + m, before);
  for (std::int64_t r = 0; r < extra; ++r) ++tokens[order[r]];
}


/// Source s's `count` tokens of the expert over its instances: tokens[i] for instance i, with
/// `frac` and `order` as working space (k entries each). A source that hosts none of the expert's
/// instances keeps nothing: its split is share_left's alone.
void split_source(const ExpertSplit& x, int s, std::int64_t count, std::int64_t* tokens, std::int64_t* frac,
                  int* order) {
  // With locality, the instance on the source's own GPU (an expert has at most one per GPU) keeps its
  // tokens up to its quota.
  std::int64_t kept = 0;
  for (int i = 0; i < x.k; ++i) {
    tokens[i] = x.locality_aware && x.instances[i].gpu == s ? std::min(count, x.instances[i].quota) : 0;
    kept += tokens[i];
  }
  const std::int64_t left = count - kept;
  if (left == 0) return;
  share_left(x, left, tokens, frac, order);
}

/// Writes the route of `tokens` from `src` to `instance` on `gpu` over `route`, a direct route (its
/// via_gpu and stage stay as they are), and returns the next one.
inline TokenRoute* write_route(TokenRoute* route, int src, int instance, std::int64_t tokens, int gpu) {
  route->src_rank = src;
  route->instance = instance;
  route->tokens = tokens;
  route->carrier = gpu == src ? Carrier::none : Carrier::ep_backend;
  return route + 1;
}

/// ultraep_domain_quotas with its moves left in d.moves (the result's are empty). `d` is the search's
/// working space; plan() passes the same one for every domain so that its buffers are allocated once.
UltraEpDomainQuotas search_domain(const std::vector<std::int64_t>& expert_load, const std::vector<int>& home,
                                  int first_gpu, int num_domain_gpus, const UltraEpParams& params, Domain& d) {
  d.first = first_gpu;
  d.moves.clear();
  d.rank_load.assign(num_domain_gpus, 0);
  d.masters_begin.assign(num_domain_gpus + 1, 0);
  for (std::size_t e = 0; e < expert_load.size(); ++e) {
    const int r = home[e] - first_gpu;
    if (r < 0 || r >= num_domain_gpus) continue;
    d.rank_load[r] += expert_load[e];
    ++d.masters_begin[r + 1];
  }
  for (int r = 0; r < num_domain_gpus; ++r) d.masters_begin[r + 1] += d.masters_begin[r];
  d.masters.resize(d.masters_begin[num_domain_gpus]);
  d.fill.assign(d.masters_begin.begin(), d.masters_begin.end() - 1);
  for (std::size_t e = 0; e < expert_load.size(); ++e) {
    const int r = home[e] - first_gpu;
    if (r >= 0 && r < num_domain_gpus) d.masters[d.fill[r]++] = static_cast<int>(e);
  }
  // Both orders break ties by index, so they are total and std::sort (no buffer) gives the one result.
  for (int r = 0; r < num_domain_gpus; ++r)
    std::sort(d.masters.begin() + d.masters_begin[r], d.masters.begin() + d.masters_begin[r + 1], [&](int a, int b) {
      return expert_load[a] != expert_load[b] ? expert_load[a] > expert_load[b] : a < b;
    });
  d.sources.resize(num_domain_gpus);
  std::iota(d.sources.begin(), d.sources.end(), 0);
  std::sort(d.sources.begin(), d.sources.end(), [&](int a, int b) {
    return d.rank_load[a] != d.rank_load[b] ? d.rank_load[a] > d.rank_load[b] : a < b;
  });
  d.slack.resize(num_domain_gpus);
  d.slots_used.resize(num_domain_gpus);
  d.has_copy.resize(num_domain_gpus);

  const std::int64_t total = std::accumulate(d.rank_load.begin(), d.rank_load.end(), std::int64_t{0});
  const std::int64_t max_load = *std::max_element(d.rank_load.begin(), d.rank_load.end());
  UltraEpDomainQuotas result;
  result.threshold = max_load;
  if (params.spare_slots_per_gpu <= 0 || num_domain_gpus <= 1) return result;

  // Single precision, as the kernel computes both bounds from its float parameters.
  const float threshold_factor = std::max(static_cast<float>(params.balance_threshold), 1.0f);
  std::int64_t lo = static_cast<std::int64_t>(
      std::ceil(static_cast<float>(total) / static_cast<float>(num_domain_gpus) * threshold_factor));
  std::int64_t hi = std::max(max_load, lo);
  // The last cap the oracle accepted (with the static floor), whose moves are still in d.moves.
  std::int64_t moves_cap = -1;
  auto oracle = [&](std::int64_t cap, bool dynamic_floor) {
    const bool ok = quotas_for(cap, d, expert_load, params, dynamic_floor);
    moves_cap = ok && !dynamic_floor ? cap : -1;
    return ok;
  };
  auto accept = [&](std::int64_t cap, UltraEpSearch how) {
    result.threshold = cap;
    result.search = how;
    return result;
  };

  // Fast path: the tolerance above the floor, then two steps of 1% of hi each.
  const float eps = std::max(static_cast<float>(params.oracle_eps), 0.0f);
  std::int64_t cap = std::max(static_cast<std::int64_t>(std::ceil(static_cast<float>(lo) * (1.0f + eps))), lo);
  const std::int64_t step = std::max<std::int64_t>(1, (hi + 99) / 100);
  for (int retry = 0; retry <= kUltraEpFastRetries; ++retry) {
    ++result.fast_tries;
    if (oracle(cap, true)) return accept(cap, UltraEpSearch::fast);
    cap = std::min(hi, cap + step);
  }

  // The smallest cap whose slack covers the excess, tried once with the static floor.
  std::int64_t below = lo;
  std::int64_t above = hi;
  while (below < above) {
    const std::int64_t mid = below + (above - below) / 2;
    if (capacity_feasible(mid, d))
      above = mid;
    else
      below = mid + 1;
  }
  lo = below;
  if (oracle(lo, false)) return accept(lo, UltraEpSearch::precheck);
  lo = std::min(lo + 1, hi);

  // Four probes per round over [lo, hi); the first feasible one bounds the next round. The oracle is
  // not monotone in T, so this is not the smallest feasible cap in general: it is the kernel's.
  while (lo < hi) {
    const std::int64_t range = hi - lo;
    const bool small = range <= kUltraEpProbes;
    int first = -1;
    std::int64_t probe[kUltraEpProbes];
    for (int w = 0; w < kUltraEpProbes; ++w) {
      probe[w] = small ? lo + w : lo + range * (w + 1) / (kUltraEpProbes + 1);
      if (first < 0 && probe[w] < hi && oracle(probe[w], false)) first = w;
    }
    if (small) {
      lo = first >= 0 ? probe[first] : hi;
      hi = lo;
    } else if (first >= 0) {
      hi = probe[first];
      if (first > 0) lo = probe[first - 1] + 1;
    } else {
      lo = probe[kUltraEpProbes - 1] + 1;
    }
  }
  // The search ends on a probe it accepted (its moves are at hand: the oracle is a function of the
  // cap) or on the initial hi, which it never tried.
  if (moves_cap != lo && !oracle(lo, false))
    throw std::logic_error("ultraep: the probe search ended on an infeasible cap");
  return accept(lo, UltraEpSearch::probes);
}

}  // namespace

UltraEpDomainQuotas ultraep_domain_quotas(const std::vector<std::int64_t>& expert_load, const std::vector<int>& home,
                                          int first_gpu, int num_domain_gpus, const UltraEpParams& params) {
  Domain d;
  UltraEpDomainQuotas result = search_domain(expert_load, home, first_gpu, num_domain_gpus, params, d);
  result.moves = std::move(d.moves);
  return result;
}

Plan UltraEp::plan(const TraceRecord& record, const BalancerContext& context) {
  const int n = context.num_gpus;
  const int experts = context.model->num_experts;
  // A bug in the caller, not bad input; checked always because a zero would loop forever.
  if (context.gpus_per_node <= 0) throw std::logic_error("ultraep: gpus_per_node must be positive");
  // The counts once, row by row as they lie in memory: each expert's load and the number of sources
  // that send it tokens (its routes when it has no copy).
  const std::uint32_t* counts = record.counts.data();
  std::vector<std::int64_t> load(experts, 0);
  std::vector<int> senders(experts, 0);
  for (int s = 0; s < n; ++s) {
    const std::uint32_t* row = counts + static_cast<std::size_t>(s) * experts;
    for (int e = 0; e < experts; ++e) {
      load[e] += row[e];
      senders[e] += row[e] != 0 ? 1 : 0;
    }
  }
  std::vector<int> home(experts);
  for (int e = 0; e < experts; ++e) home[e] = home_gpu(e, experts, n, context.placement);

  // Every domain's copies, then expert by expert: expert e's copies are copy_gpu / copy_quota
  // [copy_begin[e], copy_begin[e + 1]), in the order the oracle made them (the kernel's replica order,
  // which the reroute's ties follow); an expert's copies all come from its home's domain. Copy j is
  // instance experts + j, so instances run expert by expert as well. The master's quota is what the
  // copies leave.
  std::vector<UltraEpMove> moves;
  Domain domain;
  for (int first = 0; first < n; first += context.gpus_per_node) {
    const int size = std::min(context.gpus_per_node, n - first);
    search_domain(load, home, first, size, params_, domain);
    moves.insert(moves.end(), domain.moves.begin(), domain.moves.end());
  }
  const int copies = static_cast<int>(moves.size());
  std::vector<int> copy_begin(experts + 1, 0);
  for (const UltraEpMove& m : moves) ++copy_begin[m.expert + 1];
  for (int e = 0; e < experts; ++e) copy_begin[e + 1] += copy_begin[e];
  std::vector<int> copy_gpu(copies);
  std::vector<std::int64_t> copy_quota(copies);
  std::vector<std::int64_t> master_quota = load;
  {
    std::vector<int> fill(copy_begin.begin(), copy_begin.end() - 1);
    for (const UltraEpMove& m : moves) {
      const int j = fill[m.expert]++;
      copy_gpu[j] = m.gpu;
      copy_quota[j] = m.tokens;
      master_quota[m.expert] -= m.tokens;
    }
  }

  Plan plan = start_plan("ultraep", record, n);
  plan.planner.site = PlannerSite::gpu;
  plan.planner.start = PlannerStart::before_dispatch;
  plan.planner.duration_ps = us_to_ps(params_.planner_time_us);
  // One grouped GEMM per GPU over its master and redundant slots, as UltraEP runs it: the copies'
  // weights are in before the dispatch.
  std::vector<int> on_gpu(n, 0);
  for (int e = 0; e < experts; ++e) ++on_gpu[home[e]];
  for (int j = 0; j < copies; ++j) ++on_gpu[copy_gpu[j]];
  for (int g = 0; g < n; ++g) {
    plan.gemm_order[g].push_back(GemmGroup{g, {}});
    plan.gemm_order[g].front().instances.reserve(on_gpu[g]);
  }
  // Instance e is expert e's master, as in static EP, so a plan without moves is static EP's.
  plan.instances.reserve(static_cast<std::size_t>(experts) + copies);
  for (int e = 0; e < experts; ++e) {
    plan.instances.push_back({e, home[e], InstanceKind::static_expert});
    plan.gemm_order[home[e]].front().instances.push_back(e);
  }
  const std::int64_t weight_bytes = context.model->expert_weight_bytes();
  const std::int64_t grad_bytes = static_cast<std::int64_t>(context.model->matrices_per_expert()) *
                                  context.model->hidden_size * context.model->expert_ffn_size *
                                  element_bytes(params_.grad_dtype);
  plan.transfers.reserve(3 * static_cast<std::size_t>(copies));
  for (int e = 0; e < experts; ++e) {
    for (int j = copy_begin[e]; j < copy_begin[e + 1]; ++j) {
      const int g = copy_gpu[j];
      const int inst = experts + j;
      plan.instances.push_back({e, g, InstanceKind::dynamic_expert});
      plan.gemm_order[g].front().instances.push_back(inst);
      // weight_sync, joined before the dispatch, again before the expert backward (the copies' buffers
      // are reused across layers), and grad_reduce: UltraEP's SM kernels, i.e. the EP backend.
      for (const PassKind pass : {PassKind::forward, PassKind::backward})
        plan.transfers.push_back({TransferKind::weights, pass, inst, home[e], g, weight_bytes, Carrier::ep_backend,
                                  TransferStart::before_dispatch});
      plan.transfers.push_back(
          {TransferKind::gradients, PassKind::backward, inst, g, home[e], grad_bytes, Carrier::ep_backend});
    }
  }

  // Each expert with copies gets an ExpertSplit in `splits` (split_of[e] is its index there, -1
  // without copies); its k instances are a run of split_instances and its eligible ones a run of
  // `eligible` at the same place.
  const bool locality = params_.locality_aware;
  std::vector<int> split_of(experts, -1);
  std::vector<ExpertSplit> splits;
  std::vector<SplitInstance> split_instances;
  std::vector<int> eligible;
  int most_instances = 1;
  for (int e = 0; e < experts; ++e)
    if (copy_begin[e + 1] > copy_begin[e]) {
      split_of[e] = static_cast<int>(splits.size());
      splits.emplace_back();
      most_instances = std::max(most_instances, 1 + copy_begin[e + 1] - copy_begin[e]);
    }
  split_instances.resize(splits.size() + copies);
  eligible.resize(splits.size() + copies);
  for (int e = 0, first = 0; e < experts; ++e) {
    if (split_of[e] < 0) continue;
    ExpertSplit& x = splits[split_of[e]];
    x.k = 1 + copy_begin[e + 1] - copy_begin[e];
    SplitInstance* inst = split_instances.data() + first;
    inst[0].gpu = home[e];
    inst[0].instance = e;
    inst[0].quota = master_quota[e];
    for (int i = 1; i < x.k; ++i) {
      const int j = copy_begin[e] + i - 1;
      inst[i].gpu = copy_gpu[j];
      inst[i].instance = experts + j;
      inst[i].quota = copy_quota[j];
    }
    int* elig = eligible.data() + first;
    for (int i = 0; i < x.k; ++i) {
      const std::int64_t own = locality ? counts[static_cast<std::size_t>(inst[i].gpu) * experts + e] : 0;
      inst[i].room = inst[i].quota - std::min(own, inst[i].quota);
      inst[i].tie = locality ? inst[i].gpu : i;
      x.total_room += inst[i].room;
      if (!locality || inst[i].room > 0) elig[x.m++] = i;
    }
    x.instances = inst;
    x.eligible = elig;
    x.inverse = x.total_room > 0 ? ~std::uint64_t{0} / static_cast<std::uint64_t>(x.total_room) : 0;
    x.locality_aware = locality;
    x.expert = e;
    x.table = static_cast<std::size_t>(first) * n;
    first += x.k;
  }

  // Every sending source's split of every expert with copies, expert by expert (the same instances,
  // rooms and divisor for all of an expert's sources, so that the split's branches go the same way
  // from one source to the next): source s's tokens for instance i of split x are
  // split_tokens[x.table + s * x.k + i]. Only a source that hosts one of the expert's instances keeps
  // tokens (with locality); the others share all of theirs.
  std::vector<std::int64_t> split_tokens(split_instances.size() * static_cast<std::size_t>(n), 0);
  {
    std::vector<std::int64_t> frac(most_instances);
    std::vector<int> order(most_instances);
    std::vector<char> hosts(n, 0);
    for (const ExpertSplit& x : splits) {
      if (locality)
        for (int i = 0; i < x.k; ++i) hosts[x.instances[i].gpu] = 1;
      const std::uint32_t* column = counts + x.expert;
      std::int64_t* out = split_tokens.data() + x.table;
      // The common case, two instances sharing, has a loop of its own without share_left's call.
      const bool two = x.m == 2;
      for (int s = 0; s < n; ++s, out += x.k) {
        const std::int64_t c = column[static_cast<std::size_t>(s) * experts];
        if (c == 0) continue;
        if (hosts[s])
          split_source(x, s, c, out, frac.data(), order.data());
        else if (two)
          share_two(x, c, out);
        else
          share_left(x, c, out, frac.data(), order.data());
      }
      if (locality)
        for (int i = 0; i < x.k; ++i) hosts[x.instances[i].gpu] = 0;
    }
  }

  // Routes source by source, expert by expert, instance by instance (master first), zeros left out.
  // They are written in place through a pointer into routes_, a vector kept between calls and sized
  // for the most there can be (a sending source reaches at most each instance of the expert), and
  // then copied into the plan at once: appending them one by one (a capacity check, a
  // default-constructed route and a size update each) cost more than the rest of plan(), and so did
  // default-constructing the plan's routes before writing them. routes_ is filled with direct routes
  // when it grows and never has their via_gpu and stage changed, and every other field of a route
  // used is written here.
  std::size_t most_routes = 0;
  for (int e = 0; e < experts; ++e)
    most_routes += static_cast<std::size_t>(senders[e]) * (1 + copy_begin[e + 1] - copy_begin[e]);
  if (routes_.size() < most_routes) routes_.resize(most_routes, TokenRoute{0, 0, 0, Carrier::ep_backend, -1, 0});
  TokenRoute* route = routes_.data();
  // Each source's row runs from one expert with copies to the next (`splits` is in expert order):
  // the experts between them have one route each, in a loop with nothing else to decide.
  for (int s = 0; s < n; ++s) {
    const std::uint32_t* row = counts + static_cast<std::size_t>(s) * experts;
    int e = 0;
    for (const ExpertSplit& x : splits) {
      for (; e < x.expert; ++e)
        if (row[e] != 0) route = write_route(route, s, e, row[e], home[e]);
      ++e;
      if (row[x.expert] == 0) continue;
      const std::int64_t* tokens = split_tokens.data() + x.table + static_cast<std::size_t>(s) * x.k;
      for (int i = 0; i < x.k; ++i)
        if (tokens[i] != 0) route = write_route(route, s, x.instances[i].instance, tokens[i], x.instances[i].gpu);
    }
    for (; e < experts; ++e)
      if (row[e] != 0) route = write_route(route, s, e, row[e], home[e]);
  }
  plan.routes.assign(routes_.data(), route);
  return plan;
}

std::unique_ptr<Balancer> make_ultraep(ConfigMap& params) {
  constexpr std::int64_t kMaxCount = std::numeric_limits<int>::max();
  UltraEpParams p;
  p.spare_slots_per_gpu =
      static_cast<int>(params.get_int_or("spare_slots_per_gpu", p.spare_slots_per_gpu, 0, kMaxCount));
  p.balance_threshold = params.get_double_or("balance_threshold", p.balance_threshold, 1.0, 1e6);
  p.oracle_eps = params.get_double_or("oracle_eps", p.oracle_eps, 0.0, 1e6);
  p.min_tokens_per_replica =
      params.get_int_or("min_tokens_per_replica", p.min_tokens_per_replica, 1, std::numeric_limits<std::int64_t>::max());
  p.allow_zero_master_quota = params.get_bool_or("allow_zero_master_quota", p.allow_zero_master_quota);
  p.locality_aware = params.get_bool_or("locality_aware", p.locality_aware);
  // An hour bounds the value so that the conversion to picoseconds cannot overflow.
  p.planner_time_us = params.get_double_or("planner_time_us", p.planner_time_us, 0, 3.6e9);
  p.grad_dtype = parse_dtype(params.get_choice_or("grad_dtype", to_string(p.grad_dtype), dtype_names()));
  return std::make_unique<UltraEp>(p);
}

}  // namespace epsim
