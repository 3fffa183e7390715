#include "poolscope/TraceReader.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "poolscope/EventCodec.h"
#include "poolscope/Schema.h"

namespace poolscope {

namespace {

// RAII for one prepared statement.
class Stmt {
public:
    Stmt(sqlite3* db, const char* sql) { ok_ = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) == SQLITE_OK; }
    ~Stmt() { sqlite3_finalize(st_); }
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;
    bool ok() const { return ok_; }
    sqlite3_stmt* get() const { return st_; }
    int step() { return sqlite3_step(st_); }
    int64_t i64(int c) const { return sqlite3_column_int64(st_, c); }
    uint64_t u64(int c) const { return static_cast<uint64_t>(sqlite3_column_int64(st_, c)); }
    int i32(int c) const { return sqlite3_column_int(st_, c); }
    std::string text(int c) const {
        auto* t = reinterpret_cast<const char*>(sqlite3_column_text(st_, c));
        return t ? std::string(t) : std::string();
    }
    void bind(int i, int64_t v) { sqlite3_bind_int64(st_, i, v); }

private:
    sqlite3_stmt* st_ = nullptr;
    bool ok_ = false;
};

// Decodes the chunk in the current row (first_seq,t_min,t_max,count,codec,data) into out. A
// codec above ours is a trace from a newer PoolScope (say so, like a newer schema); anything
// else that does not decode is damage.
Status decodeChunkRow(const Stmt& s, std::vector<Event>& out, const std::string& path) {
    const int codec = s.i32(4);
    if (codec > kEventCodecVersion)
        return Error{ErrorCode::NewerVersion,
                     "'" + path + "' was written by a newer PoolScope (event codec " +
                         std::to_string(codec) + "; this version reads up to " +
                         std::to_string(kEventCodecVersion) + "). Please update PoolScope."};
    auto* data = static_cast<const char*>(sqlite3_column_blob(s.get(), 5));
    auto bytes = static_cast<size_t>(sqlite3_column_bytes(s.get(), 5));
    if (!decodeEvents(std::string_view(data ? data : "", bytes), s.u64(3), out, codec))
        return Error{ErrorCode::Corrupt, "'" + path + "' is damaged (an event chunk does not decode)"};
    return {};
}

constexpr const char* kChunkColumns = "first_seq,t_min,t_max,count,codec,data";

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

    // The header check: anything that is not an SQLite database fails on the first read.
    int appId = 0;
    {
        Stmt s(r->db_, "PRAGMA application_id");
        int rc = s.ok() ? s.step() : sqlite3_errcode(r->db_);
        if (rc != SQLITE_ROW) {
            int code = sqlite3_errcode(r->db_);
            if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) {
                if (hasSqliteMagic(path))
                    return Error{ErrorCode::Corrupt,
                                 "'" + path + "' is damaged or truncated (an SQLite file that "
                                              "cannot be read)"};
                return Error{ErrorCode::NotSqlite,
                             "'" + path + "' is not a PoolScope trace (not an SQLite database)"};
            }
            return r->sqlError("read the header");
        }
        appId = s.i32(0);
    }
    {
        Stmt s(r->db_, "PRAGMA user_version");
        if (!s.ok() || s.step() != SQLITE_ROW) return r->sqlError("read the version");
        r->schemaVersion_ = s.i32(0);
    }
    if (appId != schema::kApplicationId) {
        return Error{ErrorCode::NotATrace,
                     "'" + path + "' is an SQLite database, but not a PoolScope trace"};
    }
    if (r->schemaVersion_ > schema::kVersion) {
        return Error{ErrorCode::NewerVersion,
                     "'" + path + "' was written by a newer PoolScope (trace format " +
                         std::to_string(r->schemaVersion_) + "; this version reads up to " +
                         std::to_string(schema::kVersion) + "). Please update PoolScope."};
    }
    if (r->schemaVersion_ < 1)
        return Error{ErrorCode::Corrupt, "'" + path + "' has no trace format version: damaged"};

    std::string missing;
    for (const char* table : schema::kRequiredTables) {
        Stmt s(r->db_, "SELECT 1 FROM sqlite_master WHERE type IN ('table','view') AND name=?");
        if (!s.ok()) {
            int code = sqlite3_errcode(r->db_);
            if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB)
                return Error{ErrorCode::Corrupt,
                             "'" + path + "' is damaged (truncated or overwritten)"};
            return r->sqlError("read the table list");
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
        Stmt s(r->db_, "SELECT max(id), count(*) FROM event_chunks");
        int rc = s.ok() ? s.step() : sqlite3_errcode(r->db_);
        if (rc != SQLITE_ROW)
            return Error{ErrorCode::Corrupt,
                         "'" + path + "' is damaged (truncated or overwritten): " +
                             sqlite3_errmsg(r->db_)};
    }
    return r;
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

Result<std::map<std::string, std::string>> TraceReader::meta() const {
    auto rows = selectAll<std::pair<std::string, std::string>>(
        db_, "SELECT key,value FROM meta",
        [](const Stmt& s) { return std::make_pair(s.text(0), s.text(1)); },
        [this](const char* w) { return sqlError(w); });
    if (!rows) return rows.error();
    return std::map<std::string, std::string>(rows->begin(), rows->end());
}

