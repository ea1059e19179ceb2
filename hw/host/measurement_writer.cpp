#include "hw/host/measurement_writer.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "sim/core/atomic_file.hpp"

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
    << ", dtype_bytes: " << s.dtype_bytes;
  return o.str();
}

}  // namespace

void write_measurements(std::ostream& out, const Measurements& m, const std::vector<std::string>& comments) {
  for (const auto& c : comments) {
    std::istringstream lines(c);
    std::string line;
    while (std::getline(lines, line)) out << "# " << line << "\n";
  }
  const auto& h = m.header;
  out << "kind: measurements\n"
      << "header:\n"
      << "  gpu: " << yaml_quote(h.gpu) << "\n"
      << "  driver: " << yaml_quote(h.driver) << "\n"
      << "  cuda: " << yaml_quote(h.cuda) << "\n"
      << "  sm_clock_MHz: " << format_number(h.sm_clock_MHz) << "\n"
      << "  mem_clock_MHz: " << format_number(h.mem_clock_MHz) << "\n"
      << "  date: " << yaml_quote(h.date) << "\n"
      << "  tool: " << yaml_quote(h.tool) << "\n";
  if (!m.grouped_gemm.empty()) {
    out << "grouped_gemm:\n";
    for (const auto& p : m.grouped_gemm)
      out << "  - {" << shape_fields(p.shape) << ", median_us: " << format_number(p.median_us)
          << ", repetitions: " << p.repetitions << "}\n";
  }
  if (!m.copy.empty()) {
    out << "copy:\n";
    for (const auto& p : m.copy)
      out << "  - {kind: " << to_string(p.kind) << ", bytes: " << format_number(p.bytes)
          << ", median_us: " << format_number(p.median_us) << ", repetitions: " << p.repetitions << "}\n";
  }
  if (!m.gemm_with_copy.empty()) {
    out << "gemm_with_copy:\n";
    for (const auto& p : m.gemm_with_copy)
      out << "  - {" << shape_fields(p.shape) << ", gemm_us: " << format_number(p.gemm_us)
          << ", gemm_with_copy_us: " << format_number(p.gemm_with_copy_us)
          << ", copy_GBps: " << format_number(p.copy_GBps) << ", repetitions: " << p.repetitions << "}\n";
  }
  if (!m.all_to_all.empty()) {
    out << "all_to_all:\n";
    for (const auto& p : m.all_to_all)
      out << "  - {ranks: " << p.ranks << ", bytes_per_pair: " << format_number(p.bytes_per_pair)
          << ", median_us: " << format_number(p.median_us) << ", repetitions: " << p.repetitions << "}\n";
  }
}

void write_measurements_file(const std::string& path, const Measurements& m, const std::vector<std::string>& comments,
                             bool replace) {
  AtomicFile out(path, replace);
  write_measurements(out.stream(), m, comments);
  out.commit();
}

}  // namespace epsim::hw
