// The timeline's bulk build from a trace file (TimelineBuilder.h): the read-ahead and the plain
// read give the same timeline, a progressive (partial) timeline is the build of a prefix, a cap
// on events stops at a chunk, cancellation stops both readers at any point, and chunks stored
// out of rowid order are read in seq order. On the benchmarks' synthetic workload (generated,
// not a recording). The timeline's semantics on hand-built sequences: TimelineTest.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include "../bench/SyntheticTrace.h"
#include "TestTraces.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"

namespace poolscope {
namespace {

void expectSameSeries(const Series& a, const Series& b, const char* what) {
    EXPECT_EQ(a.t, b.t) << what;
    EXPECT_EQ(a.v, b.v) << what;
    ASSERT_EQ(a.blocks.size(), b.blocks.size()) << what;
    for (size_t i = 0; i < a.blocks.size(); ++i) {
        EXPECT_EQ(a.blocks[i].minV, b.blocks[i].minV) << what << " block " << i;
        EXPECT_EQ(a.blocks[i].maxV, b.blocks[i].maxV) << what << " block " << i;
        EXPECT_EQ(a.blocks[i].minI, b.blocks[i].minI) << what << " block " << i;
        EXPECT_EQ(a.blocks[i].maxI, b.blocks[i].maxI) << what << " block " << i;
    }
}

// The totals a pool and a stream both keep.
template <class Entity>
void expectSameTotals(const Entity& p, const Entity& q) {
    EXPECT_EQ(p.peakLive, q.peakLive);
    EXPECT_EQ(p.peakLiveTsNs, q.peakLiveTsNs);
    EXPECT_EQ(p.bytesAllocated, q.bytesAllocated);
    EXPECT_EQ(p.allocCount, q.allocCount);
    EXPECT_EQ(p.freeCount, q.freeCount);
    EXPECT_EQ(p.failedCount, q.failedCount);
    EXPECT_EQ(p.liveAtEndBytes, q.liveAtEndBytes);
    EXPECT_EQ(p.liveAtEndCount, q.liveAtEndCount);
}

// Every field of two timelines, except the partial-timeline fields and t0/t1 (checked by the
// callers, since a partial timeline spans the whole trace).
void expectSameContent(const Timeline& a, const Timeline& b) {
    EXPECT_EQ(a.eventCount, b.eventCount);
    EXPECT_EQ(a.sampleCount, b.sampleCount);
    EXPECT_EQ(a.unmatchedFrees, b.unmatchedFrees);
    EXPECT_EQ(a.reusedWithoutFree, b.reusedWithoutFree);
    ASSERT_EQ(a.devices.size(), b.devices.size());
    for (size_t i = 0; i < a.devices.size(); ++i) {
        EXPECT_EQ(a.devices[i].ordinal, b.devices[i].ordinal);
        EXPECT_EQ(a.devices[i].name, b.devices[i].name);
    }
    ASSERT_EQ(a.pools.size(), b.pools.size());
    for (size_t i = 0; i < a.pools.size(); ++i) {
        const PoolTimeline &p = a.pools[i], &q = b.pools[i];
        EXPECT_EQ(p.info.handle, q.info.handle);
        EXPECT_EQ(p.info.device, q.info.device);
        EXPECT_EQ(p.info.kind, q.info.kind);
        EXPECT_EQ(p.info.createdTsNs, q.info.createdTsNs);
        expectSameSeries(p.reserved, q.reserved, "reserved");
        expectSameSeries(p.used, q.used, "used");
        expectSameSeries(p.releaseThreshold, q.releaseThreshold, "releaseThreshold");
        expectSameSeries(p.reuseFollowEventDependencies, q.reuseFollowEventDependencies, "reuse1");
        expectSameSeries(p.reuseAllowOpportunistic, q.reuseAllowOpportunistic, "reuse2");
        expectSameSeries(p.reuseAllowInternalDependencies, q.reuseAllowInternalDependencies,
                         "reuse3");
        EXPECT_EQ(p.peakReserved, q.peakReserved);
        EXPECT_EQ(p.peakReservedTsNs, q.peakReservedTsNs);
        EXPECT_EQ(p.peakUsed, q.peakUsed);
        EXPECT_EQ(p.peakUsedTsNs, q.peakUsedTsNs);
        expectSameTotals(p, q);
    }
    ASSERT_EQ(a.streams.size(), b.streams.size());
    for (size_t i = 0; i < a.streams.size(); ++i) {
        const StreamTimeline &s = a.streams[i], &r = b.streams[i];
        EXPECT_EQ(s.info.handle, r.info.handle);
        EXPECT_EQ(s.info.device, r.info.device);
        EXPECT_EQ(s.allocations, r.allocations);
        expectSameSeries(s.liveBytes, r.liveBytes, "liveBytes");
        expectSameTotals(s, r);
    }
    ASSERT_EQ(a.allocations.size(), b.allocations.size());
    for (size_t i = 0; i < a.allocations.size(); ++i) {
        const Allocation &x = a.allocations[i], &y = b.allocations[i];
        EXPECT_TRUE(x.ptr == y.ptr && x.size == y.size && x.pool == y.pool &&
                    x.allocStream == y.allocStream && x.freeStream == y.freeStream &&
                    x.allocTsNs == y.allocTsNs && x.freeTsNs == y.freeTsNs &&
                    x.allocSeq == y.allocSeq && x.freeSeq == y.freeSeq && x.tid == y.tid &&
                    x.device == y.device && x.api == y.api)
            << "allocation " << i;
    }
    ASSERT_EQ(a.failed.size(), b.failed.size());
    for (size_t i = 0; i < a.failed.size(); ++i)
        EXPECT_TRUE(a.failed[i].seq == b.failed[i].seq && a.failed[i].size == b.failed[i].size);
    ASSERT_EQ(a.markers.size(), b.markers.size());
    for (size_t i = 0; i < a.markers.size(); ++i) {
        const Marker &m = a.markers[i], &n = b.markers[i];
        EXPECT_TRUE(m.tsNs == n.tsNs && m.seq == n.seq && m.kind == n.kind &&
                    m.stream == n.stream && m.pool == n.pool && m.value == n.value)
            << "marker " << i;
    }
    ASSERT_EQ(a.edges.size(), b.edges.size());
    for (size_t i = 0; i < a.edges.size(); ++i) {
        const WaitEdge &e = a.edges[i], &f = b.edges[i];
        EXPECT_TRUE(e.event == f.event && e.fromStream == f.fromStream &&
                    e.toStream == f.toStream && e.recordTsNs == f.recordTsNs &&
                    e.waitTsNs == f.waitTsNs)
            << "edge " << i;
    }
    EXPECT_EQ(a.leaks, b.leaks);
}

// A generated trace of several chunks (4,096 events each) with samples, threshold changes and
// reuse-policy changes (knobs), so every series of the timeline is filled.
struct BulkTrace {
    test::ScratchDir dir;
    std::string path = dir.file("bulk.poolscope");
    std::vector<Event> events;  // in seq order, samples excluded
    std::vector<Event> samples; // in time order
    std::unique_ptr<TraceReader> reader;

