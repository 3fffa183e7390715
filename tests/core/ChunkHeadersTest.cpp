// The chunk_headers table (schema.sql, issue #15): each chunk's prev_last_seq and crc copied out
// of event_chunks (where SQLite stores them after the data) and its events per kind. The header
// scan must give what reading event_chunks gives; kind filters and counts answered from the
// counts must equal decoding every chunk; rows that fail, are missing, or lie (a row_crc
// recomputed over a changed value) must be found and never change an answer.
//
// The traces here are hand-built (HandBuilt... in the test names): made-up events, not
// recordings.
#include "TestTraces.h"
#include "poolscope/Schema.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/view/EventFilter.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace poolscope {
namespace {

using view::EventFilter;

// Allocs and frees on a few streams, with rare kinds (a stream created every ~3,000 events, a
// trim every ~9,000) spread over the chunks, and a few failures.
std::vector<Event> handBuiltEvents(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<Event> out;
    out.reserve(n);
    uint64_t seq = 0, nextPtr = 0x7f4000000000;
    int64_t ts = 1'000'000'000;
    std::vector<uint64_t> live;
    while (out.size() < n) {
        Event e;
        e.seq = seq += 1 + rng() % 2;
        e.tsNs = ts += 50 + int64_t(rng() % 300);
        e.tid = 3;
        e.stream = 0x7f0000001000 + 0x1000 * (rng() % 4);
        e.pool = 0x55000000aa00;
        const uint64_t r = rng() % 3000;
        if (r == 0) {
            e.kind = EventKind::StreamCreate;
        } else if (r == 1 && rng() % 3 == 0) {
            e.kind = EventKind::PoolTrimTo;
            e.size = 1 << 20;
        } else if (r < 1500 || live.empty()) {
            e.kind = EventKind::Alloc;
            e.size = uint64_t{512} << (rng() % 10);
            if (rng() % 997 == 0) e.result = 2;
            else live.push_back(e.ptr = nextPtr += 0x10000);
        } else {
            e.kind = EventKind::Free;
            const size_t i = rng() % live.size();
            e.ptr = live[i];
            live[i] = live.back();
            live.pop_back();
        }
        out.push_back(e);
    }
    return out;
}

std::string writeTrace(const std::string& path, const std::vector<Event>& events,
                       bool headers = true) {
    WriterOptions o;
    o.wal = false;
    o.synchronousOff = true;
    o.chunkHeaders = headers;
    auto w = TraceWriter::create(path, o);
    EXPECT_TRUE(w) << (w ? "" : w.error().message);
    if (!w) return path;
    // Uneven commits, as the collector's writer makes: chunks closed early too.
    for (size_t i = 0; i < events.size();) {
        const size_t n = std::min(events.size() - i, size_t(3000 + i % 6000));
        EXPECT_TRUE((*w)->append(std::span<const Event>(events.data() + i, n)));
        EXPECT_TRUE((*w)->commit());
        i += n;
    }
    EXPECT_TRUE((*w)->close());
    return path;
}

std::unique_ptr<TraceReader> openTrace(const std::string& path, bool headers = true) {
    auto r = TraceReader::open(path);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    if (!r) return nullptr;
    (*r)->setUseChunkHeaders(headers);
    (*r)->setSkipDamaged(true);
    return std::move(*r);
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

// What a reader that ignores chunk_headers finds: the reference for every comparison.
struct Reference {
    std::vector<Event> all;
    uint64_t eventCount = 0;
    uint64_t lostEvents = 0;
};
Reference reference(const std::string& path) {
    Reference ref;
    auto r = openTrace(path, false);
    if (!r) return ref;
    auto all = r->events(INT64_MIN, INT64_MAX);
    EXPECT_TRUE(all) << (all ? "" : all.error().message);
    if (all) ref.all = *all;
    auto sum = r->summary();
    if (sum) ref.eventCount = sum->eventCount;
    for (const TraceDamage& d : r->damage()) ref.lostEvents += d.events;
    return ref;
}

std::vector<Event> filterRef(const Reference& ref, const EventFilter& f) {
    std::vector<Event> out;
    for (const Event& e : ref.all)
        if (f.matches(e)) out.push_back(e);
    return out;
}

// Filters that the kind counts can answer (kinds and time) and some they cannot.
std::vector<EventFilter> someFilters(const std::vector<Event>& ev, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<EventFilter> out;
    for (EventKind k : {EventKind::StreamCreate, EventKind::PoolTrimTo, EventKind::Alloc,
                        EventKind::Free, EventKind::ContextSynchronize}) {
        EventFilter f;
        f.kindMask = EventFilter::bit(k);
        out.push_back(f);
    }
    EventFilter both;
    both.kindMask = EventFilter::bit(EventKind::StreamCreate) | EventFilter::bit(EventKind::Free);
    out.push_back(both);
    out.push_back(EventFilter{});
    for (int i = 0; i < 8; ++i) {
        EventFilter f;
        if (i % 2) f.kindMask = EventFilter::bit(ev[rng() % ev.size()].kind);
        const int64_t a = ev[rng() % ev.size()].tsNs, b = ev[rng() % ev.size()].tsNs;
        f.t0 = std::min(a, b);
        f.t1 = std::max(a, b);
        if (i == 6) f.failedOnly = true;
        if (i == 7) f.stream = ev[0].stream;
        out.push_back(f);
    }
    return out;
}

// Every filtered read, count and page of `path` against the reference; returns the chunks
// answered by counts (to show that the counts were used).
uint64_t expectAnswersEqualReference(const std::string& path, const Reference& ref,
                                     const std::vector<Event>& ev) {
    uint64_t answered = 0;
    for (const EventFilter& f : someFilters(ev, 5)) {
        auto r = openTrace(path);
        const std::vector<Event> expected = filterRef(ref, f);
        FilteredReadStats stats;
        auto got = r->events(f, SIZE_MAX, nullptr, &stats);
        EXPECT_TRUE(got) << (got ? "" : got.error().message);
        if (got) {
            EXPECT_TRUE(sameEvents(*got, expected)) << got->size() << " vs " << expected.size();
        }
        FilteredReadStats countStats;
        auto n = r->countMatching(f, &countStats);
        EXPECT_TRUE(n);
        if (n) {
            EXPECT_EQ(*n, expected.size());
        }
        answered += countStats.answeredByCounts;
        // Pages: skip then cap, as a table that shows one page at a time asks.
        for (uint64_t skip : {uint64_t{0}, uint64_t{1}, uint64_t{37}, uint64_t(expected.size() / 2),
                              uint64_t(expected.size())}) {
            bool more = false;
            FilteredReadStats pageStats;
            auto page = r->events(f, 25, &more, &pageStats, skip);
            EXPECT_TRUE(page);
            if (!page) continue;
            const size_t from = size_t(std::min<uint64_t>(skip, expected.size()));
            const size_t to = std::min(expected.size(), from + 25);
            const std::vector<Event> want(expected.begin() + long(from),
                                          expected.begin() + long(to));
            EXPECT_TRUE(sameEvents(*page, want)) << "skip " << skip;
            EXPECT_EQ(more, to < expected.size()) << "skip " << skip;
            answered += pageStats.answeredByCounts;
        }
    }
    return answered;
}

TEST(ChunkHeaders, HandBuiltTraceGetsOneRowPerChunkThatCopiesItsColumns) {
    test::ScratchDir dir;
    const std::vector<Event> ev = handBuiltEvents(40000, 1);
    const std::string path = writeTrace(dir.file("t.poolscope"), ev);
    const uint64_t chunks = queryInt(path, "SELECT count(*) FROM event_chunks");
    ASSERT_GE(chunks, 10u);
    EXPECT_EQ(queryInt(path, "SELECT count(*) FROM chunk_headers h JOIN event_chunks c ON "
                             "h.chunk = c.id AND h.prev_last_seq = c.prev_last_seq AND "
                             "h.crc = c.crc"),
              chunks);
    // Each row's counts are its chunk's events per kind, and its row_crc the format's.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db,
                                 "SELECT c.first_seq,c.last_seq,c.prev_last_seq,c.t_min,c.t_max,"
                                 "c.count,c.kinds,c.codec,data,c.crc,kind_counts,row_crc FROM "
                                 "event_chunks c "
                                 "JOIN chunk_headers h ON h.chunk = c.id ORDER BY id",
                                 -1, &st, nullptr),
              SQLITE_OK);
    uint64_t rows = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        auto u = [&](int c) { return uint64_t(sqlite3_column_int64(st, c)); };
        const schema::ChunkHeader h{u(0), u(1), u(2), int64_t(u(3)), int64_t(u(4)), u(5), u(6),
                                    int64_t(u(7))};
        const std::string data(static_cast<const char*>(sqlite3_column_blob(st, 8)),
                               size_t(sqlite3_column_bytes(st, 8)));
        const std::string counts(static_cast<const char*>(sqlite3_column_blob(st, 10)),
                                 size_t(sqlite3_column_bytes(st, 10)));
        std::vector<Event> chunk;
        ASSERT_TRUE(decodeEvents(data, h.count, chunk, int(h.codec)));
        std::string expected;
        for (unsigned k = 0; k < 64; ++k) {
            if (!(h.kinds >> k & 1)) continue;
            const auto n = std::count_if(chunk.begin(), chunk.end(),
                                         [&](const Event& e) { return unsigned(e.kind) == k; });
            expected += char(n & 0xff);
            expected += char(n >> 8);
        }
        EXPECT_EQ(counts, expected) << "chunk row " << rows;
        EXPECT_EQ(u(11), schema::chunkHeaderRowChecksum(h, uint32_t(u(9)), data.size(), counts));
        ++rows;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    EXPECT_EQ(rows, chunks);
    auto r = openTrace(path);
    ASSERT_TRUE(r->verifyChunks());
    EXPECT_EQ(allDamage(*r), "");
}

