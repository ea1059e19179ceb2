// The binary trace reader (traces/format/trace_reader.*): header, every record, the end marker. A record
// it hands out must have the shape its header promises, since the replay indexes it without checks.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_input.hpp"
#include "traces/format/trace_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = epsim::fuzz::input_file(data, size, "input.eptrace");
  epsim::fuzz::expect_only_input_errors([&] {
    epsim::TraceReader reader(path);
    const epsim::TraceHeader& h = reader.header();
    if (h.layer_ids.size() != h.num_layers) epsim::fuzz::fail("header: layer_ids.size() != num_layers");
    epsim::TraceRecord record;
    while (reader.next(record)) {
      if (record.counts.size() != static_cast<std::size_t>(h.num_ranks) * h.num_experts)
        epsim::fuzz::fail("record: counts is not num_ranks x num_experts");
      if (record.layer >= h.num_layers) epsim::fuzz::fail("record: layer index outside layer_ids");
      if (record.token_experts.size() != record.token_src_rank.size() * h.top_k)
        epsim::fuzz::fail("record: token_experts is not tokens x top_k");
    }
  });
  return 0;
}
