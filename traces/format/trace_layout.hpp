// The constants of the binary trace format, version 1 (docs/trace-format.md, byte by byte): magic,
// markers, fixed sizes and the limits a header must respect. Shared by TraceReader and TraceWriter.
#pragma once

#include <cstdint>

namespace epsim::trace_layout {

constexpr char kMagic[8] = {'E', 'P', 'S', 'I', 'M', 'T', 'R', 'C'};
constexpr std::uint32_t kVersion = 1;
constexpr char kRecordMarker[4] = {'R', 'C', 'R', 'D'};
constexpr char kEndMarker[4] = {'T', 'E', 'N', 'D'};

/// Header bytes before layer_ids: magic, version, ranks, experts, top_k, layers, flags.
constexpr std::uint64_t kHeaderFixedBytes = 32;
/// Bit 0 of the header flags: records carry per-token source ranks and expert ids.
constexpr std::uint32_t kFlagTokenIds = 1;
/// Record bytes before the count matrix: marker, step, micro_batch, layer, num_tokens.
constexpr std::uint64_t kRecordFixedBytes = 20;
constexpr std::uint64_t kChecksumBytes = 8;
/// End block: marker, u64 record count, u64 checksum.
constexpr std::uint64_t kEndBytes = 20;

// Limits that keep a corrupt or hostile file from asking for absurd allocations. A file's real length
// is no guard on its own (a sparse file can declare and "hold" terabytes of zeros), so every size is
// also held to these limits before anything is allocated for it.
constexpr std::uint32_t kMaxRanks = 1u << 16;  ///< as many as the largest cluster epsim simulates
constexpr std::uint32_t kMaxExperts = 65536;  ///< expert ids are stored as uint16
constexpr std::uint32_t kMaxTopK = 1024;
constexpr std::uint32_t kMaxLayers = 1u << 16;
constexpr std::uint64_t kMaxMatrixCells = 1ull << 24;  ///< ranks * experts: 64 MiB of counts per record
constexpr std::uint32_t kMaxStringBytes = 1u << 20;
/// Tokens of a record that carries token ids (each costs 4 + 2 * top_k bytes).
constexpr std::uint32_t kMaxRecordTokens = 1u << 24;
/// One record's bytes, count matrix and token arrays included.
constexpr std::uint64_t kMaxRecordBytes = 1ull << 28;

}  // namespace epsim::trace_layout
