#include "hw/calibration/hardware_writer.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "sim/config/loaders.hpp"
#include "sim/core/atomic_file.hpp"
#include "sim/core/input_error.hpp"

namespace epsim {
namespace {

std::string num(double v, int digits = 6) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string join_files(const std::vector<std::string>& files) {
  std::string out;
  for (const auto& f : files) out += (out.empty() ? "" : ", ") + f;
  return out;
}

/// "fitted: +- 0.013 us (12 points, rel. RMS residual 0.41%; from a.yaml)"
std::string fit_comment(const FittedValue& v, const std::string& unit, double rel_rms = -1) {
  if (v.points == 0) return "not fitted: " + (v.note.empty() ? std::string("kept from the base file") : v.note);
  std::string out = "fitted: +- ";
  out += std::isnan(v.stderr_) ? std::string("n/a (as many points as parameters)") : num(v.stderr_, 3) + unit;
  out += " (" + std::to_string(v.points) + (v.points == 1 ? " point" : " points");
  if (rel_rms >= 0) out += ", rel. RMS residual " + num(100 * rel_rms, 3) + "%";
  out += "; from " + join_files(v.files) + ")";
  if (!v.note.empty()) out += "; " + v.note;
  return out;
}

/// A YAML scalar: plain when safe, double-quoted otherwise.
std::string yaml_scalar(const std::string& text) {
  bool plain = !text.empty();
  for (char c : text)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) plain = false;
  if (plain) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

class Writer {
 public:
  explicit Writer(std::string base_path) : base_(std::move(base_path)) {}
  void line(const std::string& text) { out_ << text << "\n"; }
  /// "  key: value  # comment", the comment aligned.
  void key(int indent, const std::string& key, const std::string& value, const std::string& comment) {
    std::string text = std::string(indent, ' ') + key + ": " + value;
    if (text.size() < 30) text.resize(30, ' ');
    out_ << text << "  # " << comment << "\n";
  }
  void kept(int indent, const std::string& k, double value) { kept(indent, k, num(value, 10)); }
  void kept(int indent, const std::string& k, const std::string& value) {
    key(indent, k, value, "not fitted: kept from " + base_);
  }
  std::string str() const { return out_.str(); }

