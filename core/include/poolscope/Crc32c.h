#pragma once
// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of a trace's event chunks
// (schema.sql, format 3). Written here rather than taken from a library: the collector links
// core, and the whole of it is one table and one loop (SSE4.2's crc32 instruction when the CPU
// has it). crc32c("123456789") = 0xE3069283.

#include <cstddef>
#include <cstdint>

namespace poolscope {

// Continues a CRC32C over n more bytes: start with crc = 0.
uint32_t crc32c(uint32_t crc, const void* data, size_t n);

// Continues it over the words as 64-bit little-endian integers: every table checksum of the
// trace (schema.sql) is one of these.
template <size_t N> uint32_t crc32cOfWords(uint32_t crc, const uint64_t (&words)[N]) {
    unsigned char bytes[N * 8];
    for (size_t i = 0; i < N; ++i)
        for (int b = 0; b < 8; ++b)
            bytes[i * 8 + b] = static_cast<unsigned char>(words[i] >> (8 * b));
    return crc32c(crc, bytes, sizeof bytes);
}

} // namespace poolscope
