// Every EventKind, with every field set to a value that would expose truncation or a sign
// error, goes through TraceWriter and comes back unchanged from TraceReader.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "TestTraces.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"

namespace poolscope {
namespace {

// Distinct, extreme values per kind: high bits set in every 64-bit handle (stored in SQLite's
// signed INTEGER), the full range of the narrow fields.
Event fullEvent(int kind) {
    const auto k = static_cast<uint64_t>(kind);
    Event e;
    e.seq = 1000 + k;
    e.tsNs = 1'700'000'000'000'000'000LL + static_cast<int64_t>(k) * 1000;
    e.stream = 0xFFFF'0000'0000'0000ull | (k << 8);
    e.pool = 0x8000'0000'0000'0000ull | k;
    e.ptr = 0xFFFF'FFFF'FFFF'F000ull - (k << 12);
    e.size = ~uint64_t{0} - k;
    e.aux = 0x7FFF'FFFF'FFFF'FFFFull + k;
    e.reserved = (uint64_t{1} << 63) + (k << 20);
    e.used = (uint64_t{1} << 40) + k;
    e.tid = 0xFFFF'FFF0u + static_cast<uint32_t>(k % 16);
    e.correlation = 0xFFFF'FF00u + static_cast<uint32_t>(k);
    e.result = kind % 2 ? -static_cast<int32_t>(k) : 0x7FFF'FF00 + kind;
    e.device = static_cast<int16_t>(kind % 2 ? -1 : 32767 - kind);
    e.kind = static_cast<EventKind>(kind);
    e.variant = static_cast<uint8_t>(255 - kind);
    e.attr = static_cast<uint16_t>(kind % 2 ? 1002 : 65535 - kind);
    e.flags = static_cast<uint8_t>(kHasWatermarks | kHasOldValue | kFromPoolScope | kSizeKnown);
    return e;
}

void expectSameEvent(const Event& a, const Event& b) {
    SCOPED_TRACE(std::string("kind ") + std::string(eventKindName(a.kind)));
    EXPECT_EQ(a.seq, b.seq);
    EXPECT_EQ(a.tsNs, b.tsNs);
    EXPECT_EQ(a.stream, b.stream);
    EXPECT_EQ(a.pool, b.pool);
    EXPECT_EQ(a.ptr, b.ptr);
    EXPECT_EQ(a.size, b.size);
    EXPECT_EQ(a.aux, b.aux);
    EXPECT_EQ(a.reserved, b.reserved);
    EXPECT_EQ(a.used, b.used);
    EXPECT_EQ(a.tid, b.tid);
    EXPECT_EQ(a.correlation, b.correlation);
    EXPECT_EQ(a.result, b.result);
    EXPECT_EQ(a.device, b.device);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.variant, b.variant);
    EXPECT_EQ(a.attr, b.attr);
    EXPECT_EQ(a.flags, b.flags);
}

TEST(RoundTrip, EveryEventKindKeepsEveryField) {
    test::ScratchDir dir;
    const std::string path = dir.file("all.poolscope");
    std::vector<Event> written;
    Event sample;
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w) << w.error().message;
        // The first half one at a time, the rest in one batch (in seq order, as the collector
        // appends): both paths of append() must store the same.
        std::vector<Event> batch;
        for (int k = 1; k < kEventKindCount; ++k) {
            Event e = fullEvent(k);
            if (e.kind == EventKind::Sample) {
                // Byte counts a pool can have (up to 1 PiB), every bit width still in play: the
                // reader skips (and names) a sample beyond that as damage (UncheckedTables).
                e.reserved = (uint64_t{1} << 50) - 1 - (static_cast<uint64_t>(k) << 20);
                e.size = (uint64_t{1} << 50) - 1 - static_cast<uint64_t>(k);
                e.aux = (uint64_t{1} << 49) + static_cast<uint64_t>(k);
                sample = e;
            } else {
                written.push_back(e);
            }
            if (k < kEventKindCount / 2) {
                ASSERT_TRUE((*w)->append(e));
            } else {
                batch.push_back(e);
            }
        }
        ASSERT_TRUE((*w)->append(batch));
        // Samples are not events: eventsWritten counts the events table only.
        EXPECT_EQ((*w)->eventsWritten(), static_cast<uint64_t>(kEventKindCount - 2));
        ASSERT_TRUE((*w)->close());
    }
    ASSERT_EQ(written.size(), static_cast<size_t>(kEventKindCount - 2)); // all but Sample

    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    std::vector<Event> read;
    ASSERT_TRUE((*r)->forEachEvent([&](const Event& e) {
        read.push_back(e);
        return true;
    }));
    ASSERT_EQ(read.size(), written.size());
    for (size_t i = 0; i < read.size(); ++i) expectSameEvent(written[i], read[i]); // seq order

    auto ranged = (*r)->events(INT64_MIN, INT64_MAX);
    ASSERT_TRUE(ranged);
    ASSERT_EQ(ranged->size(), written.size());
    for (size_t i = 0; i < written.size(); ++i) expectSameEvent(written[i], (*ranged)[i]);

    // Samples live in their own table, which keeps what a sample means: time, pool, the four
    // watermarks (reserved/used and their highs in size/aux).
    auto samples = (*r)->samples(0, INT64_MIN, INT64_MAX);
    ASSERT_TRUE(samples);
    ASSERT_EQ(samples->size(), 1u);
    const Event& s = samples->front();
    EXPECT_EQ(s.kind, EventKind::Sample);
    EXPECT_EQ(s.tsNs, sample.tsNs);
    EXPECT_EQ(s.pool, sample.pool);
    EXPECT_EQ(s.reserved, sample.reserved);
    EXPECT_EQ(s.used, sample.used);
    EXPECT_EQ(s.size, sample.size);
    EXPECT_EQ(s.aux, sample.aux);
    auto byPool = (*r)->samples(sample.pool, INT64_MIN, INT64_MAX);
    ASSERT_TRUE(byPool);
    EXPECT_EQ(byPool->size(), 1u);
    auto otherPool = (*r)->samples(sample.pool + 1, INT64_MIN, INT64_MAX);
    ASSERT_TRUE(otherPool);
    EXPECT_TRUE(otherPool->empty());

    auto summary = (*r)->summary();
    ASSERT_TRUE(summary);
    EXPECT_EQ(summary->eventCount, written.size());
    EXPECT_EQ(summary->sampleCount, 1u);
    for (int k = 1; k < kEventKindCount; ++k) {
        auto kind = static_cast<EventKind>(k);
        const uint64_t expected = kind == EventKind::Sample ? 0 : 1;
        auto it = summary->countsByKind.find(kind);
        EXPECT_EQ(it == summary->countsByKind.end() ? 0 : it->second, expected)
            << eventKindName(kind);
    }
    EXPECT_EQ(summary->firstTsNs, fullEvent(1).tsNs);
    EXPECT_EQ(summary->lastTsNs, fullEvent(kEventKindCount - 1).tsNs);
}

