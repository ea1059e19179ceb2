// An all-to-all-v on the EP backend with a different size per (src, dst) pair. Each rank runs one
// communication kernel that holds the backend's SMs from the moment the rank starts it until all of
// its own messages have been delivered and all messages addressed to it have arrived (DeepEP and NCCL
// kernels spin until both sides are done). Ranks start independently: a combine starts on a GPU as
// soon as that GPU's GEMMs are done, while others are still computing.
//
// The CommKernel says how: a kernel's fixed cost is paid after it takes its SMs and before its first
// byte (a rank with nothing to send or receive launches no kernel and passes through at once); with
// the copy_engine engine every intra-node message is a Copy Engine copy issued when the sender starts,
// and only ranks that send or receive across nodes run a kernel and hold SMs. A rank's part ends
// when its kernel, its copies and everything addressed to it are done.
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
            std::function<void(int rank)> rank_done, CommKernel kernel = {});

  /// Launches rank `rank`'s kernel now: it takes its SMs and sends its messages.
  void start(int rank);
  /// Payload bytes that leave their GPU.
  double total_bytes() const;
  /// Of those, the bytes moved by Copy Engine copies (0 unless the engine is copy_engine).
  double copy_engine_bytes() const;

 private:
  void send_kernel_messages(int rank);
  void message_done(int src, int dst);
  void maybe_finish(int rank);

  /// One message: a (src, dst) pair with bytes to move.
  struct Message {
    int dst = 0;
    double bytes = 0;
    bool by_copy_engine = false;
  };
  /// One rank's part. A plan may have hundreds of thousands of stages, each an AllToAllV, most of
  /// them nearly empty: the state is kept compact (no dense n x n matrix) for that reason.
  struct RankState {
    std::size_t first_message = 0;  ///< its messages are messages_[first_message, first_message + sends)
    int sends = 0;
    int sends_left = 0;
    int receives = 0;
    int receives_left = 0;
    bool holds_sms = false;       ///< runs a communication kernel
    bool paying_fixed = false;    ///< its kernel is in its fixed cost
    bool started = false;
    bool finished = false;
    Time_ps start_ps = 0;
  };

  SimContext& context_;
  std::string name_;
  Pass pass_;
  std::function<void(int)> rank_done_;
  CommKernel kernel_;
  std::vector<Message> messages_;  ///< by source rank, then destination
  std::vector<RankState> ranks_;
  double total_bytes_ = 0;
  double copy_engine_bytes_ = 0;
};

}  // namespace epsim
