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

} // namespace poolscope
