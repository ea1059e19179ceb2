#include "traces/import/counts_jsonl.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>

#include "sim/core/input_error.hpp"
#include "sim/core/json_input.hpp"
#include "traces/format/trace_check.hpp"
#include "traces/format/trace_writer.hpp"
#include "traces/import/text_lines.hpp"

namespace epsim {

namespace {

using nlohmann::json;

constexpr const char* kFormat = "epsim-counts-jsonl";

struct CountsHeader {
  std::uint32_t experts = 0, top_k = 0, ranks = 0;
  std::vector<std::uint32_t> layer_ids;
  std::optional<std::uint32_t> rank;  ///< the one source rank the file holds, when it says so
  std::string provenance, licence;
};

/// The trace header's shape (ranks, experts, top-k, layers) that a counts header declares.
TraceHeader shape_of(const CountsHeader& h) {
  TraceHeader out;
  out.num_ranks = h.ranks;
  out.num_experts = h.experts;
  out.top_k = h.top_k;
  out.num_layers = static_cast<std::uint32_t>(h.layer_ids.size());
  out.layer_ids = h.layer_ids;
  return out;
}

/// One data line, found in pass 1 and read again in pass 2.
struct LineEntry {
  std::uint32_t step = 0, micro_batch = 0, layer = 0, rank = 0;  ///< layer = index into layer_ids
  std::uint32_t file = 0;
  std::uint64_t line = 0, offset = 0;
  std::uint64_t sum = 0;  ///< sum of the counts, to check the line again in pass 2
};

bool key_less(const LineEntry& a, const LineEntry& b) {
  return std::tie(a.step, a.micro_batch, a.layer, a.rank) < std::tie(b.step, b.micro_batch, b.layer, b.rank);
}
bool same_record(const LineEntry& a, const LineEntry& b) {
  return a.step == b.step && a.micro_batch == b.micro_batch && a.layer == b.layer;
}

/// A JSON integer (written without fraction or exponent) in [0, max]: counts-jsonl takes no 3.0.
std::optional<std::uint64_t> strict_uint(const json& v, std::uint64_t max) {
  if (!v.is_number_unsigned()) return std::nullopt;
  const std::uint64_t x = v.get<std::uint64_t>();
  if (x > max) return std::nullopt;
  return x;
}

std::uint64_t need_uint(const TextLines& lines, const json& v, const std::string& key, std::uint64_t max) {
  const auto x = strict_uint(v, max);
  if (!x)
    lines.fail("\"" + key + "\" must be an integer in [0, " + std::to_string(max) + "], found " + json_excerpt(v));
  return *x;
}

json parse_object(const TextLines& lines, const std::string& text) {
  json obj = parse_json(text, lines.path(), lines.line_number());
  if (!obj.is_object()) lines.fail("expected one JSON object on the line, found " + json_excerpt(obj));
  return obj;
}

CountsHeader parse_header(TextLines& lines) {
  std::string text;
  if (!lines.next(text)) throw InputError(lines.path(), "", "empty file: expected the epsim-counts-jsonl header line");
  const json h = parse_object(lines, text);
  if (!h.contains("format") || !h.at("format").is_string() || h.at("format").get<std::string>() != kFormat)
    lines.fail(std::string("the first line must be the header {\"format\":\"") + kFormat + "\",\"version\":1,...}");
  static const std::set<std::string> known = {"format",    "version", "num_experts", "top_k",     "num_ranks",
                                              "layer_ids", "rank",    "provenance",  "licence"};
  for (const auto& item : h.items())
    if (!known.count(item.key()))
      lines.fail("unknown header key \"" + item.key() +
                 "\" (expected format, version, num_experts, top_k, num_ranks, layer_ids, rank, provenance, licence)");
  for (const char* key : {"version", "num_experts", "top_k", "num_ranks", "layer_ids", "provenance"})
    if (!h.contains(key)) lines.fail(std::string("the header lacks \"") + key + "\"");
  if (need_uint(lines, h.at("version"), "version", 0xffffffffull) != 1)
    lines.fail("unsupported epsim-counts-jsonl version " + json_excerpt(h.at("version")) + " (this epsim reads version 1)");
  CountsHeader out;
  out.experts = static_cast<std::uint32_t>(need_uint(lines, h.at("num_experts"), "num_experts", 65536));
  out.top_k = static_cast<std::uint32_t>(need_uint(lines, h.at("top_k"), "top_k", 1024));
  out.ranks = static_cast<std::uint32_t>(need_uint(lines, h.at("num_ranks"), "num_ranks", 65536));
  if (out.experts < 1 || out.top_k < 1 || out.top_k > out.experts || out.ranks < 1)
    lines.fail("the header needs num_experts >= 1, 1 <= top_k <= num_experts and num_ranks >= 1");
  const json& ids = h.at("layer_ids");
  if (!ids.is_array() || ids.empty()) lines.fail("\"layer_ids\" must be a non-empty array of integers");
  for (const json& v : ids) out.layer_ids.push_back(static_cast<std::uint32_t>(need_uint(lines, v, "layer_ids", 0xffffffffull)));
  std::vector<std::uint32_t> sorted = out.layer_ids;
  std::sort(sorted.begin(), sorted.end());
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end()) lines.fail("\"layer_ids\" holds layer " + std::to_string(*twice) + " twice");
  if (h.contains("rank")) {
    out.rank = static_cast<std::uint32_t>(need_uint(lines, h.at("rank"), "rank", 65535));
    if (*out.rank >= out.ranks)
      lines.fail("\"rank\" " + std::to_string(*out.rank) + " is not below num_ranks = " + std::to_string(out.ranks));
  }
  if (!h.at("provenance").is_string() || h.at("provenance").get<std::string>().empty())
    lines.fail("\"provenance\" must be a non-empty string (the model, run and command that made the file)");
  out.provenance = h.at("provenance").get<std::string>();
  if (h.contains("licence")) {
    if (!h.at("licence").is_string()) lines.fail("\"licence\" must be a string, found " + json_excerpt(h.at("licence")));
    out.licence = h.at("licence").get<std::string>();
  }
  const std::string problem = check_trace_header(shape_of(out));
  if (!problem.empty()) lines.fail(problem);
  return out;
}

std::string layer_list(const std::vector<std::uint32_t>& ids) {
  std::string s = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "]";
}

void check_same_shape(const TextLines& lines, const CountsHeader& h, const CountsHeader& first,
                      const std::string& first_file) {
  const auto differ = [&](const char* what, const std::string& mine, const std::string& theirs) {
    lines.fail(std::string("header mismatch: ") + what + " " + mine + ", but " + first_file + " has " + theirs +
               " (the files of one import must agree on num_experts, top_k, num_ranks and layer_ids)");
  };
  if (h.experts != first.experts) differ("num_experts", std::to_string(h.experts), std::to_string(first.experts));
  if (h.top_k != first.top_k) differ("top_k", std::to_string(h.top_k), std::to_string(first.top_k));
  if (h.ranks != first.ranks) differ("num_ranks", std::to_string(h.ranks), std::to_string(first.ranks));
  if (h.layer_ids != first.layer_ids) differ("layer_ids", layer_list(h.layer_ids), layer_list(first.layer_ids));
}

/// Checks one data line and fills `entry` (all but file).
void parse_data_line(const TextLines& lines, const std::string& text, const CountsHeader& h,
                     const std::map<std::uint32_t, std::uint32_t>& layer_index, LineEntry& entry) {
  const json obj = parse_object(lines, text);
  const json* counts = nullptr;
  bool seen[4] = {false, false, false, false};
  for (const auto& item : obj.items()) {
    const std::string& key = item.key();
    const json& v = item.value();
    if (key == "step") {
      entry.step = static_cast<std::uint32_t>(need_uint(lines, v, key, 0xffffffffull));
      seen[0] = true;
    } else if (key == "micro_batch") {
      entry.micro_batch = static_cast<std::uint32_t>(need_uint(lines, v, key, 0xffffffffull));
      seen[1] = true;
    } else if (key == "layer") {
      const std::uint64_t id = need_uint(lines, v, key, 0xffffffffull);
      const auto it = layer_index.find(static_cast<std::uint32_t>(id));
      if (it == layer_index.end())
        lines.fail("\"layer\" " + std::to_string(id) + " is not one of the header's layer_ids " + layer_list(h.layer_ids));
      entry.layer = it->second;
      seen[2] = true;
    } else if (key == "rank") {
      entry.rank = static_cast<std::uint32_t>(need_uint(lines, v, key, 0xffffffffull));
      if (entry.rank >= h.ranks)
        lines.fail("\"rank\" " + std::to_string(entry.rank) + " is not below num_ranks = " + std::to_string(h.ranks));
      if (h.rank && entry.rank != *h.rank)
        lines.fail("\"rank\" " + std::to_string(entry.rank) + " differs from the header's rank " +
                   std::to_string(*h.rank) + " (a file with a header rank holds that rank only)");
      seen[3] = true;
    } else if (key == "counts") {
      counts = &v;
    } else {
      lines.fail("unknown key \"" + key + "\" (a counts line has step, micro_batch, layer, rank and counts)");
    }
  }
  const char* names[4] = {"step", "micro_batch", "layer", "rank"};
  for (int i = 0; i < 4; ++i)
    if (!seen[i]) lines.fail(std::string("the line lacks \"") + names[i] + "\"");
  if (!counts) lines.fail("the line lacks \"counts\"");
  if (!counts->is_array() || counts->size() != h.experts)
    lines.fail("\"counts\" must be an array of num_experts = " + std::to_string(h.experts) + " integers, found " +
               (counts->is_array() ? std::to_string(counts->size()) + " entries" : json_excerpt(*counts)));
  entry.sum = 0;
  for (std::size_t e = 0; e < counts->size(); ++e) {
    const auto c = strict_uint((*counts)[e], 0xffffffffull);
    if (!c)
      lines.fail("\"counts\"[" + std::to_string(e) + "] must be a non-negative integer below 2^32, found " +
                 json_excerpt((*counts)[e]));
    entry.sum += *c;
  }
  if (entry.sum % h.top_k != 0)
    lines.fail("\"counts\" sum to " + std::to_string(entry.sum) + ", not a multiple of top_k = " +
               std::to_string(h.top_k) + " (every token counts its top_k experts)");
  entry.line = lines.line_number();
  entry.offset = lines.offset();
}

/// Reads the integers of the "counts" array of a line pass 1 has checked, into `row`. Returns false
/// when the line is no longer what pass 1 saw.
bool read_counts(const std::string& text, std::uint32_t* row, std::uint32_t experts, std::uint64_t expected_sum) {
  // The last "counts" key, as the JSON parser keeps the last of repeated keys.
  const std::size_t key = text.rfind("\"counts\"");
  if (key == std::string::npos) return false;
  std::size_t i = text.find('[', key);
  if (i == std::string::npos) return false;
  ++i;
  std::uint64_t sum = 0;
  for (std::uint32_t e = 0; e < experts; ++e) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == ',')) ++i;
    std::uint64_t v = 0;
    const std::size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && v <= 0xffffffffull) v = v * 10 + (text[i++] - '0');
    if (i == start || v > 0xffffffffull) return false;
    row[e] = static_cast<std::uint32_t>(v);
    sum += v;
  }
  return sum == expected_sum;
}

