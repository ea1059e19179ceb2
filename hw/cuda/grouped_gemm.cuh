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
/// A benchmark's --impl: one BF16 implementation, or "best": both timed at every point and the faster
/// kept (which one is faster depends on the shape, the GPU and the cuBLAS release).
struct GemmImplChoice {
  GemmImpl impl = GemmImpl::grouped;
  bool best = false;
};
GemmImplChoice parse_gemm_choice(const std::string& text);  // "grouped" | "loop" | "best"
const char* to_string(GemmImpl impl);
/// The implementation that gave a sweep's rows: "cublasGemmEx loop" where one did, else "the faster
/// per point: A at N points, B at M points" (points per implementation, as best chose).
std::string implementations_text(const std::map<GemmImpl, int>& points);

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
  /// Switches a BF16 GEMM between grouped and loop (FP8 stays a cuBLASLt loop; grouped stays loop
  /// once this cuBLAS refused the grouped call).
  void set_impl(GemmImpl impl);
  GemmImpl impl() const { return impl_; }
  Dtype dtype() const { return dtype_; }
  /// cuBLAS / cuBLASLt calls that enqueue(tokens) makes: one per projection for the grouped call, one
  /// per expert and projection for the loop and FP8 (each call may launch more than one kernel).
  int calls_per_enqueue(const std::vector<std::int64_t>& tokens) const;
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
  bool grouped_refused_ = false;
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

/// Library calls held behind a spin gate at once. The launches waiting on a held stream fill a queue of
/// about a thousand entries; once it is full the next launch blocks the host, which then cannot release
/// the gate, and the spin kernel waits out its timeout (seen on an H200: cuBLASLt FP8, 32 experts,
/// 10 runs = 640 calls held, 10 s per point). 128 calls leave room for several kernels per call.
constexpr int kMaxHeldCalls = 128;

/// Median time in us of `reps` runs of gemm.enqueue(tokens) after `warmup` untimed ones; each run has
/// its own event pair, enqueued behind `gate` in batches of at most 16 runs and kMaxHeldCalls library
/// calls (enqueue cost excluded). A batch whose gate gave up is discarded and run again at half its
/// size; *gate_timed_out is set only when a batch of one run still timed out (its timings then include
/// enqueue time).
double time_gemm(GroupedGemm& gemm, const std::vector<std::int64_t>& tokens, int warmup, int reps, cudaStream_t s,
                 SpinGate& gate, bool* gate_timed_out);

/// time_gemm under `choice`: with best, a BF16 GEMM is timed grouped and as a loop and the faster is
/// returned, left selected in `gemm` and named in *used; otherwise gemm's own implementation.
double time_gemm_choice(GroupedGemm& gemm, const GemmImplChoice& choice, const std::vector<std::int64_t>& tokens,
                        int warmup, int reps, cudaStream_t s, SpinGate& gate, bool* gate_timed_out, GemmImpl* used);

}  // namespace epsim::hw
