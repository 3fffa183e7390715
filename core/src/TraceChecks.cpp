// The reader's checks of what it is handed (issue #12): each chunk row's header against the
// format's rules, the chunk index they leave (overlaps, gaps, event_counts), and the tables
// without a checksum. What fails is damage, reported with the events it costs; TraceReader.cpp
// reads what holds.
#include "poolscope/TraceReader.h"

#include <algorithm>
#include <sqlite3.h>
#include <sys/stat.h>

#include "ChunkScan.h"
#include "SqlStmt.h"
#include "TraceRules.h"

namespace poolscope {

using detail::describeChunk;
using detail::kBadPoolAttributeRow;
using detail::kBadSampleRow;
using detail::minEventBytes;
using detail::Stmt;

// Why a row's header cannot be a chunk's (empty: it holds), with the events it costs.
namespace detail {
std::pair<std::string, uint64_t> headerRefusal(const RawChunkRow& r, int schemaVersion_) {
    const schema::ChunkHeader& h = r.h;
    const int64_t count = r.count;
    const bool countOk = r.ints && count >= 1 && count <= int64_t(schema::kChunkEvents);
    const uint64_t lost = countOk ? h.count : 0;
    if (!r.ints) return {"event chunk " + std::to_string(r.id) + ": a header column is not an integer", lost};
    if (!countOk)
        return {"event chunk " + std::to_string(r.id) + ": its count " + std::to_string(count) +
                    " is outside 1.." + std::to_string(schema::kChunkEvents), 0};
    if (h.codec < 1 || h.codec > 255)
        return {describeChunk(r.id, h) + ": codec value " + std::to_string(h.codec) +
                    " is out of range", lost};
    if (h.codec >= 4 && h.codec <= kEventCodecVersion &&
        schemaVersion_ < schema::kStacksVersion)
        // Codec 4 exists only in format 4 files. It also decodes every codec-3 chunk, so
        // without this rule an older file's chunk relabelled 3 -> 4 would pass unnoticed.
        return {describeChunk(r.id, h) + ": codec " + std::to_string(h.codec) +
                    " cannot occur in a format " + std::to_string(schemaVersion_) + " trace",
                lost};
    if ((h.codec == kZstdCodecVersion && schemaVersion_ < schema::kZstdChunksVersion) ||
        (h.codec == kBlocksCodecVersion && schemaVersion_ < schema::kBlocksChunksVersion))
        return {describeChunk(r.id, h) + ": codec " + std::to_string(h.codec) +
                    " cannot occur in a format " + std::to_string(schemaVersion_) + " trace",
                lost};
    if (!r.isBlob || r.bytes == 0 || r.bytes < h.count * minEventBytes(h.codec))
        return {describeChunk(r.id, h) + ": its data is missing or too short", lost};
    if (h.lastSeq < h.firstSeq || h.lastSeq - h.firstSeq < h.count - 1)
        return {describeChunk(r.id, h) + ": its seq range cannot hold its events", lost};
    if (h.tMin > h.tMax) return {describeChunk(r.id, h) + ": its time range is inverted", lost};
    if (r.crc < 0 || r.crc > int64_t{0xFFFFFFFF})
        return {describeChunk(r.id, h) + ": its checksum value is out of range", lost};
    return {};
}
} // namespace detail

// Reads every chunk row's small columns (SQLite does not read the blobs for these, nor for
// length()) and event_counts, and checks them against the format's rules (schema.sql).
Result<std::shared_ptr<const TraceReader::ChunkIndex>> TraceReader::scanChunks() const {
    if (reuseScan_ && !distrustCopy_.load()) {
        std::lock_guard lock(mutex_);
        if (index_) return index_;
    }
    auto idx = std::make_shared<ChunkIndex>();
    auto damaged = [&](std::string what, uint64_t events, bool lossless = false) {
        idx->damage.push_back({std::move(what), events});
        idx->lossless.push_back(lossless);
    };
    // One snapshot for the chunks and event_counts (a live trace commits both together).
    const bool txn = sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr) == SQLITE_OK;
    struct EndTxn {
        sqlite3* db;
        bool on;
        ~EndTxn() {
            if (on) sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
        }
    } endTxn{db_, txn};

