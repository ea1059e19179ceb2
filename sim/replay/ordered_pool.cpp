#include "sim/replay/ordered_pool.hpp"

#include <algorithm>

namespace epsim {

OrderedPool::OrderedPool(unsigned threads) {
  const unsigned n = std::max(1u, threads);
  workers_.reserve(n);
  try {
    for (unsigned t = 0; t < n; ++t) workers_.emplace_back([this] { work(); });
  } catch (...) {
    // A thread that could not start: the destructor does not run for a half-built pool, so the
    // workers already started are stopped here.
    stop();
    throw;
  }
}

OrderedPool::~OrderedPool() { stop(); }

void OrderedPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  job_ready_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void OrderedPool::push(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    slots_.push_back(Slot{std::move(job), false, nullptr});
  }
  job_ready_.notify_one();
}

std::size_t OrderedPool::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_.size();
}

void OrderedPool::collect_oldest() {
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (slots_.empty()) return;
    job_done_.wait(lock, [this] { return slots_.front().done; });
    error = slots_.front().error;
    slots_.pop_front();
    --started_;
  }
  if (error) std::rethrow_exception(error);
}

void OrderedPool::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    job_ready_.wait(lock, [this] { return stopping_ || started_ < slots_.size(); });
    if (stopping_) return;
    // push_back and pop_front leave references to the other elements of a deque valid, so the slot
    // can be used without the lock while the caller pushes and collects around it.
    Slot& slot = slots_[started_++];
    lock.unlock();
    std::exception_ptr error;
    try {
      slot.job();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    slot.error = error;
    slot.done = true;
    // Only the oldest slot is waited for, but which one that is the waiter decides: wake it always.
    job_done_.notify_all();
  }
}

}  // namespace epsim
