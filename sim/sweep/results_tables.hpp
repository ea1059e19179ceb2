// The sweep's tables, built from the lock (points in order, balancers, baseline) and the point files
// only: results.csv and results.jsonl (one row per point, balancer and metric) and summary.md (one
// line per point and balancer). Columns: docs/sweep.md, "Results".
#pragma once

#include <map>
#include <string>

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

}  // namespace epsim
