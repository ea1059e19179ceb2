// Builds the StepPrediction from the replayed records, one at a time (docs/step.md):
//   step = L_moe * mean_r(layer_r) + L_dense * mean_r(dense_r) + mean_r(head_r)
// where layer_r is record r's MoE layer with its non-MoE work, every pass (forward; backward in
// training) timed by layer_pass_us, and L_moe = non_moe.layers - non_moe.dense_layers. The trace's
// records stand for every MoE layer of the model: their mean is scaled to L_moe, whichever layers
// and how many the trace holds. Each record's non-MoE work runs the most tokens any rank feeds that
// record (the slowest rank gates the dispatch that follows).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/balancers/oracle.hpp"
#include "sim/replay/layer_result.hpp"
#include "sim/step/non_moe_cost.hpp"
#include "sim/step/overlap_time.hpp"
#include "sim/step/pass_busy.hpp"
#include "sim/step/step_prediction.hpp"

namespace epsim {

class StepAccumulator {
 public:
  /// `spec.step` must be set and the model's non_moe block described (the loader makes sure).
  explicit StepAccumulator(const ExperimentSpec& spec)
      : spec_(spec), step_(*spec.step), cost_(spec.hardware, spec.model, step_) {}
  // cost_ refers to step_: a copy would refer to the original's.
  StepAccumulator(const StepAccumulator&) = delete;
  StepAccumulator& operator=(const StepAccumulator&) = delete;

  /// One record: the tokens each rank fed the layer, its simulated result under the experiment's
  /// balancer, and the oracle's bound for the same work.
  void add(const std::vector<std::int64_t>& local_tokens, const LayerResult& result, const LayerBound& bound) {
    if (local_tokens.empty()) return;
    double max_tokens = 0, sum_tokens = 0;
    for (std::int64_t t : local_tokens) {
      max_tokens = std::max(max_tokens, static_cast<double>(t));
      sum_tokens += static_cast<double>(t);
    }
    const int n = static_cast<int>(local_tokens.size());
    const PassTime_us non_moe = cost_.moe_layer(max_tokens);
    double compute = 0;
    layer_sum_ += layer_us(non_moe, result, n, &compute);
    bound_sum_ += bound_layer_us(non_moe, bound);
    moe_compute_sum_ += compute;
    non_moe_sum_ += non_moe.total();
    dense_sum_ += cost_.dense_layer(max_tokens).total();
    head_sum_ += cost_.head(max_tokens).total();
    tokens_sum_ += sum_tokens / n;
    ++records_;
  }

  StepPrediction prediction() const {
    StepPrediction p;
    p.step = step_;
    const NonMoeSpec& m = spec_.model.non_moe;
    p.layers = m.layers;
    p.dense_layers = m.dense_layers;
    p.moe_layers = m.moe_layers();
    p.records = records_;
    if (records_ == 0) return p;
    const double r = static_cast<double>(records_);
    p.moe_layer_us = layer_sum_ / r;
    p.bound_moe_layer_us = bound_sum_ / r;
    p.dense_layer_us = dense_sum_ / r;
    p.head_us = head_sum_ / r;
    p.tokens_per_gpu = tokens_sum_ / r;
    const double fixed = p.dense_layers * p.dense_layer_us + p.head_us;
    p.step_us = p.moe_layers * p.moe_layer_us + fixed;
    p.bound_step_us = p.moe_layers * p.bound_moe_layer_us + fixed;
    p.non_moe_us = p.moe_layers * (non_moe_sum_ / r) + fixed;
    p.moe_compute_us = p.moe_layers * (moe_compute_sum_ / r);
    return p;
  }

 private:
  /// A floor on one MoE layer with its non-MoE work N, per pass. Run plainly, the pass takes N + P with
  /// P at least the oracle's bound B. With two-micro-batch overlap each GPU takes at least
  /// max(N, M_g/2) + max(C_g, M_g/2) >= N + C_g, and C_g of the slowest GPU is at least the bound's
  /// compute term, so N + min(B, compute term) = N + compute term is a floor there.
  double bound_layer_us(const PassTime_us& non_moe, const LayerBound& b) const {
    const auto pass = [&](double non_moe_us, const PassBound& p) {
      const double moe_ps = step_.overlap == StepOverlap::none ? p.total_ps() : p.compute_ps;
      return non_moe_us + moe_ps * 1e-6;
    };
    double total = pass(non_moe.forward, b.forward);
    if (step_.mode == StepMode::training) total += pass(non_moe.backward, b.backward);
    return total;
  }
  /// Both passes of one MoE layer; adds the slowest GPU's MoE compute per pass to `*compute`.
  double layer_us(const PassTime_us& non_moe, const LayerResult& r, int n, double* compute) const {
    double total = pass_us(non_moe.forward, r.forward_ps, r, Pass::forward, n, compute);
    if (step_.mode == StepMode::training)
      total += pass_us(non_moe.backward, r.backward_ps, r, Pass::backward, n, compute);
    return total;
  }
  double pass_us(double non_moe_us, Time_ps moe_ps, const LayerResult& r, Pass pass, int n, double* compute) const {
    const std::vector<GpuPassBusy> busy = pass_busy(r.timeline, pass, n);
    if (compute) {
      double slowest = 0;
      for (const GpuPassBusy& b : busy) slowest = std::max(slowest, b.compute_us);
      *compute += slowest;
    }
    return layer_pass_us(step_.overlap, non_moe_us, ps_to_us(moe_ps), busy);
  }

  const ExperimentSpec& spec_;
  StepSpec step_;
  NonMoeCost cost_;
  std::size_t records_ = 0;
  double layer_sum_ = 0, bound_sum_ = 0, moe_compute_sum_ = 0, non_moe_sum_ = 0;
  double dense_sum_ = 0, head_sum_ = 0, tokens_sum_ = 0;
};

}  // namespace epsim