/// The integer value of `"key":` in a line pass 1 has checked (the last such key, as the parser keeps
/// it); false when it is not there any more.
bool read_key(const std::string& text, const char* key, std::uint64_t& out) {
  const std::string quoted = std::string("\"") + key + "\"";
  std::size_t i = text.rfind(quoted);
  if (i == std::string::npos) return false;
  i += quoted.size();
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == ':')) ++i;
  const std::size_t start = i;
  out = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9' && out <= 0xffffffffull) out = out * 10 + (text[i++] - '0');
  return i != start && out <= 0xffffffffull;
}

/// Reads the key and the counts of a line pass 1 has checked into `entry` (its step, micro_batch,
/// layer, rank and sum) and `row`. False when the line is no longer what pass 1 saw.
bool read_checked_line(const std::string& text, const CountsHeader& h,
                       const std::map<std::uint32_t, std::uint32_t>& layer_index, LineEntry& entry,
                       std::uint32_t* row) {
  std::uint64_t step = 0, micro_batch = 0, layer = 0, rank = 0;
  if (!read_key(text, "step", step) || !read_key(text, "micro_batch", micro_batch) ||
      !read_key(text, "layer", layer) || !read_key(text, "rank", rank) || rank >= h.ranks)
    return false;
  const auto it = layer_index.find(static_cast<std::uint32_t>(layer));
  if (it == layer_index.end()) return false;
  entry.step = static_cast<std::uint32_t>(step);
  entry.micro_batch = static_cast<std::uint32_t>(micro_batch);
  entry.layer = it->second;
  entry.rank = static_cast<std::uint32_t>(rank);
  const std::size_t key = text.rfind("\"counts\"");
  if (key == std::string::npos) return false;
  std::size_t i = text.find('[', key);
  if (i == std::string::npos) return false;
  ++i;
  entry.sum = 0;
  for (std::uint32_t e = 0; e < h.experts; ++e) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == ',')) ++i;
    std::uint64_t v = 0;
    const std::size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && v <= 0xffffffffull) v = v * 10 + (text[i++] - '0');
    if (i == start || v > 0xffffffffull) return false;
    row[e] = static_cast<std::uint32_t>(v);
    entry.sum += v;
  }
  return entry.sum % h.top_k == 0;
}

