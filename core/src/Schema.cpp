#include "poolscope/Schema.h"

#include "SchemaSql.h"
#include "poolscope/Crc32c.h"
#include "poolscope/view/EventFilter.h"

namespace poolscope::schema {

std::string_view createSql() { return detail::kCreateSql; }

// The header's eight words, in the order schema.sql gives for the chunk's crc. A checksum over
// them and more words continues from theirs (CRC32C is incremental).
static uint32_t headerCrc(const ChunkHeader& h) {
    const uint64_t words[] = {h.firstSeq, h.lastSeq, h.prevLastSeq, static_cast<uint64_t>(h.tMin),
                              static_cast<uint64_t>(h.tMax), h.count, h.kinds,
                              static_cast<uint64_t>(h.codec)};
    return crc32cOfWords(0, words);
}

uint32_t chunkIndexChecksum(const ChunkHeader& h, uint32_t chunkCrc, const view::ChunkIndexRow& r) {
    const uint64_t words[] = {chunkCrc, r.streams, r.pools, r.failed, r.sizeMin, r.sizeMax};
    return crc32cOfWords(headerCrc(h), words);
}

uint32_t chunkHeaderRowChecksum(const ChunkHeader& h, uint32_t chunkCrc, uint64_t dataBytes,
                                std::string_view kindCounts) {
    const uint64_t words[] = {chunkCrc, dataBytes};
    return crc32c(crc32cOfWords(headerCrc(h), words), kindCounts.data(), kindCounts.size());
}

uint32_t chunkChecksum(const ChunkHeader& h, std::string_view data) {
    return crc32c(headerCrc(h), data.data(), data.size());
}

} // namespace poolscope::schema
