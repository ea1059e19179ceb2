#include "hw/host/collective_wait.hpp"

#include <cstdio>
#include <stdexcept>

namespace epsim::hw {

namespace {

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

CollectiveOutcome wait_for_ranks(const DeadlineWait& wait, int ranks, const std::function<RankPoll(int)>& poll_rank) {
  if (ranks < 1) throw std::invalid_argument("wait_for_ranks: need at least one rank");
  std::vector<bool> done(static_cast<std::size_t>(ranks), false);
  CollectiveOutcome out;
  const WaitResult r = wait.wait([&] {
    out.pending_ranks.clear();
    for (int g = 0; g < ranks; ++g) {
      if (done[static_cast<std::size_t>(g)]) continue;
      const RankPoll p = poll_rank(g);
      if (p.state == PollState::failed) {
        out.failed_rank = g;
        out.error = p.error;
        for (int h = g + 1; h < ranks; ++h)
          if (!done[static_cast<std::size_t>(h)]) out.pending_ranks.push_back(h);
        return PollState::failed;
      }
      if (p.state == PollState::done)
        done[static_cast<std::size_t>(g)] = true;
      else
        out.pending_ranks.push_back(g);
    }
    return out.pending_ranks.empty() ? PollState::done : PollState::pending;
  });
  out.status = r.status;
  out.elapsed_s = r.elapsed_s;
  return out;
}

std::string collective_timeout_message(const std::string& collective, const CollectiveOutcome& outcome, int ranks,
                                       double timeout_s) {
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", timeout_s);
  return collective + " timed out: rank " + rank_list(outcome.pending_ranks) + " of " + std::to_string(ranks) +
         " had not finished after " + seconds_text(outcome.elapsed_s) + " (--nccl-timeout-s " + limit + ")";
}

std::string collective_failure_message(const std::string& collective, const CollectiveOutcome& outcome) {
  return collective + " failed on rank " + std::to_string(outcome.failed_rank) + " after " +
         seconds_text(outcome.elapsed_s) + ": " + outcome.error;
}

}  // namespace epsim::hw
