// Does a copy need the GPU's SMs? `epsim-hw bench copy` answers it per copy kind: a kernel holds every
// thread slot of every SM for a while, a copy is enqueued on another stream while it runs, and the
// copy's time beside it is compared with its time alone and with what was left of the holder.
//
// Why it matters: epsim models Copy Engine copies as using no SM time (FEPLB overlaps static-expert
// GEMMs with them), and calibrates the GEMM/copy interference from `gemm_with_copy` rows. If the
// driver carries a kind of copy out with a kernel, those rows measure SM sharing, not HBM sharing.
// This file is the CPU side (the verdict and its text), tested without a GPU.
#pragma once

#include <optional>
#include <string>

namespace epsim::hw {

/// Medians over the probe's trials, in microseconds.
struct CopySmProbeTimes {
  double alone_us = 0;   ///< the copy alone on an idle GPU
  double beside_us = 0;  ///< from the copy's start event to its end, while the holder held every SM
  double left_us = 0;    ///< from the copy's start event to the holder's end
};

enum class CopySmVerdict {
  no_sms,        ///< it ran beside the holder: a Copy Engine (or other non-SM) copy
  needs_sms,     ///< it ended only after the holder let the SMs go: the copy is a kernel
  unclear,       ///< slowed, but neither alone-fast nor behind the holder
  inconclusive,  ///< the holder had too little time left to tell the two apart
};

/// The holder must outlast the copy clearly for the test to mean anything: `left_us` at least
/// 4 x `alone_us` (else inconclusive). Then the copy used no SM when it took less than
/// half the holder's remaining time (and at most 3 x alone: slowed by HBM sharing at most, which a
/// spinning holder hardly causes), and needed SMs when it ended no earlier than 0.9 x the holder's
/// remaining time.
CopySmVerdict judge_copy_sm_probe(const CopySmProbeTimes& t);

const char* to_string(CopySmVerdict v);

/// What a gemm_with_copy row says of its copy: true for a kernel, false for a copy that ran beside the
/// holder, nothing when the probe could not tell (unclear, inconclusive).
std::optional<bool> copy_on_sms_of(CopySmVerdict v);

/// One comment line for a measurement file, e.g. "SM probe (ce_local, 67108864 B): 34.1 us beside a
/// kernel holding every SM for 1966.0 us more (alone 33.9 us): ran beside it, no SM used; medians of 5".
std::string copy_sm_probe_comment(const std::string& kind, double bytes, const CopySmProbeTimes& t, int trials);

}  // namespace epsim::hw