    const bool v3 = schemaVersion_ >= schema::kChunkChecksumVersion;
    // prev_last_seq and crc from chunk_headers where it holds (ChunkScan.h): reading them from
    // event_chunks reads every page of the file.
    detail::ChunkRowSource src(db_, schemaVersion_, useChunkHeaders_ && !distrustCopy_.load());
    if (!src.ok()) return sqlError("read the event chunks");
    idx->copyUnusable = src.copyUnusable();
    uint64_t rowsTotal = 0; // counts of every row whose count is plausible
    // Seq ranges of rows refused for their header: the hole they leave is already reported.
    std::vector<std::pair<uint64_t, uint64_t>> refused;
    // Per kept row: its chunk_headers finding and kind counts (moved along with the rows).
    std::vector<uint8_t> copyState;
    std::vector<std::vector<uint16_t>> kindCounts;
    int rc;
    detail::RawChunkRow row;
    ++scans_;
    uint64_t fromRows = 0;
    auto refusal = [this](const detail::RawChunkRow& r) { return detail::headerRefusal(r, schemaVersion_); };
    while ((rc = src.next(row)) == SQLITE_ROW) {
        auto why = refusal(row);
        if (!why.first.empty() && row.fromCopy && src.wide()) {
            // Every column from the copy: one the chunk cannot have is the copy's lie (row_crc
            // held), and the chunk's own row decides.
            noteCopyLie(row.id);
            if (int orc = src.ownRow(row); orc != SQLITE_ROW) return sqlError("read the event chunks");
            why = refusal(row);
        }
        fromRows += !row.fromCopy || !src.wide();
        ChunkRef c;
        c.id = row.id;
        c.h = row.h;
        const schema::ChunkHeader& h = c.h;
        c.fromCopy = row.fromCopy;
        const bool countOk = row.ints && row.count >= 1 && row.count <= int64_t(schema::kChunkEvents);
        if (countOk) rowsTotal += h.count;
        if (why.first.empty()) {
            c.crc = static_cast<uint32_t>(row.crc);
            c.kindCountsAt = uint32_t(kindCounts.size()); // a position until the rows are sorted
            idx->chunks.push_back(c);
            copyState.push_back(row.copy);
            kindCounts.push_back(std::move(row.kindCounts));
            continue;
        }
        damaged(std::move(why.first), why.second);
        refused.emplace_back(h.firstSeq, h.lastSeq);
    }
    if (rc != SQLITE_DONE) return sqlError("read the event chunks");
    headersFromChunkRows_ = fromRows;

    // Seq order; rows that overlap the one before (a duplicated row) are damage, and in format 3
    // each chunk names the last seq of the one before it, so a deleted row leaves a hole.
    auto bySeq = [](const ChunkRef& a, const ChunkRef& b) {
        return a.h.firstSeq != b.h.firstSeq ? a.h.firstSeq < b.h.firstSeq : a.id < b.id;
    };
    if (!std::is_sorted(idx->chunks.begin(), idx->chunks.end(), bySeq))
        std::sort(idx->chunks.begin(), idx->chunks.end(), bySeq);
    std::vector<ChunkRef> kept;
    kept.reserve(idx->chunks.size());
    for (ChunkRef c : idx->chunks) {
        const ChunkRef* prev = kept.empty() ? nullptr : &kept.back();
        if (prev && c.h.firstSeq <= prev->h.lastSeq) {
            damaged(describeChunk(c.id, c.h) + " overlaps event chunk " + std::to_string(prev->id) +
                        ": a duplicated or damaged row (skipped)", c.h.count);
            continue;
        }
        // The chunk's kind counts, kept with the row (kindCountsAt: its read position).
        const size_t at = c.kindCountsAt;
        c.kindCountsAt = UINT32_MAX;
        if (copyState[at] == detail::RawChunkRow::kMissing ||
            copyState[at] == detail::RawChunkRow::kBad)
            idx->copyFindings.emplace_back(copyState[at], c.id);
        if (!kindCounts[at].empty()) {
            c.kindCountsAt = uint32_t(idx->kindCounts.size());
            idx->kindCounts.insert(idx->kindCounts.end(), kindCounts[at].begin(),
                                   kindCounts[at].end());
        }
        if (v3 && c.fromCopy && c.h.prevLastSeq != (prev ? prev->h.lastSeq : 0)) {
            // A hole or a misfit by the copy: the chunk's own column decides (a copy that
            // differs is a lie, noted, and its chunk is read as a reader without it would).
            detail::OwnTail t;
            if (!detail::readOwnTail(db_, c.id, t)) return sqlError("read the event chunks");
            if (!t.ints || t.crc < 0 || t.crc > int64_t{0xFFFFFFFF}) {
                noteCopyLie(c.id);
                damaged(t.ints ? describeChunk(c.id, c.h) + ": its checksum value is out of range"
                               : "event chunk " + std::to_string(c.id) +
                                     ": a header column is not an integer",
                        c.h.count);
                continue;
            }
            if (t.prev != int64_t(c.h.prevLastSeq) || t.crc != int64_t{c.crc}) {
                noteCopyLie(c.id);
                c.h.prevLastSeq = uint64_t(t.prev);
                c.crc = uint32_t(t.crc);
                c.fromCopy = false;
            }
        }
        if (v3) {
            const uint64_t expected = prev ? prev->h.lastSeq : 0;
            const bool explained = std::any_of(refused.begin(), refused.end(), [&](auto r) {
                auto inside = [&](uint64_t seq) { return seq > expected && seq < c.h.firstSeq; };
                return inside(r.first) || inside(r.second);
            });
            if (c.h.prevLastSeq != expected && !explained) {
                if (c.h.prevLastSeq > expected && c.h.prevLastSeq < c.h.firstSeq)
                    damaged("events with seq " + std::to_string(expected + 1) + ".." +
                                std::to_string(c.h.prevLastSeq) +
                                " are missing (event chunk rows deleted before chunk " +
                                std::to_string(c.id) + "; at most " +
                                std::to_string(c.h.prevLastSeq - expected) + " events)",
                            c.h.prevLastSeq - expected);
                else
                    damaged(describeChunk(c.id, c.h) + " does not follow the chunk before it "
                                "(its prev_last_seq " + std::to_string(c.h.prevLastSeq) +
                                ", expected " + std::to_string(expected) + ")", 0);
            }
        }
        kept.push_back(c);
    }
    idx->chunks = std::move(kept);
    // Rows the writer appended in seq order are in id order too: read them by rowid. Otherwise
    // they were moved (nothing is lost: they are read in seq order, one by one).
    for (size_t i = 1; i < idx->chunks.size() && idx->byRowid; ++i)
        idx->byRowid = idx->chunks[i - 1].id < idx->chunks[i].id;
    if (!idx->byRowid)
        damaged("event chunk rows are out of seq order (moved rows; read in seq order, nothing "
                "lost)", 0, true);

