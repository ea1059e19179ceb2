#include "traces/format/trace_reader.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "sim/core/input_error.hpp"
#include "traces/format/byte_codec.hpp"
#include "traces/format/trace_check.hpp"
#include "traces/format/trace_layout.hpp"

namespace epsim {

namespace fs = std::filesystem;
namespace L = trace_layout;
using namespace trace_bytes;

namespace {

std::string at_byte(std::uint64_t offset) { return "byte " + std::to_string(offset); }

std::string printable(const std::uint8_t* p, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\' && p[i] != '"') {
      out += static_cast<char>(p[i]);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[p[i] >> 4];
      out += hex[p[i] & 15];
    }
  }
  return "\"" + out + "\"";
}

}  // namespace

TraceReader::TraceReader(const std::string& path) : path_(path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(path, "", "no such trace file");
  if (!fs::is_regular_file(path, ec)) throw InputError(path, "", "not a regular file");
  file_size_ = fs::file_size(path, ec);
  if (ec) throw InputError(path, "", "cannot read the file size: " + ec.message());
  in_.open(path, std::ios::binary);
  if (!in_) throw InputError(path, "", std::string("cannot open: ") + std::strerror(errno));
  read_header();
}

const TraceHeader& TraceReader::header() const { return header_; }
std::uint64_t TraceReader::records_read() const { return records_read_; }
const std::string& TraceReader::path() const { return path_; }

void TraceReader::fail(const std::string& place, const std::string& message) const {
  throw InputError(path_, place, message);
}

void TraceReader::truncated(std::uint64_t start, const std::string& what, std::uint64_t needed, bool at_least) const {
  const std::uint64_t have = file_size_ - start;
  fail(what + " at " + at_byte(start),
       "truncated: the " + (what.rfind("record", 0) == 0 ? std::string("record") : what) + " ends after " +
           std::to_string(have) + " of " + (at_least ? "at least " : "") + std::to_string(needed) +
           " bytes (the file is " + std::to_string(file_size_) + " bytes long; was the writer interrupted?)");
}

void TraceReader::read_into(std::size_t at, std::size_t n) {
  if (bytes_.size() < at + n) bytes_.resize(at + n);
  in_.read(reinterpret_cast<char*>(bytes_.data() + at), static_cast<std::streamsize>(n));
  if (static_cast<std::size_t>(in_.gcount()) != n)
    fail(at_byte(offset_), std::string("read error: ") + std::strerror(errno));
  offset_ += n;
}

