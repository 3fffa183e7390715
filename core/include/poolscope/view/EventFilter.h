#pragma once
// Which events an events list shows: by kind, failure, stream, pool, size and time. Plain data
// with one predicate, so the window's table, the CLI and tests filter the same way; and what a
// trace keeps per event chunk so that a filter can pass over a chunk without decoding it.

#include "poolscope/Event.h"

#include <cstdint>
#include <optional>

namespace poolscope::view {

// One event chunk's row of the trace's chunk_index table (schema.sql): for the fields
// EventFilter::matches tests besides time and kind (which the chunk's header already has), enough
// to tell that no event of the chunk can match. Built by the writer from the chunk's events
// (add); the layout and the hash are part of the trace format.
struct ChunkIndexRow {
    uint64_t streams = 0;          // bloom: streamBits(e.stream) of every event, any kind
    uint64_t pools = 0;            // bloom: the same of every event's pool
    uint64_t failed = 0;           // events with result != 0, any kind
    uint64_t sizeMin = UINT64_MAX; // e.size over the Alloc and Free events; sizeMin > sizeMax:
    uint64_t sizeMax = 0;          // the chunk has none

    // Two of the 64 bits, picked by murmur3's 64-bit finalizer of the handle (handles are
    // aligned pointers: their low bits alone would pick few bits). With two bits a chunk of a
    // few streams rarely lets another stream through (~2% at five).
    static uint64_t bloomBits(uint64_t handle) {
        uint64_t h = handle;
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        h *= 0xc4ceb9fe1a85ec53ULL;
        h ^= h >> 33;
        return (uint64_t{1} << (h & 63)) | (uint64_t{1} << ((h >> 6) & 63));
    }
    void add(const Event& e) {
        streams |= bloomBits(e.stream);
        pools |= bloomBits(e.pool);
        failed += e.result != 0;
        if (e.kind == EventKind::Alloc || e.kind == EventKind::Free) {
            if (e.size < sizeMin) sizeMin = e.size;
            if (e.size > sizeMax) sizeMax = e.size;
        }
    }
    bool operator==(const ChunkIndexRow&) const = default;
};

// An event chunk as a filter sees it without decoding it: its header's time range and kind
// bits, and its index row where it has one that holds (null otherwise).
struct ChunkFacts {
    int64_t tMin = INT64_MIN;
    int64_t tMax = INT64_MAX;
    uint64_t kinds = ~uint64_t{0}; // bit (1 << EventKind)
    const ChunkIndexRow* index = nullptr;
};

struct EventFilter {
    uint32_t kindMask = ~0u; // bit (1 << EventKind)
    bool failedOnly = false;
    std::optional<uint64_t> stream;
    std::optional<uint64_t> pool;
    uint64_t minSize = 0; // applies to alloc/free: other kinds are hidden while a size is set
    uint64_t maxSize = UINT64_MAX;
    int64_t t0 = INT64_MIN; // [t0, t1)
    int64_t t1 = INT64_MAX;

    static uint32_t bit(EventKind k) { return 1u << unsigned(k); }
    bool sizeActive() const { return minSize > 0 || maxSize != UINT64_MAX; }
    bool matches(const Event& e) const;
    // False only when no event the facts describe can match (each test of matches() that the
    // facts can answer): such a chunk need not be decoded. True says nothing.
    bool mayMatch(const ChunkFacts& c) const;
};

} // namespace poolscope::view
