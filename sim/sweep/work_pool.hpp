// Runs independent jobs on a number of threads. Jobs are taken in index order; a job that throws
// stops the others from taking new jobs (running ones finish), and run_jobs rethrows the first error
// in index order: every job before it was taken, so ran, and it is the error a run on one thread
// meets, whichever thread met its own first.
#pragma once

#include <cstddef>
#include <functional>

namespace epsim {

/// Calls job(i) for i in [0, count) on `threads` threads (at least 1, at most count).
void run_jobs(std::size_t count, unsigned threads, const std::function<void(std::size_t)>& job);

}  // namespace epsim
