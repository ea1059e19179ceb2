// A sweep's summary.md from point results made by hand: which balancer has the lowest mean layer time
// at how many points (a tie to the first balancer of the sweep), and which resource holds each row's
// critical path longest (a tie to the first in PathResource order: SM, Copy Engine, NVLink, NIC, host,
// waiting).
#include <doctest/doctest.h>

#include <array>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sim/sweep/point_result.hpp"
#include "sim/sweep/results_tables.hpp"
#include "sim/sweep/sweep_lock.hpp"

using namespace epsim;

namespace {

void set_metric(BalancerOutcome& o, const std::string& name, double mean) {
  const std::vector<std::string>& names = sweep_metric_names();
  for (std::size_t m = 0; m < names.size(); ++m)
    if (names[m] == name) o.metrics[m] = MetricStats{mean, mean, mean, mean, mean};
}

/// A served balancer whose records all had this layer time and these critical-path shares (SM, Copy
/// Engine, NVLink, NIC, host, waiting).
BalancerOutcome outcome(const std::string& label, double layer_us, const std::array<double, 6>& shares) {
  BalancerOutcome o;
  o.label = label;
  o.name = label;
  o.records = 1;
  o.metrics.assign(sweep_metric_names().size(), MetricStats{1, 1, 1, 1, 1});
  set_metric(o, "layer_time_us", layer_us);
  const char* const crit[] = {"crit_sm_share",  "crit_copy_engine_share", "crit_nvlink_share",
                              "crit_nic_share", "crit_host_share",        "crit_wait_share"};
  for (std::size_t k = 0; k < 6; ++k) set_metric(o, crit[k], shares[k]);
  return o;
}

/// summary.md's row of `point` (its index) and `label`.
std::string row_of(const std::string& summary, int point, const std::string& label) {
  std::istringstream lines(summary);
  std::string line;
  const std::string start = "| " + std::string(5 - std::to_string(point).size(), ' ') + std::to_string(point) + " |";
  while (std::getline(lines, line))
    if (line.rfind(start, 0) == 0 && line.find("| " + label + " ") != std::string::npos) return line;
  return "";
}

}  // namespace

TEST_CASE("a sweep's summary: the lowest mean layer time per point, ties to the first balancer, and the critical path's resource") {
  SweepLock lock;
  lock.name = "hand";
  lock.baseline = "base";
  lock.balancers = {{"base", "static_ep"}, {"other", "ultraep"}};
  lock.columns = {"ep_degree"};
  lock.points = {{"p0", {{"ep_degree", "8"}}, "exact"}, {"p1", {{"ep_degree", "16"}}, "exact"}};
  std::map<std::string, PointResult> results;
  // Point 0: both 100 us, a tie: the first balancer, base, has the lowest. base's path: 40% SM and
  // 40% NVLink, a tie: SM.
  results["p0"] = {"p0", "", {outcome("base", 100, {0.4, 0, 0.4, 0.2, 0, 0}), outcome("other", 100, {0.3, 0, 0.5, 0.2, 0, 0})}};
  // Point 1: other is faster, 80 us against 100; its path 30% NIC and 30% waiting: NIC.
  results["p1"] = {"p1", "", {outcome("base", 100, {0.2, 0, 0.2, 0.3, 0, 0.3}), outcome("other", 80, {0.1, 0.1, 0.2, 0.3, 0, 0.3})}};
  const std::string summary = sweep_tables(lock, results).summary_md;
  INFO(summary);
  CHECK(summary.find("- base: lowest mean layer time at 1 of 2 points\n") != std::string::npos);
  CHECK(summary.find("- other: lowest mean layer time at 1 of 2 points\n") != std::string::npos);
  CHECK(row_of(summary, 0, "base").find(" 40% SM |") != std::string::npos);
  CHECK(row_of(summary, 0, "other").find(" 50% NVLink |") != std::string::npos);
  CHECK(row_of(summary, 1, "base").find(" 30% NIC |") != std::string::npos);
  // Layer time over the baseline's: 80 / 100.
  CHECK(row_of(summary, 1, "other").find(" 0.800 |") != std::string::npos);
}
