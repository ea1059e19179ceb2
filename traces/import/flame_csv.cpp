#include "traces/import/flame_csv.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "sim/core/input_error.hpp"
#include "traces/format/rank_slices.hpp"
#include "traces/format/trace_writer.hpp"

namespace epsim {

namespace fs = std::filesystem;

namespace {

/// "Layer_7" -> 7; "1st"/"2nd"/"3rd"/"10th" -> 1/2/3/10. False when the name does not fit.
bool parse_numbered(const std::string& name, const std::string& prefix, const std::vector<std::string>& suffixes,
                    std::uint32_t& out) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  std::size_t i = prefix.size(), digits = 0;
  std::uint64_t v = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && digits < 9) {
    v = v * 10 + static_cast<std::uint64_t>(name[i] - '0');
    ++i;
    ++digits;
  }
  if (digits == 0) return false;
  const std::string rest = name.substr(i);
  if (std::find(suffixes.begin(), suffixes.end(), rest) == suffixes.end()) return false;
  out = static_cast<std::uint32_t>(v);
  return true;
}

/// Subfolders of `dir` whose names parse as numbered, sorted by number.
std::vector<std::pair<std::uint32_t, fs::path>> numbered_subdirs(const fs::path& dir, const std::string& prefix,
                                                                 const std::vector<std::string>& suffixes) {
  std::vector<std::pair<std::uint32_t, fs::path>> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::uint32_t n = 0;
    if (entry.is_directory() && parse_numbered(entry.path().filename().string(), prefix, suffixes, n))
      out.emplace_back(n, entry.path());
  }
  std::sort(out.begin(), out.end());
  for (std::size_t i = 1; i < out.size(); ++i)
    if (out[i].first == out[i - 1].first)
      throw InputError(dir.string(), "",
                       "two subfolders have the number " + std::to_string(out[i].first) + ": " +
                           out[i - 1].second.filename().string() + " and " + out[i].second.filename().string());
  return out;
}

fs::path single_csv(const fs::path& layer_dir) {
  std::vector<fs::path> csvs;
  for (const auto& entry : fs::directory_iterator(layer_dir))
    if (entry.is_regular_file() && entry.path().extension() == ".csv") csvs.push_back(entry.path());
  if (csvs.size() != 1)
    throw InputError(layer_dir.string(), "", "expected exactly one .csv file, found " + std::to_string(csvs.size()));
  return csvs.front();
}

std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return fields;
    start = comma + 1;
  }
}

/// One CSV: per token its top-k expert ids by descending score. Infers num_experts from the header
/// and checks it and k against `experts`/`top_k` when those are already known (non-zero).
class FlameCsv {
 public:
  FlameCsv(const fs::path& path, std::uint32_t& experts, std::uint32_t& top_k, TraceRecord& record) {
    const std::string file = path.string();
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(file, "", std::string("cannot open: ") + std::strerror(errno));
    std::string line;
    std::uint64_t line_no = 1;
    if (!std::getline(in, line)) throw InputError(file, "line 1", "empty file, expected the CSV header");
    strip_cr(line);
    const std::vector<std::string> head = split_commas(line);
    if (head.size() < 3 || head[0] != "layer_id" || head[1] != "token_id")
      throw InputError(file, "line 1", "expected the header layer_id,token_id,expert_0,...");
    const std::uint32_t e_count = static_cast<std::uint32_t>(head.size() - 2);
    for (std::uint32_t e = 0; e < e_count; ++e)
      if (head[e + 2] != "expert_" + std::to_string(e))
        throw InputError(file, "line 1",
                         "column " + std::to_string(e + 3) + " is '" + head[e + 2] + "', expected 'expert_" +
                             std::to_string(e) + "'");
    if (e_count > 65536) throw InputError(file, "line 1", "more than 65536 expert columns");
    if (experts != 0 && e_count != experts)
      throw InputError(
          file, "line 1",
          "has " + std::to_string(e_count) + " expert columns, the other files " + std::to_string(experts));
    experts = e_count;

    record.token_experts.clear();
    std::vector<std::pair<double, std::uint32_t>> chosen;
    std::uint64_t token = 0;
    while (std::getline(in, line)) {
      ++line_no;
      strip_cr(line);
      if (line.empty()) continue;
      const std::string place = "line " + std::to_string(line_no);
      const std::vector<std::string> f = split_commas(line);
      if (f.size() != head.size())
        throw InputError(file, place,
                         "expected " + std::to_string(head.size()) + " fields, found " + std::to_string(f.size()));
      if (f[1] != std::to_string(token))
        throw InputError(file, place,
                         "token_id is '" + f[1] + "', expected " + std::to_string(token) +
                             " (rows must list the batch's tokens in order)");
      chosen.clear();
      for (std::uint32_t e = 0; e < e_count; ++e) {
        const std::string& s = f[e + 2];
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || errno != 0 || !std::isfinite(v) || v < 0)
          throw InputError(file, place,
                           "expert_" + std::to_string(e) + " is '" + s + "', expected a router score >= 0");
        if (v > 0) chosen.emplace_back(v, e);
      }
      if (chosen.empty()) throw InputError(file, place, "no non-zero expert score: the token has no top-k");
      if (top_k == 0) top_k = static_cast<std::uint32_t>(chosen.size());
      if (chosen.size() != top_k)
        throw InputError(file, place,
                         std::to_string(chosen.size()) + " non-zero expert scores, but top-k is " +
                             std::to_string(top_k) + " (inferred from the first row)");
      std::sort(chosen.begin(), chosen.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      for (const auto& c : chosen) record.token_experts.push_back(static_cast<std::uint16_t>(c.second));
      ++token;
    }
    if (in.bad()) throw InputError(file, "line " + std::to_string(line_no), "read error");
    if (token == 0) throw InputError(file, "", "no token rows after the header");
    tokens = token;
  }

