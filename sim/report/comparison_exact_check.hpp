// `epsim compare --check-exact N`: each replay that ran a fast bandwidth sharing (auto's coupled or
// local past 256 GPUs, or a mode the hardware file names) has its first N records simulated again
// under exact sharing, through the same plans, and the comparison says how far the fast model is from
// exact on them, replay by replay, and whether the balancers keep their order and their speedups.
//
// Why: a comparison is read for its ranking ("which balancer is fastest at EP 512, by how much"). The
// fast models' errors are measured on synthetic layers (docs/performance.md), and an error of 1 to 2%
// on each balancer's layer time could swap two balancers that are that close. The check answers it
// on the user's own traces, for the records it can afford: exact costs seconds to minutes a layer
// past 256 GPUs.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "sim/hardware/hardware_spec.hpp"
#include "sim/report/comparison_table.hpp"
#include "sim/report/exact_check.hpp"

namespace epsim {

class ComparisonExactCheck {
 public:
  /// Checks the first `records` records of each replay.
  explicit ComparisonExactCheck(std::size_t records) : wanted_(records) {}

  std::size_t wanted() const { return wanted_; }
  /// A replay that ran under `sharing` (not exact), with its records checked (check.checked() > 0),
  /// in the comparison's order.
  void add(const ComparisonKey& key, BandwidthSharing sharing, ExactCheck&& check);
  /// A replay that ran exact: nothing to check; its EP degree is named as such.
  void add_exact_replay(int ep_degree);
  /// Whether some replay was checked.
  bool any() const { return !replays_.empty(); }

  /// exact_check.csv: one row per checked record, after its replay's case, EP degree, balancer and
  /// sharing.
  void write_csv(std::ostream& out) const;
  /// comparison.md's section: a table of the checked replays (medians over the checked records,
  /// the errors' ranges, the GPU named last, each balancer's speedup on `baseline` under both
  /// sharings) and, for each case and EP degree, the balancers' order by median layer time under both.
  std::string markdown(const std::string& baseline) const;

 private:
  struct Replay {
    ComparisonKey key;
    BandwidthSharing sharing;
    ExactCheck check;
    ExactCheck::Summary summary;
  };
  std::size_t wanted_;
  std::vector<Replay> replays_;
  std::vector<int> exact_degrees_;  ///< EP degrees whose replays ran exact, each once, in order met
};

}  // namespace epsim