std::string key_text(const LineEntry& e, const CountsHeader& h) {
  return "(step " + std::to_string(e.step) + ", micro_batch " + std::to_string(e.micro_batch) + ", layer " +
         std::to_string(h.layer_ids[e.layer]) + ", rank " + std::to_string(e.rank) + ")";
}


/// What pass 1 learnt: the headers, the layer numbering, and whether every file's lines come in
/// (step, micro_batch, layer) order (ranks in any order), as the recorder writes them.
struct CheckedInputs {
  std::vector<CountsHeader> headers;
  std::map<std::uint32_t, std::uint32_t> layer_index;
  bool sorted = true;
};

bool record_less(const LineEntry& a, const LineEntry& b) {
  return std::tie(a.step, a.micro_batch, a.layer) < std::tie(b.step, b.micro_batch, b.layer);
}

/// Pass 1: every header and line checked, keeping nothing per line.
CheckedInputs check_files(const std::vector<std::string>& files) {
  CheckedInputs in;
  for (std::uint32_t f = 0; f < files.size(); ++f) {
    TextLines lines(files[f]);
    in.headers.push_back(parse_header(lines));
    if (f == 0) {
      for (std::uint32_t i = 0; i < in.headers[0].layer_ids.size(); ++i) in.layer_index[in.headers[0].layer_ids[i]] = i;
    } else {
      check_same_shape(lines, in.headers.back(), in.headers[0], files[0]);
    }
    std::string text;
    LineEntry entry, previous;
    bool any = false;
    while (lines.next(text)) {
      if (text.find_first_not_of(" \t") == std::string::npos) continue;
      parse_data_line(lines, text, in.headers.back(), in.layer_index, entry);
      if (any && record_less(entry, previous)) in.sorted = false;
      previous = entry;
      any = true;
    }
  }
  return in;
}

