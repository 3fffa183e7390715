#pragma once
// The trace schema lives in core/src/schema.sql (documented there) and is compiled in.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace poolscope::schema {

inline constexpr int kVersion = 2; // written; 1 and 2 are read (see schema.sql)
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

} // namespace poolscope::schema
