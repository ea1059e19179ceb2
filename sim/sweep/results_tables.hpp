// The sweep's tables, built from the lock (points in order, balancers, baseline) and the point files
// only: results.csv and results.jsonl (one row per point, balancer and metric) and summary.md (one
// line per point and balancer); with --check-exact, exact_check.csv from the points' checks.
// Columns: docs/sweep.md, "Results" and "Checked against exact".
#pragma once

#include <map>
#include <string>

#include "sim/sweep/point_check.hpp"
#include "sim/sweep/point_result.hpp"
#include "sim/sweep/sweep_lock.hpp"

namespace epsim {

struct SweepTables {
  std::string csv;
  std::string jsonl;
  std::string summary_md;
};

/// `results` holds every point of `lock`, by id.
SweepTables sweep_tables(const SweepLock& lock, const std::map<std::string, PointResult>& results);

/// exact_check.csv (`epsim sweep --check-exact`): a row per checked point and balancer, in the
/// sweep's order: the point, its values, the sharing, the balancer, then the check's figures and
/// the speedups on the baseline. `checks` holds the points that ran a fast sharing, by id.
std::string sweep_check_csv(const SweepLock& lock, const std::map<std::string, PointCheck>& checks);

}  // namespace epsim
