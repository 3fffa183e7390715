// Events-table filters answered without decoding chunks that cannot match (issue #15): the
// chunk_index table TraceWriter writes, EventFilter::mayMatch over a chunk's header and index
// row, and TraceReader's filtered reads, which must give exactly what decoding every chunk and
// testing every event gives, on intact, old and damaged traces.
//
// The traces here are hand-built (HandBuilt... in the test names): events made up to give the
// index something to tell apart (streams, pools, sizes, failures and rare kinds in phases), not
// recordings.
#include "TestTraces.h"
#include "poolscope/Schema.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/view/EventFilter.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace poolscope {
namespace {

using view::ChunkFacts;
using view::ChunkIndexRow;
using view::EventFilter;

constexpr uint64_t kStreams[] = {0, 0x7f0000001000, 0x7f0000002000, 0x7f0000003000,
                                 0x7f0000004000, 0x7f0000005000, 0x7f0000006000, 0x7f0000007000};
constexpr uint64_t kPools[] = {0x55000000aa00, 0x55000000bb00, 0x55000000cc00, 0};
constexpr uint64_t kGiB = uint64_t{1} << 30;

// Hand-built events in phases of ~3,000 events (so a chunk of 4,096 sees one or two phases):
// each phase uses two streams and one pool; one phase has failed allocations, one a 1 GiB
// allocation, one a trim (a rare kind). Frees follow their allocations on the same stream.
std::vector<Event> handBuiltEvents(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<Event> out;
    out.reserve(n);
    uint64_t seq = 0;
    int64_t ts = 1'000'000'000;
    std::vector<std::pair<uint64_t, uint64_t>> live; // ptr, size
    uint64_t nextPtr = 0x7f4000000000;
    const size_t phaseLen = 3000;
    while (out.size() < n) {
        const size_t phase = out.size() / phaseLen;
        const uint64_t s1 = kStreams[1 + phase % 7], s2 = kStreams[1 + (phase * 3 + 1) % 7];
        const uint64_t pool = kPools[phase % 3];
        Event e;
        e.seq = seq += 1 + rng() % 3; // gaps, as samples and drops leave
        e.tsNs = ts += 100 + int64_t(rng() % 500);
        e.device = 0;
        e.tid = 7;
        const uint64_t r = rng() % 100;
        if (r < 48 || live.empty()) {
            e.kind = EventKind::Alloc;
            e.stream = rng() % 2 ? s1 : s2;
            e.pool = pool;
            e.size = uint64_t{256} << (rng() % 12);
            if (phase == 5 && rng() % 8 == 0) e.size = kGiB;
            if (phase == 3 && rng() % 5 == 0) {
                e.result = 2; // out of memory: no pointer
            } else {
                e.ptr = nextPtr += 0x100000;
                live.emplace_back(e.ptr, e.size);
            }
        } else if (r < 96) {
            const size_t i = rng() % live.size();
            e.kind = EventKind::Free;
            e.stream = rng() % 2 ? s1 : s2;
            e.pool = pool;
            e.ptr = live[i].first;
            e.size = live[i].second;
            e.flags = kSizeKnown;
            live[i] = live.back();
            live.pop_back();
        } else if (r < 99) {
            e.kind = EventKind::StreamSynchronize;
            e.stream = s1;
        } else if (phase == 7 && rng() % 4 == 0) {
            e.kind = EventKind::PoolTrimTo;
            e.pool = pool;
            e.size = 4 * kGiB; // a target, not a block: a size filter must not see it
        } else {
            e.kind = EventKind::ImplicitRelease;
            e.pool = pool;
            e.size = 64 << 20;
        }
        out.push_back(e);
    }
    return out;
}

std::string writeTrace(const std::string& path, const std::vector<Event>& events,
                       bool compress = true) {
    WriterOptions o;
    o.wal = false;
    o.synchronousOff = true;
    o.compressEvents = compress;
    auto w = TraceWriter::create(path, o);
    EXPECT_TRUE(w) << (w ? "" : w.error().message);
    if (!w) return path;
    // Commits in uneven slices, as the collector's writer does: chunks closed early too.
    for (size_t i = 0; i < events.size();) {
        const size_t n = std::min(events.size() - i, size_t(5000 + i % 7000));
        EXPECT_TRUE((*w)->append(std::span<const Event>(events.data() + i, n)));
        EXPECT_TRUE((*w)->commit());
        i += n;
    }
    EXPECT_TRUE((*w)->close());
    return path;
}

std::unique_ptr<TraceReader> openTrace(const std::string& path) {
    auto r = TraceReader::open(path);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? std::move(*r) : nullptr;
}

// The reference: every chunk decoded, every event tested.
std::vector<Event> decodeAllAndFilter(const TraceReader& r, const EventFilter& f) {
    auto all = r.events(INT64_MIN, INT64_MAX);
    EXPECT_TRUE(all) << (all ? "" : all.error().message);
    std::vector<Event> out;
    if (all)
        for (const Event& e : *all)
            if (f.matches(e)) out.push_back(e);
    return out;
}

bool sameEvents(const std::vector<Event>& a, const std::vector<Event>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::memcmp(&a[i], &b[i], sizeof(Event)) != 0) return false;
    return true;
}

