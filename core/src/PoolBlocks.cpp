// pool_block_summary (schema.sql, issue #15): the pools' watermarks over blocks of chunks, read
// before any chunk so that the window's first view of a large trace costs a few thousand rows,
// and checked against the per-chunk rows once those are read.
#include "ChunkScan.h"
#include "SqlStmt.h"

#include <algorithm>
#include <sqlite3.h>
#include <sys/stat.h>

namespace poolscope {

namespace {
using detail::Stmt;

bool sameValues(const PoolChunkSummary& a, const PoolChunkSummary& b) {
    return a.pool == b.pool && a.tMin == b.tMin && a.tMax == b.tMax &&
           a.reservedMin == b.reservedMin && a.reservedMax == b.reservedMax &&
           a.usedMin == b.usedMin && a.usedMax == b.usedMax && a.reservedLast == b.reservedLast &&
           a.usedLast == b.usedLast;
}
} // namespace

Result<PoolSummaries> TraceReader::poolBlockSummaries() const {
    PoolSummaries out;
    {
        // Blocks are merges of the per-chunk rows: without those (a table dropped) there is no
        // overview to replace the draft with, and none is drawn, as before.
        Stmt t(db_, "SELECT count(*) FROM sqlite_master WHERE type='table' AND "
                         "name IN ('pool_block_summary','pool_chunk_summary')");
        if (!t.ok() || sqlite3_step(t.get()) != SQLITE_ROW) return sqlError("look for pool_block_summary");
        if (sqlite3_column_int(t.get(), 0) != 2) return out;
    }
    // Nothing is used unless every row holds: the reason goes to tableDamage().
    auto refuse = [&](const std::string& why) {
        std::lock_guard lock(mutex_);
        blockFinding_ = "pool_block_summary " + why +
                        ": the first view of the overview waits for the per-chunk rows";
        return PoolSummaries{};
    };
    // The ends of the chunk ids (two lookups in the table's b-tree; min and max in one query
    // would scan it).
    int64_t ends[2] = {};
    for (int i = 0; i < 2; ++i) {
        Stmt m(db_, i ? "SELECT id FROM event_chunks ORDER BY id DESC LIMIT 1"
                           : "SELECT id FROM event_chunks ORDER BY id LIMIT 1");
        if (!m.ok()) return sqlError("read the event chunks");
        const int rc = sqlite3_step(m.get());
        if (rc == SQLITE_DONE) return out; // no chunk: nothing to draw either way
        if (rc != SQLITE_ROW) return sqlError("read the event chunks");
        ends[i] = sqlite3_column_int64(m.get(), 0);
    }
    const int64_t minId = ends[0], maxId = ends[1];
    Stmt s(db_, "SELECT first_chunk,pool,last_chunk,block_rows,t_min,t_max,reserved_min,"
                     "reserved_max,used_min,used_max,reserved_last,used_last,crc "
                     "FROM pool_block_summary ORDER BY first_chunk,pool");
    if (!s.ok()) return refuse("cannot be read");
    std::vector<PoolBlockSummary> all; // every row, pool 0 too (checkBlocks needs the ranges)
    std::vector<PoolBlockSummary> group;
    int64_t expected = minId; // the next block's first chunk
    uint64_t blocks = 0;
    std::string bad;
    auto closeGroup = [&]() -> bool {
        if (group.empty()) return true;
        const PoolBlockSummary& g = group.front();
        if (g.chunk != expected) {
            bad = "leaves chunks " + std::to_string(expected) + ".." + std::to_string(g.chunk - 1) +
                  " out";
            return false;
        }
        for (const PoolBlockSummary& r : group)
            if (r.lastChunk != g.lastChunk || r.chunkRows != group.size() ||
                (r.pool == 0 && (group.size() != 1 || r.reservedMax || r.usedMax))) {
                bad = "has a block whose rows do not agree (chunk " + std::to_string(g.chunk) + ")";
                return false;
            }
        ++blocks;
        expected = g.lastChunk + 1;
        all.insert(all.end(), group.begin(), group.end());
        group.clear();
        return true;
    };
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
        bool ints = true;
        for (int col = 0; col < 13; ++col) ints &= sqlite3_column_type(s.get(), col) == SQLITE_INTEGER;
        PoolBlockSummary r;
        r.chunk = sqlite3_column_int64(s.get(), 0);
        r.pool = uint64_t(sqlite3_column_int64(s.get(), 1));
        r.lastChunk = sqlite3_column_int64(s.get(), 2);
        r.chunkRows = uint64_t(sqlite3_column_int64(s.get(), 3));
        r.tMin = sqlite3_column_int64(s.get(), 4);
        r.tMax = sqlite3_column_int64(s.get(), 5);
        r.reservedMin = uint64_t(sqlite3_column_int64(s.get(), 6));
        r.reservedMax = uint64_t(sqlite3_column_int64(s.get(), 7));
        r.usedMin = uint64_t(sqlite3_column_int64(s.get(), 8));
        r.usedMax = uint64_t(sqlite3_column_int64(s.get(), 9));
        r.reservedLast = uint64_t(sqlite3_column_int64(s.get(), 10));
        r.usedLast = uint64_t(sqlite3_column_int64(s.get(), 11));
        const int64_t crc = sqlite3_column_int64(s.get(), 12);
        if (!ints || crc != int64_t{schema::poolBlockChecksum(r)})
            return refuse("has a row that fails its checksum (block at chunk " +
                          std::to_string(r.chunk) + ")");
        if (r.lastChunk < r.chunk || uint64_t(r.lastChunk - r.chunk) >= schema::kBlockChunks ||
            r.lastChunk > maxId || r.tMin > r.tMax || r.reservedMin > r.reservedLast ||
            r.reservedLast > r.reservedMax || r.usedMin > r.usedLast ||
            r.usedLast > r.usedMax || r.chunkRows < 1 || r.chunkRows > schema::kChunkEvents)
            return refuse("has a row with impossible values (block at chunk " +
                          std::to_string(r.chunk) + ")");
        if (!group.empty() && group.front().chunk != r.chunk && !closeGroup())
            return refuse(bad);
        if (group.size() >= schema::kChunkEvents)
            return refuse("has a block with too many rows (chunk " + std::to_string(r.chunk) + ")");
        group.push_back(r);
    }
    if (rc != SQLITE_DONE) return refuse("cannot be read");
    if (!closeGroup()) return refuse(bad);
    if (expected != maxId + 1)
        return refuse(blocks ? "ends before the last chunks (" + std::to_string(expected) + ".." +
                                   std::to_string(maxId) + "; a trace not closed?)"
                             : "is empty");
    out.present = true;
    out.chunks = blocks;
    for (const PoolBlockSummary& r : all)
        if (r.pool != 0) out.rows.push_back(r);
    {
        std::lock_guard lock(mutex_);
        blocks_ = std::make_shared<const std::vector<PoolBlockSummary>>(std::move(all));
    }
    return out;
}