std::string place_of(std::uint64_t line) { return "line " + std::to_string(line); }

[[noreturn]] void duplicate_line(const std::vector<std::string>& files, const CountsHeader& h, const LineEntry& again,
                                 std::uint32_t first_file, std::uint64_t first_line) {
  throw InputError(files[again.file], place_of(again.line),
                   "duplicate line for " + key_text(again, h) + ": already at " + files[first_file] + ":" +
                       place_of(first_line) +
                       " (each (step, micro_batch, layer, rank) must appear once in all the files together)");
}

/// `present` is a line of the record that lacks rank `missing`.
[[noreturn]] void missing_rank(const std::vector<std::string>& files, const std::vector<CountsHeader>& headers,
                               const LineEntry& present, std::uint32_t missing) {
  const CountsHeader& h = headers[0];
  LineEntry want = present;
  want.rank = missing;
  const std::string needs =
      "(every (step, micro_batch, layer) needs all num_ranks = " + std::to_string(h.ranks) + " ranks)";
  // Name the file that should hold the line when a header says which file holds that rank.
  for (std::size_t f = 0; f < headers.size(); ++f)
    if (headers[f].rank && *headers[f].rank == missing)
      throw InputError(files[f], "",
                       "no line for " + key_text(want, h) + ", which " + files[present.file] + ":" +
                           place_of(present.line) + " has for rank " + std::to_string(present.rank) + " " + needs);
  throw InputError(files[present.file], place_of(present.line),
                   "no line for " + key_text(want, h) + " in any of the " + std::to_string(files.size()) + " file(s) " +
                       needs);
}

