// The generic top-k JSON-lines importer (traces/import/topk_jsonl.*). Ranks come from the header's
// num_ranks (the command line's --ranks left out); what it writes must read back.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_input.hpp"
#include "tests/fuzz/trace_roundtrip.hpp"
#include "traces/import/topk_jsonl.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = epsim::fuzz::input_file(data, size, "input.jsonl");
  const std::string out = (epsim::fuzz::scratch_dir() / "out.eptrace").string();
  epsim::fuzz::expect_only_input_errors([&] { epsim::import_topk_jsonl(path, 0, out, true); });
  epsim::fuzz::check_trace_reads_back(out);
  return 0;
}
