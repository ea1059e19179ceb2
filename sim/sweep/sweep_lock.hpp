// OUTDIR/sweep.lock.json: what a sweep's output folder belongs to. Written once, when the folder is
// first used; a later run with a different sweep (another hash) is refused, so that the results of
// two sweeps never mix. It also holds everything the tables need besides the point files (the points
// in order with their values, the balancers, the baseline), so that `epsim sweep --join` can build
// the tables without the sweep file.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sim/sweep/sweep_spec.hpp"

namespace epsim {

struct SweepLock {
  struct Point {
    std::string id;
    std::vector<std::pair<std::string, std::string>> values;  ///< (key as written, value as flow YAML)
    /// The bandwidth sharing its layers ran with (`auto` resolved at its EP degree), for summary.md;
    /// empty in a lock written before it was kept.
    std::string sharing;
  };
  std::string name;
  std::string hash;
  std::string baseline;
  std::vector<std::pair<std::string, std::string>> balancers;  ///< (label, registry name)
  std::vector<std::string> columns;
  std::vector<Point> points;
  std::vector<std::string> traces;  ///< generated trace files under OUTDIR/traces/

  static SweepLock of(const SweepSpec& spec);
  std::string json() const;
  /// InputError naming `path` for a file that is not a sweep lock.
  static SweepLock read(const std::string& path);
};

}  // namespace epsim
