#include "poolscope/TraceWriter.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sqlite3.h>
#include <string>
#include <unistd.h>

#include "poolscope/EventCodec.h"
#include "poolscope/Schema.h"
#include "poolscope/TraceReader.h"

namespace poolscope {

namespace {

// Sample rows per multi-row INSERT: one sqlite3_step per kBatchRows rows amortises the VDBE
// start-up that dominates single-row inserts of narrow integer rows.
constexpr int kBatchRows = 64;
constexpr int kSampleColumns = 7;

std::string multiRowInsert(const char* head, int columns, int rows) {
    std::string one = "(";
    for (int c = 0; c < columns; ++c) one += c ? ",?" : "?";
    one += ")";
    std::string sql = head;
    for (int r = 0; r < rows; ++r) {
        sql += r ? "," : " VALUES ";
        sql += one;
    }
    return sql;
}

inline int64_t s64(uint64_t v) { return static_cast<int64_t>(v); }

// Steps a statement once and resets it; false on error (the caller reports sqlError).
bool stepReset(sqlite3_stmt* st) {
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE;
}

void bindSample(sqlite3_stmt* st, int base, const Event& e) {
    sqlite3_bind_int64(st, base + 1, e.tsNs);
    sqlite3_bind_int64(st, base + 2, s64(e.pool));
    sqlite3_bind_int64(st, base + 3, s64(e.reserved));
    sqlite3_bind_int64(st, base + 4, s64(e.size)); // reserved high
    sqlite3_bind_int64(st, base + 5, s64(e.used));
    sqlite3_bind_int64(st, base + 6, s64(e.aux)); // used high
    sqlite3_bind_int(st, base + 7, 1);            // periodic
}

} // namespace

struct TraceWriter::Statements {
    sqlite3_stmt* chunk = nullptr;
    sqlite3_stmt* count = nullptr;
    sqlite3_stmt* sample = nullptr;
    sqlite3_stmt* sampleBatch = nullptr;
    sqlite3_stmt* process = nullptr;
    sqlite3_stmt* device = nullptr;
    sqlite3_stmt* pool = nullptr;
    sqlite3_stmt* stream = nullptr;
    sqlite3_stmt* thread = nullptr;
    sqlite3_stmt* dropGap = nullptr;
    sqlite3_stmt* poolAttr = nullptr;
    sqlite3_stmt* meta = nullptr;
    sqlite3_stmt* chunkIndex = nullptr;
    sqlite3_stmt* poolSummary = nullptr;
    sqlite3_stmt* chunkHeaders = nullptr;
    sqlite3_stmt* poolBlock = nullptr;
    ~Statements() {
        for (sqlite3_stmt* s : {chunk, count, sample, sampleBatch, process, device, pool, stream,
                                thread, dropGap, poolAttr, meta, chunkIndex, poolSummary, chunkHeaders,
                                poolBlock})
            sqlite3_finalize(s);
    }
};

Error TraceWriter::sqlError(const char* what) const {
    failed_ = true;
    std::string msg = std::string("could not ") + what + " trace '" + path_ + "': ";
    int code = db_ ? sqlite3_errcode(db_) : SQLITE_CANTOPEN;
    int sysErr = db_ ? sqlite3_system_errno(db_) : 0;
    if (code == SQLITE_FULL || sysErr == ENOSPC || sysErr == EDQUOT)
        msg += "the disk is full";
    else if (sysErr == EFBIG)
        msg += "the disk is full (the file size limit was reached)";
    else if (code == SQLITE_IOERR)
        // A short write (the last bytes of a filling disk or a size limit) leaves errno at 0.
        msg += "writing to the disk failed (is the disk full?)";
    else if (code == SQLITE_READONLY || code == SQLITE_CANTOPEN || code == SQLITE_PERM)
        msg += "the location is not writable";
    else
        msg += (db_ ? std::string(sqlite3_errmsg(db_)) : std::string("out of memory"));
    return Error{ErrorCode::WriteFailed, msg};
}

std::string partialPath(const std::string& path) { return path + ".partial"; }

namespace {
// Removes path and the SQLite files that may lie beside it (a stale WAL next to a trace would be
// replayed into whatever is opened under that name next).
Status removeWithJournals(const std::string& path) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        std::string p = path + suffix;
        if (::unlink(p.c_str()) != 0 && errno != ENOENT) {
            return Error{ErrorCode::WriteFailed, "could not replace '" + p +
                                                     "': " + std::strerror(errno)};
        }
    }
    return {};
}
} // namespace

