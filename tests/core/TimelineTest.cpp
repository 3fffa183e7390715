// Reconstruction on hand-built event sequences. Every expected value below is worked out by hand
// from the sequence in the same test, so a change in semantics shows up as a specific mismatch.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include "../bench/SyntheticTrace.h"
#include "TestTraces.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"

namespace poolscope {
namespace {

constexpr uint64_t kPool = 0x100, kA = 0xA, kB = 0xB, kEvt = 0xE;
constexpr uint64_t MiB = 1ull << 20;

using Steps = std::vector<std::pair<int64_t, uint64_t>>;

Steps steps(const Series& s) {
    Steps out;
    for (size_t i = 0; i < s.size(); ++i) out.emplace_back(s.t[i], s.v[i]);
    return out;
}

// Two streams sharing an explicit pool: an event orders a cross-stream free, the freed pointer
// is handed out again, a free of a pointer never allocated here, an OOM, a synchronize that
// releases memory, a threshold change, and one periodic sample.
test::Events twoStreamScenario() {
    test::Events ev;
    Event& create = ev.add(EventKind::PoolCreate, 10);
    create.pool = kPool;
    create.variant = static_cast<uint8_t>(PoolKind::Explicit);
    test::Events::wm(ev.alloc(100, kA, kPool, 0x1000, 1000), 32 * MiB, 1000);
    test::Events::wm(ev.alloc(200, kA, kPool, 0x2000, 500), 32 * MiB, 1500);
    Event& rec = ev.add(EventKind::EventRecord, 300);
    rec.ptr = kEvt;
    rec.stream = kA;
    Event& wait = ev.add(EventKind::StreamWaitEvent, 400);
    wait.ptr = kEvt;
    wait.stream = kB;
    test::Events::wm(ev.free(500, kB, kPool, 0x1000), 32 * MiB, 500);
    test::Events::wm(ev.alloc(600, kB, kPool, 0x1000, 2000), 64 * MiB, 2500); // pointer reuse
    ev.free(700, kA, 0, 0x9999);                                              // never allocated
    Event& oom = ev.alloc(800, kA, kPool, 0, 1ull << 40);
    oom.result = 2; // CUDA_ERROR_OUT_OF_MEMORY
    test::Events::wm(ev.free(900, kA, kPool, 0x2000), 64 * MiB, 2000);
    Event& sync = ev.add(EventKind::StreamSynchronize, 1000);
    sync.stream = kB;
    Event& release = ev.add(EventKind::ImplicitRelease, 1001);
    release.pool = kPool;
    release.size = 32 * MiB; // pool size after the release
    Event& attr = ev.add(EventKind::PoolSetAttribute, 1100);
    attr.pool = kPool;
    attr.attr = static_cast<uint16_t>(PoolAttr::ReleaseThreshold);
    attr.size = 64 * MiB;
    attr.aux = 0;
    attr.flags = kHasOldValue;
    return ev;
}

void checkTwoStreamTimeline(const Timeline& tl) {
    EXPECT_EQ(tl.t0, 10);
    EXPECT_EQ(tl.t1, 1200);
    EXPECT_EQ(tl.eventCount, 13u);
    EXPECT_EQ(tl.sampleCount, 1u);
    EXPECT_EQ(tl.unmatchedFrees, 1u);
    EXPECT_EQ(tl.reusedWithoutFree, 0u);

    ASSERT_EQ(tl.allocations.size(), 3u);
    const Allocation& a0 = tl.allocations[0];
    EXPECT_EQ(a0.ptr, 0x1000u);
    EXPECT_EQ(a0.size, 1000u);
    EXPECT_EQ(a0.allocStream, kA);
    EXPECT_EQ(a0.allocTsNs, 100);
    EXPECT_EQ(a0.freeTsNs, 500);
    EXPECT_EQ(a0.freeStream, kB); // freed on the other stream, after the event wait
    EXPECT_EQ(a0.allocSeq, 2u);
    EXPECT_EQ(a0.freeSeq, 6u);
    const Allocation& a1 = tl.allocations[1];
    EXPECT_EQ(a1.ptr, 0x2000u);
    EXPECT_EQ(a1.freeTsNs, 900);
    EXPECT_EQ(a1.freeStream, kA);
    const Allocation& a2 = tl.allocations[2];
    EXPECT_EQ(a2.ptr, 0x1000u); // the reused pointer is a new allocation
    EXPECT_EQ(a2.allocStream, kB);
    EXPECT_EQ(a2.allocTsNs, 600);
    EXPECT_TRUE(a2.live());
    EXPECT_EQ(a2.freeTsNs, kStillLive);
    EXPECT_EQ(tl.leaks, std::vector<uint32_t>{2});

    ASSERT_EQ(tl.streams.size(), 2u);
    const StreamTimeline* sa = tl.stream(kA);
    const StreamTimeline* sb = tl.stream(kB);
    ASSERT_TRUE(sa && sb);
    EXPECT_EQ(&tl.streams[0], sa); // sorted by device, then handle
    EXPECT_EQ(sa->allocations, (std::vector<uint32_t>{0, 1}));
    EXPECT_EQ(steps(sa->liveBytes), (Steps{{100, 1000}, {200, 1500}, {500, 500}, {900, 0}}));
    EXPECT_EQ(sa->peakLive, 1500u);
    EXPECT_EQ(sa->peakLiveTsNs, 200);
    EXPECT_EQ(sa->allocCount, 2u);
    EXPECT_EQ(sa->bytesAllocated, 1500u);
    EXPECT_EQ(sa->freeCount, 1u); // 0x2000; the unknown free is not counted here
    EXPECT_EQ(sa->failedCount, 1u);
    EXPECT_EQ(sa->liveAtEndBytes, 0u);
    EXPECT_EQ(sb->allocations, std::vector<uint32_t>{2});
    EXPECT_EQ(steps(sb->liveBytes), (Steps{{600, 2000}}));
    EXPECT_EQ(sb->peakLive, 2000u);
    EXPECT_EQ(sb->freeCount, 1u);
    EXPECT_EQ(sb->liveAtEndBytes, 2000u);
    EXPECT_EQ(sb->liveAtEndCount, 1u);

    ASSERT_EQ(tl.pools.size(), 1u);
    const PoolTimeline* p = tl.pool(kPool);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->info.kind, PoolKind::Explicit);
    EXPECT_EQ(p->info.createdTsNs, 10);
    // Created empty; grows at 100 and 600; the sync hands back down to 32 MiB; the sample at
    // 1200 repeats the value in force, so it adds no point.
    EXPECT_EQ(steps(p->reserved), (Steps{{10, 0}, {100, 32 * MiB}, {600, 64 * MiB},
                                         {1001, 32 * MiB}}));
    EXPECT_EQ(steps(p->used), (Steps{{10, 0}, {100, 1000}, {200, 1500}, {500, 500}, {600, 2500},
                                     {900, 2000}}));
    EXPECT_EQ(steps(p->releaseThreshold), (Steps{{10, 0}, {1100, 64 * MiB}}));
    EXPECT_EQ(p->peakReserved, 64 * MiB);
    EXPECT_EQ(p->peakReservedTsNs, 600);
    EXPECT_EQ(p->peakUsed, 2500u);
    EXPECT_EQ(p->peakUsedTsNs, 600);
    EXPECT_EQ(p->peakLive, 2500u);
    EXPECT_EQ(p->allocCount, 3u);
    EXPECT_EQ(p->bytesAllocated, 3500u);
    EXPECT_EQ(p->freeCount, 2u);
    EXPECT_EQ(p->failedCount, 1u);
    EXPECT_EQ(p->liveAtEndBytes, 2000u);
    EXPECT_EQ(p->liveAtEndCount, 1u);

