// The step block of `epsim run`'s summary and its machine-readable twin, step.json (docs/step.md
// defines every field). Printed only for experiments with a `step:` block.
#pragma once

#include <cstdio>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/step/step_names.hpp"
#include "sim/step/step_prediction.hpp"

namespace epsim {

namespace step_report_detail {

inline std::string row(const char* label, const char* format, double value, const std::string& note = "") {
  char cell[64];
  std::snprintf(cell, sizeof cell, format, value);
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-38s %12s%s%s\n", label, cell, note.empty() ? "" : "   ", note.c_str());
  return buf;
}

inline double share(double part, double whole) { return whole > 0 ? part / whole : 0; }

}  // namespace step_report_detail

inline void print_step(std::ostream& out, const StepPrediction& p) {
  using step_report_detail::row;
  using step_report_detail::share;
  out << "\n  step (" << to_string(p.step.mode) << ", sequence length " << p.step.sequence_length << ", overlap "
      << to_string(p.step.overlap) << "; " << p.layers << " layers = " << p.dense_layers << " dense + "
      << p.moe_layers << " MoE, each MoE layer the mean of " << p.records << " records)\n";
  if (p.records == 0) {
    out << "  no records replayed\n";
    return;
  }
  out << row(p.step.mode == StepMode::decode ? "sequences per GPU" : "tokens per GPU", "%.1f", p.tokens_per_gpu);
  out << row("step time (us)", "%.1f", p.step_us);
  out << row("throughput (tokens/s per GPU)", "%.1f", p.tokens_per_s_per_gpu());
  out << row("MoE layer with its attention (us)", "%.1f", p.moe_layer_us);
  out << row("dense layer (us)", "%.1f", p.dense_layer_us);
  out << row("output head (us)", "%.1f", p.head_us);
  out << row("share: non-MoE compute", "%.3f", share(p.non_moe_us, p.step_us));
  out << row("share: MoE compute (slowest GPU)", "%.3f", share(p.moe_compute_us, p.step_us));
  out << row("share: MoE communication + waiting", "%.3f", share(p.moe_exposed_comm_us(), p.step_us));
  out << row("bound step time (us)", "%.1f", p.bound_step_us, "every MoE layer at the oracle's bound");
  out << row("bound throughput (tokens/s per GPU)", "%.1f", p.bound_tokens_per_s_per_gpu());
  out << row("gap to bound (us)", "%.1f", p.gap_to_bound_us());
  out << row("gap to bound (share of step)", "%.4f", share(p.gap_to_bound_us(), p.step_us));
}

inline nlohmann::ordered_json step_to_json(const StepPrediction& p) {
  nlohmann::ordered_json j;
  j["mode"] = to_string(p.step.mode);
  j["sequence_length"] = p.step.sequence_length;
  j["overlap"] = to_string(p.step.overlap);
  j["layers"] = p.layers;
  j["dense_layers"] = p.dense_layers;
  j["moe_layers"] = p.moe_layers;
  j["records"] = p.records;
  j["tokens_per_gpu"] = p.tokens_per_gpu;
  j["step_us"] = p.step_us;
  j["tokens_per_s_per_gpu"] = p.tokens_per_s_per_gpu();
  j["moe_layer_us"] = p.moe_layer_us;
  j["dense_layer_us"] = p.dense_layer_us;
  j["head_us"] = p.head_us;
  j["non_moe_us"] = p.non_moe_us;
  j["moe_compute_us"] = p.moe_compute_us;
  j["moe_exposed_comm_us"] = p.moe_exposed_comm_us();
  j["bound_moe_layer_us"] = p.bound_moe_layer_us;
  j["bound_step_us"] = p.bound_step_us;
  j["bound_tokens_per_s_per_gpu"] = p.bound_tokens_per_s_per_gpu();
  j["gap_to_bound_us"] = p.gap_to_bound_us();
  return j;
}

}  // namespace epsim
