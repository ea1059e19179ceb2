// The per-layer part of `epsim trace stats`, read in one streaming pass (memory: a few vectors of
// num_experts per layer, whatever the trace length). For every layer:
//  - records, and the mean and max over its non-empty records of hot/mean (hottest expert load /
//    mean expert load) and, with --ep N, of the max / mean GPU load under static EP (expert_load.hpp);
//  - the three hottest experts over the whole trace, each with its share of the layer's assignments;
//  - drift over steps: the layer's expert loads summed over each step's micro-batches give a
//    distribution p_s over experts; drift is the mean, over consecutive steps s, s' that have the
//    layer, of the total variation distance TV(p_s, p_s') = 1/2 sum_e |p_s[e] - p_s'[e]| (0: the same
//    popularity every step; 1: disjoint experts), and its max. "-" with fewer than two steps.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "traces/text/expert_load.hpp"

namespace epsim {

struct LayerSummary {
  std::uint32_t layer_id = 0;
  std::uint64_t records = 0, nonempty = 0, assignments = 0;
  double hot_mean = 0, hot_max = 0, gpu_mean = 0, gpu_max = 0;
  std::vector<std::pair<std::uint32_t, double>> hottest;  ///< (expert, share), up to 3, hottest first
  std::uint64_t drift_pairs = 0;
  double drift_mean = 0, drift_max = 0;
};

/// `ep` = 0: no GPU figures. Throws InputError on a bad trace or an --ep outside 1..num_experts.
std::vector<LayerSummary> summarize_layers(const std::string& path, std::uint32_t ep, ExpertLayout layout);
void write_layer_summary(const std::string& path, std::uint32_t ep, ExpertLayout layout, std::ostream& out);

}  // namespace epsim
