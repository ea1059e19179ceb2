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
};

/// The oracle for cap T; fills `moves` (global GPU ids) and returns true when every rank fits under T.
bool quotas_for(std::int64_t cap, const Domain& d, const std::vector<std::int64_t>& expert_load,
                const UltraEpParams& p, std::vector<UltraEpMove>& moves) {
  const int g_count = static_cast<int>(d.rank_load.size());
  moves.clear();
  std::int64_t excess = 0;
  std::int64_t slack = 0;
  for (std::int64_t l : d.rank_load) {
    excess += std::max<std::int64_t>(l - cap, 0);
    slack += std::max<std::int64_t>(cap - l, 0);
  }
  if (excess > slack) return false;
  if (excess == 0) return true;

  std::vector<std::int64_t> load = d.rank_load;
  std::vector<int> slots_used(g_count, 0);
  std::vector<std::vector<int>> holds(g_count);  // replicas placed on each rank (local indices)
  std::vector<int> sources(g_count);
  std::iota(sources.begin(), sources.end(), 0);
  std::stable_sort(sources.begin(), sources.end(),
                   [&](int a, int b) { return d.rank_load[a] > d.rank_load[b]; });
  for (int src : sources) {
    std::int64_t need = load[src] - cap;
    if (need <= 0) break;  // sorted: no later source is above the cap either
    for (int e : d.masters[src]) {
      if (need == 0) break;
      const std::int64_t keep = p.allow_zero_master_quota ? 0 : std::min<std::int64_t>(expert_load[e], 1);
      std::int64_t exportable = expert_load[e] - keep;
      while (need > 0 && exportable > 0) {
        int target = -1;
        int candidates = 0;
        for (int t = 0; t < g_count; ++t) {
          if (t == src || load[t] >= cap || slots_used[t] >= p.spare_slots_per_gpu) continue;
          if (std::find(holds[t].begin(), holds[t].end(), e) != holds[t].end()) continue;
          ++candidates;
          if (target < 0 || load[t] < load[target]) target = t;  // largest slack, ties: lower index
        }
        if (target < 0) break;
        const std::int64_t floor_q = std::min(p.min_tokens_per_replica, (need + candidates - 1) / candidates);
        const std::int64_t q = std::min({need, cap - load[target], exportable});
        if (q < floor_q) break;
        moves.push_back({e, d.first + target, q});
        load[target] += q;
        load[src] -= q;
        ++slots_used[target];
        holds[target].push_back(e);
        exportable -= q;
        need -= q;
      }
    }
    if (need > 0) return false;
  }
  return true;
}

/// Tokens of expert e from each source rank to each of its instances: out[s * k + i]. Locality first
/// (each instance's host keeps its own tokens up to the quota), then every source splits what is left
/// in proportion to the instances' remaining quotas, largest remainder (ties: lower instance).
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
  std::vector<int> order(k);
  for (int s = 0; s < n; ++s) {
    if (left[s] == 0) continue;
    std::int64_t given = 0;
    for (int i = 0; i < k; ++i) {
      // Token counts per expert and micro-batch stay far below 2^31, so the product fits.
      const std::int64_t prod = left[s] * room[i];
      out[static_cast<std::size_t>(s) * k + i] += prod / total_room;
      frac[i] = prod % total_room;
      given += prod / total_room;
    }
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return frac[a] > frac[b]; });
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

  const std::int64_t total = std::accumulate(d.rank_load.begin(), d.rank_load.end(), std::int64_t{0});
  const std::int64_t hi = *std::max_element(d.rank_load.begin(), d.rank_load.end());
  std::int64_t lo = (total + num_domain_gpus - 1) / num_domain_gpus;
  if (params.balance_threshold > 1.0)
    lo = std::max(lo, static_cast<std::int64_t>(std::ceil(static_cast<double>(total) * params.balance_threshold /
                                                          num_domain_gpus)));
  UltraEpDomainQuotas result;
  result.threshold = hi;
  if (lo >= hi) return result;

  std::vector<UltraEpMove> moves;
  const auto fast = static_cast<std::int64_t>(std::ceil(static_cast<double>(lo) * (1.0 + params.oracle_eps)));
  // The max rank load is already within the tolerance of the floor: the master-only placement stands.
  if (fast >= hi) return result;
  if (quotas_for(fast, d, expert_load, params, moves)) {
    result.threshold = fast;
    result.moves = moves;
    return result;
  }
  // Smallest feasible cap in [lo, hi): `best` is feasible (hi needs no moves), lo - 1 is the bound below.
  std::int64_t below = lo - 1;
  std::int64_t best = hi;
  for (int it = 0; it < params.max_search_iterations && best - below > 1; ++it) {
    const std::int64_t mid = below + (best - below) / 2;
    if (quotas_for(mid, d, expert_load, params, moves)) {
      best = mid;
      result.moves = moves;
    } else {
      below = mid;
    }
  }
  result.threshold = best;
  if (best == hi) result.moves.clear();
  return result;
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
  // Per expert, its instances' GPUs and quotas: the master first, then the replicas by GPU.
  std::vector<std::vector<int>> gpus(experts);
  std::vector<std::vector<std::int64_t>> quotas(experts);
  for (int e = 0; e < experts; ++e) {
    gpus[e] = {home[e]};
    quotas[e] = {load[e]};
  }
  for (int first = 0; first < n; first += context.gpus_per_node) {
    const int size = std::min(context.gpus_per_node, n - first);
    std::vector<UltraEpMove> moves = ultraep_domain_quotas(load, home, first, size, params_).moves;
    std::sort(moves.begin(), moves.end(), [](const UltraEpMove& a, const UltraEpMove& b) {
      return a.expert != b.expert ? a.expert < b.expert : a.gpu < b.gpu;
    });
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
  for (int g = 0; g < n; ++g) plan.gemm_order[g].push_back(GemmGroup{g, {}});
  // Instance e is expert e's master, as in static EP, so a plan without moves is static EP's.
  for (int e = 0; e < experts; ++e) {
    plan.instances.push_back({e, home[e], InstanceKind::static_expert});
    plan.gemm_order[home[e]].front().instances.push_back(e);
  }
  std::vector<std::vector<int>> instance_of(experts);
  const std::int64_t weight_bytes = context.model->expert_weight_bytes();
  for (int e = 0; e < experts; ++e) {
    instance_of[e] = {e};
    for (std::size_t i = 1; i < gpus[e].size(); ++i) {
      const int g = gpus[e][i];
      const int inst = static_cast<int>(plan.instances.size());
      instance_of[e].push_back(inst);
      plan.instances.push_back({e, g, InstanceKind::dynamic_expert});
      if (plan.gemm_order[g].size() < 2) plan.gemm_order[g].push_back(GemmGroup{g, {}});
      plan.gemm_order[g][1].instances.push_back(inst);
      // weight_sync and grad_reduce: UltraEP's SM kernels, i.e. the EP backend.
      plan.transfers.push_back(
          {TransferKind::weights, PassKind::forward, inst, home[e], g, weight_bytes, Carrier::ep_backend});
      plan.transfers.push_back(
          {TransferKind::gradients, PassKind::backward, inst, g, home[e], weight_bytes, Carrier::ep_backend});
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
  p.max_search_iterations =
      static_cast<int>(params.get_int_or("max_search_iterations", p.max_search_iterations, 1, 1000));
  // An hour bounds the value so that the conversion to picoseconds cannot overflow.
  p.planner_time_us = params.get_double_or("planner_time_us", p.planner_time_us, 0, 3.6e9);
  return std::make_unique<UltraEp>(p);
}

}  // namespace epsim
