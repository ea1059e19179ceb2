// Per-link sums gathered by link mask, for the coupled solve (group_coupling.cpp).
//
// A following group holds a class per sending GPU, dozens with flows at a time, but their masks,
// the links of the group each class takes, are few: a sender's NVLink flows take the receiver's
// NVLink port and the SM limit of its kernel, its RDMA flows the NIC and the SM limit. A solve that
// added each class's flows and rate to each of its links looped over the mask's bits for every
// class in each of its passes: a third of the solve's instructions at EP 1,024. Summed by mask, a
// class costs a compare and two adds, and each mask's sums go to its links once.
#pragma once

#include <cstdint>

namespace epsim {

class MaskSums {
 public:
  /// Distinct masks kept apart; a class with one more goes straight to its links (`spill`).
  static constexpr int kSlots = 8;

  /// Adds (x, y) to the sums of `mask` (non-zero). Past kSlots masks, calls spill(bit, x, y) for
  /// each bit of it instead.
  template <class Spill>
  void add(std::uint32_t mask, double x, double y, Spill&& spill) {
    if (mask_[last_] != mask) {
      int s = 0;
      while (s < used_ && mask_[s] != mask) ++s;
      if (s == used_) {
        if (used_ == kSlots) {
          for (std::uint32_t m = mask; m != 0; m &= m - 1) spill(__builtin_ctz(m), x, y);
          return;
        }
        mask_[s] = mask;
        x_[s] = 0;
        y_[s] = 0;
        ++used_;
      }
      last_ = s;
    }
    x_[last_] += x;
    y_[last_] += y;
  }

  /// Calls to(bit, x, y) with each mask's sums for each bit of it, and starts again empty.
  template <class To>
  void spread(To&& to) {
    for (int s = 0; s < used_; ++s)
      for (std::uint32_t m = mask_[s]; m != 0; m &= m - 1) to(__builtin_ctz(m), x_[s], y_[s]);
    used_ = 0;
    last_ = 0;
    mask_[0] = 0;  // (no class has an empty mask: the next add finds no slot)
  }

 private:
  std::uint32_t mask_[kSlots] = {};
  double x_[kSlots];  // (each slot's set when its mask is)
  double y_[kSlots];
  int used_ = 0;
  int last_ = 0;  ///< the slot the last add went to (classes of one mask often come in a row)
};

}  // namespace epsim
