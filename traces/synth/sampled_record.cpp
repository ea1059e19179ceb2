#include "traces/synth/sampled_record.hpp"

#include <cassert>

namespace epsim {

void fill_sampled_record(TraceRecord& record, std::vector<TopkSampler>& samplers, std::uint32_t num_ranks,
                         std::uint32_t num_experts, std::uint32_t tokens_per_rank, bool with_token_ids,
                         Xoshiro256ss& rng) {
  assert(samplers.size() == 1 || samplers.size() == num_ranks);
  const std::uint32_t k = samplers.front().k();
  const std::size_t tokens = static_cast<std::size_t>(num_ranks) * tokens_per_rank;
  record.counts.assign(static_cast<std::size_t>(num_ranks) * num_experts, 0);
  if (with_token_ids) {
    record.token_src_rank.resize(tokens);
    record.token_experts.resize(tokens * k);
  } else {
    record.token_src_rank.clear();
    record.token_experts.clear();
  }
  std::vector<std::uint16_t> local(k);
  std::size_t t = 0;
  for (std::uint32_t s = 0; s < num_ranks; ++s) {
    TopkSampler& sampler = samplers.size() == 1 ? samplers.front() : samplers[s];
    std::uint32_t* row = &record.counts[static_cast<std::size_t>(s) * num_experts];
    for (std::uint32_t i = 0; i < tokens_per_rank; ++i, ++t) {
      std::uint16_t* ids = with_token_ids ? &record.token_experts[t * k] : local.data();
      sampler.sample(rng, ids);
      for (std::uint32_t j = 0; j < k; ++j) ++row[ids[j]];
      if (with_token_ids) record.token_src_rank[t] = s;
    }
  }
}

std::uint64_t record_stream_seed(std::uint64_t seed, std::uint64_t stream, std::uint32_t step,
                                 std::uint32_t micro_batch, std::uint32_t layer) {
  return mix_seed(seed, {stream, step, micro_batch, layer});
}

}  // namespace epsim
