// epsim-hw bench copy: Copy Engine copies (local D2D, to peers, H2D and D2H from pinned memory) and an
// SM copy kernel, time vs size; plus head-of-line blocking of a small copy behind a large one, and
// whether each kind of copy needs the SMs (copy_sm_probe.cuh). The
// source holds a known pattern; unless --no-verify, each point's destination is cleared before its last
// trial and checked against the pattern afterwards (sampled checksum), so the timed copies are shown
// to have moved the data.
#include <algorithm>
#include <cstring>
#include <cstdio>
#include <functional>
#include <sstream>

#include "hw/cuda/commands.cuh"
#include "hw/cuda/common.cuh"
#include "hw/cuda/copy_sm_probe.cuh"
#include "hw/host/measurement_writer.hpp"

namespace epsim::hw {

namespace {

const char* kDefaultSizes = "4K,16K,64K,256K,1M,4M,16M,64M,256M,1G";

constexpr std::uint64_t kCopySeed = 0xC0B1E5ull;

class HostBuffer {
 public:
  explicit HostBuffer(std::size_t bytes) { CUDA_CHECK(cudaMallocHost(&p_, bytes)); }
  ~HostBuffer() { CUDA_CHECK_CLEANUP(cudaFreeHost(p_)); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

/// Per-copy times (us) of `reps` copies enqueued back to back behind the gate, each between its own
/// event pair, over `trials` gated batches: the median over all of them. `clear` (when set) runs before
/// the last batch, outside the timed region, so that a check afterwards sees only the timed copies' data.
double time_copies(const std::function<void(cudaStream_t)>& copy, int reps, int trials, cudaStream_t s,
                   SpinGate& gate, bool& timed_out, const std::function<void(cudaStream_t)>& clear) {
  copy(s);  // warm-up
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> times;
  for (int t = 0; t < trials; ++t) {
    std::vector<EventPair> ev(static_cast<std::size_t>(reps));
    if (clear && t + 1 == trials) {
      clear(s);
      CUDA_CHECK(cudaStreamSynchronize(s));
    }
    gate.hold(s);
    for (int i = 0; i < reps; ++i) {
      ev[i].start(s);
      copy(s);
      ev[i].stop(s);
    }
    gate.release();
    CUDA_CHECK(cudaStreamSynchronize(s));
    if (gate.timed_out()) timed_out = true;
    for (auto& e : ev) times.push_back(e.elapsed_ms() * 1000.0);
  }
  return median(times);
}

bool wanted(const std::string& kinds, const std::string& kind) {
  std::stringstream ss(kinds);
  std::string item;
  while (std::getline(ss, item, ','))
    if (item == kind) return true;
  return false;
}

}  // namespace

void measure_copy(const HwArgs& a, Measurements& m, std::vector<std::string>& comments) {
  const int device = static_cast<int>(a.integer("device", 0, 0, 1023));
  const auto sizes = parse_sizes(a.text("sizes", kDefaultSizes));
  const int reps = static_cast<int>(a.integer("reps", 20, 1, 1000));
  const int trials = static_cast<int>(a.integer("trials", 5, 1, 1000));
  const auto sm_blocks = a.integers("sm-blocks", {1, 2, 4}, 1, 64);
  const std::string kinds = a.text("kinds", "ce_local,ce_peer,h2d,d2h,sm_copy");
  const bool verify = !a.flags.count("no-verify");
  const bool sm_probe = !a.flags.count("no-sm-probe");
  {
    std::stringstream ss(kinds);
    std::string item;
    while (std::getline(ss, item, ','))
      if (item != "ce_local" && item != "ce_peer" && item != "h2d" && item != "d2h" && item != "sm_copy")
        throw std::invalid_argument("--kinds: unknown kind '" + item + "' (ce_local, ce_peer, h2d, d2h, sm_copy)");
  }
  const std::size_t max_bytes = static_cast<std::size_t>(*std::max_element(sizes.begin(), sizes.end()));

  CUDA_CHECK(cudaSetDevice(device));
  const std::size_t first_point = m.copy.size();
  comments.insert(comments.end(), {
      "copy: per-copy time between its own CUDA event pair, copies enqueued back to back behind a",
      "spin kernel (enqueue cost excluded), median over " + std::to_string(trials) + " trials x " +
          std::to_string(reps) + " copies; CE copies are cudaMemcpyAsync / cudaMemcpyPeerAsync,",
      "host buffers pinned (cudaMallocHost); sm_copy = 16 B/thread vectorised kernel, 512 threads/block"});
  if (verify)
    comments.push_back("each point's destination cleared before its last trial and checked against the source's pattern");
  ExpectedChecksums expected;
  cudaStream_t s, s2;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  SpinGate gate;
  bool timed_out = false;
  {
    DeviceBuffer src(max_bytes), dst(max_bytes);
    fill_pattern(src.get(), max_bytes / 4, kCopySeed, s);
    CUDA_CHECK(cudaMemsetAsync(dst.get(), 0, max_bytes, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    // Clears the first `b` bytes of the device destination before a point's last trial.
    auto clear_dst = [&](std::int64_t b) -> std::function<void(cudaStream_t)> {
      if (!verify) return {};
      return [&dst, b](cudaStream_t st) { CUDA_CHECK(cudaMemsetAsync(dst.get(), 0, static_cast<std::size_t>(b), st)); };
    };
    auto check_dst = [&](const char* kind, std::int64_t b) {
      if (verify)
        verify_pattern_copy(dst.get(), static_cast<std::uint64_t>(b), kCopySeed,
                            std::string("copy ") + kind + " of " + std::to_string(b) + " B", s, expected);
    };
    // The SM probe of one kind: a copy of up to 64 MiB, so that the holder (2 ms or more) dwarfs it.
    const std::size_t probe_bytes = std::min<std::size_t>(max_bytes, 64u << 20);
    auto probe = [&](const char* kind, const std::function<void(cudaStream_t)>& copy) {
      if (!sm_probe || max_bytes < (4u << 20)) return;
      const std::string line = copy_sm_probe_comment(kind, static_cast<double>(probe_bytes),
                                                     probe_copy_sms(device, copy, trials), trials);
      comments.push_back(line);
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    };
    auto add = [&](CopyKind kind, std::int64_t bytes, double us, const std::string& note) {
      CopyPoint p;
      p.kind = kind;
      p.bytes = static_cast<double>(bytes);
      p.median_us = us;
      p.repetitions = static_cast<std::int64_t>(reps) * trials;
      m.copy.push_back(p);
      std::printf("copy %-8s %12lld B: %10.2f us  %8.1f GB/s %s\n", to_string(kind), static_cast<long long>(bytes), us,
                  bytes / (us * 1e3), note.c_str());
      std::fflush(stdout);
    };
    if (wanted(kinds, "ce_local"))
      for (auto b : sizes) {
        add(CopyKind::ce_local, b,
            time_copies([&](cudaStream_t st) {
              CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), static_cast<std::size_t>(b), cudaMemcpyDeviceToDevice, st));
            }, reps, trials, s, gate, timed_out, clear_dst(b)), "");
        check_dst("ce_local", b);
      }
    if (wanted(kinds, "ce_local")) {
      probe("ce_local", [&](cudaStream_t st) {
        CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), probe_bytes, cudaMemcpyDeviceToDevice, st));
      });
      // The same copies asked of a Copy Engine (cudaMemcpyBatchAsync with the overlap hint): comments
      // only, since the copy series has one ce_local row per size.
      const char* batch = "ce_local by cudaMemcpyBatchAsync (prefer overlap with compute)";
      for (auto b : sizes) {
        const double us = time_copies([&](cudaStream_t st) {
          copy_prefer_engine(dst.get(), src.get(), static_cast<std::size_t>(b), st);
        }, reps, trials, s, gate, timed_out, clear_dst(b));
        check_dst("ce_local by cudaMemcpyBatchAsync", b);
        comments.push_back(std::string(batch) + ", " + std::to_string(b) + " B: " + format_number(us) + " us");
        std::printf("copy ce_batch %12lld B: %10.2f us  %8.1f GB/s (comment only)\n", static_cast<long long>(b), us,
                    b / (us * 1e3));
      }
      probe(batch, [&](cudaStream_t st) { copy_prefer_engine(dst.get(), src.get(), probe_bytes, st); });
    }
    if (wanted(kinds, "sm_copy")) {
      const int sms = sm_count(device);
      // The file has one sm_copy series; the largest grid is written there, the others as comments.
      const std::int64_t best_k = *std::max_element(sm_blocks.begin(), sm_blocks.end());
      for (auto k : sm_blocks)
        for (auto b : sizes) {
          const int blocks = static_cast<int>(k) * sms;
          const double us = time_copies([&](cudaStream_t st) { sm_copy(dst.get(), src.get(), static_cast<std::size_t>(b), blocks, st); },
                                        reps, trials, s, gate, timed_out, clear_dst(b));
          check_dst("sm_copy", b);
          if (k == best_k) {
            add(CopyKind::sm_copy, b, us, "(grid " + std::to_string(blocks) + ")");
          } else {
            comments.push_back("sm_copy grid " + std::to_string(blocks) + " blocks, " + std::to_string(b) +
                               " B: " + format_number(us) + " us");
            std::printf("copy sm_copy  %12lld B: %10.2f us (grid %d, comment only)\n", static_cast<long long>(b), us, blocks);
          }
        }
      // A kernel must wait for the holder: the probe's own check that it holds every SM.
      probe("sm_copy", [&](cudaStream_t st) {
        sm_copy(dst.get(), src.get(), probe_bytes, static_cast<int>(best_k) * sms, st);
      });
    }
    if (wanted(kinds, "h2d") || wanted(kinds, "d2h")) {
      HostBuffer host(max_bytes);
      // The host buffer gets the source's pattern (the H2D copies' source).
      CUDA_CHECK(cudaMemcpyAsync(host.get(), src.get(), max_bytes, cudaMemcpyDeviceToHost, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
      if (wanted(kinds, "h2d"))
        for (auto b : sizes) {
          add(CopyKind::h2d, b,
              time_copies([&](cudaStream_t st) {
                CUDA_CHECK(cudaMemcpyAsync(dst.get(), host.get(), static_cast<std::size_t>(b), cudaMemcpyHostToDevice, st));
              }, reps, trials, s, gate, timed_out, clear_dst(b)), "");
          check_dst("h2d", b);
        }
      if (wanted(kinds, "h2d"))
        probe("h2d", [&](cudaStream_t st) {
          CUDA_CHECK(cudaMemcpyAsync(dst.get(), host.get(), probe_bytes, cudaMemcpyHostToDevice, st));
        });
      if (wanted(kinds, "d2h"))
        for (auto b : sizes) {
          std::function<void(cudaStream_t)> clear_host;
          if (verify)  // the stream is idle when clear runs, so the host may write the buffer
            clear_host = [&host, b](cudaStream_t) { std::memset(host.get(), 0, static_cast<std::size_t>(b)); };
          add(CopyKind::d2h, b,
              time_copies([&](cudaStream_t st) {
                CUDA_CHECK(cudaMemcpyAsync(host.get(), src.get(), static_cast<std::size_t>(b), cudaMemcpyDeviceToHost, st));
              }, reps, trials, s, gate, timed_out, clear_host), "");
          if (verify)
            verify_pattern_copy_host(host.get(), static_cast<std::uint64_t>(b), kCopySeed,
                                     "copy d2h of " + std::to_string(b) + " B", expected);
        }
      if (wanted(kinds, "d2h"))
        probe("d2h", [&](cudaStream_t st) {
          CUDA_CHECK(cudaMemcpyAsync(host.get(), src.get(), probe_bytes, cudaMemcpyDeviceToHost, st));
        });
    }
    if (wanted(kinds, "ce_peer")) {
      int count = 0;
      CUDA_CHECK(cudaGetDeviceCount(&count));
      int peer = -1;
      for (int d = 0; d < count && peer < 0; ++d) {
        if (d == device) continue;
        int ok = 0;
        CUDA_CHECK(cudaDeviceCanAccessPeer(&ok, device, d));
        if (ok) peer = d;
      }
      if (peer < 0) {
        comments.push_back("ce_peer not measured: no peer GPU with cudaDeviceCanAccessPeer");
        std::printf("ce_peer skipped: no peer-accessible GPU\n");
      } else {
        const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled)
          (void)cudaGetLastError();  // benign; clear it so that the next launch check does not report it
        else
          CUDA_CHECK(e);
        CUDA_CHECK(cudaSetDevice(peer));
        DeviceBuffer remote(max_bytes);
        CUDA_CHECK(cudaSetDevice(device));
        comments.push_back("ce_peer: device " + std::to_string(device) + " -> device " + std::to_string(peer));
        for (auto b : sizes) {
          std::function<void(cudaStream_t)> clear_remote;
          if (verify)
            clear_remote = [&remote, b, peer, device](cudaStream_t) {  // cleared on its own device
              CUDA_CHECK(cudaSetDevice(peer));
              CUDA_CHECK(cudaMemset(remote.get(), 0, static_cast<std::size_t>(b)));
              CUDA_CHECK(cudaDeviceSynchronize());
              CUDA_CHECK(cudaSetDevice(device));
            };
          add(CopyKind::ce_peer, b,
              time_copies([&](cudaStream_t st) {
                CUDA_CHECK(cudaMemcpyPeerAsync(remote.get(), peer, src.get(), device, static_cast<std::size_t>(b), st));
              }, reps, trials, s, gate, timed_out, clear_remote), "");
          // The checksum kernel runs on `device` and reads the peer's memory through peer access.
          if (verify)
            verify_pattern_copy(remote.get(), static_cast<std::uint64_t>(b), kCopySeed,
                                "copy ce_peer of " + std::to_string(b) + " B to device " + std::to_string(peer), s,
                                expected);
        }
        probe("ce_peer", [&](cudaStream_t st) {
          CUDA_CHECK(cudaMemcpyPeerAsync(remote.get(), peer, src.get(), device, probe_bytes, st));
        });
      }
    }

    // Head-of-line blocking: a small D2D copy on stream B enqueued right after a large one on stream A
    // (same direction, same engine), both released together by the gate; compare with the small copy alone.
    if (max_bytes >= (64u << 20)) {
      const std::size_t big = max_bytes, small = 64u << 10;
      DeviceBuffer small_dst(small);
      std::vector<double> alone, behind, big_t;
      cudaEvent_t origin, big_end, small_end, s_start;
      CUDA_CHECK(cudaEventCreate(&origin));
      CUDA_CHECK(cudaEventCreate(&big_end));
      CUDA_CHECK(cudaEventCreate(&small_end));
      CUDA_CHECK(cudaEventCreate(&s_start));
      for (int t = 0; t < trials * 4; ++t) {
        gate.hold(s);
        CUDA_CHECK(cudaEventRecord(origin, s));
        CUDA_CHECK(cudaStreamWaitEvent(s2, origin, 0));
        CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), big, cudaMemcpyDeviceToDevice, s));
        CUDA_CHECK(cudaEventRecord(big_end, s));
        CUDA_CHECK(cudaMemcpyAsync(small_dst.get(), src.get(), small, cudaMemcpyDeviceToDevice, s2));
        CUDA_CHECK(cudaEventRecord(small_end, s2));
        gate.release();
        CUDA_CHECK(cudaDeviceSynchronize());
        float ms_small = 0, ms_big = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms_small, origin, small_end));
        CUDA_CHECK(cudaEventElapsedTime(&ms_big, origin, big_end));
        behind.push_back(ms_small * 1000.0);
        big_t.push_back(ms_big * 1000.0);
        gate.hold(s2);
        CUDA_CHECK(cudaEventRecord(s_start, s2));
        CUDA_CHECK(cudaMemcpyAsync(small_dst.get(), src.get(), small, cudaMemcpyDeviceToDevice, s2));
        CUDA_CHECK(cudaEventRecord(small_end, s2));
        gate.release();
        CUDA_CHECK(cudaStreamSynchronize(s2));
        CUDA_CHECK(cudaEventElapsedTime(&ms_small, s_start, small_end));
        alone.push_back(ms_small * 1000.0);
      }
      CUDA_CHECK(cudaEventDestroy(origin));
      CUDA_CHECK(cudaEventDestroy(big_end));
      CUDA_CHECK(cudaEventDestroy(small_end));
      CUDA_CHECK(cudaEventDestroy(s_start));
      std::ostringstream o;
      o << "head-of-line (ce_local): " << small << " B copy on a second stream, enqueued after a " << big
        << " B copy: completes " << format_number(median(behind)) << " us after release (large copy ends at "
        << format_number(median(big_t)) << " us); alone " << format_number(median(alone)) << " us; medians of "
        << behind.size();
      comments.push_back(o.str());
      std::printf("%s\n", o.str().c_str());
    }
  }
  if (timed_out) comments.push_back("WARNING: a spin kernel timed out: some timings include enqueue time (lower --reps)");
  CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaStreamDestroy(s2));
  if (m.copy.size() == first_point) throw std::runtime_error("no copy measured (check --kinds)");
}

}  // namespace epsim::hw
