#include "sim/replay/all_to_all.hpp"

#include <algorithm>
#include <cassert>
#include <charconv>

namespace epsim {

namespace {
// How far ahead in a hop's feeds the next counts are requested (AllToAllV::hop_done).
constexpr std::uint32_t kFeedsAhead = 8;
}  // namespace

AllToAllV::AllToAllV(SimContext& context, std::string name, Pass pass, const ExchangePayload& payload,
                     std::function<void(int)> rank_done, CommKernel kernel)
    : AllToAllV(context, std::move(name), pass, std::make_shared<const ExchangeShape>(context.topology(), payload, kernel.engine),
                1.0, std::move(rank_done), kernel) {}

AllToAllV::AllToAllV(SimContext& context, std::string name, Pass pass, std::shared_ptr<const ExchangeShape> shape,
                     double bytes_per_unit, std::function<void(int)> rank_done, CommKernel kernel)
    : context_(context),
      name_(std::move(name)),
      pass_(pass),
      rank_done_(std::move(rank_done)),
      kernel_(kernel),
      shape_(std::move(shape)) {
  assert(shape_->engine() == kernel_.engine);
  assert(static_cast<int>(shape_->ranks().size()) == context_.num_gpus());
  prepare(bytes_per_unit);
}

void AllToAllV::prepare(double bytes_per_unit) {
  const std::vector<ExchangeShape::Rank>& roles = shape_->ranks();
  ranks_.resize(roles.size());
  for (std::size_t r = 0; r < roles.size(); ++r) ranks_[r].hops_left = roles[r].hops;
  // A hop's bytes are its terms' amounts times bytes_per_unit, summed from 0 in the shape's order:
  // the same operations as summing the bytes themselves, so a token shape gives a byte payload's
  // hops exactly. The totals add the hops' bytes in hop order, as a payload's walk would.
  const std::vector<ExchangeShape::Hop>& shape_hops = shape_->hops();
  const double* terms = shape_->terms().data();
  const std::vector<int>& feed_offsets = shape_->feed_offsets();
  // Appended, not resized and then written: a wide exchange's hops fill megabytes, which a resize
  // would first write with zeros.
  hops_.clear();
  pending_.clear();
  left_.clear();
  hops_.reserve(shape_hops.size());
  pending_.reserve(shape_hops.size());
  left_.reserve(shape_hops.size());
  for (std::size_t h = 0; h < shape_hops.size(); ++h) {
    const ExchangeShape::Hop& spec = shape_hops[h];
    double bytes = 0;
    for (std::uint32_t t = spec.terms_begin; t < spec.terms_end; ++t) bytes += terms[t] * bytes_per_unit;
    Hop& hop = hops_.emplace_back();
    hop.from = spec.from;
    hop.to = spec.to;
    hop.bytes = bytes;
    hop.feeds_begin = static_cast<std::uint32_t>(feed_offsets[h]);
    hop.feeds_end = static_cast<std::uint32_t>(feed_offsets[h + 1]);
    hop.by_copy_engine = spec.by_copy_engine;
    hop.alone = spec.inputs == 0;
    pending_.push_back(spec.pending);
    left_.push_back(spec.inputs + 1);  // its own bytes are one more input
    if (spec.first) {
      total_bytes_ += bytes;
      if (spec.by_copy_engine) copy_engine_bytes_ += bytes;
    }
    if (spec.internode) internode_bytes_ += bytes;
  }
}

void AllToAllV::start(int rank) {
  RankState& me = ranks_[static_cast<std::size_t>(rank)];
  const ExchangeShape::Rank& role = shape_->ranks()[static_cast<std::size_t>(rank)];
  assert(!me.started);
  me.started = true;
  me.start_ps = context_.now_ps();
  if (role.holds_sms) context_.sms(rank).acquire(context_.hardware().ep_backend.comm_sms);
  release(shape_->start_offsets(), shape_->start_hops(), rank);
  // A kernel with something to move pays its fixed cost first; one with nothing passes at once.
  if (role.holds_sms && role.moves && kernel_.fixed_ps > 0) {
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

void AllToAllV::kernel_ready(int rank) { release(shape_->ready_offsets(), shape_->ready_hops(), rank); }

void AllToAllV::release(const std::vector<int>& offsets, const std::vector<int>& hops, int rank) {
  for (int i = offsets[static_cast<std::size_t>(rank)]; i < offsets[static_cast<std::size_t>(rank) + 1]; ++i) {
    const int id = hops[static_cast<std::size_t>(i)];
    if (--pending_[static_cast<std::size_t>(id)] == 0) launch(id);
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
  // touched anyway. That end comes at a scattered time, a miss, and so is what is read next: the
  // list of the hops it feeds, or the count of the hops that feed it (no hop has both: a dispatch's
  // RDMA hop feeds its forwards, a forward is fed; a combine's NVLink hop feeds its node's sum, the
  // sum is fed). The engine is told to request the hop and that a little before (end_hints.hpp).
  context_.send_ep_message(
      hop.from, hop.to, hop.bytes,
      [this, id](Time_ps start, Time_ps end) {
        // A hop fed by no other ends with its message, its count unread.
        const Hop& h = hops_[static_cast<std::size_t>(id)];
        const bool done = h.alone || --left_[static_cast<std::size_t>(id)] == 0;
        context_.record_message(h.from, h.to, pass_, hop_name(h), h.bytes, start, end);
        if (done) hop_done(id);
      },
      EndHints{&hop, hop.feeds_begin < hop.feeds_end ? static_cast<const void*>(&shape_->feeds()[hop.feeds_begin])
                     : hop.alone                   ? nullptr
                                                   : &left_[static_cast<std::size_t>(id)]});
}

void AllToAllV::hop_moved(int id) {
  if (--left_[static_cast<std::size_t>(id)] == 0) hop_done(id);
}

void AllToAllV::hop_done(int id) {
  const Hop& hop = hops_[static_cast<std::size_t>(id)];
  const std::vector<int>& feeds = shape_->feeds();
  for (std::uint32_t f = hop.feeds_begin; f < hop.feeds_end; ++f) {
    // A combine's NVLink hop feeds the RDMA hops of every source its peer serves, scattered over
    // the exchange: their counts are requested a few ahead.
    if (f + kFeedsAhead < hop.feeds_end) __builtin_prefetch(&left_[static_cast<std::size_t>(feeds[f + kFeedsAhead])], 1);
    const int next = feeds[f];
    if (--left_[static_cast<std::size_t>(next)] == 0) hop_done(next);
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
  if (shape_->ranks()[static_cast<std::size_t>(rank)].holds_sms) {
    context_.sms(rank).release(context_.hardware().ep_backend.comm_sms);
    // A rank with nothing to move passes through at once; an empty slice would only clutter the timeline.
    if (context_.now_ps() > me.start_ps) context_.record(rank, Track::comm_kernel, pass_, name_, me.start_ps);
  }
  rank_done_(rank);
}

}  // namespace epsim