Result<TraceSummary> TraceReader::summary() const {
    TraceSummary t;
    t.schemaVersion = schemaVersion_;
    {
        Stmt s(db_, "SELECT kind, count FROM event_counts WHERE count > 0");
        if (!s.ok()) return sqlError("count events");
        int rc;
        while ((rc = s.step()) == SQLITE_ROW) {
            t.countsByKind[static_cast<EventKind>(s.i32(0))] = s.u64(1);
            t.eventCount += s.u64(1);
        }
        if (rc != SQLITE_DONE) return sqlError("count events");
    }
    {
        Stmt s(db_, "SELECT (SELECT count(*) FROM samples),"
                    " (SELECT min(t_min) FROM event_chunks), (SELECT max(t_max) FROM event_chunks),"
                    " (SELECT min(ts_ns) FROM samples), (SELECT max(ts_ns) FROM samples)");
        if (!s.ok() || s.step() != SQLITE_ROW) return sqlError("read the time range");
        t.sampleCount = s.u64(0);
        bool haveE = sqlite3_column_type(s.get(), 1) != SQLITE_NULL;
        bool haveS = sqlite3_column_type(s.get(), 3) != SQLITE_NULL;
        if (haveE) {
            t.firstTsNs = s.i64(1);
            t.lastTsNs = s.i64(2);
        }
        if (haveS) {
            t.firstTsNs = haveE ? std::min(t.firstTsNs, s.i64(3)) : s.i64(3);
            t.lastTsNs = haveE ? std::max(t.lastTsNs, s.i64(4)) : s.i64(4);
        }
    }
    return t;
}

Result<std::vector<Event>> TraceReader::events(int64_t t0, int64_t t1) const {
    // The matching chunks' ids first, sorted here: ORDER BY first_seq on the rows themselves
    // would have SQLite copy their blobs into a temporary b-tree before the first row.
    std::vector<std::pair<uint64_t, int64_t>> order; // (first_seq, id)
    {
        Stmt s(db_, "SELECT first_seq, id FROM event_chunks WHERE t_min < ?2 AND t_max >= ?1");
        if (!s.ok()) return sqlError("query events");
        s.bind(1, t0);
        s.bind(2, t1);
        int rc;
        while ((rc = s.step()) == SQLITE_ROW) order.emplace_back(s.u64(0), s.i64(1));
        if (rc != SQLITE_DONE) return sqlError("query events");
    }
    std::sort(order.begin(), order.end());
    std::string sql = std::string("SELECT ") + kChunkColumns + " FROM event_chunks WHERE id = ?1";
    Stmt s(db_, sql.c_str());
    if (!s.ok()) return sqlError("query events");
    std::vector<Event> out, chunk;
    for (const auto& [firstSeq, id] : order) {
        sqlite3_reset(s.get());
        s.bind(1, id);
        if (s.step() != SQLITE_ROW) return sqlError("query events");
        chunk.clear();
        if (Status d = decodeChunkRow(s, chunk, path_); !d) return d.error();
        for (const Event& e : chunk)
            if (e.tsNs >= t0 && e.tsNs < t1) out.push_back(e);
    }
    return out;
}

uint64_t TraceReader::chunkedEventCount() const {
    Stmt c(db_, "SELECT coalesce(sum(count),0) FROM event_chunks");
    if (!c.ok() || c.step() != SQLITE_ROW) return 0;
    return c.u64(0);
}

Status TraceReader::forEachChunk(const std::function<bool(std::vector<Event>&)>& fn) const {
    // "ORDER BY first_seq" on the chunk rows makes SQLite copy every blob into a temporary b-tree
    // before returning the first row (300 MB for 10M events, spilled to temp files: seconds of
    // wall time, most of a load). TraceWriter appends chunks in seq order, so rowid order is
    // seq order: check that on the small columns (the blobs' overflow pages are not read) and
    // scan by rowid; otherwise fetch the rows one by one, by id, in seq order.
    std::vector<std::pair<uint64_t, int64_t>> order; // (first_seq, id)
    bool byRowid = true;
    {
        Stmt s(db_, "SELECT first_seq, id FROM event_chunks ORDER BY id");
        if (!s.ok()) return sqlError("read events");
        int rc;
        while ((rc = s.step()) == SQLITE_ROW) {
            order.emplace_back(s.u64(0), s.i64(1));
            if (order.size() > 1 && order[order.size() - 2].first > order.back().first)
                byRowid = false;
        }
        if (rc != SQLITE_DONE) return sqlError("read events");
    }
    const std::string cols = std::string("SELECT ") + kChunkColumns + " FROM event_chunks ";
    Stmt s(db_, (cols + (byRowid ? "ORDER BY id" : "WHERE id = ?1")).c_str());
    if (!s.ok()) return sqlError("read events");
    if (!byRowid) std::stable_sort(order.begin(), order.end());
    std::vector<Event> chunk;
    for (size_t i = 0; byRowid || i < order.size(); ++i) {
        if (!byRowid) {
            sqlite3_reset(s.get());
            s.bind(1, order[i].second);
        }
        const int rc = s.step();
        if (byRowid && rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW) return sqlError("read events");
        chunk.clear();
        if (Status d = decodeChunkRow(s, chunk, path_); !d) return d;
        if (!fn(chunk)) return Error{ErrorCode::Cancelled, "cancelled"};
    }
    return {};
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
    const char* sql =
        pool ? "SELECT ts_ns,pool,reserved,reserved_high,used,used_high FROM samples "
               "WHERE pool=?3 AND ts_ns >= ?1 AND ts_ns < ?2 ORDER BY ts_ns, id"
             // All pools: in id order (no index gives time order across pools, and SQLite's
             // sort of 100k rows is a good part of opening a big trace), sorted below.
             : "SELECT ts_ns,pool,reserved,reserved_high,used,used_high FROM samples "
               "WHERE ts_ns >= ?1 AND ts_ns < ?2 ORDER BY id";
    Stmt s(db_, sql);
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

} // namespace poolscope
