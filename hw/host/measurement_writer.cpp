#include "hw/host/measurement_writer.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "sim/core/atomic_file.hpp"
#include "sim/hardware/dtype.hpp"

namespace epsim::hw {

std::string yaml_quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string format_number(double value) {
  if (!std::isfinite(value)) throw std::runtime_error("cannot write a non-finite number");
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", value);
    return buf;
  }
  for (int precision = 6; precision <= 17; ++precision) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) return buf;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  return buf;
}

namespace {

std::string shape_fields(const GemmShape& s) {
  std::ostringstream o;
  o << "experts: " << s.experts << ", tokens_per_expert: " << s.tokens_per_expert
    << ", hidden_size: " << s.hidden_size << ", ffn_size: " << s.ffn_size << ", matrices: " << s.matrices
    << ", dtype: " << to_string(s.dtype);
  return o.str();
}

/// ", source: \"...\"" when the point names one (else it inherits the header's).
std::string source_field(const std::string& source) {
  return source.empty() ? std::string() : ", source: " + yaml_quote(source);
}

/// The time a point was given: median_us and/or the published rate it was derived from.
std::string time_fields(double median_us, const char* rate_key, double published) {
  std::string out;
  if (median_us > 0) out += ", median_us: " + format_number(median_us);
  if (published > 0) out += std::string(", ") + rate_key + ": " + format_number(published);
  return out;
}

// The names of the format (docs/calibration.md), spelled here so that the writer depends on nothing but
// the structs; the round-trip test reads them back with load_measurements.
const char* layout_name(GemmLayout layout) {
  switch (layout) {
    case GemmLayout::dense: return "dense";
    case GemmLayout::contiguous: return "contiguous";
    case GemmLayout::masked: return "masked";
  }
  return "?";
}

const char* kernel_name(EpKernel kernel) { return kernel == EpKernel::dispatch ? "dispatch" : "combine"; }

const char* routing_name(BenchRouting routing) {
  switch (routing) {
    case BenchRouting::uniform: return "uniform";
    case BenchRouting::group_limited: return "group_limited";
    case BenchRouting::balanced: return "balanced";
  }
  return "?";
}

const char* counted_name(CountedBandwidth counted) {
  switch (counted) {
    case CountedBandwidth::nvlink: return "nvlink";
    case CountedBandwidth::rdma: return "rdma";
    case CountedBandwidth::algorithm: return "algorithm";
  }
  return "?";
}

std::string repetitions_field(std::int64_t repetitions) {
  return repetitions > 0 ? ", repetitions: " + std::to_string(repetitions) : std::string();
}

}  // namespace

void write_measurements(std::ostream& out, const Measurements& m, const std::vector<std::string>& comments,
                        const std::string& command_line) {
  for (const auto& c : comments) {
    std::istringstream lines(c);
    std::string line;
    while (std::getline(lines, line)) out << "# " << line << "\n";
  }
  const auto& h = m.header;
  out << "kind: measurements\n"
      << "header:\n"
      << "  gpu: " << yaml_quote(h.gpu) << "\n";
  if (!h.hardware.empty()) out << "  hardware: " << yaml_quote(h.hardware) << "\n";
  if (!h.source.empty()) out << "  source: " << yaml_quote(h.source) << "\n";
  out << "  driver: " << yaml_quote(h.driver) << "\n"
      << "  cuda: " << yaml_quote(h.cuda) << "\n"
      << "  sm_clock_MHz: " << format_number(h.sm_clock_MHz) << "\n"
      << "  mem_clock_MHz: " << format_number(h.mem_clock_MHz) << "\n"
      << "  date: " << yaml_quote(h.date) << "\n"
      << "  tool: " << yaml_quote(h.tool) << "\n";
  if (!command_line.empty()) {
    std::string one_line = command_line;
    for (char& c : one_line)
      if (c == '\n' || c == '\r') c = ' ';
    out << "  # command: " << one_line << "\n";
  }
  if (!m.grouped_gemm.empty()) {
    out << "grouped_gemm:\n";
    for (const auto& p : m.grouped_gemm)
      out << "  - {" << shape_fields(p.shape) << ", median_us: " << format_number(p.median_us)
          << repetitions_field(p.repetitions) << source_field(p.source) << "}\n";
  }
  if (!m.gemm.empty()) {
    out << "gemm:\n";
    for (const auto& p : m.gemm)
      out << "  - {groups: " << p.groups << ", m: " << p.m << ", n: " << p.n << ", k: " << p.k
          << ", dtype: " << to_string(p.dtype) << ", layout: " << layout_name(p.layout)
          << time_fields(p.median_us, "TFLOPs", p.published_TFLOPs) << repetitions_field(p.repetitions)
          << source_field(p.source) << "}\n";
  }
  if (!m.copy.empty()) {
    out << "copy:\n";
    for (const auto& p : m.copy)
      out << "  - {kind: " << to_string(p.kind) << ", bytes: " << format_number(p.bytes)
          << time_fields(p.median_us, "GBps", p.published_GBps) << repetitions_field(p.repetitions)
          << source_field(p.source) << "}\n";
  }
  if (!m.gemm_with_copy.empty()) {
    out << "gemm_with_copy:\n";
    for (const auto& p : m.gemm_with_copy)
      out << "  - {" << shape_fields(p.shape) << ", gemm_us: " << format_number(p.gemm_us)
          << ", gemm_with_copy_us: " << format_number(p.gemm_with_copy_us)
          << ", copy_GBps: " << format_number(p.copy_GBps) << ", copy: " << to_string(p.copy)
          << (p.copy_on_sms ? (*p.copy_on_sms ? ", copy_on_sms: true" : ", copy_on_sms: false") : "")
          << repetitions_field(p.repetitions) << "}\n";
  }
  if (!m.all_to_all.empty()) {
    out << "all_to_all:\n";
    for (const auto& p : m.all_to_all)
      out << "  - {ranks: " << p.ranks << ", bytes_per_pair: " << format_number(p.bytes_per_pair)
          << ", median_us: " << format_number(p.median_us) << repetitions_field(p.repetitions)
          << source_field(p.source) << "}\n";
  }
  if (!m.ep_comm.empty()) {
    out << "ep_comm:\n";
    for (const auto& p : m.ep_comm) {
      out << "  - {kernel: " << kernel_name(p.kernel) << ", implementation: " << yaml_quote(p.implementation)
          << ", ep: " << p.ep << ", gpus_per_node: " << p.gpus_per_node << ", tokens: " << p.tokens
          << ", hidden: " << p.hidden << ", top_k: " << p.top_k << ", experts: " << p.experts
          << ", dtype: " << to_string(p.dtype);
      if (p.sms > 0) out << ", sms: " << p.sms;
      out << ", routing: " << routing_name(p.routing);
      if (p.routing == BenchRouting::group_limited) out << ", max_nodes: " << p.max_nodes;
      out << ", timing: " << (p.kernel_only ? "kernel" : "api");
      out << time_fields(p.median_us, "GBps", p.published_GBps) << ", counted: " << counted_name(p.counted)
          << source_field(p.source) << "}\n";
    }
  }
}

void write_measurements_file(const std::string& path, const Measurements& m, const std::vector<std::string>& comments,
                             bool replace, const std::string& command_line) {
  AtomicFile out(path, replace);
  write_measurements(out.stream(), m, comments, command_line);
  out.commit();
}

}  // namespace epsim::hw
