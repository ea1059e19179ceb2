#include "tests/fuzz/trace_roundtrip.hpp"

#include <exception>
#include <filesystem>

#include "tests/fuzz/fuzz_input.hpp"
#include "traces/format/trace_reader.hpp"

namespace epsim::fuzz {

void check_trace_reads_back(const std::string& path) {
  if (!std::filesystem::exists(path)) return;
  try {
    TraceReader reader(path);
    TraceRecord record;
    while (reader.next(record)) {
    }
  } catch (const std::exception& e) {
    fail(std::string("the imported trace does not read back: ") + e.what());
  }
  std::filesystem::remove(path);
}

}  // namespace epsim::fuzz