Result<bool> finishPartialTrace(const std::string& path) {
    const std::string partial = partialPath(path);
    if (::access(partial.c_str(), F_OK) != 0) return false;
    sqlite3* db = nullptr;
    bool folded = sqlite3_open_v2(partial.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) ==
                      SQLITE_OK &&
                  sqlite3_exec(db, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr) ==
                      SQLITE_OK;
    const std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    folded = sqlite3_close(db) == SQLITE_OK && folded;
    if (!folded)
        return Error{ErrorCode::WriteFailed,
                     "could not finish the trace '" + partial + "': " + why};
    {
        auto r = TraceReader::open(partial);
        if (!r) return r.error();
    }
    for (const char* suffix : {"-wal", "-shm", "-journal"}) (void)::unlink((path + suffix).c_str());
    if (::rename(partial.c_str(), path.c_str()) != 0)
        return Error{ErrorCode::WriteFailed, "could not move '" + partial + "' to '" + path +
                                                 "': " + std::strerror(errno)};
    return true;
}

Result<std::unique_ptr<TraceWriter>> TraceWriter::create(const std::string& path,
                                                         const WriterOptions& options) {
    std::unique_ptr<TraceWriter> w(new TraceWriter());
    w->finalPath_ = path;
    w->encoder_ = EventEncoder(!options.compressEvents ? kPlainCodecVersion
                               : options.zstdCodec == kZstdCodecVersion ? kZstdCodecVersion
                                                                        : kEventCodecVersion);
    w->path_ = options.replaceAtClose ? partialPath(path) : path;
    // Start from an empty file: a stale WAL beside an old trace would be replayed into ours.
    if (Status s = removeWithJournals(w->path_); !s) return s.error();
    int rc = sqlite3_open_v2(w->path_.c_str(), &w->db_,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    if (rc != SQLITE_OK) return w->sqlError("create");

    // 2 KiB pages: a compressed chunk (~23 KB in codec 6) wastes half a page of overflow on
    // average, 0.31 byte an event with 4 KiB pages against 0.19 here, which takes the generator's
    // 100 M-event trace under 6 bytes an event; reading every chunk's data costs ~60 ms more
    // at that size (docs/PERFORMANCE.md, issue #15).
    std::string pragmas = "PRAGMA page_size=2048; PRAGMA cache_size=-16384;";
    pragmas += options.wal ? "PRAGMA journal_mode=WAL;" : "PRAGMA journal_mode=DELETE;";
    pragmas += options.synchronousOff ? "PRAGMA synchronous=OFF;" : "PRAGMA synchronous=NORMAL;";
    pragmas += "PRAGMA application_id=" + std::to_string(schema::kApplicationId) + ";";
    if (Status s = w->exec(pragmas.c_str()); !s) return s.error();

    std::string create = "BEGIN;";
    create += schema::createSql();
    create += "PRAGMA user_version=" + std::to_string(schema::kVersion) + ";";
    create += "INSERT INTO meta VALUES('writer','poolscope " POOLSCOPE_VERSION "');";
    create += "INSERT INTO meta VALUES('schema_version','" + std::to_string(schema::kVersion) +
              "');";
    create += "INSERT INTO process(pid) VALUES(0);";
    create += "COMMIT;";
    if (Status s = w->exec(create.c_str()); !s) return s.error();

    w->st_ = std::make_unique<Statements>();
    Statements& st = *w->st_;
    const char* sampleHead =
        "INSERT INTO samples(ts_ns,pool,reserved,reserved_high,used,used_high,source)";
    struct Prep {
        sqlite3_stmt** out;
        std::string sql;
    } preps[] = {
        {&st.chunk, "INSERT INTO event_chunks(first_seq,last_seq,t_min,t_max,count,kinds,codec,"
                    "data,prev_last_seq,crc) VALUES(?,?,?,?,?,?,?,?,?,?)"},
        {&st.count, "INSERT OR REPLACE INTO event_counts(kind,count) VALUES(?,?)"},
        {&st.sample, multiRowInsert(sampleHead, kSampleColumns, 1)},
        {&st.sampleBatch, multiRowInsert(sampleHead, kSampleColumns, kBatchRows)},
        {&st.process, "UPDATE process SET pid=?1,parent_pid=?2,command_line=?3,start_unix_ns=?4,"
                      "start_mono_ns=?5,host=?6,driver_version=?7,runtime_version=?8,"
                      "collector_version=?9"},
        {&st.device, "INSERT OR REPLACE INTO devices(ordinal,name,total_memory,uuid) "
                     "VALUES(?,?,?,?)"},
        {&st.pool, "INSERT OR REPLACE INTO pools(handle,device,kind,handle_types,location_type,"
                   "location_id,max_size,created_ns) VALUES(?,?,?,?,?,?,?,?)"},
        {&st.stream, "INSERT OR REPLACE INTO streams(handle,device,priority,flags,"
                     "priority_known) VALUES(?,?,?,?,?)"},
        {&st.thread, "INSERT OR REPLACE INTO threads(tid,name) VALUES(?,?)"},
        {&st.dropGap, "INSERT INTO drop_gaps(ts_ns,duration_ns,tid,count) VALUES(?,?,?,?)"},
        {&st.poolAttr, "INSERT OR IGNORE INTO pool_initial_attributes(pool,attr,value) VALUES(?,?,?)"},
        {&st.meta, "INSERT OR REPLACE INTO meta(key,value) VALUES(?,?)"},
        {&st.chunkIndex, "INSERT INTO chunk_index(chunk,streams,pools,failed,size_min,size_max,"
                         "crc) VALUES(?,?,?,?,?,?,?)"},
    };
    for (auto& p : preps) {
        if (sqlite3_prepare_v3(w->db_, p.sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, p.out,
                               nullptr) != SQLITE_OK)
            return w->sqlError("prepare statements for");
    }
    w->writeHeaders_ = options.chunkHeaders;
    if (!options.chunkHeaders) {
        if (Status s = w->exec("DROP TABLE chunk_headers"); !s) return s.error();
    } else if (sqlite3_prepare_v3(w->db_,
                                  "INSERT INTO chunk_headers(chunk,prev_last_seq,crc,kind_counts,"
                                  "row_crc,first_seq,last_seq,t_min,t_max,count,kinds,codec,"
                                  "data_bytes) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
                                  -1, SQLITE_PREPARE_PERSISTENT, &st.chunkHeaders,
                                  nullptr) != SQLITE_OK) {
        return w->sqlError("prepare statements for");
    }
    w->writeHeaderCopies_ = options.chunkHeaderCopies;
    w->writeSummaries_ = options.poolSummaries;
    w->writeBlocks_ = options.poolSummaries && options.blockSummaries;
    if (!w->writeBlocks_) {
        if (Status s = w->exec("DROP TABLE pool_block_summary"); !s) return s.error();
    } else if (sqlite3_prepare_v3(w->db_,
                                  "INSERT INTO pool_block_summary(first_chunk,pool,last_chunk,"
                                  "block_rows,t_min,t_max,reserved_min,reserved_max,used_min,"
                                  "used_max,reserved_last,used_last,crc) "
                                  "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
                                  -1, SQLITE_PREPARE_PERSISTENT, &st.poolBlock,
                                  nullptr) != SQLITE_OK) {
        return w->sqlError("prepare statements for");
    }
    const char* summarySql =
        options.poolSummaries
            ? "INSERT INTO pool_chunk_summary(chunk,pool,chunk_rows,t_min,t_max,reserved_min,"
              "reserved_max,used_min,used_max,reserved_last,used_last,crc) "
              "VALUES(?,?,?,?,?,?,?,?,?,?,?,?)"
            : nullptr;
    if (!options.poolSummaries)
        if (Status s = w->exec("DROP TABLE pool_chunk_summary"); !s) return s.error();
    if (summarySql && sqlite3_prepare_v3(w->db_, summarySql, -1, SQLITE_PREPARE_PERSISTENT,
                                         &st.poolSummary, nullptr) != SQLITE_OK)
        return w->sqlError("prepare statements for");
    return w;
}

TraceWriter::~TraceWriter() {
    if (db_) (void)close();
}

Status TraceWriter::exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
        Error e = sqlError("write");
        if (err) sqlite3_free(err);
        return e;
    }
    return {};
}

