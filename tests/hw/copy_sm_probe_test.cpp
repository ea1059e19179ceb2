// The SM probe's verdict (hw/host/copy_sm_probe.hpp) on times worked by hand.
#include <doctest/doctest.h>

#include "hw/host/copy_sm_probe.hpp"

using epsim::hw::CopySmProbeTimes;
using epsim::hw::CopySmVerdict;
using epsim::hw::judge_copy_sm_probe;

TEST_CASE("SM probe: a copy as fast beside the holder as alone used no SM") {
  // 64 MiB at 2 TB/s: 34 us alone, 35 us beside a holder with 1,966 us left.
  CHECK(judge_copy_sm_probe({34.0, 35.0, 1966.0}) == CopySmVerdict::no_sms);
  // Slowed 2.9 x by sharing HBM is still a copy that ran beside the holder.
  CHECK(judge_copy_sm_probe({34.0, 98.6, 1966.0}) == CopySmVerdict::no_sms);
}

TEST_CASE("SM probe: a copy that ends with the holder or after it needed the SMs") {
  // Starts when the holder's 1,966 us are over, then takes its 34 us.
  CHECK(judge_copy_sm_probe({34.0, 2000.0, 1966.0}) == CopySmVerdict::needs_sms);
  // Ends at 0.9 of the holder's time (blocks of the holder that finish early free a few SMs).
  CHECK(judge_copy_sm_probe({34.0, 0.9 * 1966.0, 1966.0}) == CopySmVerdict::needs_sms);
}

TEST_CASE("SM probe: between the two, or slowed beyond 3 x alone, is unclear") {
  CHECK(judge_copy_sm_probe({34.0, 1000.0, 1966.0}) == CopySmVerdict::unclear);
  // Under half the holder's time but 3.5 x alone: not the free-running Copy Engine either.
  CHECK(judge_copy_sm_probe({100.0, 350.0, 1000.0}) == CopySmVerdict::unclear);
  // The edges: exactly half the holder's time is no longer "beside" it; exactly 3 x alone still is.
  CHECK(judge_copy_sm_probe({200.0, 500.0, 1000.0}) == CopySmVerdict::unclear);
  CHECK(judge_copy_sm_probe({200.0, 499.0, 1000.0}) == CopySmVerdict::no_sms);
  CHECK(judge_copy_sm_probe({100.0, 300.0, 1000.0}) == CopySmVerdict::no_sms);
}

TEST_CASE("SM probe: a holder that does not outlast the copy 4 times tells nothing") {
  CHECK(judge_copy_sm_probe({500.0, 510.0, 1999.0}) == CopySmVerdict::inconclusive);
  CHECK(judge_copy_sm_probe({500.0, 510.0, 2000.0}) == CopySmVerdict::no_sms);
  CHECK(judge_copy_sm_probe({0.0, 1.0, 2000.0}) == CopySmVerdict::inconclusive);
}

TEST_CASE("SM probe: a row says copy_on_sms only when the probe could tell") {
  CHECK(epsim::hw::copy_on_sms_of(CopySmVerdict::needs_sms) == std::optional<bool>(true));
  CHECK(epsim::hw::copy_on_sms_of(CopySmVerdict::no_sms) == std::optional<bool>(false));
  CHECK_FALSE(epsim::hw::copy_on_sms_of(CopySmVerdict::unclear).has_value());
  CHECK_FALSE(epsim::hw::copy_on_sms_of(CopySmVerdict::inconclusive).has_value());
}

TEST_CASE("SM probe: the comment names the kind, the size, the three times and the verdict") {
  const CopySmProbeTimes t{33.94, 34.06, 1966.04};
  CHECK(epsim::hw::copy_sm_probe_comment("ce_local", 67108864.0, t, 5) ==
        "SM probe (ce_local, 67108864 B): 34.1 us beside a kernel holding every SM for 1966.0 us more "
        "(alone 33.9 us): ran beside it, no SM used; medians of 5");
}