    ASSERT_EQ(tl.edges.size(), 1u);
    EXPECT_EQ(tl.edges[0].event, kEvt);
    EXPECT_EQ(tl.edges[0].fromStream, kA);
    EXPECT_EQ(tl.edges[0].toStream, kB);
    EXPECT_EQ(tl.edges[0].recordTsNs, 300);
    EXPECT_EQ(tl.edges[0].waitTsNs, 400);

    ASSERT_EQ(tl.failed.size(), 1u);
    EXPECT_EQ(tl.failed[0].tsNs, 800);
    EXPECT_EQ(tl.failed[0].size, 1ull << 40);
    EXPECT_EQ(tl.failed[0].stream, kA);
    EXPECT_EQ(tl.failed[0].result, 2);

    ASSERT_EQ(tl.markers.size(), 5u);
    const EventKind kinds[] = {EventKind::PoolCreate, EventKind::Alloc,
                               EventKind::StreamSynchronize, EventKind::ImplicitRelease,
                               EventKind::PoolSetAttribute};
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(tl.markers[i].kind, kinds[i]) << i;
    EXPECT_EQ(tl.markers[2].stream, kB);
    EXPECT_EQ(tl.markers[3].value, 32 * MiB);
    EXPECT_EQ(tl.markers[4].value, 64 * MiB);
}

TEST(Timeline, TwoStreamsCrossStreamFreeReuseOomReleaseThreshold) {
    test::Events ev = twoStreamScenario();
    TimelineBuilder b;
    for (const Event& e : ev.all()) b.add(e);
    b.add(ev.sample(1200, kPool, 32 * MiB, 2000));
    checkTwoStreamTimeline(*b.finish());
}

TEST(Timeline, BuiltFromATraceFileMergesSamples) {
    test::ScratchDir dir;
    const std::string path = dir.file("two.poolscope");
    test::Events ev = twoStreamScenario();
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        ASSERT_TRUE((*w)->append(ev.all()));
        ASSERT_TRUE((*w)->append(ev.sample(1200, kPool, 32 * MiB, 2000)));
        ASSERT_TRUE((*w)->close());
    }
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    uint64_t lastDone = 0, lastTotal = 0;
    auto tl = buildTimeline(**r, [&](uint64_t d, uint64_t t) {
        lastDone = d;
        lastTotal = t;
    });
    ASSERT_TRUE(tl) << tl.error().message;
    checkTwoStreamTimeline(**tl);
    EXPECT_EQ(lastDone, 13u);
    EXPECT_EQ(lastTotal, 13u);

