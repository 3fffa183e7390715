// What lets the window's first frame of a large trace touch no event chunk (issue #15): the
// chunk's header columns copied into chunk_headers (a header scan then reads no event_chunks
// row) and pool_block_summary (the pools' watermarks per block of 64 chunks, the first view's
// overview). Both must round-trip; a row that fails, is missing or lies must be found and make
// the reader answer as it does without them; and a reader of a range that adopts the load's
// scan must answer as one that scans.
//
// The traces here are hand-built (HandBuilt... in the test names): made-up events, not
// recordings.
#include "TestTraces.h"
#include "poolscope/PoolSummary.h"
#include "poolscope/Schema.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TimelineRange.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/view/Overview.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace poolscope {
namespace {

constexpr uint64_t kPools[] = {0xa000, 0xb000, 0xc000};

// Three pools whose reserved/used walk at random (the third only in bursts, so that some blocks
// lack it), events without watermarks between, uneven commits (chunks closed early).
std::string writeHandBuilt(const std::string& path, uint64_t seed, size_t events,
                           WriterOptions o = {}) {
    std::mt19937_64 rng(seed);
    o.wal = false;
    o.synchronousOff = true;
    auto w = TraceWriter::create(path, o);
    EXPECT_TRUE(w) << (w ? "" : w.error().message);
    if (!w) return path;
    for (uint64_t h : kPools) {
        PoolInfo p;
        p.handle = h;
        EXPECT_TRUE((*w)->addPool(p));
    }
    uint64_t reserved[3] = {1 << 20, 1 << 21, 1 << 22}, used[3] = {};
    std::vector<Event> batch;
    int64_t t = 1'000'000;
    for (size_t i = 0; i < events; ++i) {
        Event e;
        e.seq = i + 1;
        t += int64_t(rng() % 2000);
        e.tsNs = t;
        const int p = (i / 30000) % 4 == 3 ? int(rng() % 3) : int(rng() % 2);
        e.pool = kPools[p];
        e.stream = 0x1000 + 0x100 * (rng() % 3);
        e.kind = rng() % 2 ? EventKind::Alloc : EventKind::Free;
        e.size = 512;
        if (rng() % 5) {
            used[p] = uint64_t(std::max<int64_t>(0, int64_t(used[p]) + int64_t(rng() % 4096) - 2000));
            reserved[p] = std::max(used[p], reserved[p] + (rng() % 7 == 0 ? (rng() % 3) << 20 : 0));
            e.flags = kHasWatermarks;
            e.reserved = reserved[p];
            e.used = used[p];
        }
        batch.push_back(e);
        if (rng() % 5000 == 0) {
            EXPECT_TRUE((*w)->append(batch));
            EXPECT_TRUE((*w)->commit());
            batch.clear();
        }
    }
    EXPECT_TRUE((*w)->append(batch));
    EXPECT_TRUE((*w)->close());
    return path;
}

uint64_t queryInt(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    uint64_t v = ~uint64_t{0};
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        sqlite3_stmt* st = nullptr;
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            v = uint64_t(sqlite3_column_int64(st, 0));
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return v;
}

std::unique_ptr<TraceReader> openTrace(const std::string& path, bool headers = true) {
    auto r = TraceReader::open(path);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    if (!r) return nullptr;
    (*r)->setUseChunkHeaders(headers);
    (*r)->setSkipDamaged(true);
    return std::move(*r);
}

bool sameEvents(const std::vector<Event>& a, const std::vector<Event>& b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](const Event& x, const Event& y) {
               return std::memcmp(&x, &y, sizeof(Event)) == 0;
           });
}

std::string allDamage(const TraceReader& r) {
    std::string s;
    for (const TraceDamage& d : r.damage()) s += d.what + "\n";
    return s;
}

uint64_t lostEvents(const TraceReader& r) {
    uint64_t n = 0;
    for (const TraceDamage& d : r.damage()) n += d.events;
    return n;
}

