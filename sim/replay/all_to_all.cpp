#include "sim/replay/all_to_all.hpp"

#include <algorithm>
#include <cassert>
#include <charconv>

namespace epsim {

AllToAllV::AllToAllV(SimContext& context, std::string name, Pass pass, ExchangePayload payload,
                     std::function<void(int)> rank_done, CommKernel kernel)
    : context_(context), name_(std::move(name)), pass_(pass), rank_done_(std::move(rank_done)), kernel_(kernel) {
  const int n = context_.num_gpus();
  assert(static_cast<int>(payload.gpu_bytes.size()) == n);
  ranks_.resize(static_cast<std::size_t>(n));
  std::vector<HopSpec> specs;
  add_hops(payload, specs);
  // With the sms engine every rank runs its kernel; with copy_engine only ranks with a kernel hop do.
  const bool copies = kernel_.engine == CommEngine::copy_engine;
  for (RankState& rank : ranks_) rank.holds_sms = !copies;
  for (const HopSpec& spec : specs) {
    for (const int r : {spec.hop.from, spec.hop.to}) {
      RankState& rank = ranks_[static_cast<std::size_t>(r)];
      rank.moves = true;
      ++rank.hops_left;
      if (!spec.hop.by_copy_engine) rank.holds_sms = true;
    }
  }
  index_waits(specs);
  link_streams(specs, payload.to_sources);
}

void AllToAllV::add_hops(const ExchangePayload& payload, std::vector<HopSpec>& specs) {
  const Topology& topology = context_.topology();
  const int n = context_.num_gpus();
  const bool copies = kernel_.engine == CommEngine::copy_engine;
  const bool by_node = !payload.node_bytes.empty();
  // `origins`: other ranks whose start the hop awaits (whose data it carries). `first`: the bytes leave
  // their origin here (a forwarding hop carries bytes already counted on their RDMA hop).
  auto add = [&](int from, int to, double bytes, std::vector<int> origins, bool first,
                 std::vector<int> streams = {}, int node = -1, int rdma_source = -1) {
    HopSpec spec;
    spec.hop.from = from;
    spec.hop.to = to;
    spec.hop.bytes = bytes;
    spec.hop.by_copy_engine = copies && topology.same_node(from, to);
    spec.streams = std::move(streams);
    spec.node = node;
    spec.rdma_source = rdma_source;
    spec.after_start = std::move(origins);
    if (spec.hop.by_copy_engine) spec.after_start.push_back(from);
    else spec.after_ready = from;
    if (first) {
      total_bytes_ += bytes;
      if (spec.hop.by_copy_engine) copy_engine_bytes_ += bytes;
    }
    if (!topology.same_node(from, to)) internode_bytes_ += bytes;
    specs.push_back(std::move(spec));
  };
  // NVLink legs inside the expert GPU's node, one per (peer, expert GPU) for all the sources it serves,
  // kept per (from, to's local index): a flat table read in (from, to) order, since a wide
  // exchange looks one up for each of its n^2 pairs.
  struct Forward {
    double bytes = 0;
    std::vector<int> sources;
  };
  const int per_node = topology.gpus_per_node();
  std::vector<Forward> forwards(by_node ? static_cast<std::size_t>(n) * per_node : 0);
  const auto forward = [&](int from, int to) -> Forward& {
    return forwards[static_cast<std::size_t>(from) * per_node + static_cast<std::size_t>(to % per_node)];
  };
  specs.reserve(static_cast<std::size_t>(n) *
                static_cast<std::size_t>(by_node ? 2 * per_node + topology.num_nodes() : std::min(n, 64)));
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      const double bytes = payload.gpu_bytes[a][b];
      if (a == b || bytes <= 0) continue;
      const int source = payload.to_sources ? b : a;  // the rank whose tokens these are
      const int expert_gpu = payload.to_sources ? a : b;
      const int peer = by_node && !topology.same_node(a, b) ? topology.forwarding_gpu(source, expert_gpu) : -1;
      if (peer < 0) {
        add(a, b, bytes, {}, true);  // one message of its own (a partial last node may lack the peer)
      } else if (peer != expert_gpu) {
        Forward& f = payload.to_sources ? forward(expert_gpu, peer) : forward(peer, expert_gpu);
        f.bytes += bytes;
        f.sources.push_back(source);
      }
    }
  }
  if (!by_node) return;
  for (int from = 0; from < n; ++from) {
    const int node = topology.node_of(from);
    for (int local = 0; local < per_node; ++local) {
      Forward& f = forwards[static_cast<std::size_t>(from) * per_node + static_cast<std::size_t>(local)];
      if (f.sources.empty()) continue;
      const int to = node * per_node + local;
      // A dispatch's forward waits for its sources to start; a combine's leaves the expert GPU's own outputs.
      std::vector<int> origins = payload.to_sources ? std::vector<int>{} : f.sources;
      add(from, to, f.bytes, std::move(origins), false, std::move(f.sources), node);
    }
  }
  for (int r = 0; r < n; ++r) {
    for (int m = 0; m < topology.num_nodes(); ++m) {
      const double bytes = payload.node_bytes[r][m];
      if (bytes <= 0 || m == topology.node_of(r)) continue;
      const int peer = topology.forwarding_gpu(r, m * per_node);
      if (peer < 0) continue;  // those pairs travelled on their own above
      if (!payload.to_sources) {
        add(r, peer, bytes, {}, true, {}, m, r);
        continue;
      }
      // The node's sum leaves the peer once the GPUs whose outputs it sums have started.
      std::vector<int> origins;
      for (int d = m * per_node; d < std::min(n, (m + 1) * per_node); ++d)
        if (d != peer && payload.gpu_bytes[d][r] > 0) origins.push_back(d);
      add(peer, r, bytes, std::move(origins), true, {}, m, r);
    }
  }
}

