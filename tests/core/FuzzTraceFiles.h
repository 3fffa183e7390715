#pragma once
// The trace-file fuzz targets' helpers (FuzzTest.cpp, FuzzReadsTest.cpp): damage of a trace as
// SQL, as chunk rows rewritten past their checksums, as structure; the rules oracle; filters.


#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <sqlite3.h>
#include <string>
#include <vector>

#include "FuzzCommon.h"
#include "TestTraces.h"
#include "poolscope/EventCodec.h"
#include "poolscope/EventFields.h"
#include "poolscope/PoolSummary.h"
#include "poolscope/Schema.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/Zstd.h"
#include "poolscope/view/EventFilter.h"

namespace poolscope::fuzz {

// ---- trace files -------------------------------------------------------------------------------

// SQL-level damage of a trace: the columns a reader trusts, set to what an attacker would.
inline std::string sqlMutation(std::mt19937_64& rng) {
    static const char* kExtreme[] = {"0", "-1", "1", "4096", "4097", "9223372036854775807",
                                     "-9223372036854775808", "'x'", "NULL", "X'00'", "1e300"};
    const std::string v = kExtreme[rng() % std::size(kExtreme)];
    // (not SQLite's random(): the run must replay from its seed)
    const std::string rowN = "(SELECT id FROM event_chunks ORDER BY id LIMIT 1 OFFSET " +
                             std::to_string(rng() % 4) + ")";
    static const char* kChunkCols[] = {"first_seq", "last_seq", "t_min", "t_max", "count",
                                       "kinds",     "codec",    "id"};
    switch (rng() % 9) {
    case 0:
        return "UPDATE event_chunks SET " + std::string(kChunkCols[rng() % std::size(kChunkCols)]) +
               " = " + v + " WHERE id = " + rowN;
    case 1:
        return "UPDATE event_chunks SET codec = " + std::to_string(int(rng() % 6) - 1) +
               " WHERE id = " + rowN;
    case 2: // data cut short, or emptied, or replaced with noise of the same length
        return rng() % 2 ? "UPDATE event_chunks SET data = substr(data, 1, " +
                               std::to_string(rng() % 200) + ") WHERE id = " + rowN
                         : "UPDATE event_chunks SET data = zeroblob(length(data)) WHERE id = " + rowN;
    case 3:
        return "UPDATE event_counts SET count = " + v +
               " WHERE kind = (SELECT kind FROM event_counts ORDER BY kind LIMIT 1 OFFSET " +
               std::to_string(rng() % 4) + ")";
    case 4:
        return "INSERT OR REPLACE INTO event_counts(kind, count) VALUES (" +
               std::to_string(int(rng() % 300) - 20) + ", " + v + ")";
    case 5:
        return "UPDATE meta SET value = " + v +
               " WHERE key = (SELECT key FROM meta ORDER BY key LIMIT 1 OFFSET " +
               std::to_string(rng() % 8) + ")";
    case 6:
        return "DELETE FROM event_chunks WHERE id = " + rowN;
    case 7: // a chunk row duplicated (overlapping seqs)
        return "INSERT INTO event_chunks(first_seq, last_seq, t_min, t_max, count, kinds, codec, "
               "data) SELECT first_seq, last_seq, t_min, t_max, count, kinds, codec, data FROM "
               "event_chunks WHERE id = " + rowN;
    default:
        return rng() % 2 ? "UPDATE samples SET ts_ns = " + v + " WHERE id % 7 = 0"
                         : "UPDATE process SET pid = " + v;
    }
}

// A trace image opened in memory (sqlite3_deserialize), writable, so that SQL can damage it
// without a file, a journal or an fsync: the file target's inputs never touch the disk.
class MemDb {
public:
    explicit MemDb(const std::string& image) {
        sqlite3_open_v2(":memory:", &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
        auto* p = static_cast<unsigned char*>(sqlite3_malloc64(image.size() + 1));
        std::memcpy(p, image.data(), image.size());
        ok_ = sqlite3_deserialize(db_, "main", p, sqlite3_int64(image.size()),
                                  sqlite3_int64(image.size() + 1),
                                  SQLITE_DESERIALIZE_FREEONCLOSE |
                                      SQLITE_DESERIALIZE_RESIZEABLE) == SQLITE_OK;
    }
    ~MemDb() { sqlite3_close(db_); }
    MemDb(const MemDb&) = delete;
    MemDb& operator=(const MemDb&) = delete;
    bool ok() const { return ok_; }
    sqlite3* get() const { return db_; }
    bool exec(const std::string& sql) {
        return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
    }
    std::string image() const {
        sqlite3_int64 n = 0;
        unsigned char* p = sqlite3_serialize(db_, "main", &n, SQLITE_SERIALIZE_NOCOPY);
        if (p) return std::string(reinterpret_cast<const char*>(p), size_t(n));
        p = sqlite3_serialize(db_, "main", &n, 0);
        std::string out(p ? reinterpret_cast<const char*>(p) : "", p ? size_t(n) : 0);
        sqlite3_free(p);
        return out;
    }

private:
    sqlite3* db_ = nullptr;
    bool ok_ = false;
};

// The same trace in 1 KiB pages: a bundled sample is 15 or more 8 KiB pages (one a table),
// mostly empty. Smaller images are cheaper per input, and byte damage lands on SQLite's
// structure (page headers, cell pointers, overflow chains) more often.
// (VACUUM does not change an in-memory database's page size: done on a scratch file.)
inline std::string compactImage(const std::string& image, const std::string& scratch) {
    std::ofstream(scratch, std::ios::binary | std::ios::trunc)
        .write(image.data(), static_cast<std::streamsize>(image.size()));
    sqlite3* db = nullptr;
    const bool ok = sqlite3_open(scratch.c_str(), &db) == SQLITE_OK &&
                    sqlite3_exec(db, "PRAGMA journal_mode=DELETE; PRAGMA synchronous=OFF; "
                                 "PRAGMA page_size=1024; VACUUM;",
                                 nullptr, nullptr, nullptr) == SQLITE_OK;
    sqlite3_close(db);
    EXPECT_TRUE(ok) << "compacting a seed";
    return ok ? readFile(scratch) : image;
}

// A format-3 copy of a bundled sample (they are all format 1 or 2), written by the project's own
// TraceWriter: every table and event as read, chunks re-cut and checksummed by the writer.
inline std::string format3Copy(const std::string& samplePath, const std::string& scratch) {
    auto r = TraceReader::open(samplePath);
    if (!r) {
        ADD_FAILURE() << r.error().message;
        return {};
    }
    const TraceReader& in = **r;
    std::remove(scratch.c_str());
    WriterOptions o;
    o.wal = false;
    o.synchronousOff = true; // a scratch copy: no fsync
    auto w = TraceWriter::create(scratch, o);
    if (!w) {
        ADD_FAILURE() << w.error().message;
        return {};
    }
    TraceWriter& out = **w;
    bool ok = true;
    if (auto p = in.process()) ok &= out.setProcess(*p).ok();
    if (auto d = in.devices())
        for (const auto& x : *d) ok &= out.addDevice(x).ok();
    if (auto p = in.pools())
        for (const auto& x : *p) ok &= out.addPool(x).ok();
    if (auto st = in.streams())
        for (const auto& x : *st) ok &= out.addStream(x).ok();
    if (auto t = in.threads())
        for (const auto& x : *t) ok &= out.addThread(x).ok();
    if (auto m = in.meta())
        for (const auto& [k, v] : *m) ok &= out.setMeta(k, v).ok();
    // Events and samples interleaved by time, as the collector writes them.
    auto ev = in.events(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    auto sm = in.samples(0, std::numeric_limits<int64_t>::min(),
                         std::numeric_limits<int64_t>::max());
    if (!ev || !sm) {
        ADD_FAILURE() << samplePath << ": events or samples do not read";
        return {};
    }
    ok &= out.append(*ev).ok();
    ok &= out.append(*sm).ok();
    ok &= out.close().ok();
    EXPECT_TRUE(ok) << samplePath;
    return readFile(scratch);
}

// Damages one chunk's data as bytes, keeping its header (format 1/2: the decoder sees it;
// format 3: the checksum must stop it).
inline void mutateChunkData(MemDb& m, std::mt19937_64& rng, const std::vector<std::string>& others) {
    sqlite3* db = m.get();
    sqlite3_stmt* st = nullptr;
    const std::string sel = "SELECT id, data FROM event_chunks ORDER BY id LIMIT 1 OFFSET " +
                            std::to_string(rng() % 3);
    if (sqlite3_prepare_v2(db, sel.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        const int64_t id = sqlite3_column_int64(st, 0);
        const auto* p = static_cast<const char*>(sqlite3_column_blob(st, 1));
        std::string data(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(st, 1)));
        sqlite3_finalize(st);
        st = nullptr;
        mutateBytes(data, others, rng);
        if (sqlite3_prepare_v2(db, "UPDATE event_chunks SET data = ? WHERE id = ?", -1, &st,
                               nullptr) == SQLITE_OK) {
            sqlite3_bind_blob(st, 1, data.data(), int(data.size()), SQLITE_TRANSIENT);
            sqlite3_bind_int64(st, 2, id);
            sqlite3_step(st);
        }
    }
    sqlite3_finalize(st);
}

// The small bundled samples (the big ones cost most of the time and add no new structure), as
// they are (format 1/2) and as format-3 copies, all compacted.
struct FileSeeds {
    std::vector<std::string> all, v3;
};
inline const FileSeeds& fileSeeds() {
    static const FileSeeds seeds = [] {
        FileSeeds s;
        test::ScratchDir dir;
        for (const char* name : kSamples) {
            if (std::string(name) == "jax" || std::string(name) == "threads") continue;
            const std::string scratch = dir.file(std::string(name) + ".small");
            s.all.push_back(compactImage(readFile(samplePath(name)), scratch));
            std::string v3 = format3Copy(samplePath(name), dir.file(std::string(name) + ".v3"));
            if (v3.empty()) continue;
            v3 = compactImage(v3, scratch);
            s.all.push_back(v3);
            s.v3.push_back(std::move(v3));
        }
        return s;
    }();
    return seeds;
}

// ---- format 3, rewritten past its checksums -----------------------------------------------------

struct ChunkRow {
    int64_t id = 0;
    schema::ChunkHeader h;
    std::string data;
};

inline std::vector<ChunkRow> chunkRows(sqlite3* db) {
    std::vector<ChunkRow> rows;
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db,
                           "SELECT id,first_seq,last_seq,prev_last_seq,t_min,t_max,count,kinds,"
                           "codec,data FROM event_chunks ORDER BY first_seq",
                           -1, &st, nullptr) != SQLITE_OK)
        return rows;
    while (sqlite3_step(st) == SQLITE_ROW) {
        ChunkRow c;
        c.id = sqlite3_column_int64(st, 0);
        c.h.firstSeq = uint64_t(sqlite3_column_int64(st, 1));
        c.h.lastSeq = uint64_t(sqlite3_column_int64(st, 2));
        c.h.prevLastSeq = uint64_t(sqlite3_column_int64(st, 3));
        c.h.tMin = sqlite3_column_int64(st, 4);
        c.h.tMax = sqlite3_column_int64(st, 5);
        c.h.count = uint64_t(sqlite3_column_int64(st, 6));
        c.h.kinds = uint64_t(sqlite3_column_int64(st, 7));
        c.h.codec = sqlite3_column_int64(st, 8);
        const auto* p = static_cast<const char*>(sqlite3_column_blob(st, 9));
        c.data.assign(p ? p : "", size_t(sqlite3_column_bytes(st, 9)));
        rows.push_back(std::move(c));
    }
    sqlite3_finalize(st);
    return rows;
}

// Writes a chunk row back with its checksum recomputed over what it now says.
inline void writeChunkRow(sqlite3* db, const ChunkRow& c) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db,
                           "UPDATE event_chunks SET first_seq=?1,last_seq=?2,prev_last_seq=?3,"
                           "t_min=?4,t_max=?5,count=?6,kinds=?7,codec=?8,data=?9,crc=?10 "
                           "WHERE id=?11",
                           -1, &st, nullptr) != SQLITE_OK)
        return;
    const schema::ChunkHeader& h = c.h;
    sqlite3_bind_int64(st, 1, int64_t(h.firstSeq));
    sqlite3_bind_int64(st, 2, int64_t(h.lastSeq));
    sqlite3_bind_int64(st, 3, int64_t(h.prevLastSeq));
    sqlite3_bind_int64(st, 4, h.tMin);
    sqlite3_bind_int64(st, 5, h.tMax);
    sqlite3_bind_int64(st, 6, int64_t(h.count));
    sqlite3_bind_int64(st, 7, int64_t(h.kinds));
    sqlite3_bind_int64(st, 8, h.codec);
    sqlite3_bind_blob(st, 9, c.data.data(), int(c.data.size()), SQLITE_STATIC);
    sqlite3_bind_int64(st, 10, int64_t(schema::chunkChecksum(h, c.data)));
    sqlite3_bind_int64(st, 11, c.id);
    sqlite3_step(st);
    sqlite3_finalize(st);
    // Its chunk_index and chunk_headers rows too, as a writer would leave them (none for a row
    // that does not decode).
    std::vector<Event> ev;
    if (!decodeEvents(c.data, h.count, ev, int(h.codec)) || ev.empty()) {
        const std::string del = "DELETE FROM chunk_index WHERE chunk = " + std::to_string(c.id) +
                                "; DELETE FROM chunk_headers WHERE chunk = " + std::to_string(c.id);
        sqlite3_exec(db, del.c_str(), nullptr, nullptr, nullptr);
        return;
    }
    {
        std::string counts;
        for (unsigned k = 0; k < 64; ++k) {
            if (!(h.kinds >> k & 1)) continue;
            const auto n = std::count_if(ev.begin(), ev.end(),
                                         [&](const Event& e) { return unsigned(e.kind) == k; });
            counts += char(n & 0xff);
            counts += char(n >> 8);
        }
        const uint32_t crc = schema::chunkChecksum(h, c.data);
        if (sqlite3_prepare_v2(db,
                               "INSERT OR REPLACE INTO chunk_headers(chunk,prev_last_seq,crc,"
                               "kind_counts,row_crc,first_seq,last_seq,t_min,t_max,count,kinds,"
                               "codec,data_bytes) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,"
                               "?13)",
                               -1, &st, nullptr) == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, c.id);
            sqlite3_bind_int64(st, 2, int64_t(h.prevLastSeq));
            sqlite3_bind_int64(st, 3, crc);
            sqlite3_bind_blob(st, 4, counts.data(), int(counts.size()), SQLITE_TRANSIENT);
            sqlite3_bind_int64(st, 5, schema::chunkHeaderRowChecksum(h, crc, c.data.size(), counts));
            // The header columns the writer copies too (since 2026-11-28).
            const int64_t words[] = {int64_t(h.firstSeq), int64_t(h.lastSeq), h.tMin, h.tMax,
                                     int64_t(h.count), int64_t(h.kinds), h.codec,
                                     int64_t(c.data.size())};
            for (int i = 0; i < 8; ++i) sqlite3_bind_int64(st, 6 + i, words[i]);
            sqlite3_step(st);
        }
        sqlite3_finalize(st);
        st = nullptr;
    }
    view::ChunkIndexRow x;
    for (const Event& e : ev) x.add(e);
    if (sqlite3_prepare_v2(db,
                           "INSERT OR REPLACE INTO chunk_index(chunk,streams,pools,failed,size_min,"
                           "size_max,crc) VALUES(?1,?2,?3,?4,?5,?6,?7)",
                           -1, &st, nullptr) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, c.id);
    sqlite3_bind_int64(st, 2, int64_t(x.streams));
    sqlite3_bind_int64(st, 3, int64_t(x.pools));
    sqlite3_bind_int64(st, 4, int64_t(x.failed));
    sqlite3_bind_int64(st, 5, int64_t(x.sizeMin));
    sqlite3_bind_int64(st, 6, int64_t(x.sizeMax));
    sqlite3_bind_int64(st, 7, int64_t(schema::chunkIndexChecksum(h, schema::chunkChecksum(h, c.data), x)));
    sqlite3_step(st);
    sqlite3_finalize(st);
}

