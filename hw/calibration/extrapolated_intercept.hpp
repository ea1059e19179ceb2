// Whether a fitted fixed cost was read off the points or extrapolated from them.
//
// A fixed cost is the intercept of time against bytes (t = fixed + bytes / rate). Points whose
// sizes span a wide range pin it down: the smallest show it almost bare (TensorRT-LLM's one-sided
// kernels, 1 to 2,048 tokens: 17 us against a fastest point of 17.6 us). Points whose sizes span a
// narrow range (4,096 tokens a rank, the EP degree and the dtype alone moving the bytes) only give
// the line's slope and where it meets zero bytes, far from any point: whatever the rate model does
// not describe there (a NIC that saturates as SMs are added, bytes counted otherwise than the kernel
// moves them) lands in the intercept, and its standard error, which assumes the model right, does
// not show it. Hybrid-EP's 54 H100 RDMA points give a dispatch fixed cost of 3,913 +- 218 us, more
// than their fastest point's whole time (3,537 us): a replay of a small batch would be charged it.
//
// The rule (docs/calibration.md, "Fixed costs extrapolated"): a fitted fixed cost is flagged when
// its points' sizes span less than kInterceptSpan times and it is more than kInterceptShare of their
// fastest point's time. On the bundled sets it flags Hybrid-EP's H100 RDMA and GB200 NVLink fixed
// costs, DeepEP MNNVL's on GB200 and UCCL-EP's RDMA ones (sizes spanning 1.42 to 9.05 x, 37 to 111%
// of the fastest point), and none of TensorRT-LLM's (2,304 x), pplx-kernels' (102 x) or the copy and
// all-to-all sweeps.
#pragma once

#include <string>

namespace epsim {

/// Below this span of sizes (largest / smallest) the intercept lies more than a fifteenth of the
/// sizes' range beyond the smallest point.
constexpr double kInterceptSpan = 16;
/// Above this share of the fastest point's time, a fixed cost extrapolated is most of what the
/// model charges a small message, and a misfit in it moves every small prediction.
constexpr double kInterceptShare = 1.0 / 3.0;

/// What to say of a fitted fixed cost `fixed_us` from points whose sizes run from `smallest` to
/// `largest` (any unit, both > 0) and whose fastest point took `fastest_us`: empty when the points
/// pin it down (or it is at most kInterceptShare of the fastest), else one clause naming the span and
/// the share, e.g. "extrapolated to zero bytes from sizes spanning 9.05 x, and 111% of the fastest
/// point's 3537 us: read it as the line's intercept, not a measured kernel overhead".
std::string extrapolated_intercept(double fixed_us, double smallest, double largest, double fastest_us);

}  // namespace epsim
