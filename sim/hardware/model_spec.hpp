// The MoE model whose layers are replayed, as loaded from a model YAML file (kind: model).
#pragma once

#include <cstdint>
#include <string>

#include "sim/hardware/dtype.hpp"

namespace epsim {

/// Number format per phase, as deployed: DeepSeek-V3 dispatches FP8 (with its scales) and combines in
/// BF16, and quantises the activation gradients entering the backward dispatch to FP8 too. Every field
/// defaults to the model's dtype_bytes.
struct PrecisionSpec {
  Dtype dispatch = Dtype::bf16;       ///< forward tokens to their experts
  Dtype combine = Dtype::bf16;        ///< forward expert outputs back
  Dtype grad_dispatch = Dtype::bf16;  ///< backward: output gradients to the experts
  Dtype grad_combine = Dtype::bf16;   ///< backward: input gradients back
  Dtype gemm = Dtype::bf16;           ///< expert GEMM inputs (FP8 GEMMs run at fp8_peak_TFLOPs)
  int fp8_scale_block = 128;          ///< channels per FP32 scale of an FP8 activation
  /// Whether the fields above were set (load_model always sets them, from the file or from
  /// dtype_bytes). A ModelSpec built in code without them moves hidden * dtype_bytes in every phase.
  bool set = false;
};

/// Group-limited routing (DeepSeek-V3's node-limited top-k): experts form `groups` equal contiguous
/// groups, a token first picks `groups_per_token` groups and then its top-k experts inside them. When
/// each node holds whole groups, a token reaches at most groups_per_token nodes. 0: unrestricted.
struct RoutingSpec {
  int groups = 0;
  int groups_per_token = 0;
  bool limited() const { return groups > 0 && groups_per_token > 0 && groups_per_token < groups; }
};

/// The work of a transformer layer outside its MoE block (attention, the dense FFN of leading dense
/// layers, router, norms and residual adds) and of the output head, for step-level prediction
/// (docs/step.md). Optional in a model file: `layers` 0 means not described, and an experiment with a
/// `step:` block refuses such a model.
struct NonMoeSpec {
  int layers = 0;          ///< transformer layers in all (dense + MoE); 0: not described
  int dense_layers = 0;    ///< leading layers with a dense FFN instead of a MoE block
  int dense_ffn_size = 0;  ///< intermediate size of those layers' FFN (gated like the experts)
  /// Weights of one layer's attention projections (Q, K, V, O and any low-rank parts), in parameters.
  std::int64_t attention_params = 0;
  int attention_gemm_calls = 4;  ///< GEMM kernels of those projections (each pays gemm.launch_us)
  /// Forward FLOPs of the attention scores and their weighted sum for one token and one position of
  /// context it attends to (2 * heads * (qk_head_dim + v_head_dim)).
  double attention_flops_per_position = 0;
  /// KV-cache bytes one layer holds per position of context (what decode reads per token per position).
  double kv_cache_bytes_per_position = 0;
  /// HBM bytes per token per layer of the memory-bound element-wise work (norms, residual adds),
  /// forward. Defaults to 10 * hidden_size * dtype_bytes: two norms read and write the hidden state,
  /// two residual adds read two and write one.
  double elementwise_bytes_per_token = 0;
  int vocab_size = 0;            ///< output head (vocab x hidden GEMM once per pass); 0: not counted
  Dtype gemm = Dtype::bf16;      ///< inputs of the projection and dense-FFN GEMMs
  bool described() const { return layers > 0; }
  int moe_layers() const { return layers - dense_layers; }
};

struct ModelSpec {
  std::string name;
  std::string source_file;
  int hidden_size = 0;
  int expert_ffn_size = 0;      ///< routed expert intermediate size
  int num_experts = 0;          ///< routed experts per MoE layer
  int top_k = 0;
  int shared_experts = 0;       ///< always-on experts, computed by every rank on its own tokens
  int shared_expert_ffn_size = 0;
  bool gated_ffn = true;        ///< SwiGLU: three matrices per expert instead of two
  int dtype_bytes = 0;          ///< activations and weights (2 for bf16)
  /// MoE layers whose experts one GPU holds at once (all of them without pipeline parallelism, those
  /// of its stage with it), each laid out like the replayed layer: the HBM check multiplies one
  /// layer's expert weights by it.
  int moe_layers = 1;
  PrecisionSpec precision;
  RoutingSpec routing;
  NonMoeSpec non_moe;

  int matrices_per_expert() const { return gated_ffn ? 3 : 2; }
  /// Bytes of one routed expert's weights.
  std::int64_t expert_weight_bytes() const {
    return static_cast<std::int64_t>(matrices_per_expert()) * hidden_size * expert_ffn_size * dtype_bytes;
  }
  /// Bytes of the weights of all shared experts of one layer.
  std::int64_t shared_weight_bytes() const {
    return static_cast<std::int64_t>(matrices_per_expert()) * hidden_size * shared_expert_ffn_size * dtype_bytes *
           shared_experts;
  }
  /// Bytes of one token's hidden state in dtype_bytes (what planners weigh tokens by).
  std::int64_t token_bytes() const { return static_cast<std::int64_t>(hidden_size) * dtype_bytes; }
  /// Bytes of one token's hidden state in `dtype`, FP8 scales included (what a phase moves).
  std::int64_t token_bytes(Dtype dtype) const {
    return activation_bytes(dtype, hidden_size, precision.fp8_scale_block);
  }
  /// Forward FLOPs of one token through one routed expert (2 per multiply-add).
  double expert_flops_per_token() const {
    return 2.0 * matrices_per_expert() * hidden_size * static_cast<double>(expert_ffn_size);
  }
};

}  // namespace epsim