// A filter drawn from what the events hold (and sometimes from what they do not).
EventFilter randomFilter(std::mt19937_64& rng, const std::vector<Event>& ev) {
    EventFilter f;
    const Event& pick = ev[rng() % ev.size()];
    if (rng() % 3 == 0) f.kindMask = EventFilter::bit(pick.kind);
    if (rng() % 5 == 0) f.kindMask = uint32_t(rng());
    if (rng() % 4 == 0) f.failedOnly = true;
    if (rng() % 3 == 0) f.stream = rng() % 6 ? pick.stream : rng();
    if (rng() % 3 == 0) f.pool = rng() % 6 ? pick.pool : rng();
    if (rng() % 3 == 0) {
        const uint64_t s = ev[rng() % ev.size()].size;
        switch (rng() % 4) {
        case 0: f.minSize = s; break;
        case 1: f.maxSize = s; break;
        case 2: f.minSize = f.maxSize = s; break;
        default: f.minSize = s, f.maxSize = s / 2; // empty
        }
    }
    if (rng() % 3 == 0) {
        const int64_t a = ev[rng() % ev.size()].tsNs, b = ev[rng() % ev.size()].tsNs;
        f.t0 = std::min(a, b);
        f.t1 = std::max(a, b) + int64_t(rng() % 2);
    }
    return f;
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

std::string allDamage(const TraceReader& r) {
    std::string s;
    for (const TraceDamage& d : r.damage()) s += d.what + "\n";
    return s;
}

// ---- the predicate ----------------------------------------------------------------------------

TEST(ChunkIndexPredicate, HandBuiltChunksWithAMatchingEventAreNeverExcluded) {
    std::mt19937_64 rng(7);
    const std::vector<Event> ev = handBuiltEvents(60000, 3);
    uint64_t excluded = 0, trials = 0;
    for (int t = 0; t < 3000; ++t) {
        // A "chunk" of 1..300 consecutive events and the facts the writer would keep for it.
        const size_t at = rng() % ev.size(), len = 1 + rng() % 300;
        const std::vector<Event> chunk(ev.begin() + long(at),
                                       ev.begin() + long(std::min(ev.size(), at + len)));
        ChunkIndexRow row;
        ChunkFacts facts{INT64_MAX, INT64_MIN, 0, &row};
        for (const Event& e : chunk) {
            row.add(e);
            facts.tMin = std::min(facts.tMin, e.tsNs);
            facts.tMax = std::max(facts.tMax, e.tsNs);
            facts.kinds |= uint64_t{1} << unsigned(e.kind);
        }
        for (int k = 0; k < 20; ++k, ++trials) {
            const EventFilter f = randomFilter(rng, ev);
            const bool any = std::any_of(chunk.begin(), chunk.end(),
                                         [&](const Event& e) { return f.matches(e); });
            const bool may = f.mayMatch(facts);
            ASSERT_TRUE(may || !any) << "trial " << t << "." << k;
            // Without the row only time and kinds can exclude; never more than with it.
            ChunkFacts bare = facts;
            bare.index = nullptr;
            ASSERT_TRUE(f.mayMatch(bare) || !may);
            excluded += !may;
        }
    }
    // The predicate must also exclude: a "true" everywhere would pass the test above.
    EXPECT_GT(excluded, trials / 5) << excluded << " of " << trials;
}

TEST(ChunkIndexPredicate, HandBuiltEventsEachFieldExcludesOnItsOwn) {
    ChunkIndexRow row;
    Event a;
    a.kind = EventKind::Alloc;
    a.stream = kStreams[1];
    a.pool = kPools[0];
    a.size = 4096;
    row.add(a);
    Event trim;
    trim.kind = EventKind::PoolTrimTo;
    trim.pool = kPools[0];
    trim.size = 10 * kGiB; // not a block size: the index keeps alloc/free sizes only
    row.add(trim);
    const uint64_t kinds = (uint64_t{1} << unsigned(EventKind::Alloc)) |
                           (uint64_t{1} << unsigned(EventKind::PoolTrimTo));
    const ChunkFacts facts{100, 200, kinds, &row};
    EventFilter f;
    EXPECT_TRUE(f.mayMatch(facts));
    f.failedOnly = true;
    EXPECT_FALSE(f.mayMatch(facts));
    f = {};
    f.stream = kStreams[1];
    EXPECT_TRUE(f.mayMatch(facts));
    f.stream = kStreams[2];
    EXPECT_FALSE(f.mayMatch(facts)); // (these two handles' bits differ)
    f = {};
    f.pool = kPools[1];
    EXPECT_FALSE(f.mayMatch(facts));
    f = {};
    f.minSize = 8192;
    EXPECT_FALSE(f.mayMatch(facts)); // the trim's 10 GiB is no block
    f.minSize = 4096;
    EXPECT_TRUE(f.mayMatch(facts));
    f = {};
    f.kindMask = EventFilter::bit(EventKind::Free);
    EXPECT_FALSE(f.mayMatch(facts));
    f = {};
    f.t0 = 201;
    EXPECT_FALSE(f.mayMatch(facts));
    f.t0 = 200;
    EXPECT_TRUE(f.mayMatch(facts));
    f = {};
    f.t1 = 100;
    EXPECT_FALSE(f.mayMatch(facts));
}

// ---- the writer -------------------------------------------------------------------------------

TEST(ChunkIndex, HandBuiltTraceGetsOneValidRowPerChunk) {
    test::ScratchDir dir;
    const std::vector<Event> ev = handBuiltEvents(50000, 1);
    const std::string path = writeTrace(dir.file("t.poolscope"), ev);
    const uint64_t chunks = queryInt(path, "SELECT count(*) FROM event_chunks");
    ASSERT_GE(chunks, 13u);
    EXPECT_EQ(queryInt(path, "SELECT count(*) FROM chunk_index"), chunks);
    EXPECT_EQ(queryInt(path, "SELECT count(*) FROM chunk_index JOIN event_chunks ON chunk = id"),
              chunks);
    // Each row is what its chunk's events give, and its checksum is the one the format defines.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db,
                                 "SELECT first_seq,last_seq,prev_last_seq,t_min,t_max,count,kinds,"
                                 "codec,data,event_chunks.crc,streams,pools,failed,size_min,"
                                 "size_max,chunk_index.crc FROM event_chunks JOIN chunk_index ON "
                                 "chunk = id ORDER BY id",
                                 -1, &st, nullptr),
              SQLITE_OK);
    uint64_t rows = 0, failedSeen = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        auto u = [&](int c) { return uint64_t(sqlite3_column_int64(st, c)); };
        schema::ChunkHeader h{u(0), u(1), u(2), int64_t(u(3)), int64_t(u(4)), u(5), u(6),
                              int64_t(u(7))};
        std::string data(static_cast<const char*>(sqlite3_column_blob(st, 8)),
                         size_t(sqlite3_column_bytes(st, 8)));
        std::vector<Event> chunk;
        ASSERT_TRUE(decodeEvents(data, h.count, chunk, int(h.codec)));
        ChunkIndexRow expected;
        for (const Event& e : chunk) expected.add(e);
        const ChunkIndexRow stored{u(10), u(11), u(12), u(13), u(14)};
        EXPECT_EQ(stored, expected) << "row " << rows;
        EXPECT_EQ(u(15), schema::chunkIndexChecksum(h, uint32_t(u(9)), stored));
        failedSeen += stored.failed;
        ++rows;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    EXPECT_EQ(rows, chunks);
    EXPECT_EQ(failedSeen, uint64_t(std::count_if(ev.begin(), ev.end(),
                                                 [](const Event& e) { return e.result != 0; })));
    auto r = openTrace(path);
    ASSERT_TRUE(r->verifyChunks());
    EXPECT_EQ(allDamage(*r), "");
}

