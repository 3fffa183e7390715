#include "poolscope/TraceReader.h"

#include "ChunkScan.h"
#include "SqlStmt.h"
#include "TraceRules.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>

#include "poolscope/EventCodec.h"
#include "poolscope/Schema.h"
#include "poolscope/Zstd.h"
#include "poolscope/view/EventFilter.h"

namespace poolscope {

namespace {

using detail::Stmt;
using detail::describeChunk;
using detail::kBadPoolAttributeRow;
using detail::kBadSampleRow;

Event readSample(const Stmt& s) {
    Event e;
    e.kind = EventKind::Sample;
    e.tsNs = s.i64(0);
    e.pool = s.u64(1);
    e.reserved = s.u64(2);
    e.size = s.u64(3);
    e.used = s.u64(4);
    e.aux = s.u64(5);
    e.flags = kHasWatermarks;
    return e;
}

bool hasSqliteMagic(const std::string& path) {
    char head[16] = {};
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    size_t n = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
    return n == sizeof head && std::memcmp(head, "SQLite format 3", 16) == 0;
}

} // namespace

Error TraceReader::sqlError(const char* what) const {
    int code = sqlite3_errcode(db_);
    if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB)
        return {ErrorCode::Corrupt, "'" + path_ + "' is damaged (" + what + " failed: " +
                                        sqlite3_errmsg(db_) + ")"};
    // A column or table of this format that is not there: the file was altered (issue #12).
    const std::string msg = sqlite3_errmsg(db_);
    if (code == SQLITE_ERROR && (msg.starts_with("no such column") ||
                                 msg.starts_with("no such table")))
        return {ErrorCode::Corrupt, "'" + path_ + "' is damaged (" + msg + ")"};
    return {ErrorCode::Io, std::string("could not ") + what + " in '" + path_ +
                               "': " + sqlite3_errmsg(db_)};
}

