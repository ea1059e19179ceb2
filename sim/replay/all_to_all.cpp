#include "sim/replay/all_to_all.hpp"

#include <algorithm>
#include <cassert>
#include <charconv>

namespace epsim {

AllToAllV::AllToAllV(SimContext& context, std::string name, Pass pass, const ExchangePayload& payload,
                     std::function<void(int)> rank_done, CommKernel kernel)
    : context_(context), name_(std::move(name)), pass_(pass), rank_done_(std::move(rank_done)), kernel_(kernel) {
  const int n = context_.num_gpus();
  assert(static_cast<int>(payload.gpu_bytes.size()) == n);
  ranks_.resize(static_cast<std::size_t>(n));
  HopSpecs specs;
  add_hops(payload, specs);
  // With the sms engine every rank runs its kernel; with copy_engine only ranks with a kernel hop do.
  const bool copies = kernel_.engine == CommEngine::copy_engine;
  for (RankState& rank : ranks_) rank.holds_sms = !copies;
  for (const Hop& hop : hops_) {
    for (const int r : {hop.from, hop.to}) {
      RankState& rank = ranks_[static_cast<std::size_t>(r)];
      rank.moves = true;
      ++rank.hops_left;
      if (!hop.by_copy_engine) rank.holds_sms = true;
    }
  }
  for (const RankState& rank : ranks_) kernels_ += rank.holds_sms && rank.moves ? 1 : 0;
  index_waits(specs);
  link_streams(specs, payload.to_sources);
}

void AllToAllV::add_hops(const ExchangePayload& payload, HopSpecs& specs) {
  const Topology& topology = context_.topology();
  const int n = context_.num_gpus();
  const bool copies = kernel_.engine == CommEngine::copy_engine;
  const bool by_node = !payload.node_bytes.empty();
  const int per_node = topology.gpus_per_node();
  // `origins`: other ranks whose start the hop awaits (whose data it carries). `first`: the bytes leave
  // their origin here (a forwarding hop carries bytes already counted on their RDMA hop).
  // `streams_end`: where a forwarding hop's sources end in specs.streams (-1: no sources of its own).
  auto add = [&](int from, int to, double bytes, const int* origins, std::size_t origin_count, bool first,
                 int streams_end = -1, int node = -1, int rdma_source = -1) {
    Hop hop;
    hop.from = from;
    hop.to = to;
    hop.bytes = bytes;
    const bool same_node = from / per_node == to / per_node;
    hop.by_copy_engine = copies && same_node;
    specs.waits.insert(specs.waits.end(), origins, origins + origin_count);
    if (hop.by_copy_engine) specs.waits.push_back(from);
    specs.wait_offsets.push_back(static_cast<int>(specs.waits.size()));
    specs.after_ready.push_back(hop.by_copy_engine ? -1 : from);
    specs.stream_offsets.push_back(streams_end >= 0 ? streams_end : static_cast<int>(specs.streams.size()));
    specs.node.push_back(node);
    specs.rdma_source.push_back(rdma_source);
    if (first) {
      total_bytes_ += bytes;
      if (hop.by_copy_engine) copy_engine_bytes_ += bytes;
    }
    if (!same_node) internode_bytes_ += bytes;
    hops_.push_back(hop);
  };
  const std::size_t expected =
      static_cast<std::size_t>(n) * static_cast<std::size_t>(by_node ? 2 * per_node + topology.num_nodes() : std::min(n, 64));
  hops_.reserve(expected);
  for (std::vector<int>* column : {&specs.after_ready, &specs.node, &specs.rdma_source}) column->reserve(expected);
  specs.wait_offsets.reserve(expected + 1);
  specs.stream_offsets.reserve(expected + 1);
  if (!by_node) {
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b && payload.gpu_bytes[a][b] > 0) add(a, b, payload.gpu_bytes[a][b], nullptr, 0, true);
    return;
  }
  // NVLink legs inside the expert GPU's node, one per (peer, expert GPU) for all the sources it serves:
  // forward f = from * per_node + local index of to. Their sources are one flat list, forward by
  // forward in that order (which is the forwarding hops' order), each forward's in pair order.
  const std::size_t forwards = static_cast<std::size_t>(n) * static_cast<std::size_t>(per_node);
  std::vector<double> forward_bytes(forwards, 0.0);
  std::vector<int> forward_offsets(forwards + 1, 0);
  // Every pair (a, b) in order, row by row and a row node by node. A dispatch pair's forwarding GPU
  // depends only on its source (the row) and the expert GPU's node, so it is found once per (row,
  // node); a combine pair's is the source's (b's) rail peer, one per pair. The local index of b in
  // node m, b - node_begin, is also its rail peer's. own(a, b, bytes): a pair that travels on its
  // own; forwarded(f, source, bytes): a pair in forward f. A pair whose forwarding GPU is its expert
  // GPU rides the RDMA hop alone.
  const int nodes = topology.num_nodes();
  const auto walk = [&](auto&& own, auto&& forwarded) {
    for (int a = 0; a < n; ++a) {
      const double* row = payload.gpu_bytes[a].data();
      const int a_node = a / per_node;
      for (int m = 0; m < nodes; ++m) {
        const int node_begin = m * per_node;
        const int node_end = std::min(n, node_begin + per_node);
        if (m == a_node) {  // inside the node: no forwarding
          for (int b = node_begin; b < node_end; ++b)
            if (b != a && row[b] > 0) own(a, b, row[b]);
          continue;
        }
        if (!payload.to_sources) {
          // Dispatch: a is the source, b the expert GPU; the peer is a's rail peer in node m.
          const int peer = topology.forwarding_gpu(a, node_begin);
          for (int b = node_begin; b < node_end; ++b) {
            if (row[b] <= 0) continue;
            if (peer < 0) own(a, b, row[b]);  // a partial last node may lack the peer
            else if (peer != b) forwarded(static_cast<std::size_t>(peer) * per_node + static_cast<std::size_t>(b - node_begin), a, row[b]);
          }
        } else {
          // Combine: a is the expert GPU, b the source; the peer is b's rail peer in a's node, which
          // has b's local index, so a's forward to it is a's forward for that index. The peer of the
          // node's first GPU is looked up once (-1: routes are direct) and the others' follow by
          // their index, a partial node of a's lacking the last ones: a combine has a million pairs.
          const int first_peer = topology.forwarding_gpu(node_begin, a);
          for (int b = node_begin; b < node_end; ++b) {
            if (row[b] <= 0) continue;
            const int offset_peer = first_peer + (b - node_begin);
            const int peer = first_peer < 0 || offset_peer >= n ? -1 : offset_peer;
            if (peer < 0) own(a, b, row[b]);  // as in a dispatch, the pair goes on its own
            else if (peer != a) forwarded(static_cast<std::size_t>(a) * per_node + static_cast<std::size_t>(b - node_begin), b, row[b]);
          }
        }
      }
    }
  };
  // Two walks: the first adds the pairs that travel alone and counts and sums each forward's pairs,
  // the second lists their sources in place (a list per forward grown one source at a time was
  // thousands of small blocks, each copied as it grew).
  walk([&](int a, int b, double bytes) { add(a, b, bytes, nullptr, 0, true); },
       [&](std::size_t f, int, double bytes) {
         forward_bytes[f] += bytes;
         ++forward_offsets[f + 1];
       });
  for (std::size_t f = 0; f < forwards; ++f) forward_offsets[f + 1] += forward_offsets[f];
  specs.streams.resize(static_cast<std::size_t>(forward_offsets[forwards]));
  {
    std::vector<int> fill(forward_offsets.begin(), forward_offsets.end() - 1);
    walk([](int, int, double) {},
         [&](std::size_t f, int source, double) { specs.streams[static_cast<std::size_t>(fill[f]++)] = source; });
  }
  // Every forwarded pair is one source in a forwarding hop's streams (and, in a dispatch, its waits).
  specs.waits.reserve(specs.waits.size() + (payload.to_sources ? 0 : specs.streams.size()));
  for (int from = 0; from < n; ++from) {
    const int node = from / per_node;
    for (int local = 0; local < per_node; ++local) {
      const std::size_t f = static_cast<std::size_t>(from) * per_node + static_cast<std::size_t>(local);
      const int begin = forward_offsets[f];
      const int end = forward_offsets[f + 1];
      if (begin == end) continue;
      const int to = node * per_node + local;
      // A dispatch's forward waits for its sources to start; a combine's leaves the expert GPU's own outputs.
      const std::size_t origins = payload.to_sources ? 0 : static_cast<std::size_t>(end - begin);
      add(from, to, forward_bytes[f], specs.streams.data() + begin, origins, false, end, node);
    }
  }
  if (payload.to_sources) {
    // A combine's node sums each wait for at most the other GPUs of their node: room for that at once.
    std::size_t sums = 0;
    for (int r = 0; r < n; ++r)
      for (int m = 0; m < topology.num_nodes(); ++m) sums += payload.node_bytes[r][m] > 0 ? 1 : 0;
    specs.waits.reserve(specs.waits.size() + sums * static_cast<std::size_t>(per_node - 1));
  }
  std::vector<int> origins;
  for (int r = 0; r < n; ++r) {
    for (int m = 0; m < topology.num_nodes(); ++m) {
      const double bytes = payload.node_bytes[r][m];
      if (bytes <= 0 || m == r / per_node) continue;
      const int peer = topology.forwarding_gpu(r, m * per_node);
      if (peer < 0) continue;  // those pairs travelled on their own above
      if (!payload.to_sources) {
        add(r, peer, bytes, nullptr, 0, true, -1, m, r);
        continue;
      }
      // The node's sum leaves the peer once the GPUs whose outputs it sums have started.
      origins.clear();
      for (int d = m * per_node; d < std::min(n, (m + 1) * per_node); ++d)
        if (d != peer && payload.gpu_bytes[d][r] > 0) origins.push_back(d);
      add(peer, r, bytes, origins.data(), origins.size(), true, -1, m, r);
    }
  }
}

