#include "poolscope/Schema.h"

#include "SchemaSql.h"
#include "poolscope/Crc32c.h"

namespace poolscope::schema {

std::string_view createSql() { return detail::kCreateSql; }

uint32_t chunkChecksum(const ChunkHeader& h, std::string_view data) {
    const uint64_t words[] = {h.firstSeq,
                              h.lastSeq,
                              h.prevLastSeq,
                              static_cast<uint64_t>(h.tMin),
                              static_cast<uint64_t>(h.tMax),
                              h.count,
                              h.kinds,
                              static_cast<uint64_t>(h.codec)};
    unsigned char bytes[sizeof words];
    for (size_t i = 0; i < std::size(words); ++i)
        for (int b = 0; b < 8; ++b)
            bytes[i * 8 + b] = static_cast<unsigned char>(words[i] >> (8 * b));
    return crc32c(crc32c(0, bytes, sizeof bytes), data.data(), data.size());
}

} // namespace poolscope::schema
