#pragma once
// The trace schema lives in core/src/schema.sql (documented there) and is compiled in.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace poolscope::view {
struct ChunkIndexRow;
}

namespace poolscope::schema {

inline constexpr int kVersion = 7; // written; 1 to 7 are read (see schema.sql)
// The first version whose event chunks may be zstd-compressed (codec kZstdCodecVersion): the
// one constant of that format change (another change takes the next number).
inline constexpr int kZstdChunksVersion = 5;
// The first version whose event chunks may be in codec kBlocksCodecVersion (6): a reader of
// format 6 would call its small chunks "too short" instead of refusing them as newer.
inline constexpr int kBlocksChunksVersion = 7;
// The first version whose chunks may hold the beyond-pool kinds (Event.h, issue #18).
inline constexpr int kBeyondPoolVersion = 5;
// The first version whose chunks may hold peer copies (EventKind::PeerCopy, issue #19).
inline constexpr int kPeerCopyVersion = 6;
// The first version with call-site tables (sites, native_frames, ...; Stacks.h).
inline constexpr int kStacksVersion = 4;
// The first version whose event chunks carry prev_last_seq and a crc (schema.sql).
inline constexpr int kChunkChecksumVersion = 3;
// 'PSCP' as a big-endian integer: `file` and the reader recognise a trace by it.
inline constexpr int32_t kApplicationId = 0x50534350;
inline constexpr std::string_view kFileExtension = ".poolscope";

std::string_view createSql(); // the full CREATE script for kVersion
// Tables a valid trace of kVersion must have.
inline constexpr const char* kRequiredTables[] = {
    "meta", "process", "devices", "pools", "streams", "threads", "event_chunks", "event_counts",
    "samples"};
// Events per chunk written by TraceWriter (a commit may close a chunk early).
inline constexpr size_t kChunkEvents = 4096;

// An event chunk row's small columns (format 3's checksum covers them and the data).
struct ChunkHeader {
    uint64_t firstSeq = 0, lastSeq = 0, prevLastSeq = 0;
    int64_t tMin = 0, tMax = 0;
    uint64_t count = 0, kinds = 0;
    int64_t codec = 0;
};
// The crc column of a format-3 chunk: CRC32C of the header's eight values as 64-bit
// little-endian words, in the order declared above, then of the data.
uint32_t chunkChecksum(const ChunkHeader& h, std::string_view data);
// The crc column of a chunk_index row (schema.sql): CRC32C of its chunk's header (as above), the
// chunk's crc column and the row's five values, each a 64-bit little-endian word. A row whose
// chunk's header or crc changed no longer matches it.
uint32_t chunkIndexChecksum(const ChunkHeader& h, uint32_t chunkCrc, const view::ChunkIndexRow& row);
// The row_crc column of a chunk_headers row (schema.sql): CRC32C of the chunk's header (as above,
// h.prevLastSeq being the row's), the row's crc and the chunk's data length as 64-bit
// little-endian words, then of kindCounts (the row's kind_counts bytes).
uint32_t chunkHeaderRowChecksum(const ChunkHeader& h, uint32_t chunkCrc, uint64_t dataBytes,
                                std::string_view kindCounts);

} // namespace poolscope::schema