void TraceReader::read_header() {
  // Fixed part: magic, version, ranks, experts, top_k, layers, flags.
  if (file_size_ == 0) fail("", "empty file, not an epsim trace (expected magic \"EPSIMTRC\")");
  const std::uint64_t magic_bytes = file_size_ < 8 ? file_size_ : 8;
  read_into(0, magic_bytes);
  // A file that starts like a trace but ends inside the magic is a cut trace, not a foreign file.
  if (magic_bytes < 8 && std::memcmp(bytes_.data(), L::kMagic, magic_bytes) == 0)
    truncated(0, "header", L::kHeaderFixedBytes, true);
  if (magic_bytes < 8 || std::memcmp(bytes_.data(), L::kMagic, 8) != 0)
    fail(at_byte(0),
         "bad magic " + printable(bytes_.data(), magic_bytes) + ": not an epsim trace (expected \"EPSIMTRC\")");
  if (file_size_ < 12) truncated(0, "header", L::kHeaderFixedBytes, true);
  read_into(8, 4);
  header_.version = get_u32(&bytes_[8]);
  if (header_.version != L::kVersion)
    fail(at_byte(8), "unsupported format version " + std::to_string(header_.version) + " (this epsim reads version " +
                         std::to_string(L::kVersion) + ")");
  if (file_size_ < L::kHeaderFixedBytes) truncated(0, "header", L::kHeaderFixedBytes, true);
  read_into(12, L::kHeaderFixedBytes - 12);
  header_.num_ranks = get_u32(&bytes_[12]);
  header_.num_experts = get_u32(&bytes_[16]);
  header_.top_k = get_u32(&bytes_[20]);
  header_.num_layers = get_u32(&bytes_[24]);
  const std::uint32_t flags = get_u32(&bytes_[28]);
  if (flags & ~L::kFlagTokenIds)
    fail(at_byte(28), "unknown header flags " + std::to_string(flags) + " (only bit 0, token ids, is defined)");
  header_.has_token_ids = (flags & L::kFlagTokenIds) != 0;
  if (header_.num_layers > L::kMaxLayers)
    fail(at_byte(24),
         "num_layers " + std::to_string(header_.num_layers) + " exceeds the limit " + std::to_string(L::kMaxLayers));

  // Layer ids, then three length-prefixed strings, then the header checksum.
  std::size_t pos = L::kHeaderFixedBytes;
  const std::uint64_t ids_bytes = 4ull * header_.num_layers;
  if (file_size_ < pos + ids_bytes) truncated(0, "header", pos + ids_bytes + 12 + L::kChecksumBytes, true);
  read_into(pos, ids_bytes);
  header_.layer_ids.resize(header_.num_layers);
  for (std::uint32_t i = 0; i < header_.num_layers; ++i) header_.layer_ids[i] = get_u32(&bytes_[pos + 4 * i]);
  pos += ids_bytes;
  for (std::string* s : {&header_.source_format, &header_.provenance, &header_.rank_assignment}) {
    if (file_size_ < pos + 4) truncated(0, "header", pos + 4 + L::kChecksumBytes, true);
    read_into(pos, 4);
    const std::uint32_t len = get_u32(&bytes_[pos]);
    if (len > L::kMaxStringBytes)
      fail(at_byte(pos), "header string of " + std::to_string(len) + " bytes exceeds the limit " +
                             std::to_string(L::kMaxStringBytes));
    pos += 4;
    if (file_size_ < pos + len) truncated(0, "header", pos + len + L::kChecksumBytes, true);
    read_into(pos, len);
    s->assign(reinterpret_cast<const char*>(&bytes_[pos]), len);
    pos += len;
  }
  if (file_size_ < pos + L::kChecksumBytes) truncated(0, "header", pos + L::kChecksumBytes, false);
  read_into(pos, L::kChecksumBytes);
  const std::uint64_t stored = get_u64(&bytes_[pos]);
  const std::uint64_t computed = fnv1a64(bytes_.data(), pos);
  if (stored != computed)
    fail("header", "checksum mismatch: the header (bytes 0.." + std::to_string(pos) + ") is corrupt (stored FNV-1a " +
                       std::to_string(stored) + ", computed " + std::to_string(computed) + ")");
  const std::string problem = check_trace_header(header_);
  if (!problem.empty()) fail("header", problem);
}

void TraceReader::read_end_block(std::uint64_t start) {
  const std::string place = "end marker at " + at_byte(start);
  if (file_size_ - start < L::kEndBytes) truncated(start, "end marker", L::kEndBytes, false);
  read_into(4, L::kEndBytes - 4);
  const std::uint64_t count = get_u64(&bytes_[4]);
  const std::uint64_t stored = get_u64(&bytes_[12]);
  if (stored != fnv1a64(bytes_.data(), 12)) fail(place, "checksum mismatch: the end marker is corrupt");
  if (count != records_read_)
    fail(place, "the end marker counts " + std::to_string(count) + " records but the file holds " +
                    std::to_string(records_read_));
  if (offset_ != file_size_)
    fail(at_byte(offset_), std::to_string(file_size_ - offset_) + " unexpected bytes after the end marker");
  finished_ = true;
}

