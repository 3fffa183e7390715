// TraceReader: reads of the events that match a filter, from chunk_index (issue #15).
#include "poolscope/TraceReader.h"

#include "ChunkScan.h"
#include "SqlStmt.h"

#include <algorithm>
#include <thread>
#include <sqlite3.h>

#include "poolscope/EventCodec.h"
#include "poolscope/Schema.h"
#include "poolscope/view/EventFilter.h"

namespace poolscope {

using detail::Stmt;
// ---- filtered reads over chunk_index (issue #15) ------------------------------------------------

namespace {
// What a chunk_index row can be found to be (TraceReader::indexFindings_).
enum IndexFinding { kIndexMissing, kIndexBad, kIndexTwice, kIndexUnreadable, kIndexTooMany };
} // namespace

Status TraceReader::chunkIndexRows(const ChunkIndex& idx, std::vector<view::ChunkIndexRow>& rows,
                                   std::vector<char>& valid) const {
    const size_t n = idx.chunks.size();
    rows.assign(n, {});
    valid.assign(n, 0);
    // Before format 3 no checksum binds a chunk's header to its data, so a row could only vouch
    // for a header nothing checks: such traces (no writer of theirs had the table) decode.
    if (schemaVersion_ < schema::kChunkChecksumVersion) return {};
    {
        Stmt t(db_, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='chunk_index'");
        if (!t.ok()) return sqlError("look for chunk_index");
        if (t.step() != SQLITE_ROW) return {}; // written before the table existed
    }
    std::vector<std::pair<int, int64_t>> findings;
    std::unordered_map<int64_t, size_t> at;
    at.reserve(n);
    for (size_t i = 0; i < n; ++i) at.emplace(idx.chunks[i].id, i);
    // Bounded: a writer writes one row per chunk; rows past twice that are not read.
    const uint64_t limit = 2 * uint64_t(n) + 64;
    const std::string sql =
        "SELECT chunk,streams,pools,failed,size_min,size_max,crc,"
        "typeof(chunk)='integer' AND typeof(streams)='integer' AND typeof(pools)='integer' AND "
        "typeof(failed)='integer' AND typeof(size_min)='integer' AND typeof(size_max)='integer' "
        "AND typeof(crc)='integer' FROM chunk_index LIMIT " + std::to_string(limit);
    Stmt s(db_, sql.c_str());
    std::vector<uint8_t> seen(n, 0);
    uint64_t read = 0;
    int rc = SQLITE_DONE;
    if (s.ok()) {
        while ((rc = s.step()) == SQLITE_ROW) {
            ++read;
            const auto it = at.find(s.i64(0));
            if (it == at.end()) continue; // a chunk refused, or not in this snapshot
            const size_t p = it->second;
            if (seen[p]) {
                if (seen[p] == 1) findings.emplace_back(kIndexTwice, idx.chunks[p].id);
                seen[p] = 2;
                valid[p] = 0;
                continue;
            }
            seen[p] = 1;
            view::ChunkIndexRow r;
            r.streams = s.u64(1);
            r.pools = s.u64(2);
            r.failed = s.u64(3);
            r.sizeMin = s.u64(4);
            r.sizeMax = s.u64(5);
            const int64_t crc = s.i64(6);
            const ChunkRef& c = idx.chunks[p];
            if (s.i32(7) && crc >= 0 && crc <= int64_t{0xFFFFFFFF} &&
                schema::chunkIndexChecksum(c.h, c.crc, r) == uint32_t(crc)) {
                rows[p] = r;
                valid[p] = 1;
            } else {
                findings.emplace_back(kIndexBad, c.id);
            }
        }
    }
    if (!s.ok() || rc != SQLITE_DONE) {
        // An altered table (a column dropped) or an unreadable page: no row is used.
        valid.assign(n, 0);
        findings.assign(1, {kIndexUnreadable, 0});
    } else {
        if (read >= limit) findings.emplace_back(kIndexTooMany, int64_t(read));
        for (size_t p = 0; p < n; ++p)
            if (!seen[p]) findings.emplace_back(kIndexMissing, idx.chunks[p].id);
    }
    std::lock_guard lock(mutex_);
    indexFindings_ = std::move(findings);
    return {};
}

void TraceReader::appendIndexDamage(std::vector<TraceDamage>& out) const {
    std::lock_guard lock(mutex_);
    // A row of a chunk found damaged is not reported again: the chunk's damage says it.
    struct Tally {
        uint64_t count = 0;
        int64_t first = 0;
    } tally[5], lies;
    for (const auto& [what, id] : indexFindings_) {
        if ((what == kIndexMissing || what == kIndexBad || what == kIndexTwice) &&
            chunkDamage_.count(id))
            continue;
        Tally& t = tally[what];
        if (!t.count++) t.first = id;
    }
    for (int64_t id : indexLies_)
        if (!chunkDamage_.count(id) && !lies.count++) lies.first = id;
    auto some = [](const Tally& t, const char* rows) {
        return std::to_string(t.count) + " " + rows + " (e.g. event chunk " +
               std::to_string(t.first) + ")";
    };
    const std::string decoded = ": filters decode those chunks";
    if (tally[kIndexUnreadable].count)
        out.push_back({"the chunk_index table cannot be read: filters decode every chunk", 0});
    if (tally[kIndexBad].count)
        out.push_back({"chunk_index: " + some(tally[kIndexBad], "row(s)") +
                           " do not match their event chunk (their checksum fails)" + decoded, 0});
    if (tally[kIndexTwice].count)
        out.push_back({"chunk_index lists " + some(tally[kIndexTwice], "event chunk(s)") +
                           " more than once" + decoded, 0});
    if (tally[kIndexMissing].count)
        out.push_back({"chunk_index has no row for " + some(tally[kIndexMissing], "event chunk(s)") +
                           decoded, 0});
    if (tally[kIndexTooMany].count)
        out.push_back({"chunk_index has more rows than the trace has event chunks (" +
                           std::to_string(tally[kIndexTooMany].first) + " read, the rest not)", 0});
    if (lies.count)
        out.push_back({"chunk_index: " + some(lies, "row(s)") + " pass their checksum but do not "
                           "describe their chunk's events (rewritten): a filter may pass over "
                           "events such a row hides", 0});
}

namespace {
// The filter asks only kinds and time: a chunk's matches may come from its kind counts.
bool kindsAndTimeOnly(const view::EventFilter& f) {
    return !f.failedOnly && !f.stream && !f.pool && !f.sizeActive();
}
// Such a filter's chunk whose kind counts are known and that lies wholly inside its range: its
// matches are its counts once its data's checksum holds (forEachMatchingChunk, verifyAhead).
bool countableByKinds(const TraceReader::ChunkRef& c, const view::EventFilter& f) {
    return c.kindCountsAt != UINT32_MAX && c.h.tMin >= f.t0 && c.h.tMax < f.t1;
}
} // namespace

Status TraceReader::forEachMatchingChunk(const view::EventFilter& filter,
                                         const std::function<bool(std::vector<Event>&)>& fn,
                                         FilteredReadStats* stats,
                                         const FilteredReadOptions& options) const {
    auto idx = indexForReading();
    if (!idx) return idx.error();
    const ChunkIndex& index = **idx;
    std::vector<view::ChunkIndexRow> rows;
    std::vector<char> valid;
    if (useChunkIndex_) {
        if (Status st = chunkIndexRows(index, rows, valid); !st) return st;
    } else {
        valid.assign(index.chunks.size(), 0);
    }
    FilteredReadStats local;
    FilteredReadStats& counts = stats ? *stats : local;
    const bool checksummed = schemaVersion_ >= schema::kChunkChecksumVersion;
    const bool strict = !skipDamaged_;
    Stmt s(db_, checksummed ? "SELECT data,prev_last_seq,crc," POOLSCOPE_OWN_HEADER " FROM event_chunks WHERE id = ?1"
                            : "SELECT data FROM event_chunks WHERE id = ?1");
    if (!s.ok()) return sqlError("read events");
    std::vector<Event> chunk, matches;
    uint64_t skip = options.skip;
    const bool kindOnly = kindsAndTimeOnly(filter);
    std::shared_ptr<detail::VerifiedChunks> verified;
    if (reuseScan_ && checksummed && !distrustCopy_.load()) {
        std::lock_guard lock(mutex_);
        if (index_ == *idx) {
            if (!verified_ || verified_->of != index_)
                verified_ = std::make_shared<detail::VerifiedChunks>(index_, index.chunks.size());
            verified = verified_;
        }
    }
    for (size_t p = 0; p < index.chunks.size(); ++p) {
        ChunkRef c = index.chunks[p];
        // The time test as events(t0, t1) makes it.
        if (!(c.h.tMin < filter.t1 && c.h.tMax >= filter.t0)) continue;
        ++counts.chunks;
        view::ChunkFacts facts{c.h.tMin, c.h.tMax, c.h.kinds, valid[p] ? &rows[p] : nullptr};
        const bool may = filter.mayMatch(facts);
        matches.clear();
        // Kinds and time only, the chunk wholly inside the range: its matches are its counts,
        // once its data's checksum holds (read, not decoded: a damaged chunk has no matches in
        // a full decode either).
        uint64_t counted = 0;
        bool byCounts = false;
        if (may && (options.countOnly || skip > 0) && kindOnly && checksummed && countableByKinds(c, filter)) {
            counted =
                detail::countKinds(index.kindCounts, c.kindCountsAt, c.h.kinds, filter.kindMask);
            byCounts = options.countOnly || skip >= counted;
        }
        if (!may && facts.index) {
            ++counts.skippedByIndex;
        } else if (byCounts && verified && verified->ok[p].load(std::memory_order_relaxed)) {
            ++counts.answeredByCounts;
            ++counts.answeredFromVerified;
            counts.matched += counted;
            if (!options.countOnly) skip -= counted;
        } else {
            // No row vouches for the header's kinds: they hold once the checksum over them does.
            const bool decode = !byCounts && (may || !checksummed);
            sqlite3_reset(s.get());
            s.bind(1, c.id);
            if (s.step() != SQLITE_ROW) return sqlError("read events");
            auto* d = static_cast<const char*>(sqlite3_column_blob(s.get(), 0));
            const auto bytes = static_cast<size_t>(sqlite3_column_bytes(s.get(), 0));
            chunk.clear();
            std::string damaged;
            if (c.fromCopy) {
                detail::OwnTail tail{true, sqlite3_column_type(s.get(), 1) == SQLITE_INTEGER &&
                                               sqlite3_column_type(s.get(), 2) == SQLITE_INTEGER,
                                     s.i64(1), s.i64(2)};
                detail::readOwnHeader(s.get(), 3, tail);
                tail.isBlob = sqlite3_column_type(s.get(), 0) == SQLITE_BLOB;
                tail.bytes = bytes;
                const ChunkRef copied = c;
                ownTail(copied, tail, c, damaged);
            }
            if (Status r = damaged.empty() ? readChunk(c, std::string_view(d ? d : "", bytes),
                                                       chunk, damaged, decode)
                                           : Status{};
                !r)
                return r;
            ++(decode ? counts.decoded : byCounts ? counts.answeredByCounts : counts.skippedByKinds);
            if (damaged.empty() && verified) verified->ok[p].store(1, std::memory_order_relaxed);
            if (!damaged.empty()) {
                if (strict) return firstDamageError(damaged);
            } else if (byCounts) {
                counts.matched += counted;
                if (!options.countOnly) skip -= counted;
            } else if (decode) {
                view::ChunkIndexRow seen;
                for (const Event& e : chunk) {
                    if (facts.index) seen.add(e);
                    if (filter.matches(e)) matches.push_back(e);
                }
                checkKindCounts(index, c, chunk);
                // A row that passed its checksum yet disagrees with the events was rewritten
                // (a checksum finds damage, not a forger): say so.
                if (facts.index && !(seen == *facts.index)) {
                    std::lock_guard lock(mutex_);
                    if (std::find(indexLies_.begin(), indexLies_.end(), c.id) == indexLies_.end())
                        indexLies_.push_back(c.id);
                }
            }
        }
        counts.matched += matches.size();
        if (options.countOnly) {
            matches.clear();
        } else if (skip) {
            const size_t drop = size_t(std::min<uint64_t>(skip, matches.size()));
            matches.erase(matches.begin(), matches.begin() + long(drop));
            skip -= drop;
        }
        if (!fn(matches)) return Error{ErrorCode::Cancelled, "cancelled"};
    }
    return {};
}

void TraceReader::markIntactOnThreads(const ChunkIndex& index, const std::vector<size_t>& todo,
                                      unsigned threads, detail::VerifiedChunks& verified,
                                      const std::atomic<bool>* cancel) const {
    // Contiguous shares: each reads its chunks' rows in order.
    auto share = [&](unsigned k) {
        const size_t b = todo.size() * k / threads, e = todo.size() * (k + 1) / threads;
        return std::vector<size_t>(todo.begin() + std::ptrdiff_t(b), todo.begin() + std::ptrdiff_t(e));
    };
    auto run = [&](unsigned k) {
        try {
            // A connection of its own (a reader's belongs to one thread): its findings are its
            // own and go with it; only the intact chunks' marks stay.
            auto r = TraceReader::open(path_);
            if (r) (*r)->markIntact(index, share(k), verified, cancel);
        } catch (...) { // (memory) those chunks are left for the caller's read
        }
    };
    std::vector<std::thread> pool;
    try {
        for (unsigned k = 1; k < threads; ++k) pool.emplace_back(run, k);
    } catch (...) { // no thread to be had: the caller reads what is left
    }
    run(0);
    for (std::thread& t : pool) t.join();
}

size_t TraceReader::verifyAhead(const view::EventFilter& filter, unsigned threads,
                                const std::atomic<bool>* cancel, size_t minPerThread) const {
    if (threads < 2 || !kindsAndTimeOnly(filter) || !reuseScan_ || schemaVersion_ < schema::kChunkChecksumVersion ||
        distrustCopy_.load() || path_.empty())
        return 0;
    auto idx = indexForReading();
    if (!idx) return 0;
    std::shared_ptr<detail::VerifiedChunks> verified;
    {
        std::lock_guard lock(mutex_);
        if (index_ != *idx) return 0;
        if (!verified_ || verified_->of != index_)
            verified_ = std::make_shared<detail::VerifiedChunks>(index_, (*idx)->chunks.size());
        verified = verified_;
    }
    // The chunks forEachMatchingChunk would count from their kind counts, not yet found intact.
    const ChunkIndex& index = **idx;
    std::vector<size_t> todo;
    for (size_t p = 0; p < index.chunks.size(); ++p) {
        const ChunkRef& c = index.chunks[p];
        if (!countableByKinds(c, filter) || verified->ok[p].load(std::memory_order_relaxed)) continue;
        if (filter.mayMatch(view::ChunkFacts{c.h.tMin, c.h.tMax, c.h.kinds, nullptr})) todo.push_back(p);
    }
    // Below a few hundred chunks (a million events) one thread's count is already short.
    threads = static_cast<unsigned>(std::min<size_t>(threads, todo.size() / std::max<size_t>(minPerThread, 1)));
    if (threads < 2) return 0;
    markIntactOnThreads(index, todo, threads, *verified, cancel);
    size_t intact = 0;
    for (size_t p : todo) intact += verified->ok[p].load(std::memory_order_relaxed);
    return intact;
}

Result<std::vector<Event>> TraceReader::events(const view::EventFilter& filter, size_t cap,
                                               bool* truncated, FilteredReadStats* stats,
                                               uint64_t skip) const {
    std::vector<Event> out;
    bool more = false;
    Status st = forEachMatchingChunk(
        filter,
        [&](std::vector<Event>& m) {
            const size_t take = std::min(m.size(), cap - out.size());
            out.insert(out.end(), m.begin(), m.begin() + long(take));
            if (take < m.size()) more = true;
            return !more;
        },
        stats, FilteredReadOptions{skip, false});
    if (truncated) *truncated = more;
    if (!st && !(more && st.error().code == ErrorCode::Cancelled)) return st.error();
    return out;
}

} // namespace poolscope