Result<std::unique_ptr<TraceReader>> TraceReader::open(const std::string& path) {
    struct stat sb;
    if (::stat(path.c_str(), &sb) != 0) {
        if (errno == ENOENT) return Error{ErrorCode::NotFound, "'" + path + "' does not exist"};
        return Error{ErrorCode::NotReadable, "cannot open '" + path + "': " + std::strerror(errno)};
    }
    if (S_ISDIR(sb.st_mode))
        return Error{ErrorCode::NotReadable, "'" + path + "' is a directory, not a trace file"};
    if (::access(path.c_str(), R_OK) != 0)
        return Error{ErrorCode::NotReadable, "cannot read '" + path + "': " + std::strerror(errno)};
    if (sb.st_size == 0)
        return Error{ErrorCode::NotSqlite, "'" + path + "' is empty: not a PoolScope trace"};

    std::unique_ptr<TraceReader> r(new TraceReader());
    r->path_ = path;
    // Read-only, but a trace still being recorded is in WAL mode and needs its -shm: open
    // read-only without immutable so a live trace can be followed.
    if (sqlite3_open_v2(path.c_str(), &r->db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
        return Error{ErrorCode::NotReadable,
                     "cannot open '" + path + "': " + (r->db_ ? sqlite3_errmsg(r->db_) : "")};
    }
    sqlite3_busy_timeout(r->db_, 2000);
    if (Status st = r->checkFormat([&] { return hasSqliteMagic(path); }); !st) return st.error();
    return r;
}

Result<std::unique_ptr<TraceReader>> TraceReader::openImage(std::string_view image,
                                                            const std::string& name) {
    if (image.empty())
        return Error{ErrorCode::NotSqlite, "'" + name + "' is empty: not a PoolScope trace"};
    std::unique_ptr<TraceReader> r(new TraceReader());
    r->path_ = name;
    r->fileBytes_ = image.size();
    r->isImage_ = true;
    if (sqlite3_open_v2(":memory:", &r->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK)
        return Error{ErrorCode::NotReadable, "cannot open '" + name + "': out of memory"};
    // SQLite owns (and frees) the copy; read-only, so nothing in the image is ever changed.
    auto* copy = static_cast<unsigned char*>(sqlite3_malloc64(image.size()));
    if (!copy) return Error{ErrorCode::NotReadable, "cannot open '" + name + "': out of memory"};
    std::memcpy(copy, image.data(), image.size());
    if (sqlite3_deserialize(r->db_, "main", copy, sqlite3_int64(image.size()),
                            sqlite3_int64(image.size()),
                            SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_READONLY) !=
        SQLITE_OK)
        return Error{ErrorCode::NotReadable,
                     "cannot open '" + name + "': " + sqlite3_errmsg(r->db_)};
    const bool magic = image.size() >= 16 && std::memcmp(image.data(), "SQLite format 3", 16) == 0;
    if (Status st = r->checkFormat([&] { return magic; }); !st) return st.error();
    return r;
}

// The checks after the database is open, the same for a file and an image: is it SQLite, a
// PoolScope trace, a version we read, with every table, and its last page readable.
Status TraceReader::checkFormat(const std::function<bool()>& hasMagic) {
    const std::string& path = path_;
    // The header check: anything that is not an SQLite database fails on the first read.
    int appId = 0;
    {
        Stmt s(db_, "PRAGMA application_id");
        int rc = s.ok() ? s.step() : sqlite3_errcode(db_);
        if (rc != SQLITE_ROW) {
            int code = sqlite3_errcode(db_);
            if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) {
                if (hasMagic())
                    return Error{ErrorCode::Corrupt,
                                 "'" + path + "' is damaged or truncated (an SQLite file that "
                                              "cannot be read)"};
                return Error{ErrorCode::NotSqlite,
                             "'" + path + "' is not a PoolScope trace (not an SQLite database)"};
            }
            return sqlError("read the header");
        }
        appId = s.i32(0);
    }
    {
        Stmt s(db_, "PRAGMA user_version");
        if (!s.ok() || s.step() != SQLITE_ROW) return sqlError("read the version");
        schemaVersion_ = s.i32(0);
    }
    if (appId != schema::kApplicationId) {
        return Error{ErrorCode::NotATrace,
                     "'" + path + "' is an SQLite database, but not a PoolScope trace"};
    }
    if (schemaVersion_ > schema::kVersion) {
        return Error{ErrorCode::NewerVersion,
                     "'" + path + "' was written by a newer PoolScope (trace format " +
                         std::to_string(schemaVersion_) + "; this version reads up to " +
                         std::to_string(schema::kVersion) + "). Please update PoolScope."};
    }
    if (schemaVersion_ < 1)
        return Error{ErrorCode::Corrupt, "'" + path + "' has no trace format version: damaged"};

    std::string missing;
    for (const char* table : schema::kRequiredTables) {
        Stmt s(db_, "SELECT 1 FROM sqlite_master WHERE type IN ('table','view') AND name=?");
        if (!s.ok()) {
            int code = sqlite3_errcode(db_);
            if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB)
                return Error{ErrorCode::Corrupt,
                             "'" + path + "' is damaged (truncated or overwritten)"};
            return sqlError("read the table list");
        }
        sqlite3_bind_text(s.get(), 1, table, -1, SQLITE_STATIC);
        int rc = s.step();
        if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB || rc == SQLITE_IOERR)
            return Error{ErrorCode::Corrupt, "'" + path + "' is damaged (truncated or overwritten)"};
        if (rc != SQLITE_ROW) missing += missing.empty() ? table : std::string(", ") + table;
    }
    if (!missing.empty()) {
        return Error{ErrorCode::MissingTables,
                     "'" + path + "' is an incomplete PoolScope trace: missing " + missing};
    }
    // A truncated file can pass the header checks; touching the last page of the events table
    // finds it now rather than halfway through a load.
    {
        Stmt s(db_, "SELECT max(id), count(*) FROM event_chunks");
        int rc = s.ok() ? s.step() : sqlite3_errcode(db_);
        if (rc != SQLITE_ROW)
            return Error{ErrorCode::Corrupt,
                         "'" + path + "' is damaged (truncated or overwritten): " +
                             sqlite3_errmsg(db_)};
    }
    return {};
}

TraceReader::~TraceReader() { sqlite3_close(db_); }