void TraceReader::checkBlocks(const PoolSummaries& full,
                              const std::vector<int64_t>& coveredIds) const {
    std::shared_ptr<const std::vector<PoolBlockSummary>> blocks;
    {
        std::lock_guard lock(mutex_);
        blocks = blocks_;
    }
    if (!blocks) return;
    // The per-chunk rows by chunk id (a writer's rows are in id order already).
    std::vector<std::pair<int64_t, size_t>> byId;
    byId.reserve(full.rows.size());
    for (size_t i = 0; i < full.rows.size(); ++i) byId.emplace_back(full.rows[i].chunk, i);
    if (!std::is_sorted(byId.begin(), byId.end())) std::sort(byId.begin(), byId.end());
    uint64_t differ = 0;
    int64_t firstDiffer = 0;
    const std::vector<PoolBlockSummary>& b = *blocks;
    std::vector<PoolChunkSummary> chunkRows;
    for (size_t i = 0; i < b.size();) {
        const int64_t lo = b[i].chunk, hi = b[i].lastChunk;
        size_t j = i;
        while (j < b.size() && b[j].chunk == lo) ++j;
        const size_t from = i;
        i = j;
        // Only a block whose chunks all have their rows can be compared.
        auto c0 = std::lower_bound(coveredIds.begin(), coveredIds.end(), lo);
        auto c1 = std::upper_bound(coveredIds.begin(), coveredIds.end(), hi);
        if (c1 - c0 != hi - lo + 1) continue;
        PoolBlockAccumulator acc;
        for (auto it = std::lower_bound(byId.begin(), byId.end(), std::pair{lo, size_t{0}});
             it != byId.end() && it->first <= hi;) {
            const int64_t chunk = it->first;
            chunkRows.clear();
            for (; it != byId.end() && it->first == chunk; ++it)
                chunkRows.push_back(full.rows[it->second]);
            acc.add(chunkRows, chunk);
        }
        // Chunks of no pool (their pool-0 rows are not kept): the block then has only pool 0.
        std::vector<PoolBlockSummary> merged = acc.take();
        std::erase_if(merged, [](const PoolBlockSummary& r) { return r.pool == 0; });
        std::vector<const PoolBlockSummary*> listed;
        for (size_t k = from; k < j; ++k)
            if (b[k].pool != 0) listed.push_back(&b[k]);
        bool same = merged.size() == listed.size();
        for (size_t k = 0; same && k < merged.size(); ++k)
            same = sameValues(merged[k], *listed[k]);
        if (!same && !differ++) firstDiffer = lo;
    }
    std::lock_guard lock(mutex_);
    blockDiffer_ = differ;
    blockFirstDiffer_ = firstDiffer;
}

