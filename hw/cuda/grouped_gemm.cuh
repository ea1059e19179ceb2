// A BF16 expert grouped GEMM with cuBLAS: for every expert e with M_e tokens, the up projection
// [M_e x H] x [H x (matrices-1)*F] and the down projection [M_e x F] x [F x H] (matrices = 1: a single
// [M_e x H] x [H x F]), FP32 accumulation. FLOPs = 2 * matrices * H * F * sum(M_e), as GemmCost counts.
// Two BF16 implementations: cublasGemmGroupedBatchedEx (one call per projection for all experts, CUDA >=
// 12.5) and a loop of cublasGemmEx per expert on one stream. FP8 (E4M3 inputs, BF16 output, FP32
// accumulation, unit scales) is a loop of cublasLtMatmul per expert in the TN layout FP8 requires
// (weights stored [N x K], K-major, as DeepGEMM stores them); it needs compute capability >= 8.9 and H,
// F multiples of 16. The FP8 down projection reads an FP8 copy of the intermediate activations: the
// quantisation between the two projections is not timed. Experts with 0 tokens are skipped.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <cublasLt.h>

#include "hw/cuda/common.cuh"

namespace epsim::hw {

enum class GemmImpl { grouped, loop, lt_fp8_loop };
GemmImpl parse_gemm_impl(const std::string& text);  // "grouped" | "loop"
const char* to_string(GemmImpl impl);

/// FP8 GEMMs cannot run here (compute capability below 8.9, or cuBLASLt offers no algorithm): the
/// suite skips them with this message, `bench gemm --dtype fp8` exits 1 with it.
class Fp8Unavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// True when `device` can run FP8 E4M3 tensor-core GEMMs (compute capability >= 8.9).
bool fp8_gemm_capable(int device);

class SpinGate;

class GroupedGemm {
 public:
  /// Allocates distinct weights for `max_experts` experts and activations for `max_total_tokens` rows.
  /// dtype fp8 ignores `impl` (cuBLASLt loop) and throws Fp8Unavailable where it cannot run.
  GroupedGemm(int hidden, int ffn, int matrices, int max_experts, std::int64_t max_total_tokens, GemmImpl impl,
              cudaStream_t stream, Dtype dtype = Dtype::bf16);
  ~GroupedGemm();
  GroupedGemm(const GroupedGemm&) = delete;
  GroupedGemm& operator=(const GroupedGemm&) = delete;

  /// Enqueues one grouped GEMM on the stream: tokens[e] rows for expert slot e (< max_experts).
  void enqueue(const std::vector<std::int64_t>& tokens);
  void set_stream(cudaStream_t s);
  GemmImpl impl() const { return impl_; }
  Dtype dtype() const { return dtype_; }
  /// Distinct pointer tables kept on the device (a new table beyond this clears the cache: do not
  /// have more than this many distinct grouped GEMMs in flight unsynchronised).
  static constexpr std::size_t kSlots = 1024;

 private:
  void enqueue_projection(const std::vector<int>& experts, const std::vector<std::int64_t>& tokens,
                          const std::vector<std::int64_t>& offsets, int n, int k, int weight_index);
  void enqueue_fp8(const std::vector<int>& experts, const std::vector<std::int64_t>& tokens,
                   const std::vector<std::int64_t>& offsets, int n, int k, int weight_index);
  /// cuBLASLt descriptors and the heuristic's algorithm for one (N, K, M) product, made once.
  struct LtPlan {
    cublasLtMatmulDesc_t op{};
    cublasLtMatrixLayout_t a{}, b{}, d{};
    cublasLtMatmulAlgo_t algo{};
  };
  const LtPlan& lt_plan(int n, int k, std::int64_t m);
  int hidden_, ffn_, matrices_, max_experts_;
  std::int64_t max_tokens_;
  GemmImpl impl_;
  Dtype dtype_;
  cudaStream_t stream_;
  cublasHandle_t handle_{};
  cublasLtHandle_t lt_{};
  std::map<std::tuple<int, int, std::int64_t>, LtPlan> lt_plans_;
  DeviceBuffer weights_;   // per expert: up [H x (m-1)F] then down [F x H] (or [H x F] when m = 1)
  DeviceBuffer input_;     // [tokens x H]
  DeviceBuffer middle_;    // [tokens x (m-1)F]
  DeviceBuffer output_;    // [tokens x H]
  DeviceBuffer pointers_;  // device pointer tables for the grouped call, kSlots of 3 * max_experts
  std::map<std::vector<const void*>, std::size_t> slots_;  // table content -> slot
  cudaStream_t upload_{};  // private non-blocking stream: uploads never wait for a held stream
  DeviceBuffer middle_fp8_;  // FP8: the down projection's input
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
