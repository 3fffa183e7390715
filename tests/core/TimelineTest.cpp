// Reconstruction on hand-built event sequences. Every expected value below is worked out by hand
// from the sequence in the same test, so a change in semantics shows up as a specific mismatch.
#include <gtest/gtest.h>

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