TEST(RoundTrip, TimeRangeIsHalfOpen) {
    test::ScratchDir dir;
    const std::string path = dir.file("range.poolscope");
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        test::Events ev;
        for (int i = 0; i < 10; ++i) ev.add(EventKind::ContextSynchronize, 100 * i);
        ASSERT_TRUE((*w)->append(ev.all()));
        ASSERT_TRUE((*w)->close());
    }
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r);
    auto ev = (*r)->events(200, 500);
    ASSERT_TRUE(ev);
    ASSERT_EQ(ev->size(), 3u);
    EXPECT_EQ(ev->front().tsNs, 200);
    EXPECT_EQ(ev->back().tsNs, 400);
}

TEST(RoundTrip, EntitiesAndMeta) {
    test::ScratchDir dir;
    const std::string path = dir.file("entities.poolscope");
    ProcessInfo p{4242, "python train.py --epochs 3", 1'700'000'000'123'456'789LL, 987654321,
                  "gpu-node-07", 13000, 12080, "0.1.0", 4000};
    DeviceInfo d0{0, "NVIDIA H200", 150'000'000'000ull, "GPU-1234"};
    DeviceInfo d1{1, "NVIDIA H100", 80'000'000'000ull, "GPU-5678"};
    PoolInfo pool{0xFFFF'8000'0000'0010ull, 1, PoolKind::Explicit, 0x9, 1, 1, 1ull << 40, 777};
    StreamInfo stream{0xFFFF'FFFF'0000'0001ull, 1, -3, 1, true};
    ThreadInfo thread{0xFFFF'FFFEu, "loader"};
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        ASSERT_TRUE((*w)->setProcess(p));
        ASSERT_TRUE((*w)->addDevice(d1));
        ASSERT_TRUE((*w)->addDevice(d0));
        ASSERT_TRUE((*w)->addPool(pool));
        ASSERT_TRUE((*w)->addStream(stream));
        ASSERT_TRUE((*w)->addThread(thread));
        ASSERT_TRUE((*w)->setMeta("dropped_events", "17"));
        ASSERT_TRUE((*w)->close());
    }
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    auto rp = (*r)->process();
    ASSERT_TRUE(rp);
    EXPECT_EQ(rp->pid, p.pid);
    EXPECT_EQ(rp->parentPid, p.parentPid);
    EXPECT_EQ(rp->commandLine, p.commandLine);
    EXPECT_EQ(rp->startTimeUnixNs, p.startTimeUnixNs);
    EXPECT_EQ(rp->startTimeMonoNs, p.startTimeMonoNs);
    EXPECT_EQ(rp->host, p.host);
    EXPECT_EQ(rp->driverVersion, p.driverVersion);
    EXPECT_EQ(rp->runtimeVersion, p.runtimeVersion);
    EXPECT_EQ(rp->collectorVersion, p.collectorVersion);
    auto devs = (*r)->devices();
    ASSERT_TRUE(devs);
    ASSERT_EQ(devs->size(), 2u);
    EXPECT_EQ((*devs)[0].ordinal, 0);
    EXPECT_EQ((*devs)[0].name, d0.name);
    EXPECT_EQ((*devs)[0].totalMemory, d0.totalMemory);
    EXPECT_EQ((*devs)[0].uuid, d0.uuid);
    EXPECT_EQ((*devs)[1].name, d1.name);
    auto pools = (*r)->pools();
    ASSERT_TRUE(pools);
    ASSERT_EQ(pools->size(), 1u);
    const PoolInfo& rpool = pools->front();
    EXPECT_EQ(rpool.handle, pool.handle);
    EXPECT_EQ(rpool.device, pool.device);
    EXPECT_EQ(rpool.kind, pool.kind);
    EXPECT_EQ(rpool.handleTypes, pool.handleTypes);
    EXPECT_EQ(rpool.locationType, pool.locationType);
    EXPECT_EQ(rpool.locationId, pool.locationId);
    EXPECT_EQ(rpool.maxSize, pool.maxSize);
    EXPECT_EQ(rpool.createdTsNs, pool.createdTsNs);
    auto streams = (*r)->streams();
    ASSERT_TRUE(streams);
    ASSERT_EQ(streams->size(), 1u);
    EXPECT_EQ(streams->front().handle, stream.handle);
    EXPECT_EQ(streams->front().device, stream.device);
    EXPECT_EQ(streams->front().priority, stream.priority);
    EXPECT_EQ(streams->front().flags, stream.flags);
    EXPECT_EQ(streams->front().priorityKnown, stream.priorityKnown);
    auto threads = (*r)->threads();
    ASSERT_TRUE(threads);
    ASSERT_EQ(threads->size(), 1u);
    EXPECT_EQ(threads->front().tid, thread.tid);
    EXPECT_EQ(threads->front().name, thread.name);
    auto meta = (*r)->meta();
    ASSERT_TRUE(meta);
    EXPECT_EQ(meta->at("dropped_events"), "17");
}

// streams.cupti_stream_id was never filled: the reader must not depend on it, whether a file has
// it with a value (older writers could have) or lacks it altogether.
TEST(RoundTrip, StreamsWithAndWithoutTheUnusedCuptiStreamIdColumn) {
    test::ScratchDir dir;
    const std::string path = dir.file("streams.poolscope");
    StreamInfo stream{0x1234, 0, 5, 4, true};
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        ASSERT_TRUE((*w)->addStream(stream));
        ASSERT_TRUE((*w)->close());
    }
    auto exec = [&](const char* sql) {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
        EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK)
            << sqlite3_errmsg(db);
        sqlite3_close(db);
    };
    auto expectStream = [&] {
        auto r = TraceReader::open(path);
        ASSERT_TRUE(r) << r.error().message;
        auto streams = (*r)->streams();
        ASSERT_TRUE(streams) << streams.error().message;
        ASSERT_EQ(streams->size(), 1u);
        EXPECT_EQ(streams->front().handle, stream.handle);
        EXPECT_EQ(streams->front().device, stream.device);
        EXPECT_EQ(streams->front().priority, stream.priority);
        EXPECT_EQ(streams->front().flags, stream.flags);
        EXPECT_TRUE(streams->front().priorityKnown);
    };
    exec("UPDATE streams SET cupti_stream_id=99");
    expectStream();
    exec("ALTER TABLE streams DROP COLUMN cupti_stream_id");
    expectStream();
}

} // namespace
} // namespace poolscope

