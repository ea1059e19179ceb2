#include "sim/replay/all_to_all.hpp"

#include <cassert>

namespace epsim {

AllToAllV::AllToAllV(SimContext& context, std::string name, Pass pass,
                     std::vector<std::vector<double>> payload_bytes, std::function<void(int)> rank_done)
    : context_(context),
      name_(std::move(name)),
      pass_(pass),
      bytes_(std::move(payload_bytes)),
      rank_done_(std::move(rank_done)) {
  const int n = context_.num_gpus();
  assert(static_cast<int>(bytes_.size()) == n);
  sends_left_.assign(n, 0);
  receives_left_.assign(n, 0);
  started_.assign(n, false);
  finished_.assign(n, false);
  start_ps_.assign(n, 0);
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d)
      if (s != d && bytes_[s][d] > 0) {
        ++sends_left_[s];
        ++receives_left_[d];
      }
}

double AllToAllV::total_bytes() const {
  double total = 0;
  for (std::size_t s = 0; s < bytes_.size(); ++s)
    for (std::size_t d = 0; d < bytes_.size(); ++d)
      if (s != d) total += bytes_[s][d];
  return total;
}

void AllToAllV::start(int rank) {
  assert(!started_[rank]);
  started_[rank] = true;
  start_ps_[rank] = context_.now_ps();
  context_.sms(rank).acquire(context_.hardware().ep_backend.comm_sms);
  const int n = context_.num_gpus();
  for (int d = 0; d < n; ++d) {
    if (d == rank || bytes_[rank][d] <= 0) continue;
    context_.ep_message(rank, d, bytes_[rank][d], pass_, name_ + " " + std::to_string(rank) + "->" + std::to_string(d),
                        [this, rank, d] {
                          --sends_left_[rank];
                          --receives_left_[d];
                          maybe_finish(rank);
                          maybe_finish(d);
                        });
  }
  maybe_finish(rank);
}

void AllToAllV::maybe_finish(int rank) {
  if (!started_[rank] || finished_[rank] || sends_left_[rank] > 0 || receives_left_[rank] > 0) return;
  finished_[rank] = true;
  context_.sms(rank).release(context_.hardware().ep_backend.comm_sms);
  // A rank with nothing to move passes through at once; an empty slice would only clutter the timeline.
  if (context_.now_ps() > start_ps_[rank]) context_.record(rank, Track::comm_kernel, pass_, name_, start_ps_[rank]);
  rank_done_(rank);
}

}  // namespace epsim
