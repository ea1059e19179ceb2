#include "sim/balancers/placement.hpp"

#include <cassert>

namespace epsim {

int home_gpu(int expert, int num_experts, int num_gpus, Placement placement) {
  assert(num_experts % num_gpus == 0);
  if (placement == Placement::interleaved) return expert % num_gpus;
  return expert / (num_experts / num_gpus);
}

const char* to_string(Placement placement) {
  return placement == Placement::interleaved ? "interleaved" : "contiguous";
}

}  // namespace epsim
