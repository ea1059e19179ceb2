#include "traces/format/trace_info.hpp"

#include <algorithm>
#include <filesystem>

#include "traces/format/trace_check.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/text/header_text.hpp"

namespace epsim {

TraceInfo read_trace_info(const std::string& path) {
  TraceReader reader(path);
  TraceInfo info;
  info.header = reader.header();
  TraceRecord r;
  bool any = false;
  std::uint32_t step = 0, micro_batch = 0;
  std::uint64_t mbs_in_step = 0, layers_in_mb = 0;
  const auto close_micro_batch = [&]() {
    info.min_layers = info.min_layers == 0 ? layers_in_mb : std::min(info.min_layers, layers_in_mb);
    info.max_layers = std::max(info.max_layers, layers_in_mb);
  };
  const auto close_step = [&]() {
    info.min_micro_batches = info.min_micro_batches == 0 ? mbs_in_step : std::min(info.min_micro_batches, mbs_in_step);
    info.max_micro_batches = std::max(info.max_micro_batches, mbs_in_step);
  };
  while (reader.next(r)) {
    if (!any || r.step != step) {
      if (any) {
        close_micro_batch();
        close_step();
      }
      ++info.steps;
      mbs_in_step = 1;
      layers_in_mb = 0;
      if (!any) info.first_step = r.step;
    } else if (r.micro_batch != micro_batch) {
      close_micro_batch();
      ++mbs_in_step;
      layers_in_mb = 0;
    }
    step = r.step;
    micro_batch = r.micro_batch;
    ++layers_in_mb;
    any = true;
    info.last_step = r.step;
    info.tokens += record_num_tokens(r, info.header);
    info.assignments += record_assignments(r);
  }
  if (any) {
    close_micro_batch();
    close_step();
  }
  info.records = reader.records_read();
  info.file_bytes = std::filesystem::file_size(path);
  return info;
}

void write_trace_info(const std::string& path, std::ostream& out) {
  const TraceInfo i = read_trace_info(path);
  const auto span = [](std::uint64_t lo, std::uint64_t hi) {
    return lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
  };
  write_header_text(path, i.header, out);
  out << "bytes: " << i.file_bytes << "\n";
  out << "records: " << i.records << "\n";
  if (i.records == 0) return;
  out << "steps: " << i.steps << " (" << i.first_step << " to " << i.last_step << ")\n";
  out << "micro-batches per step: " << span(i.min_micro_batches, i.max_micro_batches) << "\n";
  out << "layers per micro-batch: " << span(i.min_layers, i.max_layers) << "\n";
  out << "tokens: " << i.tokens << " (expert assignments " << i.assignments << ")\n";
}

}  // namespace epsim
