#include "traces/format/trace_slice.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "sim/core/input_error.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/format/trace_writer.hpp"

namespace epsim {

namespace {

bool parse_bound(const std::string& text, std::uint64_t& out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  out = std::strtoull(text.c_str(), nullptr, 10);
  return errno == 0;
}

std::string range_text(const IndexRange& r) {
  return (r.begin ? std::to_string(r.begin) : "") + ":" + (r.end == UINT64_MAX ? "" : std::to_string(r.end));
}

}  // namespace

bool parse_index_range(const std::string& text, IndexRange& out) {
  const std::size_t colon = text.find(':');
  IndexRange r;
  if (colon == std::string::npos) {
    if (!parse_bound(text, r.begin) || r.begin == UINT64_MAX) return false;
    r.end = r.begin + 1;
  } else {
    const std::string a = text.substr(0, colon), b = text.substr(colon + 1);
    if (!a.empty() && !parse_bound(a, r.begin)) return false;
    if (!b.empty() && !parse_bound(b, r.end)) return false;
    if (r.end < r.begin) return false;
  }
  out = r;
  return true;
}

void slice_trace(const std::string& path, const SliceOptions& o, const std::string& out_path, bool overwrite) {
  TraceReader reader(path);
  const TraceHeader& in = reader.header();
  // new_index[old layer index] = index in the output, or -1 when the layer is left out.
  std::vector<long> new_index(in.num_layers, -1);
  TraceHeader header = in;
  header.layer_ids.clear();
  for (std::uint32_t id : o.layer_ids)
    if (std::find(in.layer_ids.begin(), in.layer_ids.end(), id) == in.layer_ids.end())
      throw InputError(path, "header", "--layers: the trace has no layer " + std::to_string(id));
  for (std::uint32_t l = 0; l < in.num_layers; ++l) {
    if (!o.layer_ids.empty() && std::find(o.layer_ids.begin(), o.layer_ids.end(), in.layer_ids[l]) == o.layer_ids.end())
      continue;
    new_index[l] = static_cast<long>(header.layer_ids.size());
    header.layer_ids.push_back(in.layer_ids[l]);
  }
  header.num_layers = static_cast<std::uint32_t>(header.layer_ids.size());
  std::string selection = "--steps " + range_text(o.steps) + " --micro-batches " + range_text(o.micro_batches);
  if (!o.layer_ids.empty()) {
    selection += " --layers ";
    for (std::size_t i = 0; i < o.layer_ids.size(); ++i) selection += (i ? "," : "") + std::to_string(o.layer_ids[i]);
  }
  header.provenance = in.provenance + "; sliced by epsim trace slice " + selection;
  TraceWriter writer(out_path, header, overwrite);
  TraceRecord record;
  while (reader.next(record)) {
    if (!o.steps.contains(record.step) || !o.micro_batches.contains(record.micro_batch) || new_index[record.layer] < 0)
      continue;
    record.layer = static_cast<std::uint32_t>(new_index[record.layer]);
    writer.write(record);
  }
  writer.close();
}

}  // namespace epsim
