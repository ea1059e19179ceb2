// Time of the work outside the MoE blocks, per rank, from the model's non_moe block and the same
// calibrated GEMM curve and roofline as the expert GEMMs (sim/step/dense_gemm.hpp): each GEMM costs
//   launches * gemm.launch_us + max( FLOPs / (eta_d(rows) * peak_d),  HBM bytes / hbm_GBps )
// with rows = the tokens the rank runs through the layer. Element-wise work (norms, residual adds)
// is memory bound: bytes / hbm_GBps. The backward pass costs twice the forward (a data-gradient and
// a weight-gradient GEMM per forward GEMM, twice the element-wise traffic). Equations: docs/step.md.
#pragma once

#include <algorithm>
#include <cstdint>

#include "sim/hardware/experiment_spec.hpp"
#include "sim/step/dense_gemm.hpp"

namespace epsim {

/// Forward and backward time of one piece of the step, in microseconds.
struct PassTime_us {
  double forward = 0;
  double backward = 0;
  double total() const { return forward + backward; }
};

class NonMoeCost {
 public:
  /// `model.non_moe` must be described; an FP8 `non_moe.gemm` needs the hardware's FP8 peak and curve
  /// (the experiment loader checks both). The objects must outlive this one.
  NonMoeCost(const HardwareSpec& hw, const ModelSpec& model, const StepSpec& step)
      : hw_(hw), model_(model), step_(step) {}

  /// Attention, router and element-wise work of one MoE layer for `tokens` rows on one rank.
  PassTime_us moe_layer(double tokens) const { return both(attention_us(tokens) + router_us(tokens)); }
  /// Attention, dense FFN and element-wise work of one leading dense layer.
  PassTime_us dense_layer(double tokens) const { return both(attention_us(tokens) + dense_ffn_us(tokens)); }
  /// The output head (once per pass); zero when the model gives no vocab_size.
  PassTime_us head(double tokens) const {
    const NonMoeSpec& n = model_.non_moe;
    if (n.vocab_size == 0 || tokens <= 0) return both(0);
    const double weights = static_cast<double>(n.vocab_size) * model_.hidden_size;
    return both(gemm_us(Dtype::bf16, 1, tokens, 2.0 * weights * tokens, weights * activation_bytes()));
  }

  /// Positions of context each token attends to: the causal mean (S + 1) / 2 over a sequence of S for
  /// training and prefill, the whole cache S for a decoded token.
  double context_positions() const {
    const double s = step_.sequence_length;
    return step_.mode == StepMode::decode ? s : (s + 1.0) / 2.0;
  }

  /// The forward pieces, exposed for tests and docs/step.md's worked example.
  double projections_us(double tokens) const {
    const NonMoeSpec& n = model_.non_moe;
    const double params = static_cast<double>(n.attention_params);
    return gemm_us(n.gemm, n.attention_gemm_calls, tokens, 2.0 * params * tokens,
                   params * element_bytes(n.gemm) + 2.0 * tokens * hidden_bytes());
  }
  /// Scores and their weighted sum, in BF16 as deployed (DeepSeek-V3 keeps attention out of FP8);
  /// decode also streams the KV cache of every token's sequence.
  double scores_us(double tokens) const {
    const NonMoeSpec& n = model_.non_moe;
    const double flops = n.attention_flops_per_position * tokens * context_positions();
    const double kv_bytes = step_.mode == StepMode::decode
                                ? n.kv_cache_bytes_per_position * step_.sequence_length * tokens
                                : 0.0;
    return gemm_us(Dtype::bf16, 1, tokens, flops, kv_bytes);
  }
  double elementwise_us(double tokens) const {
    return hbm_us(hw_, elementwise_bytes_per_token() * tokens);
  }
  double router_us(double tokens) const {
    const double weights = static_cast<double>(model_.hidden_size) * model_.num_experts;
    return gemm_us(Dtype::bf16, 1, tokens, 2.0 * weights * tokens, weights * activation_bytes());
  }
  double dense_ffn_us(double tokens) const {
    const NonMoeSpec& n = model_.non_moe;
    const double weights =
        static_cast<double>(model_.matrices_per_expert()) * model_.hidden_size * n.dense_ffn_size;
    // Gate and up projections fused into one kernel, the down projection a second.
    return gemm_us(n.gemm, 2, tokens, 2.0 * weights * tokens,
                   weights * element_bytes(n.gemm) + 2.0 * tokens * hidden_bytes());
  }
  double elementwise_bytes_per_token() const {
    const NonMoeSpec& n = model_.non_moe;
    return n.elementwise_bytes_per_token > 0 ? n.elementwise_bytes_per_token : 10.0 * hidden_bytes();
  }

 private:
  double attention_us(double tokens) const {
    return projections_us(tokens) + scores_us(tokens) + elementwise_us(tokens);
  }
  PassTime_us both(double forward_us) const {
    PassTime_us t;
    t.forward = forward_us;
    t.backward = step_.mode == StepMode::training ? 2.0 * forward_us : 0.0;
    return t;
  }
  double activation_bytes() const { return model_.dtype_bytes; }
  double hidden_bytes() const { return static_cast<double>(model_.hidden_size) * model_.dtype_bytes; }
  double gemm_us(Dtype dtype, int launches, double rows, double flops, double bytes) const {
    return dense_gemm_us(hw_, dtype, launches, rows, flops, bytes);
  }

  const HardwareSpec& hw_;
  const ModelSpec& model_;
  const StepSpec& step_;
};

}  // namespace epsim