    std::atomic<bool> cancel{true};
    auto cancelled = buildTimeline(**r, {}, &cancel);
    ASSERT_FALSE(cancelled);
    EXPECT_EQ(cancelled.error().code, ErrorCode::Cancelled);
}

TEST(Timeline, SamplesInterleaveWithEventsByTime) {
    // A sample between two events must land between them: the used series dips to the sample's
    // value at 150 and the alloc at 200 then sets it again.
    test::Events ev;
    test::Events::wm(ev.alloc(100, kA, kPool, 0x1000, 100), 1000, 100);
    test::Events::wm(ev.alloc(200, kA, kPool, 0x2000, 100), 1000, 200);
    TimelineBuilder b;
    b.add(ev.sample(50, kPool, 0, 0)); // samples carry no device: the pool's comes later
    b.add(ev.all()[0]);
    b.add(ev.sample(150, kPool, 900, 50));
    b.add(ev.all()[1]);
    auto tl = b.finish();
    const PoolTimeline* p = tl->pool(kPool);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->info.device, 0);
    EXPECT_EQ(steps(p->used), (Steps{{50, 0}, {100, 100}, {150, 50}, {200, 200}}));
    EXPECT_EQ(steps(p->reserved), (Steps{{50, 0}, {100, 1000}, {150, 900}, {200, 1000}}));
}

