#include "sim/balancers/group_exchange.hpp"

#include <algorithm>
#include <cassert>

namespace epsim {

GroupExchange::GroupExchange(int num_gpus, int group_size)
    : num_gpus_(num_gpus), group_size_(std::min(group_size, num_gpus)) {
  assert(num_gpus >= 1 && group_size >= 1);
  num_groups_ = (num_gpus_ + group_size_ - 1) / group_size_;
}

int GroupExchange::stage(int src, int dst) const {
  assert(src >= 0 && src < num_gpus_ && dst >= 0 && dst < num_gpus_);
  // Both groups are in [0, n_g), so their difference is above -n_g: one wrap at most.
  const int step = group_of(dst) - group_of(src);
  return step < 0 ? step + num_groups_ : step;
}

}  // namespace epsim
