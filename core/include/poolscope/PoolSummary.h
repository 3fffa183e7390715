#pragma once
// Per-chunk pool summaries (issue #15): for each event chunk, per pool, the time range and the
// least, greatest and last reserved/used bytes of the chunk's events with watermarks. The
// writer keeps them as it encodes (PoolSummaryAccumulator) and stores them in the
// pool_chunk_summary table (schema.sql); TraceReader::poolSummaries reads them back without
// decoding a chunk, and view::Overview builds its pyramid from them.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "poolscope/Event.h"

namespace poolscope {

struct PoolChunkSummary {
    int64_t chunk = 0;     // event_chunks.id
    uint64_t pool = 0;     // 0 only in the row of a chunk without watermarks (never read back)
    uint64_t chunkRows = 0; // rows the chunk has
    int64_t tMin = 0, tMax = 0;
    uint64_t reservedMin = 0, reservedMax = 0, usedMin = 0, usedMax = 0;
    uint64_t reservedLast = 0, usedLast = 0; // the last event's values, in seq order
};

// What a trace holds of them (TraceReader::poolSummaries).
struct PoolSummaries {
    bool present = false; // the trace has the table (written since 2026-11-24)
    // Rows of chunks whose rows all hold up, in the chunks' seq order, then by pool; no pool-0
    // rows (a chunk without watermarks has nothing to draw).
    std::vector<PoolChunkSummary> rows;
    uint64_t chunks = 0;         // chunks summarized (pool-0 ones included)
    uint64_t chunksWithout = 0;  // intact chunks with no valid summary (damage, or none written)
    std::vector<int64_t> withoutIds; // their chunk ids, in seq order
};

namespace schema {
// The crc column of a pool_chunk_summary row: CRC32C of its eleven values (chunk, pool,
// chunk_rows, t_min, t_max, reserved_min, reserved_max, used_min, used_max, reserved_last,
// used_last) as 64-bit little-endian words, then of the owning chunk's crc as a 32-bit
// little-endian word.
uint32_t poolSummaryChecksum(const PoolChunkSummary& r, uint32_t chunkCrc);
// Chunks per pool_block_summary block (the last block of a trace may have fewer).
inline constexpr uint64_t kBlockChunks = 64;
} // namespace schema

// A pool_block_summary row: PoolChunkSummary's values merged over the chunks with ids
// chunk..lastChunk (chunk: the block's first; chunkRows: the block's rows).
struct PoolBlockSummary : PoolChunkSummary {
    int64_t lastChunk = 0;
};

namespace schema {
// The crc column of a pool_block_summary row: CRC32C of first_chunk, pool, last_chunk,
// block_rows, t_min, t_max, reserved_min, reserved_max, used_min, used_max, reserved_last,
// used_last as 64-bit little-endian words.
uint32_t poolBlockChecksum(const PoolBlockSummary& r);
} // namespace schema

// Merges chunks' summary rows into their block's (the writer, and the reader's check of a
// block against its chunks): fed each chunk's rows in seq order.
class PoolBlockAccumulator {
public:
    void add(const std::vector<PoolChunkSummary>& chunkRows, int64_t chunk);
    uint64_t chunks() const { return chunks_; }
    // The block's rows by pool (a pool-0 row over the block's time when no chunk had a pool
    // row), first and last chunk and block_rows set; then empty for the next block. Empty when
    // nothing was added.
    std::vector<PoolBlockSummary> take();

private:
    std::vector<PoolBlockSummary> acc_;
    int64_t first_ = 0, last_ = 0;
    int64_t tMin_ = 0, tMax_ = 0; // of the pool-0 rows (chunks without watermarks)
    uint64_t chunks_ = 0;
};

// The writer's side: fed every event of the chunk being filled, gives its rows when the chunk
// is written. A chunk has at most schema::kChunkEvents events, so at most that many pools.
class PoolSummaryAccumulator {
public:
    void add(const Event& e) {
        if (!(e.flags & kHasWatermarks) || e.pool == 0) return;
        if (last_ >= acc_.size() || acc_[last_].pool != e.pool) last_ = find(e.pool);
        PoolChunkSummary& a = acc_[last_];
        a.tMin = e.tsNs < a.tMin ? e.tsNs : a.tMin;
        a.tMax = e.tsNs > a.tMax ? e.tsNs : a.tMax;
        a.reservedMin = e.reserved < a.reservedMin ? e.reserved : a.reservedMin;
        a.reservedMax = e.reserved > a.reservedMax ? e.reserved : a.reservedMax;
        a.usedMin = e.used < a.usedMin ? e.used : a.usedMin;
        a.usedMax = e.used > a.usedMax ? e.used : a.usedMax;
        a.reservedLast = e.reserved;
        a.usedLast = e.used;
    }
    // The chunk's rows, by pool (a pool-0 row spanning [tMin, tMax] when it had no
    // watermarks), chunk and chunk_rows set; then empty for the next chunk.
    std::vector<PoolChunkSummary> take(int64_t chunk, int64_t tMin, int64_t tMax);
    void clear() {
        acc_.clear();
        last_ = 0;
    }

private:
    size_t find(uint64_t pool);
    std::vector<PoolChunkSummary> acc_;
    size_t last_ = 0;
};

} // namespace poolscope