TEST(Timeline, UnknownPoolDroppedFreeAndLeaks) {
    test::Events ev;
    ev.alloc(10, 0, 0, 0x5000, 64);  // pool unknown, legacy stream
    ev.alloc(20, 0, 0, 0x5000, 128); // same pointer again: its free was never seen
    ev.alloc(30, kA, 0, 0x6000, 32);
    ev.alloc(40, kA, 0, 0, 0);       // zero-byte request: no pointer, nothing to leak
    ev.free(50, kA, 0, 0);           // cudaFreeAsync(nullptr)
    TimelineBuilder b;
    for (const Event& e : ev.all()) b.add(e);
    auto snap = b.snapshot(); // a snapshot mid-way is a finished view of the prefix
    auto tl = b.finish();
    for (const auto& t : {snap, tl}) {
        EXPECT_EQ(t->reusedWithoutFree, 1u);
        EXPECT_EQ(t->unmatchedFrees, 0u);
        ASSERT_EQ(t->allocations.size(), 4u);
        EXPECT_EQ(t->allocations[0].freeTsNs, 20); // closed by the reuse
        EXPECT_EQ(t->allocations[0].freeSeq, 0u);
        EXPECT_FALSE(t->allocations[3].live());
        EXPECT_EQ(t->leaks, (std::vector<uint32_t>{1, 2}));
        ASSERT_EQ(t->pools.size(), 1u);
        const PoolTimeline* p = t->pool(0);
        ASSERT_TRUE(p);
        EXPECT_TRUE(p->reserved.empty()); // nothing is known about the pool itself
        EXPECT_EQ(p->allocCount, 4u);
        EXPECT_EQ(p->liveAtEndBytes, 160u);
        EXPECT_EQ(p->liveAtEndCount, 2u);
        EXPECT_EQ(p->peakLive, 160u); // 64, then 128 (64 closed), then 160
        ASSERT_EQ(t->streams.size(), 2u);
        EXPECT_EQ(t->streams[0].info.handle, 0u);
        EXPECT_EQ(steps(t->streams[0].liveBytes), (Steps{{10, 64}, {20, 128}}));
        EXPECT_EQ(t->streams[1].liveAtEndBytes, 32u);
    }
    // finish() leaves the builder empty and reusable.
    EXPECT_EQ(b.finish()->allocations.size(), 0u);
}

TEST(Timeline, EntitiesGivenUpFrontAndSortedByDevice) {
    TimelineBuilder b;
    PoolInfo p1{0x300, 1, PoolKind::Default, 0, 0, 0, 0, 0};
    PoolInfo p0{0x400, 0, PoolKind::Explicit, 0, 0, 0, 0, 0};
    StreamInfo s1{0x30, 1, 0, 0, false};
    b.setEntities({DeviceInfo{0, "gpu0", 1, ""}}, {p1, p0}, {s1});
    test::Events ev;
    ev.alloc(5, 0x20, 0x500, 0x1, 8).device = 0; // unseen pool and stream: created on sight
    Event& knob = ev.add(EventKind::KnobChange, 6);
    knob.pool = 0x300;
    knob.attr = static_cast<uint16_t>(PoolAttr::ReleaseThreshold);
    knob.size = ~uint64_t{0};
    knob.aux = 1024;
    knob.flags = kHasOldValue | kFromPoolScope;
    for (const Event& e : ev.all()) b.add(e);
    auto tl = b.finish();
    ASSERT_EQ(tl->pools.size(), 3u);
    EXPECT_EQ(tl->pools[0].info.handle, 0x400u); // device 0 first
    EXPECT_EQ(tl->pools[1].info.handle, 0x500u);
    EXPECT_EQ(tl->pools[2].info.handle, 0x300u);
    EXPECT_EQ(tl->pools[2].info.kind, PoolKind::Default);
    // The old value holds from the trace start until the knob changed it.
    EXPECT_EQ(steps(tl->pools[2].releaseThreshold), (Steps{{5, 1024}, {6, ~uint64_t{0}}}));
    ASSERT_EQ(tl->streams.size(), 2u);
    EXPECT_EQ(tl->streams[0].info.handle, 0x20u);
    EXPECT_EQ(tl->streams[1].info.handle, 0x30u);
    EXPECT_EQ(tl->streams[1].info.device, 1);
    ASSERT_EQ(tl->markers.size(), 1u);
    EXPECT_EQ(tl->markers[0].kind, EventKind::KnobChange);
}

