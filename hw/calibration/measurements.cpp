// Reads a kind: measurements file through ConfigMap, so it speaks like every other epsim YAML reader.
// The format (every series, key and rule) is documented in docs/measurements.md.
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

// A published rate becomes a time: 1 GB/s moves 1e3 bytes per microsecond, 1 TFLOP/s does 1e6 FLOP in one.
constexpr double kBytesPerUsPerGBps = 1e3;
constexpr double kFlopPerUsPerTFLOPs = 1e6;

/// Which of two alternative keys a mapping gives; exactly one must be there. With neither, a misspelling
/// of either is named (ConfigMap's typo check), else both are named as missing.
bool first_of_two(ConfigMap& p, const std::string& a, const std::string& b, const std::string& name,
                  const std::string& what) {
  const bool has_a = p.has(a), has_b = p.has(b);
  if (has_a && has_b) p.fail(b, name + ": give either " + a + " or " + b + ", not both (" + what + ")");
  if (has_a || has_b) return has_a;
  for (const std::string& key : {a, b}) {
    try {
      p.get_string(key);  // absent: throws, naming a misspelt key when there is one
    } catch (const InputError& e) {
      const std::string prefix = e.file() + ":" + e.place() + ": ";
      if (std::string(e.what()).compare(prefix.size(), 13, "missing key '") != 0) throw;  // a typo named
    }
  }
  p.fail("", "missing key '" + a + "' or '" + b + "' in " + name + " (" + what + ")");
}

/// "driver", "cuda" and the clocks describe the machine that ran the benchmarks: a set measured by
/// epsim-hw gives all four, a published set (which does not know them) none.
MeasurementHeader read_header(ConfigMap m) {
  MeasurementHeader h;
  h.gpu = m.get_string("gpu");
  h.hardware = m.get_string_or("hardware", "");
  h.source = m.get_string_or("source", "");
  const bool measured = m.has("driver") || m.has("cuda") || m.has("sm_clock_MHz") || m.has("mem_clock_MHz");
  if (measured) {
    h.driver = m.get_string("driver");
    h.cuda = m.get_string("cuda");
    h.sm_clock_MHz = m.get_double("sm_clock_MHz", kPositive, kHuge);
    h.mem_clock_MHz = m.get_double("mem_clock_MHz", kPositive, kHuge);
  }
  h.date = m.get_string_or("date", "");
  h.tool = m.get_string_or("tool", "");
  m.finish();
  return h;
}

Dtype read_dtype(ConfigMap& p, const std::string& key) { return parse_dtype(p.get_choice(key, dtype_names())); }

/// `dtype: fp8|bf16|fp16|fp32` or the older `dtype_bytes: 1|2|4`, exactly one; both fields are set.
void read_shape_dtype(ConfigMap& p, const std::string& name, GemmShape& s) {
  if (first_of_two(p, "dtype", "dtype_bytes", name, "the GEMM's input format")) {
    s.dtype = read_dtype(p, "dtype");
  } else {
    s.dtype = dtype_of_bytes(std::stoi(p.get_choice("dtype_bytes", {"1", "2", "4"})));
  }
  s.dtype_bytes = element_bytes(s.dtype);
}

GemmShape read_shape(ConfigMap& m, const std::string& name) {
  GemmShape s;
  s.experts = static_cast<int>(m.get_int("experts", 1, kMaxInt));
  s.tokens_per_expert = m.get_int("tokens_per_expert", 1, kMaxInt);
  s.hidden_size = static_cast<int>(m.get_int("hidden_size", 1, kMaxInt));
  s.ffn_size = static_cast<int>(m.get_int("ffn_size", 1, kMaxInt));
  s.matrices = static_cast<int>(m.get_int("matrices", 1, 16));
  read_shape_dtype(m, name, s);
  return s;
}

/// Optional everywhere: a published figure seldom says how many runs are behind it (0: not stated).
std::int64_t read_repetitions(ConfigMap& p) { return p.get_int_or("repetitions", 0, 1, kMaxInt); }

