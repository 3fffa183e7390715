// TraceReader: the pools' per-chunk summaries (pool_chunk_summary), checked row by row.
#include "poolscope/TraceReader.h"

#include "ChunkScan.h"
#include "SqlStmt.h"

#include <algorithm>
#include <set>
#include <sqlite3.h>

#include "poolscope/EventCodec.h"
#include "poolscope/Schema.h"
#include "poolscope/view/EventFilter.h"

namespace poolscope {

using detail::Stmt;

Result<PoolSummaries> TraceReader::poolSummaries() const {
    auto shared = poolSummariesShared();
    if (!shared) return shared.error();
    return **shared;
}

Result<std::shared_ptr<const PoolSummaries>> TraceReader::poolSummariesShared() const {
    if (reuseScan_ && !distrustCopy_.load()) {
        std::lock_guard lock(mutex_);
        if (summaries_) return summaries_;
    }
    auto out = scanPoolSummaries(nullptr);
    if (!out) return out.error();
    auto shared = std::make_shared<const PoolSummaries>(std::move(*out));
    if (reuseScan_) {
        std::lock_guard lock(mutex_);
        summaries_ = shared;
    }
    return shared;
}

// Rows come in (chunk, pool) order, the table's key: one chunk's rows are read as a group and
// kept only when every one of them holds up. Kept rows are unique (chunk, pool) pairs of intact
// chunks and bounded pools, so no value in the table can make this allocate more.
Result<PoolSummaries> TraceReader::scanPoolSummaries(std::vector<TraceDamage>* damage) const {
    PoolSummaries out;
    {
        Stmt t(db_, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='pool_chunk_summary'");
        if (!t.ok()) return sqlError("look for pool_chunk_summary");
        if (t.step() != SQLITE_ROW) return out;
    }
    out.present = true;
    // The last header scan when there is one (info, the window: every read scans first): a
    // scan reads a page per chunk row, the largest part of this on a big trace.
    std::shared_ptr<const ChunkIndex> index;
    {
        std::lock_guard lock(mutex_);
        index = index_;
    }
    if (!index) {
        auto idx = scanChunks();
        if (!idx) return idx.error();
        index = *idx;
        std::lock_guard lock(mutex_);
        index_ = index;
    }
    const std::vector<ChunkRef>& chunks = index->chunks;
    std::set<int64_t> dataDamaged;
    {
        std::lock_guard lock(mutex_);
        for (const auto& [id, d] : chunkDamage_) dataDamaged.insert(id);
    }
    std::vector<std::pair<int64_t, size_t>> byId; // chunk id -> position in seq order
    byId.reserve(chunks.size());
    for (size_t i = 0; i < chunks.size(); ++i) byId.emplace_back(chunks[i].id, i);
    std::sort(byId.begin(), byId.end());
    std::vector<uint64_t> listed;
    {
        Stmt p(db_, "SELECT handle FROM pools");
        if (!p.ok()) return sqlError("read the pools of");
        while (p.step() == SQLITE_ROW) listed.push_back(p.u64(0));
        std::sort(listed.begin(), listed.end());
    }
    std::vector<uint64_t> unlisted; // pools the summaries name beyond the pools table, sorted

    std::vector<PoolChunkSummary> rows;                 // kept, in chunk id order
    std::vector<std::pair<size_t, size_t>> groups;      // (seq position, first row in rows)
    std::vector<bool> covered(chunks.size(), false);
    uint64_t badChunks = 0;
    int64_t firstBad = 0;
    std::vector<PoolChunkSummary> group;
    bool groupBad = false;
    int64_t groupChunk = 0;
    auto closeGroup = [&] {
        if (group.empty() && !groupBad) return;
        auto it = std::lower_bound(byId.begin(), byId.end(), std::pair{groupChunk, size_t{0}});
        // Rows of a chunk that is not there, or whose header does not hold up, are passed
        // over: that chunk's damage is named where it is found, and nothing is kept for them.
        if (it != byId.end() && it->first == groupChunk && !dataDamaged.count(groupChunk)) {
            const ChunkRef& c = chunks[it->second];
            const uint64_t n = group.size();
            bool ok = !groupBad && n <= c.h.count;
            for (const PoolChunkSummary& r : group) {
                if (!ok) break;
                ok = r.chunkRows == n && r.tMin <= r.tMax && r.tMin >= c.h.tMin &&
                     r.tMax <= c.h.tMax && r.reservedMin <= r.reservedLast &&
                     r.reservedLast <= r.reservedMax && r.usedMin <= r.usedLast &&
                     r.usedLast <= r.usedMax &&
                     (r.pool != 0 || (n == 1 && r.reservedMax == 0 && r.usedMax == 0));
            }
            // Pools beyond the pools table (the collector lists a pool when it sees it
            // allocate): allowed, up to a bound.
            for (const PoolChunkSummary& r : group) {
                if (!ok || r.pool == 0 || std::binary_search(listed.begin(), listed.end(), r.pool))
                    continue;
                auto u = std::lower_bound(unlisted.begin(), unlisted.end(), r.pool);
                if (u != unlisted.end() && *u == r.pool) continue;
                if (unlisted.size() >= kMaxUnlistedSummaryPools) ok = false;
                else unlisted.insert(u, r.pool);
            }
            if (ok) {
                covered[it->second] = true;
                groups.emplace_back(it->second, rows.size());
                for (const PoolChunkSummary& r : group)
                    if (r.pool != 0) rows.push_back(r);
            } else {
                if (!badChunks) firstBad = groupChunk;
                ++badChunks;
            }
        }
        group.clear();
        groupBad = false;
    };
    Stmt s(db_, "SELECT chunk,pool,chunk_rows,t_min,t_max,reserved_min,reserved_max,used_min,"
                "used_max,reserved_last,used_last,crc FROM pool_chunk_summary ORDER BY chunk, pool");
    if (!s.ok()) return sqlError("read pool_chunk_summary in");
    // Every row is read (time, like any scan of the file), but only rows of intact chunks
    // are kept.
    uint64_t scanned = 0;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
        ++scanned;
        const int64_t chunk = s.i64(0);
        if (chunk != groupChunk || scanned == 1) {
            closeGroup();
            groupChunk = chunk;
        }
        bool ints = true;
        for (int col = 0; col < 12; ++col)
            ints &= sqlite3_column_type(s.get(), col) == SQLITE_INTEGER;
        PoolChunkSummary r;
        r.chunk = chunk;
        r.pool = s.u64(1);
        r.chunkRows = s.u64(2);
        r.tMin = s.i64(3);
        r.tMax = s.i64(4);
        r.reservedMin = s.u64(5);
        r.reservedMax = s.u64(6);
        r.usedMin = s.u64(7);
        r.usedMax = s.u64(8);
        r.reservedLast = s.u64(9);
        r.usedLast = s.u64(10);
        const int64_t crc = s.i64(11);
        const auto it = std::lower_bound(byId.begin(), byId.end(), std::pair{chunk, size_t{0}});
        const uint32_t chunkCrc = it != byId.end() && it->first == chunk ? chunks[it->second].crc : 0;
        if (!ints || crc != int64_t{schema::poolSummaryChecksum(r, chunkCrc)} ||
            group.size() >= schema::kChunkEvents)
            groupBad = true; // the row is not kept: the group cannot be whole
        else
            group.push_back(r);
    }
    if (rc != SQLITE_DONE) return sqlError("read pool_chunk_summary in");
    closeGroup();

    // Seq order (rows of a writer's file are already in it: chunk ids follow seq).
    if (!std::is_sorted(groups.begin(), groups.end())) {
        std::vector<std::pair<size_t, size_t>> sorted = groups;
        std::sort(sorted.begin(), sorted.end());
        std::vector<PoolChunkSummary> inOrder;
        inOrder.reserve(rows.size());
        for (const auto& [pos, first] : sorted)
            for (size_t i = first; i < rows.size() && rows[i].chunk == chunks[pos].id; ++i)
                inOrder.push_back(rows[i]);
        rows.swap(inOrder);
    }
    out.rows = std::move(rows);
    out.chunks = groups.size();
    {
        std::vector<int64_t> coveredIds;
        coveredIds.reserve(groups.size());
        for (const auto& [pos, first] : groups) coveredIds.push_back(chunks[pos].id);
        std::sort(coveredIds.begin(), coveredIds.end());
        checkBlocks(out, coveredIds);
    }
    uint64_t missing = 0;
    int64_t firstMissing = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
        if (covered[i] || dataDamaged.count(chunks[i].id)) continue;
        ++out.chunksWithout;
        out.withoutIds.push_back(chunks[i].id);
        if (!missing++) firstMissing = chunks[i].id;
    }
    if (damage) {
        const std::string leftOut = ": the overview and the recorded peaks leave them out";
        if (badChunks)
            damage->push_back({"the pool_chunk_summary rows of " + std::to_string(badChunks) +
                                   " event chunk(s) do not hold up (checksum, values or their "
                                   "count; e.g. chunk " + std::to_string(firstBad) + ")" + leftOut,
                               0});
        if (missing > badChunks)
            damage->push_back({std::to_string(missing - badChunks) +
                                   " event chunk(s) have no pool_chunk_summary rows (e.g. chunk " +
                                   std::to_string(firstMissing) + ")" + leftOut, 0});
    }
    return out;
}

} // namespace poolscope
