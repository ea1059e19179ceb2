// `epsim sweep --check-exact N`: each point whose replays run a fast bandwidth sharing (auto's coupled
// or local past 256 GPUs, or a mode the sweep sets) has each balancer's first N records simulated
// under that sharing and again under exact, through the same plans, and the sweep says how far the
// fast model is from exact point by point (OUTDIR/exact_check.csv).
//
// Why a file per point apart from the point's results: the check is a diagnostic a user may add to a
// finished sweep. Kept as OUTDIR/points/ID.check-N.json, it is computed once per point and N, by
// whichever run or shard reaches it, and a run with the option on a finished folder computes the
// checks alone; the point's own results, and the sweep's lock, do not depend on it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim/report/exact_check.hpp"
#include "sim/sweep/sweep_spec.hpp"

namespace epsim {

struct BalancerCheck {
  std::string label;
  std::string not_served;         ///< why the balancer could not serve the point (then no summary)
  ExactCheck::Summary summary;    ///< its first records against exact
};

struct PointCheck {
  std::string id;
  std::string hash;               ///< the point's (SweepPoint::hash)
  std::size_t wanted = 0;         ///< N of --check-exact
  std::string sharing;            ///< the mode the point's replays ran
  std::vector<BalancerCheck> balancers;  ///< in the sweep's balancer order
};

/// Whether the point's replays run a sharing other than exact (a check applies to it).
bool point_runs_fast(const SweepPoint& point);

/// The point's check on its first `records` records, its balancers labelled and not yet checked
/// (check_point_balancer fills each). std::logic_error for a point that runs exact.
PointCheck point_check_of(const SweepPoint& point, std::size_t records);
/// Checks the first `records` records of the point's balancer `b` (its trace at `trace_path`), the
/// replay simulating up to `threads` records at once (the figures do not depend on it): its place in
/// PointCheck::balancers.
BalancerCheck check_point_balancer(const SweepPoint& point, std::size_t b, const std::string& trace_path,
                                   std::size_t records, unsigned threads = 1);

/// The check file's text, and its reading (InputError naming `path` for anything else).
std::string point_check_json(const PointCheck& check);
PointCheck read_point_check_json(const std::string& path);

}  // namespace epsim