// Reuse policies: a pool created in the trace starts with all three on (the driver's default);
// the app turns one off, a knob turns it back on; another pool, seen only through a change with
// an old value, holds that old value from the trace start.
TEST(Timeline, ReusePoliciesAreStepsPerPool) {
    test::Events ev;
    Event& create = ev.add(EventKind::PoolCreate, 10);
    create.pool = kPool;
    create.variant = static_cast<uint8_t>(PoolKind::Explicit);
    Event& off = ev.add(EventKind::PoolSetAttribute, 20);
    off.pool = kPool;
    off.attr = static_cast<uint16_t>(PoolAttr::ReuseAllowOpportunistic);
    off.size = 0;
    Event& on = ev.add(EventKind::KnobChange, 30);
    on.pool = kPool;
    on.attr = static_cast<uint16_t>(PoolAttr::ReuseAllowOpportunistic);
    on.size = 1;
    on.aux = 0;
    on.flags = kHasOldValue | kFromPoolScope;
    Event& other = ev.add(EventKind::PoolSetAttribute, 40);
    other.pool = 0x200;
    other.attr = static_cast<uint16_t>(PoolAttr::ReuseFollowEventDependencies);
    other.size = 1;
    other.aux = 0;
    other.flags = kHasOldValue;
    Event& trim = ev.add(EventKind::KnobChange, 50); // not an attribute: no series changes
    trim.pool = kPool;
    trim.attr = static_cast<uint16_t>(KnobAction::TrimTo);
    trim.size = 0;
    TimelineBuilder b;
    for (const Event& e : ev.all()) b.add(e);
    auto tl = b.finish();
    const PoolTimeline* p = tl->pool(kPool);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(steps(p->reuseAllowOpportunistic), (Steps{{10, 1}, {20, 0}, {30, 1}}));
    EXPECT_EQ(steps(p->reuseFollowEventDependencies), (Steps{{10, 1}}));
    EXPECT_EQ(steps(p->reuseAllowInternalDependencies), (Steps{{10, 1}}));
    EXPECT_EQ(p->reuseAllowOpportunistic.valueAt(25), 0u);
    EXPECT_EQ(p->attributeSeries(PoolAttr::ReuseAllowOpportunistic), &p->reuseAllowOpportunistic);
    EXPECT_EQ(p->attributeSeries(PoolAttr::UsedMemCurrent), nullptr);
    const PoolTimeline* q = tl->pool(0x200);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(steps(q->reuseFollowEventDependencies), (Steps{{10, 0}, {40, 1}}));
    EXPECT_TRUE(q->reuseAllowOpportunistic.empty()); // never seen: unknown, not assumed
}

TEST(Timeline, WaitOnTheSameStreamIsNoEdge) {
    test::Events ev;
    Event& rec = ev.add(EventKind::EventRecord, 1);
    rec.ptr = kEvt;
    rec.stream = kA;
    Event& same = ev.add(EventKind::StreamWaitEvent, 2);
    same.ptr = kEvt;
    same.stream = kA;
    Event& unknown = ev.add(EventKind::StreamWaitEvent, 3);
    unknown.ptr = 0xBAD;
    unknown.stream = kB;
    Event& rec2 = ev.add(EventKind::EventRecord, 4); // re-recorded on B: later waits follow it
    rec2.ptr = kEvt;
    rec2.stream = kB;
    Event& wait = ev.add(EventKind::StreamWaitEvent, 5);
    wait.ptr = kEvt;
    wait.stream = kA;
    TimelineBuilder b;
    for (const Event& e : ev.all()) b.add(e);
    auto tl = b.finish();
    ASSERT_EQ(tl->edges.size(), 1u);
    EXPECT_EQ(tl->edges[0].fromStream, kB);
    EXPECT_EQ(tl->edges[0].toStream, kA);
    EXPECT_EQ(tl->edges[0].recordTsNs, 4);
}


// ---- Bulk build: read-ahead, progressive (partial) timelines, cancellation -------------------

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

