#include "traces/import/counts_jsonl_export.hpp"

#include <charconv>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "sim/core/atomic_file.hpp"
#include "sim/core/input_error.hpp"
#include "traces/format/trace_reader.hpp"

namespace epsim {

namespace {

std::string header_line(const TraceHeader& h, const std::string& trace_path, long rank) {
  nlohmann::ordered_json j;
  j["format"] = "epsim-counts-jsonl";
  j["version"] = 1;
  j["num_experts"] = h.num_experts;
  j["top_k"] = h.top_k;
  j["num_ranks"] = h.num_ranks;
  j["layer_ids"] = h.layer_ids;
  if (rank >= 0) j["rank"] = rank;
  j["provenance"] = h.provenance.empty() ? "exported from " + trace_path : h.provenance;
  return j.dump() + "\n";
}

void append_number(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  out.append(buf, end);
}

}  // namespace

void export_counts_jsonl(const std::string& trace_path, const std::string& out_path, bool overwrite) {
  TraceReader reader(trace_path);
  const TraceHeader& h = reader.header();
  const std::string placeholder = "{rank}";
  const std::size_t at = out_path.find(placeholder);
  const bool per_rank = at != std::string::npos;
  std::vector<std::unique_ptr<AtomicFile>> outs;
  if (per_rank) {
    for (std::uint32_t r = 0; r < h.num_ranks; ++r) {
      std::string path = out_path;
      path.replace(at, placeholder.size(), std::to_string(r));
      outs.push_back(std::make_unique<AtomicFile>(path, overwrite));
      outs.back()->stream() << header_line(h, trace_path, r);
    }
  } else {
    outs.push_back(std::make_unique<AtomicFile>(out_path, overwrite));
    outs.back()->stream() << header_line(h, trace_path, -1);
  }
  TraceRecord record;
  std::string line;
  while (reader.next(record)) {
    for (std::uint32_t r = 0; r < h.num_ranks; ++r) {
      line.clear();
      line += "{\"step\":";
      append_number(line, record.step);
      line += ",\"micro_batch\":";
      append_number(line, record.micro_batch);
      line += ",\"layer\":";
      append_number(line, h.layer_ids[record.layer]);
      line += ",\"rank\":";
      append_number(line, r);
      line += ",\"counts\":[";
      for (std::uint32_t e = 0; e < h.num_experts; ++e) {
        if (e) line += ',';
        append_number(line, record.count(r, e, h.num_experts));
      }
      line += "]}\n";
      outs[per_rank ? r : 0]->stream() << line;
    }
  }
  for (auto& o : outs) o->commit();
}

}  // namespace epsim