void TraceReader::appendBlockDamage(std::vector<TraceDamage>& out) const {
    std::lock_guard lock(mutex_);
    if (!blockFinding_.empty()) out.push_back({blockFinding_, 0});
    if (blockDiffer_)
        out.push_back({"pool_block_summary: " + std::to_string(blockDiffer_) +
                           " block(s) disagree with the pool_chunk_summary rows of their chunks "
                           "(e.g. the block at chunk " + std::to_string(blockFirstDiffer_) +
                           "): the overview drawn first from them was replaced by the per-chunk "
                           "rows'",
                       0});
}

namespace {
bool fileStamp(const std::string& path, int64_t& size, int64_t& mtimeNs) {
    struct stat sb;
    if (::stat(path.c_str(), &sb) != 0) return false;
    size = int64_t(sb.st_size);
    mtimeNs = int64_t(sb.st_mtim.tv_sec) * 1'000'000'000 + sb.st_mtim.tv_nsec;
    return true;
}
} // namespace

std::shared_ptr<const TraceReader::SharedScan> TraceReader::sharedScan() const {
    if (isImage_ || !reuseScan_ || distrustCopy_.load()) return nullptr;
    auto s = std::make_shared<SharedScan>();
    {
        std::lock_guard lock(mutex_);
        s->index = index_;
        s->summaries = summaries_;
        if (verified_ && verified_->of == index_) s->verified = verified_;
    }
    if (!s->index || !fileStamp(path_, s->size, s->mtimeNs)) return nullptr;
    s->path = path_;
    return s;
}

void TraceReader::adoptScan(std::shared_ptr<const SharedScan> scan) {
    int64_t size = 0, mtime = 0;
    // A WAL beside the file: a live trace, whose rows change (never shared).
    struct stat sb;
    if (!scan || isImage_ || !fileStamp(path_, size, mtime) || size != scan->size ||
        mtime != scan->mtimeNs || ::stat((path_ + "-wal").c_str(), &sb) == 0)
        return;
    reuseScan_ = true;
    std::lock_guard lock(mutex_);
    index_ = scan->index;
    summaries_ = scan->summaries;
    verified_ = scan->verified && scan->verified->of == index_ ? scan->verified : nullptr;
}

} // namespace poolscope