/// The point's own `source`, else the header's `source`, else the header's `tool` (the program that
/// measured it). Called last, after every other key: a misspelt key is reported before a missing source.
std::string read_source(ConfigMap& p, const MeasurementHeader& header, const std::string& name) {
  const std::string own = p.get_string_or("source", "");
  p.finish();
  if (!own.empty()) return own;
  if (!header.source.empty()) return header.source;
  if (!header.tool.empty()) return header.tool;
  p.fail("", name + ": no source: give the point a source: (URL or owner/repo:path@commit), or the header a "
                    "source: or tool:");
}

/// Calls `read(point_map, name)` for every mapping in the sequence under `key`; the series, when present,
/// must be a non-empty sequence.
template <typename F>
bool read_series(ConfigMap& top, const std::string& key, F&& read) {
  if (!top.has(key)) return false;
  const YAML::Node seq = top.get_raw(key);
  if (!seq.IsSequence()) top.fail(key, key + ": expected a sequence of points (- {...} lines)");
  if (seq.size() == 0) top.fail(key, key + ": empty series (give at least one point, or leave the key out)");
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const std::string name = key + "[" + std::to_string(i) + "]";
    ConfigMap point(seq[i], top.file(), name);
    if (!seq[i].IsMap()) point.fail("", name + ": expected a mapping of the point's keys");
    read(point, name);
    point.finish();
  }
  return true;
}

const std::vector<std::string>& layout_names() {
  static const std::vector<std::string> names{"dense", "contiguous", "masked"};
  return names;
}
const std::vector<std::string>& kernel_names() {
  static const std::vector<std::string> names{"dispatch", "combine"};
  return names;
}
const std::vector<std::string>& routing_names() {
  static const std::vector<std::string> names{"uniform", "group_limited", "balanced"};
  return names;
}
const std::vector<std::string>& counted_names() {
  static const std::vector<std::string> names{"nvlink", "rdma", "algorithm"};
  return names;
}

/// The enumerator of `Enum` whose to_string is `name` (one of the names its reader offered).
template <typename Enum>
Enum enum_of(const std::string& name, std::initializer_list<Enum> values) {
  for (Enum e : values)
    if (name == to_string(e)) return e;
  return *values.begin();
}

GemmPoint read_grouped_gemm(ConfigMap& p, const std::string& name, const MeasurementHeader& header) {
  GemmPoint g;
  g.shape = read_shape(p, name);
  g.median_us = p.get_double("median_us", kPositive, kHuge);
  g.repetitions = read_repetitions(p);
  g.source = read_source(p, header, name);
  g.where = p.where();
  return g;
}

GemmCallPoint read_gemm(ConfigMap& p, const std::string& name, const MeasurementHeader& header) {
  GemmCallPoint g;
  g.groups = static_cast<int>(p.get_int_or("groups", 1, 1, kMaxInt));
  g.m = p.get_int("m", 1, kMaxInt);
  g.n = p.get_int("n", 1, kMaxInt);
  g.k = p.get_int("k", 1, kMaxInt);
  g.dtype = read_dtype(p, "dtype");
  g.layout = enum_of(p.get_choice_or("layout", "dense", layout_names()),
                     {GemmLayout::dense, GemmLayout::contiguous, GemmLayout::masked});
  if (g.layout == GemmLayout::dense && g.groups != 1)
    p.fail("groups", name + ".groups: a dense GEMM has one group, got " + std::to_string(g.groups) +
                         " (give layout: contiguous or masked)");
  if (first_of_two(p, "median_us", "TFLOPs", name, "a median time, or the rate the source published")) {
    g.median_us = p.get_double("median_us", kPositive, kHuge);
  } else {
    g.published_TFLOPs = p.get_double("TFLOPs", kPositive, kHuge);
    const double flop = 2.0 * g.groups * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
    g.median_us = flop / (g.published_TFLOPs * kFlopPerUsPerTFLOPs);
  }
  g.repetitions = read_repetitions(p);
  g.source = read_source(p, header, name);
  g.where = p.where();
  return g;
}

