// epsim-hw run: the single-GPU plan runner. Executes the part of each Plan that one plan GPU runs
// (hw/host/plan_tasks.hpp): its grouped GEMMs in plan order on a compute stream and its Copy Engine
// copies as local D2D copies of the same sizes on a copy stream, times every task with CUDA events
// against one origin, and verifies every timed copy with a (sampled) checksum of its destination.
#include <algorithm>
#include <cstdio>

#include "hw/cuda/commands.cuh"
#include "hw/cuda/common.cuh"
#include "hw/cuda/grouped_gemm.cuh"
#include "hw/host/checksum.hpp"
#include "hw/host/plan_tasks.hpp"
#include "hw/host/timeline_writer.hpp"

namespace epsim::hw {

namespace {

constexpr std::uint64_t kPatternSeed = 0xE95135EEDull;

std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

struct TaskEvents {
  cudaEvent_t start{}, stop{};
};

/// Enqueues one plan's tasks (behind the gate when `gate` is set) and returns each task's events:
/// GEMMs first (in task order), then copies.
void enqueue_plan(const GpuTasks& t, GroupedGemm& gemm, const DeviceBuffer& src,
                  const std::vector<char*>& dst, cudaStream_t s, cudaStream_t cs, cudaEvent_t origin,
                  std::vector<TaskEvents>& ev, SpinGate* gate) {
  // Pointer tables are uploaded before the gate holds the stream (GroupedGemm caches them).
  for (const auto& g : t.gemms) gemm.enqueue(g.tokens);
  CUDA_CHECK(cudaStreamSynchronize(s));
  if (gate) gate->hold(s);
  CUDA_CHECK(cudaEventRecord(origin, s));
  CUDA_CHECK(cudaStreamWaitEvent(cs, origin, 0));
  std::size_t e = 0;
  for (const auto& g : t.gemms) {
    CUDA_CHECK(cudaEventRecord(ev[e].start, s));
    gemm.enqueue(g.tokens);
    CUDA_CHECK(cudaEventRecord(ev[e].stop, s));
    ++e;
  }
  for (std::size_t c = 0; c < t.copies.size(); ++c) {
    const auto& copy = t.copies[c];
    if (copy.after_gemm >= 0)  // outputs / gradients leave after the GEMM that produced them
      CUDA_CHECK(cudaStreamWaitEvent(cs, ev[static_cast<std::size_t>(copy.after_gemm)].stop, 0));
    CUDA_CHECK(cudaEventRecord(ev[e].start, cs));
    CUDA_CHECK(cudaMemcpyAsync(dst[c], src.get(), static_cast<std::size_t>(copy.bytes), cudaMemcpyDeviceToDevice, cs));
    CUDA_CHECK(cudaEventRecord(ev[e].stop, cs));
    ++e;
  }
  if (gate) gate->release();
  CUDA_CHECK(cudaStreamSynchronize(s));
  CUDA_CHECK(cudaStreamSynchronize(cs));
}

}  // namespace

int run_plans(const HwArgs& a) {
  const int device = static_cast<int>(a.integer("device", 0, 0, 1023));
  const int gpu = static_cast<int>(a.integer("gpu", 0, 0, 1 << 20));
  const int hidden = static_cast<int>(a.integer("hidden", 6144, 1, 1 << 20));
  const int ffn = static_cast<int>(a.integer("ffn", 2048, 1, 1 << 20));
  const int matrices = static_cast<int>(a.integer("matrices", 3, 1, 16));
  const std::int64_t record = a.integer("record", 0, 0, 1LL << 40);
  const int warmup = static_cast<int>(a.integer("warmup", 1, 0, 1000));
  const GemmImpl impl = parse_gemm_impl(a.text("impl", "grouped"));
  const bool verify = !a.flags.count("no-verify");
  const std::string out = a.text("o", "");

  const std::vector<GpuTasks> tasks = load_gpu_tasks(a.positional[0], static_cast<std::size_t>(record), gpu, hidden, 2);
  std::size_t max_group = 1, max_copy = 4, max_pool = 0;
  std::int64_t max_tokens = 1;
  for (const GpuTasks& t : tasks) {
    for (const auto& g : t.gemms) {
      max_group = std::max(max_group, g.tokens.size());
      std::int64_t sum = 0;
      for (auto v : g.tokens) sum += v;
      max_tokens = std::max(max_tokens, sum);
    }
    std::size_t pool = 0;
    for (const auto& c : t.copies) {
      max_copy = std::max(max_copy, static_cast<std::size_t>(c.bytes));
      pool += round_up(static_cast<std::size_t>(c.bytes), 256);
    }
    max_pool = std::max(max_pool, pool);
  }

  CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  cudaStream_t s, cs;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  std::vector<RunRecord> records;
  std::size_t skipped = 0;
  {
    std::printf("epsim-hw run: %zu plans, plan GPU %d on device %d (%s), GEMM %s, up to %zu instances / %lld tokens per group, "
                "%.3f GiB of copy destinations per plan\n",
                tasks.size(), gpu, device, prop.name, to_string(impl), max_group, static_cast<long long>(max_tokens),
                max_pool / 1073741824.0);
    std::fflush(stdout);
    GroupedGemm gemm(hidden, ffn, matrices, static_cast<int>(max_group), max_tokens, impl, s);
    DeviceBuffer src(round_up(max_copy, 4));
    fill_pattern(src.get(), round_up(max_copy, 4) / 4, kPatternSeed, s);
    DeviceBuffer pool(std::max<std::size_t>(max_pool, 256));
    SpinGate gate;
    cudaEvent_t origin;
    CUDA_CHECK(cudaEventCreate(&origin));
    ExpectedChecksums expected;  // the host's value per copy size
    bool timed_out = false;
    for (std::size_t pi = 0; pi < tasks.size(); ++pi) {
      const GpuTasks& t = tasks[pi];
      if (t.gemms.empty() && t.copies.empty()) {
        ++skipped;
        continue;
      }
      std::vector<char*> dst;
      std::size_t offset = 0;
      for (const auto& c : t.copies) {
        dst.push_back(static_cast<char*>(pool.get()) + offset);
        offset += round_up(static_cast<std::size_t>(c.bytes), 256);
      }
      std::vector<TaskEvents> ev(t.gemms.size() + t.copies.size());
      for (auto& e : ev) {
        CUDA_CHECK(cudaEventCreate(&e.start));
        CUDA_CHECK(cudaEventCreate(&e.stop));
      }
      for (int w = 0; w < warmup; ++w) enqueue_plan(t, gemm, src, dst, s, cs, origin, ev, nullptr);
      if (offset > 0) CUDA_CHECK(cudaMemsetAsync(pool.get(), 0, offset, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
      enqueue_plan(t, gemm, src, dst, s, cs, origin, ev, &gate);
      if (gate.timed_out()) timed_out = true;

      RunRecord rec;
      rec.step = t.step;
      rec.micro_batch = t.micro_batch;
      rec.layer = t.layer;
      std::size_t e = 0;
      auto add = [&](Track track, Pass pass, const std::string& name, double bytes) {
        float a0 = 0, a1 = 0;
        CUDA_CHECK(cudaEventElapsedTime(&a0, origin, ev[e].start));
        CUDA_CHECK(cudaEventElapsedTime(&a1, origin, ev[e].stop));
        ++e;
        TimelineEvent te;
        te.gpu = gpu;
        te.track = track;
        te.pass = pass;
        te.name = name;
        te.start_ps = ms_to_ps(a0);
        te.end_ps = std::max(te.start_ps, ms_to_ps(a1));
        te.bytes = bytes;
        rec.events.push_back(te);
      };
      for (const auto& g : t.gemms) add(Track::compute, g.pass, g.name, 0);
      for (const auto& c : t.copies) add(Track::copy_engine, c.pass, c.name, static_cast<double>(c.bytes));
      for (auto& x : ev) {
        CUDA_CHECK(cudaEventDestroy(x.start));
        CUDA_CHECK(cudaEventDestroy(x.stop));
      }
      if (verify)
        for (std::size_t c = 0; c < t.copies.size(); ++c)
          verify_pattern_copy(dst[c], static_cast<std::uint64_t>(t.copies[c].bytes), kPatternSeed,
                              "plan " + std::to_string(pi) + " (step " + std::to_string(t.step) + ", micro-batch " +
                                  std::to_string(t.micro_batch) + ", layer " + std::to_string(t.layer) + "), GPU " +
                                  std::to_string(gpu) + ", copy '" + t.copies[c].name + "'",
                              s, expected);
      records.push_back(std::move(rec));
      std::printf("plan %zu (step %u, micro-batch %u, layer %u): %zu GEMMs, %zu copies%s\n", pi, t.step, t.micro_batch,
                  t.layer, t.gemms.size(), t.copies.size(), verify ? ", checksums ok" : "");
      std::fflush(stdout);
    }
    CUDA_CHECK(cudaEventDestroy(origin));
    if (timed_out)
      std::fprintf(stderr, "epsim-hw: warning: a spin kernel timed out: some task times include enqueue time\n");
  }
  CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaStreamDestroy(cs));
  if (skipped) std::fprintf(stderr, "epsim-hw: %zu plans have no task on GPU %d and are left out\n", skipped, gpu);
  if (records.empty()) throw std::runtime_error("no plan has a task on GPU " + std::to_string(gpu));
  write_run_records(out, prop.name, records, a.flags.count("force") > 0);
  std::printf("wrote %s (%zu records)\n", out.c_str(), records.size());
  return 0;
}

}  // namespace epsim::hw