Status TraceWriter::begin() {
    if (inTransaction_) return {};
    if (Status s = exec("BEGIN"); !s) return s;
    inTransaction_ = true;
    return {};
}

Status TraceWriter::commit() {
    if (Status s = flushChunk(); !s) return s;
    if (!inTransaction_) return {};
    for (int k = 0; k < kEventKindCount; ++k) {
        if (!countsDirty_[k]) continue;
        sqlite3_bind_int(st_->count, 1, k);
        sqlite3_bind_int64(st_->count, 2, static_cast<int64_t>(counts_[k]));
        int rc = sqlite3_step(st_->count);
        sqlite3_reset(st_->count);
        if (rc != SQLITE_DONE) return sqlError("write");
        countsDirty_[k] = false;
    }
    inTransaction_ = false;
    if (Status s = exec("COMMIT"); !s) {
        exec("ROLLBACK");
        return s;
    }
    return {};
}

Status TraceWriter::flushChunk() {
    if (chunk_.count == 0) return {};
    if (Status s = begin(); !s) return s;
    sqlite3_stmt* c = st_->chunk;
    sqlite3_bind_int64(c, 1, s64(chunk_.firstSeq));
    sqlite3_bind_int64(c, 2, s64(chunk_.lastSeq));
    sqlite3_bind_int64(c, 3, chunk_.tMin);
    sqlite3_bind_int64(c, 4, chunk_.tMax);
    sqlite3_bind_int64(c, 5, static_cast<int64_t>(chunk_.count));
    sqlite3_bind_int64(c, 6, s64(chunk_.kinds));
    const int codec = encoder_.version();
    sqlite3_bind_int(c, 7, codec);
    const std::string_view blob = encoder_.finish();
    if (blob.empty()) {
        failed_ = true;
        return Error{ErrorCode::WriteFailed, "could not write trace '" + path_ +
                                                 "': compressing an event chunk failed (out of "
                                                 "memory?)"};
    }
    sqlite3_bind_blob64(c, 8, blob.data(), blob.size(), SQLITE_STATIC);
    schema::ChunkHeader h;
    h.firstSeq = chunk_.firstSeq;
    h.lastSeq = chunk_.lastSeq;
    h.prevLastSeq = prevLastSeq_;
    h.tMin = chunk_.tMin;
    h.tMax = chunk_.tMax;
    h.count = chunk_.count;
    h.kinds = chunk_.kinds;
    h.codec = codec;
    sqlite3_bind_int64(c, 9, s64(prevLastSeq_));
    const uint32_t crc = schema::chunkChecksum(h, blob);
    sqlite3_bind_int64(c, 10, crc);
    int rc = sqlite3_step(c);
    sqlite3_reset(c);
    if (rc != SQLITE_DONE) return sqlError("write");
    if (Status s = writeChunkHeaders(h, crc, blob.size()); !s) return s;
    if (Status s = writeChunkIndex(h, crc); !s) return s;
    if (Status s = writePoolSummaries(crc); !s) return s;
    prevLastSeq_ = chunk_.lastSeq;
    chunk_ = {};
    chunkIndex_ = {};
    encoder_.reset();
    return {};
}

