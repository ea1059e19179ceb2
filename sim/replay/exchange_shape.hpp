// The fixed part of an all-to-all-v: its hops (who sends to whom, on a kernel or a Copy Engine), what
// each hop waits for and what it feeds, and each rank's role. AllToAllV (all_to_all.hpp) runs a shape;
// the shape says nothing of time.
//
// Why apart: a layer's forward dispatch and its gradient dispatch move the same pairs, as do its
// combine and gradient combine, only with other bytes per token. At wide EP, building a shape was a
// sixth of a layer's instructions (EP 1,024: a million pairs walked twice, a million forwarded pairs
// linked to their RDMA hops; docs/performance.md, "Exchange shapes"), so LayerRun builds one per (stage, direction) and both passes run it.
//
// A shape is built from a payload in any unit (tokens, or bytes) and keeps each hop's amounts as
// terms: one for a hop that carries one pair (or one source's node traffic), one per pair for a
// forwarding hop. An exchange's hop moves the sum of its terms times its bytes per unit, added in
// the order the payload's walk met them, so that a shape built from tokens gives, to the last bit,
// the bytes of one built from those tokens' bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/hardware/topology.hpp"
#include "sim/replay/exchange_payload.hpp"
#include "sim/replay/sim_context.hpp"

namespace epsim {

class ExchangeShape {
 public:
  /// One hop: `from` -> `to`, on a kernel or a Copy Engine.
  struct Hop {
    int from = 0;
    int to = 0;
    bool by_copy_engine = false;
    bool first = false;      ///< its bytes leave their origin here (a forwarding hop's were counted on their RDMA hop)
    bool internode = false;
    int pending = 0;         ///< ranks to start (or, for the sender of a kernel hop, to be ready) before it launches
    int inputs = 0;          ///< hops whose bytes it passes on
    std::uint32_t terms_begin = 0;  ///< its amounts: terms()[terms_begin, terms_end)
    std::uint32_t terms_end = 0;
  };
  /// A rank's role: whether a hop touches it, whether it runs a communication kernel, its hops.
  struct Rank {
    bool moves = false;
    bool holds_sms = false;
    int hops = 0;
  };

  /// The hops of `payload` on `topology` with `engine` (copy_engine: intra-node pairs are copies).
  ExchangeShape(const Topology& topology, const ExchangePayload& payload, CommEngine engine);

  const std::vector<Hop>& hops() const { return hops_; }
  const std::vector<Rank>& ranks() const { return ranks_; }
  const std::vector<double>& terms() const { return terms_; }
  CommEngine engine() const { return engine_; }
  /// Ranks that run a kernel and move something.
  std::size_t kernels() const { return kernels_; }
  /// Hops waiting on rank r's start: start_hops()[start_offsets()[r] .. start_offsets()[r + 1]).
  const std::vector<int>& start_offsets() const { return start_offsets_; }
  const std::vector<int>& start_hops() const { return start_hops_; }
  /// Hops waiting on rank r's kernel to be ready, in the same form.
  const std::vector<int>& ready_offsets() const { return ready_offsets_; }
  const std::vector<int>& ready_hops() const { return ready_hops_; }
  /// Hops that pass hop h's bytes on: feeds()[feed_offsets()[h] .. feed_offsets()[h + 1]).
  const std::vector<int>& feed_offsets() const { return feed_offsets_; }
  const std::vector<int>& feeds() const { return feeds_; }

 private:
  /// The hops as they are built, in flat per-hop columns (a wide exchange has hundreds of thousands of
  /// hops; a vector of its own per hop was a tenth of building one): the ranks whose start each hop
  /// awaits, the rank whose kernel it waits to be ready (-1 none), and for node traffic the sources
  /// whose traffic with node `node` it carries (a forwarding NVLink hop: every source the peer serves
  /// for that destination; an RDMA hop: its one source, `rdma_source`).
  struct HopSpecs {
    std::vector<int> wait_offsets{0};  ///< hop h awaits waits[wait_offsets[h] .. wait_offsets[h + 1])
    std::vector<int> waits;
    std::vector<int> after_ready;
    std::vector<int> stream_offsets{0};  ///< the same for streams
    std::vector<int> streams;
    std::vector<int> node;
    std::vector<int> rdma_source;
  };

  void add_hops(const Topology& topology, const ExchangePayload& payload, HopSpecs& specs);
  void index_waits(const HopSpecs& specs);
  void link_streams(const HopSpecs& specs, int nodes, bool to_sources);

  CommEngine engine_;
  std::vector<Hop> hops_;
  std::vector<Rank> ranks_;
  std::vector<double> terms_;
  std::size_t kernels_ = 0;
  // Hops waiting on each rank, as offsets into flat lists (CSR): by its start, and by its kernel ready.
  std::vector<int> start_offsets_, start_hops_;
  std::vector<int> ready_offsets_, ready_hops_;
  // The hops that pass each hop's bytes on, as offsets into a flat list (CSR).
  std::vector<int> feed_offsets_, feeds_;
};

}  // namespace epsim
