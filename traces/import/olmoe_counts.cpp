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

/// The first of `keys` the document has ("" when none).
std::string first_key(const json& doc, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (doc.contains(k)) return k;
  return "";
}

/// A text label of the file, or "" when absent (a label of another type is an error).
std::string get_label(const json& doc, const std::string& file, const char* key) {
  if (!doc.contains(key)) return "";
  return json_string(doc.at(key), file, key);
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

  if (!doc.contains("counts") || !doc.at("counts").is_array() || doc.at("counts").empty())
    throw InputError(file, "counts", "expected a non-empty array with one array of counts per layer");
  const json& rows = doc.at("counts");
  const std::string top_k_key = first_key(doc, {"top_k_counted", "top_k"});
  if (top_k_key.empty()) throw InputError(file, "top_k_counted", "missing key (top_k_counted or top_k)");
  std::uint32_t experts = 0;
  if (doc.contains("num_experts"))
    experts = static_cast<std::uint32_t>(get_uint(doc, file, "num_experts", 65536));
  else if (rows[0].is_array() && rows[0].size() <= 65536)
    experts = static_cast<std::uint32_t>(rows[0].size());
  const std::uint32_t top_k = static_cast<std::uint32_t>(get_uint(doc, file, top_k_key, 1024));
  if (experts < 1 || top_k < 1 || top_k > experts)
    throw InputError(file, top_k_key, "needs 1 <= " + top_k_key + " <= num_experts");
  const std::string layers_key = first_key(doc, {"layers", "layer_ids"});
  std::vector<std::uint32_t> layer_ids;
  if (layers_key.empty()) {
    for (std::uint32_t l = 0; l < rows.size(); ++l) layer_ids.push_back(l);
  } else {
    if (!doc.at(layers_key).is_array() || doc.at(layers_key).empty())
      throw InputError(file, layers_key, "expected a non-empty array of layer ids");
    for (std::size_t i = 0; i < doc.at(layers_key).size(); ++i)
      layer_ids.push_back(static_cast<std::uint32_t>(json_integer(doc.at(layers_key)[i], 0, 0xffffffffll, file,
                                                                  layers_key + "[" + std::to_string(i) + "]")));
  }
  if (rows.size() != layer_ids.size())
    throw InputError(file, "counts",
                     "expected one array of counts per entry of " + layers_key + " (" +
                         std::to_string(layer_ids.size()) + "), found " + std::to_string(rows.size()));
  std::vector<std::vector<double>> weights(layer_ids.size(), std::vector<double>(experts));
  for (std::size_t l = 0; l < layer_ids.size(); ++l) {
    const json& row = doc.at("counts")[l];
    const std::string key = "counts[" + std::to_string(l) + "]";
    if (!row.is_array() || row.size() != experts)
      throw InputError(file, key, "expected " + std::to_string(experts) + " counts (num_experts)");
    for (std::uint32_t e = 0; e < experts; ++e) {
      // The counts are sampling weights: integers, or fractions (averages over steps) as they are.
      weights[l][e] = json_number(row[e], 0.0, 1e300, file, key + "[" + std::to_string(e) + "]");
    }
    if (count_positive(weights[l]) < top_k)
      throw InputError(file, key,
                       "fewer than " + top_k_key + " = " + std::to_string(top_k) +
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
  // Labels from the file (or the user); the sampling that made the micro-batches is stated after them.
  std::string from_file = get_label(doc, file, "provenance");
  const std::string model = get_label(doc, file, "model"), derived = get_label(doc, file, "derived_from");
  if (!model.empty()) from_file += (from_file.empty() ? "" : "; ") + std::string("model '") + model + "'";
  if (!derived.empty()) from_file += (from_file.empty() ? "" : "; ") + std::string("derived from '") + derived + "'";
  if (from_file.empty()) from_file = "per-layer expert counts of " + std::filesystem::path(file).filename().string();
  header.provenance = provenance_label(from_file, get_label(doc, file, "licence"), o.labels) +
                      "; used as a popularity profile, micro-batches sampled by: epsim trace import olmoe-counts " +
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
