// `epsim run --check-exact`'s report (sim/report/exact_check.hpp): a run's records against the same
// records under exact sharing, with figures worked by hand.
#include <doctest/doctest.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/report/exact_check.hpp"
#include "tests/sim/exact_check_fixture.hpp"

using epsim::test::finishing;

namespace {

epsim::LayerMetrics metrics(double layer_us, int last_gpu, double lead_us = 0) {
  return epsim::test::checked_metrics(layer_us, last_gpu, lead_us);
}

}  // namespace

TEST_CASE("the exact check: layer and per-GPU errors, and the GPU named last, against exact") {
  using namespace epsim;
  ExactCheck check(2);
  // Record 1: the run ends GPU 2 last at 300 us; exact ends GPU 1 last at 310 us, GPU 2 at 300 us.
  // Layer 1,000 us against 1,010 us: -0.990%. GPUs: 0, 200 / 310 - 1 = -35.484%, 0. The run's pick
  // ends (310 - 300) / 310 = 3.226% before exact's last, under exact.
  check.add_run(metrics(1000, 2), finishing({100, 200, 300}));
  // Record 2: exact ties GPUs 1 and 2 at 300 us and names 1; the run names 2, which is last too.
  // Layer 2,000 against 1,980 us: +1.010%. GPUs: 0, -1/3, +0.
  check.add_run(metrics(2000, 2), finishing({100, 200, 300}));
  check.add_run(metrics(3000, 0), finishing({100, 200, 300}));  // beyond the two asked for: not kept
  check.add_exact(metrics(1010, 1, 10), finishing({100, 310, 300}));
  check.add_exact(metrics(1980, 1, 0), finishing({100, 300, 300}));
  CHECK(check.checked() == 2);
  CHECK_THROWS_AS(check.add_exact(metrics(3000, 0), finishing({100, 200, 300})), std::logic_error);

  std::ostringstream csv;
  check.write_csv(csv);
  CHECK(csv.str() ==
        "step,micro_batch,layer_id,layer_time_us,exact_layer_time_us,layer_error,gpu_error_min,gpu_error_max,"
        "last_gpu,exact_last_gpu,exact_last_gpu_lead_us,last_gpu_before_exact\n"
        "0,0,0,1000,1010,-0.0099009901,-0.35483871,0,2,1,10,0.0322580645\n"
        "0,0,0,2000,1980,0.0101010101,-0.333333333,0,2,1,0,0\n");
  std::ostringstream text;
  check.print(text, "coupled");
  CHECK(text.str() ==
        "    checked against exact on this trace's first 2 records (--check-exact, exact_check.csv):\n"
        "      coupled's layer time -0.990% to +1.010%, every GPU's forward GEMM finish -35.484% to +0.000%,\n"
        "      the GPU named last exact's in 1 of 2; where not, its pick ends up to 3.226% before exact's under exact\n");
}

TEST_CASE("the exact check of one record names it alone, and one that found the same GPU says no more") {
  using namespace epsim;
  ExactCheck check(1);
  check.add_run(metrics(500, 0), finishing({400, 100}));
  check.add_exact(metrics(500, 0, 300), finishing({400, 100}));
  std::ostringstream text;
  check.print(text, "local");
  CHECK(text.str() ==
        "    checked against exact on this trace's first record (--check-exact, exact_check.csv):\n"
        "      local's layer time +0.000%, every GPU's forward GEMM finish +0.000% to +0.000%,\n"
        "      the GPU named last exact's in 1 of 1\n");
  // A record under exact with another GPU count, or from another place in the trace, is not the run's.
  ExactCheck other(1);
  other.add_run(metrics(500, 0), finishing({400, 100}));
  CHECK_THROWS_AS(other.add_exact(metrics(500, 0), finishing({400, 100, 50})), std::logic_error);
  LayerMetrics later = metrics(500, 0);
  later.micro_batch = 1;
  CHECK_THROWS_AS(other.add_exact(later, finishing({400, 100})), std::logic_error);
}