    // event_counts: valid rows, and their sum against the chunk rows'.
    Stmt k(db_, "SELECT kind,count,typeof(kind),typeof(count) FROM event_counts");
    if (!k.ok()) return sqlError("count events");
    uint64_t tableTotal = 0;
    bool saturated = false;
    while ((rc = k.step()) == SQLITE_ROW) {
        const int64_t kind = k.i64(0), count = k.i64(1);
        if (k.text(2) != "integer" || k.text(3) != "integer" || kind < 0 ||
            kind >= kEventKindCount || count < 0) {
            damaged("event_counts has an invalid row (kind " + k.text(0) + ", count " +
                        k.text(1) + ")", 0, true);
            continue;
        }
        if (count == 0) continue;
        idx->counts[static_cast<EventKind>(kind)] = static_cast<uint64_t>(count);
        if (tableTotal + static_cast<uint64_t>(count) < tableTotal) saturated = true;
        tableTotal += static_cast<uint64_t>(count);
    }
    if (rc != SQLITE_DONE) return sqlError("count events");
    // What the trace's bytes are now: an image's size, or the file's and its WAL's (a live
    // trace grows, and its newest commits are in the WAL).
    uint64_t fileBytes = fileBytes_;
    if (!isImage_) {
        struct stat sb;
        fileBytes = ::stat(path_.c_str(), &sb) == 0 ? uint64_t(sb.st_size) : 0;
        if (::stat((path_ + "-wal").c_str(), &sb) == 0) fileBytes += uint64_t(sb.st_size);
    }
    const std::string says = "event_counts says " + std::to_string(tableTotal) +
                             " events, the event chunk rows hold " + std::to_string(rowsTotal);
    if (saturated || tableTotal > fileBytes)
        damaged("event_counts is damaged (its counts are more than the file can hold; the chunk "
                "rows hold " + std::to_string(rowsTotal) + " events)", 0, true);
    else if (tableTotal > rowsTotal)
        damaged(says + ": " + std::to_string(tableTotal - rowsTotal) +
                    " events missing (chunk rows deleted or emptied)", tableTotal - rowsTotal);
    else if (tableTotal < rowsTotal)
        damaged(says + " (event_counts is damaged, or chunk rows were added)", 0, true);
    detail::crossCheckKindCounts(*idx);
    return std::shared_ptr<const ChunkIndex>(std::move(idx));
}

void TraceReader::addDamage(int64_t chunkId, TraceDamage d) const {
    std::lock_guard lock(mutex_);
    chunkDamage_.emplace(chunkId, std::move(d));
}