// ---- filtered reads -----------------------------------------------------------------------------

TEST(ChunkIndex, HandBuiltFilteredReadsEqualDecodingEverything) {
    test::ScratchDir dir;
    const std::vector<Event> ev = handBuiltEvents(70000, 2);
    for (bool compress : {true, false}) {
        const std::string path =
            writeTrace(dir.file(compress ? "z.poolscope" : "plain.poolscope"), ev, compress);
        auto r = openTrace(path);
        auto all = r->events(INT64_MIN, INT64_MAX);
        ASSERT_TRUE(all);
        ASSERT_EQ(all->size(), ev.size());
        std::mt19937_64 rng(compress ? 11 : 12);
        FilteredReadStats stats;
        uint64_t nonEmpty = 0;
        for (int t = 0; t < 150; ++t) {
            const EventFilter f = randomFilter(rng, ev);
            std::vector<Event> expected;
            for (const Event& e : *all)
                if (f.matches(e)) expected.push_back(e);
            auto got = r->events(f, SIZE_MAX, nullptr, &stats);
            ASSERT_TRUE(got) << got.error().message;
            ASSERT_TRUE(sameEvents(*got, expected))
                << "filter " << t << ": " << got->size() << " events, expected "
                << expected.size();
            nonEmpty += !expected.empty();
            // The cap keeps the first events, and says that there were more.
            bool truncated = false;
            auto capped = r->events(f, 10, &truncated);
            ASSERT_TRUE(capped);
            ASSERT_EQ(truncated, expected.size() > 10);
            ASSERT_TRUE(sameEvents(*capped, std::vector<Event>(expected.begin(),
                                                               expected.begin() +
                                                                   long(std::min<size_t>(10, expected.size())))));
        }
        EXPECT_GT(nonEmpty, 40u);
        // Over 150 filters, many chunks were passed over without decoding.
        EXPECT_GT(stats.skippedByIndex, stats.chunks / 4);
        EXPECT_EQ(stats.chunks, stats.decoded + stats.skippedByIndex + stats.skippedByKinds);
        EXPECT_EQ(allDamage(*r), "");
    }
}