void AllToAllV::index_waits(const HopSpecs& specs) {
  const std::size_t n = ranks_.size();
  start_offsets_.assign(n + 1, 0);
  ready_offsets_.assign(n + 1, 0);
  for (const int r : specs.waits) ++start_offsets_[static_cast<std::size_t>(r) + 1];
  for (const int r : specs.after_ready)
    if (r >= 0) ++ready_offsets_[static_cast<std::size_t>(r) + 1];
  for (std::size_t r = 0; r < n; ++r) {
    start_offsets_[r + 1] += start_offsets_[r];
    ready_offsets_[r + 1] += ready_offsets_[r];
  }
  start_hops_.resize(static_cast<std::size_t>(start_offsets_[n]));
  ready_hops_.resize(static_cast<std::size_t>(ready_offsets_[n]));
  std::vector<int> start_fill(start_offsets_.begin(), start_offsets_.end() - 1);
  std::vector<int> ready_fill(ready_offsets_.begin(), ready_offsets_.end() - 1);
  for (std::size_t id = 0; id < hops_.size(); ++id) {
    const int begin = specs.wait_offsets[id];
    const int end = specs.wait_offsets[id + 1];
    const int ready = specs.after_ready[id];
    hops_[id].pending = end - begin + (ready >= 0 ? 1 : 0);
    for (int w = begin; w < end; ++w)
      start_hops_[static_cast<std::size_t>(start_fill[static_cast<std::size_t>(specs.waits[static_cast<std::size_t>(w)])]++)] =
          static_cast<int>(id);
    if (ready >= 0) ready_hops_[static_cast<std::size_t>(ready_fill[static_cast<std::size_t>(ready)]++)] = static_cast<int>(id);
  }
}

