#include "sim/report/comparison_exact_check.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "sim/core/number_text.hpp"

namespace epsim {

namespace {

std::string fixed(const char* format, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v == 0 ? 0.0 : v);
  return buf;
}

/// `from` to `to` as percentages, one figure when they read the same.
std::string percent_range(double from, double to) {
  const std::string a = signed_percent(from), b = signed_percent(to);
  return a == b ? a : a + " to " + b;
}

}  // namespace

void ComparisonExactCheck::add(const ComparisonKey& key, BandwidthSharing sharing, ExactCheck&& check) {
  if (sharing == BandwidthSharing::exact || sharing == BandwidthSharing::automatic)
    throw std::logic_error("ComparisonExactCheck: a replay is checked against exact under the mode it ran");
  Replay replay{key, sharing, std::move(check), {}};
  replay.summary = replay.check.summary();  // (throws for a replay with nothing checked)
  replays_.push_back(std::move(replay));
}

void ComparisonExactCheck::add_exact_replay(int ep_degree) {
  if (std::find(exact_degrees_.begin(), exact_degrees_.end(), ep_degree) == exact_degrees_.end())
    exact_degrees_.push_back(ep_degree);
}

void ComparisonExactCheck::write_csv(std::ostream& out) const {
  out << ExactCheck::csv_header("case,ep_degree,balancer,sharing,");
  for (const Replay& r : replays_) {
    // Case names and labels hold letters, digits and . _ - + alone: no cell needs quotes.
    r.check.write_csv_rows(out, r.key.case_name + "," + std::to_string(r.key.ep_degree) + "," + r.key.balancer + "," +
                                    to_string(r.sharing) + ",");
  }
}

std::string ComparisonExactCheck::markdown(const std::string& baseline) const {
  std::ostringstream out;
  out << "## Checked against exact\n\n";
  if (replays_.empty()) {
    out << "`--check-exact " << wanted_ << "`: every replay ran exact bandwidth sharing; nothing to check.\n";
    return out.str();
  }
  out << "`--check-exact " << wanted_ << "`: the first "
      << (wanted_ == 1 ? std::string("record") : std::to_string(wanted_) + " records")
      << " of each replay that ran a fast sharing, simulated again under exact sharing through the same plans "
         "(exact_check.csv has each record). Layer times are medians over the records checked, errors each "
         "record's against exact's, the speedup the baseline `"
      << baseline << "`'s median layer time over the balancer's, on the same records.\n\n";
  out << "| case | EP | balancer | sharing | records | layer time us | exact us | layer error | GPU finish error "
         "| last GPU as exact | speedup | exact speedup |\n";
  out << "| --- | --: | --- | --- | --: | --: | --: | --: | --: | --: | --: | --: |\n";
  // The baseline's replay at the same case and EP degree, if it was checked.
  const auto baseline_of = [&](const Replay& r) -> const Replay* {
    for (const Replay& b : replays_)
      if (b.key.balancer == baseline && b.key.case_name == r.key.case_name && b.key.ep_degree == r.key.ep_degree) return &b;
    return nullptr;
  };
  for (const Replay& r : replays_) {
    const ExactCheck::Summary& s = r.summary;
    const Replay* b = baseline_of(r);
    // The same records on both sides: a balancer's first records against the baseline's first.
    const bool comparable = b != nullptr && b->summary.records == s.records;
    out << "| " << r.key.case_name << " | " << r.key.ep_degree << " | " << r.key.balancer << " | " << to_string(r.sharing)
        << " | " << s.records << " | " << fixed("%.1f", s.layer_us_median) << " | "
        << fixed("%.1f", s.exact_layer_us_median) << " | " << percent_range(s.layer_error_min, s.layer_error_max)
        << " | " << percent_range(s.gpu_error_min, s.gpu_error_max) << " | " << s.same_last << " of " << s.records
        << " | " << (comparable ? fixed("%.3f", b->summary.layer_us_median / s.layer_us_median) : "n/a") << " | "
        << (comparable ? fixed("%.3f", b->summary.exact_layer_us_median / s.exact_layer_us_median) : "n/a") << " |\n";
  }
  // For each case and EP degree, in the table's order: the balancers by median layer time, fastest
  // first (ties in the table's order), under the replay's sharing and under exact.
  out << "\nOrder by median layer time over the records checked, fastest first:\n\n";
  std::vector<bool> done(replays_.size(), false);
  for (std::size_t i = 0; i < replays_.size(); ++i) {
    if (done[i]) continue;
    std::vector<std::size_t> group;
    for (std::size_t j = i; j < replays_.size(); ++j) {
      if (replays_[j].key.case_name == replays_[i].key.case_name && replays_[j].key.ep_degree == replays_[i].key.ep_degree) {
        group.push_back(j);
        done[j] = true;
      }
    }
    const auto ordered = [&](bool exact) {
      std::vector<std::size_t> order = group;
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const ExactCheck::Summary& sa = replays_[a].summary;
        const ExactCheck::Summary& sb = replays_[b].summary;
        return exact ? sa.exact_layer_us_median < sb.exact_layer_us_median : sa.layer_us_median < sb.layer_us_median;
      });
      std::string names;
      for (const std::size_t k : order) names += (names.empty() ? "" : ", ") + replays_[k].key.balancer;
      return names;
    };
    const std::string fast = ordered(false);
    const std::string exact = ordered(true);
    out << "- " << replays_[i].key.case_name << ", EP " << replays_[i].key.ep_degree << ": ";
    if (group.size() == 1) out << "one balancer checked (" << fast << ")\n";
    else if (fast == exact) out << fast << ": the same under exact\n";
    else out << fast << " under " << to_string(replays_[i].sharing) << "; " << exact << " under exact: **the order differs**\n";
  }
  if (!exact_degrees_.empty()) {
    out << "\nThe replays at EP ";
    for (std::size_t i = 0; i < exact_degrees_.size(); ++i) out << (i ? ", " : "") << exact_degrees_[i];
    out << " ran exact: nothing to check there.\n";
  }
  return out.str();
}

}  // namespace epsim