TEST(ChunkIndex, HandBuiltSelectiveFiltersDecodeFewerChunks) {
    test::ScratchDir dir;
    const std::vector<Event> ev = handBuiltEvents(60000, 4);
    const std::string path = writeTrace(dir.file("t.poolscope"), ev);
    auto r = openTrace(path);
    const uint64_t chunks = queryInt(path, "SELECT count(*) FROM event_chunks");
    auto run = [&](const EventFilter& f, bool index) {
        r->setUseChunkIndex(index);
        FilteredReadStats s;
        auto got = r->events(f, SIZE_MAX, nullptr, &s);
        EXPECT_TRUE(got);
        EXPECT_TRUE(got && sameEvents(*got, decodeAllAndFilter(*r, f)));
        EXPECT_EQ(s.chunks, chunks);
        return s;
    };
    EventFilter failed;
    failed.failedOnly = true; // phase 3 only: events 9,000..12,000, one or two chunks
    FilteredReadStats s = run(failed, true);
    EXPECT_LE(s.decoded, 2u);
    EXPECT_EQ(s.skippedByIndex, chunks - s.decoded);
    s = run(failed, false); // the same answer, every chunk decoded
    EXPECT_EQ(s.decoded, chunks);

    EventFilter big;
    big.minSize = kGiB; // phase 5 only
    EXPECT_LE(run(big, true).decoded, 2u);

    EventFilter pool;
    pool.pool = kPools[2]; // one phase in three (and its neighbours' chunks)
    s = run(pool, true);
    EXPECT_LT(s.decoded, chunks * 3 / 4);
    EXPECT_GT(s.decoded, 0u);

    EventFilter stream;
    stream.stream = kStreams[4]; // two phases in seven
    s = run(stream, true);
    EXPECT_LT(s.decoded, chunks * 3 / 4);

    // A rare kind: the header's kinds alone (its checksum read, the events not decoded).
    EventFilter trim;
    trim.kindMask = EventFilter::bit(EventKind::PoolTrimTo); // phase 7 only
    s = run(trim, false);
    EXPECT_LE(s.decoded, 2u);
    EXPECT_EQ(s.skippedByKinds, chunks - s.decoded);
    s = run(trim, true);
    EXPECT_LE(s.decoded, 2u);
    EXPECT_EQ(s.skippedByIndex, chunks - s.decoded);

    // Nothing selective: everything decoded.
    EXPECT_EQ(run(EventFilter{}, true).decoded, chunks);
}

