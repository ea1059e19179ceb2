// A BF16 expert grouped GEMM with cuBLAS: for every expert e with M_e tokens, the up projection
// [M_e x H] x [H x (matrices-1)*F] and the down projection [M_e x F] x [F x H] (matrices = 1: a single
// [M_e x H] x [H x F]), FP32 accumulation. FLOPs = 2 * matrices * H * F * sum(M_e), as GemmCost counts.
// Two implementations: cublasGemmGroupedBatchedEx (one call per projection for all experts, CUDA >= 12.5)
// and a loop of cublasGemmEx per expert on one stream. Experts with 0 tokens are skipped.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hw/cuda/common.cuh"

namespace epsim::hw {

enum class GemmImpl { grouped, loop };
GemmImpl parse_gemm_impl(const std::string& text);  // "grouped" | "loop"
const char* to_string(GemmImpl impl);

class SpinGate;

class GroupedGemm {
 public:
  /// Allocates distinct weights for `max_experts` experts and activations for `max_total_tokens` rows.
  GroupedGemm(int hidden, int ffn, int matrices, int max_experts, std::int64_t max_total_tokens, GemmImpl impl,
              cudaStream_t stream);
  ~GroupedGemm();
  GroupedGemm(const GroupedGemm&) = delete;
  GroupedGemm& operator=(const GroupedGemm&) = delete;

  /// Enqueues one grouped GEMM on the stream: tokens[e] rows for expert slot e (< max_experts).
  void enqueue(const std::vector<std::int64_t>& tokens);
  void set_stream(cudaStream_t s);
  GemmImpl impl() const { return impl_; }
  /// Distinct pointer tables kept on the device (a new table beyond this clears the cache: do not
  /// have more than this many distinct grouped GEMMs in flight unsynchronised).
  static constexpr std::size_t kSlots = 1024;

 private:
  void enqueue_projection(const std::vector<int>& experts, const std::vector<std::int64_t>& tokens,
                          const std::vector<std::int64_t>& offsets, int n, int k, int weight_index);
  int hidden_, ffn_, matrices_, max_experts_;
  std::int64_t max_tokens_;
  GemmImpl impl_;
  cudaStream_t stream_;
  cublasHandle_t handle_{};
  DeviceBuffer weights_;   // per expert: up [H x (m-1)F] then down [F x H] (or [H x F] when m = 1)
  DeviceBuffer input_;     // [tokens x H]
  DeviceBuffer middle_;    // [tokens x (m-1)F]
  DeviceBuffer output_;    // [tokens x H]
  DeviceBuffer pointers_;  // device pointer tables for the grouped call, kSlots of 3 * max_experts
  std::map<std::vector<const void*>, std::size_t> slots_;  // table content -> slot
  cudaStream_t upload_{};  // private non-blocking stream: uploads never wait for a held stream
  DeviceBuffer workspace_;
};

}  // namespace epsim::hw

namespace epsim::hw {

/// Median time in us of `reps` runs of gemm.enqueue(tokens) after `warmup` untimed ones; each run has
/// its own event pair, enqueued behind `gate` in batches of 16 (enqueue cost excluded).
/// *gate_timed_out is set when a spin kernel gave up (the timings then include enqueue time).
double time_gemm(GroupedGemm& gemm, const std::vector<std::int64_t>& tokens, int warmup, int reps, cudaStream_t s,
                 SpinGate& gate, bool* gate_timed_out);

}  // namespace epsim::hw