    explicit BulkTrace(size_t n = 30000) {
        bench::SyntheticTrace gen(7);
        std::vector<Event> all = gen.generate(n);
        size_t syncs = 0;
        for (Event& e : all) {
            // Every fifth synchronize becomes a knob toggling a reuse policy: a step series
            // built from KnobChange events.
            if (e.kind != EventKind::StreamSynchronize || syncs++ % 5 != 0) continue;
            const size_t k = syncs / 5;
            e.kind = EventKind::KnobChange;
            e.pool = bench::SyntheticTrace::kPools[k % 2];
            e.attr = static_cast<uint16_t>(PoolAttr::ReuseAllowOpportunistic);
            e.size = (k / 2) % 2;
            e.aux = 1 - e.size;
            e.flags = kHasOldValue | kFromPoolScope;
        }
        for (const Event& e : all) (e.kind == EventKind::Sample ? samples : events).push_back(e);
        auto w = TraceWriter::create(path);
        EXPECT_TRUE(w);
        (*w)->addDevice(DeviceInfo{0, "test GPU", 1ull << 34, ""});
        EXPECT_TRUE((*w)->append(all));
        EXPECT_TRUE((*w)->close());
        auto r = TraceReader::open(path);
        EXPECT_TRUE(r) << r.error().message;
        reader = std::move(*r);
    }

