// Per-chunk pool summaries (issue #15): what the writer stores in pool_chunk_summary against the
// events it wrote, the overview pyramid built from them against the decoded events, damaged and
// lying rows, and traces written before the table. The samples are recordings; every trace
// named HandBuilt... (and the random one) is made here through TraceWriter, not recorded.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "TestTraces.h"
#include "poolscope/PoolSummary.h"
#include "poolscope/Report.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/Units.h"
#include "poolscope/view/Overview.h"

namespace poolscope {
namespace {

using test::execSql;

constexpr uint64_t kPoolA = 0xa000, kPoolB = 0xb000, kStream = 0x10;

std::string sample(const char* name) {
    return std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope";
}

std::unique_ptr<TraceReader> openOk(const std::string& path) {
    auto r = TraceReader::open(path);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? std::move(*r) : nullptr;
}

std::string summaryDamage(const TraceReader& r) {
    std::string s;
    for (const TraceDamage& d : r.tableDamage())
        if (d.what.find("pool_chunk_summary") != std::string::npos) s += d.what + "\n";
    return s;
}

// Every chunk's events, decoded, in seq order.
std::vector<std::vector<Event>> decodedChunks(const TraceReader& r) {
    std::vector<std::vector<Event>> out;
    Status st = r.forEachChunk([&](std::vector<Event>& c) {
        out.push_back(c);
        return true;
    });
    EXPECT_TRUE(st) << st.error().message;
    return out;
}

// What the rows must be, computed from a chunk's decoded events.
std::map<uint64_t, PoolChunkSummary> expectedRows(const std::vector<Event>& chunk) {
    std::map<uint64_t, PoolChunkSummary> m;
    for (const Event& e : chunk) {
        if (!e.has(kHasWatermarks) || e.pool == 0) continue;
        auto [it, fresh] = m.try_emplace(e.pool);
        PoolChunkSummary& s = it->second;
        if (fresh) {
            s.pool = e.pool;
            s.tMin = s.tMax = e.tsNs;
            s.reservedMin = s.reservedMax = e.reserved;
            s.usedMin = s.usedMax = e.used;
        }
        s.tMin = std::min(s.tMin, e.tsNs);
        s.tMax = std::max(s.tMax, e.tsNs);
        s.reservedMin = std::min(s.reservedMin, e.reserved);
        s.reservedMax = std::max(s.reservedMax, e.reserved);
        s.usedMin = std::min(s.usedMin, e.used);
        s.usedMax = std::max(s.usedMax, e.used);
        s.reservedLast = e.reserved;
        s.usedLast = e.used;
    }
    return m;
}

// The rows the reader gives, against the decoded chunks; returns how many rows were compared.
size_t expectRowsMatchEvents(const TraceReader& r) {
    auto sums = r.poolSummaries();
    EXPECT_TRUE(sums) << sums.error().message;
    if (!sums) return 0;
    EXPECT_TRUE(sums->present);
    EXPECT_EQ(sums->chunksWithout, 0u);
    const auto chunks = decodedChunks(r);
    EXPECT_EQ(sums->chunks, chunks.size());
    size_t compared = 0;
    int64_t chunkId = -1;
    size_t chunkIndex = 0;
    std::map<uint64_t, PoolChunkSummary> want;
    // Rows are in chunk seq order: walk the chunks alongside, skipping those without watermarks.
    for (const PoolChunkSummary& row : sums->rows) {
        if (row.chunk != chunkId) {
            if (chunkId != -1) {
                EXPECT_TRUE(want.empty()) << "chunk " << chunkId << " misses " << want.size()
                                          << " pool row(s)";
                ++chunkIndex;
            }
            chunkId = row.chunk;
            for (; chunkIndex < chunks.size(); ++chunkIndex) {
                want = expectedRows(chunks[chunkIndex]);
                if (!want.empty()) break;
            }
            if (chunkIndex >= chunks.size()) {
                ADD_FAILURE() << "more summarized chunks than chunks with watermarks";
                return compared;
            }
        }
        auto it = want.find(row.pool);
        if (it == want.end()) {
            ADD_FAILURE() << "chunk " << row.chunk << " has a row of pool " << row.pool
                          << " that none of its events names";
            continue;
        }
        const PoolChunkSummary& w = it->second;
        EXPECT_EQ(row.tMin, w.tMin) << "chunk " << row.chunk;
        EXPECT_EQ(row.tMax, w.tMax) << "chunk " << row.chunk;
        EXPECT_EQ(row.reservedMin, w.reservedMin) << "chunk " << row.chunk;
        EXPECT_EQ(row.reservedMax, w.reservedMax) << "chunk " << row.chunk;
        EXPECT_EQ(row.usedMin, w.usedMin) << "chunk " << row.chunk;
        EXPECT_EQ(row.usedMax, w.usedMax) << "chunk " << row.chunk;
        EXPECT_EQ(row.reservedLast, w.reservedLast) << "chunk " << row.chunk;
        EXPECT_EQ(row.usedLast, w.usedLast) << "chunk " << row.chunk;
        want.erase(it);
        ++compared;
    }
    EXPECT_TRUE(want.empty());
    // No chunk after the last summarized one has watermarks.
    for (++chunkIndex; chunkIndex < chunks.size(); ++chunkIndex)
        EXPECT_TRUE(expectedRows(chunks[chunkIndex]).empty()) << "chunk #" << chunkIndex;
    return compared;
}

// Re-writes a recorded sample through TraceWriter (entities, events and samples), committing
// every `commitEvery` events so that chunks of many sizes occur.
std::string rewrite(const std::string& from, const std::string& to, size_t commitEvery) {
    auto r = openOk(from);
    if (!r) return {};
    auto w = TraceWriter::create(to);
    EXPECT_TRUE(w) << w.error().message;
    if (auto p = r->process()) EXPECT_TRUE((*w)->setProcess(*p));
    if (auto d = r->devices())
        for (const DeviceInfo& x : *d) EXPECT_TRUE((*w)->addDevice(x));
    if (auto p = r->pools())
        for (const PoolInfo& x : *p) EXPECT_TRUE((*w)->addPool(x));
    if (auto s = r->streams())
        for (const StreamInfo& x : *s) EXPECT_TRUE((*w)->addStream(x));
    std::vector<Event> batch;
    size_t n = 0;
    Status st = r->forEachEvent([&](const Event& e) {
        batch.push_back(e);
        if (++n % commitEvery == 0) {
            EXPECT_TRUE((*w)->append(batch));
            EXPECT_TRUE((*w)->commit());
            batch.clear();
        }
        return true;
    });
    EXPECT_TRUE(st) << st.error().message;
    EXPECT_TRUE((*w)->append(batch));
    if (auto s = r->samples(0, INT64_MIN, INT64_MAX)) EXPECT_TRUE((*w)->append(*s));
    EXPECT_TRUE((*w)->close());
    return to;
}

TEST(PoolSummary, SamplesRewrittenThroughTheWriterHaveRowsEqualToTheirEvents) {
    test::ScratchDir dir;
    size_t compared = 0;
    for (const char* name : {"churn", "gpt2", "pools", "trims_oom", "torch_async", "beyond_pool"}) {
        SCOPED_TRACE(name);
        const std::string path =
            rewrite(sample(name), dir.file(std::string(name) + ".poolscope"),
                    std::string(name) == "churn" ? 1000 : 1u << 30);
        auto r = openOk(path);
        ASSERT_TRUE(r);
        compared += expectRowsMatchEvents(*r);
        EXPECT_EQ(summaryDamage(*r), "");
    }
    EXPECT_GT(compared, 20u); // the samples have watermarks: rows were compared
}

// Two pools; a chunk without any watermark; times out of order; values that fall back.
std::string writeHandBuilt(const std::string& path) {
    auto w = TraceWriter::create(path);
    EXPECT_TRUE(w) << w.error().message;
    for (uint64_t h : {kPoolA, kPoolB}) {
        PoolInfo p;
        p.handle = h;
        p.device = -1;
        EXPECT_TRUE((*w)->addPool(p));
    }
    test::Events ev;
    // Chunk 1: pool A reserved 2, 4, 3 (used 1, 3, 0) with its second event the earliest;
    // pool B once; an event without watermarks in between.
    test::Events::wm(ev.alloc(1000, kStream, kPoolA, 0x1, 1), 2, 1);
    test::Events::wm(ev.alloc(900, kStream, kPoolA, 0x2, 2), 4, 3);
    ev.alloc(5000, kStream, kPoolA, 0x3, 2);
    test::Events::wm(ev.alloc(1500, kStream, kPoolB, 0x4, 7), 70, 7);
    test::Events::wm(ev.free(2000, kStream, kPoolA, 0x2), 3, 0);
    EXPECT_TRUE((*w)->append(ev.all()));
    EXPECT_TRUE((*w)->commit());
    // Chunk 2: no watermarks.
    test::Events ev2;
    for (int i = 0; i < 6; ++i) ev2.add(EventKind::StreamSynchronize, 6000 + i);
    std::vector<Event> second = ev2.all();
    for (size_t i = 0; i < second.size(); ++i) second[i].seq = 100 + i;
    EXPECT_TRUE((*w)->append(second));
    EXPECT_TRUE((*w)->commit());
    // Chunk 3: pool B only.
    test::Events ev3;
    test::Events::wm(ev3.alloc(7000, kStream, kPoolB, 0x5, 1), 80, 8);
    test::Events::wm(ev3.free(7100, kStream, kPoolB, 0x5), 60, 7);
    std::vector<Event> third = ev3.all();
    for (size_t i = 0; i < third.size(); ++i) third[i].seq = 200 + i;
    EXPECT_TRUE((*w)->append(third));
    EXPECT_TRUE((*w)->close());
    return path;
}

TEST(PoolSummary, HandBuiltTraceRowsAreMinMaxAndLastPerPool) {
    test::ScratchDir dir;
    auto r = openOk(writeHandBuilt(dir.file("handbuilt-summaries.poolscope")));
    ASSERT_TRUE(r);
    expectRowsMatchEvents(*r);
    auto s = r->poolSummaries();
    ASSERT_TRUE(s);
    EXPECT_EQ(s->chunks, 3u);
    ASSERT_EQ(s->rows.size(), 3u);
    const PoolChunkSummary& a = s->rows[0];
    EXPECT_EQ(a.pool, kPoolA);
    EXPECT_EQ(a.tMin, 900);
    EXPECT_EQ(a.tMax, 2000);
    EXPECT_EQ(a.reservedMin, 2u);
    EXPECT_EQ(a.reservedMax, 4u);
    EXPECT_EQ(a.reservedLast, 3u);
    EXPECT_EQ(a.usedMin, 0u);
    EXPECT_EQ(a.usedMax, 3u);
    EXPECT_EQ(a.usedLast, 0u);
    EXPECT_EQ(a.chunkRows, 2u);
    EXPECT_EQ(s->rows[1].pool, kPoolB);
    EXPECT_EQ(s->rows[1].reservedMax, 70u);
    EXPECT_EQ(s->rows[2].pool, kPoolB);
    EXPECT_EQ(s->rows[2].reservedLast, 60u);
    EXPECT_EQ(s->rows[2].reservedMax, 80u);
    // The chunk without watermarks has its pool-0 row in the file (not handed out).
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(r->path().c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM pool_chunk_summary WHERE pool=0", -1,
                                 &st, nullptr),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(st, 0), 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
    EXPECT_EQ(summaryDamage(*r), "");

    view::Overview o(*s);
    ASSERT_TRUE(o.available());
    ASSERT_TRUE(o.whole(kPoolB));
    EXPECT_EQ(o.whole(kPoolB)->reservedMax, 80u);
    EXPECT_EQ(o.whole(kPoolB)->reservedLast, 60u);
    EXPECT_EQ(o.whole(kPoolA)->usedMax, 3u);
    EXPECT_FALSE(o.whole(0x1234));
    std::vector<view::OverviewColumn> cols;
    EXPECT_FALSE(o.query(0x1234, 0, 10000, 10, true, cols)); // no summary: fall back
    // Pool B over [0, 10000) in 10 columns: 70 at 1500, nothing else until 7000-7100 (80, 60);
    // in force from column 2 to 6 it stays 70.
    ASSERT_TRUE(o.queryLevel(kPoolB, 0, 0, 10000, 10, true, cols));
    EXPECT_FALSE(cols[0].any);
    EXPECT_EQ(cols[1].reservedMax, 70u);
    EXPECT_EQ(cols[4].reservedMin, 70u);
    EXPECT_EQ(cols[4].reservedMax, 70u);
    EXPECT_EQ(cols[7].reservedMin, 60u);
    EXPECT_EQ(cols[7].reservedMax, 80u);
    EXPECT_EQ(cols[9].reservedMax, 60u);
    ASSERT_TRUE(o.queryLevel(kPoolB, 0, 0, 10000, 10, false, cols));
    EXPECT_FALSE(cols[4].any);
}

// A random trace of many chunks: three pools whose reserved/used walk at random, times mostly
// increasing with some stragglers, events without watermarks between.
std::string writeRandom(const std::string& path, uint64_t seed, size_t events) {
    std::mt19937_64 rng(seed);
    auto w = TraceWriter::create(path);
    EXPECT_TRUE(w) << w.error().message;
    const uint64_t pools[] = {kPoolA, kPoolB, 0xc000};
    for (uint64_t h : pools) {
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
        e.tsNs = rng() % 50 == 0 ? t - int64_t(rng() % 20000) : t;
        // Pool c only in bursts: whole chunks without it.
        const int p = (i / 10000) % 3 == 2 ? int(rng() % 3) : int(rng() % 2);
        e.pool = pools[p];
        e.kind = rng() % 2 ? EventKind::Alloc : EventKind::Free;
        if (rng() % 5) {
            used[p] = uint64_t(std::max<int64_t>(0, int64_t(used[p]) + int64_t(rng() % 4096) - 2000));
            reserved[p] = std::max(used[p], reserved[p] + (rng() % 7 == 0 ? (rng() % 3) << 20 : 0));
            if (rng() % 40 == 0) reserved[p] = used[p];
            e.flags = kHasWatermarks;
            e.reserved = reserved[p];
            e.used = used[p];
        }
        batch.push_back(e);
        if (rng() % 3000 == 0) {
            EXPECT_TRUE((*w)->append(batch));
            EXPECT_TRUE((*w)->commit());
            batch.clear();
        }
    }
    EXPECT_TRUE((*w)->append(batch));
    EXPECT_TRUE((*w)->close());
    return path;
}

TEST(PoolSummary, PyramidQueryEqualsBruteForceOverTheDecodedEvents) {
    test::ScratchDir dir;
    auto r = openOk(writeRandom(dir.file("random-summaries.poolscope"), 7, 300'000));
    ASSERT_TRUE(r);
    expectRowsMatchEvents(*r);
    auto s = r->poolSummaries();
    ASSERT_TRUE(s);
    const view::Overview o(*s);
    const auto chunks = decodedChunks(*r);
    ASSERT_GT(chunks.size(), 70u);
    struct Rec {
        int64_t t;
        uint64_t reserved, used;
        size_t ordinal; // the index of its chunk among the chunks holding the pool
    };
    std::map<uint64_t, std::vector<Rec>> byPool;
    std::map<uint64_t, size_t> ordinals;
    for (const auto& c : chunks) {
        std::map<uint64_t, bool> seen;
        for (const Event& e : c) {
            if (!e.has(kHasWatermarks) || e.pool == 0) continue;
            if (!seen[e.pool]) {
                seen[e.pool] = true;
                ++ordinals[e.pool];
            }
            byPool[e.pool].push_back({e.tsNs, e.reserved, e.used, ordinals[e.pool] - 1});
        }
    }
    ASSERT_EQ(byPool.size(), 3u);
    ASSERT_EQ(o.pools().size(), 3u);
    std::mt19937_64 rng(11);
    const int64_t first = chunks.front().front().tsNs - 30000, last = chunks.back().back().tsNs + 30000;
    int checkedColumns = 0;
    for (int q = 0; q < 60; ++q) {
        const uint64_t pool = o.pools()[size_t(rng() % 3)];
        int64_t t0 = first + int64_t(rng() % uint64_t(last - first));
        int64_t t1 = first + int64_t(rng() % uint64_t(last - first));
        if (t0 > t1) std::swap(t0, t1);
        if (q % 6 == 0) t0 = first, t1 = last; // the whole trace
        if (t1 - t0 < 10) t1 = t0 + 10;
        const size_t columns = 1 + size_t(rng() % 1500);
        const bool inForce = q % 2;
        const size_t levels = o.levelCount(pool);
        ASSERT_GE(levels, 3u);
        // Every level against the events grouped the same way, and query() = its level.
        for (size_t level = 0; level < levels; ++level) {
            std::vector<view::OverviewColumn> got;
            ASSERT_TRUE(o.queryLevel(pool, level, t0, t1, columns, inForce, got));
            ASSERT_EQ(got.size(), columns);
            // Brute force: blocks of the decoded events, then columns.
            size_t per = 1;
            for (size_t l = 0; l < level; ++l) per *= view::Overview::kFanout;
            struct B {
                bool any = false;
                int64_t tMin = 0, tMax = 0;
                uint64_t rMin = 0, rMax = 0, uMin = 0, uMax = 0, rLast = 0, uLast = 0;
            };
            std::vector<B> blocks;
            for (const Rec& e : byPool[pool]) {
                const size_t b = e.ordinal / per;
                if (blocks.size() <= b) blocks.resize(b + 1);
                B& x = blocks[b];
                if (!x.any) x = {true, e.t, e.t, e.reserved, e.reserved, e.used, e.used, 0, 0};
                x.tMin = std::min(x.tMin, e.t);
                x.tMax = std::max(x.tMax, e.t);
                x.rMin = std::min(x.rMin, e.reserved);
                x.rMax = std::max(x.rMax, e.reserved);
                x.uMin = std::min(x.uMin, e.used);
                x.uMax = std::max(x.uMax, e.used);
                x.rLast = e.reserved;
                x.uLast = e.used;
            }
            EXPECT_EQ(blocks.size(), o.level(pool, level).size());
            std::vector<view::OverviewColumn> want(columns);
            auto inc = [](view::OverviewColumn& c, uint64_t a, uint64_t b, uint64_t u, uint64_t v) {
                if (!c.any) c = {true, a, b, u, v};
                c.reservedMin = std::min(c.reservedMin, a);
                c.reservedMax = std::max(c.reservedMax, b);
                c.usedMin = std::min(c.usedMin, u);
                c.usedMax = std::max(c.usedMax, v);
            };
            for (size_t c = 0; c < columns; ++c) {
                // Column c holds the t with columnOf(t) == c.
                for (const B& b : blocks) {
                    if (b.tMax < t0 || b.tMin >= t1) continue;
                    const size_t lo = view::Overview::columnOf(std::max(b.tMin, t0), t0, t1, columns);
                    const size_t hi = view::Overview::columnOf(std::min(b.tMax, t1 - 1), t0, t1, columns);
                    if (c >= lo && c <= hi) inc(want[c], b.rMin, b.rMax, b.uMin, b.uMax);
                }
                if (inForce) {
                    // The last block (seq order) such that it and all before it end before
                    // the column's first instant.
                    int64_t start = t0;
                    while (view::Overview::columnOf(start, t0, t1, columns) < c) {
                        // Binary search for the first t in column c.
                        int64_t lo = start, hi = t1;
                        while (lo < hi) {
                            const int64_t mid = lo + (hi - lo) / 2;
                            if (view::Overview::columnOf(mid, t0, t1, columns) < c) lo = mid + 1;
                            else hi = mid;
                        }
                        start = lo;
                    }
                    const B* before = nullptr;
                    int64_t maxEnd = INT64_MIN;
                    for (const B& b : blocks) {
                        maxEnd = std::max(maxEnd, b.tMax);
                        if (maxEnd >= start) break;
                        before = &b;
                    }
                    if (before) inc(want[c], before->rLast, before->rLast, before->uLast, before->uLast);
                }
            }
            for (size_t c = 0; c < columns; ++c) {
                ASSERT_EQ(got[c].any, want[c].any) << "level " << level << " column " << c;
                if (!got[c].any) continue;
                ASSERT_EQ(got[c].reservedMin, want[c].reservedMin) << "level " << level << " column " << c;
                ASSERT_EQ(got[c].reservedMax, want[c].reservedMax) << "level " << level << " column " << c;
                ASSERT_EQ(got[c].usedMin, want[c].usedMin) << "level " << level << " column " << c;
                ASSERT_EQ(got[c].usedMax, want[c].usedMax) << "level " << level << " column " << c;
                ++checkedColumns;
            }
        }
        // query() reads the level levelFor picks, and every event inside a column lies in its band.
        std::vector<view::OverviewColumn> got, atLevel;
        ASSERT_TRUE(o.query(pool, t0, t1, columns, inForce, got));
        const size_t level = o.levelFor(pool, double(t1 - t0) / double(columns));
        ASSERT_TRUE(o.queryLevel(pool, level, t0, t1, columns, inForce, atLevel));
        for (size_t c = 0; c < columns; ++c) {
            ASSERT_EQ(got[c].any, atLevel[c].any);
            ASSERT_EQ(got[c].reservedMax, atLevel[c].reservedMax);
        }
        for (const Rec& e : byPool[pool]) {
            if (e.t < t0 || e.t >= t1) continue;
            const view::OverviewColumn& c = got[view::Overview::columnOf(e.t, t0, t1, columns)];
            ASSERT_TRUE(c.any);
            ASSERT_LE(c.reservedMin, e.reserved);
            ASSERT_GE(c.reservedMax, e.reserved);
            ASSERT_LE(c.usedMin, e.used);
            ASSERT_GE(c.usedMax, e.used);
        }
    }
    EXPECT_GT(checkedColumns, 10000);
    // The top of the pyramid is the whole trace: the recorded peaks.
    for (const auto& [pool, recs] : byPool) {
        uint64_t rMax = 0, uMax = 0;
        for (const Rec& e : recs) rMax = std::max(rMax, e.reserved), uMax = std::max(uMax, e.used);
        ASSERT_TRUE(o.whole(pool));
        EXPECT_EQ(o.whole(pool)->reservedMax, rMax);
        EXPECT_EQ(o.whole(pool)->usedMax, uMax);
        EXPECT_EQ(o.whole(pool)->reservedLast, recs.back().reserved);
    }
}

// The chunk id of the n-th chunk (seq order) holding pool A's rows.
std::string chunkOfRow(int n) {
    return "(SELECT chunk FROM pool_chunk_summary WHERE pool=" + std::to_string(kPoolA) +
           " ORDER BY chunk LIMIT 1 OFFSET " + std::to_string(n) + ")";
}

// Rows with the given values and correct checksums: lies the checksum cannot catch.
void insertWithCrc(const std::string& path, const std::vector<PoolChunkSummary>& rows) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* crc = nullptr;
    sqlite3_stmt* ins = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT crc FROM event_chunks WHERE id=?", -1, &crc, nullptr),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO pool_chunk_summary "
                                     "VALUES(?,?,?,?,?,?,?,?,?,?,?,?)", -1, &ins, nullptr),
              SQLITE_OK);
    sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
    for (const PoolChunkSummary& row : rows) {
        // The owning chunk's crc, as the reader takes it.
        sqlite3_bind_int64(crc, 1, row.chunk);
        const uint32_t chunkCrc =
            sqlite3_step(crc) == SQLITE_ROW ? uint32_t(sqlite3_column_int64(crc, 0)) : 0;
        sqlite3_reset(crc);
        const int64_t v[] = {row.chunk, int64_t(row.pool), int64_t(row.chunkRows), row.tMin,
                             row.tMax, int64_t(row.reservedMin), int64_t(row.reservedMax),
                             int64_t(row.usedMin), int64_t(row.usedMax),
                             int64_t(row.reservedLast), int64_t(row.usedLast),
                             int64_t(schema::poolSummaryChecksum(row, chunkCrc))};
        for (int i = 0; i < 12; ++i) sqlite3_bind_int64(ins, i + 1, v[i]);
        EXPECT_EQ(sqlite3_step(ins), SQLITE_DONE) << sqlite3_errmsg(db);
        sqlite3_reset(ins);
    }
    sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_finalize(crc);
    sqlite3_finalize(ins);
    sqlite3_close(db);
}

struct Damaged {
    size_t rows = 0, chunks = 0, chunksWithout = 0;
    std::string damage;
};

Damaged readDamaged(const std::string& path) {
    Damaged d;
    auto r = openOk(path);
    if (!r) return d;
    auto s = r->poolSummaries();
    EXPECT_TRUE(s) << s.error().message;
    if (!s) return d;
    d.rows = s->rows.size();
    d.chunks = s->chunks;
    d.chunksWithout = s->chunksWithout;
    d.damage = summaryDamage(*r);
    // What is intact still builds an overview, and the events still read.
    view::Overview o(*s);
    std::vector<view::OverviewColumn> cols;
    for (uint64_t p : o.pools()) EXPECT_TRUE(o.query(p, INT64_MIN / 2, INT64_MAX / 2, 500, true, cols));
    EXPECT_TRUE(r->forEachChunk([](std::vector<Event>&) { return true; }));
    return d;
}

TEST(PoolSummary, DamagedOrLyingRowsCostTheirChunkItsSummaryAndAreNamed) {
    test::ScratchDir dir;
    const std::string base = writeRandom(dir.file("handbuilt-random-base.poolscope"), 3, 40'000);
    const Damaged intact = readDamaged(base);
    ASSERT_EQ(intact.damage, "");
    ASSERT_GT(intact.chunks, 5u);
    int n = 0;
    auto copy = [&] {
        const std::string f = dir.file("damaged-" + std::to_string(n++) + ".poolscope");
        std::filesystem::copy_file(base, f);
        return f;
    };
    // One chunk loses its summary: its rows (one or more) go, the others stay.
    auto expectOneChunkLost = [&](const std::string& f, const std::string& words) {
        const Damaged d = readDamaged(f);
        EXPECT_EQ(d.chunks, intact.chunks - 1) << words;
        EXPECT_EQ(d.chunksWithout, 1u) << words;
        EXPECT_LT(d.rows, intact.rows) << words;
        EXPECT_GE(d.rows, intact.rows - 3) << words;
        EXPECT_NE(d.damage.find(words), std::string::npos) << d.damage;
    };
    {
        const std::string f = copy();
        execSql(f, "UPDATE pool_chunk_summary SET reserved_max = reserved_max + 1 WHERE pool=" +
                       std::to_string(kPoolA) + " AND chunk=" + chunkOfRow(2));
        expectOneChunkLost(f, "do not hold up");
        // `info` names it as damage, and still prints the peaks of what holds up.
        test::CliRun info = test::runCli("info '" + f + "'");
        EXPECT_EQ(info.exitCode, exitCodeFor(ErrorCode::Corrupt)) << info.output;
        EXPECT_NE(info.output.find("DAMAGED  the pool_chunk_summary rows of 1 event chunk"),
                  std::string::npos) << info.output;
        EXPECT_NE(info.output.find("peak: reserved"), std::string::npos) << info.output;
    }
    {
        const std::string f = copy(); // every row of a chunk deleted
        execSql(f, "DELETE FROM pool_chunk_summary WHERE chunk=" + chunkOfRow(4));
        expectOneChunkLost(f, "have no pool_chunk_summary rows");
    }
    {
        const std::string f = copy(); // one pool's row of a chunk with several deleted
        execSql(f, "DELETE FROM pool_chunk_summary WHERE pool=" + std::to_string(kPoolA) +
                       " AND chunk=" + chunkOfRow(1));
        expectOneChunkLost(f, "do not hold up");
    }
    {
        const std::string f = copy();
        execSql(f, "UPDATE pool_chunk_summary SET used_min = 'x' WHERE pool=" +
                       std::to_string(kPoolA) + " AND chunk=" + chunkOfRow(3));
        expectOneChunkLost(f, "do not hold up");
    }
    // Lies with a correct checksum: each caught by the rules, not the crc.
    auto r0 = openOk(base);
    ASSERT_TRUE(r0);
    const auto rows = r0->poolSummaries()->rows;
    PoolChunkSummary pick;
    for (const PoolChunkSummary& x : rows)
        if (x.pool == kPoolA && x.chunkRows >= 2) pick = x;
    ASSERT_NE(pick.chunk, 0);
    for (int lie = 0; lie < 7; ++lie) {
        SCOPED_TRACE(lie);
        PoolChunkSummary x = pick;
        switch (lie) {
        case 0: std::swap(x.tMin, x.tMax), ++x.tMax; break; // t_min > t_max
        case 1: x.reservedLast = x.reservedMax + 1; break;
        case 2: x.chunkRows = 1000; break;                  // a count that lies
        case 3: x.chunkRows = 0; break;
        case 4: x.tMax = INT64_MAX; break;                  // beyond its chunk
        case 5: x.pool = 0; break;                          // "no watermarks" beside rows
        case 6: x.usedMin = x.usedLast + 1; break;
        }
        const std::string f = copy();
        if (lie == 5)
            execSql(f, "DELETE FROM pool_chunk_summary WHERE chunk=" + std::to_string(x.chunk) +
                           " AND pool=" + std::to_string(kPoolA));
        insertWithCrc(f, {x});
        expectOneChunkLost(f, "do not hold up");
    }
    {
        // Rows of chunks that do not exist, many: passed over, nothing kept for them (a deleted
        // chunk is named as such, by event_counts and the chunks' sequence).
        const std::string f = copy();
        execSql(f, "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM k WHERE i<200000) "
                   "INSERT INTO pool_chunk_summary SELECT 1000000+i, i, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0 FROM k");
        const Damaged d = readDamaged(f);
        EXPECT_EQ(d.rows, intact.rows);
        EXPECT_EQ(d.chunks, intact.chunks);
        EXPECT_EQ(d.damage, "");
    }
    {
        // Pools beyond the pools table, thousands of them in one chunk's rows (checksums right):
        // a bounded number of unlisted pools is kept, the chunk beyond it loses its summary.
        const std::string f = copy();
        std::vector<PoolChunkSummary> lies;
        execSql(f, "DELETE FROM pool_chunk_summary WHERE chunk=" + std::to_string(pick.chunk));
        const uint64_t many = TraceReader::kMaxUnlistedSummaryPools + 10;
        for (uint64_t i = 0; i < many; ++i) {
            PoolChunkSummary x = pick;
            x.pool = 0x900000 + i;
            x.chunkRows = many;
            lies.push_back(x);
        }
        insertWithCrc(f, lies);
        const Damaged d = readDamaged(f);
        EXPECT_EQ(d.chunksWithout, 1u);
        EXPECT_NE(d.damage.find("do not hold up"), std::string::npos) << d.damage;
    }
    {
        // The table dropped: a trace of before the summaries, no damage.
        const std::string f = copy();
        execSql(f, "DROP TABLE pool_chunk_summary");
        auto r = openOk(f);
        ASSERT_TRUE(r);
        auto s = r->poolSummaries();
        ASSERT_TRUE(s);
        EXPECT_FALSE(s->present);
        EXPECT_TRUE(s->rows.empty());
        EXPECT_EQ(summaryDamage(*r), "");
    }
}

TEST(PoolSummary, OldTraceWithoutTheTableHasNoOverviewAndInfoIsAsBefore) {
    auto r = openOk(sample("churn"));
    ASSERT_TRUE(r);
    auto s = r->poolSummaries();
    ASSERT_TRUE(s);
    EXPECT_FALSE(s->present);
    EXPECT_TRUE(s->rows.empty());
    EXPECT_EQ(summaryDamage(*r), "");
    const view::Overview o(*s);
    EXPECT_FALSE(o.available());
    std::vector<view::OverviewColumn> cols;
    auto pools = r->pools();
    ASSERT_TRUE(pools && !pools->empty());
    EXPECT_FALSE(o.query(pools->front().handle, 0, INT64_MAX, 100, true, cols));
    // The samples' high watermarks alone may understate a peak (churn's used high is 48 MiB,
    // its events reach 131 MiB), so a trace without summaries gives none.
    test::CliRun info = test::runCli("info '" + sample("churn") + "'");
    EXPECT_EQ(info.exitCode, 0) << info.output;
    EXPECT_EQ(info.output.find("peak:"), std::string::npos) << info.output;
    test::CliRun json = test::runCli("info --json '" + sample("churn") + "'");
    auto j = nlohmann::json::parse(json.output);
    ASSERT_FALSE(j["pools"].empty());
    EXPECT_FALSE(j["pools"][0].contains("recorded_peak_reserved"));
}

TEST(PoolSummary, InfoPrintsThePeaksRecordedInTheSummaries) {
    test::ScratchDir dir;
    const std::string path = rewrite(sample("gpt2"), dir.file("gpt2.poolscope"), 1u << 30);
    auto r = openOk(path);
    ASSERT_TRUE(r);
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> peak;
    ASSERT_TRUE(r->forEachEvent([&](const Event& e) {
        if (e.has(kHasWatermarks) && e.pool) {
            auto& p = peak[e.pool];
            p.first = std::max(p.first, e.reserved);
            p.second = std::max(p.second, e.used);
        }
        return true;
    }));
    ASSERT_FALSE(peak.empty());
    test::CliRun info = test::runCli("info '" + path + "'");
    EXPECT_EQ(info.exitCode, 0) << info.output;
    test::CliRun json = test::runCli("info --json '" + path + "'");
    auto j = nlohmann::json::parse(json.output);
    size_t found = 0;
    for (const auto& [pool, p] : peak) {
        const std::string line = "peak: reserved " + formatBytes(p.first) + ", used " +
                                 formatBytes(p.second);
        EXPECT_NE(info.output.find(line), std::string::npos) << line << "\n" << info.output;
        for (const auto& jp : j["pools"]) {
            if (jp["handle"] != formatHandle(pool)) continue;
            EXPECT_EQ(jp["recorded_peak_reserved"].get<uint64_t>(), p.first);
            EXPECT_EQ(jp["recorded_peak_used"].get<uint64_t>(), p.second);
            ++found;
        }
    }
    EXPECT_EQ(found, peak.size());
}

// Racing threads make the per-event used values miss the driver's UsedMemHigh (the summaries'
// used maximum is 24.5 MiB in the recorded threads_race_indexed sample, the driver's 27.75 MiB):
// `info` must give the report's peaks, which are the driver's, on every recorded sample with
// summary tables.
TEST(InfoPeaks, RecordedSamplesInfoPeaksEqualTheReportsOnes) {
    size_t pools = 0;
    for (const auto& entry : std::filesystem::directory_iterator(POOLSCOPE_SAMPLES_DIR)) {
        if (entry.path().extension() != ".poolscope") continue;
        const std::string path = entry.path().string();
        test::CliRun report = test::runCli("report --json '" + path + "'");
        test::CliRun info = test::runCli("info --json '" + path + "'");
        ASSERT_EQ(report.exitCode, 0) << path << report.output;
        ASSERT_EQ(info.exitCode, 0) << path << info.output;
        const auto rj = nlohmann::json::parse(report.output);
        const auto ij = nlohmann::json::parse(info.output);
        for (const auto& rp : rj["pools"]) {
            if (!rp.value("has_watermarks", false)) continue;
            for (const auto& ip : ij["pools"]) {
                if (ip["handle"] != rp["handle"] || !ip.contains("recorded_peak_reserved") ||
                    ip["recorded_peak_reserved"].is_null())
                    continue;
                EXPECT_EQ(ip["recorded_peak_reserved"].get<uint64_t>(),
                          rp["peak_reserved"].get<uint64_t>()) << path << " " << rp["handle"];
                EXPECT_EQ(ip["recorded_peak_used"].get<uint64_t>(), rp["peak_used"].get<uint64_t>())
                    << path << " " << rp["handle"];
                ++pools;
            }
        }
    }
    EXPECT_GE(pools, 2u); // threads_race_indexed's two pools at least were compared
}

} // namespace
} // namespace poolscope