void AllToAllV::link_streams(const HopSpecs& specs, bool to_sources) {
  // (node, source) -> its RDMA hop, -1 for none: a flat table, since at wide EP there are
  // sources x nodes of them and a tree of that many was a twentieth of a layer's time. Node-major,
  // because a forwarding hop looks up all its sources in its one node: one row of the table, which
  // stays in the L1 cache (source-major, each lookup was a miss).
  const std::size_t sources = ranks_.size();
  const std::size_t hops = hops_.size();
  std::vector<int> rdma_of(sources * static_cast<std::size_t>(context_.topology().num_nodes()), -1);
  const auto key = [sources](int source, int node) { return static_cast<std::size_t>(node) * sources + static_cast<std::size_t>(source); };
  for (std::size_t id = 0; id < hops; ++id)
    if (specs.rdma_source[id] >= 0) rdma_of[key(specs.rdma_source[id], specs.node[id])] = static_cast<int>(id);
  // Each (input, output) link in the order the streams list them, grouped by input keeping that
  // order: the streams are walked twice, to count each input's outputs and then to place them (a
  // wide exchange has a million of these links).
  const auto for_each_link = [&](auto&& visit) {
    for (std::size_t id = 0; id < hops; ++id) {
      if (specs.rdma_source[id] >= 0 || specs.node[id] < 0) continue;
      for (int k = specs.stream_offsets[id]; k < specs.stream_offsets[id + 1]; ++k) {
        const int rdma = rdma_of[key(specs.streams[static_cast<std::size_t>(k)], specs.node[id])];
        if (rdma < 0) continue;
        // Dispatch: the RDMA hop feeds the forwarding hop; combine: the NVLink hop feeds the node's sum.
        if (to_sources) visit(static_cast<int>(id), rdma);
        else visit(rdma, static_cast<int>(id));
      }
    }
  };
  feed_offsets_.assign(hops + 1, 0);
  for_each_link([&](int input, int output) {
    ++feed_offsets_[static_cast<std::size_t>(input) + 1];
    ++hops_[static_cast<std::size_t>(output)].inputs_left;
  });
  for (std::size_t h = 0; h < hops; ++h) feed_offsets_[h + 1] += feed_offsets_[h];
  feeds_.resize(static_cast<std::size_t>(feed_offsets_[hops]));
  std::vector<int> fill(feed_offsets_.begin(), feed_offsets_.end() - 1);
  for_each_link([&](int input, int output) { feeds_[static_cast<std::size_t>(fill[static_cast<std::size_t>(input)]++)] = output; });
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

std::string AllToAllV::hop_name(const Hop& hop) const {
  // "<exchange> <from>-><to>", built in one allocation (a wide layer has millions of hops), and only
  // where the timeline's names are read.
  std::string name;
  if (!context_.transfer_names()) return name;
  char from[12], to[12];  // an int has at most 11 characters
  const std::size_t from_size = static_cast<std::size_t>(std::to_chars(from, from + sizeof from, hop.from).ptr - from);
  const std::size_t to_size = static_cast<std::size_t>(std::to_chars(to, to + sizeof to, hop.to).ptr - to);
  name.reserve(name_.size() + 3 + from_size + to_size);
  name.append(name_).append(1, ' ').append(from, from_size).append("->").append(to, to_size);
  return name;
}

void AllToAllV::launch(int id) {
  const Hop& hop = hops_[static_cast<std::size_t>(id)];
  if (hop.by_copy_engine) {
    context_.ce_copy(hop.from, hop.to, hop.bytes, pass_, hop_name(hop), [this, id] { hop_moved(id); });
    return;
  }
  // The hop holds what the message's record needs; it is read again at the end, where the hop is
  // touched anyway.
  context_.send_ep_message(hop.from, hop.to, hop.bytes, [this, id](Time_ps start, Time_ps end) {
    const Hop& h = hops_[static_cast<std::size_t>(id)];
    context_.record_message(h.from, h.to, pass_, hop_name(h), h.bytes, start, end);
    hop_moved(id);
  });
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