Status TraceWriter::writeChunkHeaders(const schema::ChunkHeader& h, uint32_t chunkCrc,
                                      uint64_t dataBytes) {
    // The chunk's events per kind: what counts_ gained since the chunk before.
    unsigned char counts[2 * 64];
    size_t n = 0;
    bool ok = true;
    for (unsigned k = 0; k < 64; ++k) {
        if (!(h.kinds >> k & 1)) continue;
        const uint64_t c = k < unsigned(kEventKindCount) ? counts_[k] - countsAtChunk_[k] : 0;
        ok &= c >= 1 && c <= schema::kChunkEvents;
        counts[n++] = static_cast<unsigned char>(c);
        counts[n++] = static_cast<unsigned char>(c >> 8);
    }
    std::copy(std::begin(counts_), std::end(counts_), std::begin(countsAtChunk_));
    // Events of a kind this build does not count cannot be described: no row (the reader then
    // reads the chunk's own columns, as for a trace without the table).
    if (!writeHeaders_ || !ok) return {};
    const std::string_view blob(reinterpret_cast<const char*>(counts), n);
    sqlite3_stmt* s = st_->chunkHeaders;
    sqlite3_bind_int64(s, 1, sqlite3_last_insert_rowid(db_));
    sqlite3_bind_int64(s, 2, s64(h.prevLastSeq));
    sqlite3_bind_int64(s, 3, chunkCrc);
    sqlite3_bind_blob(s, 4, blob.data(), int(blob.size()), SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, schema::chunkHeaderRowChecksum(h, chunkCrc, dataBytes, blob));
    // The chunk's other header columns: a scan then reads no page of event_chunks.
    if (writeHeaderCopies_) {
        const int64_t words[] = {s64(h.firstSeq), s64(h.lastSeq), h.tMin, h.tMax, s64(h.count),
                                 s64(h.kinds), h.codec, s64(dataBytes)};
        for (int i = 0; i < 8; ++i) sqlite3_bind_int64(s, 6 + i, words[i]);
    } else {
        for (int i = 0; i < 8; ++i) sqlite3_bind_null(s, 6 + i);
    }
    if (!stepReset(s)) return sqlError("write");
    return {};
}

