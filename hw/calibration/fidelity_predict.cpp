#include "hw/calibration/fidelity_predict.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "hw/calibration/fidelity_ep_bench.hpp"
#include "sim/core/input_error.hpp"
#include "sim/hardware/gemm_cost.hpp"
#include "sim/hardware/model_spec.hpp"
#include "sim/replay/all_to_all.hpp"
#include "sim/replay/sim_context.hpp"

namespace epsim {

namespace {

FidelityPrediction value(double us) { return {us, true, ""}; }
FidelityPrediction none(std::string why) { return {0, false, std::move(why)}; }

/// A hardware copy with at least `gpus` GPUs in one node, for a measurement taken on one node.
HardwareSpec one_node(const HardwareSpec& preset, int gpus) {
  HardwareSpec hw = preset;
  hw.gpus_per_node = std::max(hw.gpus_per_node, gpus);
  hw.nodes = 1;
  return hw;
}

FidelityPrediction grouped_gemm(const GemmPoint& p, const HardwareSpec& hw) {
  const GemmShape& s = p.shape;
  if (s.matrices != 2 && s.matrices != 3) return none("not modelled: the GEMM cost model has 2 or 3 matrices per expert");
  ModelSpec model;
  model.hidden_size = s.hidden_size;
  model.expert_ffn_size = s.ffn_size;
  model.num_experts = s.experts;
  model.gated_ffn = s.matrices == 3;
  model.dtype_bytes = s.dtype_bytes;
  model.precision.gemm = s.dtype;
  try {
    const GemmCost cost(hw, model);
    const std::vector<std::int64_t> rows(static_cast<std::size_t>(s.experts), s.tokens_per_expert);
    return value(ps_to_us(cost.grouped_time_ps(rows, s.ffn_size)));
  } catch (const std::invalid_argument& e) {
    return none(e.what());
  }
}

FidelityPrediction copy(const CopyPoint& p, const HardwareSpec& preset, const Calibration* cal) {
  const ModelSpec model;
  switch (p.kind) {
    case CopyKind::ce_peer: {
      const HardwareSpec hw = one_node(preset, 2);
      SimContext ctx(hw, model, 2);
      Time_ps end = 0;
      ctx.ce_copy(0, 1, p.bytes, Pass::forward, "copy", [&] { end = ctx.now_ps(); });
      ctx.queue().run();
      return value(ps_to_us(end));
    }
    case CopyKind::d2h: {
      const HardwareSpec hw = one_node(preset, 1);
      SimContext ctx(hw, model, 1);
      Time_ps end = 0;
      ctx.d2h_copy(0, p.bytes, Pass::forward, "copy", [&] { end = ctx.now_ps(); });
      ctx.queue().run();
      return value(ps_to_us(end));
    }
    case CopyKind::h2d:
      return value(preset.pcie.latency_us + p.bytes / (preset.pcie.h2d_GBps * 1e3));
    case CopyKind::ce_local:
    case CopyKind::sm_copy: {
      const CopyFit* fit = cal ? cal->copy(p.kind) : nullptr;
      if (!fit) return none(cal ? "no fit of this copy kind" : "no key in the hardware model");
      return value(fit->alpha_us.value + p.bytes / (fit->beta_GBps.value * 1e3));
    }
  }
  return none("unknown copy kind");
}

FidelityPrediction all_to_all(const AllToAllPoint& p, const HardwareSpec& preset) {
  HardwareSpec hw = preset;
  hw.nodes = (p.ranks + hw.gpus_per_node - 1) / hw.gpus_per_node;
  const ModelSpec model;
  std::unique_ptr<SimContext> ctx;
  try {
    ctx = std::make_unique<SimContext>(hw, model, p.ranks);
  } catch (const std::invalid_argument& e) {
    return none(std::string("cannot run on this hardware: ") + e.what());
  }
  std::vector<std::vector<double>> bytes(static_cast<std::size_t>(p.ranks),
                                         std::vector<double>(static_cast<std::size_t>(p.ranks), p.bytes_per_pair));
  Time_ps end = 0;
  AllToAllV a2a(*ctx, "all_to_all", Pass::forward, std::move(bytes), [&](int) { end = std::max(end, ctx->now_ps()); });
  for (int r = 0; r < p.ranks; ++r) a2a.start(r);
  ctx->queue().run();
  return value(ps_to_us(end));
}

}  // namespace

FidelityPrediction predict_point(const FidelityPoint& point, const Measurements& file, const HardwareSpec& hw,
                                 const Calibration* cal, const EpBenchTraffic* traffic) {
  switch (point.series) {
    case FidelitySeries::grouped_gemm: return grouped_gemm(file.grouped_gemm[point.index], hw);
    case FidelitySeries::gemm:
      try {
        return value(predict_gemm_call_us(file.gemm[point.index], hw));
      } catch (const std::invalid_argument& e) {
        return none(e.what());
      }
    case FidelitySeries::copy: return copy(file.copy[point.index], hw, cal);
    case FidelitySeries::all_to_all: return all_to_all(file.all_to_all[point.index], hw);
    case FidelitySeries::ep_comm: {
      const EpCommPoint& p = file.ep_comm[point.index];
      EpBenchTraffic drawn;
      if (!traffic) {
        drawn = ep_bench_traffic(p);
        traffic = &drawn;
      }
      try {
        return value(simulate_ep_bench_us(p, *traffic, ep_bench_hardware(p, hw)));
      } catch (const InputError& e) {
        return none(e.what());
      }
    }
  }
  return none("unknown series");
}

}  // namespace epsim
