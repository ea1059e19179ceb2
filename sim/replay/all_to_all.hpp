// An all-to-all-v on the EP backend with a different size per (src, dst) pair. Each rank runs one
// communication kernel that holds the backend's SMs from the moment the rank starts it until all of
// its own messages have been delivered and all messages addressed to it have arrived (DeepEP and NCCL
// kernels spin until both sides are done). Ranks start independently: a combine starts on a GPU as
// soon as that GPU's GEMMs are done, while others are still computing.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sim/replay/sim_context.hpp"

namespace epsim {

class AllToAllV {
 public:
  /// `payload_bytes[s][d]`: bytes rank s sends to rank d (the diagonal is ignored: it never leaves
  /// the GPU). `rank_done(r)` runs when rank r's kernel ends.
  AllToAllV(SimContext& context, std::string name, Pass pass, std::vector<std::vector<double>> payload_bytes,
            std::function<void(int rank)> rank_done);

  /// Launches rank `rank`'s kernel now: it takes its SMs and sends its messages.
  void start(int rank);
  /// Payload bytes that leave their GPU.
  double total_bytes() const;

 private:
  void maybe_finish(int rank);

  SimContext& context_;
  std::string name_;
  Pass pass_;
  std::vector<std::vector<double>> bytes_;
  std::function<void(int)> rank_done_;
  std::vector<int> sends_left_;
  std::vector<int> receives_left_;
  std::vector<bool> started_;
  std::vector<bool> finished_;
  std::vector<Time_ps> start_ps_;
};

}  // namespace epsim