Status TraceWriter::writeChunkIndex(const schema::ChunkHeader& h, uint32_t chunkCrc) {
    const view::ChunkIndexRow& x = chunkIndex_;
    sqlite3_stmt* s = st_->chunkIndex;
    sqlite3_bind_int64(s, 1, sqlite3_last_insert_rowid(db_));
    sqlite3_bind_int64(s, 2, s64(x.streams));
    sqlite3_bind_int64(s, 3, s64(x.pools));
    sqlite3_bind_int64(s, 4, s64(x.failed));
    sqlite3_bind_int64(s, 5, s64(x.sizeMin));
    sqlite3_bind_int64(s, 6, s64(x.sizeMax));
    sqlite3_bind_int64(s, 7, schema::chunkIndexChecksum(h, chunkCrc, x));
    if (!stepReset(s)) return sqlError("write");
    return {};
}

Status TraceWriter::writePoolSummaries(uint32_t chunkCrc) {
    if (!writeSummaries_) return {};
    const int64_t chunk = sqlite3_last_insert_rowid(db_);
    sqlite3_stmt* st = st_->poolSummary;
    const std::vector<PoolChunkSummary> rows = poolSummaries_.take(chunk, chunk_.tMin, chunk_.tMax);
    for (const PoolChunkSummary& r : rows) {
        const int64_t values[] = {r.chunk, s64(r.pool), s64(r.chunkRows), r.tMin, r.tMax,
                                  s64(r.reservedMin), s64(r.reservedMax), s64(r.usedMin),
                                  s64(r.usedMax), s64(r.reservedLast), s64(r.usedLast),
                                  int64_t{schema::poolSummaryChecksum(r, chunkCrc)}};
        for (int i = 0; i < 12; ++i) sqlite3_bind_int64(st, i + 1, values[i]);
        if (!stepReset(st)) return sqlError("write");
    }
    if (!writeBlocks_) return {};
    blocks_.add(rows, chunk);
    return blocks_.chunks() >= schema::kBlockChunks ? writeBlock() : Status{};
}

Status TraceWriter::writeBlock() {
    sqlite3_stmt* st = st_->poolBlock;
    for (const PoolBlockSummary& r : blocks_.take()) {
        const int64_t values[] = {r.chunk, s64(r.pool), r.lastChunk, s64(r.chunkRows), r.tMin,
                                  r.tMax, s64(r.reservedMin), s64(r.reservedMax),
                                  s64(r.usedMin), s64(r.usedMax), s64(r.reservedLast),
                                  s64(r.usedLast), int64_t{schema::poolBlockChecksum(r)}};
        for (int i = 0; i < 13; ++i) sqlite3_bind_int64(st, i + 1, values[i]);
        if (!stepReset(st)) return sqlError("write");
    }
    return {};
}

