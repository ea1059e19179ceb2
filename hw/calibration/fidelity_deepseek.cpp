#include "hw/calibration/fidelity_deepseek.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "sim/balancers/static_ep.hpp"
#include "sim/core/input_error.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "traces/synth/rng.hpp"

namespace epsim {

TraceRecord group_limited_record(const ModelSpec& model, int ranks, std::uint32_t tokens_per_rank, std::uint64_t seed) {
  const int experts = model.num_experts;
  const bool limited = model.routing.limited();
  const int groups = limited ? model.routing.groups : 1;
  const int picks = limited ? model.routing.groups_per_token : 1;
  const int per_group = experts / groups;
  TraceRecord record;
  record.counts.assign(static_cast<std::size_t>(ranks) * static_cast<std::size_t>(experts), 0);
  std::vector<int> group_ids(static_cast<std::size_t>(groups));
  std::vector<int> candidates;
  for (int r = 0; r < ranks; ++r) {
    Xoshiro256ss rng(mix_seed(seed, {static_cast<std::uint64_t>(r)}));
    for (std::uint32_t t = 0; t < tokens_per_rank; ++t) {
      // Partial Fisher-Yates: the first `picks` groups, then the first top_k of their experts.
      for (int g = 0; g < groups; ++g) group_ids[static_cast<std::size_t>(g)] = g;
      for (int i = 0; i < picks; ++i)
        std::swap(group_ids[static_cast<std::size_t>(i)],
                  group_ids[static_cast<std::size_t>(i + static_cast<int>(rng.below(static_cast<std::uint64_t>(groups - i))))]);
      candidates.clear();
      for (int i = 0; i < picks; ++i)
        for (int e = 0; e < per_group; ++e) candidates.push_back(group_ids[static_cast<std::size_t>(i)] * per_group + e);
      const int n = static_cast<int>(candidates.size());
      for (int j = 0; j < model.top_k; ++j) {
        std::swap(candidates[static_cast<std::size_t>(j)],
                  candidates[static_cast<std::size_t>(j + static_cast<int>(rng.below(static_cast<std::uint64_t>(n - j))))]);
        ++record.counts[static_cast<std::size_t>(r) * static_cast<std::size_t>(experts) +
                        static_cast<std::size_t>(candidates[static_cast<std::size_t>(j)])];
        record.token_experts.push_back(static_cast<std::uint16_t>(candidates[static_cast<std::size_t>(j)]));
      }
      // Token ids let the replay count the copies the EP kernels send (once per GPU and node).
      record.token_src_rank.push_back(static_cast<std::uint32_t>(r));
    }
  }
  return record;
}

namespace {

/// The kernels of the section, in layer order: (pass, timeline name, heading).
struct KernelColumn {
  Pass pass;
  const char* name;
  const char* heading;
};
const KernelColumn kColumns[] = {
    {Pass::forward, "dispatch", "dispatch"},
    {Pass::forward, "gemm fwd", "expert GEMMs"},
    {Pass::forward, "combine", "combine"},
    {Pass::backward, "grad dispatch", "grad dispatch"},
    {Pass::backward, "gemm dgrad", "dgrad GEMMs"},
    {Pass::backward, "gemm wgrad", "wgrad GEMMs"},
    {Pass::backward, "grad combine", "grad combine"},
};

std::string us(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

std::string deepseek_section(const ModelSpec& model, const HardwareSpec& hardware, const std::vector<int>& eps,
                             const std::string& model_path, const std::string& hardware_path) {
  std::ostringstream out;
  out << "## DeepSeek-V3 layer on " << hardware.name << "\n\n"
      << "One MoE layer of `" << model_path << "` (hidden " << model.hidden_size << ", " << model.num_experts
      << " routed experts, top-" << model.top_k;
  if (model.routing.limited())
    out << " within " << model.routing.groups_per_token << " of " << model.routing.groups << " groups";
  out << ", expert FFN " << model.expert_ffn_size << ", " << model.shared_experts << " shared; dispatch "
      << to_string(model.precision.dispatch) << ", combine " << to_string(model.precision.combine) << ", GEMMs "
      << to_string(model.precision.gemm) << ") on `" << hardware_path << "`, static EP, forward and backward. Routing: "
      << kDeepSeekTokensPerRank << " tokens per rank, uniform popularity, group-limited top-k drawn in-process "
      << "(seed " << kDeepSeekSeed << "). Each kernel's time is its span on a GPU (start to end, waits for "
      << "peers included), mean and max over GPUs, in us; the pass times are the layer's critical paths.\n\n";
  out << "| EP | nodes |";
  for (const KernelColumn& c : kColumns) out << " " << c.heading << " mean / max |";
  out << " forward | backward |\n|---:|---:|";
  for (std::size_t i = 0; i < std::size(kColumns); ++i) out << "---:|";
  out << "---:|---:|\n";
  for (int ep : eps) {
    if (ep % hardware.gpus_per_node != 0 && ep > hardware.gpus_per_node)
      throw InputError(hardware_path, "gpus_per_node", "EP " + std::to_string(ep) + " is not a whole number of nodes");
    HardwareSpec hw = hardware;
    hw.nodes = std::max(1, ep / hw.gpus_per_node);
    const TraceRecord record = group_limited_record(model, ep, kDeepSeekTokensPerRank, kDeepSeekSeed);
    BalancerContext context;
    context.num_gpus = ep;
    context.gpus_per_node = hw.gpus_per_node;
    context.model = &model;
    context.hardware = &hw;
    StaticEp balancer;
    const Plan plan = balancer.plan(record, context);
    const std::vector<std::int64_t> local(static_cast<std::size_t>(ep), kDeepSeekTokensPerRank);
    const LayerResult result = simulate_layer(hw, model, plan, local, true, &record);
    out << "| " << ep << " | " << hw.nodes << " |";
    for (const KernelColumn& c : kColumns) {
      std::vector<double> span_us(static_cast<std::size_t>(ep), 0);
      for (const TimelineEvent& e : result.timeline.events) {
        if (e.pass != c.pass || e.name != c.name || e.gpu >= ep) continue;
        if (e.track != Track::compute && e.track != Track::comm_kernel) continue;
        span_us[static_cast<std::size_t>(e.gpu)] += ps_to_us(e.end_ps - e.start_ps);
      }
      double sum = 0, max = 0;
      for (double v : span_us) {
        sum += v;
        max = std::max(max, v);
      }
      out << " " << us(sum / ep) << " / " << us(max) << " |";
    }
    out << " " << us(ps_to_us(result.forward_ps)) << " | " << us(ps_to_us(result.backward_ps)) << " |\n";
  }
  out << "\n";
  return out.str();
}

}  // namespace epsim