Result<ProcessInfo> TraceReader::process() const {
    Stmt s(db_, "SELECT pid,parent_pid,command_line,start_unix_ns,start_mono_ns,host,"
                "driver_version,runtime_version,collector_version FROM process LIMIT 1");
    if (!s.ok()) return sqlError("read the process");
    ProcessInfo p;
    int rc = s.step();
    if (rc == SQLITE_ROW) {
        p.pid = s.i64(0);
        p.parentPid = s.i64(1);
        p.commandLine = s.text(2);
        p.startTimeUnixNs = s.i64(3);
        p.startTimeMonoNs = s.i64(4);
        p.host = s.text(5);
        p.driverVersion = s.i32(6);
        p.runtimeVersion = s.i32(7);
        p.collectorVersion = s.text(8);
    } else if (rc != SQLITE_DONE) {
        return sqlError("read the process");
    }
    return p;
}

// Runs a SELECT and maps each row; one place for the step loop and its error handling.
template <class T, class F>
static Result<std::vector<T>> selectAll(sqlite3* db, const char* sql, F map,
                                        const std::function<Error(const char*)>& err) {
    Stmt s(db, sql);
    if (!s.ok()) return err(sql);
    std::vector<T> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) out.push_back(map(s));
    if (rc != SQLITE_DONE) return err("read rows");
    return out;
}

Result<std::vector<DeviceInfo>> TraceReader::devices() const {
    return selectAll<DeviceInfo>(
        db_, "SELECT ordinal,name,total_memory,uuid FROM devices ORDER BY ordinal",
        [](const Stmt& s) {
            return DeviceInfo{s.i32(0), s.text(1), s.u64(2), s.text(3)};
        },
        [this](const char* w) { return sqlError(w); });
}

Result<std::vector<PoolInfo>> TraceReader::pools() const {
    return selectAll<PoolInfo>(
        db_,
        "SELECT handle,device,kind,handle_types,location_type,location_id,max_size,created_ns "
        "FROM pools ORDER BY device, handle",
        [](const Stmt& s) {
            PoolInfo p;
            p.handle = s.u64(0);
            p.device = s.i32(1);
            p.kind = static_cast<PoolKind>(s.i32(2));
            p.handleTypes = static_cast<uint32_t>(s.i64(3));
            p.locationType = s.i32(4);
            p.locationId = s.i32(5);
            p.maxSize = s.u64(6);
            p.createdTsNs = s.i64(7);
            return p;
        },
        [this](const char* w) { return sqlError(w); });
}

Result<std::vector<StreamInfo>> TraceReader::streams() const {
    return selectAll<StreamInfo>(
        db_,
        "SELECT handle,device,priority,flags,priority_known FROM streams ORDER BY device, handle",
        [](const Stmt& s) {
            StreamInfo si;
            si.handle = s.u64(0);
            si.device = s.i32(1);
            si.priority = s.i32(2);
            si.flags = static_cast<uint32_t>(s.i64(3));
            si.priorityKnown = s.i32(4) != 0;
            return si;
        },
        [this](const char* w) { return sqlError(w); });
}

Result<std::vector<ThreadInfo>> TraceReader::threads() const {
    return selectAll<ThreadInfo>(
        db_, "SELECT tid,name FROM threads ORDER BY tid",
        [](const Stmt& s) { return ThreadInfo{static_cast<uint32_t>(s.i64(0)), s.text(1)}; },
        [this](const char* w) { return sqlError(w); });
}

