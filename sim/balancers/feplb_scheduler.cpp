#include "sim/balancers/feplb_scheduler.hpp"

#include <algorithm>

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

/// Per GPU, its `per_gpu` most loaded experts that have tokens: only they may move.
std::vector<std::vector<Candidate>> dynamic_candidates(const std::vector<std::vector<HomeExpert>>& home_experts,
                                                       int per_gpu) {
  std::vector<std::vector<Candidate>> candidates(home_experts.size());
  for (std::size_t g = 0; g < home_experts.size(); ++g) {
    std::vector<HomeExpert> sorted = home_experts[g];
    const std::size_t k = std::min(sorted.size(), static_cast<std::size_t>(per_gpu));
    std::partial_sort(
        sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end(),
        [](const HomeExpert& a, const HomeExpert& b) { return heavier(a.tokens, a.expert, b.tokens, b.expert); });
    for (std::size_t i = 0; i < k && sorted[i].tokens > 0; ++i)
      candidates[g].push_back({sorted[i].expert, sorted[i].tokens});
  }
  return candidates;
}

}  // namespace

std::vector<DynamicMove> FeplbScheduler::schedule(const std::vector<std::vector<HomeExpert>>& home_experts) const {
  const int gpus = static_cast<int>(home_experts.size());
  std::vector<std::int64_t> load(gpus, 0);
  std::int64_t total = 0;
  for (int g = 0; g < gpus; ++g) {
    for (const HomeExpert& h : home_experts[g]) load[g] += h.tokens;
    total += load[g];
  }
  std::vector<DynamicMove> moves;
  if (total == 0) return moves;
  // ceil rather than the exact mean: a node whose loads differ by less than one token per GPU is
  // already as balanced as whole tokens allow, and moving would cost a weights copy for nothing.
  const std::int64_t target = (total + gpus - 1) / gpus;

  std::vector<std::vector<Candidate>> candidates = dynamic_candidates(home_experts, params_.dynamic_experts_per_gpu);
  std::vector<std::vector<int>> hosted(gpus);  // foreign dynamic experts per GPU: its used slots
  std::vector<char> done(gpus, 0);             // donors no receiver can help any more
  const std::size_t slots = static_cast<std::size_t>(params_.dynamic_slots_per_gpu);

  auto hosts = [&](int r, int expert) {
    return std::find(hosted[r].begin(), hosted[r].end(), expert) != hosted[r].end();
  };
  // The least loaded GPU below target (lower index on ties) that can compute `expert`.
  auto receiver_for = [&](int expert) {
    int best = -1;
    for (int r = 0; r < gpus; ++r) {
      if (load[r] >= target || (best >= 0 && load[r] >= load[best])) continue;
      if (hosts(r, expert) || hosted[r].size() < slots) best = r;
    }
    return best;
  };

  for (;;) {
    int donor = -1;
    for (int g = 0; g < gpus; ++g)
      if (!done[g] && load[g] > target && (donor < 0 || load[g] > load[donor])) donor = g;
    if (donor < 0) break;
    std::vector<Candidate>& offer = candidates[donor];
    std::sort(offer.begin(), offer.end(),
              [](const Candidate& a, const Candidate& b) { return heavier(a.left, a.expert, b.left, b.expert); });
    bool moved = false;
    for (Candidate& c : offer) {
      if (c.left == 0) break;  // sorted: the rest are exhausted too
      const int r = receiver_for(c.expert);
      if (r < 0) continue;
      const std::int64_t tokens = std::min({load[donor] - target, target - load[r], c.left});
      load[donor] -= tokens;
      load[r] += tokens;
      c.left -= tokens;
      auto same = std::find_if(moves.begin(), moves.end(),
                               [&](const DynamicMove& m) { return m.expert == c.expert && m.receiver == r; });
      if (same != moves.end()) {
        same->tokens += tokens;
      } else {
        if (!hosts(r, c.expert)) hosted[r].push_back(c.expert);
        moves.push_back({c.expert, donor, r, tokens});
      }
      moved = true;
      break;
    }
    // Receivers only fill up and lose slots, so a donor nobody accepts now never will.
    if (!moved) done[donor] = 1;
  }
  return moves;
}

}  // namespace epsim
