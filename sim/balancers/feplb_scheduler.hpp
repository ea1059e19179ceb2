// FEPLB's CPU scheduler for one node (one NVLink domain). The paper (arXiv 2604.19654) says that
// experts are split into static ones, computed at home while a lightweight CPU scheduler runs, and
// dynamic ones, whose tokens and weights the Copy Engine redistributes inside the node once it has
// decided, per micro-batch. Its algorithm is not public; what it leaves open is a named parameter
// here (docs/balancers.md, FEPLB):
//   - which experts are dynamic: per GPU, its dynamic_experts_per_gpu most loaded experts in this
//     micro-batch (a GPU knows its own experts' counts once its dispatch is done);
//   - granularity: `expert` (default) moves a dynamic expert whole, all its tokens and one weights copy
//     to one receiver; `tokens` splits it over several receivers down to single tokens;
//   - min_gain: a move is made only if it lowers the larger load of its donor and receiver by at least
//     this fraction of the node's mean GPU load (never less than one token);
//   - dynamic_slots_per_gpu: foreign dynamic experts one GPU may host (a weights copy each).
// Nodes are independent: the scheduler sees one node's home loads and nothing else. Deterministic.
#pragma once

#include <cstdint>
#include <vector>

namespace epsim {

/// At what granularity a dynamic expert's tokens (and so its weights copies) move.
enum class FeplbGranularity {
  expert,  ///< the whole expert to one receiver: all its tokens, one weights copy
  tokens,  ///< any number of tokens to each of several receivers, a weights copy per receiver
};

struct FeplbSchedulerParams {
  int dynamic_experts_per_gpu = 2;  ///< per GPU, how many of its most loaded experts may move
  int dynamic_slots_per_gpu = 2;    ///< foreign dynamic experts one GPU may host (a weights copy each)
  FeplbGranularity granularity = FeplbGranularity::expert;
  /// Least gain of a move, as a fraction of the node's mean GPU load: the move must lower
  /// max(donor load, receiver load) by at least max(1, ceil(min_gain x node mean)) tokens.
  double min_gain = 0.01;
};

/// An expert whose home is one of the node's GPUs, with its load in this micro-batch.
struct HomeExpert {
  int expert = 0;
  std::int64_t tokens = 0;
};

/// `tokens` of `expert` leave their home GPU `home` for `receiver` (node-local GPU indices).
struct DynamicMove {
  int expert = 0;
  int home = 0;
  int receiver = 0;
  std::int64_t tokens = 0;
};

class FeplbScheduler {
 public:
  explicit FeplbScheduler(FeplbSchedulerParams params) : params_(params) {}

  /// Per GPU of the node, its dynamic experts in this micro-batch: its dynamic_experts_per_gpu most
  /// loaded experts that have tokens, most tokens first (ties: lower expert id). The rest are static.
  std::vector<std::vector<HomeExpert>> dynamic_experts(const std::vector<std::vector<HomeExpert>>& home_experts) const;

  /// `home_experts[g]` lists the experts whose home is the node's g-th GPU. Returns the moves in the
  /// order they were made; each (expert, receiver) pair appears at most once. Both granularities
  /// repeat a donor step until it finds no move worth its gain (see docs/balancers.md, FEPLB):
  ///   expert: donor = the most loaded GPU (ties: lower index); receiver = the least loaded other GPU
  ///     with a free slot (ties: lower index); of the donor's dynamic experts not moved yet, the one
  ///     whose move lowers max(donor, receiver) most (ties: more tokens, then lower id) moves whole,
  ///     if that gain reaches the threshold. Otherwise the node's maximum cannot drop: stop.
  ///   tokens: target = ceil(node load / GPUs); donor = the most loaded GPU above target not yet
  ///     exhausted; it offers its dynamic experts by tokens left at home, most first; the first one
  ///     some receiver accepts (the least loaded GPU below target that hosts it or has a free slot)
  ///     moves min(donor excess, receiver deficit, tokens left) tokens, if that reaches the threshold.
  std::vector<DynamicMove> schedule(const std::vector<std::vector<HomeExpert>>& home_experts) const;

  const FeplbSchedulerParams& params() const { return params_; }

 private:
  FeplbSchedulerParams params_;
};

}  // namespace epsim
