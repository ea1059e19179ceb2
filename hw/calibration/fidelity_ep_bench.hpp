// One published dispatch or combine benchmark (an EpCommPoint) run through the engine, the way
// DeepEP-family normal kernels move tokens:
//   - every rank launches its kernel at t = 0; the kernel pays the backend's fixed cost
//     (ep_backend.dispatch_fixed_us / combine_fixed_us) before its first byte moves;
//   - inside a node, a token goes rank -> rank over NVLink, once per destination rank;
//   - across nodes, a token crosses InfiniBand once per destination node, to the GPU with the
//     sender's local index, which forwards it over NVLink to each destination rank there (rail
//     forwarding). The hops run concurrently, as the kernels pipeline them in chunks;
//   - a combine moves the same bytes the other way (destination rank -> forwarder -> source);
//   - every hop is a SimContext::ep_message (fabric efficiency, size curve, latency, and with
//     ep_backend.sm_GBps > 0 the sender's and receiver's comm_sms * sm_GBps shared by their messages).
// A rank's kernel ends when all its own messages have left and all messages addressed to it (as
// sender, forwarder or receiver) have arrived. The predicted time is the mean of the ranks' kernel
// times: DeepEP's tests print a figure per rank, and the measured set keeps their mean.
#pragma once

#include "hw/calibration/ep_bench_traffic.hpp"
#include "hw/calibration/measurements.hpp"
#include "sim/hardware/hardware_spec.hpp"

namespace epsim {

/// Host-side cost of one call through a framework's Python API on top of the kernel (DeepEP's
/// Buffer.dispatch, Hybrid-EP's API): 6.8 us, the per-kernel launch through Python layers measured
/// on GB200 (tritonbench PR 1017, the middle of the published 5-9 us; see
/// ../shared/reference/measurements/launch-and-latency-floors.md).
constexpr double kApiHostCost_us = 6.8;

/// `preset` shaped for the point: gpus_per_node and nodes from the point (nodes = ceil(ep /
/// gpus_per_node)), ep_backend.comm_sms = the point's SMs when it states them.
HardwareSpec ep_bench_hardware(const EpCommPoint& point, const HardwareSpec& preset);

/// Predicted time in microseconds of the point's kernel on `hw` (already shaped by
/// ep_bench_hardware) with `traffic` drawn for it, plus kApiHostCost_us when the point is not
/// kernel-only. Throws InputError (at point.where) when the hardware cannot run it (too few GPUs, no
/// InfiniBand for a multi-node point, comm SMs not below the GPU's).
double simulate_ep_bench_us(const EpCommPoint& point, const EpBenchTraffic& traffic, const HardwareSpec& hw);

}  // namespace epsim
