#include "sim/sweep/work_pool.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace epsim {

void run_jobs(std::size_t count, unsigned threads, const std::function<void(std::size_t)>& job,
              const std::function<bool()>& keep_going) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&]() {
    while (!failed.load()) {
      if (keep_going && !keep_going()) return;
      const std::size_t i = next.fetch_add(1);
      if (i >= count) return;
      try {
        job(i);
      } catch (...) {
        std::lock_guard<std::mutex> guard(error_mutex);
        if (!error) error = std::current_exception();
        failed.store(true);
      }
    }
  };
  const std::size_t n = std::max<std::size_t>(1, std::min<std::size_t>(threads, count));
  if (n == 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < n; ++t) pool.emplace_back(worker);
    for (std::thread& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace epsim
