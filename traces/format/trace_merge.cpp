#include "traces/format/trace_merge.hpp"

#include <memory>
#include <set>

#include "sim/core/input_error.hpp"
#include "traces/format/trace_check.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/format/trace_writer.hpp"

namespace epsim {

namespace {

std::string ids_text(const std::vector<std::uint32_t>& ids) {
  std::string s = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "]";
}

/// The header of the output: the first input's shape, checked against every other input.
TraceHeader merged_header(const std::vector<std::unique_ptr<TraceReader>>& in, MergeBy by) {
  const TraceHeader& a = in[0]->header();
  TraceHeader out = a;
  std::set<std::string> formats, provenances;
  std::string provenance;
  std::uint64_t ranks = 0;
  for (const auto& r : in) {
    const TraceHeader& h = r->header();
    const auto differ = [&](const std::string& what, const std::string& mine, const std::string& first) {
      throw InputError(r->path(), "header",
                       what + " " + mine + " differs from " + in[0]->path() + "'s " + first +
                           " (merged traces need the same num_experts, top_k and layer_ids" +
                           (by == MergeBy::steps ? ", and num_ranks to merge by steps)" : ")"));
    };
    if (h.num_experts != a.num_experts) differ("num_experts", std::to_string(h.num_experts), std::to_string(a.num_experts));
    if (h.top_k != a.top_k) differ("top_k", std::to_string(h.top_k), std::to_string(a.top_k));
    if (h.layer_ids != a.layer_ids) differ("layer_ids", ids_text(h.layer_ids), ids_text(a.layer_ids));
    if (by == MergeBy::steps && h.num_ranks != a.num_ranks)
      differ("num_ranks", std::to_string(h.num_ranks), std::to_string(a.num_ranks));
    out.has_token_ids = out.has_token_ids && h.has_token_ids;
    formats.insert(h.source_format);
    if (provenances.insert(h.provenance).second) provenance += (provenance.empty() ? "" : " | ") + h.provenance;
    ranks += h.num_ranks;
  }
  if (by == MergeBy::ranks) {
    if (ranks > 65536) throw InputError(in.back()->path(), "header", "the merged trace would have more than 65536 ranks");
    out.num_ranks = static_cast<std::uint32_t>(ranks);
    std::string rule = "ranks joined by epsim trace merge --by ranks:";
    std::uint64_t first = 0;
    for (const auto& r : in) {
      rule += " " + std::to_string(first) + ".." + std::to_string(first + r->header().num_ranks - 1) + " from " +
              r->path() + " (" + r->header().rank_assignment + ");";
      first += r->header().num_ranks;
    }
    out.rank_assignment = rule;
  }
  out.source_format = formats.size() == 1 ? a.source_format : "merged";
  out.provenance = provenance;
  return out;
}

}  // namespace

void merge_traces(const std::vector<std::string>& inputs, MergeBy by, const std::string& out_path, bool overwrite) {
  if (inputs.empty()) throw InputError("epsim trace merge", "", "expected at least one input trace");
  std::vector<std::unique_ptr<TraceReader>> in;
  for (const std::string& p : inputs) in.push_back(std::make_unique<TraceReader>(p));
  const TraceHeader header = merged_header(in, by);
  const bool keep_tokens = header.has_token_ids;
  TraceWriter writer(out_path, header, overwrite);
  TraceRecord out, part;
  if (by == MergeBy::steps) {
    bool any = false;
    std::uint32_t last_step = 0;
    for (auto& r : in) {
      bool first = true;
      std::uint32_t first_step = 0, offset = 0;
      while (r->next(part)) {
        if (first) {
          first_step = part.step;
          offset = any ? last_step + 1 : first_step;
          first = false;
        }
        const std::uint64_t step = static_cast<std::uint64_t>(offset) + (part.step - first_step);
        if (step > 0xffffffffull)
          throw InputError(r->path(), "record " + std::to_string(r->records_read() - 1), "step number past 2^32-1");
        part.step = static_cast<std::uint32_t>(step);
        if (!keep_tokens) {
          part.token_src_rank.clear();
          part.token_experts.clear();
        }
        writer.write(part);
        last_step = part.step;
        any = true;
      }
    }
    writer.close();
    return;
  }
  while (true) {
    bool more = in[0]->next(out);
    if (!keep_tokens) {
      out.token_src_rank.clear();
      out.token_experts.clear();
    }
    std::uint32_t rank_offset = in[0]->header().num_ranks;
    for (std::size_t i = 1; i < in.size(); ++i) {
      const bool has = in[i]->next(part);
      const std::string place = "record " + std::to_string(in[i]->records_read() - (has ? 1 : 0));
      if (has != more)
        throw InputError(in[i]->path(), place,
                         std::string(has ? "has more records than " : "ends before ") + in[0]->path() +
                             " (merging by ranks needs the same records in every trace)");
      if (!has) continue;
      if (part.step != out.step || part.micro_batch != out.micro_batch || part.layer != out.layer)
        throw InputError(in[i]->path(), place,
                         "record " + record_key_text(part) + " where " + in[0]->path() + " has " +
                             record_key_text(out) + " (merging by ranks needs the same records in every trace)");
      out.counts.insert(out.counts.end(), part.counts.begin(), part.counts.end());
      if (keep_tokens) {
        for (std::uint32_t s : part.token_src_rank) out.token_src_rank.push_back(s + rank_offset);
        out.token_experts.insert(out.token_experts.end(), part.token_experts.begin(), part.token_experts.end());
      }
      rank_offset += in[i]->header().num_ranks;
    }
    if (!more) break;
    writer.write(out);
  }
  writer.close();
}

}  // namespace epsim
