// A sweep's work as jobs of one (point, balancer) each: the replays of its points, and their checks
// against exact. A point's balancers are independent replays; run as one job, a wide point's eight
// replays ran one after another while the other cores waited, and the widest point set a sweep's end.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace epsim {

/// Runs job(point, balancer, threads_each) for every balancer of every point (point i has
/// `balancers[i]`), point by point, on up to `threads` threads; each of J jobs at once gets
/// threads_each = threads / J threads for its records. Once a point's last job is done, done(point,
/// seconds since its first job started) runs on the thread that finished it. A job that throws
/// stops new jobs from starting (those running finish, and their points' done still runs); then the
/// first error in (point, balancer) order is rethrown (run_jobs).
void run_balancer_jobs(const std::vector<std::size_t>& balancers, unsigned threads,
                       const std::function<void(std::size_t, std::size_t, unsigned)>& job,
                       const std::function<void(std::size_t, double)>& done);

}  // namespace epsim
