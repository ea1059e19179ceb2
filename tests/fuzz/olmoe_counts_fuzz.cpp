// The OLMoE expert-count importer (traces/import/olmoe_counts.*), with small sampling options so that
// one input runs in well under a millisecond; what it writes must read back.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_input.hpp"
#include "tests/fuzz/trace_roundtrip.hpp"
#include "traces/import/olmoe_counts.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = epsim::fuzz::input_file(data, size, "input.counts.json");
  const std::string out = (epsim::fuzz::scratch_dir() / "out.eptrace").string();
  epsim::OlmoeImportOptions options;
  options.ranks = 2;
  options.tokens_per_rank = 8;
  options.micro_batches = 2;
  options.seed = 1;
  options.token_ids = true;
  epsim::fuzz::expect_only_input_errors([&] { epsim::import_olmoe_counts(path, options, out, true); });
  epsim::fuzz::check_trace_reads_back(out);
  return 0;
}
