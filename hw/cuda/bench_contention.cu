// epsim-hw bench contention: a grouped GEMM alone vs while a copy loop within the GPU streams on another
// stream (memory-bound small-M and compute-bound large-M sizes); reports both medians and the copy rate.
// The loop's copy is probed for SM use first: a plain cudaMemcpyAsync D2D may be a kernel, and then the
// rows measure SM sharing rather than the HBM sharing the simulator models (copy_on_sms).
// Unless --no-verify, the copies' destination is cleared before each point and checked against the
// source's pattern afterwards (sampled checksum).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>

#include "hw/cuda/commands.cuh"
#include "hw/cuda/common.cuh"
#include "hw/cuda/copy_sm_probe.cuh"
#include "hw/cuda/grouped_gemm.cuh"
#include "hw/host/measurement_writer.hpp"

namespace epsim::hw {

void measure_contention(const HwArgs& a, Measurements& m, std::vector<std::string>& comments) {
  const int device = static_cast<int>(a.integer("device", 0, 0, 1023));
  const int hidden = static_cast<int>(a.integer("hidden", 6144, 1, 1 << 20));
  const int ffn = static_cast<int>(a.integer("ffn", 2048, 1, 1 << 20));
  const int matrices = static_cast<int>(a.integer("matrices", 3, 1, 16));
  const auto experts = a.integers("experts", {8}, 1, 4096);
  const auto tokens = a.integers("tokens", {16, 64, 256, 1024, 4096}, 1, 1 << 20);
  const GemmImplChoice choice = parse_gemm_choice(a.text("impl", "grouped"));
  const int warmup = static_cast<int>(a.integer("warmup", 5, 0, 100000));
  const int reps = static_cast<int>(a.integer("reps", 30, 1, 1000));
  const auto copy_sizes = parse_sizes(a.text("copy-bytes", "256M"));
  if (copy_sizes.size() != 1) throw std::invalid_argument("--copy-bytes takes one size");
  const std::size_t copy_bytes = static_cast<std::size_t>(copy_sizes[0]);
  const bool verify = !a.flags.count("no-verify");
  const std::string copy_api = a.text("copy-api", "memcpy");
  if (copy_api != "memcpy" && copy_api != "batch")
    throw std::invalid_argument("--copy-api: expected memcpy or batch, got '" + copy_api + "'");
  constexpr std::uint64_t kCopySeed = 0xC0C0E5ull;
  ExpectedChecksums expected;

  const int max_e = static_cast<int>(*std::max_element(experts.begin(), experts.end()));
  const std::int64_t max_t = *std::max_element(tokens.begin(), tokens.end());
  CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t s, cs;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  const std::string api_text = copy_api == "batch" ? "cudaMemcpyBatchAsync D2D with the hint to overlap with compute"
                                                   : "cudaMemcpyAsync D2D";
  comments.insert(comments.end(), {
      "gemm_with_copy: GEMM (" +
          std::string(choice.best ? "the faster of cublasGemmGroupedBatchedEx and a cublasGemmEx loop, per point"
                                  : to_string(choice.impl)) +
          ") alone, then with a loop of " +
          std::to_string(copy_bytes) + " B " + api_text + " copies (within the GPU) on another stream",
      "copy_GBps = rate of the copies that completed inside the GEMM window (bytes / s, 10^9); a local copy reads",
      "and writes the same HBM (about twice the per-GPU traffic of a peer copy of the same rate)"});
  bool timed_out = false;
  {
    GroupedGemm gemm(hidden, ffn, matrices, max_e, max_t * max_e, choice.impl, s);
    std::map<GemmImpl, int> points;  // points per implementation that ran
    SpinGate gate;
    DeviceBuffer src(copy_bytes), dst(copy_bytes);
    fill_pattern(src.get(), copy_bytes / 4, kCopySeed, cs);
    CUDA_CHECK(cudaStreamSynchronize(cs));
    const auto enqueue_copy = [&](cudaStream_t st) {
      if (copy_api == "batch")
        copy_prefer_engine(dst.get(), src.get(), copy_bytes, st);
      else
        CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), copy_bytes, cudaMemcpyDeviceToDevice, st));
    };
    // Whether the loop's copy is a kernel decides what the rows measure (copy_on_sms in each row).
    const CopySmProbeTimes probe = probe_copy_sms(device, enqueue_copy, 5);
    const std::optional<bool> copy_on_sms = copy_on_sms_of(judge_copy_sm_probe(probe));
    comments.push_back(copy_sm_probe_comment("the loop's copy", static_cast<double>(copy_bytes), probe, 5));
    std::printf("%s\n", comments.back().c_str());
    // One copy's time, to size the loop.
    double copy_us = 0;
    {
      EventPair ev;
      enqueue_copy(cs);
      ev.start(cs);
      enqueue_copy(cs);
      ev.stop(cs);
      CUDA_CHECK(cudaStreamSynchronize(cs));
      copy_us = std::max(1.0, ev.elapsed_ms() * 1000.0);
    }
    for (auto e : experts)
      for (auto t : tokens) {
        const std::vector<std::int64_t> per(static_cast<std::size_t>(e), t);
        GemmImpl used = gemm.impl();  // with best, the faster alone is also the one run beside the copies
        const double alone = time_gemm_choice(gemm, choice, per, warmup, reps, s, gate, &timed_out, &used);
        ++points[used];
        gemm.enqueue(per);  // pointer tables uploaded before the gate holds the stream
        CUDA_CHECK(cudaStreamSynchronize(s));
        // Copies: enough to outlast the GEMMs twice over (slowed GEMMs included), at least 4.
        const int copies = static_cast<int>(std::min(20000.0, std::ceil(3.0 * reps * alone / copy_us) + 4));
        std::vector<cudaEvent_t> copy_end(static_cast<std::size_t>(copies));
        for (auto& ev : copy_end) CUDA_CHECK(cudaEventCreate(&ev));
        cudaEvent_t copy_origin;
        CUDA_CHECK(cudaEventCreate(&copy_origin));
        std::vector<EventPair> gev(static_cast<std::size_t>(reps));
        if (verify) CUDA_CHECK(cudaMemsetAsync(dst.get(), 0, copy_bytes, cs));  // before the copy origin
        gate.hold(s);
        CUDA_CHECK(cudaEventRecord(copy_origin, cs));
        for (int i = 0; i < copies; ++i) {
          enqueue_copy(cs);
          CUDA_CHECK(cudaEventRecord(copy_end[i], cs));
        }
        for (int i = 0; i < reps; ++i) {
          gev[i].start(s);
          gemm.enqueue(per);
          gev[i].stop(s);
        }
        gate.release();
        CUDA_CHECK(cudaDeviceSynchronize());
        if (gate.timed_out()) timed_out = true;
        std::vector<double> with;
        for (auto& g : gev) with.push_back(g.elapsed_ms() * 1000.0);
        // The GEMM window [first GEMM start, last GEMM end] relative to the copy origin; a copy counts
        // when it ended inside it.
        float w0 = 0, w1 = 0, total = 0;
        CUDA_CHECK(cudaEventElapsedTime(&w0, copy_origin, gev.front().start_event()));
        CUDA_CHECK(cudaEventElapsedTime(&w1, copy_origin, gev.back().stop_event()));
        std::vector<double> ends;
        for (auto& ev : copy_end) {
          float ms = 0;
          CUDA_CHECK(cudaEventElapsedTime(&ms, copy_origin, ev));
          ends.push_back(ms);
        }
        CUDA_CHECK(cudaEventElapsedTime(&total, copy_origin, copy_end.back()));
        if (ends.back() < w1)
          comments.push_back("tokens " + std::to_string(t) + ": the copy loop ended before the last GEMM");
        std::vector<double> inside;
        for (double x : ends)
          if (x >= w0 && x <= w1) inside.push_back(x);
        double gbps = 0;
        if (inside.size() >= 2) {
          gbps = (inside.size() - 1) * static_cast<double>(copy_bytes) / ((inside.back() - inside.front()) * 1e6);
        } else {
          gbps = copies * static_cast<double>(copy_bytes) / (total * 1e6);
          comments.push_back("tokens " + std::to_string(t) + ": fewer than 2 copies inside the GEMM window; copy_GBps is the loop average");
        }
        for (auto& ev : copy_end) CUDA_CHECK(cudaEventDestroy(ev));
        CUDA_CHECK(cudaEventDestroy(copy_origin));
        if (verify)
          verify_pattern_copy(dst.get(), copy_bytes, kCopySeed,
                              "copy loop beside the GEMM (experts " + std::to_string(e) + ", tokens " +
                                  std::to_string(t) + ", " + std::to_string(copy_bytes) + " B per copy)",
                              cs, expected);
        GemmWithCopyPoint p;
        p.shape = {static_cast<int>(e), t, hidden, ffn, matrices, 2};
        p.gemm_us = alone;
        p.gemm_with_copy_us = median(with);
        p.copy_GBps = gbps;
        p.copy = CopyKind::ce_local;  // the loop copies inside this GPU: its HBM is read and written
        p.copy_on_sms = copy_on_sms;
        p.repetitions = reps;
        m.gemm_with_copy.push_back(p);
        std::printf("contention experts %lld tokens %lld: alone %.2f us, with copy %.2f us (x%.3f), copy %.1f GB/s\n",
                    static_cast<long long>(e), static_cast<long long>(t), alone, p.gemm_with_copy_us,
                    p.gemm_with_copy_us / alone, gbps);
        std::fflush(stdout);
      }
    if (choice.best)
      comments.push_back("gemm_with_copy implementation: " + implementations_text(points));
    else if (gemm.impl() != choice.impl)
      comments.push_back(std::string("the GEMM fell back to ") + to_string(gemm.impl()) + " (grouped call refused)");
  }
  if (timed_out) comments.push_back("WARNING: a spin kernel timed out: some contention timings include enqueue time");
  CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaStreamDestroy(cs));
}

}  // namespace epsim::hw
