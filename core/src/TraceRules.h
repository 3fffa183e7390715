#pragma once
// Rules of the trace format that the reader checks rows against, shared by the reader
// (TraceReader.cpp) and its checks of the tables and chunk headers (TraceChecks.cpp). Private to
// core.

#include <cstdint>
#include <string>

#include "poolscope/EventCodec.h"
#include "poolscope/Schema.h"

namespace poolscope::detail {

// The fewest bytes an event takes in each codec: a chunk's data shorter than count times this
// cannot hold its count (version 1: 17 varints; 2: a mask byte; 3: the 5-byte header).
// Codecs 5 and 6 are compressed: no bound per event (its frame's size is checked when decompressed).
inline uint64_t minEventBytes(int64_t codec) {
    return codec == 1 ? 17 : codec >= kZstdCodecVersion ? 0 : codec >= 3 ? 5 : 1;
}

inline std::string describeChunk(int64_t id, const schema::ChunkHeader& h) {
    return "event chunk " + std::to_string(id) + " (seq " + std::to_string(h.firstSeq) + ".." +
           std::to_string(h.lastSeq) + ", " + std::to_string(h.count) + " events)";
}

// A sample row the reader keeps: integers, and byte counts from 0 to 2^50 (1 PiB: no pool,
// device or host, comes near it; a negative value read as unsigned would draw as 16 EiB).
inline constexpr const char* kBadSampleRow =
    "typeof(ts_ns)<>'integer' OR typeof(pool)<>'integer' OR typeof(reserved)<>'integer' OR "
    "typeof(reserved_high)<>'integer' OR typeof(used)<>'integer' OR typeof(used_high)<>'integer' "
    "OR reserved NOT BETWEEN 0 AND 1125899906842624 OR reserved_high NOT BETWEEN 0 AND "
    "1125899906842624 OR used NOT BETWEEN 0 AND 1125899906842624 OR used_high NOT BETWEEN 0 AND "
    "1125899906842624";

// pool_initial_attributes rows that cannot be a value the collector read (see schema.sql). A row of a
// pool without a pools row is not one of them: the collector reads a pool's attributes when it
// registers the pool, which can happen without an event that would name it in the trace.
inline constexpr const char* kBadPoolAttributeRow =
    "typeof(pool)<>'integer' OR typeof(attr)<>'integer' OR attr<1 OR attr>4"
    " OR typeof(value)<>'integer' OR (attr<4 AND value NOT IN (0,1))";

} // namespace poolscope::detail
