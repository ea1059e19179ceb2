// Worker threads that run jobs in the order they were pushed and hand them back in that same order:
// the replay plans records one after another on the calling thread, simulates them here on all cores,
// and delivers each outcome in trace order. The caller bounds how many jobs are in flight.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace epsim {

class OrderedPool {
 public:
  /// Starts `threads` workers (at least 1).
  explicit OrderedPool(unsigned threads);
  /// Jobs not yet started are dropped; running ones finish before the workers are joined, so data a
  /// job refers to must outlive the pool.
  ~OrderedPool();
  OrderedPool(const OrderedPool&) = delete;
  OrderedPool& operator=(const OrderedPool&) = delete;

  /// Queues `job` behind every job pushed before it.
  void push(std::function<void()> job);
  /// Jobs pushed and not yet collected.
  std::size_t in_flight() const;
  /// Waits until the oldest job not yet collected has run, then forgets it; rethrows what it threw.
  void collect_oldest();

 private:
  struct Slot {
    std::function<void()> job;
    bool done = false;
    std::exception_ptr error;
  };

  void work();
  /// Stops the workers after the jobs they are running and joins them.
  void stop();

  mutable std::mutex mutex_;
  std::condition_variable job_ready_;  ///< a job was pushed, or the pool is stopping
  std::condition_variable job_done_;   ///< a job finished
  std::deque<Slot> slots_;             ///< not yet collected, oldest first (deque: references stay valid)
  std::size_t started_ = 0;            ///< of slots_, how many from the front a worker has taken
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace epsim
