#pragma once
// The overview of a trace's pools from the per-chunk summaries the writer stores (issue #15,
// PoolSummary.h): per pool a pyramid of min/max blocks, level 0 one block per chunk, each level
// above merging kFanout blocks of the one below, so that a view of any width reads about one
// block per pixel column without any event in memory. Built once at open from
// TraceReader::poolSummaries(); immutable, so it may be read from any thread.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "poolscope/PoolSummary.h"

namespace poolscope::view {

struct OverviewBlock {
    int64_t tMin = 0, tMax = 0; // of the pool's events with watermarks in the block
    uint64_t reservedMin = 0, reservedMax = 0, usedMin = 0, usedMax = 0;
    uint64_t reservedLast = 0, usedLast = 0; // at the block's end (its last chunk's last event)
};

struct OverviewColumn {
    bool any = false; // the column has a value: false before the pool's first block
    uint64_t reservedMin = 0, reservedMax = 0, usedMin = 0, usedMax = 0;
};

class Overview {
public:
    static constexpr size_t kFanout = 8;

    Overview() = default;
    explicit Overview(const PoolSummaries& summaries);

    // The trace has summaries (a trace written before them has none: callers fall back).
    bool available() const { return present_; }
    std::vector<uint64_t> pools() const;
    bool hasPool(uint64_t pool) const { return pools_.count(pool) != 0; }
    size_t levelCount(uint64_t pool) const;
    // The pool's blocks at a level, in seq order (empty for an unknown pool or level).
    const std::vector<OverviewBlock>& level(uint64_t pool, size_t level) const;
    // The whole trace in one block: the recorded peaks are its reservedMax and usedMax.
    std::optional<OverviewBlock> whole(uint64_t pool) const;
    // The level a query of columns columnNs wide reads: the coarsest whose blocks are on
    // average no wider than a column (0 when even single chunks are wider).
    size_t levelFor(uint64_t pool, double columnNs) const;
    // The column of [t0, t1) cut into `columns` equal columns that holds t (t0 <= t < t1).
    static size_t columnOf(int64_t t, int64_t t0, int64_t t1, size_t columns);

    // Per column of [t0, t1) cut into `columns`: the least and greatest reserved and used bytes
    // of the blocks at levelFor(pool, column width) whose time range meets the column, and,
    // with inForce, also the value in force at the column's start (the last value of the last
    // block ending before it), so that a column between two blocks shows the value the pool
    // held there. A block is a chunk or a run of chunks: the answer is exact at that grain, a
    // little wider than the events inside the column alone. false (out empty) when there is no
    // summary for the pool: the caller falls back to the events.
    bool query(uint64_t pool, int64_t t0, int64_t t1, size_t columns, bool inForce,
               std::vector<OverviewColumn>& out) const;
    // The same at a given level (tests compare each level with the events).
    bool queryLevel(uint64_t pool, size_t level, int64_t t0, int64_t t1, size_t columns,
                    bool inForce, std::vector<OverviewColumn>& out) const;

private:
    struct Level {
        std::vector<OverviewBlock> blocks;
        std::vector<int64_t> prefixMaxT; // max tMax of blocks [0, i]: non-decreasing
        std::vector<int64_t> suffixMinT; // min tMin of blocks [i, end): non-decreasing
        double meanWidthNs = 0;
    };
    bool present_ = false;
    std::map<uint64_t, std::vector<Level>> pools_;
};

} // namespace poolscope::view