[[noreturn]] void changed(const std::string& file, std::uint64_t line) {
  throw InputError(file, place_of(line), "the line changed while it was being imported");
}

/// Sorted files: a merge of the files' line streams, one pending line per file and one record in
/// memory.
void write_streamed(const std::vector<std::string>& files, const CheckedInputs& in, TraceWriter& writer) {
  const CountsHeader& h = in.headers[0];
  struct Cursor {
    std::unique_ptr<TextLines> lines;
    bool has = false;
    LineEntry entry;
    std::vector<std::uint32_t> row;
  };
  std::vector<Cursor> cursors(files.size());
  std::string text;
  const auto advance = [&](std::uint32_t f) {
    Cursor& c = cursors[f];
    c.has = false;
    while (c.lines->next(text)) {
      if (text.find_first_not_of(" \t") == std::string::npos) continue;
      c.entry.file = f;
      c.entry.line = c.lines->line_number();
      if (!read_checked_line(text, h, in.layer_index, c.entry, c.row.data())) changed(files[f], c.entry.line);
      c.has = true;
      return;
    }
  };
  for (std::uint32_t f = 0; f < files.size(); ++f) {
    cursors[f].lines = std::make_unique<TextLines>(files[f]);
    cursors[f].lines->next(text);  // the header, checked in pass 1
    cursors[f].row.resize(h.experts);
    advance(f);
  }
  TraceRecord record;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> seen(h.ranks);  // (file, line) per rank; line 0 = none
  while (true) {
    const LineEntry* next = nullptr;
    for (const Cursor& c : cursors)
      if (c.has && (!next || record_less(c.entry, *next))) next = &c.entry;
    if (!next) break;
    const LineEntry key = *next;
    record.step = key.step;
    record.micro_batch = key.micro_batch;
    record.layer = key.layer;
    record.counts.assign(static_cast<std::size_t>(h.ranks) * h.experts, 0);
    std::fill(seen.begin(), seen.end(), std::make_pair(0u, std::uint64_t{0}));
    LineEntry present = key;
    for (std::uint32_t f = 0; f < cursors.size(); ++f) {
      Cursor& c = cursors[f];
      while (c.has && !record_less(key, c.entry) && !record_less(c.entry, key)) {
        const std::uint32_t r = c.entry.rank;
        if (seen[r].second != 0) duplicate_line(files, h, c.entry, seen[r].first, seen[r].second);
        seen[r] = {f, c.entry.line};
        present = c.entry;
        std::copy(c.row.begin(), c.row.end(), record.counts.begin() + static_cast<std::ptrdiff_t>(r) * h.experts);
        advance(f);
      }
    }
    for (std::uint32_t r = 0; r < h.ranks; ++r)
      if (seen[r].second == 0) missing_rank(files, in.headers, present, r);
    writer.write(record);
  }
}