CopyPoint read_copy(ConfigMap& p, const std::string& name, const MeasurementHeader& header) {
  CopyPoint c;
  c.kind = enum_of(p.get_choice("kind", copy_kind_names()),
                   {CopyKind::ce_local, CopyKind::ce_peer, CopyKind::h2d, CopyKind::d2h, CopyKind::sm_copy});
  c.bytes = p.get_double("bytes", kPositive, kHuge);
  if (first_of_two(p, "median_us", "GBps", name, "a median time, or the rate the source published")) {
    c.median_us = p.get_double("median_us", kPositive, kHuge);
  } else {
    c.published_GBps = p.get_double("GBps", kPositive, kHuge);
    c.median_us = c.bytes / (c.published_GBps * kBytesPerUsPerGBps);
  }
  c.repetitions = read_repetitions(p);
  c.source = read_source(p, header, name);
  c.where = p.where();
  return c;
}

GemmWithCopyPoint read_gemm_with_copy(ConfigMap& p, const std::string& name) {
  GemmWithCopyPoint g;
  g.shape = read_shape(p, name);
  g.gemm_us = p.get_double("gemm_us", kPositive, kHuge);
  g.gemm_with_copy_us = p.get_double("gemm_with_copy_us", kPositive, kHuge);
  g.copy_GBps = p.get_double("copy_GBps", kPositive, kHuge);
  g.copy = enum_of(p.get_choice_or("copy", "ce_local", {"ce_local", "ce_peer"}), {CopyKind::ce_local, CopyKind::ce_peer});
  if (p.has("copy_on_sms")) g.copy_on_sms = p.get_bool("copy_on_sms");
  g.repetitions = read_repetitions(p);
  g.where = p.where();
  return g;
}

AllToAllPoint read_all_to_all(ConfigMap& p, const std::string& name, const MeasurementHeader& header) {
  AllToAllPoint a;
  a.ranks = static_cast<int>(p.get_int("ranks", 2, kMaxInt));
  a.bytes_per_pair = p.get_double("bytes_per_pair", kPositive, kHuge);
  a.median_us = p.get_double("median_us", kPositive, kHuge);
  a.repetitions = read_repetitions(p);
  a.source = read_source(p, header, name);
  a.where = p.where();
  return a;
}