void AllToAllV::index_waits(const std::vector<HopSpec>& specs) {
  const std::size_t n = ranks_.size();
  start_offsets_.assign(n + 1, 0);
  ready_offsets_.assign(n + 1, 0);
  for (const HopSpec& spec : specs) {
    for (const int r : spec.after_start) ++start_offsets_[static_cast<std::size_t>(r) + 1];
    if (spec.after_ready >= 0) ++ready_offsets_[static_cast<std::size_t>(spec.after_ready) + 1];
  }
  for (std::size_t r = 0; r < n; ++r) {
    start_offsets_[r + 1] += start_offsets_[r];
    ready_offsets_[r + 1] += ready_offsets_[r];
  }
  start_hops_.resize(static_cast<std::size_t>(start_offsets_[n]));
  ready_hops_.resize(static_cast<std::size_t>(ready_offsets_[n]));
  std::vector<int> start_fill(start_offsets_.begin(), start_offsets_.end() - 1);
  std::vector<int> ready_fill(ready_offsets_.begin(), ready_offsets_.end() - 1);
  hops_.reserve(specs.size());
  for (const HopSpec& spec : specs) {
    const int id = static_cast<int>(hops_.size());
    Hop hop = spec.hop;
    hop.pending = static_cast<int>(spec.after_start.size()) + (spec.after_ready >= 0 ? 1 : 0);
    for (const int r : spec.after_start) start_hops_[static_cast<std::size_t>(start_fill[r]++)] = id;
    if (spec.after_ready >= 0) ready_hops_[static_cast<std::size_t>(ready_fill[spec.after_ready]++)] = id;
    hops_.push_back(hop);
  }
}

void AllToAllV::link_streams(const std::vector<HopSpec>& specs, bool to_sources) {
  // (source, node) -> its RDMA hop, -1 for none: a flat table, since at wide EP there are
  // sources x nodes of them and a tree of that many was a twentieth of a layer's time.
  const std::size_t nodes = static_cast<std::size_t>(context_.topology().num_nodes());
  std::vector<int> rdma_of(ranks_.size() * nodes, -1);
  const auto key = [nodes](int source, int node) { return static_cast<std::size_t>(source) * nodes + static_cast<std::size_t>(node); };
  for (std::size_t id = 0; id < specs.size(); ++id)
    if (specs[id].rdma_source >= 0) rdma_of[key(specs[id].rdma_source, specs[id].node)] = static_cast<int>(id);
  // (input, output) in the order they are found, then grouped by input keeping that order.
  std::vector<std::pair<int, int>> links;
  for (std::size_t id = 0; id < specs.size(); ++id) {
    if (specs[id].rdma_source >= 0 || specs[id].node < 0) continue;
    for (const int source : specs[id].streams) {
      const int rdma = rdma_of[key(source, specs[id].node)];
      if (rdma < 0) continue;
      // Dispatch: the RDMA hop feeds the forwarding hop; combine: the NVLink hop feeds the node's sum.
      const int input = to_sources ? static_cast<int>(id) : rdma;
      const int output = to_sources ? rdma : static_cast<int>(id);
      links.emplace_back(input, output);
      ++hops_[static_cast<std::size_t>(output)].inputs_left;
    }
  }
  feed_offsets_.assign(hops_.size() + 1, 0);
  for (const auto& [input, output] : links) ++feed_offsets_[static_cast<std::size_t>(input) + 1];
  for (std::size_t h = 0; h < hops_.size(); ++h) feed_offsets_[h + 1] += feed_offsets_[h];
  feeds_.resize(links.size());
  std::vector<int> fill(feed_offsets_.begin(), feed_offsets_.end() - 1);
  for (const auto& [input, output] : links) feeds_[static_cast<std::size_t>(fill[static_cast<std::size_t>(input)]++)] = output;
}