// Hand-built: the runtime's own retry (issue #11, point 2). A thread's first cuMemAllocAsync
// returns 201 (no context bound yet), the runtime binds one and the same request succeeds
// 0.23 ms later: kept as a retried call, not a failure, no marker. A real failure (2, out of
// memory) on the same thread stays one, and so does a 201 that nothing retried.
TEST(Timeline, HandBuiltRuntimeRetryIsNotAFailure) {
    test::Events ev;
    Event& first = ev.alloc(1'000'000, kA, 0, 0, 16 * MiB);
    first.result = 201;
    first.device = -1;
    test::Events::wm(ev.alloc(1'230'000, kA, kPool, 0x1000, 16 * MiB), 32 * MiB, 16 * MiB);
    Event& oom = ev.alloc(2'000'000, kA, kPool, 0, 1ull << 40);
    oom.result = 2;
    test::Events::wm(ev.alloc(2'100'000, kA, kPool, 0x2000, 1ull << 40), 32 * MiB, 16 * MiB);
    Event& lone = ev.alloc(3'000'000, kB, kPool, 0, 4 * MiB); // 201, then nothing of that size
    lone.result = 201;
    lone.tid = 7;
    ev.alloc(3'100'000, kB, kPool, 0x3000, 8 * MiB).tid = 7;
    Event& late = ev.alloc(4'000'000, kB, kPool, 0, 4 * MiB); // 201, retried too late
    late.result = 201;
    late.tid = 8;
    ev.alloc(4'000'000 + Timeline::kRetryWindowNs + 1, kB, kPool, 0x4000, 4 * MiB).tid = 8;
    TimelineBuilder b;
    for (const Event& e : ev.all()) b.add(e);
    auto tl = b.finish();
    ASSERT_EQ(tl->retried.size(), 1u);
    // (seqs in order of the adds above: first 1, oom 3, lone 5, late 7; the references to the
    // events are gone once the list grew)
    EXPECT_EQ(tl->retried[0].seq, 1u);
    EXPECT_EQ(tl->retried[0].result, 201);
    ASSERT_EQ(tl->failed.size(), 3u);
    EXPECT_EQ(tl->failed[0].result, 2);
    EXPECT_EQ(tl->failed[1].seq, 5u);
    EXPECT_EQ(tl->failed[2].seq, 7u);
    size_t failMarkers = 0;
    for (const Marker& m : tl->markers) {
        EXPECT_NE(m.seq, 1u);
        failMarkers += m.kind == EventKind::Alloc;
    }
    EXPECT_EQ(failMarkers, 3u);
    uint64_t failedInPools = 0, failedInStreams = 0;
    for (const PoolTimeline& p : tl->pools) failedInPools += p.failedCount;
    for (const StreamTimeline& s : tl->streams) failedInStreams += s.failedCount;
    EXPECT_EQ(failedInPools, 3u);
    EXPECT_EQ(failedInStreams, 3u);
    EXPECT_EQ(tl->allocations.size(), 4u);
}

// Hand-built: two threads race on one pool (issue #11, point 3). The used values derived in seq
// order reach 45 MiB, which the driver never saw: its UsedMemHigh, read by the next sample, is
// 42 MiB. The series is capped there and the peaks are the driver's; a peak the derived values
// missed (between two reads) is the driver's too.
TEST(Timeline, HandBuiltRacingThreadsPeaksAreTheDriversHighWatermarks) {
    test::Events ev;
    test::Events::wm(ev.alloc(100, kA, kPool, 0x1000, 20 * MiB), 64 * MiB, 20 * MiB);
    Event& other = test::Events::wm(ev.alloc(110, kB, kPool, 0x2000, 25 * MiB), 64 * MiB, 45 * MiB);
    other.tid = 7;
    test::Events::wm(ev.free(120, kA, kPool, 0x1000), 64 * MiB, 25 * MiB);
    test::Events::wm(ev.alloc(300, kA, kPool, 0x3000, 30 * MiB), 96 * MiB, 55 * MiB);
    TimelineBuilder b;
    b.add(ev.all()[0]);
    b.add(ev.all()[1]);
    b.add(ev.all()[2]);
    b.add(ev.sample(200, kPool, 64 * MiB, 25 * MiB, 64 * MiB, 42 * MiB));
    b.add(ev.all()[3]);
    b.add(ev.sample(400, kPool, 96 * MiB, 55 * MiB, 100 * MiB, 58 * MiB));
    auto tl = b.finish();
    const PoolTimeline* p = tl->pool(kPool);
    ASSERT_TRUE(p);
    EXPECT_EQ(steps(p->used), (Steps{{100, 20 * MiB}, {110, 42 * MiB}, {120, 25 * MiB},
                                     {300, 55 * MiB}}));
    EXPECT_EQ(p->peakUsed, 58 * MiB);
    EXPECT_EQ(p->peakUsedTsNs, 400);
    EXPECT_EQ(p->peakReserved, 100 * MiB);
    EXPECT_EQ(p->driverUsedHigh, 58 * MiB);
    EXPECT_EQ(p->driverReservedHigh, 100 * MiB);
    // Only the first window: the capped point is the peak, at its own time.
    TimelineBuilder c;
    for (int i = 0; i < 3; ++i) c.add(ev.all()[i]);
    c.add(ev.sample(200, kPool, 64 * MiB, 25 * MiB, 64 * MiB, 42 * MiB));
    auto t2 = c.finish();
    EXPECT_EQ(t2->pool(kPool)->peakUsed, 42 * MiB);
    EXPECT_EQ(t2->pool(kPool)->peakUsedTsNs, 110);
}