Result<std::vector<DropGap>> TraceReader::dropGaps() const {
    // Traces written before the table existed have none to show.
    {
        Stmt t(db_, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='drop_gaps'");
        if (!t.ok()) return sqlError("look for drop_gaps");
        if (t.step() != SQLITE_ROW) return std::vector<DropGap>{};
    }
    // Bounded: a collector writes at most one row per thread and writer pass, so more rows than
    // this are damage, and what is shown is already more gaps than a person reads.
    return selectAll<DropGap>(
        db_,
        "SELECT ts_ns,max(duration_ns,0),tid,count FROM drop_gaps WHERE count>0 "
        "ORDER BY ts_ns LIMIT 100000",
        [](const Stmt& s) {
            return DropGap{s.i64(0), s.i64(1), static_cast<uint32_t>(s.i64(2)),
                           static_cast<uint64_t>(s.i64(3))};
        },
        [this](const char* w) { return sqlError(w); });
}

Result<std::vector<PoolAttributeValue>> TraceReader::poolAttributes() const {
    {
        Stmt t(db_, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='pool_initial_attributes'");
        if (!t.ok()) return sqlError("look for pool_initial_attributes");
        if (t.step() != SQLITE_ROW) return std::vector<PoolAttributeValue>{};
    }
    // Bounded: four rows per pool at most are meaningful; more is damage.
    const std::string sql = std::string("SELECT pool,attr,value FROM pool_initial_attributes WHERE NOT (") +
                            kBadPoolAttributeRow + ") ORDER BY pool, attr LIMIT 400000";
    return selectAll<PoolAttributeValue>(
        db_, sql.c_str(),
        [](const Stmt& s) {
            return PoolAttributeValue{s.u64(0), static_cast<PoolAttr>(s.i32(1)), s.u64(2)};
        },
        [this](const char* w) { return sqlError(w); });
}

Result<std::map<std::string, std::string>> TraceReader::meta() const {
    auto rows = selectAll<std::pair<std::string, std::string>>(
        db_, "SELECT key,value FROM meta",
        [](const Stmt& s) { return std::make_pair(s.text(0), s.text(1)); },
        [this](const char* w) { return sqlError(w); });
    if (!rows) return rows.error();
    return std::map<std::string, std::string>(rows->begin(), rows->end());
}

Status TraceReader::readChunk(const ChunkRef& c, std::string_view data, std::vector<Event>& out,
                              std::string& damaged, bool decode) const {
    damaged.clear();
    const schema::ChunkHeader& h = c.h;
    // A codec above ours (and in the range a codec can take) is a trace from a newer PoolScope:
    // say so, like a newer schema.
    if (h.codec > kEventCodecVersion)
        return Error{ErrorCode::NewerVersion,
                     "'" + path_ + "' was written by a newer PoolScope (event codec " +
                         std::to_string(h.codec) + "; this version reads up to " +
                         std::to_string(kEventCodecVersion) + "). Please update PoolScope."};
    auto fail = [&](const std::string& why) {
        damaged = describeChunk(c.id, h) + ": " + why;
        addDamage(c.id, {damaged, h.count});
        return Status{};
    };
    const bool checksummed = schemaVersion_ >= schema::kChunkChecksumVersion;
    if (checksummed && schema::chunkChecksum(h, data) != c.crc)
        return fail("checksum mismatch (damaged data or header)");
    if (!decode && checksummed) return {};
    // A compressed chunk without libzstd is not damage: nothing can be decoded, say why.
    if (h.codec >= kZstdCodecVersion && !zstd::available())
        return Error{ErrorCode::NotReadable,
                     "'" + path_ + "' has compressed events, and " + zstd::unavailableReason() +
                         ": install libzstd1 to read them"};
    const size_t before = out.size();
    std::string why;
    if (!decodeEvents(data, h.count, out, static_cast<int>(h.codec), &why)) {
        out.resize(before);
        return fail(why.empty() ? "its data does not decode" : why);
    }
    // Older formats have no checksum: the header must at least agree with what it holds. A
    // checksum only says the row is as written, so the events must also keep the format's rules
    // (what the replay relies on): seqs strictly increasing, kinds a writer produces.
    int64_t tMin = INT64_MAX, tMax = INT64_MIN;
    uint64_t kinds = 0;
    for (size_t i = before; i < out.size(); ++i) {
        const Event& e = out[i];
        if (i > before && e.seq <= out[i - 1].seq) {
            const std::string seqs = std::to_string(out[i - 1].seq) + " then " +
                                     std::to_string(e.seq);
            out.resize(before);
            return fail("its events are out of seq order (seq " + seqs + ")");
        }
        const int kind = static_cast<int>(e.kind);
        // Samples live in their own table, never in chunks; beyond-pool kinds and peer copies only
        // in traces of the format that introduced them.
        if (kind < 1 || kind == static_cast<int>(EventKind::Sample) || kind >= kEventKindCount) {
            out.resize(before);
            return fail("it holds an event of unknown kind " + std::to_string(kind));
        }
        if ((isBeyondPoolKind(e.kind) && schemaVersion_ < schema::kBeyondPoolVersion) ||
            (isPeerCopyKind(e.kind) && schemaVersion_ < schema::kPeerCopyVersion)) {
            out.resize(before);
            return fail("it holds a " + std::string(eventKindName(e.kind)) +
                        " event, which trace format " + std::to_string(schemaVersion_) +
                        " cannot hold");
        }
        tMin = std::min(tMin, e.tsNs);
        tMax = std::max(tMax, e.tsNs);
        kinds |= uint64_t{1} << (static_cast<unsigned>(e.kind) & 63);
    }
    if (out[before].seq != h.firstSeq || out.back().seq != h.lastSeq || tMin != h.tMin ||
        tMax != h.tMax || kinds != h.kinds) {
        out.resize(before);
        return fail("its header does not match its events");
    }
    return {};
}

namespace {
// Visits the data of `list` (chunks of one index): one scan in rowid order when that is seq
// order, else one lookup per chunk. Rows not in the list (damaged headers) are passed over.
// fn gets the chunk's own prev_last_seq and crc (read after its data, nearly free) for a chunk
// whose scan took them from chunk_headers.
template <class F>
Status visitChunkData(sqlite3* db, const std::vector<TraceReader::ChunkRef>& list, bool byRowid,
                      bool v3, F fn, const std::function<Error(const char*)>& err) {
    auto tail = [&](const TraceReader::ChunkRef& c, const Stmt& s, int col) {
        detail::OwnTail t;
        if (!c.fromCopy || !v3) return t;
        t.read = true;
        t.ints = sqlite3_column_type(s.get(), col) == SQLITE_INTEGER &&
                 sqlite3_column_type(s.get(), col + 1) == SQLITE_INTEGER;
        t.prev = s.i64(col);
        t.crc = s.i64(col + 1);
        detail::readOwnHeader(s.get(), col + 2, t);
        t.isBlob = sqlite3_column_type(s.get(), col - 1) == SQLITE_BLOB;
        t.bytes = uint64_t(sqlite3_column_bytes(s.get(), col - 1));
        return t;
    };
    if (byRowid) {
        Stmt s(db, v3 ? "SELECT id,data,prev_last_seq,crc," POOLSCOPE_OWN_HEADER " FROM event_chunks ORDER BY id"
                      : "SELECT id,data FROM event_chunks ORDER BY id");
        if (!s.ok()) return err("read events");
        size_t k = 0;
        while (k < list.size() && s.step() == SQLITE_ROW) {
            if (s.i64(0) != list[k].id) continue;
            auto* d = static_cast<const char*>(sqlite3_column_blob(s.get(), 1));
            const auto n = static_cast<size_t>(sqlite3_column_bytes(s.get(), 1));
            Status st;
            const detail::OwnTail t = tail(list[k], s, 2);
            if (!fn(list[k++], std::string_view(d ? d : "", n), t, st)) return st;
        }
        if (k < list.size()) return err("read events");
        return {};
    }
    Stmt s(db, v3 ? "SELECT data,prev_last_seq,crc," POOLSCOPE_OWN_HEADER " FROM event_chunks WHERE id = ?1"
                  : "SELECT data FROM event_chunks WHERE id = ?1");
    if (!s.ok()) return err("read events");
    for (const auto& c : list) {
        sqlite3_reset(s.get());
        s.bind(1, c.id);
        if (s.step() != SQLITE_ROW) return err("read events");
        auto* d = static_cast<const char*>(sqlite3_column_blob(s.get(), 0));
        const auto n = static_cast<size_t>(sqlite3_column_bytes(s.get(), 0));
        Status st;
        if (!fn(c, std::string_view(d ? d : "", n), tail(c, s, 1), st)) return st;
    }
    return {};
}
} // namespace

Result<TraceSummary> TraceReader::summary() const {
    TraceSummary t;
    t.schemaVersion = schemaVersion_;
    auto idx = scanChunks();
    if (!idx) return idx.error();
    std::set<int64_t> bad;
    {
        std::lock_guard lock(mutex_);
        index_ = *idx;
        for (const auto& [id, d] : chunkDamage_) bad.insert(id);
    }
    bool haveE = false;
    for (const ChunkRef& c : (*idx)->chunks) {
        if (bad.count(c.id)) continue;
        t.eventCount += c.h.count;
        t.firstTsNs = haveE ? std::min(t.firstTsNs, c.h.tMin) : c.h.tMin;
        t.lastTsNs = haveE ? std::max(t.lastTsNs, c.h.tMax) : c.h.tMax;
        haveE = true;
    }
    for (const auto& [kind, n] : (*idx)->counts) {
        const uint64_t clamped = std::min(n, t.eventCount);
        if (clamped) t.countsByKind[kind] = clamped;
    }
    {
        // The rows samples() reads (tableDamage() names the others).
        // One pass over the table (three subqueries read it three times: 0.2 s at 1 G events).
        const std::string sql = std::string("SELECT count(*),min(ts_ns),max(ts_ns) FROM samples "
                                            "WHERE NOT (") + kBadSampleRow + ")";
        Stmt s(db_, sql.c_str());
        if (!s.ok() || s.step() != SQLITE_ROW) return sqlError("read the time range");
        t.sampleCount = s.u64(0);
        if (sqlite3_column_type(s.get(), 1) != SQLITE_NULL) {
            t.firstTsNs = haveE ? std::min(t.firstTsNs, s.i64(1)) : s.i64(1);
            t.lastTsNs = haveE ? std::max(t.lastTsNs, s.i64(2)) : s.i64(2);
        }
    }
    return t;
}

namespace {
// The first damage that loses events, for readers that do not skip damaged chunks.
const TraceDamage* firstLoss(const std::vector<TraceDamage>& damage,
                             const std::vector<bool>& lossless) {
    for (size_t i = 0; i < damage.size(); ++i)
        if (!lossless[i]) return &damage[i];
    return nullptr;
}
} // namespace

// The chunk index for a read of event data, kept as the last scan; in strict mode a chunk that
// lost events fails the read before anything is decoded.
Result<std::shared_ptr<const TraceReader::ChunkIndex>> TraceReader::indexForReading() const {
    auto idx = scanChunks();
    if (!idx) return idx.error();
    {
        std::lock_guard lock(mutex_);
        index_ = *idx;
    }
    if (!skipDamaged_)
        if (const TraceDamage* d = firstLoss((*idx)->damage, (*idx)->lossless))
            return firstDamageError(d->what);
    return *idx;
}

Status TraceReader::decodeChunks(const std::vector<ChunkRef>& list, bool byRowid, bool decode,
                                 bool strict,
                                 const std::function<bool(std::vector<Event>&)>& fn) const {
    std::vector<Event> chunk;
    return visitChunkData(
        db_, list, byRowid, schemaVersion_ >= schema::kChunkChecksumVersion,
        [&](const ChunkRef& copied, std::string_view data, const detail::OwnTail& tail,
            Status& result) {
            chunk.clear();
            std::string damaged;
            ChunkRef c = copied;
            if (tail.read) ownTail(copied, tail, c, damaged);
            if (Status r = damaged.empty() ? readChunk(c, data, chunk, damaged, decode) : Status{};
                !r) {
                result = r;
                return false;
            }
            if (!damaged.empty()) {
                if (!strict) return true;
                result = firstDamageError(damaged);
                return false;
            }
            if (!fn(chunk)) {
                result = Error{ErrorCode::Cancelled, "cancelled"};
                return false;
            }
            return true;
        },
        [this](const char* w) { return sqlError(w); });
}

bool TraceReader::markIntact(const ChunkIndex& idx, const std::vector<size_t>& positions,
                             detail::VerifiedChunks& v, const std::atomic<bool>* cancel) const {
    std::vector<ChunkRef> list;
    std::unordered_map<int64_t, size_t> positionOf;
    list.reserve(positions.size());
    for (size_t p : positions) {
        list.push_back(idx.chunks[p]);
        positionOf.emplace(idx.chunks[p].id, p);
    }
    std::vector<Event> none;
    const Status st = visitChunkData(
        db_, list, false, schemaVersion_ >= schema::kChunkChecksumVersion,
        [&](const ChunkRef& copied, std::string_view data, const detail::OwnTail& tail, Status& result) {
            if (cancel && cancel->load(std::memory_order_relaxed)) {
                result = Error{ErrorCode::Cancelled, "cancelled"};
                return false;
            }
            std::string damaged;
            ChunkRef c = copied;
            if (tail.read) ownTail(copied, tail, c, damaged);
            if (damaged.empty())
                if (Status r = readChunk(c, data, none, damaged, false); !r) {
                    result = r;
                    return false;
                }
            // A chunk_headers row its chunk contradicts (distrustCopy_) marks nothing more: the
            // count finds the lie itself.
            if (damaged.empty() && !distrustCopy_.load())
                if (auto it = positionOf.find(copied.id); it != positionOf.end())
                    v.ok[it->second].store(1, std::memory_order_relaxed);
            return true;
        },
        [this](const char* w) { return sqlError(w); });
    return st.ok();
}

Result<std::vector<Event>> TraceReader::events(int64_t t0, int64_t t1) const {
    auto idx = indexForReading();
    if (!idx) return idx.error();
    std::vector<ChunkRef> list;
    for (const ChunkRef& c : (*idx)->chunks)
        if (c.h.tMin < t1 && c.h.tMax >= t0) list.push_back(c);
    std::vector<Event> out;
    Status st = decodeChunks(list, false, true, !skipDamaged_, [&](std::vector<Event>& chunk) {
        for (const Event& e : chunk)
            if (e.tsNs >= t0 && e.tsNs < t1) out.push_back(e);
        return true;
    });
    if (!st) return st.error();
    return out;
}

uint64_t TraceReader::chunkedEventCount() const {
    auto idx = scanChunks();
    if (!idx) return 0;
    uint64_t n = 0;
    for (const ChunkRef& c : (*idx)->chunks) n += c.h.count;
    return n;
}

Status TraceReader::forEachChunk(const std::function<bool(std::vector<Event>&)>& fn) const {
    // "ORDER BY first_seq" on the chunk rows makes SQLite copy every blob into a temporary b-tree
    // before returning the first row (300 MB for 10M events, spilled to temp files: seconds of
    // wall time, most of a load). TraceWriter appends chunks in seq order, so rowid order is
    // seq order: scanChunks checks that on the small columns (the blobs' overflow pages are not
    // read) and the data is read by rowid; otherwise row by row, by id, in seq order.
    auto idx = indexForReading();
    if (!idx) return idx.error();
    return decodeChunks((*idx)->chunks, (*idx)->byRowid, true, !skipDamaged_, fn);
}

Status TraceReader::verifyChunks(unsigned threads, size_t minPerThread, size_t* onThreads) const {
    auto idx = scanChunks();
    if (!idx) return idx.error();
    {
        std::lock_guard lock(mutex_);
        index_ = *idx;
    }
    const ChunkIndex& index = **idx;
    // Below a few hundred chunks a thread (a million events) one thread is already short.
    threads = static_cast<unsigned>(
        std::min<size_t>(threads, index.chunks.size() / std::max<size_t>(minPerThread, 1)));
    if (onThreads) *onThreads = 0;
    bool whole = true;
    std::vector<ChunkRef> rest;
    if (threads >= 2 && schemaVersion_ >= schema::kChunkChecksumVersion && !path_.empty()) {
        // A checksum's answer does not depend on who reads it: the chunks found intact on the
        // threads are read no more, the rest is read here and reported as before.
        detail::VerifiedChunks marks(*idx, index.chunks.size());
        std::vector<size_t> all(index.chunks.size());
        for (size_t p = 0; p < all.size(); ++p) all[p] = p;
        markIntactOnThreads(index, all, threads, marks, nullptr);
        for (size_t p = 0; p < all.size(); ++p)
            if (!marks.ok[p].load(std::memory_order_relaxed)) rest.push_back(index.chunks[p]);
        if (onThreads) *onThreads = all.size() - rest.size();
        whole = false;
    }
    // Damage is only recorded here (damage()), never a failure.
    Status st = decodeChunks(whole ? index.chunks : rest, whole && index.byRowid, false, false,
                             [](std::vector<Event>&) { return true; });
    if (!st) return st;
    // The chunk_index rows too (their damage is lossless: filters decode those chunks).
    std::vector<view::ChunkIndexRow> rows;
    std::vector<char> valid;
    return chunkIndexRows(**idx, rows, valid);
}

Status TraceReader::forEachEvent(const std::function<bool(const Event&)>& fn,
                                 const std::function<void(uint64_t, uint64_t)>& progress) const {
    const uint64_t total = progress ? chunkedEventCount() : 0;
    uint64_t done = 0;
    return forEachChunk([&](std::vector<Event>& chunk) {
        for (const Event& e : chunk)
            if (!fn(e)) return false;
        done += chunk.size();
        if (progress) progress(done, total);
        return true;
    });
}

Result<std::vector<Event>> TraceReader::samples(uint64_t pool, int64_t t0, int64_t t1) const {
    // Rows with impossible values are skipped (tableDamage() names them).
    const std::string sql =
        pool ? std::string("SELECT ts_ns,pool,reserved,reserved_high,used,used_high FROM samples "
                           "WHERE pool=?3 AND ts_ns >= ?1 AND ts_ns < ?2 AND NOT (") +
                   kBadSampleRow + ") ORDER BY ts_ns, id"
             // All pools: in id order (no index gives time order across pools, and SQLite's
             // sort of 100k rows is a good part of opening a big trace), sorted below.
             : std::string("SELECT ts_ns,pool,reserved,reserved_high,used,used_high FROM samples "
                           "WHERE ts_ns >= ?1 AND ts_ns < ?2 AND NOT (") +
                   kBadSampleRow + ") ORDER BY id";
    Stmt s(db_, sql.c_str());
    if (!s.ok()) return sqlError("query samples");
    s.bind(1, t0);
    s.bind(2, t1);
    if (pool) s.bind(3, static_cast<int64_t>(pool));
    std::vector<Event> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) out.push_back(readSample(s));
    if (rc != SQLITE_DONE) return sqlError("query samples");
    // Time order, ties in id order (stable): the same as ORDER BY ts_ns, id. Written traces are
    // nearly always in time order already.
    auto byTime = [](const Event& a, const Event& b) { return a.tsNs < b.tsNs; };
    if (!std::is_sorted(out.begin(), out.end(), byTime))
        std::stable_sort(out.begin(), out.end(), byTime);
    return out;
}

Result<std::map<uint64_t, TraceReader::SampleHighs>> TraceReader::sampleHighs() const {
    const std::string sql =
        std::string("SELECT pool, max(reserved_high), max(used_high) FROM samples WHERE NOT (") +
        kBadSampleRow + ") GROUP BY pool";
    Stmt s(db_, sql.c_str());
    if (!s.ok()) return sqlError("query sample high watermarks");
    std::map<uint64_t, SampleHighs> out;
    int rc;
    // One row per distinct pool value: a hostile table naming millions of pools is cut at
    // kMaxSampleHighPools (peaks of pools past it are then not given, never made up).
    while ((rc = s.step()) == SQLITE_ROW && out.size() < kMaxSampleHighPools)
        out[s.u64(0)] = SampleHighs{s.u64(1), s.u64(2)};
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return sqlError("query sample high watermarks");
    return out;
}

// ---- reads by chunk, for a time range's detail (issue #15, TimelineRange.cpp) -----------------

Result<std::shared_ptr<const TraceReader::ChunkIndex>> TraceReader::lastIndex() const {
    {
        std::lock_guard lock(mutex_);
        if (index_) return index_;
    }
    auto idx = scanChunks();
    if (!idx) return idx.error();
    std::lock_guard lock(mutex_);
    index_ = *idx;
    return *idx;
}

Result<std::vector<ChunkHeaderInfo>> TraceReader::chunkHeaders() const {
    auto idx = lastIndex();
    if (!idx) return idx.error();
    std::vector<ChunkHeaderInfo> out;
    out.reserve((*idx)->chunks.size());
    for (const ChunkRef& c : (*idx)->chunks)
        out.push_back({c.id, c.h.firstSeq, c.h.lastSeq, c.h.tMin, c.h.tMax, c.h.count, c.h.kinds});
    return out;
}

Status TraceReader::forEachChunkById(const std::vector<int64_t>& ids,
                                     const std::function<bool(std::vector<Event>&)>& fn) const {
    auto idx = lastIndex();
    if (!idx) return idx.error();
    if (!skipDamaged_)
        if (const TraceDamage* d = firstLoss((*idx)->damage, (*idx)->lossless))
            return firstDamageError(d->what);
    std::vector<int64_t> wanted = ids;
    std::sort(wanted.begin(), wanted.end());
    std::vector<ChunkRef> list;
    for (const ChunkRef& c : (*idx)->chunks)
        if (std::binary_search(wanted.begin(), wanted.end(), c.id)) list.push_back(c);
    return decodeChunks(list, false, true, !skipDamaged_, fn);
}

} // namespace poolscope