TEST(ChunkHeaders, HandBuiltReadsWithTheTableEqualReadsWithoutIt) {
    test::ScratchDir dir;
    const std::vector<Event> ev = handBuiltEvents(60000, 2);
    const std::string path = writeTrace(dir.file("t.poolscope"), ev);
    const Reference ref = reference(path);
    ASSERT_EQ(ref.all.size(), ev.size());
    auto r = openTrace(path);
    auto sum = r->summary();
    ASSERT_TRUE(sum);
    EXPECT_EQ(sum->eventCount, ev.size());
    auto all = r->events(INT64_MIN, INT64_MAX);
    ASSERT_TRUE(all);
    EXPECT_TRUE(sameEvents(*all, ref.all));
    EXPECT_GT(expectAnswersEqualReference(path, ref, ev), 0u);
    EXPECT_EQ(allDamage(*r), "");
    // A trace written without the table reads the same, with no counts to answer from.
    const std::string old = writeTrace(dir.file("old.poolscope"), ev, false);
    EXPECT_EQ(queryInt(old, "SELECT count(*) FROM sqlite_master WHERE name='chunk_headers'"), 0u);
    EXPECT_EQ(expectAnswersEqualReference(old, reference(old), ev), 0u);
    EXPECT_EQ(allDamage(*openTrace(old)), "");
}

