#include "traces/text/expert_load.hpp"

#include <cassert>

#include "traces/format/trace_check.hpp"

namespace epsim {

bool parse_expert_layout(const std::string& name, ExpertLayout& out) {
  if (name == "contiguous")
    out = ExpertLayout::contiguous;
  else if (name == "interleaved")
    out = ExpertLayout::interleaved;
  else
    return false;
  return true;
}

const char* expert_layout_name(ExpertLayout layout) {
  return layout == ExpertLayout::contiguous ? "contiguous" : "interleaved";
}

std::vector<std::uint32_t> static_ep_gpu_of_expert(std::uint32_t experts, std::uint32_t gpus, ExpertLayout layout) {
  assert(gpus >= 1 && gpus <= experts);
  std::vector<std::uint32_t> gpu(experts);
  if (layout == ExpertLayout::interleaved) {
    for (std::uint32_t e = 0; e < experts; ++e) gpu[e] = e % gpus;
  } else {
    for (std::uint32_t g = 0; g < gpus; ++g) {
      const std::uint64_t begin = static_cast<std::uint64_t>(g) * experts / gpus;
      const std::uint64_t end = static_cast<std::uint64_t>(g + 1) * experts / gpus;
      for (std::uint64_t e = begin; e < end; ++e) gpu[e] = g;
    }
  }
  return gpu;
}

std::vector<std::uint64_t> expert_loads(const TraceRecord& record, const TraceHeader& header) {
  std::vector<std::uint64_t> load(header.num_experts, 0);
  for (std::uint32_t s = 0; s < header.num_ranks; ++s)
    for (std::uint32_t e = 0; e < header.num_experts; ++e) load[e] += record.count(s, e, header.num_experts);
  return load;
}

RecordLoad record_load(const TraceRecord& record, const TraceHeader& header,
                       const std::vector<std::uint32_t>& gpu_of_expert, std::uint32_t gpus) {
  RecordLoad out;
  const std::vector<std::uint64_t> load = expert_loads(record, header);
  out.tokens = record_num_tokens(record, header);
  for (std::uint32_t e = 0; e < header.num_experts; ++e) {
    out.assignments += load[e];
    if (load[e] > load[out.hottest_expert]) out.hottest_expert = e;
  }
  if (out.assignments == 0) return out;
  const double total = static_cast<double>(out.assignments);
  out.hot_over_mean = static_cast<double>(load[out.hottest_expert]) / (total / header.num_experts);
  if (gpu_of_expert.empty() || gpus == 0) return out;
  std::vector<std::uint64_t> gpu_load(gpus, 0);
  for (std::uint32_t e = 0; e < header.num_experts; ++e) gpu_load[gpu_of_expert[e]] += load[e];
  for (std::uint32_t g = 0; g < gpus; ++g)
    if (gpu_load[g] > gpu_load[out.busiest_gpu]) out.busiest_gpu = g;
  out.gpu_max_over_mean = static_cast<double>(gpu_load[out.busiest_gpu]) / (total / gpus);
  return out;
}

}  // namespace epsim
