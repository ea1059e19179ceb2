// The binary trace format: round trips, and every kind of damage reported as InputError with the
// file and the place.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/format/trace_writer.hpp"

namespace fs = std::filesystem;
using namespace epsim;

namespace {

// 2 ranks, 3 experts, top-2, layers with ids 4 and 9.
TraceHeader small_header(bool token_ids) {
  TraceHeader h;
  h.num_ranks = 2;
  h.num_experts = 3;
  h.top_k = 2;
  h.num_layers = 2;
  h.layer_ids = {4, 9};
  h.has_token_ids = token_ids;
  h.source_format = "test";
  h.provenance = "hand-made";
  h.rank_assignment = "by hand";
  return h;
}

// Tokens: rank 0 -> {0,1}, {2,0}; rank 1 -> {1,2}. Counts follow.
TraceRecord small_record(std::uint32_t mb, std::uint32_t layer, bool token_ids) {
  TraceRecord r;
  r.micro_batch = mb;
  r.layer = layer;
  r.counts = {2, 1, 1, 0, 1, 1};
  if (token_ids) {
    r.token_src_rank = {0, 0, 1};
    r.token_experts = {0, 1, 2, 0, 1, 2};
  }
  return r;
}

std::string write_small(const fs::path& dir, bool token_ids, int records = 2) {
  const std::string path = (dir / "small.eptrace").string();
  TraceWriter w(path, small_header(token_ids));
  for (int i = 0; i < records; ++i) w.write(small_record(static_cast<std::uint32_t>(i / 2), i % 2, token_ids));
  w.close();
  return path;
}

std::vector<char> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Reads the whole trace; returns the InputError message ("" if none).
std::string read_all_error(const std::string& path) {
  try {
    TraceReader reader(path);
    TraceRecord r;
    while (reader.next(r)) {
    }
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// docs/trace-format.md sizes.
std::size_t header_bytes(const TraceHeader& h) {
  return 32 + 4 * h.num_layers + 12 + h.source_format.size() + h.provenance.size() + h.rank_assignment.size() + 8;
}
std::size_t record_bytes(const TraceHeader& h, std::size_t tokens) {
  return 20 + 4 * h.num_ranks * h.num_experts + (h.has_token_ids ? tokens * (4 + 2 * h.top_k) : 0) + 8;
}

}  // namespace

TEST_CASE("trace round trip keeps header and records, with and without token ids") {
  for (bool token_ids : {false, true}) {
    CAPTURE(token_ids);
    const auto dir = epsim::test::scratch_dir(token_ids ? "format_roundtrip_ids" : "format_roundtrip");
    const std::string path = write_small(dir, token_ids, 4);
    const TraceHeader h = small_header(token_ids);
    CHECK(fs::file_size(path) == header_bytes(h) + 4 * record_bytes(h, 3) + 20);
    CHECK(epsim::test::leftovers(dir).empty());

    TraceReader reader(path);
    const TraceHeader& got = reader.header();
    CHECK(got.version == 1);
    CHECK(got.num_ranks == 2);
    CHECK(got.num_experts == 3);
    CHECK(got.top_k == 2);
    CHECK(got.layer_ids == std::vector<std::uint32_t>{4, 9});
    CHECK(got.has_token_ids == token_ids);
    CHECK(got.source_format == "test");
    CHECK(got.provenance == "hand-made");
    CHECK(got.rank_assignment == "by hand");
    TraceRecord r;
    for (int i = 0; i < 4; ++i) {
      REQUIRE(reader.next(r));
      const TraceRecord want = small_record(static_cast<std::uint32_t>(i / 2), i % 2, token_ids);
      CHECK(r.micro_batch == want.micro_batch);
      CHECK(r.layer == want.layer);
      CHECK(r.counts == want.counts);
      CHECK(r.token_src_rank == want.token_src_rank);
      CHECK(r.token_experts == want.token_experts);
    }
    CHECK_FALSE(reader.next(r));
    CHECK_FALSE(reader.next(r));
    CHECK(reader.records_read() == 4);
  }
}

TEST_CASE("an empty trace (no records) round-trips") {
  const auto dir = epsim::test::scratch_dir("format_empty");
  const std::string path = write_small(dir, false, 0);
  TraceReader reader(path);
  TraceRecord r;
  CHECK_FALSE(reader.next(r));
}

TEST_CASE("a truncated trace names the file and says truncated or which record") {
  const auto dir = epsim::test::scratch_dir("format_truncated");
  const std::string path = write_small(dir, true, 2);
  const std::vector<char> bytes = slurp(path);
  const TraceHeader h = small_header(true);
  const std::size_t head = header_bytes(h), rec = record_bytes(h, 3);
  REQUIRE(bytes.size() == head + 2 * rec + 20);
  const std::string cut = (dir / "cut.eptrace").string();
  struct Cut {
    std::size_t at;
    const char* expect;
  };
  const std::vector<Cut> cuts = {
      {20, "truncated"},                           // inside the fixed header
      {head - 3, "truncated"},                     // inside the header checksum
      {head + 2, "record 0 at byte"},              // inside record 0's marker
      {head + 30, "truncated"},                    // inside record 0's matrix
      {head + rec + rec - 1, "record 1 at byte"},  // last byte of record 1 missing
      {head + 2 * rec, "missing end marker"},      // records complete, no end marker
      {head + 2 * rec + 10, "truncated"},          // inside the end marker
  };
  for (const Cut& c : cuts) {
    CAPTURE(c.at);
    spit(cut, std::vector<char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(c.at)));
    const std::string msg = read_all_error(cut);
    CAPTURE(msg);
    CHECK(contains(msg, "cut.eptrace"));
    CHECK(contains(msg, c.expect));
    CHECK((contains(msg, "record") || contains(msg, "truncated")));
  }
  spit(cut, std::vector<char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(head + rec + 50)));
  const std::string msg = read_all_error(cut);
  CAPTURE(msg);
  CHECK(contains(msg, "cut.eptrace:record 1 at byte " + std::to_string(head + rec) +
                          ": truncated: the record ends after 50 of " + std::to_string(rec) + " bytes"));
}

