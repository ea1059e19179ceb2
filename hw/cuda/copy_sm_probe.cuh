// The SM probe of `epsim-hw bench copy` (the verdict and its reasons: hw/host/copy_sm_probe.hpp).
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "hw/host/copy_sm_probe.hpp"

namespace epsim::hw {

/// Times `copy` (enqueued on the stream it is given) alone, then `trials` times while a kernel holds
/// every thread slot of every SM of `device` for max(2 ms, 10 x the copy alone); medians. `copy` must
/// be repeatable (same source, same destination). Uses two streams of its own; synchronises them.
CopySmProbeTimes probe_copy_sms(int device, const std::function<void(cudaStream_t)>& copy, int trials);

}  // namespace epsim::hw