TEST(ChunkIndex, HandBuiltTraceWithoutTheTableStillAnswers) {
    test::ScratchDir dir;
    const std::vector<Event> ev = handBuiltEvents(30000, 5);
    const std::string path = writeTrace(dir.file("t.poolscope"), ev);
    test::execSql(path, "DROP TABLE chunk_index"); // as a trace written before the table
    auto r = openTrace(path);
    std::mt19937_64 rng(5);
    FilteredReadStats stats;
    for (int t = 0; t < 60; ++t) {
        const EventFilter f = randomFilter(rng, ev);
        auto got = r->events(f, SIZE_MAX, nullptr, &stats);
        ASSERT_TRUE(got);
        ASSERT_TRUE(sameEvents(*got, decodeAllAndFilter(*r, f))) << "filter " << t;
    }
    EventFilter trim;
    trim.kindMask = EventFilter::bit(EventKind::PoolTrimTo); // phase 7 only
    auto got = r->events(trim, SIZE_MAX, nullptr, &stats);
    ASSERT_TRUE(got);
    EXPECT_TRUE(sameEvents(*got, decodeAllAndFilter(*r, trim)));
    EXPECT_FALSE(got->empty());
    EXPECT_EQ(stats.skippedByIndex, 0u);
    EXPECT_GT(stats.skippedByKinds, 0u); // kinds still pass chunks over
    ASSERT_TRUE(r->verifyChunks());
    EXPECT_EQ(allDamage(*r), ""); // no table is no damage
}