TEST_CASE("a flipped byte is a checksum mismatch naming the record") {
  const auto dir = epsim::test::scratch_dir("format_flip");
  const std::string path = write_small(dir, true, 2);
  std::vector<char> bytes = slurp(path);
  const TraceHeader h = small_header(true);
  const std::size_t head = header_bytes(h), rec = record_bytes(h, 3);
  const std::string bad = (dir / "bad.eptrace").string();

  std::vector<char> b = bytes;
  b[head + rec + 25] ^= 0x10;  // a count of record 1
  spit(bad, b);
  std::string msg = read_all_error(bad);
  CHECK(contains(msg, "bad.eptrace:record 1 at byte " + std::to_string(head + rec)));
  CHECK(contains(msg, "checksum mismatch"));

  b = bytes;
  b[head - 12] ^= 0x01;  // inside the rank_assignment string
  spit(bad, b);
  msg = read_all_error(bad);
  CHECK(contains(msg, "bad.eptrace:header"));
  CHECK(contains(msg, "checksum mismatch"));

  b = bytes;
  b[bytes.size() - 15] ^= 0x01;  // the end marker's record count
  spit(bad, b);
  CHECK(contains(read_all_error(bad), "end marker"));
}

TEST_CASE("bad magic, unsupported version, bad marker and trailing bytes are reported") {
  const auto dir = epsim::test::scratch_dir("format_magic");
  const std::string path = write_small(dir, false, 1);
  const std::vector<char> bytes = slurp(path);
  const std::string bad = (dir / "bad.eptrace").string();
  const std::size_t head = header_bytes(small_header(false));

  std::vector<char> b = bytes;
  b[0] = 'X';
  spit(bad, b);
  std::string msg = read_all_error(bad);
  CHECK(contains(msg, "bad.eptrace:byte 0: bad magic"));

  spit(bad, std::vector<char>{'h', 'e', 'l', 'l', 'o'});
  CHECK(contains(read_all_error(bad), "bad magic"));

  spit(bad, {});
  CHECK(contains(read_all_error(bad), "empty file"));

  b = bytes;
  b[8] = 2;
  spit(bad, b);
  msg = read_all_error(bad);
  CHECK(contains(msg, "bad.eptrace:byte 8: unsupported format version 2"));

  b = bytes;
  b[head] = 'X';
  spit(bad, b);
  CHECK(contains(read_all_error(bad), "bad record marker"));

  b = bytes;
  b.push_back(0);
  spit(bad, b);
  CHECK(contains(read_all_error(bad), "unexpected bytes after the end marker"));

  CHECK(contains(read_all_error((dir / "nope.eptrace").string()), "no such trace file"));
}

TEST_CASE("the writer refuses an existing output unless asked, and leaves no partial file") {
  const auto dir = epsim::test::scratch_dir("format_overwrite");
  const std::string path = write_small(dir, false, 2);
  const auto size = fs::file_size(path);
  CHECK_THROWS_AS(TraceWriter(path, small_header(false)), InputError);
  CHECK(fs::file_size(path) == size);
  CHECK(epsim::test::leftovers(dir).empty());
  {
    TraceWriter w(path, small_header(false), /*overwrite=*/true);
    w.close();
  }
  CHECK(fs::file_size(path) < size);

  const std::string fresh = (dir / "fresh.eptrace").string();
  {
    TraceWriter w(fresh, small_header(false));
    w.write(small_record(0, 0, false));
    CHECK(epsim::test::leftovers(dir).size() == 1);  // the hidden temporary file
    CHECK_FALSE(fs::exists(fresh));
  }  // no close(): abandoned
  CHECK(epsim::test::leftovers(dir).empty());
  CHECK_FALSE(fs::exists(fresh));
}

