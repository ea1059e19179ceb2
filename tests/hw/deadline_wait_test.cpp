// DeadlineWait and wait_for_ranks, driven by a fake clock: the sleeps between polls, the timeout, and
// what a hung or failed collective reports.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "hw/host/collective_wait.hpp"
#include "hw/host/deadline_wait.hpp"

using namespace epsim::hw;

namespace {

/// Time only moves when the waiter sleeps; every sleep is recorded.
struct FakeClock {
  double now = 0;
  std::vector<double> sleeps;
  WaitClock clock() {
    WaitClock c;
    c.now_s = [this] { return now; };
    c.sleep_s = [this](double s) {
      sleeps.push_back(s);
      now += s;
    };
    return c;
  }
};

}  // namespace

TEST_CASE("DeadlineWait: sleeps double up to the cap, never past the deadline, then time out") {
  FakeClock fake;
  const DeadlineWait wait(1.0, fake.clock(), 0.125, 0.5);
  int polls = 0;
  const WaitResult r = wait.wait([&] {
    ++polls;
    return PollState::pending;
  });
  // Polls at t = 0, 0.125, 0.375, 0.875 and 1.0; the last sleep is cut to the 0.125 s left.
  CHECK(r.status == WaitResult::Status::timed_out);
  CHECK(r.polls == 5);
  CHECK(polls == 5);
  CHECK(r.elapsed_s == 1.0);
  CHECK(fake.sleeps == std::vector<double>{0.125, 0.25, 0.5, 0.125});
}

TEST_CASE("DeadlineWait: work that finishes at the deadline is done, not timed out") {
  FakeClock fake;
  const DeadlineWait wait(1.0, fake.clock(), 0.125, 0.5);
  int polls = 0;
  const WaitResult r = wait.wait([&] { return ++polls == 5 ? PollState::done : PollState::pending; });
  CHECK(r.status == WaitResult::Status::done);
  CHECK(r.elapsed_s == 1.0);
}

TEST_CASE("DeadlineWait: done at once costs one poll and no sleep, a failure stops the wait") {
  FakeClock fake;
  const DeadlineWait wait(10.0, fake.clock(), 0.25, 1.0);
  const WaitResult now = wait.wait([] { return PollState::done; });
  CHECK(now.status == WaitResult::Status::done);
  CHECK(now.polls == 1);
  CHECK(fake.sleeps.empty());
  int polls = 0;
  const WaitResult failed = wait.wait([&] { return ++polls == 2 ? PollState::failed : PollState::pending; });
  CHECK(failed.status == WaitResult::Status::failed);
  CHECK(failed.polls == 2);
  CHECK(failed.elapsed_s == 0.25);
}

TEST_CASE("DeadlineWait refuses a zero timeout and inverted sleeps") {
  FakeClock fake;
  CHECK_THROWS_AS(DeadlineWait(0.0, fake.clock()), std::invalid_argument);
  CHECK_THROWS_AS(DeadlineWait(1.0, fake.clock(), 0.5, 0.25), std::invalid_argument);
  CHECK_THROWS_AS(DeadlineWait(1.0, WaitClock{}), std::invalid_argument);
}

TEST_CASE("wait_for_ranks: a rank that never finishes times out and is named, finished ranks are not asked again") {
  FakeClock fake;
  const DeadlineWait wait(2.0, fake.clock(), 0.5, 0.5);
  std::vector<int> asked(3, 0);
  const CollectiveOutcome o = wait_for_ranks(wait, 3, [&](int g) {
    ++asked[static_cast<std::size_t>(g)];
    RankPoll p;
    if (g == 0 || (g == 1 && asked[1] >= 3)) p.state = PollState::done;
    return p;  // rank 2 hangs
  });
  // Polls at t = 0, 0.5, 1.0, 1.5, 2.0: rank 0 answers done at once, rank 1 at the third poll.
  CHECK(o.status == WaitResult::Status::timed_out);
  CHECK(o.elapsed_s == 2.0);
  CHECK(o.pending_ranks == std::vector<int>{2});
  CHECK(asked == std::vector<int>{1, 3, 5});
  CHECK(collective_timeout_message("NCCL all-to-all (65536 B per pair)", o, 3, 2.0) ==
        "NCCL all-to-all (65536 B per pair) timed out: rank 2 of 3 had not finished after 2.0 s (--nccl-timeout-s 2)");
}

TEST_CASE("wait_for_ranks: the first failing rank and its report end the wait") {
  FakeClock fake;
  const DeadlineWait wait(120.0, fake.clock(), 0.5, 0.5);
  int round = 0;
  const CollectiveOutcome o = wait_for_ranks(wait, 4, [&](int g) {
    if (g == 0) ++round;
    RankPoll p;
    if (g == 1 && round == 2) {
      p.state = PollState::failed;
      p.error = "ncclCommGetAsyncError: ncclRemoteError";
    }
    return p;
  });
  CHECK(o.status == WaitResult::Status::failed);
  CHECK(o.failed_rank == 1);
  CHECK(o.pending_ranks == std::vector<int>{0, 2, 3});
  CHECK(o.elapsed_s == 0.5);
  CHECK(collective_failure_message("NCCL communicator set-up", o) ==
        "NCCL communicator set-up failed on rank 1 after 0.5 s: ncclCommGetAsyncError: ncclRemoteError");
}

TEST_CASE("wait_for_ranks: all ranks done, and several hung ranks listed in order") {
  FakeClock fake;
  const DeadlineWait wait(0.5, fake.clock(), 0.25, 0.25);
  const CollectiveOutcome ok = wait_for_ranks(wait, 2, [](int) { return RankPoll{PollState::done, ""}; });
  CHECK(ok.status == WaitResult::Status::done);
  CHECK(ok.pending_ranks.empty());
  const CollectiveOutcome hung = wait_for_ranks(wait, 4, [](int g) {
    return RankPoll{g == 2 ? PollState::done : PollState::pending, ""};
  });
  CHECK(hung.status == WaitResult::Status::timed_out);
  CHECK(collective_timeout_message("NCCL all-to-all", hung, 4, 0.5) ==
        "NCCL all-to-all timed out: rank 0, 1, 3 of 4 had not finished after 0.5 s (--nccl-timeout-s 0.5)");
  CHECK_THROWS_AS(wait_for_ranks(wait, 0, [](int) { return RankPoll{}; }), std::invalid_argument);
}