// The header columns, the events and the summaries a reader gives, as text.
std::string answers(TraceReader& r) {
    std::string out;
    auto sum = r.summary();
    EXPECT_TRUE(sum);
    if (sum)
        out += std::to_string(sum->eventCount) + " " + std::to_string(sum->firstTsNs) + " " +
               std::to_string(sum->lastTsNs) + "\n";
    if (auto h = r.chunkHeaders())
        for (const ChunkHeaderInfo& c : *h)
            out += std::to_string(c.id) + ":" + std::to_string(c.firstSeq) + "-" +
                   std::to_string(c.lastSeq) + "," + std::to_string(c.tMin) + "-" +
                   std::to_string(c.tMax) + "," + std::to_string(c.count) + " ";
    out += "\n";
    auto all = r.events(INT64_MIN, INT64_MAX);
    EXPECT_TRUE(all);
    if (all) {
        uint64_t h = 1469598103934665603ull;
        for (const Event& e : *all)
            for (size_t i = 0; i < sizeof(Event); ++i)
                h = (h ^ reinterpret_cast<const unsigned char*>(&e)[i]) * 1099511628211ull;
        out += std::to_string(all->size()) + " " + std::to_string(h) + "\n";
    }
    if (auto s = r.poolSummaries())
        out += std::to_string(s->rows.size()) + " " + std::to_string(s->chunks) + " " +
               std::to_string(s->chunksWithout) + "\n";
    return out;
}

// The same for pool_block_summary's crc.
void forgeBlockRows(const std::string& path) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db,
                                 "SELECT first_chunk,pool,last_chunk,block_rows,t_min,t_max,"
                                 "reserved_min,reserved_max,used_min,used_max,reserved_last,"
                                 "used_last FROM pool_block_summary",
                                 -1, &st, nullptr),
              SQLITE_OK);
    std::vector<std::tuple<int64_t, uint64_t, uint32_t>> fixed;
    while (sqlite3_step(st) == SQLITE_ROW) {
        auto u = [&](int c) { return uint64_t(sqlite3_column_int64(st, c)); };
        PoolBlockSummary r;
        r.chunk = int64_t(u(0));
        r.pool = u(1);
        r.lastChunk = int64_t(u(2));
        r.chunkRows = u(3);
        r.tMin = int64_t(u(4));
        r.tMax = int64_t(u(5));
        r.reservedMin = u(6);
        r.reservedMax = u(7);
        r.usedMin = u(8);
        r.usedMax = u(9);
        r.reservedLast = u(10);
        r.usedLast = u(11);
        fixed.emplace_back(r.chunk, r.pool, schema::poolBlockChecksum(r));
    }
    sqlite3_finalize(st);
    for (const auto& [chunk, pool, crc] : fixed)
        sqlite3_exec(db, ("UPDATE pool_block_summary SET crc = " + std::to_string(crc) +
                          " WHERE first_chunk = " + std::to_string(chunk) +
                          " AND pool = " + std::to_string(int64_t(pool))).c_str(),
                     nullptr, nullptr, nullptr);
    sqlite3_close(db);
}

