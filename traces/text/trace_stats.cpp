#include "traces/text/trace_stats.hpp"

#include <algorithm>
#include <cstdio>

#include "sim/core/input_error.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/text/header_text.hpp"

namespace epsim {

namespace {

std::string fixed4(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

std::string column(const std::string& s, int width) {
  return std::string(width > static_cast<int>(s.size()) ? width - s.size() : 0, ' ') + s;
}

}  // namespace

RatioSummary summarize(std::vector<double> values) {
  RatioSummary out;
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  out.min = values.front();
  out.max = values.back();
  out.median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
  return out;
}

void write_trace_stats(const std::string& path, const StatsOptions& o, std::ostream& out) {
  TraceReader reader(path);
  const TraceHeader& h = reader.header();
  if (o.ep > h.num_experts)
    throw InputError(
        path, "",
        "--ep " + std::to_string(o.ep) + " exceeds the trace's " + std::to_string(h.num_experts) + " experts");
  write_header_text(path, h, out);
  std::vector<std::uint32_t> gpu_of;
  if (o.ep > 0) {
    gpu_of = static_ep_gpu_of_expert(h.num_experts, o.ep, o.layout);
    out << "static EP: " << o.ep << " GPUs, " << expert_layout_name(o.layout) << " placement";
    if (h.num_experts % o.ep != 0) out << " (experts do not divide evenly: GPUs hold different numbers)";
    out << "\n";
  }
  out << "\n"
      << column("record", 7) << column("step", 6) << column("micro-batch", 12) << column("layer", 6) << column("id", 6)
      << column("tokens", 11) << column("hot/mean", 10);
  if (o.ep > 0) out << column("gpu max/mean", 14);
  out << "\n";

  TraceRecord record;
  std::vector<double> hot, gpu;
  std::uint64_t tokens = 0, index = 0;
  while (reader.next(record)) {
    const RecordLoad load = record_load(record, h, gpu_of, o.ep);
    tokens += load.tokens;
    out << column(std::to_string(index), 7) << column(std::to_string(record.step), 6)
        << column(std::to_string(record.micro_batch), 12) << column(std::to_string(record.layer), 6)
        << column(std::to_string(h.layer_ids[record.layer]), 6) << column(std::to_string(load.tokens), 11)
        << column(load.assignments ? fixed4(load.hot_over_mean) : "-", 10);
    if (o.ep > 0) out << column(load.assignments ? fixed4(load.gpu_max_over_mean) : "-", 14);
    out << "\n";
    if (load.assignments) {
      hot.push_back(load.hot_over_mean);
      if (o.ep > 0) gpu.push_back(load.gpu_max_over_mean);
    }
    ++index;
  }
  out << "\nrecords: " << index << ", tokens: " << tokens << "\n";
  out << column("over non-empty records", 24) << column("median", 10) << column("min", 10) << column("max", 10) << "\n";
  const auto line = [&](const char* name, const std::vector<double>& v) {
    const RatioSummary s = summarize(v);
    out << column(name, 24) << column(fixed4(s.median), 10) << column(fixed4(s.min), 10) << column(fixed4(s.max), 10)
        << "\n";
  };
  line("hottest expert / mean", hot);
  if (o.ep > 0) line("max / mean GPU load", gpu);
}

}  // namespace epsim
