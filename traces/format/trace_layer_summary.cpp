#include "traces/format/trace_layer_summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/core/input_error.hpp"
#include "traces/format/trace_reader.hpp"

namespace epsim {

namespace {

double total_variation(const std::vector<std::uint64_t>& a, const std::vector<std::uint64_t>& b) {
  double sa = 0, sb = 0, d = 0;
  for (std::size_t e = 0; e < a.size(); ++e) {
    sa += static_cast<double>(a[e]);
    sb += static_cast<double>(b[e]);
  }
  for (std::size_t e = 0; e < a.size(); ++e) d += std::fabs(static_cast<double>(a[e]) / sa - static_cast<double>(b[e]) / sb);
  return d / 2;
}

std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string column(const std::string& s, std::size_t width) {
  return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
}

}  // namespace

std::vector<LayerSummary> summarize_layers(const std::string& path, std::uint32_t ep, ExpertLayout layout) {
  TraceReader reader(path);
  const TraceHeader& h = reader.header();
  if (ep > h.num_experts)
    throw InputError(path, "", "--ep " + std::to_string(ep) + " exceeds the trace's " + std::to_string(h.num_experts) + " experts");
  const std::vector<std::uint32_t> gpu_of = ep > 0 ? static_ep_gpu_of_expert(h.num_experts, ep, layout)
                                                   : std::vector<std::uint32_t>();
  const std::size_t L = h.num_layers, E = h.num_experts;
  std::vector<LayerSummary> out(L);
  std::vector<std::vector<std::uint64_t>> total(L, std::vector<std::uint64_t>(E, 0)), step_now = total,
      step_before = total;
  std::vector<bool> has_before(L, false);
  const auto close_step = [&]() {
    for (std::size_t l = 0; l < L; ++l) {
      std::uint64_t sum = 0;
      for (std::uint64_t v : step_now[l]) sum += v;
      if (sum == 0) continue;
      if (has_before[l]) {
        const double tv = total_variation(step_before[l], step_now[l]);
        LayerSummary& s = out[l];
        s.drift_mean += tv;
        s.drift_max = std::max(s.drift_max, tv);
        ++s.drift_pairs;
      }
      step_before[l].swap(step_now[l]);
      std::fill(step_now[l].begin(), step_now[l].end(), 0);
      has_before[l] = true;
    }
  };
  TraceRecord r;
  bool any = false;
  std::uint32_t step = 0;
  while (reader.next(r)) {
    if (any && r.step != step) close_step();
    step = r.step;
    any = true;
    LayerSummary& s = out[r.layer];
    ++s.records;
    const std::vector<std::uint64_t> load = expert_loads(r, h);
    for (std::size_t e = 0; e < E; ++e) {
      total[r.layer][e] += load[e];
      step_now[r.layer][e] += load[e];
    }
    const RecordLoad rl = record_load(r, h, gpu_of, ep);
    if (rl.assignments == 0) continue;
    ++s.nonempty;
    s.hot_mean += rl.hot_over_mean;
    s.hot_max = std::max(s.hot_max, rl.hot_over_mean);
    s.gpu_mean += rl.gpu_max_over_mean;
    s.gpu_max = std::max(s.gpu_max, rl.gpu_max_over_mean);
  }
  if (any) close_step();
  for (std::size_t l = 0; l < L; ++l) {
    LayerSummary& s = out[l];
    s.layer_id = h.layer_ids[l];
    if (s.nonempty) {
      s.hot_mean /= static_cast<double>(s.nonempty);
      s.gpu_mean /= static_cast<double>(s.nonempty);
    }
    if (s.drift_pairs) s.drift_mean /= static_cast<double>(s.drift_pairs);
    for (std::uint64_t v : total[l]) s.assignments += v;
    std::vector<std::uint32_t> order(E);
    for (std::uint32_t e = 0; e < E; ++e) order[e] = e;
    const std::size_t top = std::min<std::size_t>(3, E);
    // Hottest first; equal loads: lower expert id first.
    std::partial_sort(order.begin(), order.begin() + static_cast<long>(top), order.end(),
                      [&](std::uint32_t a, std::uint32_t b) {
                        return total[l][a] != total[l][b] ? total[l][a] > total[l][b] : a < b;
                      });
    if (s.assignments)
      for (std::size_t i = 0; i < top; ++i)
        s.hottest.emplace_back(order[i], static_cast<double>(total[l][order[i]]) / static_cast<double>(s.assignments));
  }
  return out;
}

void write_layer_summary(const std::string& path, std::uint32_t ep, ExpertLayout layout, std::ostream& out) {
  const std::vector<LayerSummary> layers = summarize_layers(path, ep, layout);
  out << "\nper layer (mean and max over its non-empty records; hottest experts over the trace; drift = total "
         "variation between consecutive steps' expert loads)\n";
  out << column("layer", 6) << column("id", 6) << column("records", 9) << column("hot/mean", 10) << column("max", 8);
  if (ep > 0) out << column("gpu max/mean", 14) << column("max", 8);
  out << column("drift", 8) << column("max", 8) << "  hottest experts (share of the layer's assignments)\n";
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LayerSummary& s = layers[l];
    const bool some = s.nonempty > 0;
    out << column(std::to_string(l), 6) << column(std::to_string(s.layer_id), 6) << column(std::to_string(s.records), 9)
        << column(some ? fixed(s.hot_mean, 4) : "-", 10) << column(some ? fixed(s.hot_max, 4) : "-", 8);
    if (ep > 0) out << column(some ? fixed(s.gpu_mean, 4) : "-", 14) << column(some ? fixed(s.gpu_max, 4) : "-", 8);
    out << column(s.drift_pairs ? fixed(s.drift_mean, 4) : "-", 8) << column(s.drift_pairs ? fixed(s.drift_max, 4) : "-", 8)
        << " ";
    for (const auto& [expert, share] : s.hottest) out << " e" << expert << " " << fixed(100 * share, 1) << "%";
    out << "\n";
  }
}

}  // namespace epsim
