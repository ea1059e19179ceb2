#include "sim/replay/exchange_fanout.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <unordered_map>

namespace epsim {
namespace {

/// The GPU a route's EP leg goes to, or -1 when it has none (computed where it is, or moved by the
/// Copy Engine only): the intermediate GPU of a two-phase route, else the instance's GPU.
int ep_leg_target(const Plan& plan, const TokenRoute& r) {
  if (r.tokens <= 0 || r.stage < 0) return -1;
  int to = -1;
  if (r.via_gpu >= 0) to = r.via_gpu;
  else if (r.carrier == Carrier::ep_backend) to = plan.instances[static_cast<std::size_t>(r.instance)].gpu;
  return to == r.src_rank ? -1 : to;
}

/// (stage, src, dst) packed in one key; bounded by kMaxExchangeStages and kMaxPlanGpus (2^20 x 2^16 x 2^16).
std::uint64_t leg_key(int stage, int src, int dst) {
  return (static_cast<std::uint64_t>(stage) << 32) | (static_cast<std::uint64_t>(src) << 16) |
         static_cast<std::uint64_t>(dst);
}

/// Sorted per-stage leg lists from keyed totals.
std::vector<std::vector<LegTokens>> to_legs(const std::unordered_map<std::uint64_t, double>& totals, int stages) {
  std::vector<std::pair<std::uint64_t, double>> sorted(totals.begin(), totals.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::vector<LegTokens>> legs(static_cast<std::size_t>(stages));
  for (const auto& [key, tokens] : sorted) {
    if (tokens <= 0) continue;
    legs[key >> 32].push_back({static_cast<int>((key >> 16) & 0xFFFF), static_cast<int>(key & 0xFFFF), tokens});
  }
  return legs;
}

}  // namespace

ExchangeFanout::ExchangeFanout(const Plan& plan, const TraceRecord* record, const ModelSpec& model,
                               TokenCopies copies, int gpus_per_node)
    : copies_(copies), gpus_per_node_(std::max(1, gpus_per_node)) {
  const int stages = std::max(1, plan.exchange_stages);
  gpu_legs_.assign(static_cast<std::size_t>(stages), {});
  node_legs_.assign(static_cast<std::size_t>(stages), {});
  if (copies_ == TokenCopies::per_expert) {
    count_assignments(plan);
    exact_ = true;
    return;
  }
  if (record != nullptr && !record->token_src_rank.empty() && count_token_ids(plan, *record, model.top_k)) {
    exact_ = true;
    return;
  }
  expect(plan, model);
}

void ExchangeFanout::count_assignments(const Plan& plan) {
  std::unordered_map<std::uint64_t, double> gpu;
  for (const TokenRoute& r : plan.routes) {
    const int to = ep_leg_target(plan, r);
    if (to >= 0) gpu[leg_key(r.stage, r.src_rank, to)] += static_cast<double>(r.tokens);
  }
  gpu_legs_ = to_legs(gpu, static_cast<int>(gpu_legs_.size()));
}

bool ExchangeFanout::count_token_ids(const Plan& plan, const TraceRecord& record, int top_k) {
  const int n = plan.num_gpus;
  const std::size_t tokens = record.token_src_rank.size();
  if (top_k <= 0 || record.token_experts.size() != tokens * static_cast<std::size_t>(top_k)) return false;
  int experts = 0;
  for (const ExpertInstance& inst : plan.instances) experts = std::max(experts, inst.expert + 1);
  for (const std::uint16_t e : record.token_experts) experts = std::max(experts, static_cast<int>(e) + 1);
  // The plan's routes for each (source, expert) in plan order, with what each has left to take.
  const std::size_t pairs = static_cast<std::size_t>(n) * static_cast<std::size_t>(experts);
  std::vector<std::vector<int>> routes_of(pairs);
  std::vector<std::int64_t> planned(pairs, 0), recorded(pairs, 0);
  for (std::size_t i = 0; i < plan.routes.size(); ++i) {
    const TokenRoute& r = plan.routes[i];
    if (r.tokens <= 0) continue;
    const std::size_t pair =
        static_cast<std::size_t>(r.src_rank) * experts + plan.instances[static_cast<std::size_t>(r.instance)].expert;
    routes_of[pair].push_back(static_cast<int>(i));
    planned[pair] += r.tokens;
  }
  for (std::size_t t = 0; t < tokens; ++t) {
    const std::uint32_t s = record.token_src_rank[t];
    if (s >= static_cast<std::uint32_t>(n)) return false;
    for (int j = 0; j < top_k; ++j) ++recorded[s * static_cast<std::size_t>(experts) + record.token_experts[t * top_k + j]];
  }
  // A plan that does not route exactly the recorded assignments has no token-level reading.
  if (planned != recorded) return false;

  std::vector<std::size_t> cursor(pairs, 0);
  std::vector<std::int64_t> left(plan.routes.size());
  for (std::size_t i = 0; i < plan.routes.size(); ++i) left[i] = plan.routes[i].tokens;
  std::unordered_map<std::uint64_t, double> gpu, node;
  std::vector<std::uint64_t> gpu_keys, node_keys;
  for (std::size_t t = 0; t < tokens; ++t) {
    const int s = static_cast<int>(record.token_src_rank[t]);
    gpu_keys.clear();
    node_keys.clear();
    for (int j = 0; j < top_k; ++j) {
      const std::size_t pair = static_cast<std::size_t>(s) * experts + record.token_experts[t * top_k + j];
      // Assignments of one (source, expert) fill its routes in plan order, in token order.
      while (left[static_cast<std::size_t>(routes_of[pair][cursor[pair]])] == 0) ++cursor[pair];
      const int route = routes_of[pair][cursor[pair]];
      --left[static_cast<std::size_t>(route)];
      const TokenRoute& r = plan.routes[static_cast<std::size_t>(route)];
      const int to = ep_leg_target(plan, r);
      if (to < 0) continue;
      gpu_keys.push_back(leg_key(r.stage, s, to));
      if (copies_ == TokenCopies::per_node && to / gpus_per_node_ != s / gpus_per_node_)
        node_keys.push_back(leg_key(r.stage, s, to / gpus_per_node_));
    }
    for (std::vector<std::uint64_t>* keys : {&gpu_keys, &node_keys}) {
      std::sort(keys->begin(), keys->end());
      keys->erase(std::unique(keys->begin(), keys->end()), keys->end());
    }
    for (const std::uint64_t key : gpu_keys) gpu[key] += 1;
    for (const std::uint64_t key : node_keys) node[key] += 1;
  }
  gpu_legs_ = to_legs(gpu, static_cast<int>(gpu_legs_.size()));
  node_legs_ = to_legs(node, static_cast<int>(node_legs_.size()));
  return true;
}

void ExchangeFanout::expect(const Plan& plan, const ModelSpec& model) {
  const int n = plan.num_gpus;
  const double k = static_cast<double>(std::max(1, model.top_k));
  // Without group limits the rule is the one-group case: every token picks the single group.
  const bool grouped = model.routing.limited();
  const int groups = grouped ? model.routing.groups : 1;
  const double per_token = grouped ? model.routing.groups_per_token : 1;
  int experts = 0;
  for (const ExpertInstance& inst : plan.instances) experts = std::max(experts, inst.expert + 1);
  experts = std::max(experts, model.num_experts);
  const int group_size = std::max(1, experts / groups);
  const int stages = static_cast<int>(gpu_legs_.size());
  const int nodes = (n + gpus_per_node_ - 1) / gpus_per_node_;
  const bool by_node = copies_ == TokenCopies::per_node;
  // Each instance's group, looked up once: a wide plan has millions of routes over a few thousand
  // instances.
  std::vector<int> group_of(plan.instances.size());
  for (std::size_t i = 0; i < plan.instances.size(); ++i)
    group_of[i] = std::min(groups - 1, plan.instances[i].expert / group_size);

  // Assignments are whole tokens and a plan holds fewer than 2^40 of them (kMaxPlanTokens), so every
  // sum below is taken in 64-bit integers: exact, as the sums of doubles they replace were (each
  // partial sum below 2^53), so the same values, without a floating-point add's latency on every
  // route of a chain that adds to one place.
  // Each source's assignments in all (its tokens) and per group.
  std::vector<std::int64_t> slots(static_cast<std::size_t>(n), 0);
  std::vector<std::int64_t> group_slots(static_cast<std::size_t>(n) * groups, 0);
  // With one group, a source's group total is its total, and is not kept twice.
  const auto add_slots = [&](const TokenRoute& r) {
    slots[static_cast<std::size_t>(r.src_rank)] += r.tokens;
    if (groups > 1)
      group_slots[static_cast<std::size_t>(r.src_rank) * groups + group_of[static_cast<std::size_t>(r.instance)]] += r.tokens;
  };
  // One source's assignments per (target, group); `touched` lists the entries in use (every
  // assignment is positive), to read them in (target, group) order and clear them. Consecutive
  // routes to one entry (a source's routes run in instance order, so mostly target by target) are
  // summed in `run` first and added once.
  struct Accumulator {
    std::vector<std::int64_t> assigned;
    std::vector<int> touched;
    int run_entry = -1;
    std::int64_t run = 0;
    void add(int entry, std::int64_t a) {
      if (entry == run_entry) {
        run += a;
        return;
      }
      flush();
      run_entry = entry;
      run = a;
    }
    /// Back to empty, the source being read dropped.
    void reset() {
      // (A pending run is not in `assigned` yet: dropping run_entry drops it.)
      for (const int entry : touched) assigned[static_cast<std::size_t>(entry)] = 0;
      touched.clear();
      run_entry = -1;
    }
    void flush() {
      if (run_entry < 0) return;
      if (assigned[static_cast<std::size_t>(run_entry)] == 0) touched.push_back(run_entry);
      assigned[static_cast<std::size_t>(run_entry)] += run;
      run_entry = -1;
    }
  };
  Accumulator gpu{std::vector<std::int64_t>(static_cast<std::size_t>(n) * groups, 0), {}};
  Accumulator node{std::vector<std::int64_t>(static_cast<std::size_t>(nodes) * groups, 0), {}};
  // Each GPU's node, looked up rather than divided for: a wide plan has millions of legs.
  std::vector<int> node_of(static_cast<std::size_t>(n));
  for (int g = 0; g < n; ++g) node_of[static_cast<std::size_t>(g)] = g / gpus_per_node_;
  const auto add_leg = [&](int s, int target, int group, std::int64_t a) {
    gpu.add(target * groups + group, a);
    const int target_node = node_of[static_cast<std::size_t>(target)];
    if (by_node && target_node != node_of[static_cast<std::size_t>(s)]) node.add(target_node * groups + group, a);
  };
  // What a leg's expectation takes from its source and group alone (a_g, q_g and the exponent
  // K a_g / q_g), worked out once per source and group rather than once per leg: the same operations
  // on the same numbers, so the same bits, without three divisions a leg (a wide plan has a million).
  std::vector<double> share(static_cast<std::size_t>(groups)), pick(share), spread(share);
  // A leg's chance of reaching its target through group g depends, for one source, only on its count
  // of assignments there. A source's legs carry a few dozen distinct counts (at wide EP a thousand
  // legs of about 30 assignments each), and pow() was most of a leg's cost: each count below
  // kRemembered is worked out once per emit and looked up after, the same value to the bit.
  constexpr std::int64_t kRemembered = 512;
  std::vector<double> remembered(static_cast<std::size_t>(groups) * kRemembered);
  std::vector<std::uint32_t> remembered_at(remembered.size(), 0);  ///< the emit that worked it out
  std::uint32_t emits = 0;
  // The expected distinct tokens from source s to each target it reaches, in target order.
  const auto emit = [&](Accumulator& acc, int s, std::vector<LegTokens>& legs) {
    acc.flush();
    if (acc.touched.empty()) return;  // (then the source may have no assignments at all: total 0)
    if (++emits == 0) {  // wrapped: every entry is from an emit long past
      std::fill(remembered_at.begin(), remembered_at.end(), 0);
      emits = 1;
    }
    // A plan lists a source's routes in instance order, which is mostly target order already: a
    // check is a fraction of a sort of a thousand entries.
    if (!std::is_sorted(acc.touched.begin(), acc.touched.end())) std::sort(acc.touched.begin(), acc.touched.end());
    const double total = static_cast<double>(slots[static_cast<std::size_t>(s)]);
    for (int g = 0; g < groups; ++g) {
      // (One group: its total over the same total, exactly 1.)
      const double a_g =
          groups == 1 ? 1.0 : static_cast<double>(group_slots[static_cast<std::size_t>(s) * groups + g]) / total;
      share[static_cast<std::size_t>(g)] = a_g;
      pick[static_cast<std::size_t>(g)] = std::min(1.0, per_token * a_g);
      // A group the source sends nothing to has no legs; its exponent is never read.
      spread[static_cast<std::size_t>(g)] = a_g > 0 ? k * a_g / pick[static_cast<std::size_t>(g)] : 0.0;
    }
    const double tokens = total / k;
    // Entries are target x groups + group; without group limits, the target itself.
    const bool one_group = groups == 1;
    if (one_group) {
      // Every entry is a target with one term: the loop below with its group walk taken out (a wide
      // plan emits a million legs), the same operations on the same numbers. Written out: the loop
      // below compiled for one group (its group count a constant) saved a fifth of its instructions
      // at EP 1,024, this two fifths.
      const double pick0 = pick[0];
      const double share0 = share[0];
      const double spread0 = spread[0];
      for (const int target : acc.touched) {
        std::int64_t& count = acc.assigned[static_cast<std::size_t>(target)];
        const double a = static_cast<double>(count);
        double in_group;
        if (count < kRemembered && remembered_at[static_cast<std::size_t>(count)] == emits) {
          in_group = remembered[static_cast<std::size_t>(count)];
        } else {
          in_group = 1.0 - std::pow(std::max(0.0, 1.0 - a / total / share0), spread0);
          if (count < kRemembered) {
            remembered[static_cast<std::size_t>(count)] = in_group;
            remembered_at[static_cast<std::size_t>(count)] = emits;
          }
        }
        count = 0;
        const double missed = 1.0 - pick0 * in_group;
        const double expected = std::clamp(tokens * (1.0 - missed), a / k, std::min(a, tokens));
        if (expected > 0) legs.push_back({s, target, expected});
      }
      acc.touched.clear();
      return;
    }
    for (auto it = acc.touched.begin(); it != acc.touched.end();) {
      const int target = one_group ? *it : *it / groups;
      double missed = 1.0;  // probability that a token reaches the target through none of its groups
      double assigned = 0;
      for (; it != acc.touched.end() && (one_group ? *it : *it / groups) == target; ++it) {
        const std::size_t g = one_group ? 0 : static_cast<std::size_t>(*it % groups);
        const std::int64_t count = acc.assigned[static_cast<std::size_t>(*it)];
        const double a = static_cast<double>(count);
        const std::size_t slot = g * kRemembered + static_cast<std::size_t>(count);
        double in_group;
        if (count < kRemembered && remembered_at[slot] == emits) {
          in_group = remembered[slot];
        } else {
          const double a_dg = a / total;
          in_group = 1.0 - std::pow(std::max(0.0, 1.0 - a_dg / share[g]), spread[g]);
          if (count < kRemembered) {
            remembered[slot] = in_group;
            remembered_at[slot] = emits;
          }
        }
        missed *= 1.0 - pick[g] * in_group;
        assigned += a;
        acc.assigned[static_cast<std::size_t>(*it)] = 0;
      }
      // Keep the rule's bounds exact against rounding: at least A / K tokens, at most min(A, n_s).
      const double expected = std::clamp(tokens * (1.0 - missed), assigned / k, std::min(assigned, tokens));
      if (expected > 0) legs.push_back({s, target, expected});
    }
    acc.touched.clear();
  };

  // The usual plan has one exchange stage and lists its routes source by source: then one pass over
  // the routes (at wide EP millions of them) sums each source's totals and legs, and the source is
  // emitted when the next one begins. The sums are the general path's.
  if (stages == 1) {
    const TokenRoutes& routes = plan.routes;
    // At most one leg per (source, target): room for them at once, not by doubling.
    gpu_legs_[0].reserve(std::min(routes.size(), static_cast<std::size_t>(n) * static_cast<std::size_t>(n)));
    node_legs_[0].reserve(by_node ? std::min(routes.size(), static_cast<std::size_t>(n) * static_cast<std::size_t>(nodes)) : 0);
    // One pass: a source's totals and legs are summed together and emitted when the next source
    // begins (emit reads the totals only then).
    bool by_source = true;
    int s = -1;  // the source whose routes are being read
    // Compiled twice: without group limits (the usual model) an entry is its target and a source's
    // node is looked up once, the same sums in fewer instructions a route (millions at wide EP).
    const auto read_routes = [&](auto one_group) {
      int s_node = -1;
      for (const TokenRoute& r : routes) {
        if (r.src_rank != s) {
          if (r.src_rank < s) {
            by_source = false;
            return;
          }
          if (s >= 0) {
            emit(gpu, s, gpu_legs_[0]);
            emit(node, s, node_legs_[0]);
          }
          s = r.src_rank;
          s_node = node_of[static_cast<std::size_t>(s)];
        }
        if (r.tokens <= 0) continue;
        if constexpr (one_group) slots[static_cast<std::size_t>(s)] += r.tokens;
        else add_slots(r);
        const int target = ep_leg_target(plan, r);
        if (target < 0) continue;
        if constexpr (one_group) {
          gpu.add(target, r.tokens);
          const int target_node = node_of[static_cast<std::size_t>(target)];
          if (by_node && target_node != s_node) node.add(target_node, r.tokens);
        } else {
          add_leg(s, target, group_of[static_cast<std::size_t>(r.instance)], r.tokens);
        }
      }
    };
    if (groups == 1) read_routes(std::true_type{});
    else read_routes(std::false_type{});
    if (by_source) {
      if (s >= 0) {
        emit(gpu, s, gpu_legs_[0]);
        emit(node, s, node_legs_[0]);
      }
      return;
    }
    // Not in source order after all: start again on the general path.
    gpu.reset();
    node.reset();
    gpu_legs_[0].clear();
    node_legs_[0].clear();
    std::fill(slots.begin(), slots.end(), 0);
    std::fill(group_slots.begin(), group_slots.end(), 0);
  }

  // The general path: the routes with an EP leg are bucketed by (stage, source) in plan order, a
  // counting sort, each as what the sums read (target, group, assignments): at wide EP there are
  // millions of them, and a tree keyed by (stage, source, target, group) was a fifth of a layer's time.
  struct Leg {
    int target;
    int group;
    std::int64_t assigned;
  };
  std::vector<int> bucket_begin(static_cast<std::size_t>(stages) * n + 1, 0);
  std::vector<int> target_of(plan.routes.size(), -1);
  for (std::size_t i = 0; i < plan.routes.size(); ++i) {
    const TokenRoute& r = plan.routes[i];
    if (r.tokens <= 0) continue;
    add_slots(r);
    target_of[i] = ep_leg_target(plan, r);
    if (target_of[i] >= 0) ++bucket_begin[static_cast<std::size_t>(r.stage) * n + r.src_rank + 1];
  }
  for (std::size_t b = 1; b < bucket_begin.size(); ++b) bucket_begin[b] += bucket_begin[b - 1];
  std::vector<Leg> bucketed(static_cast<std::size_t>(bucket_begin.back()));
  {
    std::vector<int> fill(bucket_begin.begin(), bucket_begin.end() - 1);
    for (std::size_t i = 0; i < plan.routes.size(); ++i) {
      if (target_of[i] < 0) continue;
      const TokenRoute& r = plan.routes[i];
      bucketed[static_cast<std::size_t>(fill[static_cast<std::size_t>(r.stage) * n + r.src_rank]++)] = {
          target_of[i], group_of[static_cast<std::size_t>(r.instance)], r.tokens};
    }
  }
  for (int stage = 0; stage < stages; ++stage) {
    for (int s = 0; s < n; ++s) {
      const std::size_t bucket = static_cast<std::size_t>(stage) * n + s;
      for (int i = bucket_begin[bucket]; i < bucket_begin[bucket + 1]; ++i) {
        const Leg& leg = bucketed[static_cast<std::size_t>(i)];
        add_leg(s, leg.target, leg.group, leg.assigned);
      }
      emit(gpu, s, gpu_legs_[static_cast<std::size_t>(stage)]);
      emit(node, s, node_legs_[static_cast<std::size_t>(stage)]);
    }
  }
}

}  // namespace epsim
