#include "sim/replay/all_to_all.hpp"

#include <cassert>

namespace epsim {

AllToAllV::AllToAllV(SimContext& context, std::string name, Pass pass,
                     std::vector<std::vector<double>> payload_bytes, std::function<void(int)> rank_done)
    : context_(context), name_(std::move(name)), pass_(pass), rank_done_(std::move(rank_done)) {
  const int n = context_.num_gpus();
  assert(static_cast<int>(payload_bytes.size()) == n);
  ranks_.resize(static_cast<std::size_t>(n));
  for (int s = 0; s < n; ++s) {
    RankState& src = ranks_[static_cast<std::size_t>(s)];
    src.first_message = messages_.size();
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      const double bytes = payload_bytes[s][d];
      total_bytes_ += bytes;
      if (bytes <= 0) continue;
      messages_.push_back({d, bytes});
      ++src.sends;
      ++ranks_[static_cast<std::size_t>(d)].receives_left;
    }
    src.sends_left = src.sends;
  }
}

double AllToAllV::total_bytes() const { return total_bytes_; }

void AllToAllV::start(int rank) {
  RankState& me = ranks_[static_cast<std::size_t>(rank)];
  assert(!me.started);
  me.started = true;
  me.start_ps = context_.now_ps();
  context_.sms(rank).acquire(context_.hardware().ep_backend.comm_sms);
  for (std::size_t m = me.first_message; m < me.first_message + static_cast<std::size_t>(me.sends); ++m) {
    const int d = messages_[m].dst;
    context_.ep_message(rank, d, messages_[m].bytes, pass_,
                        name_ + " " + std::to_string(rank) + "->" + std::to_string(d), [this, rank, d] {
                          --ranks_[static_cast<std::size_t>(rank)].sends_left;
                          --ranks_[static_cast<std::size_t>(d)].receives_left;
                          maybe_finish(rank);
                          maybe_finish(d);
                        });
  }
  maybe_finish(rank);
}

void AllToAllV::maybe_finish(int rank) {
  RankState& me = ranks_[static_cast<std::size_t>(rank)];
  if (!me.started || me.finished || me.sends_left > 0 || me.receives_left > 0) return;
  me.finished = true;
  context_.sms(rank).release(context_.hardware().ep_backend.comm_sms);
  // A rank with nothing to move passes through at once; an empty slice would only clutter the timeline.
  if (context_.now_ps() > me.start_ps) context_.record(rank, Track::comm_kernel, pass_, name_, me.start_ps);
  rank_done_(rank);
}

}  // namespace epsim