/// Files in any order: an index of every line (48 bytes each), sorted, then the lines of one record
/// at a time read again at their offsets.
void write_indexed(const std::vector<std::string>& files, const CheckedInputs& in, TraceWriter& writer) {
  const CountsHeader& h = in.headers[0];
  std::vector<LineEntry> entries;
  std::vector<std::uint32_t> row(h.experts);
  std::string text;
  for (std::uint32_t f = 0; f < files.size(); ++f) {
    TextLines lines(files[f]);
    lines.next(text);  // the header, checked in pass 1
    LineEntry entry;
    entry.file = f;
    while (lines.next(text)) {
      if (text.find_first_not_of(" \t") == std::string::npos) continue;
      entry.line = lines.line_number();
      entry.offset = lines.offset();
      if (!read_checked_line(text, h, in.layer_index, entry, row.data())) changed(files[f], entry.line);
      entries.push_back(entry);
    }
  }
  std::stable_sort(entries.begin(), entries.end(), key_less);
  for (std::size_t i = 1; i < entries.size(); ++i)
    if (!key_less(entries[i - 1], entries[i])) duplicate_line(files, h, entries[i], entries[i - 1].file, entries[i - 1].line);
  // Sorted and without duplicates, a record is complete when it has R lines, ranks 0 .. R-1.
  for (std::size_t i = 0; i < entries.size();) {
    std::size_t j = i;
    for (std::uint32_t r = 0; j < entries.size() && same_record(entries[i], entries[j]); ++j, ++r)
      if (entries[j].rank != r) missing_rank(files, in.headers, entries[i], r);
    if (j - i < h.ranks) missing_rank(files, in.headers, entries[i], static_cast<std::uint32_t>(j - i));
    i = j;
  }
  std::vector<std::unique_ptr<TextLines>> inputs;
  for (const std::string& f : files) inputs.push_back(std::make_unique<TextLines>(f));
  TraceRecord record;
  for (std::size_t i = 0; i < entries.size(); i += h.ranks) {
    record.step = entries[i].step;
    record.micro_batch = entries[i].micro_batch;
    record.layer = entries[i].layer;
    record.counts.assign(static_cast<std::size_t>(h.ranks) * h.experts, 0);
    for (std::uint32_t r = 0; r < h.ranks; ++r) {
      const LineEntry& e = entries[i + r];
      if (!inputs[e.file]->read_at(e.offset, text) ||
          !read_counts(text, record.counts.data() + static_cast<std::size_t>(r) * h.experts, h.experts, e.sum))
        changed(files[e.file], e.line);
    }
    writer.write(record);
  }
}

}  // namespace

void import_counts_jsonl(const std::vector<std::string>& files, const ProvenanceOptions& labels,
                         const std::string& out_path, bool overwrite) {
  if (files.empty()) throw InputError("epsim trace import counts-jsonl", "", "expected at least one input file");
  const CheckedInputs in = check_files(files);
  const CountsHeader& first = in.headers[0];

  // Labels: the distinct provenance and licence texts of the files, in file order, unless given.
  std::string provenance, licence;
  {
    std::set<std::string> seen_p, seen_l;
    for (const CountsHeader& h : in.headers) {
      if (seen_p.insert(h.provenance).second) provenance += (provenance.empty() ? "" : " | ") + h.provenance;
      if (!h.licence.empty() && seen_l.insert(h.licence).second) licence += (licence.empty() ? "" : " | ") + h.licence;
    }
  }
  TraceHeader header = shape_of(first);
  header.has_token_ids = false;
  header.source_format = "counts-jsonl";
  header.provenance = provenance_label(provenance, licence, labels);
  header.rank_assignment = "recorded: the counts of each source rank as written by the recorder (\"rank\" of every line)";

  TraceWriter writer(out_path, header, overwrite);
  if (in.sorted)
    write_streamed(files, in, writer);
  else
    write_indexed(files, in, writer);
  writer.close();
}

}  // namespace epsim
