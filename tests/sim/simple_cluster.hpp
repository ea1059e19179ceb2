// Round-number hardware and model for hand-worked engine tests: 1 TFLOP/s (1 FLOP per ps), no
// padding, flat efficiency 1, NVLink 100 GB/s (0.1 byte/ps) with 1 us latency, no protocol losses,
// 100 SMs of which the EP backend holds 20, and a model whose token costs 2e6 FLOPs (2 us) and
// 1000 bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/balancers/balancer.hpp"
#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"

namespace epsim::test {

inline HardwareSpec simple_hardware(int nodes = 1, int gpus_per_node = 2) {
  HardwareSpec hw;
  hw.name = "simple";
  hw.nodes = nodes;
  hw.gpus_per_node = gpus_per_node;
  hw.gpu = {100, 1.0, 0, 1e6, 80};  // sms, bf16 and fp8 peak TFLOP/s (no FP8), HBM GB/s, HBM GB
  hw.gemm.row_alignment = 1;
  hw.gemm.efficiency = {{1, 1.0}, {2, 1.0}};
  hw.gemm.launch_us = 0;
  hw.copy_engine = {50, 2};
  hw.nvlink = {100, 1};
  hw.infiniband = {25, 3};
  hw.pcie = {50, 50, 2};
  hw.ep_backend.comm_sms = 20;
  hw.ep_backend.internode_route = "direct";
  hw.ep_backend.nvlink_efficiency = 1.0;
  hw.ep_backend.ib_efficiency = 1.0;
  hw.ep_backend.message_efficiency = {{1, 1.0}, {2, 1.0}};
  return hw;
}

inline ModelSpec simple_model(int experts = 2, int top_k = 1, int shared_experts = 0) {
  ModelSpec m;
  m.name = "simple";
  m.hidden_size = 1000;
  m.expert_ffn_size = 500;
  m.num_experts = experts;
  m.top_k = top_k;
  m.shared_experts = shared_experts;
  m.shared_expert_ffn_size = shared_experts > 0 ? 500 : 0;
  m.gated_ffn = false;  // two matrices: 2 * 2 * 1000 * 500 = 2e6 FLOPs per token
  m.dtype_bytes = 1;
  m.moe_layers = 1;
  return m;
}

/// A record from its count matrix, one row per source rank.
inline TraceRecord record_of(const std::vector<std::vector<std::uint32_t>>& rows) {
  TraceRecord r;
  for (const auto& row : rows) r.counts.insert(r.counts.end(), row.begin(), row.end());
  return r;
}

/// A balancer's view of `hw` (all its GPUs take part) and `model`.
inline BalancerContext context_for(const ModelSpec& model, const HardwareSpec& hw,
                                   Placement placement = Placement::contiguous) {
  BalancerContext c;
  c.num_gpus = hw.nodes * hw.gpus_per_node;
  c.gpus_per_node = hw.gpus_per_node;
  c.placement = placement;
  c.model = &model;
  c.hardware = &hw;
  return c;
}

}  // namespace epsim::test
