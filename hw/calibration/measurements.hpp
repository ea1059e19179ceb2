// Microbenchmark measurements taken on one GPU (kind: measurements), the input of `epsim calibrate`.
// The file format is documented in docs/calibration.md. Every time is a median in microseconds over
// `repetitions` runs; every point remembers where it sits in its file ("file:line:col") for messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace epsim {

/// Who measured what on which GPU. Informational: it is copied into the calibrated hardware file.
struct MeasurementHeader {
  std::string gpu;
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
};

struct GemmPoint {
  GemmShape shape;
  double median_us = 0;
  std::int64_t repetitions = 0;
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
  double median_us = 0;
  std::int64_t repetitions = 0;
  std::string where;
};

/// The same GEMM measured alone and while a Copy Engine copy streams `copy_GBps` concurrently.
struct GemmWithCopyPoint {
  GemmShape shape;
  double gemm_us = 0;
  double gemm_with_copy_us = 0;
  double copy_GBps = 0;
  std::int64_t repetitions = 0;
  std::string where;
};

/// All-to-all among `ranks` GPUs, every rank sending `bytes_per_pair` to every other rank.
struct AllToAllPoint {
  int ranks = 0;
  double bytes_per_pair = 0;
  double median_us = 0;
  std::int64_t repetitions = 0;
  std::string where;
};

struct Measurements {
  std::string file;
  MeasurementHeader header;
  std::vector<GemmPoint> grouped_gemm;
  std::vector<CopyPoint> copy;
  std::vector<GemmWithCopyPoint> gemm_with_copy;
  std::vector<AllToAllPoint> all_to_all;
};

/// Strict reader: throws InputError "file:line:col: message" on unknown keys, wrong types, times that
/// are not > 0, an empty series or a file with no series at all.
Measurements load_measurements(const std::string& path);

}  // namespace epsim