EpCommPoint read_ep_comm(ConfigMap& p, const std::string& name, const MeasurementHeader& header) {
  EpCommPoint e;
  e.kernel = enum_of(p.get_choice("kernel", kernel_names()), {EpKernel::dispatch, EpKernel::combine});
  e.implementation = p.get_string("implementation");
  e.ep = static_cast<int>(p.get_int("ep", 2, kMaxInt));
  e.gpus_per_node = static_cast<int>(p.get_int("gpus_per_node", 1, e.ep));
  if (e.ep > e.gpus_per_node && e.ep % e.gpus_per_node != 0)
    p.fail("ep", name + ".ep: expected a multiple of gpus_per_node (" + std::to_string(e.gpus_per_node) +
                     ") when the run spans nodes, got " + std::to_string(e.ep));
  const int nodes = e.ep / e.gpus_per_node;
  e.tokens = p.get_int("tokens", 1, kMaxInt);
  e.hidden = static_cast<int>(p.get_int("hidden", 1, kMaxInt));
  e.top_k = static_cast<int>(p.get_int("top_k", 1, kMaxInt));
  e.experts = static_cast<int>(p.get_int("experts", 1, kMaxInt));
  if (e.top_k > e.experts)
    p.fail("top_k", name + ".top_k: expected at most experts (" + std::to_string(e.experts) + "), got " +
                        std::to_string(e.top_k));
  if (e.experts % e.ep != 0)
    p.fail("experts", name + ".experts: expected a multiple of ep (" + std::to_string(e.ep) + "), got " +
                          std::to_string(e.experts));
  e.dtype = read_dtype(p, "dtype");
  e.sms = static_cast<int>(p.get_int_or("sms", 0, 1, kMaxInt));
  e.routing = enum_of(p.get_choice("routing", routing_names()),
                      {BenchRouting::uniform, BenchRouting::group_limited, BenchRouting::balanced});
  if (e.routing == BenchRouting::group_limited) {
    e.max_nodes = static_cast<int>(p.get_int("max_nodes", 1, nodes));
  } else if (p.has("max_nodes")) {
    p.fail("max_nodes", name + ".max_nodes: only for routing: group_limited (routing is " +
                            std::string(to_string(e.routing)) + ")");
  }
  e.kernel_only = p.get_choice("timing", {"kernel", "api"}) == "kernel";
  const bool timed = first_of_two(p, "median_us", "GBps", name, "a median time, or the rate the source published");
  if (timed) {
    e.median_us = p.get_double("median_us", kPositive, kHuge);
  } else {
    e.published_GBps = p.get_double("GBps", kPositive, kHuge);
  }
  // A rate means nothing without the bytes it counts; with a time, `counted` records what the source
  // would have counted and is optional.
  if (!timed || p.has("counted"))
    e.counted = enum_of(p.get_choice("counted", counted_names()),
                        {CountedBandwidth::nvlink, CountedBandwidth::rdma, CountedBandwidth::algorithm});
  e.source = read_source(p, header, name);
  e.where = p.where();
  return e;
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

const char* to_string(GemmLayout layout) {
  switch (layout) {
    case GemmLayout::dense: return "dense";
    case GemmLayout::contiguous: return "contiguous";
    case GemmLayout::masked: return "masked";
  }
  return "?";
}

const char* to_string(EpKernel kernel) {
  switch (kernel) {
    case EpKernel::dispatch: return "dispatch";
    case EpKernel::combine: return "combine";
  }
  return "?";
}

const char* to_string(BenchRouting routing) {
  switch (routing) {
    case BenchRouting::uniform: return "uniform";
    case BenchRouting::group_limited: return "group_limited";
    case BenchRouting::balanced: return "balanced";
  }
  return "?";
}

const char* to_string(CountedBandwidth counted) {
  switch (counted) {
    case CountedBandwidth::nvlink: return "nvlink";
    case CountedBandwidth::rdma: return "rdma";
    case CountedBandwidth::algorithm: return "algorithm";
  }
  return "?";
}

Measurements load_measurements(const std::string& path) {
  ConfigMap top = open_config(path, "measurements");
  Measurements m;
  m.file = path;
  m.header = read_header(top.get_map("header"));
  const MeasurementHeader& h = m.header;
  bool any = false;
  any |= read_series(top, "grouped_gemm",
                     [&](ConfigMap& p, const std::string& n) { m.grouped_gemm.push_back(read_grouped_gemm(p, n, h)); });
  any |= read_series(top, "gemm", [&](ConfigMap& p, const std::string& n) { m.gemm.push_back(read_gemm(p, n, h)); });
  any |= read_series(top, "copy", [&](ConfigMap& p, const std::string& n) { m.copy.push_back(read_copy(p, n, h)); });
  any |= read_series(top, "gemm_with_copy",
                     [&](ConfigMap& p, const std::string& n) { m.gemm_with_copy.push_back(read_gemm_with_copy(p, n)); });
  any |= read_series(top, "all_to_all",
                     [&](ConfigMap& p, const std::string& n) { m.all_to_all.push_back(read_all_to_all(p, n, h)); });
  any |= read_series(top, "ep_comm",
                     [&](ConfigMap& p, const std::string& n) { m.ep_comm.push_back(read_ep_comm(p, n, h)); });
  top.finish();
  if (!any)
    top.fail("", "no measurement series: expected at least one of grouped_gemm, gemm, copy, gemm_with_copy, "
                 "all_to_all, ep_comm");
  return m;
}

}  // namespace epsim
