#include "sim/balancers/feplb_scheduler.hpp"

#include <algorithm>
#include <cmath>

namespace epsim {

namespace {

struct Candidate {
  int expert;
  std::int64_t left;  ///< tokens still computed at home
};

/// Most tokens first, then lower expert id: the deterministic order of "heaviest".
bool heavier(std::int64_t tokens_a, int expert_a, std::int64_t tokens_b, int expert_b) {
  return tokens_a != tokens_b ? tokens_a > tokens_b : expert_a < expert_b;
}

/// The node state both granularities work on.
struct NodeState {
  std::vector<std::int64_t> load;                  ///< per GPU: tokens it computes now
  std::vector<std::vector<Candidate>> candidates;  ///< per GPU: its dynamic experts
  std::vector<std::vector<int>> hosted;            ///< per GPU: foreign dynamic experts (its used slots)
  std::int64_t total = 0;
  std::int64_t min_gain_tokens = 1;
};

/// Records `tokens` of `expert` moving donor -> r, merging with an earlier move of the same pair.
void record_move(std::vector<DynamicMove>& moves, NodeState& s, int expert, int donor, int r, std::int64_t tokens) {
  s.load[donor] -= tokens;
  s.load[r] += tokens;
  auto same = std::find_if(moves.begin(), moves.end(),
                           [&](const DynamicMove& m) { return m.expert == expert && m.receiver == r; });
  if (same != moves.end()) {
    same->tokens += tokens;
    return;
  }
  s.hosted[r].push_back(expert);
  moves.push_back({expert, donor, r, tokens});
}

/// Whole experts: the most loaded GPU gives the dynamic expert whose move lowers the larger of its
/// and the receiver's load most, while that gain reaches the threshold.
std::vector<DynamicMove> schedule_experts(NodeState& s, std::size_t slots) {
  const int gpus = static_cast<int>(s.load.size());
  std::vector<DynamicMove> moves;
  for (;;) {
    int donor = 0;
    for (int g = 1; g < gpus; ++g)
      if (s.load[g] > s.load[donor]) donor = g;
    int r = -1;
    for (int g = 0; g < gpus; ++g)
      if (g != donor && s.hosted[g].size() < slots && (r < 0 || s.load[g] < s.load[r])) r = g;
    if (r < 0) break;
    Candidate* best = nullptr;
    std::int64_t best_gain = 0;
    for (Candidate& c : s.candidates[donor]) {
      if (c.left == 0) continue;  // moved already
      const std::int64_t gain = s.load[donor] - std::max(s.load[donor] - c.left, s.load[r] + c.left);
      if (best == nullptr || gain > best_gain ||
          (gain == best_gain && heavier(c.left, c.expert, best->left, best->expert))) {
        best = &c;
        best_gain = gain;
      }
    }
    // The node's maximum is the donor's load; if no move of the donor gains enough, nothing can.
    if (best == nullptr || best_gain < s.min_gain_tokens) break;
    record_move(moves, s, best->expert, donor, r, best->left);
    best->left = 0;
  }
  return moves;
}

/// Tokens: the greedy towards ceil(node mean) that splits experts over receivers.
std::vector<DynamicMove> schedule_tokens(NodeState& s, std::size_t slots) {
  const int gpus = static_cast<int>(s.load.size());
  std::vector<DynamicMove> moves;
  // ceil rather than the exact mean: a node whose loads differ by less than one token per GPU is
  // already as balanced as whole tokens allow, and moving would cost a weights copy for nothing.
  const std::int64_t target = (s.total + gpus - 1) / gpus;
  std::vector<char> done(gpus, 0);  // donors no receiver can help any more
  auto hosts = [&](int r, int expert) {
    return std::find(s.hosted[r].begin(), s.hosted[r].end(), expert) != s.hosted[r].end();
  };
  // The least loaded GPU below target (lower index on ties) that can compute `expert`.
  auto receiver_for = [&](int expert) {
    int best = -1;
    for (int r = 0; r < gpus; ++r) {
      if (s.load[r] >= target || (best >= 0 && s.load[r] >= s.load[best])) continue;
      if (hosts(r, expert) || s.hosted[r].size() < slots) best = r;
    }
    return best;
  };
  for (;;) {
    int donor = -1;
    for (int g = 0; g < gpus; ++g)
      if (!done[g] && s.load[g] > target && (donor < 0 || s.load[g] > s.load[donor])) donor = g;
    if (donor < 0) break;
    std::vector<Candidate>& offer = s.candidates[donor];
    std::sort(offer.begin(), offer.end(),
              [](const Candidate& a, const Candidate& b) { return heavier(a.left, a.expert, b.left, b.expert); });
    bool moved = false;
    for (Candidate& c : offer) {
      if (c.left == 0) break;  // sorted: the rest are exhausted too
      const int r = receiver_for(c.expert);
      if (r < 0) continue;
      const std::int64_t tokens = std::min({s.load[donor] - target, target - s.load[r], c.left});
      // The donor is above target and the receiver below it after the move, so the pair's larger
      // load drops by exactly `tokens`.
      if (tokens < s.min_gain_tokens) continue;
      record_move(moves, s, c.expert, donor, r, tokens);
      c.left -= tokens;
      moved = true;
      break;
    }
    // Receivers only fill up and lose slots, so a donor nobody accepts now never will.
    if (!moved) done[donor] = 1;
  }
  return moves;
}

}  // namespace

std::vector<std::vector<HomeExpert>> FeplbScheduler::dynamic_experts(
    const std::vector<std::vector<HomeExpert>>& home_experts) const {
  std::vector<std::vector<HomeExpert>> dynamic(home_experts.size());
  for (std::size_t g = 0; g < home_experts.size(); ++g) {
    std::vector<HomeExpert> sorted = home_experts[g];
    const std::size_t k = std::min(sorted.size(), static_cast<std::size_t>(std::max(0, params_.dynamic_experts_per_gpu)));
    std::partial_sort(
        sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end(),
        [](const HomeExpert& a, const HomeExpert& b) { return heavier(a.tokens, a.expert, b.tokens, b.expert); });
    for (std::size_t i = 0; i < k && sorted[i].tokens > 0; ++i) dynamic[g].push_back(sorted[i]);
  }
  return dynamic;
}

std::vector<DynamicMove> FeplbScheduler::schedule(const std::vector<std::vector<HomeExpert>>& home_experts) const {
  const int gpus = static_cast<int>(home_experts.size());
  NodeState s;
  s.load.assign(gpus, 0);
  s.hosted.assign(gpus, {});
  for (int g = 0; g < gpus; ++g) {
    for (const HomeExpert& h : home_experts[g]) s.load[g] += h.tokens;
    s.total += s.load[g];
  }
  if (s.total == 0 || gpus < 2) return {};
  for (const auto& list : dynamic_experts(home_experts)) {
    s.candidates.emplace_back();
    for (const HomeExpert& h : list) s.candidates.back().push_back({h.expert, h.tokens});
  }
  const double mean = static_cast<double>(s.total) / gpus;
  s.min_gain_tokens = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(params_.min_gain * mean - 1e-9)));
  const std::size_t slots = static_cast<std::size_t>(std::max(0, params_.dynamic_slots_per_gpu));
  return params_.granularity == FeplbGranularity::expert ? schedule_experts(s, slots) : schedule_tokens(s, slots);
}

}  // namespace epsim
