// What one sweep point produced: for each balancer, the number of records replayed and, per metric,
// the mean, median (p50), 95th percentile, minimum and maximum over those records (docs/sweep.md,
// "Results"). Written as OUTDIR/points/ID.json with every number at full precision, and read back
// to build the tables, so that a resumed sweep's tables are those of an uninterrupted one.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "sim/report/layer_metrics.hpp"
#include "sim/sweep/sweep_spec.hpp"

namespace epsim {

/// The metrics a sweep reports (names as in docs/metrics.md), in table order.
const std::vector<std::string>& sweep_metric_names();

/// mean, p50, p95, min, max.
using MetricStats = std::array<double, 5>;
const std::array<const char*, 5>& metric_stat_names();

/// Summary of `values` (non-empty): percentiles interpolate linearly between sorted values at
/// position q x (n - 1), as numpy's default does.
MetricStats summarise(std::vector<double> values);

struct BalancerOutcome {
  std::string label;
  std::string name;
  std::size_t records = 0;            ///< records the statistics are over (steady state); 0 when not served
  std::string not_served;            ///< why the balancer could not serve the point (then no stats)
  std::vector<MetricStats> metrics;  ///< per sweep_metric_names(), empty when not served
};

struct PointResult {
  std::string id;
  std::string hash;
  std::vector<BalancerOutcome> balancers;  ///< in the sweep's balancer order
};

/// Replays experiment `b` of `point` (its trace already in place), simulating up to `threads` records
/// at once, and summarises its records: one balancer's outcome (PointResult::balancers[b]), the same for
/// any `threads`.
BalancerOutcome run_point_balancer(const SweepPoint& point, std::size_t b, const std::string& trace_path,
                                   unsigned threads = 1);

/// The point file's text, and its reading (InputError naming `path` for anything that is not a
/// point file of this format).
std::string point_json(const PointResult& result);
PointResult read_point_json(const std::string& path);

}  // namespace epsim