    // What buildTimeline must produce from the first k events: the same merge of samples
    // (each before the first event not earlier than it), fed one by one to a builder.
    std::shared_ptr<const Timeline> reference(size_t k) const {
        TimelineBuilder b;
        b.setEntities(*reader->devices(), *reader->pools(), *reader->streams());
        size_t si = 0;
        for (size_t i = 0; i < k; ++i) {
            while (si < samples.size() && samples[si].tsNs <= events[i].tsNs) b.add(samples[si++]);
            b.add(events[i]);
        }
        if (k == events.size())
            while (si < samples.size()) b.add(samples[si++]);
        return b.finish();
    }
};

TEST(BuildTimeline, ReadAheadAndPlainReadGiveTheReferenceTimeline) {
    BulkTrace t;
    ASSERT_TRUE(t.reader);
    ASSERT_GT(t.events.size(), 7u * 4096); // several chunks
    ASSERT_FALSE(t.samples.empty());
    const auto ref = t.reference(t.events.size());
    for (bool readAhead : {true, false}) {
        BuildOptions o;
        o.readAhead = readAhead;
        uint64_t lastDone = 0, lastTotal = 0;
        o.progress = [&](uint64_t d, uint64_t n) {
            EXPECT_GT(d, lastDone);
            lastDone = d;
            lastTotal = n;
        };
        auto tl = buildTimeline(*t.reader, o);
        ASSERT_TRUE(tl) << tl.error().message;
        SCOPED_TRACE(readAhead ? "read-ahead" : "plain");
        expectSameContent(**tl, *ref);
        EXPECT_EQ((*tl)->t0, ref->t0);
        EXPECT_EQ((*tl)->t1, ref->t1);
        EXPECT_FALSE((*tl)->partial);
        EXPECT_EQ((*tl)->loadedUntilNs, (*tl)->t1);
        EXPECT_EQ((*tl)->totalEvents, t.events.size());
        EXPECT_EQ(lastDone, t.events.size());
        EXPECT_EQ(lastTotal, t.events.size());
        // The reuse-policy knobs of the trace made steps (the series the builder must fill).
        size_t reuseSteps = 0;
        for (const PoolTimeline& p : (*tl)->pools) reuseSteps += p.reuseAllowOpportunistic.size();
        EXPECT_GT(reuseSteps, 4u);
    }
}

TEST(BuildTimeline, PartialTimelineIsTheBuildOfAPrefix) {
    BulkTrace t;
    ASSERT_TRUE(t.reader);
    auto summary = t.reader->summary();
    ASSERT_TRUE(summary);
    for (bool readAhead : {true, false}) {
        SCOPED_TRACE(readAhead ? "read-ahead" : "plain");
        BuildOptions o;
        o.readAhead = readAhead;
        o.partialAfter = std::chrono::hours(1); // by count only: deterministic
        o.partialAfterEvents = 10000;
        std::vector<std::shared_ptr<const Timeline>> partials;
        o.onPartial = [&](std::shared_ptr<const Timeline> p) { partials.push_back(std::move(p)); };
        auto full = buildTimeline(*t.reader, o);
        ASSERT_TRUE(full) << full.error().message;
        ASSERT_EQ(partials.size(), 1u); // exactly once
        const Timeline& p = *partials[0];
        // Taken between chunks, at the first chunk boundary past 10,000 events.
        EXPECT_EQ(p.eventCount, 3u * 4096);
        EXPECT_TRUE(p.partial);
        EXPECT_EQ(p.totalEvents, t.events.size());
        EXPECT_NEAR(p.loadedFraction(), 12288.0 / double(t.events.size()), 1e-9);
        const auto prefix = t.reference(p.eventCount);
        expectSameContent(p, *prefix);
        EXPECT_EQ(p.loadedUntilNs, prefix->t1); // the last event (or sample) taken in
        EXPECT_EQ(p.t0, std::min(prefix->t0, summary->firstTsNs));
        EXPECT_EQ(p.t1, summary->lastTsNs); // the whole trace's range up front
        EXPECT_GT(p.t1, p.loadedUntilNs);
        // The build went on to the same complete timeline as without a partial.
        expectSameContent(**full, *t.reference(t.events.size()));
        EXPECT_FALSE((*full)->partial);
        EXPECT_EQ((*full)->t1, summary->lastTsNs);
        EXPECT_EQ((*full)->t0, summary->firstTsNs);
    }
}

// A trace larger than the caller can hold (the window's memory limit): the build stops between
// chunks past maxEvents and returns exactly the build of that prefix, partial and limited, over
// the whole trace's range; a limit at or above the trace's size changes nothing.
TEST(BuildTimeline, MaxEventsStopsAtAChunkWithThePrefixsTimeline) {
    BulkTrace t;
    ASSERT_TRUE(t.reader);
    auto summary = t.reader->summary();
    ASSERT_TRUE(summary);
    for (bool readAhead : {true, false}) {
        SCOPED_TRACE(readAhead ? "read-ahead" : "plain");
        BuildOptions o;
        o.readAhead = readAhead;
        o.maxEvents = 10000;
        auto tl = buildTimeline(*t.reader, o);
        ASSERT_TRUE(tl) << tl.error().message;
        const Timeline& p = **tl;
        EXPECT_EQ(p.eventCount, 3u * 4096); // the first chunk boundary past 10,000
        EXPECT_TRUE(p.partial);
        EXPECT_TRUE(p.limited);
        EXPECT_EQ(p.totalEvents, t.events.size());
        const auto prefix = t.reference(p.eventCount);
        expectSameContent(p, *prefix);
        EXPECT_EQ(p.loadedUntilNs, prefix->t1);
        EXPECT_EQ(p.t1, summary->lastTsNs);
        EXPECT_GT(p.t1, p.loadedUntilNs);

        o.maxEvents = t.events.size();
        auto whole = buildTimeline(*t.reader, o);
        ASSERT_TRUE(whole);
        EXPECT_FALSE((*whole)->partial);
        EXPECT_FALSE((*whole)->limited);
        expectSameContent(**whole, *t.reference(t.events.size()));
    }
}

TEST(BuildTimeline, NoPartialWhenTheTraceIsReadFirst) {
    BulkTrace t(3000); // one chunk
    ASSERT_TRUE(t.reader);
    ASSERT_LT(t.events.size(), 4096u);
    BuildOptions o;
    o.partialAfter = std::chrono::hours(1);
    o.partialAfterEvents = 1u << 30;
    int calls = 0;
    o.onPartial = [&](std::shared_ptr<const Timeline>) { ++calls; };
    auto tl = buildTimeline(*t.reader, o);
    ASSERT_TRUE(tl);
    EXPECT_EQ(calls, 0);
    o.partialAfterEvents = 0;
    o.partialAfter = std::chrono::milliseconds(0); // due at the first chunk, but it is the last
    tl = buildTimeline(*t.reader, o);
    ASSERT_TRUE(tl);
    EXPECT_EQ(calls, 0);
}

TEST(BuildTimeline, CancelStopsBothReadersAtAnyPoint) {
    BulkTrace t;
    ASSERT_TRUE(t.reader);
    for (bool readAhead : {true, false}) {
        SCOPED_TRACE(readAhead ? "read-ahead" : "plain");
        for (uint64_t after : {uint64_t{0}, uint64_t{4096}, uint64_t{8192}}) {
            std::atomic<bool> cancel{after == 0};
            BuildOptions o;
            o.readAhead = readAhead;
            o.cancel = &cancel;
            uint64_t seen = 0;
            o.progress = [&](uint64_t d, uint64_t) {
                seen = d;
                if (d >= after) cancel = true;
            };
            auto tl = buildTimeline(*t.reader, o);
            ASSERT_FALSE(tl);
            EXPECT_EQ(tl.error().code, ErrorCode::Cancelled);
            EXPECT_LE(seen, std::max<uint64_t>(after, 4096)); // stopped within a chunk
        }
        // Cancelled from inside the partial callback, as a window closed meanwhile would.
        std::atomic<bool> cancel{false};
        BuildOptions o;
        o.readAhead = readAhead;
        o.cancel = &cancel;
        o.partialAfter = std::chrono::hours(1);
        o.partialAfterEvents = 1;
        o.onPartial = [&](std::shared_ptr<const Timeline>) { cancel = true; };
        auto tl = buildTimeline(*t.reader, o);
        ASSERT_FALSE(tl);
        EXPECT_EQ(tl.error().code, ErrorCode::Cancelled);
    }
}

TEST(BuildTimeline, ChunksOutOfRowidOrderAreReadInSeqOrder) {
    BulkTrace t;
    ASSERT_TRUE(t.reader);
    t.reader.reset();
    // Rewrite the chunk ids so that rowid order is no longer seq order (e.g. a writer that
    // reused ids): the reader must not rely on it.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(t.path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "UPDATE event_chunks SET id = 1000 - id", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
    auto r = TraceReader::open(t.path);
    ASSERT_TRUE(r);
    uint64_t prevSeq = 0, n = 0;
    ASSERT_TRUE((*r)->forEachEvent([&](const Event& e) {
        EXPECT_GT(e.seq, prevSeq);
        prevSeq = e.seq;
        ++n;
        return true;
    }));
    EXPECT_EQ(n, t.events.size());
    // The time-range query too (the events table's).
    auto ranged = (*r)->events(t.events[100].tsNs, t.events[t.events.size() - 100].tsNs);
    ASSERT_TRUE(ranged);
    EXPECT_EQ(ranged->size(), t.events.size() - 200);
    for (size_t i = 1; i < ranged->size(); ++i) ASSERT_GT((*ranged)[i].seq, (*ranged)[i - 1].seq);
    t.reader = std::move(*r);
    auto tl = buildTimeline(*t.reader);
    ASSERT_TRUE(tl);
    expectSameContent(**tl, *t.reference(t.events.size()));
}

} // namespace
} // namespace poolscope
