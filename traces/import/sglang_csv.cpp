#include "traces/import/sglang_csv.hpp"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "sim/core/input_error.hpp"
#include "traces/format/trace_writer.hpp"
#include "traces/import/text_lines.hpp"

namespace epsim {

namespace {

/// The number after the last "rank" of the file name, if there is one.
std::optional<std::uint32_t> rank_in_name(const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  const std::size_t at = name.rfind("rank");
  if (at == std::string::npos) return std::nullopt;
  std::size_t i = at + 4, start = i;
  std::uint64_t v = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && v < 65536) v = v * 10 + (name[i++] - '0');
  if (i == start || v >= 65536) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

std::uint64_t field(const TextLines& lines, const std::string& text, const char* what, std::uint64_t max) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    lines.fail(std::string(what) + " '" + text + "' is not a non-negative integer");
  errno = 0;
  const std::uint64_t v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno != 0 || v > max) lines.fail(std::string(what) + " " + text + " is above " + std::to_string(max));
  return v;
}

}  // namespace

void import_sglang_csv(const std::vector<std::string>& files, const SglangCsvOptions& o, const std::string& out_path,
                       bool overwrite) {
  const std::string cli = "epsim trace import sglang-csv";
  if (files.empty()) throw InputError(cli, "", "expected the per-rank CSV files");
  if (files.size() > 65536) throw InputError(cli, "", "more than 65536 files (source ranks)");
  if (o.experts < 1 || o.experts > 65536) throw InputError(cli, "--experts", "must be between 1 and 65536");
  if (o.top_k < 1 || o.top_k > o.experts) throw InputError(cli, "--top-k", "must be between 1 and --experts");
  const std::uint32_t R = static_cast<std::uint32_t>(files.size());
  // Ranks from the names when every name has one, else the order given.
  std::vector<std::uint32_t> rank_of(R);
  bool named = true;
  for (std::uint32_t f = 0; f < R; ++f) named = named && rank_in_name(files[f]).has_value();
  std::vector<long> file_of_rank(R, -1);
  for (std::uint32_t f = 0; f < R; ++f) {
    rank_of[f] = named ? *rank_in_name(files[f]) : f;
    if (rank_of[f] >= R)
      throw InputError(files[f], "", "rank " + std::to_string(rank_of[f]) + " in the name, but " + std::to_string(R) +
                                         " files were given (ranks 0.." + std::to_string(R - 1) + ")");
    if (file_of_rank[rank_of[f]] >= 0)
      throw InputError(files[f], "", "rank " + std::to_string(rank_of[f]) + " in the name, as in " +
                                         files[static_cast<std::size_t>(file_of_rank[rank_of[f]])]);
    file_of_rank[rank_of[f]] = f;
  }
  // counts[layer id] = R x E matrix; first line of each (layer, expert) of each file for duplicates.
  std::map<std::uint32_t, std::vector<std::uint32_t>> counts;
  for (std::uint32_t f = 0; f < R; ++f) {
    TextLines lines(files[f]);
    std::string line;
    if (!lines.next(line) || line != "layer_id,expert_id,count")
      lines.fail("the first line must be the header layer_id,expert_id,count");
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> seen;
    std::map<std::uint32_t, std::uint64_t> layer_sum;
    while (lines.next(line)) {
      if (line.empty()) continue;
      std::vector<std::string> cells;
      std::stringstream ss(line);
      std::string cell;
      while (std::getline(ss, cell, ',')) cells.push_back(cell);
      if (cells.size() != 3) lines.fail("expected 3 fields layer_id,expert_id,count, found " + std::to_string(cells.size()));
      const auto layer = static_cast<std::uint32_t>(field(lines, cells[0], "layer_id", 0xffffffffull));
      const auto expert = static_cast<std::uint32_t>(field(lines, cells[1], "expert_id", o.experts - 1ull));
      const std::uint64_t count = field(lines, cells[2], "count", 0xffffffffull);
      const auto [it, fresh] = seen.emplace(std::make_pair(layer, expert), lines.line_number());
      if (!fresh)
        lines.fail("layer " + std::to_string(layer) + ", expert " + std::to_string(expert) + " again (first at line " +
                   std::to_string(it->second) + ")");
      auto& m = counts[layer];
      if (m.empty()) m.assign(static_cast<std::size_t>(R) * o.experts, 0);
      m[static_cast<std::size_t>(rank_of[f]) * o.experts + expert] = static_cast<std::uint32_t>(count);
      layer_sum[layer] += count;
    }
    for (const auto& [layer, sum] : layer_sum)
      if (sum % o.top_k != 0)
        throw InputError(files[f], "layer " + std::to_string(layer),
                         "counts sum to " + std::to_string(sum) + ", not a multiple of --top-k " +
                             std::to_string(o.top_k) + " (each of the rank's tokens counts top_k experts)");
  }
  if (counts.empty()) throw InputError(files[0], "", "no counts in any file");

  TraceHeader header;
  header.num_ranks = R;
  header.num_experts = o.experts;
  header.top_k = o.top_k;
  for (const auto& entry : counts) header.layer_ids.push_back(entry.first);
  header.num_layers = static_cast<std::uint32_t>(header.layer_ids.size());
  header.source_format = "sglang-expert-distribution-csv";
  const std::string first = std::filesystem::path(files[0]).filename().string();
  header.provenance = provenance_label(
      "SGLang expert-distribution dump " + first + (R > 1 ? " and " + std::to_string(R - 1) + " more" : ""), "",
      o.labels);
  header.rank_assignment = named ? "recorded: one file per source rank, the rank taken from the file name"
                                 : "recorded: one file per source rank, in the order the files were given";
  TraceWriter writer(out_path, header, overwrite);
  TraceRecord record;
  std::uint32_t index = 0;
  for (auto& entry : counts) {
    record.step = 0;
    record.micro_batch = 0;
    record.layer = index++;
    record.counts.swap(entry.second);
    writer.write(record);
  }
  writer.close();
}

}  // namespace epsim
