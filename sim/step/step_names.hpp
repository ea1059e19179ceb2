// Names of the step modes and overlaps, as the experiment file spells them and reports print them.
#pragma once

#include "sim/hardware/experiment_spec.hpp"

namespace epsim {

inline const char* to_string(StepMode mode) {
  switch (mode) {
    case StepMode::training: return "training";
    case StepMode::prefill: return "prefill";
    case StepMode::decode: return "decode";
  }
  return "?";
}

inline const char* to_string(StepOverlap overlap) {
  switch (overlap) {
    case StepOverlap::none: return "none";
    case StepOverlap::two_micro_batch: return "two_micro_batch";
  }
  return "?";
}

}  // namespace epsim