TEST(ChunkIndex, BundledSamplesOfOlderFormatsAnswerAsDecoding) {
    for (const char* name : {"churn", "pools", "trims_oom", "beyond_pool"}) {
        auto r = openTrace(std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope");
        ASSERT_TRUE(r);
        auto all = r->events(INT64_MIN, INT64_MAX);
        ASSERT_TRUE(all);
        std::mt19937_64 rng(9);
        for (int t = 0; t < 40; ++t) {
            const EventFilter f = randomFilter(rng, *all);
            auto got = r->events(f);
            ASSERT_TRUE(got) << name;
            ASSERT_TRUE(sameEvents(*got, decodeAllAndFilter(*r, f))) << name << " filter " << t;
        }
    }
}

// ---- rows that lie --------------------------------------------------------------------------------

class LyingIndex : public ::testing::Test {
protected:
    void SetUp() override {
        ev_ = handBuiltEvents(40000, 6);
        path_ = writeTrace(dir_.file("t.poolscope"), ev_);
        chunks_ = queryInt(path_, "SELECT count(*) FROM event_chunks");
        // The chunk that holds the failed allocations (phase 3).
        failedChunk_ = queryInt(path_, "SELECT min(chunk) FROM chunk_index WHERE failed > 0");
        ASSERT_NE(failedChunk_, ~uint64_t{0});
    }
    // Filters that the lies below would answer wrongly if the rows were believed.
    std::vector<EventFilter> filters() const {
        std::vector<EventFilter> fs(6);
        fs[0].failedOnly = true;
        fs[1].stream = kStreams[4];
        fs[2].pool = kPools[1];
        fs[3].minSize = kGiB;
        fs[4].kindMask = EventFilter::bit(EventKind::Alloc);
        fs[4].failedOnly = true;
        fs[5].stream = kStreams[1];
        fs[5].pool = kPools[0];
        return fs;
    }
    void expectRightAnswers(const std::string& damageSays) {
        auto r = openTrace(path_);
        ASSERT_TRUE(r);
        for (const EventFilter& f : filters()) {
            auto got = r->events(f);
            ASSERT_TRUE(got) << got.error().message;
            const auto expected = decodeAllAndFilter(*r, f);
            EXPECT_TRUE(sameEvents(*got, expected))
                << damageSays << ": " << got->size() << " events, expected " << expected.size();
        }
        const std::string d = allDamage(*r);
        EXPECT_NE(d.find(damageSays), std::string::npos) << d;
    }
    test::ScratchDir dir_;
    std::vector<Event> ev_;
    std::string path_;
    uint64_t chunks_ = 0, failedChunk_ = 0;
};

TEST_F(LyingIndex, HandBuiltRowsClaimingNoFailuresAreNotBelieved) {
    test::execSql(path_, "UPDATE chunk_index SET failed = 0");
    expectRightAnswers("do not match their event chunk (their checksum fails)");
}

TEST_F(LyingIndex, HandBuiltRowsWithWrongBloomsOrSizesAreNotBelieved) {
    test::execSql(path_, "UPDATE chunk_index SET streams = 0 WHERE chunk % 2 = 0;"
                         "UPDATE chunk_index SET pools = 1, size_max = 0 WHERE chunk % 2 = 1");
    expectRightAnswers("do not match their event chunk (their checksum fails)");
}

TEST_F(LyingIndex, HandBuiltRowsOfTextOrOutOfRangeChecksumsAreNotBelieved) {
    test::execSql(path_, "UPDATE chunk_index SET failed = 'none' WHERE chunk % 3 = 0;"
                         "UPDATE chunk_index SET crc = crc + 4294967296 WHERE chunk % 3 = 1;"
                         "UPDATE chunk_index SET crc = -1 WHERE chunk % 3 = 2");
    expectRightAnswers("do not match their event chunk");
}

TEST_F(LyingIndex, HandBuiltMissingRowsMeanDecoding) {
    test::execSql(path_, "DELETE FROM chunk_index WHERE chunk = " + std::to_string(failedChunk_));
    expectRightAnswers("chunk_index has no row for 1 event chunk(s)");
}

TEST_F(LyingIndex, HandBuiltDuplicatedRowsMeanDecoding) {
    // A table rebuilt without its key: each chunk listed twice, once with a lie.
    test::execSql(path_, "CREATE TABLE c2 AS SELECT * FROM chunk_index; DROP TABLE chunk_index;"
                         "CREATE TABLE chunk_index AS SELECT * FROM c2;"
                         "INSERT INTO chunk_index SELECT chunk, 0, 0, 0, 0, 0, crc FROM c2;"
                         "DROP TABLE c2");
    expectRightAnswers("more than once");
}

TEST_F(LyingIndex, HandBuiltRowsOfAChangedChunkHeaderAreNotBelieved) {
    // The chunk's header moved (its crc column kept): the row no longer matches it, and the
    // chunk's own checksum fails when it is read. Only the chunk's damage is reported.
    test::execSql(path_, "UPDATE event_chunks SET t_max = t_max + 1 WHERE id = " +
                             std::to_string(failedChunk_));
    auto r = openTrace(path_);
    r->setSkipDamaged(true);
    EventFilter f;
    f.failedOnly = true;
    FilteredReadStats s;
    auto got = r->events(f, SIZE_MAX, nullptr, &s);
    ASSERT_TRUE(got);
    EXPECT_TRUE(sameEvents(*got, decodeAllAndFilter(*r, f)));
    EXPECT_GE(s.decoded, 1u);
    const std::string d = allDamage(*r);
    EXPECT_NE(d.find("checksum mismatch"), std::string::npos) << d;
    EXPECT_EQ(d.find("chunk_index"), std::string::npos) << d;
}

TEST_F(LyingIndex, HandBuiltDamagedTableIsReportedByVerify) {
    test::execSql(path_, "UPDATE chunk_index SET size_min = size_min + 1");
    auto r = openTrace(path_);
    ASSERT_TRUE(r->verifyChunks()); // what `info` runs
    const std::string d = allDamage(*r);
    EXPECT_NE(d.find("chunk_index: " + std::to_string(chunks_) + " row(s) (e.g. event chunk 1) "
                     "do not match"),
              std::string::npos)
        << d;
    for (const TraceDamage& x : r->damage()) EXPECT_EQ(x.events, 0u) << x.what; // lossless
}

TEST_F(LyingIndex, HandBuiltUnreadableTableMeansDecoding) {
    test::execSql(path_, "ALTER TABLE chunk_index DROP COLUMN size_max");
    expectRightAnswers("the chunk_index table cannot be read");
}

// A checksum finds damage, not a forger: a row rewritten with its checksum recomputed is
// believed where it lets a chunk be passed over (as a chunk rewritten past its crc is read). Once
// a read decodes that chunk, the lie is found and reported.
TEST_F(LyingIndex, HandBuiltForgedRowIsReportedOnceItsChunkIsDecoded) {
    {
        auto r = openTrace(path_);
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
        sqlite3_stmt* st = nullptr;
        ASSERT_EQ(sqlite3_prepare_v2(db,
                                     "SELECT first_seq,last_seq,prev_last_seq,t_min,t_max,count,"
                                     "kinds,codec,event_chunks.crc,streams,pools,size_min,"
                                     "size_max FROM event_chunks JOIN chunk_index ON chunk = id "
                                     "WHERE id = ?",
                                     -1, &st, nullptr),
                  SQLITE_OK);
        sqlite3_bind_int64(st, 1, int64_t(failedChunk_));
        ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
        auto u = [&](int c) { return uint64_t(sqlite3_column_int64(st, c)); };
        const schema::ChunkHeader h{u(0), u(1), u(2), int64_t(u(3)), int64_t(u(4)), u(5), u(6),
                                    int64_t(u(7))};
        const ChunkIndexRow forged{u(9), u(10), 0, u(11), u(12)}; // "no failed events"
        const uint32_t crc = schema::chunkIndexChecksum(h, uint32_t(u(8)), forged);
        sqlite3_finalize(st);
        sqlite3_close(db);
        test::execSql(path_, "UPDATE chunk_index SET failed = 0, crc = " + std::to_string(crc) +
                                 " WHERE chunk = " + std::to_string(failedChunk_));
    }
    auto r = openTrace(path_);
    EventFilter all;
    ASSERT_TRUE(r->events(all)); // decodes every chunk
    const std::string d = allDamage(*r);
    EXPECT_NE(d.find("pass their checksum but do not describe their chunk's events"),
              std::string::npos)
        << d;
}

// Data damage under a row that holds: the row still vouches for the chunk as written, so a
// filter passing over it loses nothing; one that decodes it finds the damage.
TEST_F(LyingIndex, HandBuiltDamagedChunkDataUnderAnIntactRow) {
    test::execSql(path_, "UPDATE event_chunks SET data = CAST(substr(data,1,length(data)-3) AS "
                         "BLOB) WHERE id = " + std::to_string(failedChunk_));
    auto r = openTrace(path_);
    r->setSkipDamaged(true);
    std::mt19937_64 rng(13);
    for (int t = 0; t < 60; ++t) {
        const EventFilter f = randomFilter(rng, ev_);
        auto got = r->events(f);
        ASSERT_TRUE(got);
        ASSERT_TRUE(sameEvents(*got, decodeAllAndFilter(*r, f))) << "filter " << t;
    }
}

} // namespace
} // namespace poolscope
