#include "sim/engine/sm_pool.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace epsim {

SmPool::SmPool(EventQueue& queue, int total_sms) : queue_(queue), total_sms_(total_sms) {
  if (total_sms <= 0) throw std::invalid_argument("SmPool: total_sms must be > 0");
}

int SmPool::total_sms() const { return total_sms_; }
int SmPool::held_sms() const { return held_sms_; }

void SmPool::acquire(int sms) {
  // At least one SM must stay with the compute stream, or a running GEMM would never finish.
  if (sms < 0 || held_sms_ + sms >= total_sms_) {
    throw std::logic_error("SmPool: acquiring " + std::to_string(sms) + " SMs with " + std::to_string(held_sms_) +
                           " of " + std::to_string(total_sms_) + " held");
  }
  if (sms == 0) return;
  progress();
  held_sms_ += sms;
  if (running_) schedule_end();
}

void SmPool::release(int sms) {
  if (sms < 0 || sms > held_sms_) {
    throw std::logic_error("SmPool: releasing " + std::to_string(sms) + " SMs with " + std::to_string(held_sms_) +
                           " held");
  }
  if (sms == 0) return;
  progress();
  held_sms_ -= sms;
  if (running_) schedule_end();
}

void SmPool::submit(Time_ps work_ps, DoneCallback on_done, double hbm_fraction) {
  if (work_ps < 0) throw std::invalid_argument("SmPool: negative kernel work");
  if (work_ps > kMaxTime_ps)
    throw TimeOverflow("a compute kernel of " + short_number(static_cast<double>(work_ps) * 1e-12) +
                       " s is beyond the simulation horizon of 1e+06 s (1e18 ps)");
  if (!(hbm_fraction >= 0 && hbm_fraction <= 1)) throw std::invalid_argument("SmPool: hbm_fraction outside [0, 1]");
  kernels_.push_back(Kernel{work_ps, std::move(on_done), hbm_fraction});
  if (!running_) start_head();
}

void SmPool::set_hbm_pressure(double pressure) {
  progress();
  hbm_pressure_ = pressure < 0 ? 0 : (pressure > 1 ? 1 : pressure);
  if (running_) schedule_end();
}

std::int64_t SmPool::hbm_permille() const {
  if (!running_) return 1000;
  const double f = kernels_.front().hbm_fraction;
  if (f <= 0 || hbm_pressure_ <= 0) return 1000;
  const double speed = (1.0 - hbm_pressure_) / f;
  // A kernel never stops entirely: it keeps at least 5% of its speed.
  return speed >= 1.0 ? 1000 : std::max<std::int64_t>(50, static_cast<std::int64_t>(std::lround(speed * 1000)));
}

Time_ps SmPool::compute_busy_ps() const { return busy_ps_ + (running_ ? queue_.now_ps() - started_ps_ : 0); }

void SmPool::start_head() {
  running_ = true;
  started_ps_ = queue_.now_ps();
  last_update_ps_ = started_ps_;
  remaining_sm_ps_ = static_cast<WideWork>(kernels_.front().work_ps) * total_sms_ * 1000;
  schedule_end();
}

void SmPool::progress() {
  if (!running_) return;
  const Time_ps now = queue_.now_ps();
  remaining_sm_ps_ -= static_cast<WideWork>(now - last_update_ps_) * (total_sms_ - held_sms_) * hbm_permille();
  if (remaining_sm_ps_ < 0) remaining_sm_ps_ = 0;
  last_update_ps_ = now;
}

void SmPool::schedule_end() {
  const std::int64_t rate = (total_sms_ - held_sms_) * hbm_permille();
  const WideWork at = queue_.now_ps() + (remaining_sm_ps_ + rate - 1) / rate;  // rounded up
  // A kernel slowed down by held SMs and HBM pressure can end well after work_ps.
  if (at > kMaxTime_ps)
    throw TimeOverflow("a compute kernel ending at " + short_number(static_cast<double>(at) * 1e-12) +
                       " s is beyond the simulation horizon of 1e+06 s (1e18 ps)");
  if (end_event_ != 0 && queue_.reschedule(end_event_, static_cast<Time_ps>(at))) return;
  end_event_ = queue_.schedule(static_cast<Time_ps>(at), [this] { finish_head(); });
}

void SmPool::finish_head() {
  const Time_ps ended_ps = queue_.now_ps();
  const Time_ps started_ps = started_ps_;
  Kernel done = std::move(kernels_.front());
  kernels_.pop_front();
  busy_ps_ += ended_ps - started_ps;
  running_ = false;
  end_event_ = 0;
  if (!kernels_.empty()) start_head();
  if (done.on_done) done.on_done(started_ps, ended_ps);
}

}  // namespace epsim
