// Measurements of the parts epsim models (kind: measurements), the input of `epsim calibrate` and
// `epsim fidelity`: what `epsim-hw` measures on a user's GPUs and figures published by others, in one
// format. The file format is documented in docs/calibration.md. Every time is a median in microseconds;
// a published rate (TFLOP/s, GB/s) is kept as published and turned into a time by the rule its series
// documents. Every point remembers its source (a URL, owner/repo:path@commit, or the tool that measured
// it) and where it sits in its file ("file:line:col") for messages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/hardware/dtype.hpp"

namespace epsim {

/// Who measured what on which GPU. Copied into the calibrated hardware file. For a published set the
/// software fields may be unknown: empty text, 0 clocks.
struct MeasurementHeader {
  std::string gpu;
  std::string hardware;  ///< the preset (models/hardware/NAME.yaml) these figures belong to; "" none
  std::string source;    ///< default source of every point that names none
  std::string driver;
  std::string cuda;
  double sm_clock_MHz = 0;
  double mem_clock_MHz = 0;
  std::string date;
  std::string tool;
};

/// One grouped GEMM: `experts` experts with `tokens_per_expert` rows each (before padding), expert
/// weights of `matrices` hidden_size x ffn_size matrices of `dtype_bytes` each.
struct GemmShape {
  int experts = 0;
  std::int64_t tokens_per_expert = 0;
  int hidden_size = 0;
  int ffn_size = 0;
  int matrices = 0;
  int dtype_bytes = 0;
  Dtype dtype = Dtype::bf16;  ///< GEMM input format; dtype_bytes == element_bytes(dtype)
};

struct GemmPoint {
  GemmShape shape;
  double median_us = 0;
  std::int64_t repetitions = 0;  ///< 0: not stated (published)
  std::string source;
  std::string where;
};

/// How a GEMM library lays out a grouped GEMM's rows: one plain GEMM, groups concatenated with each
/// group's rows padded to the M block (training, prefill), or a fixed M per group with a mask (decode).
enum class GemmLayout { dense, contiguous, masked };
const char* to_string(GemmLayout layout);

/// One GEMM call as libraries report it (DeepGEMM, cuBLAS): `groups` products D[m, n] = A[m, k] x B[k, n],
/// each group with its own B. Published as TFLOP/s = 2 * groups * m * n * k / time.
struct GemmCallPoint {
  int groups = 1;
  std::int64_t m = 0;  ///< rows per group
  std::int64_t n = 0;
  std::int64_t k = 0;
  Dtype dtype = Dtype::bf16;       ///< A and B; D is BF16
  GemmLayout layout = GemmLayout::dense;
  double median_us = 0;            ///< given, or derived from published_TFLOPs
  double published_TFLOPs = 0;     ///< as published; 0 when the source gave a time
  std::int64_t repetitions = 0;
  std::string source;
  std::string where;
};

/// ce_local: Copy Engine D2D on one GPU; ce_peer: Copy Engine to a peer GPU over NVLink; h2d / d2h:
/// Copy Engine over PCIe; sm_copy: a copy kernel on the SMs.
enum class CopyKind { ce_local, ce_peer, h2d, d2h, sm_copy };
const char* to_string(CopyKind kind);
const std::vector<std::string>& copy_kind_names();

struct CopyPoint {
  CopyKind kind = CopyKind::ce_peer;
  double bytes = 0;
  double median_us = 0;          ///< given, or bytes / published_GBps
  double published_GBps = 0;     ///< as published; 0 when the source gave a time
  std::int64_t repetitions = 0;
  std::string source;
  std::string where;
};

/// The same GEMM measured alone and while a Copy Engine copy streams `copy_GBps` concurrently.
struct GemmWithCopyPoint {
  GemmShape shape;
  double gemm_us = 0;
  double gemm_with_copy_us = 0;
  double copy_GBps = 0;
  /// The interfering copy: ce_local (epsim-hw bench contention's: it reads and writes the GEMM's own
  /// HBM, two HBM bytes per byte copied) or ce_peer (one: it reads one GPU's HBM and writes another's).
  CopyKind copy = CopyKind::ce_local;
  /// Whether the copy ran on the SMs (the driver made it a kernel) rather than on a Copy Engine, as
  /// epsim-hw's SM probe found (hw/host/copy_sm_probe.hpp); absent when not probed. Such a row's
  /// slowdown is the GEMM sharing its SMs with a copy kernel, not HBM traffic, and calibration leaves
  /// it out of the HBM-sharing fit.
  std::optional<bool> copy_on_sms;
  std::int64_t repetitions = 0;
  std::string where;
};

/// All-to-all among `ranks` GPUs, every rank sending `bytes_per_pair` to every other rank.
struct AllToAllPoint {
  int ranks = 0;
  double bytes_per_pair = 0;
  double median_us = 0;
  std::int64_t repetitions = 0;
  std::string source;
  std::string where;
};

enum class EpKernel { dispatch, combine };
const char* to_string(EpKernel kernel);

/// How the benchmark routed its tokens: `uniform` draws each token's top-k experts uniformly at random
/// (DeepEP's and Hybrid-EP's tests); `group_limited` first picks `max_nodes` nodes, then the top-k
/// inside them (DeepEP's internode test, DeepSeek-V3); `balanced` gives every rank exactly the same
/// load ("perfect router", TensorRT-LLM).
enum class BenchRouting { uniform, group_limited, balanced };
const char* to_string(BenchRouting routing);

/// Which logical bandwidth a source prints, following DeepEP's tests (docs/calibration.md):
///   nvlink: rows this rank receives (its own included) * token bytes / time
///   rdma:   tokens this rank sends to other nodes, counted once per destination node, * token bytes / time
///   algorithm: tokens per rank * min(ep, top_k) * token bytes / time (TensorRT-LLM, Hybrid-EP)
enum class CountedBandwidth { nvlink, rdma, algorithm };
const char* to_string(CountedBandwidth counted);

/// One dispatch or combine of an EP backend (DeepEP and its kin) as a benchmark ran it. Token bytes are
/// activation_bytes(dtype, hidden, 128): FP8 carries its scales.
struct EpCommPoint {
  EpKernel kernel = EpKernel::dispatch;
  std::string implementation;  ///< deepep_v1, deepep_v2, hybrid_ep, pplx, trtllm_one_sided, uccl_ep, ...
  int ep = 0;                  ///< ranks
  int gpus_per_node = 0;       ///< ranks per NVLink domain in that run
  std::int64_t tokens = 0;     ///< per rank
  int hidden = 0;
  int top_k = 0;
  int experts = 0;
  Dtype dtype = Dtype::bf16;
  int sms = 0;                 ///< SMs given to the kernel; 0: not stated
  BenchRouting routing = BenchRouting::uniform;
  int max_nodes = 0;           ///< group_limited: nodes a token may reach
  bool kernel_only = true;     ///< kernel time (profiler); false: through the framework's API call
  /// As published; 0 when only a rate is. The bytes behind a rate depend on the routing, so the time is
  /// worked out where the routing is drawn (ep_bench_traffic.hpp), never in the reader.
  double median_us = 0;
  double published_GBps = 0;   ///< as published; 0 when the source gave a time
  CountedBandwidth counted = CountedBandwidth::nvlink;
  std::string source;
  std::string where;
};

struct Measurements {
  std::string file;
  MeasurementHeader header;
  std::vector<GemmPoint> grouped_gemm;
  std::vector<CopyPoint> copy;
  std::vector<GemmWithCopyPoint> gemm_with_copy;
  std::vector<AllToAllPoint> all_to_all;
  std::vector<GemmCallPoint> gemm;
  std::vector<EpCommPoint> ep_comm;
};

/// Strict reader: throws InputError "file:line:col: message" on unknown keys, wrong types, times that
/// are not > 0, an empty series or a file with no series at all.
Measurements load_measurements(const std::string& path);

}  // namespace epsim
