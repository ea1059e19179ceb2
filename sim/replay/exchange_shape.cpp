#include "sim/replay/exchange_shape.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

namespace epsim {

ExchangeShape::ExchangeShape(const Topology& topology, const ExchangePayload& payload, CommEngine engine)
    : engine_(engine) {
  const int n = topology.num_gpus();
  assert(payload.gpu_bytes.empty() ? payload.node_bytes.empty() : static_cast<int>(payload.gpu_bytes.size()) == n);
  ranks_.resize(static_cast<std::size_t>(n));
  HopSpecs specs;
  add_hops(topology, payload, specs);
  // With the sms engine every rank runs its kernel; with copy_engine only ranks with a kernel hop do.
  const bool copies = engine_ == CommEngine::copy_engine;
  for (Rank& rank : ranks_) rank.holds_sms = !copies;
  for (const Hop& hop : hops_) {
    for (const int r : {hop.from, hop.to}) {
      Rank& rank = ranks_[static_cast<std::size_t>(r)];
      rank.moves = true;
      ++rank.hops;
      if (!hop.by_copy_engine) rank.holds_sms = true;
    }
  }
  for (const Rank& rank : ranks_) kernels_ += rank.holds_sms && rank.moves ? 1 : 0;
  index_waits(specs);
  link_streams(specs, topology.num_nodes(), payload.to_sources);
}

void ExchangeShape::add_hops(const Topology& topology, const ExchangePayload& payload, HopSpecs& specs) {
  const int n = static_cast<int>(ranks_.size());
  const bool copies = engine_ == CommEngine::copy_engine;
  const bool listed = payload.gpu_bytes.empty();
  const bool by_node = listed ? payload.per_node : !payload.node_bytes.empty();
  const int per_node = topology.gpus_per_node();
  // `origins`: other ranks whose start the hop awaits (whose data it carries). `first`: the bytes leave
  // their origin here (a forwarding hop carries bytes already counted on their RDMA hop).
  // `streams_end`: where a forwarding hop's sources end in specs.streams (-1: no sources of its own).
  // `terms_end`: where its terms end in terms_; the hop's terms begin where the previous hop's end.
  auto add = [&](int from, int to, std::size_t terms_end, const int* origins, std::size_t origin_count, bool first,
                 int streams_end = -1, int node = -1, int rdma_source = -1) {
    Hop hop;
    hop.from = from;
    hop.to = to;
    const bool same_node = from / per_node == to / per_node;
    hop.by_copy_engine = copies && same_node;
    hop.first = first;
    hop.internode = !same_node;
    hop.terms_begin = hops_.empty() ? 0 : hops_.back().terms_end;
    hop.terms_end = static_cast<std::uint32_t>(terms_end);
    specs.waits.insert(specs.waits.end(), origins, origins + origin_count);
    if (hop.by_copy_engine) specs.waits.push_back(from);
    specs.wait_offsets.push_back(static_cast<int>(specs.waits.size()));
    specs.after_ready.push_back(hop.by_copy_engine ? -1 : from);
    specs.stream_offsets.push_back(streams_end >= 0 ? streams_end : static_cast<int>(specs.streams.size()));
    specs.node.push_back(node);
    specs.rdma_source.push_back(rdma_source);
    hops_.push_back(hop);
  };
  // A hop of one pair (or of one source's node traffic): one term.
  auto add_one = [&](int from, int to, double amount, const int* origins, std::size_t origin_count, int node = -1,
                     int rdma_source = -1) {
    terms_.push_back(amount);
    add(from, to, terms_.size(), origins, origin_count, true, -1, node, rdma_source);
  };
  // A listed payload has at most a hop per pair and per node amount, and a matrix without node
  // traffic a hop per pair that moves, counted first (LAER-MoE's parameter all-gather is a million
  // pairs at EP 1,024, whose columns grew by doubling from a guess of 64 a GPU). A matrix with node
  // traffic is guessed at a full exchange's hops. (Each reserved block of 2 MB or more takes at least
  // one huge page once touched: that guess for each of a sparse exchange's stages held FasterMoE's
  // EP 1,024 layer at 2 GB, before its stages were listed.)
  std::size_t expected = 0;
  if (listed) {
    expected = payload.pairs.size() + payload.node_pairs.size();
  } else if (by_node) {
    expected = static_cast<std::size_t>(n) * static_cast<std::size_t>(2 * per_node + topology.num_nodes());
  } else {
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) expected += a != b && payload.gpu_bytes[a][b] > 0 ? 1 : 0;
  }
  hops_.reserve(expected);
  for (std::vector<int>* column : {&specs.after_ready, &specs.node, &specs.rdma_source}) column->reserve(expected);
  specs.wait_offsets.reserve(expected + 1);
  specs.stream_offsets.reserve(expected + 1);
  if (!by_node && listed) {
    terms_.reserve(expected);
    for (const ExchangePayload::Pair& pair : payload.pairs)
      if (pair.from != pair.to && pair.amount > 0) add_one(pair.from, pair.to, pair.amount, nullptr, 0);
    return;
  }
  if (!by_node) {
    terms_.reserve(expected);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b && payload.gpu_bytes[a][b] > 0) add_one(a, b, payload.gpu_bytes[a][b], nullptr, 0);
    return;
  }
  // NVLink legs inside the expert GPU's node, one per (peer, expert GPU) for all the sources it serves:
  // forward f = from * per_node + local index of to. Their sources are one flat list, forward by
  // forward in that order (which is the forwarding hops' order), each forward's in pair order, and
  // their amounts the same list of terms.
  const std::size_t forwards = static_cast<std::size_t>(n) * static_cast<std::size_t>(per_node);
  std::vector<int> forward_offsets(forwards + 1, 0);
  // Every pair (a, b) in order, row by row and a row node by node. A dispatch pair's forwarding GPU
  // depends only on its source (the row) and the expert GPU's node, so it is found once per (row,
  // node); a combine pair's is the source's (b's) rail peer, one per pair. The local index of b in
  // node m, b - node_begin, is also its rail peer's. own(a, b, amount): a pair that travels on its
  // own; forwarded(f, source, amount): a pair in forward f. A pair whose forwarding GPU is its expert
  // GPU rides the RDMA hop alone.
  const int nodes = topology.num_nodes();
  // node_run(a, m, cells, ...): the pairs of row a with node m, where cells(visit) calls visit(b,
  // amount) for each of them that moves something, in b's order.
  const auto node_run = [&](int a, int m, auto&& cells, auto&& own, auto&& forwarded) {
    const int node_begin = m * per_node;
    if (m == a / per_node) {  // inside the node: no forwarding
      cells([&](int b, double amount) {
        if (b != a) own(a, b, amount);
      });
      return;
    }
    if (!payload.to_sources) {
      // Dispatch: a is the source, b the expert GPU; the peer is a's rail peer in node m.
      const int peer = topology.forwarding_gpu(a, node_begin);
      cells([&](int b, double amount) {
        if (peer < 0) own(a, b, amount);  // a partial last node may lack the peer
        else if (peer != b) forwarded(static_cast<std::size_t>(peer) * per_node + static_cast<std::size_t>(b - node_begin), a, amount);
      });
    } else {
      // Combine: a is the expert GPU, b the source; the peer is b's rail peer in a's node, which
      // has b's local index, so a's forward to it is a's forward for that index. The peer of the
      // node's first GPU is looked up once (-1: routes are direct) and the others' follow by
      // their index, a partial node of a's lacking the last ones: a combine has a million pairs.
      const int first_peer = topology.forwarding_gpu(node_begin, a);
      cells([&](int b, double amount) {
        const int offset_peer = first_peer + (b - node_begin);
        const int peer = first_peer < 0 || offset_peer >= n ? -1 : offset_peer;
        if (peer < 0) own(a, b, amount);  // as in a dispatch, the pair goes on its own
        else if (peer != a) forwarded(static_cast<std::size_t>(a) * per_node + static_cast<std::size_t>(b - node_begin), b, amount);
      });
    }
  };
  // Every pair in (a, b) order: a matrix's rows node by node; a list's runs of one row and node
  // (a stage of FasterMoE's at EP 2,048 has a few pairs in each of a few rows' nodes, where every
  // row's every node was half a million (a, node) visits to each of its two walks).
  const auto walk = [&](auto&& own, auto&& forwarded) {
    if (!listed) {
      for (int a = 0; a < n; ++a) {
        const double* row = payload.gpu_bytes[a].data();
        for (int m = 0; m < nodes; ++m) {
          const int begin = m * per_node;
          const int end = std::min(n, begin + per_node);
          node_run(a, m, [&](auto&& visit) {
            for (int b = begin; b < end; ++b)
              if (row[b] > 0) visit(b, row[b]);
          }, own, forwarded);
        }
      }
      return;
    }
    const std::vector<ExchangePayload::Pair>& pairs = payload.pairs;
    for (std::size_t i = 0; i < pairs.size();) {
      const int a = pairs[i].from;
      const int m = pairs[i].to / per_node;
      std::size_t end = i + 1;
      while (end < pairs.size() && pairs[end].from == a && pairs[end].to / per_node == m) ++end;
      node_run(a, m, [&](auto&& visit) {
        for (std::size_t k = i; k < end; ++k)
          if (pairs[k].amount > 0) visit(pairs[k].to, pairs[k].amount);
      }, own, forwarded);
      i = end;
    }
  };
  // Two walks: the first adds the pairs that travel alone and counts each forward's pairs, the second
  // lists their sources and amounts in place (a list per forward grown one source at a time was
  // thousands of small blocks, each copied as it grew).
  walk([&](int a, int b, double amount) { add_one(a, b, amount, nullptr, 0); },
       [&](std::size_t f, int, double) { ++forward_offsets[f + 1]; });
  for (std::size_t f = 0; f < forwards; ++f) forward_offsets[f + 1] += forward_offsets[f];
  const std::size_t forward_terms = terms_.size();  // the forwards' terms follow the lone pairs'
  specs.streams.resize(static_cast<std::size_t>(forward_offsets[forwards]));
  // Room for the forwarded pairs' terms and the RDMA hops' below (at most one per source and
  // node) at once: grown by doubling, the terms of a wide exchange took half again their size.
  const std::size_t node_hops = listed ? payload.node_pairs.size() : static_cast<std::size_t>(n) * static_cast<std::size_t>(nodes);
  terms_.reserve(forward_terms + specs.streams.size() + node_hops);
  terms_.resize(forward_terms + specs.streams.size());
  {
    std::vector<int> fill(forward_offsets.begin(), forward_offsets.end() - 1);
    walk([](int, int, double) {}, [&](std::size_t f, int source, double amount) {
      const std::size_t at = static_cast<std::size_t>(fill[f]++);
      specs.streams[at] = source;
      terms_[forward_terms + at] = amount;
    });
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
      add(from, to, forward_terms + static_cast<std::size_t>(end), specs.streams.data() + begin, origins, false, end, node);
    }
  }
  // Each rank's node amounts that move, (rank, node) in order: visit(r, m, amount).
  const auto node_amounts = [&](auto&& visit) {
    if (listed) {
      for (const ExchangePayload::Pair& pair : payload.node_pairs)
        if (pair.amount > 0) visit(pair.from, pair.to, pair.amount);
      return;
    }
    for (int r = 0; r < n; ++r)
      for (int m = 0; m < nodes; ++m)
        if (payload.node_bytes[r][m] > 0) visit(r, m, payload.node_bytes[r][m]);
  };
  // Whether pair (a, b) moves something; a list is searched, in its (from, to) order.
  const auto moves = [&](int a, int b) {
    if (!listed) return payload.gpu_bytes[a][b] > 0;
    const auto at = std::lower_bound(payload.pairs.begin(), payload.pairs.end(), std::make_pair(a, b),
                                     [](const ExchangePayload::Pair& pair, const std::pair<int, int>& key) {
                                       return pair.from != key.first ? pair.from < key.first : pair.to < key.second;
                                     });
    return at != payload.pairs.end() && at->from == a && at->to == b && at->amount > 0;
  };
  // A combine's matrix, which GPUs of node m send to source r: bit d - m * per_node of
  // senders[m * n + r]. Read from the matrix column by column, a node sum's origins were a line of
  // another row for each GPU of the node (a million reads at EP 1,024, a tenth of building both
  // shapes); gathered here row by row, in one pass that reads each row in order.
  std::vector<std::uint64_t> senders;
  const bool by_mask = payload.to_sources && !listed && per_node <= 64;
  if (by_mask) {
    senders.assign(static_cast<std::size_t>(nodes) * static_cast<std::size_t>(n), 0);
    for (int d = 0; d < n; ++d) {
      const int m = d / per_node;
      const std::uint64_t bit = std::uint64_t{1} << (d - m * per_node);
      std::uint64_t* const column = senders.data() + static_cast<std::size_t>(m) * static_cast<std::size_t>(n);
      const double* const row = payload.gpu_bytes[static_cast<std::size_t>(d)].data();
      for (int r = 0; r < n; ++r) column[r] |= row[r] > 0 ? bit : 0;
    }
  }
  if (payload.to_sources) {
    // A combine's node sums each wait for at most the other GPUs of their node: room for that at once.
    std::size_t sums = 0;
    node_amounts([&](int, int, double) { ++sums; });
    specs.waits.reserve(specs.waits.size() + sums * static_cast<std::size_t>(per_node - 1));
  }
  std::vector<int> origins;
  node_amounts([&](int r, int m, double amount) {
    if (m == r / per_node) return;
    const int peer = topology.forwarding_gpu(r, m * per_node);
    if (peer < 0) return;  // those pairs travelled on their own above
    if (!payload.to_sources) {
      add_one(r, peer, amount, nullptr, 0, m, r);
      return;
    }
    // The node's sum leaves the peer once the GPUs whose outputs it sums have started.
    origins.clear();
    if (by_mask) {
      // (In d's order, as the walk over the node's GPUs below.)
      const std::uint64_t from = senders[static_cast<std::size_t>(m) * static_cast<std::size_t>(n) + static_cast<std::size_t>(r)];
      for (std::uint64_t bits = from; bits != 0; bits &= bits - 1) {
        const int d = m * per_node + __builtin_ctzll(bits);
        if (d != peer) origins.push_back(d);
      }
    } else {
      for (int d = m * per_node; d < std::min(n, (m + 1) * per_node); ++d)
        if (d != peer && moves(d, r)) origins.push_back(d);
    }
    add_one(peer, r, amount, origins.data(), origins.size(), m, r);
  });
}

void ExchangeShape::index_waits(const HopSpecs& specs) {
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

void ExchangeShape::link_streams(const HopSpecs& specs, int nodes, bool to_sources) {
  // (node, source) -> its RDMA hop, -1 for none: a flat table, since at wide EP there are
  // sources x nodes of them and a tree of that many was a twentieth of a layer's time. Node-major,
  // because a forwarding hop looks up all its sources in its one node: one row of the table, which
  // stays in the L1 cache (source-major, each lookup was a miss).
  const std::size_t sources = ranks_.size();
  const std::size_t hops = hops_.size();
  std::vector<int> rdma_of(sources * static_cast<std::size_t>(nodes), -1);
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
    ++hops_[static_cast<std::size_t>(output)].inputs;
  });
  for (std::size_t h = 0; h < hops; ++h) feed_offsets_[h + 1] += feed_offsets_[h];
  feeds_.resize(static_cast<std::size_t>(feed_offsets_[hops]));
  std::vector<int> fill(feed_offsets_.begin(), feed_offsets_.end() - 1);
  for_each_link([&](int input, int output) { feeds_[static_cast<std::size_t>(fill[static_cast<std::size_t>(input)]++)] = output; });
}

}  // namespace epsim
