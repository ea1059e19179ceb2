// FEPLB's CPU scheduler for one node (one NVLink domain). The paper (arXiv 2604.19654) says only that
// a lightweight CPU scheduler picks, per micro-batch, how many tokens of each dynamic expert leave
// their home GPU for node-local peers; its objective and algorithm are not public. This is our
// documented stand-in: a deterministic greedy that lowers the node's maximum GPU load towards
// ceil(node load / GPUs in node), moving tokens only of each GPU's few most loaded ("dynamic")
// experts and placing at most a fixed number of foreign expert copies (slots) on any GPU.
// Nodes are independent: the scheduler sees one node's home loads and nothing else.
#pragma once

#include <cstdint>
#include <vector>

namespace epsim {

struct FeplbSchedulerParams {
  int dynamic_experts_per_gpu = 2;  ///< per GPU, how many of its most loaded experts may move
  int dynamic_slots_per_gpu = 2;    ///< foreign dynamic experts one GPU may host (a weights copy each)
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

  /// `home_experts[g]` lists the experts whose home is the node's g-th GPU. Returns the moves in the
  /// order the greedy made them; each (expert, receiver) pair appears at most once. Greedy:
  ///   target = ceil(node load / GPUs in node); candidates = per GPU, its dynamic_experts_per_gpu
  ///   most loaded experts with tokens (ties: lower expert id). Repeat: donor = the most loaded GPU
  ///   above target (ties: lower index) that can still give; it offers its candidates by tokens left
  ///   at home, most first (ties: lower id); the first one some receiver accepts moves to the least
  ///   loaded GPU below target (ties: lower index) that already hosts it or has a free slot,
  ///   min(donor excess, receiver deficit, tokens left) tokens. A donor none accepts is done.
  /// Every move shrinks the total excess above target, so the loop ends; with enough candidates and
  /// slots every GPU ends at or below target, i.e. the node's max load is ceil(node mean).
  std::vector<DynamicMove> schedule(const std::vector<std::vector<HomeExpert>>& home_experts) const;

  const FeplbSchedulerParams& params() const { return params_; }

 private:
  FeplbSchedulerParams params_;
};

}  // namespace epsim
