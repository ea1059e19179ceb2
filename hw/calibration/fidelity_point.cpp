#include "hw/calibration/fidelity_point.hpp"

#include <cctype>
#include <cstdio>

#include "hw/calibration/ep_bench_traffic.hpp"

namespace epsim {

const char* to_string(FidelityKind kind) {
  switch (kind) {
    case FidelityKind::gemm: return "gemm";
    case FidelityKind::dispatch: return "dispatch";
    case FidelityKind::combine: return "combine";
    case FidelityKind::copy: return "copy";
    case FidelityKind::all_to_all: return "all_to_all";
  }
  return "?";
}

const char* kind_title(FidelityKind kind) {
  switch (kind) {
    case FidelityKind::gemm: return "GEMM";
    case FidelityKind::dispatch: return "Dispatch";
    case FidelityKind::combine: return "Combine";
    case FidelityKind::copy: return "Copy";
    case FidelityKind::all_to_all: return "All-to-all";
  }
  return "?";
}

namespace {

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string upper(const char* s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

/// "4 MiB", "1.5 GiB", "640 B": binary units, as benchmarks size their buffers.
std::string size_text(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return num(bytes / (1024.0 * 1024 * 1024)) + " GiB";
  if (bytes >= 1024.0 * 1024) return num(bytes / (1024.0 * 1024)) + " MiB";
  if (bytes >= 1024.0) return num(bytes / 1024.0) + " KiB";
  return num(bytes) + " B";
}

std::string implementation_text(const std::string& impl) {
  if (impl == "deepep_v1") return "DeepEP V1";
  if (impl == "deepep_v2") return "DeepEP V2";
  if (impl == "hybrid_ep") return "Hybrid-EP";
  if (impl == "pplx") return "pplx-kernels";
  if (impl == "trtllm_one_sided") return "TensorRT-LLM one-sided";
  if (impl == "uccl_ep") return "UCCL-EP";
  return impl;
}

std::string copy_text(CopyKind kind) {
  switch (kind) {
    case CopyKind::ce_local: return "local D2D copy (cudaMemcpyAsync)";
    case CopyKind::ce_peer: return "Copy Engine to a peer (NVLink)";
    case CopyKind::h2d: return "Copy Engine H2D (PCIe)";
    case CopyKind::d2h: return "Copy Engine D2H (PCIe)";
    case CopyKind::sm_copy: return "copy kernel on the SMs";
  }
  return "copy";
}

std::string grouped_gemm_setting(const GemmPoint& p, const std::string& hw) {
  const GemmShape& s = p.shape;
  return "grouped GEMM " + upper(to_string(s.dtype)) + ", " + std::to_string(s.experts) + " experts x " +
         std::to_string(s.tokens_per_expert) + " rows, hidden " + std::to_string(s.hidden_size) + ", ffn " +
         std::to_string(s.ffn_size) + " (" + std::to_string(s.matrices) + " matrices), " + hw;
}

std::string gemm_setting(const GemmCallPoint& p, const std::string& hw) {
  std::string out = "GEMM " + upper(to_string(p.dtype)) + " " + to_string(p.layout);
  if (p.groups > 1) out += ", " + std::to_string(p.groups) + " groups";
  out += ", m " + std::to_string(p.m) + ", n " + std::to_string(p.n) + ", k " + std::to_string(p.k) + ", " + hw;
  return out;
}

std::string ep_setting(const EpCommPoint& p, const std::string& hw) {
  const int gpn = p.gpus_per_node > 0 ? p.gpus_per_node : p.ep;
  const int nodes = (p.ep + gpn - 1) / gpn;
  std::string out = implementation_text(p.implementation) + " " + to_string(p.kernel) + " " +
                    upper(to_string(p.dtype)) + ", EP" + std::to_string(p.ep) + " (" + std::to_string(nodes) +
                    (nodes == 1 ? " node" : " nodes") + "), " + std::to_string(p.tokens) + " tok";
  if (p.sms > 0) out += ", " + std::to_string(p.sms) + " SMs";
  if (p.routing == BenchRouting::group_limited) out += ", at most " + std::to_string(p.max_nodes) + " nodes per token";
  if (p.routing == BenchRouting::balanced) out += ", balanced routing";
  if (!p.kernel_only) out += ", API call";
  return out + ", " + hw;
}

const std::string& or_header(const std::string& source, const Measurements& m) {
  return source.empty() ? m.header.source : source;
}

}  // namespace

std::vector<FidelityPoint> fidelity_points(const std::vector<Measurements>& sources,
                                           const std::string& default_hardware) {
  std::vector<FidelityPoint> points;
  for (std::size_t f = 0; f < sources.size(); ++f) {
    const Measurements& m = sources[f];
    const std::string hw = m.header.hardware.empty() ? default_hardware : m.header.hardware;
    const auto add = [&](FidelityKind kind, FidelitySeries series, std::size_t i, std::string setting, double us,
                         const std::string& source, const std::string& where) {
      FidelityPoint p;
      p.kind = kind;
      p.series = series;
      p.file = f;
      p.index = i;
      p.hardware = hw;
      p.setting = std::move(setting);
      p.measured_us = us;
      p.source = or_header(source, m);
      p.where = where;
      points.push_back(std::move(p));
    };
    for (std::size_t i = 0; i < m.grouped_gemm.size(); ++i) {
      const GemmPoint& g = m.grouped_gemm[i];
      add(FidelityKind::gemm, FidelitySeries::grouped_gemm, i, grouped_gemm_setting(g, hw), g.median_us, g.source,
          g.where);
    }
    for (std::size_t i = 0; i < m.gemm.size(); ++i) {
      const GemmCallPoint& g = m.gemm[i];
      add(FidelityKind::gemm, FidelitySeries::gemm, i, gemm_setting(g, hw), g.median_us, g.source, g.where);
    }
    for (std::size_t i = 0; i < m.copy.size(); ++i) {
      const CopyPoint& c = m.copy[i];
      add(FidelityKind::copy, FidelitySeries::copy, i, copy_text(c.kind) + ", " + size_text(c.bytes) + ", " + hw,
          c.median_us, c.source, c.where);
    }
    for (std::size_t i = 0; i < m.all_to_all.size(); ++i) {
      const AllToAllPoint& a = m.all_to_all[i];
      add(FidelityKind::all_to_all, FidelitySeries::all_to_all, i,
          "all-to-all, " + std::to_string(a.ranks) + " ranks, " + size_text(a.bytes_per_pair) + " per pair, " + hw,
          a.median_us, a.source, a.where);
    }
    for (std::size_t i = 0; i < m.ep_comm.size(); ++i) {
      const EpCommPoint& e = m.ep_comm[i];
      const double us = ep_point_time_us(e, ep_bench_traffic(e));
      add(e.kernel == EpKernel::dispatch ? FidelityKind::dispatch : FidelityKind::combine, FidelitySeries::ep_comm, i,
          ep_setting(e, hw), us, e.source, e.where);
    }
  }
  return points;
}

namespace {

template <typename T>
void erase_at(std::vector<T>& v, std::size_t index) {
  if (index < v.size()) v.erase(v.begin() + static_cast<std::ptrdiff_t>(index));
}

}  // namespace

Measurements without_point(const Measurements& file, FidelitySeries series, std::size_t index) {
  Measurements out = file;
  switch (series) {
    case FidelitySeries::grouped_gemm: erase_at(out.grouped_gemm, index); break;
    case FidelitySeries::gemm: erase_at(out.gemm, index); break;
    case FidelitySeries::copy: erase_at(out.copy, index); break;
    case FidelitySeries::all_to_all: erase_at(out.all_to_all, index); break;
    case FidelitySeries::ep_comm: erase_at(out.ep_comm, index); break;
  }
  return out;
}

std::size_t series_size(const Measurements& file, FidelitySeries series) {
  switch (series) {
    case FidelitySeries::grouped_gemm: return file.grouped_gemm.size();
    case FidelitySeries::gemm: return file.gemm.size();
    case FidelitySeries::copy: return file.copy.size();
    case FidelitySeries::all_to_all: return file.all_to_all.size();
    case FidelitySeries::ep_comm: return file.ep_comm.size();
  }
  return 0;
}

}  // namespace epsim