std::vector<TraceDamage> TraceReader::damage() const {
    std::vector<TraceDamage> tables = tableDamage();
    std::lock_guard lock(mutex_);
    std::vector<TraceDamage> out;
    if (index_) out = index_->damage;
    // A chunk whose own columns were first read with its data (chunk_headers) and refused there
    // is refused by a later scan too, in the same words: once.
    for (const auto& [id, d] : chunkDamage_)
        if (!index_ || std::none_of(index_->damage.begin(), index_->damage.end(),
                                    [&](const TraceDamage& s) { return s.what == d.what; }))
            out.push_back(d);
    out.insert(out.end(), tables.begin(), tables.end());
    return out;
}

namespace {
// True when `sql` (one row of integers) runs; the row's columns go to v.
bool queryInts(sqlite3* db, const char* sql, std::vector<int64_t>& v, std::string& text) {
    Stmt s(db, sql);
    if (!s.ok() || s.step() != SQLITE_ROW) return false;
    const int n = sqlite3_column_count(s.get());
    v.assign(size_t(n), 0);
    for (int i = 0; i < n; ++i) v[size_t(i)] = s.i64(i);
    text = n ? s.text(n - 1) : std::string();
    return true;
}

} // namespace

// The tables without a checksum (issue #12): each lie a reader would pass on as fact (a count of
// rows that must be one, a device a pool names that is not there, a byte count that is negative,
// an id twice) is named here. Read once: these tables are written at the start of a recording
// (process, devices) or as entities appear, and a live trace's later rows are checked by the
// next reader.
std::vector<TraceDamage> TraceReader::tableDamage() const {
    std::call_once(tablesOnce_, [this] {
        std::vector<TraceDamage>& out = tableDamage_;
        std::vector<int64_t> v;
        std::string t;
        auto check = [&](const char* sql, const std::string& table) {
            if (queryInts(db_, sql, v, t)) return true;
            out.push_back({"the " + table + " table cannot be checked (" +
                               std::string(sqlite3_errmsg(db_)) + ")", 0});
            return false;
        };
        auto hex = [](int64_t h) {
            char b[24];
            std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(h));
            return std::string(b);
        };
        // No row, or pid 0, is "unknown" (a writer that was given no process), not a lie.
        if (check("SELECT count(*), coalesce(sum(typeof(pid)<>'integer' OR pid<0),0),"
                  " (SELECT pid FROM process LIMIT 1) FROM process", "process")) {
            if (v[0] > 1)
                out.push_back({"the process table has " + std::to_string(v[0]) +
                                   " rows, one expected (the first is shown)", 0});
            if (v[1] > 0)
                out.push_back({"the process table's pid '" + t + "' is not a process id", 0});
        }
        if (check("SELECT count(*), min(ordinal), coalesce(max(ordinal),0) FROM devices WHERE"
                  " typeof(ordinal)<>'integer' OR ordinal<0 OR ordinal>1023", "devices") && v[0])
            out.push_back({"the devices table has " + std::to_string(v[0]) +
                               " row(s) with an impossible ordinal (e.g. " + std::to_string(v[2]) +
                               "; CUDA numbers devices 0, 1, ...)", 0});
        if (check("SELECT count(*), coalesce(min(ordinal),0) FROM devices WHERE"
                  " typeof(total_memory)<>'integer' OR total_memory<0", "devices") && v[0])
            out.push_back({"the devices table gives " + std::to_string(v[0]) +
                               " device(s) a negative or non-numeric memory size (device " +
                               std::to_string(v[1]) + ")", 0});
        // Pools and streams may name device -1 (unknown); any other must be a device row.
        for (const char* table : {"pools", "streams"}) {
            const std::string tb = table;
            const std::string sql =
                "SELECT count(*), coalesce(min(handle),0), coalesce(min(device),0) FROM " + tb +
                " WHERE device<>-1 AND device NOT IN (SELECT ordinal FROM devices)";
            if (check(sql.c_str(), tb) && v[0])
                out.push_back({"the " + tb + " table has " + std::to_string(v[0]) +
                                   " row(s) naming a device that is not in the devices table (" +
                                   hex(v[1]) + " names device " + std::to_string(v[2]) + ")", 0});
        }
        if (check("SELECT count(*), coalesce(min(handle),0), coalesce(min(kind),0) FROM pools"
                  " WHERE typeof(kind)<>'integer' OR kind<0 OR kind>3 OR max_size<0",
                  "pools") && v[0])
            out.push_back({"the pools table has " + std::to_string(v[0]) +
                               " row(s) with an unknown kind or a negative size limit (pool " +
                               hex(v[1]) + ")", 0});
        // Ids twice: their columns are primary keys, so only a table rebuilt without its key
        // (an altered file) holds them; each reader keeps one of the rows.
        for (const auto& [table, key] : {std::pair{"pools", "handle"}, {"streams", "handle"},
                                         {"devices", "ordinal"}, {"threads", "tid"}}) {
            const std::string sql = std::string("SELECT count(*), coalesce(min(k),0) FROM (SELECT ") +
                                    key + " AS k FROM " + table + " GROUP BY " + key +
                                    " HAVING count(*)>1)";
            if (check(sql.c_str(), table) && v[0])
                out.push_back({std::string("the ") + table + " table lists " +
                                   std::to_string(v[0]) + " " + key + "(s) more than once (" +
                                   (std::string(key) == "handle" ? hex(v[1])
                                                                 : std::to_string(v[1])) +
                                   "; one row of each is used)", 0});
        }
        if (check("SELECT count(*), coalesce(min(tid),0) FROM threads WHERE"
                  " typeof(tid)<>'integer' OR tid<0 OR tid>4294967295", "threads") && v[0])
            out.push_back({"the threads table has " + std::to_string(v[0]) +
                               " thread id(s) outside 0..2^32-1 (e.g. " + std::to_string(v[1]) +
                               ")", 0});
        const std::string badSamples =
            std::string("SELECT count(*), coalesce(min(id),0) FROM samples WHERE ") + kBadSampleRow;
        if (check(badSamples.c_str(), "samples") && v[0])
            out.push_back({std::to_string(v[0]) + " watermark sample(s) hold negative, "
                               "impossible (over 1 PiB) or non-numeric values (from sample row " +
                               std::to_string(v[1]) + "; skipped)", 0});
        // The collector starts before its sampler: a sample dated earlier is not from this
        // recording (process.start_mono_ns 0 is unknown, and checks nothing).
        if (check("SELECT count(*), coalesce(min(ts_ns),0) FROM samples WHERE ts_ns <"
                  " (SELECT start_mono_ns FROM process WHERE start_mono_ns > 0 LIMIT 1)",
                  "samples") && v[0])
            out.push_back({std::to_string(v[0]) + " watermark sample(s) are dated before the "
                               "recording started (e.g. at " + std::to_string(v[1]) + " ns)", 0});
        if (check("SELECT count(*), coalesce(min(pool),0) FROM samples WHERE pool NOT IN"
                  " (SELECT handle FROM pools)", "samples") && v[0])
            out.push_back({std::to_string(v[0]) + " watermark sample(s) name a pool that is not "
                               "in the pools table (" + hex(v[1]) + ")", 0});
        bool hasAttributes = false;
        {
            Stmt a(db_, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='pool_initial_attributes'");
            hasAttributes = a.ok() && a.step() == SQLITE_ROW;
        }
        const std::string badAttributes =
            std::string("SELECT count(*), coalesce(min(pool),0) FROM pool_initial_attributes WHERE ") +
            kBadPoolAttributeRow;
        if (hasAttributes && check(badAttributes.c_str(), "pool_initial_attributes") && v[0])
            out.push_back({"the pool_initial_attributes table has " + std::to_string(v[0]) +
                               " row(s) that are no pool's attribute value (an unknown "
                               "attribute, or a reuse policy other than on/off; pool " +
                               hex(v[1]) + "; skipped)", 0});
        {
            Stmt m(db_, "SELECT value FROM meta WHERE key='dropped_events'");
            if (m.ok() && m.step() == SQLITE_ROW) {
                const std::string d = m.text(0);
                const bool count = !d.empty() && d.size() <= 19 &&
                                   d.find_first_not_of("0123456789") == std::string::npos;
                if (!count)
                    out.push_back({"meta dropped_events is '" + d +
                                       "', not a count: events may have been dropped", 0});
            }
        }
        if (auto summaries = scanPoolSummaries(&out); !summaries)
            out.push_back({"the pool_chunk_summary table cannot be checked (" +
                               summaries.error().message + ")", 0});
    });
    std::vector<TraceDamage> out = tableDamage_;
    appendIndexDamage(out);
    appendCopyDamage(out);
    appendBlockDamage(out);
    return out;
}

Error TraceReader::firstDamageError(const std::string& what) const {
    return Error{ErrorCode::Corrupt, "'" + path_ + "' is damaged: " + what};
}

} // namespace poolscope
