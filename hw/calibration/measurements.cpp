// Reads a kind: measurements file through ConfigMap, so it speaks like every other epsim YAML reader.
#include "hw/calibration/measurements.hpp"

#include <limits>

#include "sim/config/config_file.hpp"
#include "sim/config/config_map.hpp"
#include "sim/core/input_error.hpp"

namespace epsim {
namespace {

constexpr double kPositive = 1e-300;  // ConfigMap reads a tiny min as "> 0"
constexpr double kHuge = std::numeric_limits<double>::max();
constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

MeasurementHeader read_header(ConfigMap m) {
  MeasurementHeader h;
  h.gpu = m.get_string("gpu");
  h.driver = m.get_string("driver");
  h.cuda = m.get_string("cuda");
  h.sm_clock_MHz = m.get_double("sm_clock_MHz", kPositive, kHuge);
  h.mem_clock_MHz = m.get_double("mem_clock_MHz", kPositive, kHuge);
  h.date = m.get_string("date");
  h.tool = m.get_string("tool");
  m.finish();
  return h;
}

GemmShape read_shape(ConfigMap& m) {
  GemmShape s;
  s.experts = static_cast<int>(m.get_int("experts", 1, kMaxInt));
  s.tokens_per_expert = m.get_int("tokens_per_expert", 1, kMaxInt);
  s.hidden_size = static_cast<int>(m.get_int("hidden_size", 1, kMaxInt));
  s.ffn_size = static_cast<int>(m.get_int("ffn_size", 1, kMaxInt));
  s.matrices = static_cast<int>(m.get_int("matrices", 1, 16));
  s.dtype_bytes = static_cast<int>(m.get_int("dtype_bytes", 1, 8));
  return s;
}

/// Calls `read(point_map)` for every mapping in the sequence under `key`; the series, when present,
/// must be a non-empty sequence.
template <typename F>
bool read_series(ConfigMap& top, const std::string& key, F&& read) {
  if (!top.has(key)) return false;
  const YAML::Node seq = top.get_raw(key);
  if (!seq.IsSequence()) top.fail(key, key + ": expected a sequence of points (- {...} lines)");
  if (seq.size() == 0) top.fail(key, key + ": empty series (give at least one point, or leave the key out)");
  for (std::size_t i = 0; i < seq.size(); ++i) {
    ConfigMap point(seq[i], top.file(), key + "[" + std::to_string(i) + "]");
    if (!seq[i].IsMap()) point.fail("", key + "[" + std::to_string(i) + "]: expected a mapping of the point's keys");
    read(point, point.where());
    point.finish();
  }
  return true;
}

}  // namespace

const char* to_string(CopyKind kind) {
  switch (kind) {
    case CopyKind::ce_local: return "ce_local";
    case CopyKind::ce_peer: return "ce_peer";
    case CopyKind::h2d: return "h2d";
    case CopyKind::d2h: return "d2h";
    case CopyKind::sm_copy: return "sm_copy";
  }
  return "?";
}

const std::vector<std::string>& copy_kind_names() {
  static const std::vector<std::string> names{"ce_local", "ce_peer", "h2d", "d2h", "sm_copy"};
  return names;
}

Measurements load_measurements(const std::string& path) {
  ConfigMap top = open_config(path, "measurements");
  Measurements m;
  m.file = path;
  m.header = read_header(top.get_map("header"));
  bool any = false;
  any |= read_series(top, "grouped_gemm", [&](ConfigMap& p, const std::string& where) {
    GemmPoint g;
    g.shape = read_shape(p);
    g.median_us = p.get_double("median_us", kPositive, kHuge);
    g.repetitions = p.get_int("repetitions", 1, kMaxInt);
    g.where = where;
    m.grouped_gemm.push_back(g);
  });
  any |= read_series(top, "copy", [&](ConfigMap& p, const std::string& where) {
    CopyPoint c;
    const std::string kind = p.get_choice("kind", copy_kind_names());
    for (CopyKind k : {CopyKind::ce_local, CopyKind::ce_peer, CopyKind::h2d, CopyKind::d2h, CopyKind::sm_copy})
      if (kind == to_string(k)) c.kind = k;
    c.bytes = p.get_double("bytes", kPositive, kHuge);
    c.median_us = p.get_double("median_us", kPositive, kHuge);
    c.repetitions = p.get_int("repetitions", 1, kMaxInt);
    c.where = where;
    m.copy.push_back(c);
  });
  any |= read_series(top, "gemm_with_copy", [&](ConfigMap& p, const std::string& where) {
    GemmWithCopyPoint g;
    g.shape = read_shape(p);
    g.gemm_us = p.get_double("gemm_us", kPositive, kHuge);
    g.gemm_with_copy_us = p.get_double("gemm_with_copy_us", kPositive, kHuge);
    g.copy_GBps = p.get_double("copy_GBps", kPositive, kHuge);
    g.repetitions = p.get_int("repetitions", 1, kMaxInt);
    g.where = where;
    m.gemm_with_copy.push_back(g);
  });
  any |= read_series(top, "all_to_all", [&](ConfigMap& p, const std::string& where) {
    AllToAllPoint a;
    a.ranks = static_cast<int>(p.get_int("ranks", 2, kMaxInt));
    a.bytes_per_pair = p.get_double("bytes_per_pair", kPositive, kHuge);
    a.median_us = p.get_double("median_us", kPositive, kHuge);
    a.repetitions = p.get_int("repetitions", 1, kMaxInt);
    a.where = where;
    m.all_to_all.push_back(a);
  });
  top.finish();
  if (!any)
    top.fail("", "no measurement series: expected at least one of grouped_gemm, copy, gemm_with_copy, all_to_all");
  return m;
}

}  // namespace epsim