// Damage to the table as SQL: each case must be found (its words in damage()) and change no
// answer; the reference is the same file read without the table.
TEST(ChunkHeaders, HandBuiltDamagedOrLyingRowsAreFoundAndChangeNoAnswer) {
    test::ScratchDir dir;
    const std::vector<Event> ev = handBuiltEvents(50000, 3);
    const std::string base = writeTrace(dir.file("base.poolscope"), ev);
    struct Case {
        const char* name;
        std::string sql;
        bool forged;
        const char* found; // words damage() must hold (after a full read and a count)
    };
    const std::vector<Case> cases = {
        {"row_crc wrong", "UPDATE chunk_headers SET row_crc = row_crc + 1 WHERE chunk = 3", false,
         "do not match their event chunk"},
        {"crc wrong", "UPDATE chunk_headers SET crc = (crc | 1) - (crc & 1) WHERE chunk = 2", false,
         "do not match their event chunk"},
        {"counts not a blob", "UPDATE chunk_headers SET kind_counts = 7 WHERE chunk = 4", false,
         "do not match their event chunk"},
        {"row deleted", "DELETE FROM chunk_headers WHERE chunk = 5", false, "has no row for"},
        {"table emptied", "DELETE FROM chunk_headers", false, "has no row for"},
        {"column dropped", "ALTER TABLE chunk_headers DROP COLUMN kind_counts", false,
         "cannot be read"},
        {"crc rewritten", "UPDATE chunk_headers SET crc = (crc | 1) - (crc & 1) WHERE chunk = 2", true,
         "disagree with their event chunk"},
        {"prev_last_seq rewritten",
         "UPDATE chunk_headers SET prev_last_seq = prev_last_seq - 1 WHERE chunk = 6", true,
         "disagree with their event chunk"},
        // Two kinds' counts swapped within a chunk (their sum still the chunk's count).
        {"counts rewritten",
         "UPDATE chunk_headers SET kind_counts = CAST(substr(kind_counts,3,2) || "
         "substr(kind_counts,1,2) || substr(kind_counts,5) AS BLOB) WHERE chunk = 3",
         true, "do not add up to event_counts"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        const std::string path = dir.file(std::string(c.name) + ".poolscope");
        std::filesystem::copy_file(base, path, std::filesystem::copy_options::overwrite_existing);
        test::execSql(path, c.sql);
        if (c.forged) test::forgeChunkHeaders(path);
        const Reference ref = reference(path);
        ASSERT_EQ(ref.all.size(), ev.size()); // only the copy was touched
        EXPECT_EQ(ref.lostEvents, 0u);
        auto r = openTrace(path);
        auto sum = r->summary();
        ASSERT_TRUE(sum);
        EXPECT_EQ(sum->eventCount, ref.eventCount);
        auto all = r->events(INT64_MIN, INT64_MAX);
        ASSERT_TRUE(all);
        EXPECT_TRUE(sameEvents(*all, ref.all));
        expectAnswersEqualReference(path, ref, ev);
        const std::string damage = allDamage(*r);
        EXPECT_NE(damage.find(c.found), std::string::npos) << damage;
        uint64_t lost = 0;
        for (const TraceDamage& d : r->damage()) lost += d.events;
        EXPECT_EQ(lost, 0u) << damage;
        // Strict readers read it too: a lie in the copy is never a damaged chunk.
        auto strict = TraceReader::open(path);
        ASSERT_TRUE(strict);
        EXPECT_TRUE((*strict)->events(INT64_MIN, INT64_MAX)) << allDamage(**strict);
    }
}

// Damage to event_chunks itself where the copy still holds the written values: the chunk's own
// columns are read with its data and decide, so the damage is found as without the table.
TEST(ChunkHeaders, HandBuiltDamagedChunkColumnsAreFoundWhenTheirDataIsRead) {
    test::ScratchDir dir;
    const std::vector<Event> ev = handBuiltEvents(30000, 4);
    const std::string base = writeTrace(dir.file("base.poolscope"), ev);
    for (const char* sql : {"UPDATE event_chunks SET crc = (crc | 1) - (crc & 1) WHERE id = 2",
                            "UPDATE event_chunks SET crc = -1 WHERE id = 2",
                            "UPDATE event_chunks SET prev_last_seq = prev_last_seq + 1 WHERE id = 2",
                            "UPDATE event_chunks SET t_max = t_max + 1 WHERE id = 2",
                            "DELETE FROM event_chunks WHERE id = 2"}) {
        SCOPED_TRACE(sql);
        const std::string path = dir.file("d.poolscope");
        std::filesystem::copy_file(base, path, std::filesystem::copy_options::overwrite_existing);
        test::execSql(path, sql);
        const Reference ref = reference(path);
        auto r = openTrace(path);
        ASSERT_TRUE(r->verifyChunks());
        auto all = r->events(INT64_MIN, INT64_MAX);
        ASSERT_TRUE(all);
        EXPECT_TRUE(sameEvents(*all, ref.all)) << all->size() << " vs " << ref.all.size();
        EXPECT_LT(ref.all.size(), ev.size());
        uint64_t lost = 0;
        for (const TraceDamage& d : r->damage()) lost += d.events;
        EXPECT_EQ(lost, ref.lostEvents) << allDamage(*r);
        expectAnswersEqualReference(path, ref, ev);
        // A strict reader refuses it, as it refuses it without the table.
        auto strict = TraceReader::open(path);
        ASSERT_TRUE(strict);
        auto events = (*strict)->events(INT64_MIN, INT64_MAX);
        ASSERT_FALSE(events);
        EXPECT_EQ(events.error().code, ErrorCode::Corrupt);
    }
}


// setReuseHeaderScan (the window's load: one scan for the summaries, the build's counts and its
// read) gives what a reader that scans before every read gives, damaged traces included: the
// summary, the chunks' count, every event, the damage found and the timeline built.
TEST(ChunkHeaders, HandBuiltReadsReusingOneScanEqualReadsScanningEachTime) {
    test::ScratchDir dir;
    const std::vector<Event> ev = handBuiltEvents(40000, 6);
    const std::string base = writeTrace(dir.file("base.poolscope"), ev);
    for (const char* sql : {"",
                            // A lie in the copy, found when the chunk is read: a rescan after.
                            "UPDATE chunk_headers SET crc = (crc | 1) - (crc & 1) WHERE chunk = 2",
                            "UPDATE event_chunks SET crc = (crc | 1) - (crc & 1) WHERE id = 3",
                            "DELETE FROM event_chunks WHERE id = 4"}) {
        SCOPED_TRACE(sql);
        const std::string path = dir.file("r.poolscope");
        std::filesystem::copy_file(base, path, std::filesystem::copy_options::overwrite_existing);
        if (*sql) test::execSql(path, sql);
        auto reading = [&](bool reuse) {
            auto r = openTrace(path);
            r->setReuseHeaderScan(reuse);
            std::string out;
            auto sum = r->summary();
            EXPECT_TRUE(sum);
            if (sum)
                out += std::to_string(sum->eventCount) + " " + std::to_string(sum->firstTsNs) +
                       " " + std::to_string(sum->lastTsNs) + "\n";
            out += std::to_string(r->chunkedEventCount()) + "\n";
            auto all = r->events(INT64_MIN, INT64_MAX);
            EXPECT_TRUE(all);
            if (all) out += std::to_string(all->size()) + "\n";
            auto tl = buildTimeline(*r, BuildOptions{});
            EXPECT_TRUE(tl);
            if (tl)
                out += std::to_string((*tl)->eventCount) + " " +
                       std::to_string((*tl)->allocations.size()) + " " +
                       std::to_string((*tl)->failed.size()) + "\n";
            if (auto again = r->summary()) out += std::to_string(again->eventCount) + "\n";
            return out + allDamage(*r);
        };
        const std::string scanning = reading(false), reusing = reading(true);
        EXPECT_EQ(reusing, scanning);
    }
}

} // namespace
} // namespace poolscope