// Hand-built: threads 42 and 7 allocate from one pool 5 us apart; thread 42 alone later.
TEST(Timeline, HandBuiltRacingThreadsOrderNotKnown) {
    test::Events ev;
    ev.alloc(100'000, kA, kPool, 0x1000, MiB);
    ev.alloc(105'000, kB, kPool, 0x2000, MiB).tid = 7;
    ev.alloc(900'000, kA, kPool, 0x3000, MiB);
    ev.alloc(905'000, kA, kPool, 0x4000, MiB);
    TimelineBuilder b;
    for (const Event& e : ev.all()) b.add(e);
    auto tl = b.finish();
    EXPECT_EQ(tl->racingThreads(kPool, 103'000), (std::pair<uint32_t, uint32_t>{42, 7}));
    EXPECT_EQ(tl->racingThreads(kPool, 902'000), (std::pair<uint32_t, uint32_t>{0, 0}));
    EXPECT_EQ(tl->racingThreads(0x999, 103'000), (std::pair<uint32_t, uint32_t>{0, 0}));
}

// Hand-built: capping a long series keeps its block summaries and merges equal neighbours.
TEST(Series, HandBuiltCapFromKeepsSummaries) {
    Series s;
    for (int i = 0; i < 200; ++i) s.push(i, uint64_t(i % 7) * 10);
    EXPECT_FALSE(s.capFrom(150, 60));
    EXPECT_TRUE(s.capFrom(100, 35));
    for (size_t i = 1; i < s.size(); ++i) EXPECT_NE(s.v[i], s.v[i - 1]);
    for (size_t i = 0; i < s.size(); ++i) {
        if (s.t[i] >= 100) {
            EXPECT_LE(s.v[i], 35u);
        }
    }
    EXPECT_EQ(s.max(), 60u);
    EXPECT_EQ(s.maxIn(100, 200), 35u);
    EXPECT_EQ(s.valueAt(104), 35u); // 104 % 7 = 6: 60, capped
    EXPECT_EQ(s.valueAt(105), 0u);
}

// record --stacks-at-free: the free's site lands on its allocation, beside the alloc's own.
TEST(Timeline, FreeSiteIsKeptOnTheAllocation) {
    test::Events ev;
    ev.alloc(100, 0x10, 0x20, 0x7000, 64).site = 5;
    ev.alloc(150, 0x10, 0x20, 0x8000, 64).site = 5;
    ev.free(200, 0x10, 0x20, 0x7000).site = 9;
    ev.free(250, 0x10, 0x20, 0x8000);
    TimelineBuilder b;
    for (const Event& e : ev.all()) b.add(e);
    std::shared_ptr<const Timeline> tl = b.finish();
    ASSERT_TRUE(tl);
    ASSERT_EQ(tl->allocations.size(), 2u);
    EXPECT_EQ(tl->allocations[0].site, 5u);
    EXPECT_EQ(tl->allocations[0].freeSite, 9u);
    EXPECT_EQ(tl->allocations[1].site, 5u);
    EXPECT_EQ(tl->allocations[1].freeSite, 0u) << "a free recorded without a site";
}


} // namespace
} // namespace poolscope
