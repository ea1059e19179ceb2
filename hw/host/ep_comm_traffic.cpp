#include "hw/host/ep_comm_traffic.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

namespace epsim::hw {

namespace {

void check_placement(int ep, int experts) {
  if (ep < 1) throw std::invalid_argument("ep_comm: ranks must be >= 1");
  if (experts < ep || experts % ep != 0)
    throw std::invalid_argument("ep_comm: " + std::to_string(experts) + " experts cannot be placed evenly on " +
                                std::to_string(ep) + " ranks");
}

}  // namespace

int expert_rank(int expert, int experts, int ep) { return expert / (experts / ep); }

PairRows pair_rows(int ep, int experts, const std::vector<std::vector<std::vector<int>>>& routes) {
  check_placement(ep, experts);
  if (static_cast<int>(routes.size()) != ep)
    throw std::invalid_argument("ep_comm: routes for " + std::to_string(routes.size()) + " ranks, expected " +
                                std::to_string(ep));
  PairRows rows(static_cast<std::size_t>(ep), std::vector<std::int64_t>(static_cast<std::size_t>(ep), 0));
  std::vector<char> reached(static_cast<std::size_t>(ep));
  for (int src = 0; src < ep; ++src)
    for (const auto& token : routes[static_cast<std::size_t>(src)]) {
      std::fill(reached.begin(), reached.end(), 0);
      for (int e : token) {
        if (e < 0 || e >= experts)
          throw std::invalid_argument("ep_comm: expert " + std::to_string(e) + " outside [0, " +
                                      std::to_string(experts) + ")");
        reached[static_cast<std::size_t>(expert_rank(e, experts, ep))] = 1;
      }
      for (int dst = 0; dst < ep; ++dst)  // once per rank, however many of its experts the token picked
        if (reached[static_cast<std::size_t>(dst)]) ++rows[static_cast<std::size_t>(src)][static_cast<std::size_t>(dst)];
    }
  return rows;
}

PairRows uniform_pair_rows(int ep, std::int64_t tokens, int top_k, int experts, std::uint64_t seed) {
  check_placement(ep, experts);
  if (top_k < 1 || top_k > experts)
    throw std::invalid_argument("ep_comm: top-k " + std::to_string(top_k) + " outside [1, " + std::to_string(experts) +
                                "]");
  if (tokens < 0) throw std::invalid_argument("ep_comm: tokens must be >= 0");
  std::mt19937_64 rng(seed);
  std::vector<int> pool(static_cast<std::size_t>(experts));
  std::vector<std::vector<std::vector<int>>> routes(static_cast<std::size_t>(ep));
  for (auto& rank : routes) {
    rank.reserve(static_cast<std::size_t>(tokens));
    for (std::int64_t t = 0; t < tokens; ++t) {
      // Partial Fisher-Yates: the first top_k entries of the pool are distinct experts, each set equally
      // likely. The modulo keeps the draw platform-independent (std distributions are not).
      std::iota(pool.begin(), pool.end(), 0);
      for (int i = 0; i < top_k; ++i) {
        const std::uint64_t span = static_cast<std::uint64_t>(experts - i);
        std::swap(pool[static_cast<std::size_t>(i)], pool[static_cast<std::size_t>(i + static_cast<int>(rng() % span))]);
      }
      rank.emplace_back(pool.begin(), pool.begin() + top_k);
    }
  }
  return pair_rows(ep, experts, routes);
}

std::vector<std::int64_t> received_rows(const PairRows& rows) {
  std::vector<std::int64_t> out(rows.size(), 0);
  for (const auto& from : rows)
    for (std::size_t dst = 0; dst < from.size(); ++dst) out[dst] += from[dst];
  return out;
}

}  // namespace epsim::hw
