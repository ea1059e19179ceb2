#include "traces/import/expert_load.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/core/input_error.hpp"
#include "sim/core/json_input.hpp"
#include "traces/format/trace_check.hpp"
#include "traces/format/trace_writer.hpp"
#include "traces/import/count_rounding.hpp"
#include "traces/import/text_lines.hpp"

namespace epsim {

namespace {

using nlohmann::json;

/// loads[pass][layer][expert], with the place each row came from for messages.
struct LoadTable {
  std::vector<std::vector<std::vector<double>>> loads;
  std::vector<std::vector<std::string>> places;
  std::string provenance, licence;  ///< labels found in a JSON object
};

/// Names under which the frameworks keep their loads, tried in this order when --key is not given.
const char* const kKnownKeys[] = {"logical_count", "expert_load_window", "expert_load_pass", "weight",
                                  "tokens_per_expert", "expert_load", "counts"};

std::string index_place(const std::string& base, std::size_t i) { return base + "[" + std::to_string(i) + "]"; }

std::vector<double> json_row(const json& row, const std::string& file, const std::string& place) {
  json_array(row, file, place);
  std::vector<double> out;
  out.reserve(row.size());
  for (std::size_t e = 0; e < row.size(); ++e) out.push_back(json_number(row[e], 0.0, 1e18, file, index_place(place, e)));
  return out;
}

LoadTable read_json(const std::string& file, const std::string& text, const std::string& key) {
  const json doc = parse_json(text, file);
  LoadTable t;
  const json* loads = &doc;
  std::string base = "";
  if (doc.is_object()) {
    std::string found_key = key;
    if (found_key.empty())
      for (const char* k : kKnownKeys)
        if (doc.contains(k)) {
          found_key = k;
          break;
        }
    if (found_key.empty())
      throw InputError(file, "", "no loads found: expected --key NAME or one of logical_count, expert_load_window, "
                                 "expert_load_pass, weight, tokens_per_expert, expert_load, counts");
    loads = &json_member(doc, found_key.c_str(), file, "");
    base = found_key;
    if (doc.contains("provenance")) t.provenance = json_string(doc.at("provenance"), file, "provenance");
    if (doc.contains("licence")) t.licence = json_string(doc.at("licence"), file, "licence");
  } else if (!key.empty()) {
    throw InputError(file, "", "--key " + key + " given, but the file is not a JSON object");
  }
  json_array(*loads, file, base);
  if (loads->empty()) throw InputError(file, base, "expected a non-empty array of loads");
  const bool three_d = (*loads)[0].is_array() && !(*loads)[0].empty() && (*loads)[0][0].is_array();
  if (three_d) {
    for (std::size_t p = 0; p < loads->size(); ++p) {
      const std::string pp = index_place(base, p);
      const json& pass = json_array((*loads)[p], file, pp);
      t.loads.emplace_back();
      t.places.emplace_back();
      for (std::size_t l = 0; l < pass.size(); ++l) {
        t.loads.back().push_back(json_row(pass[l], file, index_place(pp, l)));
        t.places.back().push_back(index_place(pp, l));
      }
    }
  } else {
    t.loads.emplace_back();
    t.places.emplace_back();
    for (std::size_t l = 0; l < loads->size(); ++l) {
      t.loads[0].push_back(json_row((*loads)[l], file, index_place(base, l)));
      t.places[0].push_back(index_place(base, l));
    }
  }
  // Replicas of one logical expert (vLLM, SGLang physical experts) fold into it.
  for (const char* map_key : {"physical_to_logical_map", "last_physical_to_logical_map"}) {
    if (!doc.is_object() || !doc.contains(map_key)) continue;
    const json& map = json_array(doc.at(map_key), file, map_key);
    std::vector<std::vector<std::uint32_t>> logical(map.size());
    std::uint32_t experts = 0;
    for (std::size_t l = 0; l < map.size(); ++l) {
      const json& row = json_array(map[l], file, index_place(map_key, l));
      for (std::size_t p = 0; p < row.size(); ++p) {
        logical[l].push_back(static_cast<std::uint32_t>(
            json_integer(row[p], 0, 65535, file, index_place(index_place(map_key, l), p))));
        experts = std::max(experts, logical[l].back() + 1);
      }
    }
    for (std::size_t p = 0; p < t.loads.size(); ++p) {
      if (t.loads[p].size() != map.size())
        throw InputError(file, map_key,
                         std::to_string(map.size()) + " layers, but the loads have " + std::to_string(t.loads[p].size()));
      for (std::size_t l = 0; l < map.size(); ++l) {
        if (t.loads[p][l].size() != logical[l].size())
          throw InputError(file, t.places[p][l],
                           std::to_string(t.loads[p][l].size()) + " physical experts, but " + map_key + "[" +
                               std::to_string(l) + "] maps " + std::to_string(logical[l].size()));
        std::vector<double> folded(experts, 0.0);
        for (std::size_t q = 0; q < logical[l].size(); ++q) folded[logical[l][q]] += t.loads[p][l][q];
        t.loads[p][l] = folded;
      }
    }
    break;
  }
  return t;
}

LoadTable read_text(const std::string& file) {
  TextLines lines(file);
  LoadTable t;
  t.loads.emplace_back();
  t.places.emplace_back();
  std::string line;
  bool header_allowed = true;
  while (lines.next(line)) {
    const std::size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    for (char& c : line)
      if (c == ',' || c == ';' || c == '\t') c = ' ';
    std::istringstream words(line);
    std::string word;
    std::vector<double> row;
    bool numeric = true;
    while (words >> word) {
      errno = 0;
      char* end = nullptr;
      const double v = std::strtod(word.c_str(), &end);
      if (end != word.c_str() + word.size() || errno != 0 || !std::isfinite(v)) {
        numeric = false;
        break;
      }
      if (v < 0) lines.fail("negative load " + word + " (loads are token counts)");
      row.push_back(v);
    }
    if (!numeric) {
      if (header_allowed) {  // a first line of column names
        header_allowed = false;
        continue;
      }
      lines.fail("'" + word + "' is not a number (one layer per line: loads separated by commas or spaces)");
    }
    if (row.empty()) continue;
    header_allowed = false;
    t.loads[0].push_back(row);
    t.places[0].push_back(lines.place());
  }
  if (t.loads[0].empty()) throw InputError(file, "", "no loads: expected one line of numbers per layer");
  return t;
}

}  // namespace

void import_expert_load(const std::string& file, const ExpertLoadOptions& o, const std::string& out_path,
                        bool overwrite) {
  const std::string cli = "epsim trace import expert-load";
  if (o.ranks < 1 || o.ranks > 65536) throw InputError(cli, "--ranks", "must be between 1 and 65536");
  if (o.top_k < 1) throw InputError(cli, "--top-k", "must be at least 1");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file, "", std::string("cannot open: ") + std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  const bool is_json = first != std::string::npos && (text[first] == '[' || text[first] == '{');
  if (!is_json && !o.key.empty()) throw InputError(file, "", "--key " + o.key + " given, but the file is not JSON");
  const LoadTable t = is_json ? read_json(file, text, o.key) : read_text(file);

  const std::size_t layers = t.loads[0].size();
  const std::size_t experts = t.loads[0].empty() ? 0 : t.loads[0][0].size();
  if (layers == 0 || experts == 0) throw InputError(file, t.places[0].empty() ? "" : t.places[0][0], "no loads");
  for (std::size_t p = 0; p < t.loads.size(); ++p) {
    if (t.loads[p].size() != layers)
      throw InputError(file, index_place(o.key.empty() ? "pass" : o.key, p),
                       std::to_string(t.loads[p].size()) + " layers, the first pass has " + std::to_string(layers));
    for (std::size_t l = 0; l < layers; ++l)
      if (t.loads[p][l].size() != experts)
        throw InputError(file, t.places[p][l],
                         std::to_string(t.loads[p][l].size()) + " loads, the first layer has " +
                             std::to_string(experts) + " experts");
  }
  std::vector<std::uint32_t> layer_ids = o.layer_ids;
  if (layer_ids.empty())
    for (std::uint32_t l = 0; l < layers; ++l) layer_ids.push_back(l);
  if (layer_ids.size() != layers)
    throw InputError(cli, "--layer-ids",
                     std::to_string(layer_ids.size()) + " ids given, " + file + " has " + std::to_string(layers) +
                         " layers");

  TraceHeader header;
  header.num_ranks = o.ranks;
  header.num_experts = static_cast<std::uint32_t>(std::min<std::size_t>(experts, 0xffffffffu));
  header.top_k = o.top_k;
  header.num_layers = static_cast<std::uint32_t>(layers);
  header.layer_ids = layer_ids;
  header.source_format = o.source.empty() ? "expert-load" : o.source;
  const std::string name = std::filesystem::path(file).filename().string();
  header.provenance = provenance_label(t.provenance.empty() ? "aggregated expert loads of " + name : t.provenance,
                                       t.licence, o.labels);
  header.rank_assignment =
      "spread: the loads have no source rank; expert e's load c is split over R = " + std::to_string(o.ranks) +
      " ranks as floor(c / R) each, the c mod R remaining units to ranks e, e+1, ... (mod R)";
  const std::string problem = check_trace_header(header);
  if (!problem.empty()) throw InputError(file, "", problem);

  TraceWriter writer(out_path, header, overwrite);
  TraceRecord record;
  for (std::size_t p = 0; p < t.loads.size(); ++p) {
    bool all_zero = true;
    for (const auto& row : t.loads[p])
      for (double v : row) all_zero = all_zero && v == 0;
    if (all_zero && t.loads.size() > 1) continue;  // an unused slot of a circular buffer
    for (std::size_t l = 0; l < layers; ++l) {
      const std::vector<double>& row = t.loads[p][l];
      bool integral = true;
      for (double v : row) integral = integral && v == std::floor(v);
      std::vector<std::uint64_t> counts;
      if (integral) {
        std::uint64_t sum = 0;
        for (double v : row) {
          counts.push_back(static_cast<std::uint64_t>(v));
          sum += counts.back();
        }
        if (sum % o.top_k != 0)
          throw InputError(file, t.places[p][l],
                           "the loads sum to " + std::to_string(sum) + ", not a multiple of --top-k " +
                               std::to_string(o.top_k) +
                               " (integer loads are kept exact; each token counts top_k experts)");
      } else {
        counts = round_loads(row, o.top_k);
      }
      record.step = static_cast<std::uint32_t>(p);
      record.micro_batch = 0;
      record.layer = static_cast<std::uint32_t>(l);
      record.counts.assign(static_cast<std::size_t>(o.ranks) * experts, 0);
      for (std::uint32_t e = 0; e < experts; ++e)
        if (!spread_load(counts[e], e, o.ranks, header.num_experts, record.counts))
          throw InputError(file, index_place(t.places[p][l], e), "load too large: more than 2^32-1 per source rank");
      writer.write(record);
    }
  }
  writer.close();
}

}  // namespace epsim