TEST(FirstFrameTables, HandBuiltTraceCopiesEveryHeaderColumnAndItsScanReadsNoChunkRow) {
    test::ScratchDir dir;
    const std::string path = writeHandBuilt(dir.file("t.poolscope"), 1, 500'000);
    const uint64_t chunks = queryInt(path, "SELECT count(*) FROM event_chunks");
    ASSERT_GE(chunks, 130u);
    EXPECT_EQ(queryInt(path, "SELECT count(*) FROM chunk_headers h JOIN event_chunks c ON "
                             "h.chunk = c.id AND h.first_seq = c.first_seq AND h.last_seq = "
                             "c.last_seq AND h.t_min = c.t_min AND h.t_max = c.t_max AND h.count "
                             "= c.count AND h.kinds = c.kinds AND h.codec = c.codec AND "
                             "h.data_bytes = length(c.data)"),
              chunks);
    auto r = openTrace(path);
    auto sum = r->summary();
    ASSERT_TRUE(sum);
    EXPECT_EQ(sum->eventCount, 500'000u);
    EXPECT_EQ(r->scanStats().scans, 1u);
    EXPECT_EQ(r->scanStats().headersFromChunkRows, 0u);
    // The reference: the same file read from event_chunks.
    auto ref = openTrace(path, false);
    const std::string expected = answers(*ref);
    EXPECT_EQ(ref->scanStats().headersFromChunkRows, chunks);
    EXPECT_EQ(answers(*r), expected);
    EXPECT_EQ(allDamage(*r), "");
    ASSERT_TRUE(r->verifyChunks());

    // Written before the copies (a narrow table), or with them left out: read as before.
    const std::string narrow = dir.file("narrow.poolscope");
    std::filesystem::copy_file(path, narrow);
    test::execSql(narrow, "ALTER TABLE chunk_headers DROP COLUMN data_bytes; ALTER TABLE "
                          "chunk_headers DROP COLUMN first_seq");
    WriterOptions without;
    without.chunkHeaderCopies = false;
    const std::string nulls = writeHandBuilt(dir.file("nulls.poolscope"), 1, 500'000, without);
    for (const std::string& p : {narrow, nulls}) {
        SCOPED_TRACE(p);
        auto o = openTrace(p);
        EXPECT_EQ(answers(*o), expected);
        EXPECT_EQ(o->scanStats().headersFromChunkRows, chunks);
        EXPECT_EQ(allDamage(*o), "");
    }
}

TEST(FirstFrameTables, HandBuiltDamagedMissingOrLyingCopiesFallBackToTheChunkRows) {
    test::ScratchDir dir;
    const std::string base = writeHandBuilt(dir.file("base.poolscope"), 2, 200'000);
    struct Case {
        const char* name;
        const char* sql;
        bool forged;
        const char* found;    // in damage()
        uint64_t fromRows;    // headers the first scan read from event_chunks
    };
    const Case cases[] = {
        {"t_min changed", "UPDATE chunk_headers SET t_min = t_min - 1 WHERE chunk = 3", false,
         "do not match their event chunk", 1},
        {"t_min forged", "UPDATE chunk_headers SET t_min = t_min - 1 WHERE chunk = 3", true,
         "do not match their event chunk", 1},
        {"data_bytes null", "UPDATE chunk_headers SET data_bytes = NULL WHERE chunk = 5", false,
         "do not match their event chunk", 1},
        {"count forged", "UPDATE chunk_headers SET count = count - 1, kind_counts = "
                         "CAST(substr(kind_counts,1,2) AS BLOB) WHERE chunk = 4", true,
         "do not match their event chunk", 1},
        {"first_seq forged", "UPDATE chunk_headers SET first_seq = first_seq + 1 WHERE chunk = 6",
         true, "disagree with their event chunk", 1},
        {"row deleted", "DELETE FROM chunk_headers WHERE chunk = 7", false, "has no row for", 1},
        {"chunk row deleted", "DELETE FROM event_chunks WHERE id = 8", false,
         "event chunk rows deleted", 0},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        const std::string path = dir.file(std::string(c.name) + ".poolscope");
        std::filesystem::copy_file(base, path, std::filesystem::copy_options::overwrite_existing);
        test::execSql(path, c.sql);
        if (c.forged) test::forgeChunkHeaders(path);
        auto ref = openTrace(path, false);
        const std::string expected = answers(*ref);
        auto r = openTrace(path);
        ASSERT_TRUE(r->summary());
        EXPECT_EQ(r->scanStats().headersFromChunkRows, c.fromRows);
        auto all = r->events(INT64_MIN, INT64_MAX);
        ASSERT_TRUE(all);
        auto refAll = ref->events(INT64_MIN, INT64_MAX);
        ASSERT_TRUE(refAll);
        EXPECT_TRUE(sameEvents(*all, *refAll)) << all->size() << " vs " << refAll->size() << "\n"
                                               << allDamage(*r);
        // After the read (a lie found there makes the reader scan again): the same answers.
        EXPECT_EQ(answers(*r), expected);
        const std::string damage = allDamage(*r);
        EXPECT_NE(damage.find(c.found), std::string::npos) << damage;
        EXPECT_EQ(lostEvents(*r), lostEvents(*ref)) << damage;
    }
}

// The blocks merged by the test from the per-chunk rows (chunk ids 1.., 64 to a block).
std::map<std::pair<int64_t, uint64_t>, PoolChunkSummary> mergeByBlock(const PoolSummaries& s) {
    std::map<std::pair<int64_t, uint64_t>, PoolChunkSummary> out;
    for (const PoolChunkSummary& r : s.rows) {
        const int64_t first = (r.chunk - 1) / 64 * 64 + 1;
        auto [it, fresh] = out.try_emplace({first, r.pool}, r);
        if (fresh) continue;
        PoolChunkSummary& m = it->second;
        m.tMin = std::min(m.tMin, r.tMin);
        m.tMax = std::max(m.tMax, r.tMax);
        m.reservedMin = std::min(m.reservedMin, r.reservedMin);
        m.reservedMax = std::max(m.reservedMax, r.reservedMax);
        m.usedMin = std::min(m.usedMin, r.usedMin);
        m.usedMax = std::max(m.usedMax, r.usedMax);
        m.reservedLast = r.reservedLast;
        m.usedLast = r.usedLast;
    }
    return out;
}

TEST(FirstFrameTables, HandBuiltBlockSummariesEqualTheirChunksMerged) {
    test::ScratchDir dir;
    const std::string path = writeHandBuilt(dir.file("t.poolscope"), 3, 700'000);
    const uint64_t chunks = queryInt(path, "SELECT count(*) FROM event_chunks");
    ASSERT_GE(chunks, 3 * 64u); // several blocks, the last one shorter
    auto r = openTrace(path);
    auto blocks = r->poolBlockSummaries();
    ASSERT_TRUE(blocks);
    ASSERT_TRUE(blocks->present);
    EXPECT_EQ(blocks->chunks, (chunks + 63) / 64);
    EXPECT_EQ(r->scanStats().scans, 0u); // read before any header scan
    auto full = r->poolSummaries();
    ASSERT_TRUE(full && full->present);
    const auto merged = mergeByBlock(*full);
    ASSERT_EQ(blocks->rows.size(), merged.size());
    for (const PoolChunkSummary& b : blocks->rows) {
        auto it = merged.find({b.chunk, b.pool});
        ASSERT_NE(it, merged.end()) << b.chunk << " " << b.pool;
        const PoolChunkSummary& m = it->second;
        EXPECT_EQ(std::tie(b.tMin, b.tMax, b.reservedMin, b.reservedMax, b.usedMin, b.usedMax,
                           b.reservedLast, b.usedLast),
                  std::tie(m.tMin, m.tMax, m.reservedMin, m.reservedMax, m.usedMin, m.usedMax,
                           m.reservedLast, m.usedLast))
            << "block at chunk " << b.chunk << ", pool " << b.pool;
    }
    // The first view's peaks are the trace's.
    const view::Overview draft(*blocks), chunked(*full);
    EXPECT_EQ(draft.pools(), chunked.pools());
    for (uint64_t pool : chunked.pools()) {
        auto a = draft.whole(pool), b = chunked.whole(pool);
        ASSERT_TRUE(a && b);
        EXPECT_EQ(std::tie(a->tMin, a->tMax, a->reservedMax, a->usedMax, a->reservedLast),
                  std::tie(b->tMin, b->tMax, b->reservedMax, b->usedMax, b->reservedLast));
    }
    EXPECT_EQ(allDamage(*r), "");
    // A trace written without them has none, and no damage.
    WriterOptions o;
    o.blockSummaries = false;
    auto without = openTrace(writeHandBuilt(dir.file("without.poolscope"), 3, 100'000, o));
    auto none = without->poolBlockSummaries();
    ASSERT_TRUE(none);
    EXPECT_FALSE(none->present);
    EXPECT_EQ(allDamage(*without), "");
}

TEST(FirstFrameTables, HandBuiltDamagedMissingOrLyingBlockRowsAreFoundAndNotUsed) {
    test::ScratchDir dir;
    const std::string base = writeHandBuilt(dir.file("base.poolscope"), 4, 700'000);
    const std::string chunkRows = answers(*openTrace(base));
    struct Case {
        const char* name;
        const char* sql;
        bool forged;
        bool usable;       // poolBlockSummaries() still present (a lie found only later)
        const char* found; // in damage(), after poolSummaries()
    };
    const Case cases[] = {
        {"crc wrong", "UPDATE pool_block_summary SET crc = crc + 1 WHERE first_chunk = 65 AND "
                      "pool = 40960", false, false, "fails its checksum"},
        {"value not an integer", "UPDATE pool_block_summary SET used_max = 'x' WHERE first_chunk "
                                 "= 1 AND pool = 40960", false, false, "fails its checksum"},
        {"row deleted", "DELETE FROM pool_block_summary WHERE first_chunk = 65 AND pool = 45056",
         false, false, "do not agree"},
        {"block deleted", "DELETE FROM pool_block_summary WHERE first_chunk = 65", false, false,
         "leaves chunks 65..128 out"},
        {"last block deleted (a trace not closed)",
         "DELETE FROM pool_block_summary WHERE first_chunk = (SELECT max(first_chunk) FROM "
         "pool_block_summary)", false, false, "ends before the last chunks"},
        {"impossible values forged", "UPDATE pool_block_summary SET used_last = used_max + 1 "
                                     "WHERE first_chunk = 1 AND pool = 40960", true, false,
         "impossible values"},
        {"peak forged", "UPDATE pool_block_summary SET reserved_max = reserved_max + 4096 WHERE "
                        "first_chunk = 65 AND pool = 40960", true, true,
         "disagree with the pool_chunk_summary rows"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        const std::string path = dir.file(std::string(c.name) + ".poolscope");
        std::filesystem::copy_file(base, path, std::filesystem::copy_options::overwrite_existing);
        test::execSql(path, c.sql);
        if (c.forged) forgeBlockRows(path);
        auto r = openTrace(path);
        auto blocks = r->poolBlockSummaries();
        ASSERT_TRUE(blocks);
        EXPECT_EQ(blocks->present, c.usable);
        if (!c.usable) {
            EXPECT_TRUE(blocks->rows.empty());
        }
        // Everything else reads as from the intact file (the per-chunk rows are not touched).
        EXPECT_EQ(answers(*r), chunkRows);
        const std::string damage = allDamage(*r);
        EXPECT_NE(damage.find(c.found), std::string::npos) << damage;
        EXPECT_EQ(lostEvents(*r), 0u);
    }
    // Without the table: nothing to say.
    const std::string dropped = dir.file("dropped.poolscope");
    std::filesystem::copy_file(base, dropped);
    test::execSql(dropped, "DROP TABLE pool_block_summary");
    auto r = openTrace(dropped);
    auto blocks = r->poolBlockSummaries();
    ASSERT_TRUE(blocks);
    EXPECT_FALSE(blocks->present);
    EXPECT_EQ(answers(*r), chunkRows);
    EXPECT_EQ(allDamage(*r), "");
}

TEST(FirstFrameTables, HandBuiltAReaderAdoptingTheLoadsScanReadsNeitherAgainAndAnswersTheSame) {
    test::ScratchDir dir;
    const std::string path = writeHandBuilt(dir.file("t.poolscope"), 5, 400'000);
    auto load = openTrace(path);
    load->setReuseHeaderScan(true);
    ASSERT_TRUE(load->summary());
    ASSERT_TRUE(load->poolSummaries());
    auto shared = load->sharedScan();
    ASSERT_TRUE(shared);
    auto sums = load->poolSummaries();
    ASSERT_TRUE(sums);
    const int64_t t0 = sums->rows[sums->rows.size() / 3].tMin;
    const int64_t t1 = sums->rows[sums->rows.size() / 2].tMax;
    auto range = [&](TraceReader& r) {
        auto tl = buildTimelineRange(r, t0, t1, RangeBuildOptions{});
        EXPECT_TRUE(tl) << (tl ? "" : tl.error().message);
        if (!tl) return std::string();
        return std::to_string((*tl)->eventCount) + " " + std::to_string((*tl)->allocations.size()) +
               " " + std::to_string((*tl)->loadedFromNs) + " " + std::to_string((*tl)->loadedUntilNs);
    };
    auto fresh = openTrace(path);
    const std::string expected = range(*fresh) + "\n" + answers(*fresh);
    EXPECT_GE(fresh->scanStats().scans, 1u);
    auto adopting = openTrace(path);
    adopting->adoptScan(shared);
    EXPECT_EQ(range(*adopting) + "\n" + answers(*adopting), expected);
    EXPECT_EQ(adopting->scanStats().scans, 0u);
    // The file changed since: the scan is not adopted.
    test::execSql(path, "INSERT INTO meta VALUES('touched','1')");
    auto later = openTrace(path);
    later->adoptScan(shared);
    EXPECT_EQ(range(*later) + "\n" + answers(*later), expected);
    EXPECT_GE(later->scanStats().scans, 1u);
}

} // namespace
} // namespace poolscope

namespace poolscope {
namespace {

// A copy of `path` in dir, intact ("i.poolscope") or with the data of its chunk at `offset` (by
// id) zeroed ("d.poolscope"); and the count of Alloc events both tests below ask for, through a
// reader that reuses its scan and passes over damaged chunks.
std::string copyOf(test::ScratchDir& dir, const std::string& path, bool damage, int offset) {
    const std::string file = dir.file(damage ? "d.poolscope" : "i.poolscope");
    std::filesystem::copy_file(path, file);
    if (damage)
        test::execSql(file, "UPDATE event_chunks SET data = zeroblob(length(data)) WHERE id = "
                            "(SELECT id FROM event_chunks ORDER BY id LIMIT 1 OFFSET " + std::to_string(offset) + ")");
    return file;
}

uint64_t countAllocs(TraceReader& r, FilteredReadStats& st) {
    view::EventFilter f;
    f.kindMask = 1u << unsigned(EventKind::Alloc);
    r.setReuseHeaderScan(true);
    r.setSkipDamaged(true);
    auto n = r.countMatching(f, &st);
    EXPECT_TRUE(n) << (n ? "" : n.error().message);
    return n ? *n : 0;
}

// The window's events table opens a reader per query and shares the first one's scan: a kind
// filter's count then reads no chunk whose data an earlier read found intact, gives the same
// number, still re-reads (and leaves out) a chunk found damaged, and starts over on a file that
// changed.
TEST(FirstFrameTables, HandBuiltCountsSharingAScanReadOnlyChunksNotYetFoundIntact) {
    test::ScratchDir dir;
    const std::string path = writeHandBuilt(dir.file("t.poolscope"), 9, 200'000);
    auto count = countAllocs;
    for (const bool damage : {false, true}) {
        SCOPED_TRACE(damage ? "one chunk's data damaged" : "intact");
        const std::string file = copyOf(dir, path, damage, 5);
        auto first = openTrace(file);
        FilteredReadStats a;
        const uint64_t n = count(*first, a);
        EXPECT_GT(a.answeredByCounts, 10u);
        EXPECT_EQ(a.answeredFromVerified, 0u);
        auto shared = first->sharedScan();
        ASSERT_TRUE(shared);
        auto second = openTrace(file);
        second->adoptScan(shared);
        FilteredReadStats b;
        EXPECT_EQ(count(*second, b), n);
        EXPECT_EQ(b.answeredByCounts, a.answeredByCounts);
        // The damaged chunk is read again each time (and again left out).
        EXPECT_EQ(b.answeredFromVerified, a.answeredByCounts - (damage ? 1 : 0));
        EXPECT_EQ(second->damage().size(), first->damage().size());
        // A reader of its own reads every chunk.
        auto alone = openTrace(file);
        FilteredReadStats c;
        EXPECT_EQ(count(*alone, c), n);
        EXPECT_EQ(c.answeredFromVerified, 0u);
        // The file changed since the scan was taken: nothing of it is used.
        test::execSql(file, "INSERT INTO meta VALUES('touched','1')");
        auto later = openTrace(file);
        later->adoptScan(shared);
        FilteredReadStats d;
        EXPECT_EQ(count(*later, d), n);
        EXPECT_EQ(d.answeredFromVerified, 0u);
    }
}

} // namespace
} // namespace poolscope

namespace poolscope {
namespace {

// verifyAhead: the chunks a kind filter's count reads only for their checksum, read first on
// several threads. The count that follows reads none of those found intact again, gives the
// number a reader alone gives, and still reads, leaves out and reports a damaged chunk; a reader
// sharing the scan counts from the same marks; a cancelled read ahead marks nothing.
TEST(FirstFrameTables, HandBuiltChunksCheckedAheadOnThreadsCountAsOneReaderCounts) {
    test::ScratchDir dir;
    const std::string path = writeHandBuilt(dir.file("t.poolscope"), 11, 200'000);
    view::EventFilter f;
    f.kindMask = 1u << unsigned(EventKind::Alloc);
    auto prepare = [](TraceReader& r) {
        r.setReuseHeaderScan(true);
        r.setSkipDamaged(true);
    };
    auto count = countAllocs;
    for (const bool damage : {false, true}) {
        SCOPED_TRACE(damage ? "one chunk's data damaged" : "intact");
        const std::string file = copyOf(dir, path, damage, 7);
        auto alone = openTrace(file);
        prepare(*alone);
        FilteredReadStats a;
        const uint64_t n = count(*alone, a);
        ASSERT_GT(a.answeredByCounts, 20u);
        const size_t intact = a.answeredByCounts - (damage ? 1 : 0);

        auto first = openTrace(file);
        prepare(*first);
        EXPECT_EQ(first->verifyAhead(f, 4, nullptr, 4), intact);
        EXPECT_TRUE(first->damage().empty()) << "the read ahead reports nothing";
        FilteredReadStats b;
        EXPECT_EQ(count(*first, b), n);
        EXPECT_EQ(b.answeredByCounts, a.answeredByCounts);
        EXPECT_EQ(b.answeredFromVerified, intact) << "the count read them again";
        EXPECT_EQ(first->damage().size(), alone->damage().size());
        EXPECT_EQ(first->damage().empty(), !damage);

        auto second = openTrace(file);
        prepare(*second);
        second->adoptScan(first->sharedScan());
        FilteredReadStats c;
        EXPECT_EQ(count(*second, c), n);
        EXPECT_EQ(c.answeredFromVerified, intact);

        // Cancelled: nothing marked, the count reads every chunk as a reader alone does.
        auto third = openTrace(file);
        prepare(*third);
        const std::atomic<bool> cancelled{true};
        EXPECT_EQ(third->verifyAhead(f, 4, &cancelled, 4), 0u);
        FilteredReadStats d;
        EXPECT_EQ(count(*third, d), n);
        EXPECT_EQ(d.answeredFromVerified, 0u);
    }
}

// `info`'s check of every chunk on several threads: the chunks found intact there are not read
// again, and the damage found (a chunk's data changed) and the summary are a lone reader's.
TEST(FirstFrameTables, HandBuiltChunksVerifiedOnThreadsReportAsOneReaderReports) {
    test::ScratchDir dir;
    const std::string path = writeHandBuilt(dir.file("t.poolscope"), 13, 200'000);
    for (const bool damage : {false, true}) {
        SCOPED_TRACE(damage ? "one chunk's data damaged" : "intact");
        const std::string file = copyOf(dir, path, damage, 3);
        auto alone = openTrace(file);
        alone->setSkipDamaged(true);
        ASSERT_TRUE(alone->verifyChunks());
        auto headers = alone->chunkHeaders();
        ASSERT_TRUE(headers);
        const size_t chunks = headers->size();
        ASSERT_GT(chunks, 20u);
        auto threaded = openTrace(file);
        threaded->setSkipDamaged(true);
        size_t onThreads = 0;
        ASSERT_TRUE(threaded->verifyChunks(4, 4, &onThreads));
        EXPECT_EQ(onThreads, chunks - (damage ? 1 : 0));
        const auto a = alone->damage(), b = threaded->damage();
        EXPECT_EQ(a.empty(), !damage);
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i) {
            EXPECT_EQ(a[i].what, b[i].what);
            EXPECT_EQ(a[i].events, b[i].events);
        }
        auto sa = alone->summary(), sb = threaded->summary();
        ASSERT_TRUE(sa && sb);
        EXPECT_EQ(sa->eventCount, sb->eventCount);
        // Too few chunks a thread: read here alone.
        auto few = openTrace(file);
        few->setSkipDamaged(true);
        ASSERT_TRUE(few->verifyChunks(4, chunks, &onThreads));
        EXPECT_EQ(onThreads, 0u);
        EXPECT_EQ(few->damage().size(), a.size());
    }
}

} // namespace
} // namespace poolscope