namespace poolscope {

// Drop gaps (where the collector lost events) come back in time order; rows that cannot be
// true (no events lost, a negative duration) are left out or clamped; a trace written before
// the table existed, or with the table gone, simply has none.
TEST(RoundTrip, DropGapsHandBuilt) {
    test::ScratchDir dir;
    const std::string path = dir.file("gaps.poolscope");
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        ASSERT_TRUE((*w)->addDropGap(DropGap{5'000, 300, 12, 40}));
        ASSERT_TRUE((*w)->addDropGap(DropGap{1'000, 0, 11, 7}));
        ASSERT_TRUE((*w)->close());
    }
    // What a damaged or hostile file might hold.
    test::execSql(path, "INSERT INTO drop_gaps VALUES(2000,-50,13,3);"
                  "INSERT INTO drop_gaps VALUES(3000,10,14,0);"
                  "INSERT INTO drop_gaps VALUES(4000,10,15,-9);");
    {
        auto r = TraceReader::open(path);
        ASSERT_TRUE(r);
        auto gaps = (*r)->dropGaps();
        ASSERT_TRUE(gaps);
        ASSERT_EQ(gaps->size(), 3u);
        EXPECT_EQ((*gaps)[0].tsNs, 1'000);
        EXPECT_EQ((*gaps)[0].tid, 11u);
        EXPECT_EQ((*gaps)[0].count, 7u);
        EXPECT_EQ((*gaps)[1].tsNs, 2'000);
        EXPECT_EQ((*gaps)[1].durationNs, 0);
        EXPECT_EQ((*gaps)[2].count, 40u);
        EXPECT_EQ((*gaps)[2].durationNs, 300);
    }
    test::execSql(path, "DROP TABLE drop_gaps");
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r);
    auto gaps = (*r)->dropGaps();
    ASSERT_TRUE(gaps);
    EXPECT_TRUE(gaps->empty());
}

} // namespace poolscope