Status TraceWriter::append(std::span<const Event> events) {
    if (!db_) return Error{ErrorCode::WriteFailed, "trace '" + path_ + "' is closed"};
    if (Status s = begin(); !s) return s;
    Statements& st = *st_;
    // Samples go to their own table as rows (few: one per pool per sampling period), batched
    // kBatchRows at a time; everything else is buffered into the current event chunk.
    size_t totalSamples = 0;
    for (const Event& e : events) totalSamples += e.kind == EventKind::Sample;
    const size_t batchedSamples = totalSamples - totalSamples % kBatchRows;
    size_t iS = 0;
    for (size_t i = 0; i < events.size();) {
        if (events[i].kind != EventKind::Sample) {
            // A run of non-sample events, up to the end of the open chunk: bookkeeping per
            // event, then encoded straight into the chunk in one call (no copy is kept).
            const size_t room = schema::kChunkEvents - chunk_.count;
            size_t j = i;
            if (chunk_.count == 0) {
                chunk_.firstSeq = events[i].seq;
                chunk_.tMin = chunk_.tMax = events[i].tsNs;
            }
            int64_t tMin = chunk_.tMin, tMax = chunk_.tMax; // locals: counts_ could alias them
            uint64_t kinds = chunk_.kinds;
            view::ChunkIndexRow index = chunkIndex_;
            for (; j < events.size() && j - i < room && events[j].kind != EventKind::Sample; ++j) {
                const Event& e = events[j];
                const auto k = static_cast<unsigned>(e.kind);
                if (k < static_cast<unsigned>(kEventKindCount)) {
                    ++counts_[k];
                    countsDirty_[k] = true;
                }
                tMin = std::min(tMin, e.tsNs);
                tMax = std::max(tMax, e.tsNs);
                kinds |= uint64_t{1} << (k & 63);
                index.add(e);
                if (writeSummaries_) poolSummaries_.add(e);
            }
            chunkIndex_ = index;
            chunk_.tMin = tMin;
            chunk_.tMax = tMax;
            chunk_.kinds = kinds;
            chunk_.lastSeq = events[j - 1].seq;
            chunk_.count += j - i;
            encoder_.append(events.subspan(i, j - i));
            i = j;
            if (chunk_.count >= schema::kChunkEvents) {
                if (Status s = flushChunk(); !s) return s;
            }
            continue;
        }
        const Event& e = events[i++];
        bool ok = true;
        if (iS < batchedSamples) {
            bindSample(st.sampleBatch, static_cast<int>(iS % kBatchRows) * kSampleColumns, e);
            if (iS % kBatchRows == kBatchRows - 1) ok = stepReset(st.sampleBatch);
        } else {
            bindSample(st.sample, 0, e);
            ok = stepReset(st.sample);
        }
        ++iS;
        if (!ok) return sqlError("write");
    }
    eventsWritten_ += events.size() - totalSamples;
    return {};
}

