#include "traces/text/header_text.hpp"

namespace epsim {

void write_header_text(const std::string& path, const TraceHeader& h, std::ostream& out) {
  out << "trace: " << path << "\n";
  out << "format version " << h.version << ", source format " << h.source_format << "\n";
  out << "ranks " << h.num_ranks << ", experts " << h.num_experts << ", top-k " << h.top_k << ", layers "
      << h.num_layers << " (ids";
  for (std::uint32_t id : h.layer_ids) out << " " << id;
  out << "), token ids: " << (h.has_token_ids ? "yes" : "no") << "\n";
  out << "provenance: " << h.provenance << "\n";
  out << "rank assignment: " << h.rank_assignment << "\n";
}

}  // namespace epsim
