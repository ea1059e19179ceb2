// Runs independent jobs on a number of threads. Jobs are taken in index order; the first exception
// stops the others from taking new jobs (running ones finish) and is rethrown by run().
#pragma once

#include <cstddef>
#include <functional>

namespace epsim {

/// Calls job(i) for i in [0, count) on `threads` threads (at least 1, at most count). `keep_going`,
/// asked before each job, stops the pool early when it returns false.
void run_jobs(std::size_t count, unsigned threads, const std::function<void(std::size_t)>& job,
              const std::function<bool()>& keep_going = nullptr);

}  // namespace epsim