void AllToAllV::start(int rank) {
  RankState& me = ranks_[static_cast<std::size_t>(rank)];
  assert(!me.started);
  me.started = true;
  me.start_ps = context_.now_ps();
  if (me.holds_sms) context_.sms(rank).acquire(context_.hardware().ep_backend.comm_sms);
  release(start_offsets_, start_hops_, rank);
  // A kernel with something to move pays its fixed cost first; one with nothing passes at once.
  if (me.holds_sms && me.moves && kernel_.fixed_ps > 0) {
    me.paying_fixed = true;
    context_.queue().schedule_in(kernel_.fixed_ps, [this, rank] {
      ranks_[static_cast<std::size_t>(rank)].paying_fixed = false;
      kernel_ready(rank);
      maybe_finish(rank);
    });
  } else {
    kernel_ready(rank);
  }
  maybe_finish(rank);
}

void AllToAllV::kernel_ready(int rank) { release(ready_offsets_, ready_hops_, rank); }

void AllToAllV::release(const std::vector<int>& offsets, const std::vector<int>& hops, int rank) {
  for (int i = offsets[static_cast<std::size_t>(rank)]; i < offsets[static_cast<std::size_t>(rank) + 1]; ++i) {
    const int id = hops[static_cast<std::size_t>(i)];
    if (--hops_[static_cast<std::size_t>(id)].pending == 0) launch(id);
  }
}

void AllToAllV::launch(int id) {
  const Hop& hop = hops_[static_cast<std::size_t>(id)];
  // "<exchange> <from>-><to>", built in one allocation (a wide layer has millions of hops), and only
  // where the timeline's names are read.
  std::string name;
  if (context_.transfer_names()) {
    char from[12], to[12];  // an int has at most 11 characters
    const std::size_t from_size = static_cast<std::size_t>(std::to_chars(from, from + sizeof from, hop.from).ptr - from);
    const std::size_t to_size = static_cast<std::size_t>(std::to_chars(to, to + sizeof to, hop.to).ptr - to);
    name.reserve(name_.size() + 3 + from_size + to_size);
    name.append(name_).append(1, ' ').append(from, from_size).append("->").append(to, to_size);
  }
  if (hop.by_copy_engine)
    context_.ce_copy(hop.from, hop.to, hop.bytes, pass_, std::move(name), [this, id] { hop_moved(id); });
  else
    context_.ep_message(hop.from, hop.to, hop.bytes, pass_, std::move(name), [this, id] { hop_moved(id); });
}

void AllToAllV::hop_moved(int id) {
  Hop& hop = hops_[static_cast<std::size_t>(id)];
  hop.moved = true;
  if (hop.inputs_left == 0) hop_done(id);
}

void AllToAllV::hop_done(int id) {
  const Hop& hop = hops_[static_cast<std::size_t>(id)];
  for (int f = feed_offsets_[static_cast<std::size_t>(id)]; f < feed_offsets_[static_cast<std::size_t>(id) + 1]; ++f) {
    const int next = feeds_[static_cast<std::size_t>(f)];
    Hop& out = hops_[static_cast<std::size_t>(next)];
    if (--out.inputs_left == 0 && out.moved) hop_done(next);
  }
  --ranks_[static_cast<std::size_t>(hop.from)].hops_left;
  --ranks_[static_cast<std::size_t>(hop.to)].hops_left;
  maybe_finish(hop.from);
  maybe_finish(hop.to);
}

void AllToAllV::maybe_finish(int rank) {
  RankState& me = ranks_[static_cast<std::size_t>(rank)];
  if (!me.started || me.finished || me.paying_fixed || me.hops_left > 0) return;
  me.finished = true;
  if (me.holds_sms) {
    context_.sms(rank).release(context_.hardware().ep_backend.comm_sms);
    // A rank with nothing to move passes through at once; an empty slice would only clutter the timeline.
    if (context_.now_ps() > me.start_ps) context_.record(rank, Track::comm_kernel, pass_, name_, me.start_ps);
  }
  rank_done_(rank);
}

}  // namespace epsim
