#include "sim/sweep/balancer_jobs.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "sim/sweep/work_pool.hpp"

namespace epsim {

void run_balancer_jobs(const std::vector<std::size_t>& balancers, unsigned threads,
                       const std::function<void(std::size_t, std::size_t, unsigned)>& job,
                       const std::function<void(std::size_t, double)>& done) {
  using Clock = std::chrono::steady_clock;
  struct Point {
    std::atomic<std::size_t> left{0};
    bool started = false;  ///< under start_lock
    Clock::time_point t0;
  };
  struct Job {
    std::size_t point;
    std::size_t balancer;
  };
  const std::unique_ptr<Point[]> points(new Point[balancers.size()]);
  std::vector<Job> jobs;
  for (std::size_t i = 0; i < balancers.size(); ++i) {
    points[i].left = balancers[i];
    for (std::size_t b = 0; b < balancers[i]; ++b) jobs.push_back({i, b});
  }
  const unsigned side_by_side =
      static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(std::max(1u, threads), jobs.size())));
  const unsigned threads_each = std::max(1u, threads / side_by_side);
  std::mutex start_lock;
  run_jobs(jobs.size(), side_by_side, [&](std::size_t j) {
    Point& p = points[jobs[j].point];
    {
      const std::lock_guard<std::mutex> hold(start_lock);
      if (!p.started) p.t0 = Clock::now();
      p.started = true;
    }
    job(jobs[j].point, jobs[j].balancer, threads_each);  // a throw leaves the point undone
    if (p.left.fetch_sub(1) != 1) return;
    Clock::time_point t0;
    {
      const std::lock_guard<std::mutex> hold(start_lock);
      t0 = p.t0;
    }
    done(jobs[j].point, std::chrono::duration<double>(Clock::now() - t0).count());
  });
}

}  // namespace epsim
