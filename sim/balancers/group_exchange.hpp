// FasterMoE's group-wise exchange (smart scheduling, PPoPP'22 and laekov/fastmoe
// cuda/fastermoe/smart_schedule.h): the EP ranks are cut into groups of `group_size` consecutive
// ranks, and the all-to-all becomes n_g steps. At step j, group q sends to group (q + j) mod n_g and
// receives from group (q - j) mod n_g, so the tokens from rank s to rank d travel in step
// (group(d) - group(s)) mod n_g. Tokens inside a group (the rank's own tokens included) travel in
// step 0. Splitting the exchange lets computation C_j start as soon as step j has arrived.
#pragma once

namespace epsim {

class GroupExchange {
 public:
  /// `group_size` >= 1 is capped at `num_gpus` (as FasterMoE does). When it does not divide
  /// `num_gpus` the last group is smaller: n_g = ceil(num_gpus / group_size). (FasterMoE itself
  /// uses num_gpus / group_size and so requires divisibility.)
  GroupExchange(int num_gpus, int group_size);

  int num_groups() const { return num_groups_; }
  int group_size() const { return group_size_; }
  int group_of(int rank) const { return rank / group_size_; }
  /// The exchange step that carries tokens from rank `src` to rank `dst`: (group(dst) - group(src)) mod n_g.
  int stage(int src, int dst) const;

 private:
  int num_gpus_;
  int group_size_;
  int num_groups_;
};

}  // namespace epsim
