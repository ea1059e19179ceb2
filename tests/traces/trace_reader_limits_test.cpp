// A trace that declares huge sizes is refused before anything is allocated for them, even when the
// file is as long as it claims (a sparse file): the reader checks every size against the format's
// limits first, and names the file and the byte offset.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/byte_codec.hpp"
#include "traces/format/trace_layout.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/format/trace_types.hpp"

namespace {

using namespace epsim;
using namespace epsim::trace_bytes;
namespace fs = std::filesystem;

/// A checksummed header (one layer, empty strings) of the given shape.
std::vector<std::uint8_t> header_bytes(std::uint32_t ranks, std::uint32_t experts, std::uint32_t top_k,
                                       bool token_ids) {
  std::vector<std::uint8_t> out(trace_layout::kMagic, trace_layout::kMagic + 8);
  put_u32(out, trace_layout::kVersion);
  put_u32(out, ranks);
  put_u32(out, experts);
  put_u32(out, top_k);
  put_u32(out, 1);  // layers
  put_u32(out, token_ids ? trace_layout::kFlagTokenIds : 0);
  put_u32(out, 7);  // layer id
  for (int i = 0; i < 3; ++i) put_string(out, "");
  put_u64(out, fnv1a64(out.data(), out.size()));
  return out;
}

/// Writes `bytes`, then extends the file with a hole to `length` bytes (no disk space used).
fs::path sparse_file(const std::string& name, const std::vector<std::uint8_t>& bytes, std::uint64_t length) {
  const fs::path path = test::scratch_dir("trace-limits") / name;
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  fs::resize_file(path, length);
  return path;
}

std::string read_error(const fs::path& path) {
  try {
    TraceReader reader(path.string());
    TraceRecord record;
    while (reader.next(record)) {
    }
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("trace limits: a header whose count matrix exceeds 2^24 cells is refused at the header") {
  // 16384 x 16384 = 2^28 cells: 1 GiB per record. The old limit (2^28) let it through, and a sparse
  // file of 1.1 GiB then made the reader allocate 1 GiB for the first record.
  const auto head = header_bytes(16384, 16384, 8, false);
  std::vector<std::uint8_t> bytes = head;
  bytes.insert(bytes.end(), trace_layout::kRecordMarker, trace_layout::kRecordMarker + 4);
  const fs::path path = sparse_file("cells.eptrace", bytes, 1200ull << 20);
  CHECK(read_error(path) == path.string() +
                                ":header: num_ranks * num_experts = 268435456 exceeds the format's limit of 16777216");
}

TEST_CASE("trace limits: more than 65536 ranks is refused at the header") {
  const fs::path path = sparse_file("ranks.eptrace", header_bytes(70000, 1, 1, false), 4096);
  CHECK(read_error(path) == path.string() + ":header: num_ranks 70000 is outside 1..65536");
}

TEST_CASE("trace limits: a record that declares 2^31 tokens with ids is refused before allocation") {
  // 2^31 tokens x (4 + 2 x 2) bytes = 16 GiB of token arrays in a 17 GiB sparse file.
  const auto head = header_bytes(1, 8, 2, true);
  std::vector<std::uint8_t> bytes = head;
  bytes.insert(bytes.end(), trace_layout::kRecordMarker, trace_layout::kRecordMarker + 4);
  put_u32(bytes, 0);           // step
  put_u32(bytes, 0);           // micro-batch
  put_u32(bytes, 0);           // layer
  put_u32(bytes, 1u << 31);    // num_tokens
  const fs::path path = sparse_file("tokens.eptrace", bytes, 17ull << 30);
  CHECK(read_error(path) == path.string() + ":record 0 at byte " + std::to_string(head.size() + 16) +
                                ": declares 2147483648 tokens with token ids, more than the format's limit of 16777216");
}

TEST_CASE("trace limits: a record within the token limit but over 256 MiB is refused before allocation") {
  // 2^24 tokens x (4 + 2 x 1024) bytes = 32 GiB.
  const auto head = header_bytes(1, 1024, 1024, true);
  std::vector<std::uint8_t> bytes = head;
  bytes.insert(bytes.end(), trace_layout::kRecordMarker, trace_layout::kRecordMarker + 4);
  for (int i = 0; i < 3; ++i) put_u32(bytes, 0);
  put_u32(bytes, 1u << 24);
  const fs::path path = sparse_file("bytes.eptrace", bytes, 33ull << 30);
  const std::uint64_t size = 20 + 4 * 1024 + 8 + (1ull << 24) * (4 + 2 * 1024);
  CHECK(read_error(path) == path.string() + ":record 0 at byte " + std::to_string(head.size()) + ": a record of " +
                                std::to_string(size) + " bytes exceeds the format's limit of 268435456 bytes");
}

TEST_CASE("trace limits: a file cut inside the magic is reported as truncated") {
  const fs::path path = sparse_file("cut.eptrace", {'E', 'P', 'S', 'I', 'M'}, 5);
  CHECK(read_error(path) == path.string() +
                                ":header at byte 0: truncated: the header ends after 5 of at least 32 bytes (the file "
                                "is 5 bytes long; was the writer interrupted?)");
}