 private:
  std::string base_;
  std::ostringstream out_;
};

}  // namespace

std::string calibrated_hardware_yaml(const HardwareSpec& base, const std::string& base_path, const Calibration& cal,
                                     const std::string& name) {
  const HardwareSpec hw = apply_calibration(base, cal);
  Writer w(base_path);
  w.line("# Calibrated hardware file written by `epsim calibrate` (docs/calibration.md).");
  w.line("# Base: " + base_path + " (" + base.name + "); every number not marked 'fitted' is the base value.");
  w.line("# Fitted errors are one standard error of the least-squares fit; residuals are relative.");
  w.line("# Measurements:");
  for (const auto& m : cal.sources) {
    const MeasurementHeader& h = m.header;
    w.line("#   " + m.file + ": " + h.gpu + ", driver " + h.driver + ", CUDA " + h.cuda + ", SM " +
           num(h.sm_clock_MHz) + " MHz, memory " + num(h.mem_clock_MHz) + " MHz, " + h.date + ", " + h.tool);
  }
  // Fits without a key in the hardware file are kept here for the record.
  std::vector<std::string> extra;
  for (const auto& c : cal.copies) {
    if (c.kind == CopyKind::ce_peer || c.kind == CopyKind::h2d || c.kind == CopyKind::d2h) continue;
    extra.push_back(std::string("copy ") + to_string(c.kind) + ": alpha " + num(c.alpha_us.value, 4) + " us, beta " +
                    num(c.beta_GBps.value, 4) + " GB/s; " + fit_comment(c.beta_GBps, " GB/s", c.rel_rms));
  }
  if (cal.all_to_all_inter) {
    const AllToAllFit& a = *cal.all_to_all_inter;
    extra.push_back("inter-node all_to_all: latency " + num(a.latency_us.value, 4) + " us, " + num(a.bw_GBps.value, 4) +
                    " GB/s sent per rank; " + fit_comment(a.bw_GBps, " GB/s", a.rel_rms));
  }
  if (cal.contention && cal.contention->points_without_slowdown > 0)
    extra.push_back("gemm_with_copy: " + std::to_string(cal.contention->points_without_slowdown) +
                    (cal.contention->points_without_slowdown == 1 ? " point" : " points") +
                    " showed no slowdown (compute bound) and carried no information on the factor");
  if (cal.gemm) extra.push_back("grouped_gemm model over all points: rel. RMS residual " + num(100 * cal.gemm->rel_rms, 3) + "%");
  for (const auto& warning : cal.warnings) extra.push_back("WARNING: " + warning);
  if (!extra.empty()) {
    w.line("# Not in the hardware model (for the record):");
    for (const auto& e : extra) w.line("#   " + e);
  }
  w.line("kind: hardware");
  w.line("name: " + yaml_scalar(name));
  if (!base.description.empty()) w.line("description: " + yaml_scalar(base.description + " (calibrated)"));
  w.kept(0, "nodes", std::to_string(base.nodes));
  w.kept(0, "gpus_per_node", std::to_string(base.gpus_per_node));
  w.line("");
  w.line("gpu:");
  w.kept(2, "sms", std::to_string(hw.gpu.sms));
  w.kept(2, "bf16_peak_TFLOPs", hw.gpu.bf16_peak_TFLOPs);
  if (hw.gpu.fp8_peak_TFLOPs > 0) w.kept(2, "fp8_peak_TFLOPs", hw.gpu.fp8_peak_TFLOPs);
  if (cal.gemm && cal.gemm->hbm_GBps.points > 0)
    w.key(2, "hbm_GBps", num(hw.gpu.hbm_GBps), "GEMM HBM floor (start at the smallest rows, then joint), " +
                                                   fit_comment(cal.gemm->hbm_GBps, " GB/s", cal.gemm->memory_rel_rms));
  else
    w.kept(2, "hbm_GBps", hw.gpu.hbm_GBps);
  w.kept(2, "hbm_capacity_GB", hw.gpu.hbm_capacity_GB);
  w.line("");
  w.line("gemm:");
  w.kept(2, "row_alignment", std::to_string(hw.gemm.row_alignment));
  if (cal.gemm && cal.gemm->launch_us.points > 0)
    w.key(2, "launch_us", num(hw.gemm.launch_us), fit_comment(cal.gemm->launch_us, " us", cal.gemm->memory_rel_rms));
  else
    w.kept(2, "launch_us", hw.gemm.launch_us);
  auto curve = [&](const std::string& key, const std::vector<EfficiencyFit>* fit,
                   const std::vector<GemmEfficiencyPoint>& kept, const std::string& peak) {
    if (fit && !fit->empty()) {
      w.line("  # fitted: fraction of " + peak + " vs rows per group, jointly with launch_us and hbm_GBps");
      w.line("  " + key + ":");
      for (const auto& e : *fit) {
        std::string text = "    - [" + num(e.padded_rows) + ", " + num(e.efficiency.value) + "]";
        text.resize(std::max<std::size_t>(text.size(), 30), ' ');
        w.line(text + "  # " + fit_comment(e.efficiency, ""));
      }
    } else if (!kept.empty()) {
      std::string text = "  " + key + ":";
      text.resize(30, ' ');
      w.line(text + "  # not fitted: kept from " + base_path);
      for (const auto& p : kept) w.line("    - [" + num(p.tokens_per_expert, 10) + ", " + num(p.efficiency, 10) + "]");
    }
  };
  curve("efficiency", cal.gemm ? &cal.gemm->efficiency : nullptr, hw.gemm.efficiency, "bf16_peak_TFLOPs");
  curve("fp8_efficiency", cal.gemm ? &cal.gemm->fp8_efficiency : nullptr, hw.gemm.fp8_efficiency, "fp8_peak_TFLOPs");
  w.line("");
  w.line("copy_engine:");
  if (const CopyFit* c = cal.copy(CopyKind::ce_peer)) {
    w.key(2, "bw_GBps", num(hw.copy_engine.bw_GBps), "copy ce_peer beta, " + fit_comment(c->beta_GBps, " GB/s", c->rel_rms));
    w.key(2, "fixed_cost_us", num(hw.copy_engine.fixed_cost_us),
          "copy ce_peer alpha, " + fit_comment(c->alpha_us, " us", c->rel_rms));
  } else {
    w.kept(2, "bw_GBps", hw.copy_engine.bw_GBps);
    w.kept(2, "fixed_cost_us", hw.copy_engine.fixed_cost_us);
  }
  if (cal.contention)
    w.key(2, "hbm_traffic_factor", num(hw.copy_engine.hbm_traffic_factor),
          "gemm_with_copy slowdowns, " + fit_comment(cal.contention->hbm_traffic_factor, "", cal.contention->rel_rms));
  else
    w.kept(2, "hbm_traffic_factor", hw.copy_engine.hbm_traffic_factor);
  w.line("");
  w.line("nvlink:");
  w.kept(2, "port_bw_GBps", hw.nvlink.port_bw_GBps);
  if (cal.all_to_all_intra)
    w.key(2, "latency_us", num(hw.nvlink.latency_us),
          "intra-node all_to_all intercept, " + fit_comment(cal.all_to_all_intra->latency_us, " us", cal.all_to_all_intra->rel_rms));
  else
    w.kept(2, "latency_us", hw.nvlink.latency_us);
  w.line("");
  w.line("infiniband:");
  w.kept(2, "nic_bw_GBps", hw.infiniband.nic_bw_GBps);
  w.kept(2, "latency_us", hw.infiniband.latency_us);
  w.line("");
  w.line("pcie:");
  const CopyFit* h2d = cal.copy(CopyKind::h2d);
  const CopyFit* d2h = cal.copy(CopyKind::d2h);
  if (h2d) w.key(2, "h2d_GBps", num(hw.pcie.h2d_GBps), "copy h2d beta, " + fit_comment(h2d->beta_GBps, " GB/s", h2d->rel_rms));
  else w.kept(2, "h2d_GBps", hw.pcie.h2d_GBps);
  if (d2h) w.key(2, "d2h_GBps", num(hw.pcie.d2h_GBps), "copy d2h beta, " + fit_comment(d2h->beta_GBps, " GB/s", d2h->rel_rms));
  else w.kept(2, "d2h_GBps", hw.pcie.d2h_GBps);
  if (h2d && d2h)
    w.key(2, "latency_us", num(hw.pcie.latency_us),
          "mean of the h2d and d2h alphas: h2d " + fit_comment(h2d->alpha_us, " us") + "; d2h " + fit_comment(d2h->alpha_us, " us"));
  else if (h2d || d2h)
    w.key(2, "latency_us", num(hw.pcie.latency_us),
          std::string(h2d ? "copy h2d" : "copy d2h") + " alpha, " + fit_comment((h2d ? h2d : d2h)->alpha_us, " us"));
  else
    w.kept(2, "latency_us", hw.pcie.latency_us);
  w.line("");
  w.line("ep_backend:");
  w.kept(2, "comm_sms", std::to_string(hw.ep_backend.comm_sms));
  w.kept(2, "internode_route", hw.ep_backend.internode_route);
  w.kept(2, "token_copies", to_string(hw.ep_backend.token_copies));
  w.kept(2, "dispatch_engine", to_string(hw.ep_backend.dispatch_engine));
  w.kept(2, "combine_engine", to_string(hw.ep_backend.combine_engine));
  // ep_comm fits win over the all-to-all mapping: they are the kernels the simulator models.
  const EpCommFit* nv = cal.ep_nvlink ? &*cal.ep_nvlink : nullptr;
  const EpCommFit* ib = cal.ep_rdma ? &*cal.ep_rdma : nullptr;
  auto ep_key = [&](const std::string& key, double value, const FittedValue* nvv, const FittedValue* ibv,
                    const std::string& unit) {
    for (const auto& [f, v] : {std::make_pair(nv, nvv), std::make_pair(ib, ibv)})
      if (f && v && v->points > 0) {
        w.key(2, key, num(value),
              std::string("ep_comm ") + (f->internode ? "RDMA" : "NVLink") + " points, " + fit_comment(*v, unit, f->rel_rms) +
                  (key.find("efficiency") != std::string::npos && v->value > 1 ? "; clamped to 1" : ""));
        return;
      }
    w.kept(2, key, value);
  };
  if (nv && nv->efficiency.points > 0)
    ep_key("nvlink_efficiency", hw.ep_backend.nvlink_efficiency, &nv->efficiency, nullptr, "");
  else if (cal.all_to_all_intra) {
    FittedValue eff = cal.all_to_all_intra->bw_GBps;  // bandwidth / port_bw_GBps, error scaled alike
    eff.value /= base.nvlink.port_bw_GBps;
    eff.stderr_ /= base.nvlink.port_bw_GBps;
    w.key(2, "nvlink_efficiency", num(hw.ep_backend.nvlink_efficiency),
          "intra-node all_to_all bandwidth " + num(cal.all_to_all_intra->bw_GBps.value, 4) + " GB/s / port_bw_GBps " +
              num(base.nvlink.port_bw_GBps) + ", " + fit_comment(eff, "", cal.all_to_all_intra->rel_rms) +
              (eff.value > 1 ? "; clamped to 1" : ""));
  } else
    w.kept(2, "nvlink_efficiency", hw.ep_backend.nvlink_efficiency);
  ep_key("ib_efficiency", hw.ep_backend.ib_efficiency, nullptr, ib ? &ib->efficiency : nullptr, "");
  ep_key("sm_GBps", hw.ep_backend.sm_GBps, nv ? &nv->sm_GBps : nullptr, ib ? &ib->sm_GBps : nullptr, " GB/s");
  ep_key("dispatch_fixed_us", hw.ep_backend.dispatch_fixed_us, nv ? &nv->dispatch_fixed_us : nullptr,
         ib ? &ib->dispatch_fixed_us : nullptr, " us");
  ep_key("combine_fixed_us", hw.ep_backend.combine_fixed_us, nv ? &nv->combine_fixed_us : nullptr,
         ib ? &ib->combine_fixed_us : nullptr, " us");
  w.line("  message_efficiency:          # not fitted (the fixed costs carry the small-message time): kept from " + base_path);
  for (const auto& p : hw.ep_backend.message_efficiency)
    w.line("    - [" + num(p.bytes, 10) + ", " + num(p.efficiency, 10) + "]");
  return w.str();
}

void write_hardware_file(const std::string& path, const std::string& text, bool force) {
  AtomicFile out(path, force);
  out.stream() << text;
  out.stream().flush();
  load_hardware(out.temp_path());  // never leave behind a file epsim cannot read
  out.commit();
}

}  // namespace epsim