// What TraceWriter writes beside a chunk in pool_chunk_summary (when the trace has the table),
// for a chunk rewritten here: a rewrite that keeps the format's rules must stay valid, and
// these rows are bound to the chunk's crc.
inline void writeSummaryRows(sqlite3* db, const ChunkRow& c, const std::vector<Event>& ev) {
    sqlite3_stmt* del = nullptr;
    if (sqlite3_prepare_v2(db, "DELETE FROM pool_chunk_summary WHERE chunk=?", -1, &del,
                           nullptr) != SQLITE_OK)
        return; // a trace without the table
    sqlite3_bind_int64(del, 1, c.id);
    sqlite3_step(del);
    sqlite3_finalize(del);
    if (ev.empty()) return;
    sqlite3_stmt* ins = nullptr;
    if (sqlite3_prepare_v2(db, "INSERT INTO pool_chunk_summary VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &ins, nullptr) != SQLITE_OK)
        return;
    PoolSummaryAccumulator acc;
    for (const Event& e : ev) acc.add(e);
    const uint32_t chunkCrc = schema::chunkChecksum(c.h, c.data);
    for (const PoolChunkSummary& r : acc.take(c.id, c.h.tMin, c.h.tMax)) {
        const int64_t v[] = {r.chunk, int64_t(r.pool), int64_t(r.chunkRows), r.tMin, r.tMax,
                             int64_t(r.reservedMin), int64_t(r.reservedMax), int64_t(r.usedMin),
                             int64_t(r.usedMax), int64_t(r.reservedLast), int64_t(r.usedLast),
                             int64_t(schema::poolSummaryChecksum(r, chunkCrc))};
        for (int i = 0; i < 12; ++i) sqlite3_bind_int64(ins, i + 1, v[i]);
        sqlite3_step(ins);
        sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
}

inline uint64_t extremeValue(std::mt19937_64& rng) {
    static const uint64_t kV[] = {0, 1, 2, 0x7F, 0xFF, 0xFFFF, uint64_t(1) << 32, ~uint64_t{0},
                                  ~uint64_t{0} - 1, uint64_t(INT64_MAX), uint64_t(INT64_MIN),
                                  uint64_t(1) << 40};
    return rng() % 4 ? kV[rng() % std::size(kV)] : rng();
}

// One field of an event (not seq, not kind) set to an extreme or random value: a size of 2^64-1,
// a pool or stream handle no event created, a device index of 32767, a failed result...
inline void mutateField(Event& e, std::mt19937_64& rng) {
    const uint64_t v = extremeValue(rng);
    switch (rng() % 15) {
    case 0: e.tsNs = int64_t(v); break;
    case 1: e.stream = v; break;
    case 2: e.pool = v; break;
    case 3: e.ptr = v; break;
    case 4: e.size = v; break;
    case 5: e.aux = v; break;
    case 6: e.reserved = v; break;
    case 7: e.used = v; break;
    case 8: e.tid = uint32_t(v); break;
    case 9: e.correlation = uint32_t(v); break;
    case 10: e.result = int32_t(v); break;
    case 11: e.device = int16_t(v); break;
    case 12: e.variant = uint8_t(v); break;
    case 13: e.attr = uint16_t(v); break;
    default: e.flags = uint8_t(v); break;
    }
}

// Times already set to extremes by an earlier rewrite wrap around instead of overflowing.
inline int64_t wrapAdd(int64_t a, int64_t d) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(d));
}

inline bool validChunkKind(EventKind k) {
    return static_cast<int>(k) >= 1 && static_cast<int>(k) < static_cast<int>(EventKind::Sample);
}

// Rewrites one chunk of a format-3 trace with its events changed and its crc (and the next
// chunk's prev_last_seq link and crc, and event_counts) recomputed, so that the damage gets past
// the checksum to the decoder, the replay and the timeline builder. Returns true when what it
// wrote is a valid trace by the format's rules (the reader must then report no damage); false
// when it left a lie the format can see (a header that disagrees with its events, seqs out of
// order or overlapping, an unknown kind, a broken link, event_counts not updated).
inline bool mutateStructure(MemDb& m, std::mt19937_64& rng, std::string* what = nullptr) {
    std::vector<ChunkRow> rows = chunkRows(m.get());
    if (rows.empty()) return false;
    const size_t k = rng() % rows.size();
    ChunkRow& c = rows[k];
    std::vector<Event> ev;
    if (!decodeEvents(c.data, c.h.count, ev, int(c.h.codec)) || ev.empty()) return false;
    std::map<int, int64_t> countDelta;
    for (const Event& e : ev) --countDelta[int(e.kind)];
    const uint64_t lo = k ? rows[k - 1].h.lastSeq : 0; // seqs must stay in (lo, hi)
    const uint64_t hi = k + 1 < rows.size() ? rows[k + 1].h.firstSeq : ~uint64_t{0};
    bool headerLie = false, linkLie = false, countsLie = false;
    auto pick = [&] { return rng() % ev.size(); };
    const int how = int(rng() % 11);
    const char* kHow[] = {"fields",   "kind",        "bad kind", "drop",      "duplicate",
                          "reorder",  "time order",  "seq",      "header",    "pool nowhere",
                          "all dropped"};
    if (what) *what = kHow[how];
    switch (how) {
    case 0: // 1-4 fields set to extremes
        for (int i = 0, n = 1 + int(rng() % 4); i < n; ++i) mutateField(ev[pick()], rng);
        break;
    case 1: // another valid kind, its fields left as they were (a free that was a sync...)
        ev[pick()].kind = static_cast<EventKind>(1 + rng() % 21);
        break;
    case 2: { // a kind no writer produces
        static const int kBad[] = {0, 22, kEventKindCount, 64, 200, 255}; // 22: Sample, never in chunks
        ev[pick()].kind = static_cast<EventKind>(kBad[rng() % std::size(kBad)]);
        break;
    }
    case 3: { // a run of events dropped: frees of blocks never allocated, allocs never freed
        const size_t at = pick();
        const size_t n = std::min(ev.size() - at, size_t(1 + rng() % 64));
        ev.erase(ev.begin() + long(at), ev.begin() + long(at + n));
        break;
    }
    case 4: { // an event repeated (a double free, a block allocated twice) with a fresh seq
        const size_t i = pick();
        Event e = ev[rng() % ev.size()];
        const uint64_t before = i ? ev[i - 1].seq : lo;
        if (ev[i].seq - before >= 2) {
            e.seq = before + 1;
            ev.insert(ev.begin() + long(i), e);
        } else { // no free seq: the copy keeps its seq (a duplicate the reader must see)
            e.seq = ev[i].seq;
            ev.insert(ev.begin() + long(i), e);
        }
        break;
    }
    case 5: { // two events' contents swapped, seqs kept (a free before its alloc)
        const size_t a = pick(), b = pick();
        std::swap(ev[a], ev[b]);
        std::swap(ev[a].seq, ev[b].seq);
        break;
    }
    case 6: { // times out of order (one event before the one ahead of it)
        const size_t i = pick();
        ev[i].tsNs = rng() % 2 ? wrapAdd(ev[i].tsNs, -1 - int64_t(rng() % 1'000'000'000))
                               : std::numeric_limits<int64_t>::min() + int64_t(rng() % 100);
        break;
    }
    case 7: { // one seq moved: backwards, repeated, or past the next chunk
        const size_t i = pick();
        switch (rng() % 4) {
        case 0: ev[i].seq = i ? ev[i - 1].seq : lo; break;
        case 1: ev[i].seq = lo ? lo - rng() % lo : 0; break;
        case 2: ev[i].seq = hi == ~uint64_t{0} ? hi : hi + rng() % 3; break;
        default: ev[i].seq = extremeValue(rng);
        }
        break;
    }
    case 8: // nothing in the events; the header lies (below)
        headerLie = true;
        break;
    case 9: { // every event's pool (or stream) a handle no event created
        const uint64_t h = extremeValue(rng) | 1;
        const bool stream = rng() % 2;
        for (Event& e : ev) (stream ? e.stream : e.pool) = h;
        break;
    }
    default: // every event of the chunk dropped: the row goes, the link and counts are mended
        ev.clear();
    }
    for (const Event& e : ev) ++countDelta[int(e.kind)];
    bool valid = !headerLie;
    for (size_t i = 0; i < ev.size(); ++i) {
        // (The last chunk has no bound above: seq 2^64-1 is a seq like any other.)
        valid &= validChunkKind(ev[i].kind) && ev[i].seq > lo &&
                 (ev[i].seq < hi || k + 1 == rows.size());
        if (i) valid &= ev[i].seq > ev[i - 1].seq;
    }
    valid &= ev.size() <= schema::kChunkEvents;

    sqlite3* db = m.get();
    uint64_t newLast = lo; // what the next chunk's link must say
    if (ev.empty()) {
        m.exec("DELETE FROM event_chunks WHERE id = " + std::to_string(c.id));
        writeSummaryRows(db, c, ev);
    } else {
        schema::ChunkHeader& h = c.h;
        h.firstSeq = ev.front().seq;
        h.lastSeq = ev.back().seq;
        h.count = ev.size();
        h.tMin = std::numeric_limits<int64_t>::max();
        h.tMax = std::numeric_limits<int64_t>::min();
        h.kinds = 0;
        for (const Event& e : ev) {
            h.tMin = std::min(h.tMin, e.tsNs);
            h.tMax = std::max(h.tMax, e.tsNs);
            h.kinds |= uint64_t{1} << (static_cast<unsigned>(e.kind) & 63);
        }
        h.codec = rng() % 4 ? 3 : 2;
        c.data.clear(); // encodeEvents appends
        encodeEvents(ev, c.data, int(h.codec));
        if (headerLie) {
            switch (rng() % 6) {
            case 0: h.count += rng() % 2 ? 1 : -1; break; // 0 when it was 1
            case 1: h.firstSeq += 1 + rng() % 3; break;
            case 2: h.lastSeq += 1 + rng() % 3; break;
            case 3: h.tMin = wrapAdd(h.tMin, -1 - int64_t(rng() % 1000)); break;
            case 4: h.tMax = wrapAdd(h.tMax, 1 + int64_t(rng() % 1000)); break;
            default: h.kinds ^= uint64_t{1} << (1 + rng() % 30);
            }
        }
        writeChunkRow(db, c);
        writeSummaryRows(db, c, ev);
        newLast = h.lastSeq;
    }
    if (k + 1 < rows.size()) {
        if (rng() % 10 == 0) linkLie = rows[k + 1].h.prevLastSeq != newLast;
        else rows[k + 1].h.prevLastSeq = newLast;
        writeChunkRow(db, rows[k + 1]);
        std::vector<Event> next;
        if (decodeEvents(rows[k + 1].data, rows[k + 1].h.count, next, int(rows[k + 1].h.codec)))
            writeSummaryRows(db, rows[k + 1], next); // its crc changed with its link
    }
    if (rng() % 10 == 0) {
        int64_t net = 0; // the rules (and the reader) check event_counts' total
        for (const auto& [kind, d] : countDelta) net += d;
        countsLie = net != 0;
    } else {
        for (const auto& [kind, d] : countDelta)
            if (d && kind >= 0 && kind < kEventKindCount)
                m.exec("INSERT INTO event_counts(kind, count) VALUES (" + std::to_string(kind) +
                       ", " + std::to_string(d) + ") ON CONFLICT(kind) DO UPDATE SET count = "
                       "count + excluded.count");
        m.exec("DELETE FROM event_counts WHERE count = 0");
    }
    return valid && !linkLie && !countsLie;
}

// The format's rules for the chunks (schema.sql), checked here on their own, independently of
// TraceReader: every row decodes to 1..4096 events of kinds a writer produces, in strictly
// increasing seq order, matching its header; rows in id order are in seq order, do not overlap,
// and each names the last seq of the one before; event_counts adds up to the rows' counts.
inline bool followsTheRules(sqlite3* db) {
    const std::vector<ChunkRow> rows = chunkRows(db); // seq order
    uint64_t prevLast = 0, total = 0;
    int64_t prevId = std::numeric_limits<int64_t>::min();
    std::vector<Event> ev;
    for (const ChunkRow& c : rows) {
        const schema::ChunkHeader& h = c.h;
        if (h.count < 1 || h.count > schema::kChunkEvents || h.codec < 1 ||
            h.codec > kEventCodecVersion) // the seeds are written in the current format
            return false;
        ev.clear();
        if (!decodeEvents(c.data, h.count, ev, int(h.codec))) return false;
        int64_t tMin = std::numeric_limits<int64_t>::max(), tMax = std::numeric_limits<int64_t>::min();
        uint64_t kinds = 0;
        for (size_t i = 0; i < ev.size(); ++i) {
            if (!validChunkKind(ev[i].kind) || (i && ev[i].seq <= ev[i - 1].seq)) return false;
            tMin = std::min(tMin, ev[i].tsNs);
            tMax = std::max(tMax, ev[i].tsNs);
            kinds |= uint64_t{1} << (static_cast<unsigned>(ev[i].kind) & 63);
        }
        if (ev.front().seq != h.firstSeq || ev.back().seq != h.lastSeq || tMin != h.tMin ||
            tMax != h.tMax || kinds != h.kinds)
            return false;
        if (c.id < prevId || (prevId != std::numeric_limits<int64_t>::min() &&
                              h.firstSeq <= prevLast) || h.prevLastSeq != prevLast)
            return false;
        prevId = c.id;
        prevLast = h.lastSeq;
        total += h.count;
    }
    sqlite3_stmt* st = nullptr;
    uint64_t counted = 0;
    bool ok = sqlite3_prepare_v2(db, "SELECT kind, count FROM event_counts", -1, &st, nullptr) ==
              SQLITE_OK;
    while (ok && sqlite3_step(st) == SQLITE_ROW) {
        const int64_t kind = sqlite3_column_int64(st, 0), n = sqlite3_column_int64(st, 1);
        ok = kind >= 0 && kind < kEventKindCount && n >= 0;
        counted += uint64_t(n);
    }
    sqlite3_finalize(st);
    return ok && counted == total;
}

// ---- filtered reads (chunk_index, issue #15) ------------------------------------------------------

// A filter drawn from the events: one field or two of an event picked at random (or a handle no
// event has), the way the events table's filter bar is used.
inline view::EventFilter filterFrom(const std::vector<Event>& ev, std::mt19937_64& rng) {
    view::EventFilter f;
    const Event& e = ev[rng() % ev.size()];
    for (int i = 0, n = 1 + int(rng() % 2); i < n; ++i) {
        switch (rng() % 6) {
        case 0: f.failedOnly = true; break;
        case 1: f.stream = rng() % 8 ? e.stream : rng(); break;
        case 2: f.pool = rng() % 8 ? e.pool : rng(); break;
        case 3: f.minSize = e.size; break;
        case 4: f.kindMask = view::EventFilter::bit(e.kind); break;
        default:
            f.t0 = e.tsNs;
            f.t1 = e.tsNs > INT64_MAX - 2'000'000 ? INT64_MAX : e.tsNs + 1 + int64_t(rng() % 1000000);
        }
    }
    return f;
}

inline std::vector<Event> matching(const std::vector<Event>& ev, const view::EventFilter& f) {
    std::vector<Event> out;
    for (const Event& e : ev)
        if (f.matches(e)) out.push_back(e);
    return out;
}

} // namespace poolscope::fuzz
