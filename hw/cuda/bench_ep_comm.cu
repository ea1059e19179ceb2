// epsim-hw bench ep_comm: the dispatch and combine of an EP layer, with the traffic of DeepEP's
// benchmarks (tokens per rank, hidden, top-k of E experts, uniform routing; hw/host/ep_comm_traffic.hpp),
// run as NCCL all-to-all-v: one group of ncclSend/ncclRecv per exchange, each pair moving its own row
// count (a rank's rows for itself included, as an all-to-all-v does). Dispatch in each --dtype (FP8 rows
// carry their scales), combine in BF16 back along the same pairs. Same timing, deadline and checksum
// rules as bench alltoall. Written as ep_comm points (implementation nccl_alltoallv, counted nvlink).
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "hw/cuda/commands.cuh"
#include "hw/cuda/common.cuh"
#include "hw/cuda/nccl_ranks.cuh"
#include "hw/cuda/rank_timer.cuh"
#include "hw/host/ep_comm_traffic.hpp"

namespace epsim::hw {

#if !defined(EPSIM_HAVE_NCCL)

void measure_ep_comm(const HwArgs&, Measurements&, std::vector<std::string>&) {
  throw std::runtime_error(kNoNcclMessage);
}

#else

namespace {

/// FP32 scale per this many channels of an FP8 row (DeepEP's FP8 dispatch, DeepSeek-V3).
constexpr int kFp8ScaleBlock = 128;

/// The bytes one pair moves, and where they sit in the sender's and the receiver's buffers.
struct PairLayout {
  std::vector<std::vector<std::size_t>> bytes, send_offset, recv_offset;  // [src][dst]
  std::vector<std::size_t> send_total, recv_total;                        // per rank
};

/// `rows[src][dst]` rows of `row_bytes` each; a rank's send buffer holds its segments in destination
/// order, its receive buffer the incoming ones in source order.
PairLayout layout_of(const PairRows& rows, std::size_t row_bytes) {
  const std::size_t n = rows.size();
  PairLayout l;
  l.bytes.assign(n, std::vector<std::size_t>(n, 0));
  l.send_offset = l.bytes;
  l.recv_offset = l.bytes;
  l.send_total.assign(n, 0);
  l.recv_total.assign(n, 0);
  for (std::size_t s = 0; s < n; ++s)
    for (std::size_t d = 0; d < n; ++d) {
      const std::size_t b = static_cast<std::size_t>(rows[s][d]) * row_bytes;
      l.bytes[s][d] = b;
      l.send_offset[s][d] = l.send_total[s];
      l.send_total[s] += b;
    }
  for (std::size_t d = 0; d < n; ++d)
    for (std::size_t s = 0; s < n; ++s) {
      l.recv_offset[s][d] = l.recv_total[d];
      l.recv_total[d] += l.bytes[s][d];
    }
  return l;
}

const char* kernel_name(EpKernel kernel) { return kernel == EpKernel::dispatch ? "dispatch" : "combine"; }

PairRows transposed(const PairRows& rows) {
  PairRows t(rows.size(), std::vector<std::int64_t>(rows.size(), 0));
  for (std::size_t s = 0; s < rows.size(); ++s)
    for (std::size_t d = 0; d < rows.size(); ++d) t[d][s] = rows[s][d];
  return t;
}

std::uint64_t ep_seed(int src, int dst, int exchange) {
  return pair_seed(src, dst) ^ (static_cast<std::uint64_t>(exchange + 1) << 40);
}

}  // namespace

void measure_ep_comm(const HwArgs& a, Measurements& m, std::vector<std::string>& comments) {
  const std::int64_t gpus_wanted = a.integer("gpus", 0, 1, 1024);
  const auto tokens_list = a.integers("tokens", {128, 256, 512, 1024, 2048, 4096}, 1, 1 << 20);
  const int hidden = static_cast<int>(a.integer("hidden", 7168, 1, 1 << 20));
  const int top_k = static_cast<int>(a.integer("top-k", 8, 1, 1024));
  const int experts_wanted = static_cast<int>(a.integer("experts", 256, 1, 1 << 20));
  const std::uint64_t seed = static_cast<std::uint64_t>(a.integer("seed", 1, 0, 1LL << 62));
  const int warmup = static_cast<int>(a.integer("warmup", 5, 0, 10000));
  const int reps = static_cast<int>(a.integer("reps", 30, 1, 10000));
  const double timeout_s = a.number("nccl-timeout-s", kDefaultNcclTimeout_s, 1e-3, 86400.0);
  const bool verify = !a.flags.count("no-verify");
  std::vector<Dtype> dispatch_dtypes;
  {
    std::stringstream ss(a.text("dtype", "fp8,bf16"));
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item != "fp8" && item != "bf16") throw std::invalid_argument("--dtype: '" + item + "' is not fp8 or bf16");
      dispatch_dtypes.push_back(parse_dtype(item));
    }
  }
  const int gpus = nccl_rank_count(gpus_wanted, "bench ep_comm");
  // As DeepEP's tests do: the experts rounded down to a multiple of the ranks.
  const int experts = experts_wanted / gpus * gpus;
  if (experts < gpus || top_k > experts)
    throw std::invalid_argument("--experts " + std::to_string(experts_wanted) + " and --top-k " + std::to_string(top_k) +
                                " do not fit " + std::to_string(gpus) + " ranks");

  // Every (tokens, exchange) to run, with its rows; buffers sized for the largest.
  struct Exchange {
    EpKernel kernel;
    Dtype dtype;
  };
  std::vector<Exchange> exchanges;
  for (Dtype d : dispatch_dtypes) exchanges.push_back({EpKernel::dispatch, d});
  exchanges.push_back({EpKernel::combine, Dtype::bf16});
  std::vector<PairRows> rows_of;
  std::size_t max_buffer = 16;
  for (auto t : tokens_list) {
    rows_of.push_back(uniform_pair_rows(gpus, t, top_k, experts, seed));
    const PairLayout l = layout_of(rows_of.back(), static_cast<std::size_t>(activation_bytes(Dtype::bf16, hidden, 0)));
    for (int g = 0; g < gpus; ++g) max_buffer = std::max({max_buffer, l.send_total[g], l.recv_total[g]});
  }

  NcclRanks ranks(gpus, timeout_s);
  std::vector<DeviceBuffer> send, recv;
  for (int g = 0; g < gpus; ++g) {
    CUDA_CHECK(cudaSetDevice(g));
    send.emplace_back(max_buffer);
    recv.emplace_back(max_buffer);
  }
  RankTimer timer(gpus, reps);
  auto exchange = [&](const PairLayout& l, const std::string& what) {
    NCCL_CHECK(ncclGroupStart());
    for (int g = 0; g < gpus; ++g)
      for (int p = 0; p < gpus; ++p) {
        if (l.bytes[g][p] > 0)
          NCCL_CHECK_ASYNC(ncclSend(static_cast<char*>(send[g].get()) + l.send_offset[g][p], l.bytes[g][p], ncclChar, p,
                                    ranks.comm(g), ranks.stream(g)));
        if (l.bytes[p][g] > 0)
          NCCL_CHECK_ASYNC(ncclRecv(static_cast<char*>(recv[g].get()) + l.recv_offset[p][g], l.bytes[p][g], ncclChar, p,
                                    ranks.comm(g), ranks.stream(g)));
      }
    NCCL_CHECK_ASYNC(ncclGroupEnd());
    ranks.await_nccl(what + ": enqueue");
  };

  comments.insert(comments.end(),
                  {"ep_comm: NCCL " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
                       std::to_string(NCCL_PATCH) + " all-to-all-v (ncclGroupStart + ncclSend/ncclRecv of each pair's "
                       "rows, own rank included), one process, " + std::to_string(gpus) + " GPUs",
                   "ep_comm: uniform routing, top-" + std::to_string(top_k) + " of " + std::to_string(experts) +
                       " experts placed contiguously, seed " + std::to_string(seed) +
                       "; a token goes once to each rank holding any of its experts; FP8 rows carry one FP32 scale "
                       "per 128 channels; combine = BF16 rows back along the same pairs",
                   "ep_comm: each repetition is the slowest rank's time between events around the group; median over " +
                       std::to_string(reps) + " back-to-back repetitions after " + std::to_string(warmup) +
                       " warm-ups"});
  if (verify) comments.push_back("ep_comm: received segments checked against each sender's pattern (sampled checksum)");
  ExpectedChecksums expected;
  for (std::size_t ti = 0; ti < tokens_list.size(); ++ti) {
    const std::int64_t tokens = tokens_list[ti];
    const PairRows& rows = rows_of[ti];
    {
      const auto received = received_rows(rows);
      const auto [lo, hi] = std::minmax_element(received.begin(), received.end());
      comments.push_back("ep_comm tokens " + std::to_string(tokens) + ": rows received per rank " + std::to_string(*lo) +
                         " to " + std::to_string(*hi));
    }
    for (std::size_t xi = 0; xi < exchanges.size(); ++xi) {
      const Exchange& x = exchanges[xi];
      const std::size_t row_bytes = static_cast<std::size_t>(activation_bytes(x.dtype, hidden, kFp8ScaleBlock));
      const PairLayout l = layout_of(x.kernel == EpKernel::dispatch ? rows : transposed(rows), row_bytes);
      const std::string what = std::string("NCCL ep_comm ") + kernel_name(x.kernel) + " " + to_string(x.dtype) + " (" +
                               std::to_string(tokens) + " tokens per rank, " + std::to_string(gpus) + " ranks)";
      for (int g = 0; g < gpus; ++g) {
        CUDA_CHECK(cudaSetDevice(g));
        for (int p = 0; p < gpus; ++p)
          fill_pattern(static_cast<char*>(send[g].get()) + l.send_offset[g][p], l.bytes[g][p] / 4,
                       ep_seed(g, p, static_cast<int>(xi)), ranks.stream(g));
        if (verify && l.recv_total[g] > 0)
          CUDA_CHECK(cudaMemsetAsync(recv[g].get(), 0, l.recv_total[g], ranks.stream(g)));
      }
      const std::vector<double> times =
          timer.time_us(ranks, warmup, [&](const std::string& label) { exchange(l, label); }, what);
      if (verify)
        for (int g = 0; g < gpus; ++g) {
          CUDA_CHECK(cudaSetDevice(g));
          for (int p = 0; p < gpus; ++p)
            if (l.bytes[p][g] > 0)
              verify_pattern_copy(static_cast<const char*>(recv[g].get()) + l.recv_offset[p][g], l.bytes[p][g],
                                  ep_seed(p, g, static_cast<int>(xi)),
                                  what + ": rank " + std::to_string(p) + " -> rank " + std::to_string(g),
                                  ranks.stream(g), expected);
        }
      EpCommPoint pt;
      pt.kernel = x.kernel;
      pt.implementation = "nccl_alltoallv";
      pt.ep = gpus;
      pt.gpus_per_node = gpus;
      pt.tokens = tokens;
      pt.hidden = hidden;
      pt.top_k = top_k;
      pt.experts = experts;
      pt.dtype = x.dtype;
      pt.routing = BenchRouting::uniform;
      pt.median_us = median(times);
      pt.counted = CountedBandwidth::nvlink;
      m.ep_comm.push_back(pt);
      // DeepEP's "nvlink" rate: rows a rank receives (its own included) x row bytes / time, mean over ranks.
      double mean_recv = 0;
      for (int g = 0; g < gpus; ++g) mean_recv += static_cast<double>(l.recv_total[g]) / gpus;
      std::printf("ep_comm %s %s ranks %d tokens %lld: %.2f us (%.1f GB/s received per rank)%s\n", kernel_name(x.kernel),
                  to_string(x.dtype), gpus, static_cast<long long>(tokens), pt.median_us, mean_recv / (pt.median_us * 1e3),
                  verify ? ", checksums ok" : "");
      std::fflush(stdout);
    }
  }
  ranks.finalize();
  for (int g = gpus - 1; g >= 0; --g) {  // buffers are freed on their own device
    CUDA_CHECK(cudaSetDevice(g));
    send.pop_back();
    recv.pop_back();
  }
}

#endif

}  // namespace epsim::hw
