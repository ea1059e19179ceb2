// `epsim compare --check-exact`'s report (sim/report/comparison_exact_check.hpp): each replay's first
// records against the same records under exact sharing, the balancers' speedups and order under
// both, with figures worked by hand.
#include <doctest/doctest.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sim/report/comparison_exact_check.hpp"
#include "tests/sim/exact_check_fixture.hpp"

using epsim::test::checked_metrics;
using epsim::test::finishing;

namespace {

/// A replay's two records (layers 0 and 1) under its sharing (`run_us`) and under exact (`exact_us`), each with two
/// GPUs finishing at the given times, the run naming `run_last` last and exact `exact_last`.
epsim::ExactCheck checked(std::pair<double, double> run_us, std::pair<double, double> exact_us,
                          const std::vector<double>& run_finish, const std::vector<double>& exact_finish, int run_last,
                          int exact_last) {
  epsim::ExactCheck check(2);
  check.add_run(checked_metrics(run_us.first, run_last), finishing(run_finish));
  check.add_run(checked_metrics(run_us.second, run_last, 0, 1), finishing(run_finish));
  check.add_exact(checked_metrics(exact_us.first, exact_last), finishing(exact_finish));
  check.add_exact(checked_metrics(exact_us.second, exact_last, 0, 1), finishing(exact_finish));
  return check;
}

}  // namespace

TEST_CASE("the comparison's exact check: each replay's errors, speedups on the baseline and the order under both") {
  using namespace epsim;
  ComparisonExactCheck check(2);
  CHECK_FALSE(check.any());
  check.add_exact_replay(8);
  // static_ep, the baseline: 1,000 and 1,200 us against exact's 1,010 and 1,190: -0.990% and
  // +0.840% (1,200 / 1,190 - 1). Medians 1,100 and 1,100. GPUs 100 and 200 us against 100 and 250:
  // 0 and -20%; both name GPU 1 last.
  check.add({"c", 512, "static_ep", "static_ep"}, BandwidthSharing::coupled,
            checked({1000, 1200}, {1010, 1190}, {100, 200}, {100, 250}, 1, 1));
  // ultraep: 900 and 1,000 us against 1,140 and 1,100: -21.053% and -9.091%. Medians 950 and 1,120,
  // so its speedup is 1,100 / 950 = 1.158 under coupled and 1,100 / 1,120 = 0.982 under exact: the
  // order flips. It names GPU 0 last, exact GPU 1, which ends (300 - 150) / 300 = 50% later.
  check.add({"c", 512, "ultraep", "ultraep"}, BandwidthSharing::coupled,
            checked({900, 1000}, {1140, 1100}, {150, 300}, {150, 300}, 0, 1));
  check.add_exact_replay(16);
  check.add_exact_replay(8);
  CHECK(check.any());

  std::ostringstream csv;
  check.write_csv(csv);
  CHECK(csv.str() ==
        "case,ep_degree,balancer,sharing,step,micro_batch,layer_id,layer_time_us,exact_layer_time_us,layer_error,"
        "gpu_error_min,gpu_error_max,last_gpu,exact_last_gpu,exact_last_gpu_lead_us,last_gpu_before_exact\n"
        "c,512,static_ep,coupled,0,0,0,1000,1010,-0.0099009901,-0.2,0,1,1,0,0\n"
        "c,512,static_ep,coupled,0,0,1,1200,1190,0.00840336134,-0.2,0,1,1,0,0\n"
        "c,512,ultraep,coupled,0,0,0,900,1140,-0.210526316,0,0,0,1,0,0.5\n"
        "c,512,ultraep,coupled,0,0,1,1000,1100,-0.0909090909,0,0,0,1,0,0.5\n");

  const std::string md = check.markdown("static_ep");
  CHECK(md.rfind("## Checked against exact\n\n`--check-exact 2`: the first 2 records of each replay", 0) == 0);
  CHECK(md.find("| c | 512 | static_ep | coupled | 2 | 1100.0 | 1100.0 | -0.990% to +0.840% | -20.000% to +0.000% "
                "| 2 of 2 | 1.000 | 1.000 |\n") != std::string::npos);
  CHECK(md.find("| c | 512 | ultraep | coupled | 2 | 950.0 | 1120.0 | -21.053% to -9.091% | +0.000% | 0 of 2 | 1.158 "
                "| 0.982 |\n") != std::string::npos);
  CHECK(md.find("- c, EP 512: ultraep, static_ep under coupled; static_ep, ultraep under exact: **the order differs**\n") !=
        std::string::npos);
  CHECK(md.find("The replays at EP 8, 16 ran exact: nothing to check there.\n") != std::string::npos);
}

TEST_CASE("the comparison's exact check: the same order, a replay without its baseline, nothing checked") {
  using namespace epsim;
  ComparisonExactCheck check(2);
  check.add({"c", 512, "a", "static_ep"}, BandwidthSharing::local,
            checked({1000, 1000}, {1000, 1000}, {100, 200}, {100, 200}, 1, 1));
  check.add({"c", 512, "b", "ultraep"}, BandwidthSharing::local,
            checked({900, 900}, {990, 990}, {100, 200}, {100, 200}, 1, 1));
  check.add({"d", 512, "b", "ultraep"}, BandwidthSharing::local,
            checked({900, 900}, {990, 990}, {100, 200}, {100, 200}, 1, 1));
  const std::string md = check.markdown("a");
  // b is the faster under both (900 against 1,000; 990 against 1,000).
  CHECK(md.find("- c, EP 512: b, a: the same under exact\n") != std::string::npos);
  CHECK(md.find("| c | 512 | b | local | 2 | 900.0 | 990.0 | -9.091% | +0.000% | 2 of 2 | 1.111 | 1.010 |\n") !=
        std::string::npos);
  // Case d has no baseline replay checked: no speedup, and one balancer to order.
  CHECK(md.find("| d | 512 | b | local | 2 | 900.0 | 990.0 | -9.091% | +0.000% | 2 of 2 | n/a | n/a |\n") !=
        std::string::npos);
  CHECK(md.find("- d, EP 512: one balancer checked (b)\n") != std::string::npos);
  CHECK(md.find("ran exact") == std::string::npos);

  // Every replay exact: the section says there was nothing to check.
  ComparisonExactCheck none(3);
  none.add_exact_replay(16);
  CHECK_FALSE(none.any());
  CHECK(none.markdown("a") ==
        "## Checked against exact\n\n`--check-exact 3`: every replay ran exact bandwidth sharing; nothing to check.\n");
  // A replay checked against exact must have run another mode, and have records checked.
  CHECK_THROWS_AS(none.add({"c", 8, "a", "static_ep"}, BandwidthSharing::exact,
                           checked({1, 1}, {1, 1}, {1, 1}, {1, 1}, 0, 0)),
                  std::logic_error);
  CHECK_THROWS_AS(none.add({"c", 8, "a", "static_ep"}, BandwidthSharing::local, ExactCheck(2)), std::logic_error);
}
