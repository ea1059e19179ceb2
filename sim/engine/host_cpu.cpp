#include "sim/engine/host_cpu.hpp"

#include <stdexcept>
#include <utility>

namespace epsim {

HostCpu::HostCpu(EventQueue& queue) : queue_(queue) {}

void HostCpu::submit(Time_ps duration_ps, DoneCallback on_done) {
  if (duration_ps < 0) throw std::invalid_argument("HostCpu: negative task duration");
  tasks_.push_back(Task{duration_ps, std::move(on_done)});
  if (!running_) start_head();
}

Time_ps HostCpu::busy_ps() const { return busy_ps_ + (running_ ? queue_.now_ps() - started_ps_ : 0); }

void HostCpu::start_head() {
  running_ = true;
  started_ps_ = queue_.now_ps();
  // Even a zero-length task ends from an event, so that on_done never runs inside submit().
  queue_.schedule_in(tasks_.front().duration_ps, [this] { finish_head(); });
}

void HostCpu::finish_head() {
  const Time_ps ended_ps = queue_.now_ps();
  const Time_ps started_ps = started_ps_;
  Task done = std::move(tasks_.front());
  tasks_.pop_front();
  busy_ps_ += ended_ps - started_ps;
  running_ = false;
  if (!tasks_.empty()) start_head();
  if (done.on_done) done.on_done(started_ps, ended_ps);
}

}  // namespace epsim
