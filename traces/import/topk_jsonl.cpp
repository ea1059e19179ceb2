#include "traces/import/topk_jsonl.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <vector>

#include "sim/core/input_error.hpp"
#include "sim/core/json_input.hpp"
#include "traces/format/rank_slices.hpp"
#include "traces/format/trace_writer.hpp"

namespace epsim {

namespace {

using nlohmann::json;

struct JsonlHeader {
  std::uint32_t experts = 0, top_k = 0, ranks = 0;  ///< ranks 0 = not stated
  std::vector<std::uint32_t> layer_ids;             ///< empty = not stated
  std::string provenance, licence;
};

struct TokenLine {
  std::uint32_t step = 0, micro_batch = 0, layer_id = 0;
  bool has_src = false;
  std::uint32_t src_rank = 0;
  std::vector<std::uint16_t> experts;
};

/// Reads the file line by line, skipping blank lines, parsing each as one JSON object.
class JsonlLines {
 public:
  explicit JsonlLines(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) throw InputError(path, "", std::string("cannot open: ") + std::strerror(errno));
  }
  bool next(json& out) {
    std::string line;
    while (std::getline(in_, line)) {
      ++line_no_;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      out = parse_json(line, path_, line_no_);
      if (!out.is_object()) fail("expected one JSON object per line");
      return true;
    }
    if (in_.bad()) fail("read error");
    return false;
  }
  const std::string& path() const { return path_; }
  std::string place() const { return "line " + std::to_string(line_no_); }
  [[noreturn]] void fail(const std::string& message) const { throw InputError(path_, place(), message); }

 private:
  std::string path_;
  std::ifstream in_;
  std::uint64_t line_no_ = 0;
};

std::uint32_t get_u32(const JsonlLines& lines, const json& obj, const char* key, std::uint32_t max) {
  const auto v = json_integer_if(obj.at(key), 0, max);
  if (!v)
    lines.fail(std::string("\"") + key + "\" must be an integer between 0 and " + std::to_string(max) + ", found " +
               json_excerpt(obj.at(key)));
  return static_cast<std::uint32_t>(*v);
}

/// Reads line 1: the header when it has "format" (then `first_token` stays empty), else the file has
/// no header: the shape comes from the options and line 1 is the first token (kept in `first_token`).
JsonlHeader parse_header(JsonlLines& lines, const TopkJsonlOptions& o, json& first_token) {
  json h;
  first_token = json();
  if (!lines.next(h)) throw InputError(lines.path(), "", "empty file: expected the epsim-topk-jsonl header line or a token");
  JsonlHeader out;
  if (!h.contains("format")) {
    if (o.experts == 0 || o.top_k == 0)
      lines.fail("line 1 is not an epsim-topk-jsonl header (no \"format\"): give --experts and --top-k for a file "
                 "without header");
    out.experts = o.experts;
    out.top_k = o.top_k;
    if (out.top_k > out.experts) lines.fail("--top-k must not exceed --experts");
    first_token = std::move(h);
    return out;
  }
  if (h.at("format") != "epsim-topk-jsonl")
    lines.fail("the first line must be the header {\"format\":\"epsim-topk-jsonl\",\"version\":1,...}");
  if (!h.contains("version") || h.at("version") != 1)
    lines.fail("unsupported epsim-topk-jsonl version (this epsim reads version 1)");
  for (const char* key : {"num_experts", "top_k"})
    if (!h.contains(key)) lines.fail(std::string("the header lacks \"") + key + "\"");
  out.experts = get_u32(lines, h, "num_experts", 65536);
  out.top_k = get_u32(lines, h, "top_k", 1024);
  if (out.experts < 1 || out.top_k < 1 || out.top_k > out.experts)
    lines.fail("the header needs 1 <= top_k <= num_experts");
  if (o.experts != 0 && o.experts != out.experts)
    lines.fail("--experts " + std::to_string(o.experts) + " differs from the header's num_experts " + std::to_string(out.experts));
  if (o.top_k != 0 && o.top_k != out.top_k)
    lines.fail("--top-k " + std::to_string(o.top_k) + " differs from the header's top_k " + std::to_string(out.top_k));
  if (h.contains("num_ranks")) {
    out.ranks = get_u32(lines, h, "num_ranks", 65536);
    if (out.ranks < 1) lines.fail("\"num_ranks\" must be at least 1");
  }
  if (h.contains("layer_ids")) {
    const json& ids = h.at("layer_ids");
    if (!ids.is_array() || ids.empty()) lines.fail("\"layer_ids\" must be a non-empty array of integers");
    for (const json& v : ids) {
      const auto id = json_integer_if(v, 0, 0xffffffffll);
      if (!id) lines.fail("\"layer_ids\" must hold integers between 0 and 4294967295, found " + json_excerpt(v));
      out.layer_ids.push_back(static_cast<std::uint32_t>(*id));
    }
    std::vector<std::uint32_t> sorted = out.layer_ids;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) lines.fail("\"layer_ids\" repeats an id");
  }
  if (h.contains("provenance") && h.at("provenance").is_string()) out.provenance = h.at("provenance");
  if (h.contains("licence") && h.at("licence").is_string()) out.licence = h.at("licence");
  return out;
}

