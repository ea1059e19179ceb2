// Waiting for every rank of a collective (NCCL communicator set-up, the enqueue of a group, the exchange
// itself on the streams) under one deadline, and the one-line messages a user sees when it fails or
// hangs. The per-rank query is injected (the runner asks ncclCommGetAsyncError and cudaStreamQuery), so
// the logic and the messages are unit-tested without a GPU.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hw/host/deadline_wait.hpp"

namespace epsim::hw {

struct RankPoll {
  PollState state = PollState::pending;
  std::string error;  ///< when failed: what the rank reported (call, error name and text)
};

struct CollectiveOutcome {
  WaitResult::Status status = WaitResult::Status::done;
  double elapsed_s = 0;
  std::vector<int> pending_ranks;  ///< ranks not done at the last poll (timed out or failed)
  int failed_rank = -1;
  std::string error;  ///< the failed rank's report
};

/// Polls ranks 0..ranks-1 until all are done, one fails, or `wait`'s deadline passes. A rank that is
/// done is not asked again.
CollectiveOutcome wait_for_ranks(const DeadlineWait& wait, int ranks, const std::function<RankPoll(int)>& poll_rank);

/// "NCCL all-to-all (64 KiB per pair) timed out: rank 1, 3 of 8 had not finished after 120.0 s
/// (--nccl-timeout-s 120)".
std::string collective_timeout_message(const std::string& collective, const CollectiveOutcome& outcome, int ranks,
                                       double timeout_s);
/// "NCCL all-to-all (64 KiB per pair) failed on rank 2 after 0.3 s: <the rank's report>".
std::string collective_failure_message(const std::string& collective, const CollectiveOutcome& outcome);

}  // namespace epsim::hw
