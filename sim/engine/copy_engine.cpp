#include "sim/engine/copy_engine.hpp"

#include <cmath>
#include <stdexcept>
#include <utility>

namespace epsim {

CopyEngine::CopyEngine(EventQueue& queue, FlowNetwork& network, Time_ps fixed_cost_ps, double bw_GBps)
    : queue_(queue), network_(network), fixed_cost_ps_(fixed_cost_ps), bw_GBps_(bw_GBps) {
  if (fixed_cost_ps < 0) throw std::invalid_argument("CopyEngine: negative fixed cost");
  if (!(bw_GBps > 0)) throw std::invalid_argument("CopyEngine: bandwidth must be > 0");
}

void CopyEngine::enqueue(const std::vector<LinkId>& links, double bytes, DoneCallback on_done,
                         std::function<void()> on_start) {
  // Checked here rather than when the copy reaches the head, where the error would surface inside
  // some unrelated event.
  if (!(bytes >= 0) || !std::isfinite(bytes)) throw std::invalid_argument("CopyEngine: copy bytes must be >= 0");
  for (LinkId l : links) network_.link_capacity_GBps(l);  // throws std::out_of_range on a bad id
  copies_.push_back(Copy{links, bytes, std::move(on_done), std::move(on_start)});
  if (!running_) start_head();
}

std::size_t CopyEngine::queued() const { return copies_.size(); }

Time_ps CopyEngine::busy_ps() const { return busy_ps_ + (running_ ? queue_.now_ps() - running_since_ps_ : 0); }

double CopyEngine::bytes_copied() const { return bytes_copied_; }

void CopyEngine::start_head() {
  running_ = true;
  running_since_ps_ = queue_.now_ps();
  const Copy& copy = copies_.front();
  if (copy.on_start) copy.on_start();
  // The fixed cost is the flow's latency phase: it holds the engine but no link.
  network_.start_flow(copy.links, copy.bytes, fixed_cost_ps_, bw_GBps_,
                      [this](Time_ps started_ps, Time_ps ended_ps) { finish_head(started_ps, ended_ps); });
}

void CopyEngine::finish_head(Time_ps started_ps, Time_ps ended_ps) {
  Copy done = std::move(copies_.front());
  copies_.pop_front();
  busy_ps_ += ended_ps - started_ps;
  bytes_copied_ += done.bytes;
  running_ = false;
  // The next copy leaves the queue at this very instant, before the callback can enqueue more.
  if (!copies_.empty()) start_head();
  if (done.on_done) done.on_done(started_ps, ended_ps);
}

}  // namespace epsim