void parse_token(const JsonlLines& lines, const json& obj, const JsonlHeader& h, const TopkJsonlOptions& o,
                 TokenLine& out) {
  const char* step = o.field_step.c_str();
  const char* micro_batch = o.field_micro_batch.c_str();
  const char* layer = o.field_layer.c_str();
  const char* src = o.field_rank.c_str();
  out.step = obj.contains(step) ? get_u32(lines, obj, step, 0xffffffffull) : 0;
  out.micro_batch = obj.contains(micro_batch) ? get_u32(lines, obj, micro_batch, 0xffffffffull) : 0;
  if (!obj.contains(layer)) lines.fail("the token lacks \"" + o.field_layer + "\"");
  out.layer_id = get_u32(lines, obj, layer, 0xffffffffull);
  out.has_src = obj.contains(src);
  if (out.has_src) out.src_rank = get_u32(lines, obj, src, 0xffffffffull);
  const std::string& experts = o.field_experts;
  if (!obj.contains(experts) || !obj.at(experts).is_array())
    lines.fail("the token lacks \"" + experts + "\" (an array of " + std::to_string(h.top_k) + " expert ids)");
  const json& ids = obj.at(experts);
  if (ids.size() != h.top_k)
    lines.fail("\"" + experts + "\" has " + std::to_string(ids.size()) + " ids, top_k is " + std::to_string(h.top_k));
  out.experts.clear();
  for (const json& v : ids) {
    const auto id = json_integer_if(v, 0, static_cast<std::int64_t>(h.experts) - 1);
    if (!id)
      lines.fail("expert id " + json_excerpt(v) + " is not an integer in [0, num_experts = " +
                 std::to_string(h.experts) + ")");
    const auto e = static_cast<std::uint16_t>(*id);
    if (std::find(out.experts.begin(), out.experts.end(), e) != out.experts.end())
      lines.fail("expert " + std::to_string(e) + " appears twice in \"" + experts + "\"");
    out.experts.push_back(e);
  }
}

}  // namespace

void import_topk_jsonl(const std::string& path, std::uint32_t ranks, const std::string& out_path, bool overwrite) {
  TopkJsonlOptions o;
  o.ranks = ranks;
  import_topk_jsonl(path, o, out_path, overwrite);
}

