#include "traces/format/trace_writer.hpp"

#include "sim/core/input_error.hpp"
#include "traces/format/byte_codec.hpp"
#include "traces/format/trace_check.hpp"
#include "traces/format/trace_layout.hpp"

namespace epsim {

namespace L = trace_layout;
using namespace trace_bytes;

namespace {

// Byte by byte: vector::insert of a char range trips a false -Wstringop-overflow in GCC 12.
template <std::size_t N>
void put_tag(std::vector<std::uint8_t>& out, const char (&tag)[N]) {
  for (char c : tag) out.push_back(static_cast<std::uint8_t>(c));
}

}  // namespace

TraceWriter::TraceWriter(const std::string& path, const TraceHeader& header, bool overwrite)
    : path_(path), header_(header) {
  const std::string problem = check_trace_header(header);
  if (!problem.empty()) throw InputError(path, "header", problem);
  out_ = std::make_unique<AtomicFile>(path, overwrite);

  bytes_.clear();
  put_tag(bytes_, L::kMagic);
  put_u32(bytes_, header.version);
  put_u32(bytes_, header.num_ranks);
  put_u32(bytes_, header.num_experts);
  put_u32(bytes_, header.top_k);
  put_u32(bytes_, header.num_layers);
  put_u32(bytes_, header.has_token_ids ? L::kFlagTokenIds : 0u);
  for (std::uint32_t id : header.layer_ids) put_u32(bytes_, id);
  put_string(bytes_, header.source_format);
  put_string(bytes_, header.provenance);
  put_string(bytes_, header.rank_assignment);
  put_u64(bytes_, fnv1a64(bytes_.data(), bytes_.size()));
  write_bytes(bytes_.data(), bytes_.size());
}

TraceWriter::~TraceWriter() = default;  // an uncommitted AtomicFile removes its temporary file

void TraceWriter::write_bytes(const std::uint8_t* data, std::size_t n) {
  // A failed write throws InputError naming path_ out of the checked stream.
  out_->stream().write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n));
}

void TraceWriter::write(const TraceRecord& record) {
  const std::string place = "record " + std::to_string(records_written_);
  if (closed_) throw InputError(path_, place, "write after close()");
  const std::uint64_t tokens = record_num_tokens(record, header_);
  if (!header_.has_token_ids && record_assignments(record) % header_.top_k != 0)
    throw InputError(path_, place,
                     "counts sum to " + std::to_string(record_assignments(record)) + ", not a multiple of top_k " +
                         std::to_string(header_.top_k));
  if (tokens > 0xffffffffull) throw InputError(path_, place, "more than 2^32-1 tokens in one record");
  std::string problem = check_trace_record(record, header_, tokens, scratch_);
  if (!problem.empty()) throw InputError(path_, place, problem);
  if (records_written_ > 0 && !record_key_less(last_key_, record))
    throw InputError(path_, place,
                     "record " + record_key_text(record) + " comes after " + record_key_text(last_key_) +
                         "; records must be in increasing (step, micro-batch, layer) order");

  bytes_.clear();
  put_tag(bytes_, L::kRecordMarker);
  put_u32(bytes_, record.step);
  put_u32(bytes_, record.micro_batch);
  put_u32(bytes_, record.layer);
  put_u32(bytes_, static_cast<std::uint32_t>(tokens));
  for (std::uint32_t c : record.counts) put_u32(bytes_, c);
  if (header_.has_token_ids) {
    for (std::uint32_t s : record.token_src_rank) put_u32(bytes_, s);
    for (std::uint16_t e : record.token_experts) put_u16(bytes_, e);
  }
  put_u64(bytes_, fnv1a64(bytes_.data(), bytes_.size()));
  write_bytes(bytes_.data(), bytes_.size());
  last_key_.step = record.step;
  last_key_.micro_batch = record.micro_batch;
  last_key_.layer = record.layer;
  ++records_written_;
}

void TraceWriter::close() {
  if (closed_) return;
  bytes_.clear();
  put_tag(bytes_, L::kEndMarker);
  put_u64(bytes_, records_written_);
  put_u64(bytes_, fnv1a64(bytes_.data(), bytes_.size()));
  write_bytes(bytes_.data(), bytes_.size());
  out_->commit();
  closed_ = true;
}

}  // namespace epsim
