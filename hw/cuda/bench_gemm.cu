// epsim-hw bench gemm: BF16 and FP8 expert grouped GEMM time vs tokens per expert and number of experts.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "hw/cuda/commands.cuh"
#include "hw/cuda/common.cuh"
#include "hw/cuda/grouped_gemm.cuh"
#include "hw/host/measurement_writer.hpp"

namespace epsim::hw {

namespace {
// 1..8192: powers of two, 128-aligned multiples and unaligned counts.
const std::vector<std::int64_t> kDefaultTokens = {1,   2,   4,   8,    16,   32,   64,   96,   100,  128,  192,
                                                  200, 256, 320, 384,  500,  512,  768,  1000, 1024, 1536, 2000,
                                                  2048, 3072, 4000, 4096, 6144, 8192};
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

}  // namespace

/// Median time in us of `reps` enqueues of gemm.enqueue(tokens) after `warmup` untimed ones; each
/// repetition has its own event pair, all enqueued behind a SpinGate.
double time_gemm(GroupedGemm& gemm, const std::vector<std::int64_t>& tokens, int warmup, int reps, cudaStream_t s,
                 SpinGate& gate, bool* gate_timed_out) {
  for (int i = 0; i < warmup; ++i) gemm.enqueue(tokens);
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> times;
  // Runs per gated batch: at most 16 (a short held queue) and at most kMaxHeldCalls library calls.
  int batch = std::clamp(kMaxHeldCalls / std::max(1, gemm.calls_per_enqueue(tokens)), 1, 16);
  for (int done = 0; done < reps;) {
    const int n = std::min(batch, reps - done);
    std::vector<EventPair> ev(static_cast<std::size_t>(n));
    gemm.enqueue(tokens);  // uploads any pointer table before the gate holds the stream
    gate.hold(s);
    for (int i = 0; i < n; ++i) {
      ev[i].start(s);
      gemm.enqueue(tokens);
      ev[i].stop(s);
    }
    gate.release();
    CUDA_CHECK(cudaStreamSynchronize(s));
    if (gate.timed_out() && n > 1) {  // the host blocked while holding: these times include enqueue
      batch = n / 2;
      continue;
    }
    if (gate.timed_out() && gate_timed_out) *gate_timed_out = true;
    for (auto& e : ev) times.push_back(e.elapsed_ms() * 1000.0);
    done += n;
  }
  return median(times);
}

double time_gemm_choice(GroupedGemm& gemm, const GemmImplChoice& choice, const std::vector<std::int64_t>& tokens,
                        int warmup, int reps, cudaStream_t s, SpinGate& gate, bool* gate_timed_out, GemmImpl* used) {
  if (!choice.best || gemm.dtype() == Dtype::fp8) {
    *used = gemm.impl();
    return time_gemm(gemm, tokens, warmup, reps, s, gate, gate_timed_out);
  }
  gemm.set_impl(GemmImpl::grouped);
  const double grouped_us = time_gemm(gemm, tokens, warmup, reps, s, gate, gate_timed_out);
  // Where this cuBLAS refused the grouped call (before or during that timing) the GEMM fell back to the
  // loop for good: what was timed is the loop, and there is nothing to compare it with.
  if (gemm.impl() == GemmImpl::loop) {
    *used = GemmImpl::loop;
    return grouped_us;
  }
  gemm.set_impl(GemmImpl::loop);
  const double loop_us = time_gemm(gemm, tokens, warmup, reps, s, gate, gate_timed_out);
  *used = loop_us < grouped_us ? GemmImpl::loop : GemmImpl::grouped;
  gemm.set_impl(*used);
  return std::min(loop_us, grouped_us);
}

void measure_gemm(const HwArgs& a, Measurements& m, std::vector<std::string>& comments) {
  const int device = static_cast<int>(a.integer("device", 0, 0, 1023));
  const int hidden = static_cast<int>(a.integer("hidden", 6144, 1, 1 << 20));
  const int ffn = static_cast<int>(a.integer("ffn", 2048, 1, 1 << 20));
  const int matrices = static_cast<int>(a.integer("matrices", 3, 1, 16));
  const auto experts = a.integers("experts", {1, 2, 4, 8, 16, 32}, 1, 4096);
  const auto tokens = a.integers("tokens", kDefaultTokens, 1, 1 << 20);
  const GemmImplChoice choice = parse_gemm_choice(a.text("impl", "grouped"));
  const int warmup = static_cast<int>(a.integer("warmup", 5, 0, 100000));
  const int reps = static_cast<int>(a.integer("reps", 50, 1, 100000));
  std::vector<Dtype> dtypes;
  for (const auto& name : split_list(a.text("dtype", "bf16"))) {
    if (name != "bf16" && name != "fp8") throw std::invalid_argument("--dtype: '" + name + "' is not bf16 or fp8");
    dtypes.push_back(parse_dtype(name));
  }

  const int max_e = static_cast<int>(*std::max_element(experts.begin(), experts.end()));
  const std::int64_t max_t = *std::max_element(tokens.begin(), tokens.end());
  CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  bool timed_out = false;
  for (Dtype dtype : dtypes) {
    GroupedGemm gemm(hidden, ffn, matrices, max_e, max_t * max_e, choice.impl, s, dtype);
    SpinGate gate;
    std::map<GemmImpl, int> wins;  // points per implementation that gave the row
    for (auto e : experts)
      for (auto t : tokens) {
        const std::vector<std::int64_t> per(static_cast<std::size_t>(e), t);
        GemmImpl used = gemm.impl();
        const double us = time_gemm_choice(gemm, choice, per, warmup, reps, s, gate, &timed_out, &used);
        ++wins[used];
        GemmPoint p;
        p.shape = {static_cast<int>(e), t, hidden, ffn, matrices, element_bytes(dtype), dtype};
        p.median_us = us;
        p.repetitions = reps;
        m.grouped_gemm.push_back(p);
        const double tflops = 2.0 * matrices * hidden * ffn * static_cast<double>(t) * e / (us * 1e-6) / 1e12;
        std::printf("gemm %s experts %lld tokens/expert %lld: %.2f us (%.1f TFLOP/s)%s%s\n", to_string(dtype),
                    static_cast<long long>(e), static_cast<long long>(t), us, tflops, choice.best ? ", " : "",
                    choice.best ? to_string(used) : "");
        std::fflush(stdout);
      }
    comments.push_back("grouped_gemm " + std::string(to_string(dtype)) + " (hidden " + std::to_string(hidden) +
                       ", ffn " + std::to_string(ffn) + "): " +
                       (dtype == Dtype::fp8 ? "E4M3 inputs, unit scales, BF16 output, FP32 accumulation (cuBLASLt "
                                              "default, no fast accumulation), intermediate quantisation not timed, "
                                            : "BF16 inputs/outputs, FP32 accumulation, ") +
                       "implementation " + implementations_text(wins));
  }
  comments.push_back("grouped_gemm: each repetition timed with its own CUDA event pair, enqueued behind a spin kernel "
                     "(enqueue excluded); warm-up " + std::to_string(warmup) + " runs per point, median over " +
                     std::to_string(reps));
  if (timed_out) comments.push_back("WARNING: a spin kernel timed out: some GEMM timings include enqueue time");
  CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace epsim::hw