void import_topk_jsonl(const std::string& path, const TopkJsonlOptions& o, const std::string& out_path,
                       bool overwrite) {
  const std::uint32_t ranks = o.ranks;
  // Pass 1: the header, the layer ids and whether tokens carry src_rank.
  std::vector<std::uint32_t> layer_ids;
  bool any_src = false;
  JsonlHeader h;
  {
    JsonlLines lines(path);
    json obj;
    h = parse_header(lines, o, obj);
    std::set<std::uint32_t> seen;
    TokenLine token;
    bool first = true;
    while (!obj.is_null() || lines.next(obj)) {
      parse_token(lines, obj, h, o, token);
      obj = json();
      if (first) any_src = token.has_src;
      if (token.has_src != any_src)
        lines.fail("\"" + o.field_rank + "\" must be given on every token or on none (the first token " +
                   std::string(any_src ? "has" : "lacks") + " it)");
      first = false;
      seen.insert(token.layer_id);
    }
    if (first) lines.fail("no token lines after the header");
    layer_ids = h.layer_ids.empty() ? std::vector<std::uint32_t>(seen.begin(), seen.end()) : h.layer_ids;
  }
  if (ranks != 0 && h.ranks != 0 && ranks != h.ranks)
    throw InputError(
        path, "line 1",
        "the header's num_ranks " + std::to_string(h.ranks) + " differs from --ranks " + std::to_string(ranks));
  const std::uint32_t num_ranks = ranks != 0 ? ranks : h.ranks;
  if (num_ranks == 0)
    throw InputError(path, "line 1",
                     "the number of source ranks is unknown: pass --ranks or put num_ranks in the header");
  std::map<std::uint32_t, std::uint32_t> layer_index;
  for (std::uint32_t i = 0; i < layer_ids.size(); ++i) layer_index[layer_ids[i]] = i;

  TraceHeader header;
  header.num_ranks = num_ranks;
  header.num_experts = h.experts;
  header.top_k = h.top_k;
  header.num_layers = static_cast<std::uint32_t>(layer_ids.size());
  header.layer_ids = layer_ids;
  header.has_token_ids = true;
  header.source_format = "topk-jsonl";
  const std::string labels = provenance_label(h.provenance, h.licence, o.labels);
  header.provenance = (labels.empty() ? std::string() : labels + "; ") +
                      "imported by epsim trace import topk-jsonl from " +
                      std::filesystem::path(path).filename().string();
  header.rank_assignment = any_src ? "recorded: every token carries its source rank (" + o.field_rank + ")"
                                   : contiguous_slices_text(num_ranks) + " (the recording has no source ranks)";

  // Pass 2: one record per group of contiguous tokens.
  TraceWriter writer(out_path, header, overwrite);
  JsonlLines lines(path);
  json obj;
  parse_header(lines, o, obj);
  TraceRecord record;
  bool open = false;
  const auto flush = [&]() {
    const std::size_t n = record.token_src_rank.size();
    record.counts.assign(static_cast<std::size_t>(num_ranks) * h.experts, 0);
    for (std::size_t t = 0; t < n; ++t) {
      if (!any_src) record.token_src_rank[t] = contiguous_slice_rank(t, n, num_ranks);
      for (std::uint32_t j = 0; j < h.top_k; ++j)
        ++record.counts[static_cast<std::size_t>(record.token_src_rank[t]) * h.experts +
                        record.token_experts[t * h.top_k + j]];
    }
    writer.write(record);
  };
  TokenLine token;
  while (!obj.is_null() || lines.next(obj)) {
    parse_token(lines, obj, h, o, token);
    obj = json();
    const auto it = layer_index.find(token.layer_id);
    if (it == layer_index.end())
      lines.fail("layer " + std::to_string(token.layer_id) + " is not in the header's layer_ids");
    if (token.has_src && token.src_rank >= num_ranks)
      lines.fail(o.field_rank + " " + std::to_string(token.src_rank) + " is not below the number of ranks " +
                 std::to_string(num_ranks));
    const auto key = std::make_tuple(token.step, token.micro_batch, it->second);
    const auto current = std::make_tuple(record.step, record.micro_batch, record.layer);
    if (!open || key != current) {
      if (open && key < current)
        lines.fail("token of (step " + std::to_string(token.step) + ", micro_batch " +
                   std::to_string(token.micro_batch) + ", layer " + std::to_string(token.layer_id) +
                   ") after a later group: the tokens of one (step, micro_batch, layer) must be contiguous "
                   "and the groups in increasing order (layers in layer_ids order)");
      if (open) flush();
      record.step = token.step;
      record.micro_batch = token.micro_batch;
      record.layer = it->second;
      record.token_src_rank.clear();
      record.token_experts.clear();
      open = true;
    }
    record.token_src_rank.push_back(token.src_rank);
    record.token_experts.insert(record.token_experts.end(), token.experts.begin(), token.experts.end());
  }
  if (open) flush();
  writer.close();
}

}  // namespace epsim
