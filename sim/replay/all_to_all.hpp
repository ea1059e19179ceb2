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
//
// With node payloads (token_copies per_node, DeepEP's internode kernels) the inter-node part travels
// in hops: a source sends one RDMA message per destination node to its rail peer there, which forwards
// each destination GPU's share over NVLink, one NVLink stream per (peer, destination) for all the
// sources it serves; a combine runs the same hops backwards (each GPU sends one NVLink stream to each
// rail peer of its node with the outputs of the sources that peer serves, and the peer sends each
// source its node's sum over RDMA). So a layer has n x nodes RDMA flows and n x gpus_per_node NVLink
// flows instead of n^2 pair flows. Hops run concurrently, as the libraries pipeline them in chunks: a
// forwarding hop starts once the forwarding GPU and its sources have started, and a combine's RDMA hop
// once the forwarding GPU and every GPU whose outputs it sums have started. A hop that passes on another hop's bytes is done no earlier than
// that hop (the last chunk must have arrived): a dispatch's forwarding hop after its RDMA hop, a
// combine's RDMA hop after the NVLink hops it sums. A rank's part ends when every hop from or to it is
// done.
//
// Which hops there are and what each waits for is the exchange's shape (exchange_shape.hpp): built
// from the payload, or given, shared by the exchanges that move the same pairs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/replay/exchange_payload.hpp"
#include "sim/replay/exchange_shape.hpp"
#include "sim/replay/sim_context.hpp"

namespace epsim {

class AllToAllV {
 public:
  /// `rank_done(r)` runs when rank r's part ends. The payload is read here and not kept.
  AllToAllV(SimContext& context, std::string name, Pass pass, const ExchangePayload& payload,
            std::function<void(int rank)> rank_done, CommKernel kernel = {});
  /// Runs `shape` (built for kernel.engine on this context's topology) with each hop moving its
  /// amounts times `bytes_per_unit` (> 0).
  AllToAllV(SimContext& context, std::string name, Pass pass, std::shared_ptr<const ExchangeShape> shape,
            double bytes_per_unit, std::function<void(int rank)> rank_done, CommKernel kernel = {});

  /// Launches rank `rank`'s kernel now: it takes its SMs and sends its messages.
  void start(int rank);
  /// Payload bytes that leave their source GPU (forwarding hops not counted again).
  double total_bytes() const { return total_bytes_; }
  /// Of those, the bytes moved by Copy Engine copies (0 unless the engine is copy_engine).
  double copy_engine_bytes() const { return copy_engine_bytes_; }
  /// Payload bytes that cross from one node to another.
  double internode_bytes() const { return internode_bytes_; }
  /// At most this many events reach the timeline from this exchange: one per hop, one per kernel.
  std::size_t timeline_events() const { return hops_.size() + shape_->kernels(); }

 private:
  /// One hop as it runs: the shape's hop with its bytes, what its launch, its record and its end
  /// read. Its end comes at a scattered time (a wide exchange has a hundred thousand hops in
  /// flight), so the hops it feeds are found here too, not in the shape's offsets: one line, where
  /// two were a miss each.
  struct alignas(32) Hop {
    int from = 0;
    int to = 0;
    double bytes = 0;
    std::uint32_t feeds_begin = 0;  ///< the hops it feeds: the shape's feeds()[feeds_begin, feeds_end)
    std::uint32_t feeds_end = 0;
    bool by_copy_engine = false;
    /// It passes on no other hop's bytes: its own end is its last, and its count is never read.
    bool alone = false;
  };
  static_assert(sizeof(Hop) == 32, "a hop never straddles two cache lines");
  /// One rank's part. A plan may have hundreds of thousands of stages, each an AllToAllV, most of
  /// them nearly empty: the state is kept compact (no dense n x n matrix) for that reason.
  /// Whether it moves anything and runs a kernel is the shape's (ExchangeShape::Rank).
  struct RankState {
    int hops_left = 0;            ///< hops from or to it not yet done
    bool paying_fixed = false;    ///< its kernel is in its fixed cost
    bool started = false;
    bool finished = false;
    Time_ps start_ps = 0;
  };

  /// The run's state from the shape: each hop's bytes, in the order the shape's walk met them.
  void prepare(double bytes_per_unit);
  void release(const std::vector<int>& offsets, const std::vector<int>& hops, int rank);
  /// The hop's name on the timeline, empty unless the context names transfers.
  std::string hop_name(const Hop& hop) const;
  void launch(int hop);
  void hop_moved(int hop);
  void hop_done(int hop);
  void kernel_ready(int rank);
  void maybe_finish(int rank);

  SimContext& context_;
  std::string name_;
  Pass pass_;
  std::function<void(int)> rank_done_;
  CommKernel kernel_;
  std::shared_ptr<const ExchangeShape> shape_;
  std::vector<Hop> hops_;
  // What each hop still waits for, apart from the hops: a rank's start counts down hundreds of hops
  // scattered over the exchange, and a wide exchange's hops fill megabytes where these counts fill
  // a few hundred kilobytes, which stay in the core's cache.
  std::vector<std::int32_t> pending_;  ///< ranks still to start (or, for a kernel hop's sender, to be ready)
  std::vector<std::int32_t> left_;     ///< its own bytes and the hops whose bytes it passes on, not yet in
  std::vector<RankState> ranks_;
  double total_bytes_ = 0;
  double copy_engine_bytes_ = 0;
  double internode_bytes_ = 0;
};

}  // namespace epsim