TEST_CASE("the writer rejects records that contradict the header") {
  const auto dir = epsim::test::scratch_dir("format_reject");
  const std::string path = (dir / "x.eptrace").string();
  TraceWriter w(path, small_header(true));
  TraceRecord r = small_record(0, 0, true);
  r.layer = 2;
  CHECK_THROWS_WITH_AS(w.write(r), doctest::Contains("layer index 2"), InputError);
  r = small_record(0, 0, true);
  r.token_experts[1] = 3;
  CHECK_THROWS_WITH_AS(w.write(r), doctest::Contains("not below num_experts"), InputError);
  r = small_record(0, 0, true);
  r.token_experts[1] = 0;
  CHECK_THROWS_WITH_AS(w.write(r), doctest::Contains("twice"), InputError);
  r = small_record(0, 0, true);
  r.counts[0] = 1;
  r.counts[2] = 2;
  CHECK_THROWS_WITH_AS(w.write(r), doctest::Contains("count[0][0]"), InputError);
  r = small_record(0, 0, true);
  r.counts[0] = 3;
  CHECK_THROWS_WITH_AS(w.write(r), doctest::Contains("source rank 0 sum to 5"), InputError);
  w.write(small_record(0, 1, true));
  CHECK_THROWS_WITH_AS(w.write(small_record(0, 0, true)), doctest::Contains("increasing"), InputError);

  TraceHeader h = small_header(false);
  h.top_k = 4;
  CHECK_THROWS_WITH_AS(TraceWriter((dir / "y.eptrace").string(), h), doctest::Contains("top_k"), InputError);
  h = small_header(false);
  h.layer_ids = {4, 4};
  CHECK_THROWS_WITH_AS(TraceWriter((dir / "y.eptrace").string(), h), doctest::Contains("twice"), InputError);
  for (const std::string& name : epsim::test::leftovers(dir)) CHECK(name.find("y.eptrace") == std::string::npos);

  TraceWriter counts_only((dir / "z.eptrace").string(), small_header(false));
  r = small_record(0, 0, false);
  r.counts[0] = 3;  // 7 assignments: not a multiple of top_k 2
  CHECK_THROWS_WITH_AS(counts_only.write(r), doctest::Contains("multiple of top_k"), InputError);
  // Expert ids alone, without source ranks, in a trace without token ids.
  r = small_record(0, 0, false);
  r.token_experts = {0, 1, 2, 0, 1, 2};
  CHECK_THROWS_WITH_AS(counts_only.write(r), doctest::Contains("carries token arrays"), InputError);

  // A token's source rank equal to num_ranks (2) is the first one past the end.
  TraceWriter ids((dir / "w.eptrace").string(), small_header(true));
  r = small_record(0, 0, true);
  r.token_src_rank = {0, 0, 2};
  r.counts = {2, 1, 1, 0, 0, 0};
  CHECK_THROWS_WITH_AS(ids.write(r), doctest::Contains("token 2 has source rank 2, not below num_ranks 2"),
                       InputError);

  // A header string past the format's 1 MiB.
  h = small_header(false);
  h.provenance = std::string((1u << 20) + 1, 'p');
  CHECK_THROWS_WITH_AS(TraceWriter((dir / "v.eptrace").string(), h),
                       doctest::Contains("a header string is 1048577 bytes long"), InputError);
}

TEST_CASE("the writer refuses a record of more than 2^32-1 tokens, the last key again, and a write after close") {
  const auto dir = epsim::test::scratch_dir("format_writer_edges");
  const std::string path = (dir / "x.eptrace").string();
  TraceWriter w(path, small_header(false));
  TraceRecord big = small_record(0, 0, false);
  big.counts.assign(6, 1u << 31);  // 6 x 2^31 assignments at top-2: 3 x 2^31 tokens, past the format's 2^32-1
  CHECK_THROWS_WITH_AS(w.write(big), doctest::Contains("more than 2^32-1 tokens"), InputError);
  w.write(small_record(0, 0, false));
  w.write(small_record(0, 1, false));
  // The same key as the last record: its layer, not only its micro-batch, must have been remembered.
  CHECK_THROWS_WITH_AS(w.write(small_record(0, 1, false)), doctest::Contains("increasing"), InputError);
  w.close();
  w.close();  // a second close writes nothing more
  CHECK_THROWS_WITH_AS(w.write(small_record(1, 0, false)), doctest::Contains("write after close()"), InputError);
  TraceReader reader(path);
  TraceRecord r;
  int records = 0;
  while (reader.next(r)) ++records;
  CHECK(records == 2);
  CHECK(reader.records_read() == 2);
}