  std::uint64_t tokens = 0;

 private:
  static void strip_cr(std::string& line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
  }
};

}  // namespace

void import_flame_csv(const std::string& batch_dir, std::uint32_t ranks, const std::string& out_path, bool overwrite) {
  const fs::path dir(batch_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError(batch_dir, "", "not a directory (expected a FLAME-MoE batch folder)");
  if (ranks < 1 || ranks > 65536) throw InputError(batch_dir, "", "--ranks must be between 1 and 65536");

  // Micro-batches: the folder itself (encoder) or its ordinal subfolders (decoder).
  const std::vector<std::string> ordinal = {"st", "nd", "rd", "th"};
  std::vector<std::pair<std::uint32_t, fs::path>> micro_batches;
  if (!numbered_subdirs(dir, "Layer_", {""}).empty()) {
    micro_batches.emplace_back(0, dir);
  } else {
    for (const auto& [n, path] : numbered_subdirs(dir, "", ordinal)) {
      if (n == 0) throw InputError(path.string(), "", "ordinal folders start at 1st");
      micro_batches.emplace_back(n - 1, path);
    }
  }
  if (micro_batches.empty())
    throw InputError(batch_dir, "",
                     "expected Layer_N subfolders (an encoder batch) or 1st, 2nd, ... subfolders "
                     "each holding Layer_N subfolders (a decoder batch)");

  std::vector<std::vector<fs::path>> csv_of(micro_batches.size());  // [micro-batch][layer index]
  std::vector<std::uint32_t> layer_ids;
  for (std::size_t m = 0; m < micro_batches.size(); ++m) {
    const auto layers = numbered_subdirs(micro_batches[m].second, "Layer_", {""});
    std::vector<std::uint32_t> ids;
    for (const auto& [n, path] : layers) {
      ids.push_back(n);
      csv_of[m].push_back(single_csv(path));
    }
    if (ids.empty()) throw InputError(micro_batches[m].second.string(), "", "no Layer_N subfolders");
    if (m == 0) layer_ids = ids;
    if (ids != layer_ids)
      throw InputError(micro_batches[m].second.string(), "",
                       "holds other Layer_N subfolders than " + micro_batches[0].second.string());
  }

  // The first CSV fixes num_experts and top_k for the header.
  std::uint32_t experts = 0, top_k = 0;
  TraceRecord record;
  FlameCsv first(csv_of[0][0], experts, top_k, record);

  TraceHeader header;
  header.num_ranks = ranks;
  header.num_experts = experts;
  header.top_k = top_k;
  header.num_layers = static_cast<std::uint32_t>(layer_ids.size());
  header.layer_ids = layer_ids;
  header.has_token_ids = true;
  header.source_format = "flame-moe-csv";
  fs::path normal = fs::absolute(dir).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();  // "DIR/" names DIR
  const std::string batch_name = normal.filename().string();
  header.provenance =
      "FLAME-MoE routing traces, CMU-FLAME (Kang, Yu, Xiong, arXiv:2505.20225), Apache-2.0; "
      "imported by epsim trace import flame-csv from batch folder '" +
      batch_name + "' (" + std::to_string(micro_batches.size()) +
      (micro_batches.size() == 1 ? " micro-batch x " : " micro-batches x ") + std::to_string(layer_ids.size()) +
      " layers, first file " + csv_of[0][0].filename().string() + ")";
  header.rank_assignment = contiguous_slices_text(ranks) + " (the recording has no source ranks)";

  TraceWriter writer(out_path, header, overwrite);
  for (std::size_t m = 0; m < micro_batches.size(); ++m) {
    for (std::size_t l = 0; l < layer_ids.size(); ++l) {
      const std::uint64_t n = (m == 0 && l == 0) ? first.tokens : FlameCsv(csv_of[m][l], experts, top_k, record).tokens;
      record.step = 0;
      record.micro_batch = micro_batches[m].first;
      record.layer = static_cast<std::uint32_t>(l);
      record.token_src_rank.resize(n);
      record.counts.assign(static_cast<std::size_t>(ranks) * experts, 0);
      for (std::uint64_t t = 0; t < n; ++t) {
        const std::uint32_t s = contiguous_slice_rank(t, n, ranks);
        record.token_src_rank[t] = s;
        for (std::uint32_t j = 0; j < top_k; ++j)
          ++record.counts[static_cast<std::size_t>(s) * experts + record.token_experts[t * top_k + j]];
      }
      writer.write(record);
    }
  }
  writer.close();
}

}  // namespace epsim
