#include "traces/import/olmoe_counts.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "sim/core/input_error.hpp"
#include "sim/core/json_input.hpp"
#include "traces/format/rank_slices.hpp"
#include "traces/format/trace_writer.hpp"
#include "traces/synth/sampled_record.hpp"
#include "traces/synth/topk_sampler.hpp"

namespace epsim {

namespace {

using nlohmann::json;

std::int64_t get_uint(const json& doc, const std::string& file, const std::string& key, std::int64_t max) {
  if (!doc.contains(key)) throw InputError(file, key, "missing key");
  return json_integer(doc.at(key), 0, max, file, key);
}

std::string get_text(const json& doc, const char* key) {
  return doc.contains(key) && doc.at(key).is_string() ? doc.at(key).get<std::string>() : std::string("?");
}

}  // namespace

void import_olmoe_counts(const std::string& file, const OlmoeImportOptions& o, const std::string& out_path,
                         bool overwrite) {
  const char* cli = "epsim trace import olmoe-counts";
  if (o.ranks < 1 || o.ranks > 65536) throw InputError(cli, "", "--ranks must be between 1 and 65536");
  if (o.tokens_per_rank < 1) throw InputError(cli, "", "--tokens-per-rank must be at least 1");
  if (static_cast<std::uint64_t>(o.ranks) * o.tokens_per_rank > 0xffffffffull)
    throw InputError(cli, "", "--ranks * --tokens-per-rank must stay below 2^32 tokens per record");
  if (o.micro_batches < 1) throw InputError(cli, "", "--micro-batches must be at least 1");

  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file, "", std::string("cannot open: ") + std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  if (in.bad()) throw InputError(file, "", "read error");
  const json doc = parse_json(text, file);
  if (!doc.is_object()) throw InputError(file, "", "expected a JSON object with layers, num_experts, counts");

  const std::uint32_t experts = static_cast<std::uint32_t>(get_uint(doc, file, "num_experts", 65536));
  const std::uint32_t top_k = static_cast<std::uint32_t>(get_uint(doc, file, "top_k_counted", 1024));
  if (experts < 1 || top_k < 1 || top_k > experts)
    throw InputError(file, "top_k_counted", "needs 1 <= top_k_counted <= num_experts");
  if (!doc.contains("layers") || !doc.at("layers").is_array() || doc.at("layers").empty())
    throw InputError(file, "layers", "expected a non-empty array of layer ids");
  std::vector<std::uint32_t> layer_ids;
  for (std::size_t i = 0; i < doc.at("layers").size(); ++i) {
    layer_ids.push_back(static_cast<std::uint32_t>(
        json_integer(doc.at("layers")[i], 0, 0xffffffffll, file, "layers[" + std::to_string(i) + "]")));
  }
  if (!doc.contains("counts") || !doc.at("counts").is_array() || doc.at("counts").size() != layer_ids.size())
    throw InputError(file, "counts",
                     "expected one array of counts per entry of layers (" + std::to_string(layer_ids.size()) + ")");
  std::vector<std::vector<double>> weights(layer_ids.size(), std::vector<double>(experts));
  for (std::size_t l = 0; l < layer_ids.size(); ++l) {
    const json& row = doc.at("counts")[l];
    const std::string key = "counts[" + std::to_string(l) + "]";
    if (!row.is_array() || row.size() != experts)
      throw InputError(file, key, "expected " + std::to_string(experts) + " counts (num_experts)");
    for (std::uint32_t e = 0; e < experts; ++e) {
      // Counts beyond 2^53 would lose their last digits as weights; no profile comes near.
      weights[l][e] = static_cast<double>(
          json_integer(row[e], 0, std::int64_t{1} << 53, file, key + "[" + std::to_string(e) + "]"));
    }
    if (count_positive(weights[l]) < top_k)
      throw InputError(file, key,
                       "fewer than top_k_counted = " + std::to_string(top_k) +
                           " experts have a non-zero count: cannot draw distinct top-k experts");
  }

  TraceHeader header;
  header.num_ranks = o.ranks;
  header.num_experts = experts;
  header.top_k = top_k;
  header.num_layers = static_cast<std::uint32_t>(layer_ids.size());
  header.layer_ids = layer_ids;
  header.has_token_ids = o.token_ids;
  header.source_format = "olmoe-counts";
  header.provenance = "OLMoE routing analysis, allenai/OLMoE (Apache-2.0): per-layer expert counts of model '" +
                      get_text(doc, "model") + "' (derived from '" + get_text(doc, "derived_from") +
                      "'), used as a popularity profile; micro-batches sampled by: epsim trace import olmoe-counts " +
                      std::filesystem::path(file).filename().string() + " --ranks " + std::to_string(o.ranks) +
                      " --tokens-per-rank " + std::to_string(o.tokens_per_rank) + " --micro-batches " +
                      std::to_string(o.micro_batches) + " --seed " + std::to_string(o.seed) +
                      (o.token_ids ? " --token-ids" : "");
  header.rank_assignment = contiguous_slices_text(o.ranks) +
                           " with n = R * T, T = " + std::to_string(o.tokens_per_rank) + " sampled tokens per rank";

  TraceWriter writer(out_path, header, overwrite);
  std::vector<TopkSampler> sampler(1);
  TraceRecord record;
  for (std::uint32_t m = 0; m < o.micro_batches; ++m) {
    for (std::uint32_t l = 0; l < header.num_layers; ++l) {
      sampler[0].reset(weights[l], top_k);
      record.step = 0;
      record.micro_batch = m;
      record.layer = l;
      Xoshiro256ss rng(record_stream_seed(o.seed, 5, 0, m, l));
      fill_sampled_record(record, sampler, o.ranks, experts, o.tokens_per_rank, o.token_ids, rng);
      writer.write(record);
    }
  }
  writer.close();
}

}  // namespace epsim
