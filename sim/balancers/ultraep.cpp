#include "sim/balancers/ultraep.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

#include "sim/balancers/placement.hpp"

namespace epsim {

namespace {

// plan() stands for a kernel on the critical path of every layer (UltraEP's takes about 70 us at EP
// 64) and runs for every record replayed, so it is written to cost little more than writing the Plan
// itself: no allocation inside the search's loops (the oracle's state lives in Domain and is reset
// per cap) and its buffers kept in the balancer between calls (UltraEp::Workspace), no branch that
// depends on the data where the data mix at random, flat arrays indexed by expert instead of a
// vector per expert, the counts read in memory order, every output vector sized once, so that the
// large routes vector is never copied while it grows (the routes are written in place), and, where
// the CPU has AVX2, the split of an expert's tokens computed for four sources at a time.

/// One domain's loads, in domain-local GPU indices, and the oracle's state for the cap it tries.
struct Domain {
  int first = 0;
  std::vector<std::int64_t> rank_load;  ///< L_r from master experts only
  /// Master experts rank by rank, each rank's by descending load (ties: lower id): rank r's are
  /// masters[masters_begin[r] .. masters_begin[r + 1]).
  std::vector<int> masters;
  std::vector<int> masters_begin;
  std::vector<int> sources;  ///< ranks by descending load (ties: lower index)
  // The oracle's state, sized once and reset for every cap.
  std::vector<std::int64_t> slack;
  std::vector<int> slots_used;
  /// The slack of a rank that can take a copy of the expert being exported (a free slot, no copy of
  /// it yet), else 0: the oracle's whole test of a target, kept up to date move by move.
  std::vector<std::int64_t> open_slack;
  std::vector<UltraEpMove> moves;  ///< the moves of the last cap tried
};

/// The experts of GPUs [first_gpu, first_gpu + begin.size() - 1) by home, GPU by GPU, each GPU's in
/// ascending order: GPU g's are experts[begin[g - first_gpu] .. begin[g - first_gpu + 1]). Built once
/// per plan, so that each domain finds its masters without a pass over every expert.
struct MastersByGpu {
  int first_gpu = 0;
  std::vector<int> begin;
  std::vector<int> experts;
  std::vector<int> fill;  ///< a cursor per GPU while `experts` is filled
};

void fill_masters_by_gpu(const std::vector<int>& home, int first_gpu, int num_gpus, MastersByGpu& m) {
  m.first_gpu = first_gpu;
  m.begin.assign(num_gpus + 1, 0);
  for (int g : home)
    if (g >= first_gpu && g < first_gpu + num_gpus) ++m.begin[g - first_gpu + 1];
  for (int g = 0; g < num_gpus; ++g) m.begin[g + 1] += m.begin[g];
  m.experts.resize(m.begin[num_gpus]);
  m.fill.assign(m.begin.begin(), m.begin.end() - 1);
  for (std::size_t e = 0; e < home.size(); ++e) {
    const int g = home[e] - first_gpu;
    if (g >= 0 && g < num_gpus) m.experts[m.fill[g]++] = static_cast<int>(e);
  }
}

/// The longest range sort_small sorts by insertion.
constexpr std::ptrdiff_t kInsertionSort = 16;

/// Sorts [first, last) by `before`, a total order: by insertion, in line, for the few experts of a
/// rank and the few ranks of a domain that a search sorts (dozens of calls a plan, where std::sort's
/// calls cost more than the sorting), else by std::sort.
template <typename Before>
void sort_small(int* first, int* last, Before before) {
  if (last - first > kInsertionSort) {
    std::sort(first, last, before);
    return;
  }
  for (int* i = first + 1; i < last; ++i) {
    const int v = *i;
    int* j = i;
    for (; j > first && before(v, j[-1]); --j) *j = j[-1];
    *j = v;
  }
}

/// Whether the domain's total slack under cap T covers its total excess (the kernel's coarse test).
bool capacity_feasible(std::int64_t cap, const Domain& d) {
  std::int64_t excess = 0;
  std::int64_t slack = 0;
  for (std::int64_t l : d.rank_load) {
    excess += std::max<std::int64_t>(l - cap, 0);
    slack += std::max<std::int64_t>(cap - l, 0);
  }
  return excess <= slack;
}

/// The oracle for cap T; fills d.moves (global GPU ids) and returns true when every rank fits under
/// T. The floor a copy's quota must reach is ceil(need / feasible targets) with `dynamic_floor` (the
/// fast path), else min_tokens_per_replica.
bool quotas_for(std::int64_t cap, Domain& d, const std::vector<std::int64_t>& expert_load, const UltraEpParams& p,
                bool dynamic_floor) {
  const int g_count = static_cast<int>(d.rank_load.size());
  std::vector<UltraEpMove>& moves = d.moves;
  moves.clear();
  if (!capacity_feasible(cap, d)) return false;
  // Every search has a spare slot per GPU (search_domain returns before it without one), so every
  // rank starts open.
  for (int r = 0; r < g_count; ++r) {
    d.slack[r] = std::max<std::int64_t>(cap - d.rank_load[r], 0);
    d.slots_used[r] = 0;
    d.open_slack[r] = d.slack[r];
  }
  std::int64_t* open_slack = d.open_slack.data();
  for (int src : d.sources) {
    std::int64_t need = d.rank_load[src] - cap;
    if (need <= 0) continue;
    for (int m = d.masters_begin[src]; m < d.masters_begin[src + 1]; ++m) {
      const int e = d.masters[m];
      const std::int64_t keep = !p.allow_zero_master_quota && expert_load[e] > 0 ? 1 : 0;
      std::int64_t available = expert_load[e] - keep;
      const std::size_t first_move = moves.size();
      while (need > 0 && available > 0) {
        // A source's own rank has no slack (it is above T), and neither has a master's home when its
        // expert is exported: a copy never lands beside its master. A rank is open when it has slack,
        // a free slot and no copy of the expert: when its open_slack is positive.
        std::int64_t floor_q = p.min_tokens_per_replica;
        if (dynamic_floor) {
          std::int64_t feasible = 0;
          for (int t = 0; t < g_count; ++t) feasible += open_slack[t] > 0 ? 1 : 0;
          if (feasible == 0) break;
          floor_q = std::max<std::int64_t>(1, (need + feasible - 1) / feasible);
        }
        // A target's quota is min(need, slack, available): no rank fits unless the first and last do.
        if (std::min(need, available) < floor_q) break;
        // The largest slack among the open ranks whose slack reaches the floor, ties: lower index.
        // The strict comparison with target_slack >= 0 leaves out the closed ranks (open_slack 0)
        // whatever the floor. Bitwise, not short-circuit: the ranks' conditions mix at random, and the
        // loop stays free of branches that depend on them.
        int target = -1;
        std::int64_t target_slack = 0;
        for (int t = 0; t < g_count; ++t) {
          const std::int64_t slack = open_slack[t];
          if ((slack >= floor_q) & (slack > target_slack)) {
            target = t;
            target_slack = slack;
          }
        }
        if (target < 0) break;
        const std::int64_t q = std::min({need, target_slack, available});
        moves.push_back({e, d.first + target, q});
        d.slack[target] -= q;
        ++d.slots_used[target];
        open_slack[target] = 0;  // it has a copy of e now
        available -= q;
        need -= q;
      }
      // An expert is exported from its home rank only, once per cap, so the copies made are this
      // expert's alone: its targets reopen for the next one where they have slack and a free slot.
      for (std::size_t k = first_move; k < moves.size(); ++k) {
        const int t = moves[k].gpu - d.first;
        open_slack[t] = d.slots_used[t] < p.spare_slots_per_gpu ? d.slack[t] : 0;
      }
      if (need == 0) break;
    }
    if (need > 0) return false;
  }
  return true;
}

__extension__ typedef unsigned __int128 Wide;

/// a / b, remainder in `rem`, for a >= 0 and b > 0, with `inverse` = floor((2^64 - 1) / b): the high
/// half of a x inverse is a / b rounded down or one less (it is within a / 2^64 < 1/2 of a / b), and
/// one comparison corrects it. A multiplication instead of a 64-bit division, which is several times
/// slower and is done for every (source, instance) pair of a split expert.
std::int64_t divide(std::int64_t a, std::int64_t b, std::uint64_t inverse, std::int64_t& rem) {
  std::int64_t q = static_cast<std::int64_t>((static_cast<Wide>(static_cast<std::uint64_t>(a)) * inverse) >> 64);
  std::int64_t r = a - q * b;
  if (r >= b) {
    ++q;
    r -= b;
  }
  rem = r;
  return q;
}

/// x * y / b, remainder in `rem`, for x, y >= 0 and b > 0, `inverse` as for divide: a source's
/// count times an instance's room, over the rooms' sum. The product is taken in 128 bits: a record's
/// counts are 32-bit, and an expert's rooms may pass 2^32, where the 64-bit product wrapped and the
/// split came out billions of tokens off its quotas. Below 2^63, as for every record of realistic
/// size, it goes to divide's multiplication; past it, to a 128-bit division.
inline std::int64_t divide_product(std::int64_t x, std::int64_t y, std::int64_t b, std::uint64_t inverse,
                                   std::int64_t& rem) {
  const Wide product = static_cast<Wide>(static_cast<std::uint64_t>(x)) * static_cast<std::uint64_t>(y);
  if (__builtin_expect(product < (Wide{1} << 63), 1)) return divide(static_cast<std::int64_t>(product), b, inverse, rem);
  const Wide divisor = static_cast<std::uint64_t>(b);
  rem = static_cast<std::int64_t>(product % divisor);
  return static_cast<std::int64_t>(product / divisor);
}

/// One instance of an expert with copies.
struct SplitInstance {
  int gpu = 0;
  int instance = 0;  ///< its index in the plan
  std::int64_t quota = 0;
  std::uint64_t key = 0;  ///< instance << 32: a route's (src_rank, instance) word less its source
};

/// An instance that shares a source's leftover tokens, with what share_left reads of it side by side.
struct Eligible {
  std::int64_t room = 0;  ///< what is left of its quota once its host has kept its own tokens (locality)
  /// Its place among equal remainders as the low bits of a sort key: kTieMask - tie, where tie is its
  /// host GPU (locality) or its index among the expert's instances, so the lower tie has the larger key.
  std::uint64_t tie_key = 0;
  int index = 0;  ///< which of the expert's instances it is
};

/// Bits below a remainder in a sort key (remainder << kTieBits | tie_key): a tie is a GPU index or an
/// instance's index among an expert's copies, both below kMaxPlanGpus = 2^16. Remainders stay below
/// an expert's load, below 2^48 (2^16 sources of 32-bit counts), so a key fits in 64 bits.
constexpr int kTieBits = 16;
constexpr std::uint64_t kTieMask = (std::uint64_t{1} << kTieBits) - 1;
static_assert(kMaxPlanGpus <= (1 << kTieBits), "a GPU index fits below a remainder in a sort key");

// plan() writes a route's src_rank and instance as one little-endian 64-bit word, src_rank low.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "src_rank is the low half of the word");
static_assert(offsetof(TokenRoute, instance) == offsetof(TokenRoute, src_rank) + sizeof(int),
              "instance follows src_rank");
static_assert(offsetof(TokenRoute, via_gpu) == offsetof(TokenRoute, carrier) + sizeof(int),
              "via_gpu follows carrier (one byte and its padding), and the two fill a word");

/// How the sources split an expert's tokens over its instances, worked out once per plan so that each
/// source's split is computed where its routes are written. Locality first: each instance's host keeps
/// its own tokens up to the quota. Then every source splits what is left over the other instances in
/// proportion to their remaining quotas (their room), largest remainder first (ties: lower host GPU,
/// then lower instance). Without locality every source splits all its tokens in proportion to the
/// quotas (ties: lower instance).
struct ExpertSplit {
  const SplitInstance* instances = nullptr;  ///< the master, then the copies as the oracle made them
  int k = 0;
  /// With locality, a source that hosts an instance has either kept all its tokens there or filled
  /// that instance's quota, so every source with tokens left splits them over the same instances: those
  /// with room. Without locality, over all of them. eligible[0 .. m) are they; eligible[m .. k) hold
  /// the indices of the others (room 0), whose tokens from a source that hosts none are 0.
  const Eligible* eligible = nullptr;
  int m = 0;
  std::int64_t total_room = 0;  ///< the rooms' sum (every source's leftover tokens together)
  std::uint64_t inverse = 0;  ///< floor((2^64 - 1) / total_room), for divide()
  bool locality_aware = true;
  int expert = 0;
  /// Where its k entries start in each source's row of plan()'s table (the instances of all experts
  /// with copies, in split_instances' order).
  std::size_t table = 0;
};

/// The most eligible instances for which share_left compares every pair of remainders (m (m - 1) / 2
/// comparisons without a branch); above it, it selects the extra tokens' instances with nth_element.
constexpr int kRankedSplit = 8;

/// share_left for two eligible instances: one division and at most one token left over.
inline void share_two(const ExpertSplit& x, std::int64_t left, std::int64_t* tokens) {
  const Eligible& a = x.eligible[0];
  const Eligible& b = x.eligible[1];
  std::int64_t frac_a = 0;
  const std::int64_t share = divide_product(left, a.room, x.total_room, x.inverse, frac_a);
  // With a remainder there is one token over, and b's remainder is total_room - frac_a: the larger
  // key takes it.
  const std::uint64_t key_a = static_cast<std::uint64_t>(frac_a) << kTieBits | a.tie_key;
  const std::uint64_t key_b = static_cast<std::uint64_t>(x.total_room - frac_a) << kTieBits | b.tie_key;
  const std::int64_t to_a = frac_a != 0 && key_a > key_b ? 1 : 0;
  tokens[a.index] = share + to_a;
  tokens[b.index] = left - share - to_a;
}

/// The shares by division of all but the last of `m` eligible instances, with their keys; returns
/// the tokens left over. The rooms add up to total_room, so the last one's share and remainder follow
/// from the sums: with R the others' remainders, extra = ceil(R / total_room) tokens are left over
/// (fewer than m), the last instance takes what the others' shares and the extra tokens leave, and its
/// remainder is extra * total_room - R. The products go through divide_product, and the remainders
/// (below total_room) fit in a key.
inline std::int64_t divide_shares(const ExpertSplit& x, int m, std::int64_t left, std::int64_t* share,
                                  std::uint64_t* key) {
  const Eligible* eligible = x.eligible;
  const std::int64_t total = x.total_room;
  std::int64_t given = 0;
  std::int64_t rest = 0;
  for (int t = 0; t + 1 < m; ++t) {
    std::int64_t frac = 0;
    share[t] = divide_product(left, eligible[t].room, total, x.inverse, frac);
    given += share[t];
    rest += frac;
    key[t] = static_cast<std::uint64_t>(frac) << kTieBits | eligible[t].tie_key;
  }
  std::int64_t unused = 0;
  const std::int64_t extra = divide(rest + total - 1, total, x.inverse, unused);
  share[m - 1] = left - given - extra;
  key[m - 1] = static_cast<std::uint64_t>(extra * total - rest) << kTieBits | eligible[m - 1].tie_key;
  return extra;
}

/// larger[t] = how many of the M keys are larger than key[t] (keys are distinct), by comparing every
/// pair once: the t with larger[t] < extra are the `extra` largest. Unrolled whole (GCC and Clang
/// read this pragma), so that the counts stay in registers and no branch depends on the keys.
template <int M>
inline void count_larger(const std::uint64_t* key, int* larger) {
  for (int t = 0; t < M; ++t) larger[t] = 0;
#pragma GCC unroll 8
  for (int t = 0; t < M; ++t)
#pragma GCC unroll 8
    for (int j = t + 1; j < M; ++j) {
      const int t_larger = key[t] > key[j] ? 1 : 0;
      larger[j] += t_larger;
      larger[t] += 1 - t_larger;
    }
}

/// share_left for M eligible instances, 3 <= M <= kRankedSplit: the `extra` largest keys get one
/// token more, found by comparing every pair of keys once. M is a constant so that the loops unroll
/// and no branch depends on the remainders.
template <int M>
void share_ranked(const ExpertSplit& x, std::int64_t left, std::int64_t* tokens) {
  std::int64_t share[M];
  std::uint64_t key[M];
  const std::int64_t extra = divide_shares(x, M, left, share, key);
  int larger[M];
  count_larger<M>(key, larger);
  for (int t = 0; t < M; ++t) tokens[x.eligible[t].index] = share[t] + (larger[t] < extra ? 1 : 0);
}

/// share_many's working space, for up to `share.size()` eligible instances (key: twice as many).
struct ShareWork {
  std::vector<std::int64_t> share;
  std::vector<std::uint64_t> key;
  bool lanes = false;           ///< whether split_lanes may run (the CPU has AVX2)
  std::uint32_t most_count = 0;  ///< no count of the record exceeds it
  /// split_lanes' sources that share all their tokens and their counts, one per GPU and a batch more.
  std::vector<int> source;
  std::vector<double> count;
};

/// share_left for more than kRankedSplit eligible instances: nth_element finds the smallest key that
/// gets an extra token.
void share_many(const ExpertSplit& x, std::int64_t left, std::int64_t* tokens, ShareWork& work) {
  const int m = x.m;
  std::int64_t* share = work.share.data();
  std::uint64_t* key = work.key.data();
  const std::int64_t extra = divide_shares(x, m, left, share, key);
  for (int t = 0; t < m; ++t) tokens[x.eligible[t].index] = share[t];
  if (extra == 0) return;
  std::uint64_t* order = key + m;
  std::copy(key, key + m, order);
  std::nth_element(order, order + (extra - 1), order + m, std::greater<std::uint64_t>());
  const std::uint64_t smallest_taken = order[extra - 1];
  for (int t = 0; t < m; ++t) tokens[x.eligible[t].index] += key[t] >= smallest_taken ? 1 : 0;
}

/// Shares `left` tokens of a source over the expert's eligible instances in proportion to their
/// room, largest remainder first: tokens[i] = instance i's share for every eligible i (the others'
/// entries are left as they are). Keys are distinct (an expert's instances are on distinct GPUs, and
/// have distinct indices), so the instances that get the extra tokens are one set however they are
/// selected.
inline void share_left(const ExpertSplit& x, std::int64_t left, std::int64_t* tokens, ShareWork& work) {
  switch (x.m) {
    case 1:  // its room is all the room there is: the whole share, nothing left over
      tokens[x.eligible[0].index] = left;
      return;
    case 2: share_two(x, left, tokens); return;
    case 3: share_ranked<3>(x, left, tokens); return;
    case 4: share_ranked<4>(x, left, tokens); return;
    case 5: share_ranked<5>(x, left, tokens); return;
    case 6: share_ranked<6>(x, left, tokens); return;
    case 7: share_ranked<7>(x, left, tokens); return;
    case 8: share_ranked<8>(x, left, tokens); return;
    default: share_many(x, left, tokens, work); return;
  }
}
static_assert(kRankedSplit == 8, "share_left has a case for every M up to kRankedSplit");

/// Source s's `count` tokens of the expert over its instances, s hosting one of them (with
/// locality): tokens[i] for instance i. The instance on s (an expert has at most one per GPU) keeps
/// its tokens up to its quota first.
void split_source(const ExpertSplit& x, int s, std::int64_t count, std::int64_t* tokens, ShareWork& work) {
  std::int64_t kept = 0;
  for (int i = 0; i < x.k; ++i) {
    tokens[i] = x.locality_aware && x.instances[i].gpu == s ? std::min(count, x.instances[i].quota) : 0;
    kept += tokens[i];
  }
  const std::int64_t left = count - kept;
  // With tokens left, s's own instance is full (its host's tokens reach its quota), so it has no room
  // and share_left, which writes the eligible instances only, keeps what s kept there.
  if (left == 0) return;
  share_left(x, left, tokens, work);
}

#if defined(__x86_64__) && defined(__GNUC__)
// With AVX2 the sources that host none of an expert's instances (all of them without locality) split
// their tokens four at a time, in double precision, where every value is an integer below 2^53 and
// so exact: the same shares, remainders, keys and extra tokens as the one-by-one code, whose plans
// are byte for byte the same. split_lanes alone is compiled for AVX2, and chosen at run time where
// the CPU has it; elsewhere split_column splits one source at a time (in SSE2's two lanes, taking the
// results out of the registers costs what the lanes save).
#define EPSIM_ULTRAEP_LANES 1
constexpr int kLanes = 4;
typedef double LaneReals __attribute__((vector_size(kLanes * sizeof(double))));
typedef std::int64_t LaneInts __attribute__((vector_size(kLanes * sizeof(std::int64_t))));

/// 2^52: below it, adding and subtracting it rounds a non-negative double to an integer, and the bits
/// of v + 2^52 less those of 2^52 are v as an integer.
constexpr double kTwo52 = 4503599627370496.0;
/// The bound on the products count x room (and on the quotients) under which lanes_floor_divide is
/// exact.
constexpr double kTwo50 = kTwo52 / 4;

/// Whether split_lanes computes expert x's shares exactly for counts up to `most`: every product
/// count x room (at most most x total_room) and the divisor together within 2^50 (see
/// lanes_floor_divide), and every key (a remainder below total_room shifted by kTieBits) within 2^53.
bool lanes_exact(const ExpertSplit& x, std::uint32_t most) {
  constexpr std::int64_t kMaxRoom = std::int64_t{1} << (53 - kTieBits);
  return x.total_room > 0 && x.total_room <= kMaxRoom &&
         static_cast<double>(x.total_room) * (static_cast<double>(most) + 1) <= kTwo50;
}

/// floor(a / b) lane by lane, its remainder in `rem`, for integers 0 <= a < 2^50 with a / b below
/// 2^50 too, `inverse` being 1 / b rounded: a x inverse is within a / b x 2^-52 < 1/4 of a / b, so
/// rounded to the nearest integer it is the quotient or one more, which a negative remainder
/// corrects. Exact throughout, and multiplications where a division would hold the lanes up for
/// several times as long.
__attribute__((target("avx2"), always_inline)) inline LaneReals lanes_floor_divide(LaneReals a, double b,
                                                                                     double inverse, LaneReals& rem) {
  LaneReals q = (a * inverse + kTwo52) - kTwo52;
  LaneReals r = a - q * b;
  const LaneInts over = r < 0.0;
  const LaneReals one = LaneReals{} + 1.0;
  const LaneReals divisor = LaneReals{} + b;
  q -= reinterpret_cast<LaneReals>(reinterpret_cast<LaneInts>(one) & over);
  rem = r + reinterpret_cast<LaneReals>(reinterpret_cast<LaneInts>(divisor) & over);
  return q;
}

/// Non-negative integral doubles below 2^52 as integers, lane by lane.
__attribute__((target("avx2"), always_inline)) inline LaneInts lanes_integer(LaneReals v) {
  const LaneReals two52 = LaneReals{} + kTwo52;
  return reinterpret_cast<LaneInts>(v + kTwo52) - reinterpret_cast<LaneInts>(two52);
}

/// split_column for M eligible instances with AVX2, where lanes_exact holds: the sources that host an
/// instance one by one (split_source), the others gathered and split kLanes at a time.
template <int M>
__attribute__((target("avx2"), noinline)) int split_lanes(const ExpertSplit& x, const std::uint32_t* column,
                                                           std::size_t stride, int n, const char* hosts,
                                                           std::int64_t* out, std::size_t row, ShareWork& work) {
  int* const source = work.source.data();
  double* const count = work.count.data();
  int sending = 0;
  int sharing = 0;
  for (int s = 0; s < n; ++s) {
    const std::uint32_t c = column[static_cast<std::size_t>(s) * stride];
    if (c == 0) continue;
    ++sending;
    if (hosts[s]) {
      split_source(x, s, c, out + static_cast<std::size_t>(s) * row, work);
      continue;
    }
    source[sharing] = s;
    count[sharing++] = c;
  }
  // The last batch's idle lanes write to the spare row n.
  for (int l = 0; l < kLanes; ++l) {
    source[sharing + l] = n;
    count[sharing + l] = 0;
  }
  const double total = static_cast<double>(x.total_room);
  const double inverse = 1.0 / total;
  LaneReals room[M];
  LaneReals tie[M];
  int index[M];
  for (int t = 0; t < M; ++t) {
    room[t] = LaneReals{} + static_cast<double>(x.eligible[t].room);
    tie[t] = LaneReals{} + static_cast<double>(x.eligible[t].tie_key);
    index[t] = x.eligible[t].index;
  }
  constexpr double kTieScale = static_cast<double>(std::uint64_t{1} << kTieBits);
  for (int first = 0; first < sharing; first += kLanes) {
    LaneReals c;
    for (int l = 0; l < kLanes; ++l) c[l] = count[first + l];
    LaneReals share[M];
    LaneReals key[M];
    LaneReals given = {};
    LaneReals rest = {};
#pragma GCC unroll 8
    for (int t = 0; t + 1 < M; ++t) {
      LaneReals frac;
      share[t] = lanes_floor_divide(c * room[t], total, inverse, frac);
      key[t] = frac * kTieScale + tie[t];
      given += share[t];
      rest += frac;
    }
    // extra = ceil(rest / total), below M as each remainder is below total: how many of 0, total,
    // 2 total, ... rest exceeds, comparisons in place of a division, which holds the lanes up longer.
    LaneReals extra = {};
    const LaneReals one = LaneReals{} + 1.0;
#pragma GCC unroll 8
    for (int j = 0; j + 1 < M; ++j)
      extra += reinterpret_cast<LaneReals>(reinterpret_cast<LaneInts>(one) & (rest > j * total));
    share[M - 1] = c - given - extra;
    key[M - 1] = (extra * total - rest) * kTieScale + tie[M - 1];
    LaneInts larger[M] = {};
#pragma GCC unroll 8
    for (int t = 0; t < M; ++t)
#pragma GCC unroll 8
      for (int j = t + 1; j < M; ++j) {
        const LaneInts t_larger = key[t] > key[j];  // -1 where key t is the larger
        larger[j] -= t_larger;
        larger[t] += t_larger + 1;
      }
    const LaneInts extra_tokens = lanes_integer(extra);
    LaneInts tokens[M];
#pragma GCC unroll 8
    for (int t = 0; t < M; ++t) tokens[t] = lanes_integer(share[t]) - (larger[t] < extra_tokens);
#pragma GCC unroll 4
    for (int l = 0; l < kLanes; ++l) {
      std::int64_t* to = out + static_cast<std::size_t>(source[first + l]) * row;
      for (int t = M; t < x.k; ++t) to[x.eligible[t].index] = 0;
#pragma GCC unroll 8
      for (int t = 0; t < M; ++t) to[index[t]] = tokens[t][l];
    }
  }
  return sending;
}
#endif

/// Every sending source's split of expert x: source s's tokens for instance i go to
/// out[s * row + i], the column of counts being column[s * stride]; returns how many sources send.
/// With locality, `hosts` marks the GPUs of x's instances: those sources keep their own tokens first
/// (split_source). The others share all theirs over the M = x.m eligible instances, as share_left
/// does, in line: M is a template argument (0 for more than kRankedSplit), so that the choice is made
/// once per expert, and the eligible instances' rooms, keys and indices are read into locals once per
/// expert, where the compiler keeps them in registers (it cannot keep them in x.eligible across the
/// stores to `out`, which might alias them). Not inlined, so that plan()'s route loop stays small
/// enough for the compiler to inline its own helpers.
template <int M>
__attribute__((noinline)) int split_column(const ExpertSplit& x, const std::uint32_t* column, std::size_t stride,
                                           int n, const char* hosts, std::int64_t* out, std::size_t row,
                                           ShareWork& work) {
#ifdef EPSIM_ULTRAEP_LANES
  if constexpr (M >= 2 && M <= kRankedSplit) {
    if (work.lanes && lanes_exact(x, work.most_count))
      return split_lanes<M>(x, column, stride, n, hosts, out, row, work);
  }
#endif
  constexpr int kLocal = M > 0 ? M : 1;
  std::int64_t room[kLocal];
  std::uint64_t tie[kLocal];
  int index[kLocal];
  for (int t = 0; t < kLocal; ++t) {
    room[t] = x.eligible[t].room;
    tie[t] = x.eligible[t].tie_key;
    index[t] = x.eligible[t].index;
  }
  const std::int64_t total = x.total_room;
  const std::uint64_t inverse = x.inverse;
  const int k = x.k;
  int sending = 0;
  for (int s = 0; s < n; ++s, out += row) {
    const std::int64_t c = column[static_cast<std::size_t>(s) * stride];
    if (c == 0) continue;
    ++sending;
    if (hosts[s]) {
      split_source(x, s, c, out, work);
      continue;
    }
    for (int t = x.m; t < k; ++t) out[x.eligible[t].index] = 0;
    if constexpr (M == 0) {
      share_many(x, c, out, work);
    } else if constexpr (M == 1) {
      out[index[0]] = c;  // its room is all the room there is: the whole share, nothing left over
    } else if constexpr (M == 2) {
      // share_two
      std::int64_t frac = 0;
      const std::int64_t share = divide_product(c, room[0], total, inverse, frac);
      const std::uint64_t key_a = static_cast<std::uint64_t>(frac) << kTieBits | tie[0];
      const std::uint64_t key_b = static_cast<std::uint64_t>(total - frac) << kTieBits | tie[1];
      const std::int64_t to_a = frac != 0 && key_a > key_b ? 1 : 0;
      out[index[0]] = share + to_a;
      out[index[1]] = c - share - to_a;
    } else {
      // divide_shares, then share_ranked
      std::int64_t share[M];
      std::uint64_t key[M];
      std::int64_t given = 0;
      std::int64_t rest = 0;
#pragma GCC unroll 8
      for (int t = 0; t + 1 < M; ++t) {
        std::int64_t frac = 0;
        share[t] = divide_product(c, room[t], total, inverse, frac);
        given += share[t];
        rest += frac;
        key[t] = static_cast<std::uint64_t>(frac) << kTieBits | tie[t];
      }
      std::int64_t unused = 0;
      const std::int64_t extra = divide(rest + total - 1, total, inverse, unused);
      share[M - 1] = c - given - extra;
      key[M - 1] = static_cast<std::uint64_t>(extra * total - rest) << kTieBits | tie[M - 1];
      int larger[M];
      count_larger<M>(key, larger);
#pragma GCC unroll 8
      for (int t = 0; t < M; ++t) out[index[t]] = share[t] + (larger[t] < extra ? 1 : 0);
    }
  }
  return sending;
}

/// Writes a direct route (via_gpu -1, stage 0) at `route`, whose bytes may be anything, and returns
/// the next route. src_rank and instance go in as one little-endian 8-byte word (src_rank low), and so
/// do carrier (with the padding after it) and via_gpu: the compiler does not merge the smaller
/// stores, and a store fewer per route is a tenth of the routes' time.
inline TokenRoute* put_route(TokenRoute* route, std::uint64_t src_and_instance, std::int64_t tokens, Carrier carrier) {
  const std::uint64_t carrier_and_via =
      static_cast<std::uint32_t>(carrier) | std::uint64_t{static_cast<std::uint32_t>(-1)} << 32;
  std::memcpy(&route->src_rank, &src_and_instance, sizeof src_and_instance);
  route->tokens = tokens;
  std::memcpy(&route->carrier, &carrier_and_via, sizeof carrier_and_via);
  route->stage = 0;
  return route + 1;
}

/// The routes from source `src` to the masters of experts [from, to) of its row of counts, none of
/// them with copies or homed on src: all on the EP backend, so that the loop decides nothing but
/// whether a count is zero. Returns the route after the last.
inline TokenRoute* remote_routes(TokenRoute* route, const std::uint32_t* row, int from, int to, std::uint64_t src) {
  std::uint64_t src_and_instance = src | static_cast<std::uint64_t>(from) << 32;
  for (const std::uint32_t* count = row + from; count != row + to; ++count, src_and_instance += std::uint64_t{1} << 32)
    if (*count != 0) route = put_route(route, src_and_instance, *count, Carrier::ep_backend);
  return route;
}

/// The routes from source `src` of an expert with copies, none of whose instances is on src:
/// tokens[i] to instances[i] for the k instances, all on the EP backend.
inline TokenRoute* remote_split_routes(TokenRoute* route, const std::int64_t* tokens, const SplitInstance* instances,
                                       int k, std::uint64_t src) {
  for (int i = 0; i < k; ++i)
    if (tokens[i] != 0) route = put_route(route, src | instances[i].key, tokens[i], Carrier::ep_backend);
  return route;
}

/// The routes from source s of an expert with copies: tokens[i] to instances[i] for the k instances.
inline TokenRoute* split_routes(TokenRoute* route, const std::int64_t* tokens, const SplitInstance* instances, int k,
                                int s) {
  const std::uint64_t src = static_cast<std::uint32_t>(s);
  for (int i = 0; i < k; ++i)
    if (tokens[i] != 0)
      route = put_route(route, src | instances[i].key, tokens[i],
                        instances[i].gpu == s ? Carrier::none : Carrier::ep_backend);
  return route;
}

/// ultraep_domain_quotas with its moves left in d.moves (the result's are empty). `d` is the search's
/// working space; plan() passes the same one for every domain so that its buffers are allocated once.
/// `masters_of` covers the domain's GPUs.
UltraEpDomainQuotas search_domain(const std::vector<std::int64_t>& expert_load, const MastersByGpu& masters_of,
                                  int first_gpu, int num_domain_gpus, const UltraEpParams& params, Domain& d) {
  d.first = first_gpu;
  d.moves.clear();
  // The domain's masters are one run of masters_of, GPU by GPU.
  const int* begin = masters_of.begin.data() + (first_gpu - masters_of.first_gpu);
  d.masters.assign(masters_of.experts.begin() + begin[0], masters_of.experts.begin() + begin[num_domain_gpus]);
  d.masters_begin.resize(num_domain_gpus + 1);
  d.rank_load.assign(num_domain_gpus, 0);
  for (int r = 0; r <= num_domain_gpus; ++r) d.masters_begin[r] = begin[r] - begin[0];
  for (int r = 0; r < num_domain_gpus; ++r)
    for (int m = d.masters_begin[r]; m < d.masters_begin[r + 1]; ++m) d.rank_load[r] += expert_load[d.masters[m]];
  // Both orders break ties by index, so they are total and any sort gives the one result.
  for (int r = 0; r < num_domain_gpus; ++r)
    sort_small(d.masters.data() + d.masters_begin[r], d.masters.data() + d.masters_begin[r + 1], [&](int a, int b) {
      return expert_load[a] != expert_load[b] ? expert_load[a] > expert_load[b] : a < b;
    });
  d.sources.resize(num_domain_gpus);
  std::iota(d.sources.begin(), d.sources.end(), 0);
  sort_small(d.sources.data(), d.sources.data() + num_domain_gpus, [&](int a, int b) {
    return d.rank_load[a] != d.rank_load[b] ? d.rank_load[a] > d.rank_load[b] : a < b;
  });
  d.slack.resize(num_domain_gpus);
  d.slots_used.resize(num_domain_gpus);
  d.open_slack.resize(num_domain_gpus);

  const std::int64_t total = std::accumulate(d.rank_load.begin(), d.rank_load.end(), std::int64_t{0});
  const std::int64_t max_load = *std::max_element(d.rank_load.begin(), d.rank_load.end());
  UltraEpDomainQuotas result;
  result.threshold = max_load;
  if (params.spare_slots_per_gpu <= 0 || num_domain_gpus <= 1) return result;

  // Single precision, as the kernel computes both bounds from its float parameters.
  const float threshold_factor = std::max(static_cast<float>(params.balance_threshold), 1.0f);
  std::int64_t lo = static_cast<std::int64_t>(
      std::ceil(static_cast<float>(total) / static_cast<float>(num_domain_gpus) * threshold_factor));
  std::int64_t hi = std::max(max_load, lo);
  // The last cap the oracle accepted (with the static floor), whose moves are still in d.moves.
  std::int64_t moves_cap = -1;
  auto oracle = [&](std::int64_t cap, bool dynamic_floor) {
    const bool ok = quotas_for(cap, d, expert_load, params, dynamic_floor);
    moves_cap = ok && !dynamic_floor ? cap : -1;
    return ok;
  };
  auto accept = [&](std::int64_t cap, UltraEpSearch how) {
    result.threshold = cap;
    result.search = how;
    return result;
  };

  // Fast path: the tolerance above the floor, then two steps of 1% of hi each.
  const float eps = std::max(static_cast<float>(params.oracle_eps), 0.0f);
  std::int64_t cap = std::max(static_cast<std::int64_t>(std::ceil(static_cast<float>(lo) * (1.0f + eps))), lo);
  const std::int64_t step = std::max<std::int64_t>(1, (hi + 99) / 100);
  for (int retry = 0; retry <= kUltraEpFastRetries; ++retry) {
    ++result.fast_tries;
    if (oracle(cap, true)) return accept(cap, UltraEpSearch::fast);
    cap = std::min(hi, cap + step);
  }

  // The smallest cap whose slack covers the excess, tried once with the static floor.
  std::int64_t below = lo;
  std::int64_t above = hi;
  while (below < above) {
    const std::int64_t mid = below + (above - below) / 2;
    if (capacity_feasible(mid, d))
      above = mid;
    else
      below = mid + 1;
  }
  lo = below;
  if (oracle(lo, false)) return accept(lo, UltraEpSearch::precheck);
  lo = std::min(lo + 1, hi);

  // Four probes per round over [lo, hi); the first feasible one bounds the next round. The oracle is
  // not monotone in T, so this is not the smallest feasible cap in general: it is the kernel's.
  while (lo < hi) {
    const std::int64_t range = hi - lo;
    const bool small = range <= kUltraEpProbes;
    int first = -1;
    std::int64_t probe[kUltraEpProbes];
    for (int w = 0; w < kUltraEpProbes; ++w) {
      probe[w] = small ? lo + w : lo + range * (w + 1) / (kUltraEpProbes + 1);
      if (first < 0 && probe[w] < hi && oracle(probe[w], false)) first = w;
    }
    if (small) {
      lo = first >= 0 ? probe[first] : hi;
      hi = lo;
    } else if (first >= 0) {
      hi = probe[first];
      if (first > 0) lo = probe[first - 1] + 1;
    } else {
      lo = probe[kUltraEpProbes - 1] + 1;
    }
  }
  // The search ends on a probe it accepted (its moves are at hand: the oracle is a function of the
  // cap) or on the initial hi, which it never tried.
  if (moves_cap != lo && !oracle(lo, false))
    throw std::logic_error("ultraep: the probe search ended on an infeasible cap");
  return accept(lo, UltraEpSearch::probes);
}

}  // namespace

UltraEpDomainQuotas ultraep_domain_quotas(const std::vector<std::int64_t>& expert_load, const std::vector<int>& home,
                                          int first_gpu, int num_domain_gpus, const UltraEpParams& params) {
  MastersByGpu masters_of;
  fill_masters_by_gpu(home, first_gpu, num_domain_gpus, masters_of);
  Domain d;
  UltraEpDomainQuotas result = search_domain(expert_load, masters_of, first_gpu, num_domain_gpus, params, d);
  result.moves = std::move(d.moves);
  return result;
}

/// plan()'s working space, kept between calls so that its buffers are allocated once, not on every
/// call (a few dozen allocations against the plan's own).
struct UltraEp::Workspace {
  std::vector<std::uint32_t> load32;  ///< the loads modulo 2^32 (see plan())
  std::vector<std::int64_t> load;
  std::vector<int> home;
  MastersByGpu masters_of;
  Domain domain;
  std::vector<UltraEpMove> moves;
  std::vector<int> copy_begin;
  std::vector<int> copy_gpu;
  std::vector<std::int64_t> copy_quota;
  std::vector<std::int64_t> master_quota;
  std::vector<int> fill;
  std::vector<int> on_gpu;
  std::vector<int> split_of;
  std::vector<ExpertSplit> splits;
  std::vector<SplitInstance> split_instances;
  std::vector<Eligible> eligible;
  std::vector<std::int64_t> split_tokens;
  ShareWork share_work;
  std::vector<char> hosts;
  /// Per source, per expert with copies (in `splits` order): 1 where the source hosts one of the
  /// expert's instances, whose routes from it are then local, else 0 (all its routes on the EP
  /// backend, written without comparing each instance's GPU with the source).
  std::vector<char> local_split;
  /// The plan's GEMM groups before they are swapped into it; after, the empty lists start_plan made.
  std::vector<std::vector<GemmGroup>> gemm_order;
};

UltraEp::UltraEp(UltraEpParams params) : params_(params), work_(std::make_unique<Workspace>()) {}

UltraEp::~UltraEp() = default;

Plan UltraEp::plan(const TraceRecord& record, const BalancerContext& context) {
  const int n = context.num_gpus;
  const int experts = context.model->num_experts;
  // A bug in the caller, not bad input; checked always because a zero would loop forever.
  if (context.gpus_per_node <= 0) throw std::logic_error("ultraep: gpus_per_node must be positive");
  // The counts once, row by row as they lie in memory: each expert's load, and how many (source,
  // expert) pairs send tokens (the routes, were there no copies). The loads are summed in 32 bits,
  // which the generic build's vector registers hold four at a time, with the OR of all the counts
  // beside them: no count exceeds it, so the sums are exact while n times it stays below 2^32 (at EP
  // 64, counts below 2^26); beyond that the loads are summed again in 64 bits.
  Workspace& w = *work_;
  const std::uint32_t* counts = record.counts.data();
  std::vector<std::uint32_t>& load32 = w.load32;
  load32.assign(experts, 0);
  std::uint32_t any_count = 0;
  std::size_t sending_pairs = 0;
  // Two rows at a time, so that each sum is read and written once per pair.
  int s = 0;
  for (; s + 1 < n; s += 2) {
    const std::uint32_t* row = counts + static_cast<std::size_t>(s) * experts;
    const std::uint32_t* next = row + experts;
    std::uint32_t sending = 0;
    std::uint32_t bits = 0;
    for (int e = 0; e < experts; ++e) {
      load32[e] += row[e] + next[e];  // modulo 2^32, exact when the whole sum fits
      bits |= row[e] | next[e];
      sending += (row[e] != 0 ? 1 : 0) + (next[e] != 0 ? 1 : 0);
    }
    any_count |= bits;
    sending_pairs += sending;
  }
  if (s < n) {
    const std::uint32_t* row = counts + static_cast<std::size_t>(s) * experts;
    for (int e = 0; e < experts; ++e) {
      load32[e] += row[e];
      any_count |= row[e];
      sending_pairs += row[e] != 0 ? 1 : 0;
    }
  }
  std::vector<std::int64_t>& load = w.load;
  if (std::uint64_t{any_count} * static_cast<std::uint64_t>(n) <= std::numeric_limits<std::uint32_t>::max()) {
    load.assign(load32.begin(), load32.end());
  } else {
    load.assign(experts, 0);
    for (int r = 0; r < n; ++r) {
      const std::uint32_t* row = counts + static_cast<std::size_t>(r) * experts;
      for (int e = 0; e < experts; ++e) load[e] += row[e];
    }
  }
  std::vector<int>& home = w.home;
  home.resize(experts);
  for (int e = 0; e < experts; ++e) home[e] = home_gpu(e, experts, n, context.placement);

  // Every domain's copies, then expert by expert: expert e's copies are copy_gpu / copy_quota
  // [copy_begin[e], copy_begin[e + 1]), in the order the oracle made them (the kernel's replica order,
  // which the reroute's ties follow); an expert's copies all come from its home's domain. Copy j is
  // instance experts + j, so instances run expert by expert as well. The master's quota is what the
  // copies leave.
  std::vector<UltraEpMove>& moves = w.moves;
  moves.clear();
  fill_masters_by_gpu(home, 0, n, w.masters_of);
  for (int first = 0; first < n; first += context.gpus_per_node) {
    const int size = std::min(context.gpus_per_node, n - first);
    search_domain(load, w.masters_of, first, size, params_, w.domain);
    moves.insert(moves.end(), w.domain.moves.begin(), w.domain.moves.end());
  }
  const int copies = static_cast<int>(moves.size());
  std::vector<int>& copy_begin = w.copy_begin;
  copy_begin.assign(experts + 1, 0);
  for (const UltraEpMove& m : moves) ++copy_begin[m.expert + 1];
  for (int e = 0; e < experts; ++e) copy_begin[e + 1] += copy_begin[e];
  std::vector<int>& copy_gpu = w.copy_gpu;
  std::vector<std::int64_t>& copy_quota = w.copy_quota;
  std::vector<std::int64_t>& master_quota = w.master_quota;
  copy_gpu.resize(copies);
  copy_quota.resize(copies);
  master_quota.assign(load.begin(), load.end());
  w.fill.assign(copy_begin.begin(), copy_begin.end() - 1);
  for (const UltraEpMove& m : moves) {
    const int j = w.fill[m.expert]++;
    copy_gpu[j] = m.gpu;
    copy_quota[j] = m.tokens;
    master_quota[m.expert] -= m.tokens;
  }

  // One grouped GEMM per GPU over its master and redundant slots, as UltraEP runs it: the copies'
  // weights are in before the dispatch. The groups are allocated first, in w.gemm_order, and swapped
  // into the plan: small blocks, which glibc's malloc serves fast from the bins the last plan's
  // groups were freed to until a large block (the plan's own GEMM list among them) is allocated.
  std::vector<int>& on_gpu = w.on_gpu;
  on_gpu.assign(n, 0);
  for (int e = 0; e < experts; ++e) ++on_gpu[home[e]];
  for (int j = 0; j < copies; ++j) ++on_gpu[copy_gpu[j]];
  w.gemm_order.resize(n);
  for (int g = 0; g < n; ++g) {
    std::vector<GemmGroup>& groups = w.gemm_order[g];
    groups.clear();
    groups.reserve(1);
    groups.emplace_back().gpu = g;
    groups.front().instances.reserve(on_gpu[g]);
  }
  Plan plan = start_plan("ultraep", record, n);
  plan.gemm_order.swap(w.gemm_order);
  plan.planner.site = PlannerSite::gpu;
  plan.planner.start = PlannerStart::before_dispatch;
  plan.planner.duration_ps = us_to_ps(params_.planner_time_us);
  // Instance e is expert e's master, as in static EP, so a plan without moves is static EP's.
  plan.instances.reserve(static_cast<std::size_t>(experts) + copies);
  for (int e = 0; e < experts; ++e) {
    plan.instances.push_back({e, home[e], InstanceKind::static_expert});
    plan.gemm_order[home[e]].front().instances.push_back(e);
  }
  const std::int64_t weight_bytes = context.model->expert_weight_bytes();
  const std::int64_t grad_bytes = static_cast<std::int64_t>(context.model->matrices_per_expert()) *
                                  context.model->hidden_size * context.model->expert_ffn_size *
                                  element_bytes(params_.grad_dtype);
  plan.transfers.reserve(3 * static_cast<std::size_t>(copies));
  for (int e = 0; e < experts; ++e) {
    for (int j = copy_begin[e]; j < copy_begin[e + 1]; ++j) {
      const int g = copy_gpu[j];
      const int inst = experts + j;
      plan.instances.push_back({e, g, InstanceKind::dynamic_expert});
      plan.gemm_order[g].front().instances.push_back(inst);
      // weight_sync, joined before the dispatch, again before the expert backward (the copies' buffers
      // are reused across layers), and grad_reduce: UltraEP's SM kernels, i.e. the EP backend.
      for (const PassKind pass : {PassKind::forward, PassKind::backward})
        plan.transfers.push_back({TransferKind::weights, pass, Carrier::ep_backend, TransferStart::before_dispatch,
                                  inst, home[e], g, weight_bytes});
      plan.transfers.push_back(
          {TransferKind::gradients, PassKind::backward, Carrier::ep_backend, TransferStart::after_dispatch, inst, g,
           home[e], grad_bytes});
    }
  }

  // Each expert with copies gets an ExpertSplit in `splits` (split_of[e] is its index there, -1
  // without copies); its k instances are a run of split_instances and its eligible ones a run of
  // `eligible` at the same place.
  const bool locality = params_.locality_aware;
  std::vector<int>& split_of = w.split_of;
  std::vector<ExpertSplit>& splits = w.splits;
  std::vector<SplitInstance>& split_instances = w.split_instances;
  std::vector<Eligible>& eligible = w.eligible;
  split_of.assign(experts, -1);
  splits.clear();
  int most_instances = 1;
  for (int e = 0; e < experts; ++e)
    if (copy_begin[e + 1] > copy_begin[e]) {
      split_of[e] = static_cast<int>(splits.size());
      splits.emplace_back();
      most_instances = std::max(most_instances, 1 + copy_begin[e + 1] - copy_begin[e]);
    }
  split_instances.resize(splits.size() + copies);
  eligible.resize(splits.size() + copies);
  for (int e = 0, first = 0; e < experts; ++e) {
    if (split_of[e] < 0) continue;
    ExpertSplit& x = splits[split_of[e]];
    x.k = 1 + copy_begin[e + 1] - copy_begin[e];
    SplitInstance* inst = split_instances.data() + first;
    inst[0].gpu = home[e];
    inst[0].instance = e;
    inst[0].quota = master_quota[e];
    inst[0].key = static_cast<std::uint64_t>(e) << 32;
    for (int i = 1; i < x.k; ++i) {
      const int j = copy_begin[e] + i - 1;
      inst[i].gpu = copy_gpu[j];
      inst[i].instance = experts + j;
      inst[i].quota = copy_quota[j];
      inst[i].key = static_cast<std::uint64_t>(experts + j) << 32;
    }
    Eligible* elig = eligible.data() + first;
    int ineligible = x.k;
    for (int i = 0; i < x.k; ++i) {
      const std::int64_t own = locality ? counts[static_cast<std::size_t>(inst[i].gpu) * experts + e] : 0;
      const std::int64_t room = inst[i].quota - std::min(own, inst[i].quota);
      x.total_room += room;
      if (!locality || room > 0)
        elig[x.m++] = {room, kTieMask - static_cast<std::uint64_t>(locality ? inst[i].gpu : i), i};
      else
        elig[--ineligible] = {0, 0, i};
    }
    x.instances = inst;
    x.eligible = elig;
    x.inverse = x.total_room > 0 ? ~std::uint64_t{0} / static_cast<std::uint64_t>(x.total_room) : 0;
    x.locality_aware = locality;
    x.expert = e;
    x.table = static_cast<std::size_t>(first);
    first += x.k;
  }

  // Every sending source's split of every expert with copies, expert by expert (the same instances,
  // rooms and divisor for all of an expert's sources, so that the split's branches go the same way
  // from one source to the next): source s's tokens for instance i of split x are
  // split_tokens[s * row + x.table + i], row being all the experts' instances, so that the routes,
  // written source by source, read them in order. Only a source that hosts one of the expert's
  // instances keeps tokens (with locality); the others share all of theirs.
  const std::size_t split_row = split_instances.size();
  std::vector<std::int64_t>& split_tokens = w.split_tokens;
  // Only the rows of sources that send the expert tokens are written, and read: the others keep
  // whatever an earlier call left there.
  // A row more, where split_lanes' idle lanes write.
  split_tokens.resize(split_instances.size() * (static_cast<std::size_t>(n) + 1));
  // The most routes there can be: a sending source reaches at most each instance of the expert.
  std::size_t most_routes = sending_pairs;
  {
    ShareWork& work = w.share_work;
    work.share.resize(most_instances);
    work.key.resize(2 * static_cast<std::size_t>(most_instances));
#ifdef EPSIM_ULTRAEP_LANES
    work.lanes = vector_split_ && __builtin_cpu_supports("avx2");
    work.most_count = any_count;
    work.source.resize(static_cast<std::size_t>(n) + kLanes);
    work.count.resize(static_cast<std::size_t>(n) + kLanes);
#endif
    std::vector<char>& hosts = w.hosts;
    hosts.assign(n, 0);
    w.local_split.assign(static_cast<std::size_t>(n) * splits.size(), 0);
    for (std::size_t xi = 0; xi < splits.size(); ++xi) {
      const ExpertSplit& x = splits[xi];
      for (int i = 0; i < x.k; ++i)
        w.local_split[static_cast<std::size_t>(x.instances[i].gpu) * splits.size() + xi] = 1;
      if (locality)
        for (int i = 0; i < x.k; ++i) hosts[x.instances[i].gpu] = 1;
      const std::uint32_t* column = counts + x.expert;
      std::int64_t* out = split_tokens.data() + x.table;  // source 0's
      int sending = 0;
      switch (x.m) {
        case 1: sending = split_column<1>(x, column, experts, n, hosts.data(), out, split_row, work); break;
        case 2: sending = split_column<2>(x, column, experts, n, hosts.data(), out, split_row, work); break;
        case 3: sending = split_column<3>(x, column, experts, n, hosts.data(), out, split_row, work); break;
        case 4: sending = split_column<4>(x, column, experts, n, hosts.data(), out, split_row, work); break;
        case 5: sending = split_column<5>(x, column, experts, n, hosts.data(), out, split_row, work); break;
        case 6: sending = split_column<6>(x, column, experts, n, hosts.data(), out, split_row, work); break;
        case 7: sending = split_column<7>(x, column, experts, n, hosts.data(), out, split_row, work); break;
        case 8: sending = split_column<8>(x, column, experts, n, hosts.data(), out, split_row, work); break;
        default: sending = split_column<0>(x, column, experts, n, hosts.data(), out, split_row, work); break;
      }
      most_routes += static_cast<std::size_t>(sending) * (x.k - 1);
      if (locality)
        for (int i = 0; i < x.k; ++i) hosts[x.instances[i].gpu] = 0;
    }
  }
  // Routes source by source, expert by expert, instance by instance (master first), zeros left out,
  // written in place: the plan's routes are sized once for the most there can be, without being
  // written (TokenRoutes), and cut to the routes written. Appending them one by one (a capacity check
  // and a size update each) cost more than the rest of plan(); writing each source's to a buffer in
  // the first-level cache and appending them with one memcpy cost a second pass over the routes, a
  // tenth of plan()'s time.
  plan.routes.resize(most_routes);
  TokenRoute* route = plan.routes.data();
  const std::int64_t* const split_table = split_tokens.data();
  // A source's own masters (masters_of lists every GPU's, ascending) are the only experts without
  // copies whose routes stay local: they and the experts with copies break each row into runs of
  // remote_routes. What the loops read is in locals: put_route writes with memcpy, which the compiler
  // assumes may write anything, vectors' sizes included, and would read again after every route.
  const std::size_t num_splits = splits.size();
  const ExpertSplit* const split_list = splits.data();
  const char* const local_split = w.local_split.data();
  const int* const own_begin = w.masters_of.begin.data();
  const int* const own_experts = w.masters_of.experts.data();
  for (int s = 0; s < n; ++s) {
    const std::uint32_t* row = counts + static_cast<std::size_t>(s) * experts;
    const std::uint64_t src = static_cast<std::uint32_t>(s);
    const int* own = own_experts + own_begin[s];
    const int* const own_end = own_experts + own_begin[s + 1];
    int e = 0;
    // Up to `next` (an expert with copies, or the end of the row): the remote runs and s's own masters.
    // In line, or `route` and the rest go through memory on every call.
    auto plain_up_to = [&](int next) __attribute__((always_inline)) {
      for (; own != own_end && *own < next; ++own) {
        route = remote_routes(route, row, e, *own, src);
        if (row[*own] != 0)
          route = put_route(route, src | static_cast<std::uint64_t>(*own) << 32, row[*own], Carrier::none);
        e = *own + 1;
      }
      if (own != own_end && *own == next) ++own;  // a master with copies: its split routes it
      route = remote_routes(route, row, e, next, src);
      e = next + 1;
    };
    const char* const local = local_split + static_cast<std::size_t>(s) * num_splits;
    for (std::size_t xi = 0; xi < num_splits; ++xi) {
      const ExpertSplit& x = split_list[xi];
      plain_up_to(x.expert);
      if (row[x.expert] == 0) continue;
      const std::int64_t* tokens = split_table + static_cast<std::size_t>(s) * split_row + x.table;
      route = local[xi] ? split_routes(route, tokens, x.instances, x.k, s)
                        : remote_split_routes(route, tokens, x.instances, x.k, src);
    }
    plain_up_to(experts);
  }
  plan.routes.resize(static_cast<std::size_t>(route - plan.routes.data()));
  return plan;
}

std::unique_ptr<Balancer> make_ultraep(ConfigMap& params) {
  constexpr std::int64_t kMaxCount = std::numeric_limits<int>::max();
  UltraEpParams p;
  p.spare_slots_per_gpu =
      static_cast<int>(params.get_int_or("spare_slots_per_gpu", p.spare_slots_per_gpu, 0, kMaxCount));
  p.balance_threshold = params.get_double_or("balance_threshold", p.balance_threshold, 1.0, 1e6);
  p.oracle_eps = params.get_double_or("oracle_eps", p.oracle_eps, 0.0, 1e6);
  p.min_tokens_per_replica =
      params.get_int_or("min_tokens_per_replica", p.min_tokens_per_replica, 1, std::numeric_limits<std::int64_t>::max());
  p.allow_zero_master_quota = params.get_bool_or("allow_zero_master_quota", p.allow_zero_master_quota);
  p.locality_aware = params.get_bool_or("locality_aware", p.locality_aware);
  // An hour bounds the value so that the conversion to picoseconds cannot overflow.
  p.planner_time_us = params.get_double_or("planner_time_us", p.planner_time_us, 0, 3.6e9);
  p.grad_dtype = parse_dtype(params.get_choice_or("grad_dtype", to_string(p.grad_dtype), dtype_names()));
  return std::make_unique<UltraEp>(p);
}

}  // namespace epsim