bool TraceReader::next(TraceRecord& record) {
  if (finished_) return false;
  const std::uint64_t start = offset_;
  const std::uint64_t remaining = file_size_ - start;
  const std::string name = "record " + std::to_string(records_read_);
  const std::uint64_t cells = static_cast<std::uint64_t>(header_.num_ranks) * header_.num_experts;
  const std::uint64_t min_size = L::kRecordFixedBytes + 4 * cells + L::kChecksumBytes;
  if (remaining == 0)
    fail(at_byte(start), "missing end marker: the file ends after " + std::to_string(records_read_) +
                             " records (was the writer interrupted?)");
  if (remaining < 4) truncated(start, name, min_size, true);
  read_into(0, 4);
  if (std::memcmp(bytes_.data(), L::kEndMarker, 4) == 0) {
    read_end_block(start);
    return false;
  }
  if (std::memcmp(bytes_.data(), L::kRecordMarker, 4) != 0)
    fail(name + " at " + at_byte(start),
         "bad record marker " + printable(bytes_.data(), 4) + " (expected \"RCRD\" or the end marker \"TEND\")");
  if (remaining < L::kRecordFixedBytes) truncated(start, name, min_size, true);
  read_into(4, L::kRecordFixedBytes - 4);
  const std::uint32_t num_tokens = get_u32(&bytes_[16]);
  // Sizes are checked against the limits before the file's length: a sparse file can be as long as
  // it claims, and the record's bytes are allocated next.
  if (header_.has_token_ids && num_tokens > L::kMaxRecordTokens)
    fail(name + " at " + at_byte(start + 16), "declares " + std::to_string(num_tokens) +
                                                  " tokens with token ids, more than the format's limit of " +
                                                  std::to_string(L::kMaxRecordTokens));
  std::uint64_t size = min_size;
  if (header_.has_token_ids) size += 4ull * num_tokens + 2ull * num_tokens * header_.top_k;
  if (size > L::kMaxRecordBytes)
    fail(name + " at " + at_byte(start), "a record of " + std::to_string(size) +
                                             " bytes exceeds the format's limit of " +
                                             std::to_string(L::kMaxRecordBytes) + " bytes");
  if (remaining < size) truncated(start, name, size, false);
  read_into(L::kRecordFixedBytes, size - L::kRecordFixedBytes);

  const std::size_t payload = static_cast<std::size_t>(size - L::kChecksumBytes);
  const std::uint64_t stored = get_u64(&bytes_[payload]);
  const std::uint64_t computed = fnv1a64(bytes_.data(), payload);
  if (stored != computed)
    fail(name + " at " + at_byte(start), "checksum mismatch: the record's " + std::to_string(size) +
                                             " bytes are corrupt (stored FNV-1a " + std::to_string(stored) +
                                             ", computed " + std::to_string(computed) + ")");

  record.step = get_u32(&bytes_[4]);
  record.micro_batch = get_u32(&bytes_[8]);
  record.layer = get_u32(&bytes_[12]);
  record.counts.resize(cells);
  const std::uint8_t* p = &bytes_[L::kRecordFixedBytes];
  for (std::uint64_t i = 0; i < cells; ++i, p += 4) record.counts[i] = get_u32(p);
  if (header_.has_token_ids) {
    record.token_src_rank.resize(num_tokens);
    for (std::uint32_t t = 0; t < num_tokens; ++t, p += 4) record.token_src_rank[t] = get_u32(p);
    record.token_experts.resize(static_cast<std::size_t>(num_tokens) * header_.top_k);
    for (std::uint16_t& e : record.token_experts) {
      e = get_u16(p);
      p += 2;
    }
  } else {
    record.token_src_rank.clear();
    record.token_experts.clear();
  }
  const std::string problem = check_trace_record(record, header_, num_tokens, scratch_);
  if (!problem.empty()) fail(name + " at " + at_byte(start), problem);
  if (records_read_ > 0 && !record_key_less(last_key_, record))
    fail(name + " at " + at_byte(start), "record " + record_key_text(record) + " comes after " +
                                             record_key_text(last_key_) +
                                             "; records must be in increasing (step, micro-batch, layer) order");
  last_key_.step = record.step;
  last_key_.micro_batch = record.micro_batch;
  last_key_.layer = record.layer;
  ++records_read_;
  return true;
}

}  // namespace epsim