Status TraceWriter::setProcess(const ProcessInfo& p) {
    sqlite3_stmt* s = st_->process;
    sqlite3_bind_int64(s, 1, p.pid);
    sqlite3_bind_int64(s, 2, p.parentPid);
    sqlite3_bind_text(s, 3, p.commandLine.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 4, p.startTimeUnixNs);
    sqlite3_bind_int64(s, 5, p.startTimeMonoNs);
    sqlite3_bind_text(s, 6, p.host.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(s, 7, p.driverVersion);
    sqlite3_bind_int(s, 8, p.runtimeVersion);
    sqlite3_bind_text(s, 9, p.collectorVersion.c_str(), -1, SQLITE_TRANSIENT);
    if (!stepReset(s)) return sqlError("write");
    return {};
}

Status TraceWriter::addDevice(const DeviceInfo& d) {
    sqlite3_stmt* s = st_->device;
    sqlite3_bind_int(s, 1, d.ordinal);
    sqlite3_bind_text(s, 2, d.name.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 3, s64(d.totalMemory));
    sqlite3_bind_text(s, 4, d.uuid.c_str(), -1, SQLITE_TRANSIENT);
    if (!stepReset(s)) return sqlError("write");
    return {};
}

Status TraceWriter::addPool(const PoolInfo& p) {
    sqlite3_stmt* s = st_->pool;
    sqlite3_bind_int64(s, 1, s64(p.handle));
    sqlite3_bind_int(s, 2, p.device);
    sqlite3_bind_int(s, 3, static_cast<int>(p.kind));
    sqlite3_bind_int64(s, 4, p.handleTypes);
    sqlite3_bind_int(s, 5, p.locationType);
    sqlite3_bind_int(s, 6, p.locationId);
    sqlite3_bind_int64(s, 7, s64(p.maxSize));
    sqlite3_bind_int64(s, 8, p.createdTsNs);
    if (!stepReset(s)) return sqlError("write");
    return {};
}

Status TraceWriter::addPoolAttribute(const PoolAttributeValue& a) {
    sqlite3_stmt* s = st_->poolAttr;
    sqlite3_bind_int64(s, 1, s64(a.pool));
    sqlite3_bind_int(s, 2, static_cast<int>(a.attr));
    sqlite3_bind_int64(s, 3, s64(a.value));
    if (!stepReset(s)) return sqlError("write");
    return {};
}

Status TraceWriter::addStream(const StreamInfo& si) {
    sqlite3_stmt* s = st_->stream;
    sqlite3_bind_int64(s, 1, s64(si.handle));
    sqlite3_bind_int(s, 2, si.device);
    sqlite3_bind_int(s, 3, si.priority);
    sqlite3_bind_int64(s, 4, si.flags);
    sqlite3_bind_int(s, 5, si.priorityKnown ? 1 : 0);
    if (!stepReset(s)) return sqlError("write");
    return {};
}

Status TraceWriter::addThread(const ThreadInfo& t) {
    sqlite3_stmt* s = st_->thread;
    sqlite3_bind_int64(s, 1, t.tid);
    sqlite3_bind_text(s, 2, t.name.c_str(), -1, SQLITE_TRANSIENT);
    if (!stepReset(s)) return sqlError("write");
    return {};
}

Status TraceWriter::addDropGap(const DropGap& g) {
    sqlite3_stmt* s = st_->dropGap;
    sqlite3_bind_int64(s, 1, g.tsNs);
    sqlite3_bind_int64(s, 2, g.durationNs);
    sqlite3_bind_int64(s, 3, g.tid);
    sqlite3_bind_int64(s, 4, static_cast<int64_t>(g.count));
    if (!stepReset(s)) return sqlError("write");
    return {};
}

namespace {
class Insert {
public:
    Insert(sqlite3* db, const char* sql) { ok_ = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) == SQLITE_OK; }
    ~Insert() { sqlite3_finalize(st_); }
    Insert(const Insert&) = delete;
    Insert& operator=(const Insert&) = delete;
    bool ok() const { return ok_; }
    Insert& i64(int col, int64_t v) { sqlite3_bind_int64(st_, col, v); return *this; }
    Insert& text(int col, const std::string& v) {
        sqlite3_bind_text(st_, col, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
        return *this;
    }
    bool run() {
        const int rc = sqlite3_step(st_);
        sqlite3_reset(st_);
        return ok_ = ok_ && rc == SQLITE_DONE;
    }

private:
    sqlite3_stmt* st_ = nullptr;
    bool ok_ = false;
};
} // namespace

Status TraceWriter::addStacks(const StackTables& t) {
    if (t.empty()) return {};
    if (Status s = begin(); !s) return s;
    Insert mod(db_, "INSERT OR REPLACE INTO modules(id,path,build_id,load_address,size) "
                    "VALUES(?,?,?,?,?)");
    Insert nat(db_, "INSERT OR REPLACE INTO native_frames(stack,depth,module,pc_offset) "
                    "VALUES(?,?,?,?)");
    Insert py(db_, "INSERT OR REPLACE INTO python_frames(stack,depth,file,function,line) "
                   "VALUES(?,?,?,?,?)");
    Insert nv(db_, "INSERT OR REPLACE INTO nvtx_paths(path,depth,name) VALUES(?,?,?)");
    Insert site(db_, "INSERT OR REPLACE INTO sites(id,native_stack,python_stack,nvtx_path) "
                     "VALUES(?,?,?,?)");
    Insert range(db_, "INSERT OR REPLACE INTO nvtx_ranges(id,tid,name,start_ns,end_ns,depth,"
                      "kind) VALUES(?,?,?,?,?,?,?)");
    Insert sym(db_, "INSERT OR REPLACE INTO symbols(module,pc_offset,function,file,line) "
                    "VALUES(?,?,?,?,?)");
    if (!mod.ok() || !nat.ok() || !py.ok() || !nv.ok() || !site.ok() || !range.ok() || !sym.ok())
        return sqlError("write call sites to");
    bool ok = true;
    for (const ModuleInfo& m : t.modules)
        ok = ok && mod.i64(1, m.id).text(2, m.path).text(3, m.buildId)
                       .i64(4, s64(m.loadAddress)).i64(5, s64(m.size)).run();
    for (const auto& [id, frames] : t.nativeStacks)
        for (size_t d = 0; d < frames.size(); ++d)
            ok = ok && nat.i64(1, id).i64(2, int64_t(d)).i64(3, frames[d].module)
                           .i64(4, s64(frames[d].offset)).run();
    for (const auto& [id, frames] : t.pythonStacks)
        for (size_t d = 0; d < frames.size(); ++d)
            ok = ok && py.i64(1, id).i64(2, int64_t(d)).text(3, frames[d].file)
                          .text(4, frames[d].function).i64(5, frames[d].line).run();
    for (const auto& [id, names] : t.nvtxPaths)
        for (size_t d = 0; d < names.size(); ++d)
            ok = ok && nv.i64(1, id).i64(2, int64_t(d)).text(3, names[d]).run();
    for (const auto& [id, si] : t.sites)
        ok = ok && site.i64(1, id).i64(2, si.nativeStack).i64(3, si.pythonStack)
                        .i64(4, si.nvtxPath).run();
    for (const NvtxRange& r : t.ranges)
        ok = ok && range.i64(1, s64(r.id)).i64(2, r.tid).text(3, r.name).i64(4, r.startNs)
                         .i64(5, r.endNs).i64(6, r.depth).i64(7, int64_t(r.kind)).run();
    for (const auto& [key, sy] : t.symbols)
        ok = ok && sym.i64(1, sy.module).i64(2, s64(sy.offset)).text(3, sy.function)
                       .text(4, sy.file).i64(5, sy.line).run();
    if (!ok) return sqlError("write call sites to");
    return {};
}

Status TraceWriter::setMeta(const std::string& key, const std::string& value) {
    sqlite3_stmt* s = st_->meta;
    sqlite3_bind_text(s, 1, key.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 2, value.c_str(), -1, SQLITE_TRANSIENT);
    if (!stepReset(s)) return sqlError("write");
    return {};
}

Status TraceWriter::close() {
    if (!db_) return {};
    // The last, shorter block: only now is it complete (a block row is never rewritten).
    Status result = flushChunk();
    if (result && writeBlocks_ && blocks_.chunks()) {
        result = begin();
        if (result) result = writeBlock();
    }
    if (result) result = commit();
    st_.reset();
    // A closed trace is one self-contained file: fold the WAL back in.
    if (result) result = exec("PRAGMA journal_mode=DELETE");
    if (sqlite3_close(db_) != SQLITE_OK && result)
        result = Error{ErrorCode::WriteFailed, "could not close trace '" + path_ + "'"};
    db_ = nullptr;
    // Complete: only now may it take the place of what was at the final path. After a failed
    // write it is not complete, whatever close() managed: it stays beside the old file.
    if (result && failed_ && finalPath_ != path_)
        result = Error{ErrorCode::WriteFailed, "the trace is incomplete (a write failed): what "
                                               "was committed is in '" + path_ + "'"};
    if (result && finalPath_ != path_) {
        // The old file's WAL must not outlive it: SQLite would replay it into the new one.
        for (const char* suffix : {"-wal", "-shm", "-journal"})
            (void)::unlink((finalPath_ + suffix).c_str());
        if (::rename(path_.c_str(), finalPath_.c_str()) != 0)
            result = Error{ErrorCode::WriteFailed, "could not move the finished trace '" + path_ +
                                                       "' to '" + finalPath_ +
                                                       "': " + std::strerror(errno)};
    }
    return result;
}

} // namespace poolscope
