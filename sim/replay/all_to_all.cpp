#include "sim/replay/all_to_all.hpp"

#include <cassert>

namespace epsim {

AllToAllV::AllToAllV(SimContext& context, std::string name, Pass pass,
                     std::vector<std::vector<double>> payload_bytes, std::function<void(int)> rank_done,
                     CommKernel kernel)
    : context_(context), name_(std::move(name)), pass_(pass), rank_done_(std::move(rank_done)), kernel_(kernel) {
  const int n = context_.num_gpus();
  assert(static_cast<int>(payload_bytes.size()) == n);
  ranks_.resize(static_cast<std::size_t>(n));
  const bool copies = kernel_.engine == CommEngine::copy_engine;
  // With the sms engine every rank runs its kernel, as before engines were configurable per phase.
  for (RankState& rank : ranks_) rank.holds_sms = !copies;
  const Topology& topology = context_.topology();
  for (int s = 0; s < n; ++s) {
    RankState& src = ranks_[static_cast<std::size_t>(s)];
    src.first_message = messages_.size();
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      const double bytes = payload_bytes[s][d];
      total_bytes_ += bytes;
      if (bytes <= 0) continue;
      const bool by_copy_engine = copies && topology.same_node(s, d);
      messages_.push_back({d, bytes, by_copy_engine});
      if (by_copy_engine) {
        copy_engine_bytes_ += bytes;
      } else if (copies) {
        src.holds_sms = true;
        ranks_[static_cast<std::size_t>(d)].holds_sms = true;
      }
      ++src.sends;
      ++ranks_[static_cast<std::size_t>(d)].receives;
      ++ranks_[static_cast<std::size_t>(d)].receives_left;
    }
    src.sends_left = src.sends;
  }
}

double AllToAllV::total_bytes() const { return total_bytes_; }
double AllToAllV::copy_engine_bytes() const { return copy_engine_bytes_; }

void AllToAllV::start(int rank) {
  RankState& me = ranks_[static_cast<std::size_t>(rank)];
  assert(!me.started);
  me.started = true;
  me.start_ps = context_.now_ps();
  if (me.holds_sms) context_.sms(rank).acquire(context_.hardware().ep_backend.comm_sms);
  const std::size_t end = me.first_message + static_cast<std::size_t>(me.sends);
  for (std::size_t m = me.first_message; m < end; ++m) {
    if (!messages_[m].by_copy_engine) continue;
    const int d = messages_[m].dst;
    context_.ce_copy(rank, d, messages_[m].bytes, pass_, name_ + " " + std::to_string(rank) + "->" + std::to_string(d),
                     [this, rank, d] { message_done(rank, d); });
  }
  // A kernel with something to move pays its fixed cost first; one with nothing passes at once.
  const bool moves = me.sends > 0 || me.receives > 0;
  if (me.holds_sms && moves && kernel_.fixed_ps > 0) {
    me.paying_fixed = true;
    context_.queue().schedule_in(kernel_.fixed_ps, [this, rank] {
      ranks_[static_cast<std::size_t>(rank)].paying_fixed = false;
      send_kernel_messages(rank);
      maybe_finish(rank);
    });
  } else {
    send_kernel_messages(rank);
  }
  maybe_finish(rank);
}

void AllToAllV::send_kernel_messages(int rank) {
  const RankState& me = ranks_[static_cast<std::size_t>(rank)];
  const std::size_t end = me.first_message + static_cast<std::size_t>(me.sends);
  for (std::size_t m = me.first_message; m < end; ++m) {
    if (messages_[m].by_copy_engine) continue;
    const int d = messages_[m].dst;
    context_.ep_message(rank, d, messages_[m].bytes, pass_, name_ + " " + std::to_string(rank) + "->" + std::to_string(d),
                        [this, rank, d] { message_done(rank, d); });
  }
}

void AllToAllV::message_done(int src, int dst) {
  --ranks_[static_cast<std::size_t>(src)].sends_left;
  --ranks_[static_cast<std::size_t>(dst)].receives_left;
  maybe_finish(src);
  maybe_finish(dst);
}

void AllToAllV::maybe_finish(int rank) {
  RankState& me = ranks_[static_cast<std::size_t>(rank)];
  if (!me.started || me.finished || me.paying_fixed || me.sends_left > 0 || me.receives_left > 0) return;
  me.finished = true;
  if (me.holds_sms) {
    context_.sms(rank).release(context_.hardware().ep_backend.comm_sms);
    // A rank with nothing to move passes through at once; an empty slice would only clutter the timeline.
    if (context_.now_ps() > me.start_ps) context_.record(rank, Track::comm_kernel, pass_, name_, me.start_ps);
  }
  rank_done_(rank);
}

}  // namespace epsim
