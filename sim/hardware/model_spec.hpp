// The MoE model whose layers are replayed, as loaded from a model YAML file (kind: model).
#pragma once

#include <cstdint>
#include <string>

namespace epsim {

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
  /// Bytes of one token's hidden state as it crosses the EP backend.
  std::int64_t token_bytes() const { return static_cast<std::int64_t>(hidden_size) * dtype_bytes; }
  /// Forward FLOPs of one token through one routed expert (2 per multiply-add).
  double expert_flops_per_token() const {
    return 2.0 * matrices_per_expert() * hidden_size * static_cast<double>(expert_ffn_size);
  }
};

}  // namespace epsim
