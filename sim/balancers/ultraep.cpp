#include "sim/balancers/ultraep.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "sim/balancers/placement.hpp"

namespace epsim {

namespace {

/// One domain's loads, in domain-local GPU indices.
struct Domain {
  int first = 0;
  std::vector<std::int64_t> rank_load;     ///< L_r from master experts only
  std::vector<std::vector<int>> masters;   ///< per rank, its master experts by descending load (ties: lower id)
  std::vector<int> sources;                ///< ranks by descending load (ties: lower index)
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

/// The oracle for cap T; fills `moves` (global GPU ids) and returns true when every rank fits under
/// T. The floor a copy's quota must reach is ceil(need / feasible targets) with `dynamic_floor` (the
/// fast path), else min_tokens_per_replica.
bool quotas_for(std::int64_t cap, const Domain& d, const std::vector<std::int64_t>& expert_load,
                const UltraEpParams& p, bool dynamic_floor, std::vector<UltraEpMove>& moves) {
  const int g_count = static_cast<int>(d.rank_load.size());
  moves.clear();
  if (!capacity_feasible(cap, d)) return false;
  std::vector<std::int64_t> slack(g_count);
  for (int r = 0; r < g_count; ++r) slack[r] = std::max<std::int64_t>(cap - d.rank_load[r], 0);
  std::vector<int> slots_used(g_count, 0);
  std::vector<std::vector<int>> holds(g_count);  // copies placed on each rank (its masters are at home)
  auto holds_copy = [&](int t, int e) { return std::find(holds[t].begin(), holds[t].end(), e) != holds[t].end(); };
  for (int src : d.sources) {
    std::int64_t need = d.rank_load[src] - cap;
    if (need <= 0) continue;
    for (int e : d.masters[src]) {
      const std::int64_t keep = !p.allow_zero_master_quota && expert_load[e] > 0 ? 1 : 0;
      std::int64_t available = expert_load[e] - keep;
      while (need > 0 && available > 0) {
        // A source's own rank has no slack (it is above T), and neither has a master's home when its
        // expert is exported: a copy never lands beside its master.
        auto open = [&](int t) { return slack[t] > 0 && slots_used[t] < p.spare_slots_per_gpu && !holds_copy(t, e); };
        std::int64_t floor_q = p.min_tokens_per_replica;
        if (dynamic_floor) {
          std::int64_t feasible = 0;
          for (int t = 0; t < g_count; ++t) feasible += open(t) ? 1 : 0;
          if (feasible == 0) break;
          floor_q = std::max<std::int64_t>(1, (need + feasible - 1) / feasible);
        }
        int target = -1;
        for (int t = 0; t < g_count; ++t) {
          if (!open(t) || std::min({need, slack[t], available}) < floor_q) continue;
          if (target < 0 || slack[t] > slack[target]) target = t;  // largest slack, ties: lower index
        }
        if (target < 0) break;
        const std::int64_t q = std::min({need, slack[target], available});
        moves.push_back({e, d.first + target, q});
        slack[target] -= q;
        ++slots_used[target];
        holds[target].push_back(e);
        available -= q;
        need -= q;
      }
      if (need == 0) break;
    }
    if (need > 0) return false;
  }
  return true;
}

/// Tokens of expert e from each source rank to each of its instances: out[s * k + i]. `gpus` lists
/// the instances' GPUs in the kernel's order (the master, then the copies as the oracle made them).
/// Locality first (each instance's host keeps its own tokens up to the quota), then every source
/// splits what is left over the other instances in proportion to their remaining quotas, largest
/// remainder first (ties: lower host GPU, then lower instance). Without locality every source splits
/// all its tokens in proportion to the quotas (ties: lower instance).
std::vector<std::int64_t> split_by_quota(const TraceRecord& record, int expert, int experts, int n,
                                         const std::vector<int>& gpus, const std::vector<std::int64_t>& quotas,
                                         bool locality_aware) {
  const int k = static_cast<int>(gpus.size());
  std::vector<std::int64_t> out(static_cast<std::size_t>(n) * k, 0);
  std::vector<std::int64_t> left(n);
  for (int s = 0; s < n; ++s) left[s] = record.count(s, expert, experts);
  std::vector<std::int64_t> room = quotas;
  if (locality_aware) {
    for (int i = 0; i < k; ++i) {
      const std::int64_t take = std::min(left[gpus[i]], room[i]);
      out[static_cast<std::size_t>(gpus[i]) * k + i] += take;
      left[gpus[i]] -= take;
      room[i] -= take;
    }
  }
  const std::int64_t total_room = std::accumulate(room.begin(), room.end(), std::int64_t{0});
  std::vector<std::int64_t> frac(k);
  std::vector<int> order;
  for (int s = 0; s < n; ++s) {
    if (left[s] == 0) continue;
    std::int64_t given = 0;
    order.clear();
    for (int i = 0; i < k; ++i) {
      if (locality_aware && (gpus[i] == s || room[i] <= 0)) continue;
      // Token counts per expert and micro-batch stay far below 2^31, so the product fits.
      const std::int64_t prod = left[s] * room[i];
      out[static_cast<std::size_t>(s) * k + i] += prod / total_room;
      frac[i] = prod % total_room;
      given += prod / total_room;
      order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      if (frac[a] != frac[b]) return frac[a] > frac[b];
      return locality_aware && gpus[a] != gpus[b] ? gpus[a] < gpus[b] : a < b;
    });
    for (std::int64_t r = 0; r < left[s] - given; ++r) ++out[static_cast<std::size_t>(s) * k + order[r]];
  }
  return out;
}

}  // namespace

UltraEpDomainQuotas ultraep_domain_quotas(const std::vector<std::int64_t>& expert_load, const std::vector<int>& home,
                                          int first_gpu, int num_domain_gpus, const UltraEpParams& params) {
  Domain d;
  d.first = first_gpu;
  d.rank_load.assign(num_domain_gpus, 0);
  d.masters.resize(num_domain_gpus);
  for (std::size_t e = 0; e < expert_load.size(); ++e) {
    const int r = home[e] - first_gpu;
    if (r < 0 || r >= num_domain_gpus) continue;
    d.rank_load[r] += expert_load[e];
    d.masters[r].push_back(static_cast<int>(e));
  }
  for (auto& m : d.masters)
    std::stable_sort(m.begin(), m.end(), [&](int a, int b) { return expert_load[a] > expert_load[b]; });
  d.sources.resize(num_domain_gpus);
  std::iota(d.sources.begin(), d.sources.end(), 0);
  std::stable_sort(d.sources.begin(), d.sources.end(),
                   [&](int a, int b) { return d.rank_load[a] > d.rank_load[b]; });

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
  std::vector<UltraEpMove> moves;
  auto accept = [&](std::int64_t cap, UltraEpSearch how) {
    result.threshold = cap;
    result.moves = moves;
    result.search = how;
    return result;
  };

  // Fast path: the tolerance above the floor, then two steps of 1% of hi each.
  const float eps = std::max(static_cast<float>(params.oracle_eps), 0.0f);
  std::int64_t cap = std::max(static_cast<std::int64_t>(std::ceil(static_cast<float>(lo) * (1.0f + eps))), lo);
  const std::int64_t step = std::max<std::int64_t>(1, (hi + 99) / 100);
  for (int retry = 0; retry <= kUltraEpFastRetries; ++retry) {
    ++result.fast_tries;
    if (quotas_for(cap, d, expert_load, params, true, moves)) return accept(cap, UltraEpSearch::fast);
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
  if (quotas_for(lo, d, expert_load, params, false, moves)) return accept(lo, UltraEpSearch::precheck);
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
      if (first < 0 && probe[w] < hi && quotas_for(probe[w], d, expert_load, params, false, moves)) first = w;
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
  if (!quotas_for(lo, d, expert_load, params, false, moves))
    throw std::logic_error("ultraep: the probe search ended on an infeasible cap");
  return accept(lo, UltraEpSearch::probes);
}

Plan UltraEp::plan(const TraceRecord& record, const BalancerContext& context) {
  const int n = context.num_gpus;
  const int experts = context.model->num_experts;
  // A bug in the caller, not bad input; checked always because a zero would loop forever.
  if (context.gpus_per_node <= 0) throw std::logic_error("ultraep: gpus_per_node must be positive");
  std::vector<std::int64_t> load(experts, 0);
  std::vector<int> home(experts);
  for (int e = 0; e < experts; ++e) {
    home[e] = home_gpu(e, experts, n, context.placement);
    for (int s = 0; s < n; ++s) load[e] += record.count(s, e, experts);
  }
  // Per expert, its instances' GPUs and quotas: the master first, then the copies in the order the
  // oracle made them (the kernel's replica order, which the reroute's ties follow).
  std::vector<std::vector<int>> gpus(experts);
  std::vector<std::vector<std::int64_t>> quotas(experts);
  for (int e = 0; e < experts; ++e) {
    gpus[e] = {home[e]};
    quotas[e] = {load[e]};
  }
  for (int first = 0; first < n; first += context.gpus_per_node) {
    const int size = std::min(context.gpus_per_node, n - first);
    std::vector<UltraEpMove> moves = ultraep_domain_quotas(load, home, first, size, params_).moves;
    std::stable_sort(moves.begin(), moves.end(),
                     [](const UltraEpMove& a, const UltraEpMove& b) { return a.expert < b.expert; });
    for (const UltraEpMove& m : moves) {
      gpus[m.expert].push_back(m.gpu);
      quotas[m.expert].push_back(m.tokens);
      quotas[m.expert][0] -= m.tokens;
    }
  }

  Plan plan = start_plan("ultraep", record, n);
  plan.planner.site = PlannerSite::gpu;
  plan.planner.start = PlannerStart::before_dispatch;
  plan.planner.duration_ps = us_to_ps(params_.planner_time_us);
  // One grouped GEMM per GPU over its master and redundant slots, as UltraEP runs it: the copies'
  // weights are in before the dispatch.
  for (int g = 0; g < n; ++g) plan.gemm_order[g].push_back(GemmGroup{g, {}});
  // Instance e is expert e's master, as in static EP, so a plan without moves is static EP's.
  for (int e = 0; e < experts; ++e) {
    plan.instances.push_back({e, home[e], InstanceKind::static_expert});
    plan.gemm_order[home[e]].front().instances.push_back(e);
  }
  std::vector<std::vector<int>> instance_of(experts);
  const std::int64_t weight_bytes = context.model->expert_weight_bytes();
  const std::int64_t grad_bytes = static_cast<std::int64_t>(context.model->matrices_per_expert()) *
                                  context.model->hidden_size * context.model->expert_ffn_size *
                                  element_bytes(params_.grad_dtype);
  for (int e = 0; e < experts; ++e) {
    instance_of[e] = {e};
    for (std::size_t i = 1; i < gpus[e].size(); ++i) {
      const int g = gpus[e][i];
      const int inst = static_cast<int>(plan.instances.size());
      instance_of[e].push_back(inst);
      plan.instances.push_back({e, g, InstanceKind::dynamic_expert});
      plan.gemm_order[g].front().instances.push_back(inst);
      // weight_sync, joined before the dispatch, again before the expert backward (the copies' buffers
      // are reused across layers), and grad_reduce: UltraEP's SM kernels, i.e. the EP backend.
      for (const PassKind pass : {PassKind::forward, PassKind::backward})
        plan.transfers.push_back(
            {TransferKind::weights, pass, inst, home[e], g, weight_bytes, Carrier::ep_backend, TransferStart::before_dispatch});
      plan.transfers.push_back(
          {TransferKind::gradients, PassKind::backward, inst, g, home[e], grad_bytes, Carrier::ep_backend});
    }
  }

  std::vector<std::vector<std::int64_t>> split(experts);
  for (int e = 0; e < experts; ++e)
    if (gpus[e].size() > 1) split[e] = split_by_quota(record, e, experts, n, gpus[e], quotas[e], params_.locality_aware);
  for (int s = 0; s < n; ++s) {
    for (int e = 0; e < experts; ++e) {
      const std::size_t k = gpus[e].size();
      for (std::size_t i = 0; i < k; ++i) {
        const std::int64_t c = k == 1 ? record.count(s, e, experts) : split[e][static_cast<std::size_t>(s) * k + i];
        if (c == 0) continue;
        plan.routes.push_back({s, instance_of[e][i], c, gpus[e][i] == s ? Carrier::none : Carrier::ep_backend});
      }
    }
  }
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
