// The allocator replay: what each event means against the state before it.
#include <gtest/gtest.h>

#include "TestTraces.h"
#include "poolscope/EventFields.h"
#include "poolscope/analysis/PendingFrees.h"
#include "poolscope/replay/Replay.h"

namespace poolscope {
namespace {

using replay::Fact;
using replay::Replay;
using test::Events;

constexpr uint64_t kPool = 0x100, kPool2 = 0x200, kS1 = 0x11, kS2 = 0x22;

Event& record(Events& ev, int64_t ts, uint64_t stream, uint64_t cuEvent) {
    Event& e = ev.add(EventKind::EventRecord, ts);
    e.stream = stream;
    CuEventFields{cuEvent, 0}.into(e);
    return e;
}

Event& wait(Events& ev, int64_t ts, uint64_t stream, uint64_t cuEvent) {
    Event& e = ev.add(EventKind::StreamWaitEvent, ts);
    e.stream = stream;
    CuEventFields{cuEvent, 0}.into(e);
    return e;
}

Event& sync(Events& ev, int64_t ts, uint64_t stream) {
    Event& e = ev.add(EventKind::StreamSynchronize, ts);
    e.stream = stream;
    return e;
}

TEST(Replay, FreeResolvesItsBlockAndTheLiveTotals) {
    Events ev;
    ev.alloc(10, kS1, kPool, 0xA000, 100);
    ev.alloc(20, kS1, kPool, 0xB000, 50);
    ev.free(30, kS1, 0, 0xA000); // pool unknown at the free: the replay knows it
    Replay r;
    r.apply(ev.all()[0], 7);
    r.apply(ev.all()[1], 8);
    EXPECT_EQ(r.pools()[r.poolIndex(kPool)].liveBytes, 150u);
    EXPECT_EQ(r.streams()[r.streamIndex(kS1)].liveCount, 2u);
    const Fact& f = r.apply(ev.all()[2]);
    ASSERT_TRUE(f.freed);
    EXPECT_EQ(f.block.bytes, 100u);
    EXPECT_EQ(f.block.tag, 7u);
    EXPECT_EQ(f.block.allocTsNs, 10);
    EXPECT_EQ(r.pools()[f.pool].info.handle, kPool);
    EXPECT_FALSE(f.crossStream);
    EXPECT_EQ(r.pools()[f.pool].liveBytes, 50u);
    EXPECT_EQ(r.liveBlockCount(), 1u);
    ASSERT_NE(r.liveBlock(0xB000), nullptr);
    EXPECT_EQ(r.liveBlock(0xA000), nullptr);
}

TEST(Replay, UnmatchedFreeAndPointerReusedWithoutFree) {
    Events ev;
    ev.free(5, kS1, kPool, 0xDEAD);
    ev.alloc(10, kS1, kPool, 0xA000, 100);
    ev.alloc(20, kS2, kPool, 0xA000, 40); // its free was never recorded
    Replay r;
    EXPECT_TRUE(r.apply(ev.all()[0]).unmatchedFree);
    r.apply(ev.all()[1], 1);
    const Fact& f = r.apply(ev.all()[2], 2);
    ASSERT_TRUE(f.replacedLive);
    EXPECT_EQ(f.closed.tag, 1u);
    EXPECT_EQ(f.closed.bytes, 100u);
    EXPECT_EQ(r.unmatchedFrees(), 1u);
    EXPECT_EQ(r.reusedWithoutFree(), 1u);
    EXPECT_EQ(r.pools()[r.poolIndex(kPool)].liveBytes, 40u);
    EXPECT_EQ(r.streams()[r.streamIndex(kS1)].liveBytes, 0u);
    EXPECT_EQ(r.streams()[r.streamIndex(kS2)].liveBytes, 40u);
}

TEST(Replay, CrossStreamFreeIsOrderedOnlyByAWaitOnARecordAfterTheAlloc) {
    Events ev;
    record(ev, 5, kS1, 0xE1);            // before the alloc: orders nothing about it
    wait(ev, 6, kS2, 0xE1);
    ev.alloc(10, kS1, kPool, 0xA000, 64);
    ev.free(20, kS2, kPool, 0xA000);     // freed on S2 with no wait after the alloc
    ev.alloc(30, kS1, kPool, 0xB000, 64);
    record(ev, 40, kS1, 0xE1);
    wait(ev, 50, kS2, 0xE1);
    ev.free(60, kS2, kPool, 0xB000);
    Replay r;
    std::vector<Fact> facts;
    for (const Event& e : ev.all()) facts.push_back(r.apply(e));
    EXPECT_TRUE(facts[1].edge);
    EXPECT_EQ(r.streams()[facts[1].edgeFrom].info.handle, kS1);
    EXPECT_TRUE(facts[3].crossStream);
    EXPECT_FALSE(facts[3].orderedByWait);
    EXPECT_TRUE(facts[7].crossStream);
    EXPECT_TRUE(facts[7].orderedByWait);
    EXPECT_EQ(facts[7].orderRecordTsNs, 40);
    EXPECT_EQ(facts[7].orderWaitTsNs, 50);
}

// Hand-built: the runtime's own retry is the replay's to tell. A 201 (no context bound yet)
// followed by the same request succeeding on the same thread within the window: the success
// names the failed call's seq. Another size, another thread's call in between (it settles only
// its own thread), or too late: no retry.
TEST(Replay, HandBuiltRuntimeRetryIsAFactOnTheSuccessfulAlloc) {
    Events ev;
    ev.alloc(100, kS1, kPool, 0, 64).result = replay::kInvalidContext; // 1, thread 42
    Event& other = ev.alloc(110, kS2, kPool, 0xB000, 64);              // 2, thread 7
    other.tid = 7;
    ev.alloc(120, kS1, kPool, 0xA000, 64);                             // 3: retries 1
    ev.alloc(200, kS1, kPool, 0, 64).result = replay::kInvalidContext; // 4
    ev.alloc(210, kS1, kPool, 0xC000, 32);                             // 5: another size
    ev.alloc(300, kS1, kPool, 0, 64).result = replay::kInvalidContext; // 6
    ev.alloc(300 + replay::kRetryWindowNs + 1, kS1, kPool, 0xD000, 64); // 7: too late
    Replay r;
    std::vector<Fact> facts;
    for (const Event& e : ev.all()) facts.push_back(r.apply(e));
    EXPECT_TRUE(facts[0].failedAlloc);
    EXPECT_FALSE(facts[1].retry);
    ASSERT_TRUE(facts[2].retry);
    EXPECT_EQ(facts[2].retriedSeq, 1u);
    EXPECT_TRUE(facts[2].allocated);
    EXPECT_FALSE(facts[4].retry);
    EXPECT_FALSE(facts[6].retry);
}

TEST(Replay, PendingFreesClearBySynchronizeAndByWaitsOnLaterRecords) {
    Events ev;
    ev.alloc(1, kS1, kPool, 0xA000, 100);
    ev.alloc(2, kS1, kPool, 0xB000, 30);
    ev.alloc(3, kS2, kPool, 0xC000, 7);
    ev.free(10, kS1, kPool, 0xA000);   // S1 pending 100
    record(ev, 11, kS1, 0xE1);         // covers the 100
    ev.free(12, kS1, kPool, 0xB000);   // S1 pending 130
    wait(ev, 13, kS2, 0xE1);           // S2 may now reuse the first 100: pending 30
    ev.free(14, kS2, kPool, 0xC000);   // S2 pending 7
    sync(ev, 15, kS1);                 // S1 pending 0
    ev.add(EventKind::ContextSynchronize, 16); // everything on device 0
    Replay r;
    std::vector<uint64_t> s1, s2;
    for (const Event& e : ev.all()) {
        r.apply(e);
        const uint32_t i1 = r.streamIndex(kS1), i2 = r.streamIndex(kS2);
        s1.push_back(i1 == replay::kNone ? 0 : r.streams()[i1].pendingFreeBytes());
        s2.push_back(i2 == replay::kNone ? 0 : r.streams()[i2].pendingFreeBytes());
    }
    EXPECT_EQ(s1, (std::vector<uint64_t>{0, 0, 0, 100, 100, 130, 30, 30, 0, 0}));
    EXPECT_EQ(s2, (std::vector<uint64_t>{0, 0, 0, 0, 0, 0, 0, 7, 7, 0}));
}

TEST(Replay, EventSynchronizeClearsWhatWasFreedBeforeTheRecord) {
    Events ev;
    ev.alloc(1, kS1, kPool, 0xA000, 100);
    ev.alloc(2, kS1, kPool, 0xB000, 30);
    ev.free(3, kS1, kPool, 0xA000);
    record(ev, 4, kS1, 0xE9);
    ev.free(5, kS1, kPool, 0xB000);
    Event& es = ev.add(EventKind::EventSynchronize, 6);
    CuEventFields{0xE9, 0}.into(es);
    Replay r;
    for (const Event& e : ev.all()) r.apply(e);
    EXPECT_EQ(r.streams()[r.streamIndex(kS1)].pendingFreeBytes(), 30u);
}

TEST(Replay, KnobsStartAtTheDriverDefaultsForCreatedPoolsAndFollowChanges) {
    Events ev;
    Event& c = ev.add(EventKind::PoolCreate, 1);
    c.pool = kPool2;
    PoolCreateFields{PoolKind::Explicit, 1 << 30, 0, 1}.into(c);
    Event& set = ev.add(EventKind::PoolSetAttribute, 2);
    set.pool = kPool2;
    AttributeFields{PoolAttr::ReleaseThreshold, 64 << 20, uint64_t{0}}.into(set);
    // A pool that existed before recording: only the old value tells what held before.
    Event& knob = ev.add(EventKind::KnobChange, 3);
    knob.pool = kPool;
    KnobFields{uint16_t(PoolAttr::ReuseAllowOpportunistic), 0, 0, uint64_t{1}, KnobOrigin::Cli}
        .into(knob);
    // A failed change leaves the value alone.
    Event& bad = ev.add(EventKind::PoolSetAttribute, 4);
    bad.pool = kPool2;
    bad.result = 1;
    AttributeFields{PoolAttr::ReleaseThreshold, 5, std::nullopt}.into(bad);
    Replay r;
    r.apply(ev.all()[0]);
    const auto& p2 = r.pools()[r.poolIndex(kPool2)];
    EXPECT_EQ(p2.info.kind, PoolKind::Explicit);
    EXPECT_EQ(p2.info.maxSize, uint64_t{1} << 30);
    EXPECT_TRUE(p2.knob(PoolAttr::ReuseFollowEventDependencies).known);
    EXPECT_EQ(p2.knob(PoolAttr::ReuseFollowEventDependencies).value, 1u);
    const Fact& f1 = r.apply(ev.all()[1]);
    ASSERT_TRUE(f1.knobChanged);
    EXPECT_EQ(f1.knobBefore.value, 0u);
    EXPECT_EQ(r.pools()[r.poolIndex(kPool2)].knob(PoolAttr::ReleaseThreshold).value, 64u << 20);
    const Fact& f2 = r.apply(ev.all()[2]);
    ASSERT_TRUE(f2.knobChanged);
    EXPECT_TRUE(f2.knobBefore.known);
    EXPECT_EQ(f2.knobBefore.value, 1u);
    EXPECT_EQ(r.pools()[r.poolIndex(kPool)].knob(PoolAttr::ReuseAllowOpportunistic).value, 0u);
    EXPECT_FALSE(r.apply(ev.all()[3]).knobChanged);
    EXPECT_EQ(r.pools()[r.poolIndex(kPool2)].knob(PoolAttr::ReleaseThreshold).value, 64u << 20);
}

// The collector's writer: completes frees and derives used from the last read.
TEST(Replay, CompleteFillsFreesAndDerivedUsed) {
    Events ev;
    Event& a = ev.alloc(1, kS1, kPool, 0xA000, 100);
    Events::wm(a, 1 << 20, 0);
    a.flags |= kUsedDerived;
    Event& read = ev.alloc(2, kS1, kPool, 0xB000, 50);
    Events::wm(read, 1 << 20, 1000); // a driver read: the new base
    Event& f = ev.free(3, kS2, 0, 0xA000);
    Events::wm(f, 1 << 20, 0);
    f.flags |= kUsedDerived;
    Event& lost = ev.free(4, kS1, kPool, 0xFFFF); // its alloc was dropped
    Events::wm(lost, 1 << 20, 0);
    lost.flags |= kUsedDerived;
    std::vector<Event> es = ev.all();
    Replay r;
    r.complete(es[0]);
    EXPECT_EQ(es[0].used, 100u);
    r.complete(es[1]);
    EXPECT_EQ(es[1].used, 1000u);
    const Fact& ff = r.complete(es[2]);
    EXPECT_TRUE(ff.freed);
    EXPECT_EQ(es[2].pool, kPool);
    EXPECT_TRUE(es[2].has(kSizeKnown));
    EXPECT_EQ(FreeFields::of(es[2]).bytes, uint64_t{100});
    EXPECT_EQ(es[2].used, 900u);
    r.complete(es[3]);
    EXPECT_FALSE(es[3].has(kHasWatermarks));
    EXPECT_FALSE(es[3].has(kUsedDerived));
    EXPECT_FALSE(es[3].has(kSizeKnown));
}

// Hand-built: a free on another thread whose pool the collector could not ask at the call (no
// pool, no watermarks in the event) gets the block's pool, its used derived and the pool's
// reserved; before any watermark of the pool is known it gets none.
TEST(Replay, HandBuiltFreeWithoutPoolGetsDerivedWatermarks) {
    Events ev;
    Events::wm(ev.alloc(1, kS1, kPool, 0xA000, 100), 1 << 20, 300);
    ev.free(2, kS2, 0, 0xA000).tid = 7;
    ev.alloc(3, kS1, kPool2, 0xB000, 50); // no watermarks ever read for this pool
    ev.free(4, kS2, 0, 0xB000);
    std::vector<Event> es = ev.all();
    Replay r;
    for (Event& e : es) r.complete(e);
    EXPECT_EQ(es[1].pool, kPool);
    EXPECT_TRUE(es[1].has(kHasWatermarks));
    EXPECT_EQ(es[1].used, 200u);
    EXPECT_EQ(es[1].reserved, uint64_t{1} << 20);
    EXPECT_EQ(es[3].pool, kPool2);
    EXPECT_FALSE(es[3].has(kHasWatermarks));
}

// Hand-built: CUPTI's implicit releases are placed late (after events that happened later).
// A release timed before the pool's newest reading is older news: neither its watermarks nor its
// reserved take effect, and used derived after it still counts from the newer reading. One timed
// after every reading does.
TEST(Replay, HandBuiltLateReleaseOlderThanTheLastReadingIsNotApplied) {
    constexpr uint64_t MiB = 1 << 20;
    auto release = [](Events& ev, int64_t ts, uint64_t reservedAfter) -> Event& {
        Event& e = ev.add(EventKind::ImplicitRelease, ts);
        e.pool = kPool;
        ReleaseFields{reservedAfter, std::nullopt}.into(e);
        return e;
    };
    Events ev;
    Events::wm(ev.alloc(100, kS1, kPool, 0xA000, MiB), 32 * MiB, MiB);
    Events::wm(ev.alloc(200, kS1, kPool, 0xB000, MiB), 32 * MiB, 2 * MiB);
    Events::wm(release(ev, 150, 4 * MiB), 4 * MiB, MiB); // read at 150: one block in use
    release(ev, 180, 4 * MiB);                           // the same without watermarks
    Event& derived = ev.alloc(300, kS1, kPool, 0xC000, MiB);
    Events::wm(derived, 32 * MiB, 0);
    derived.flags |= kUsedDerived;
    release(ev, 400, 8 * MiB);                           // newer than every reading
    Events::wm(release(ev, 500, 3 * MiB), 3 * MiB, 3 * MiB);
    std::vector<Event> es = ev.all();
    Replay r;
    for (int i = 0; i < 2; ++i) r.complete(es[size_t(i)]);
    const Fact& stale = r.complete(es[2]);
    EXPECT_FALSE(stale.watermarks);
    EXPECT_FALSE(stale.reservedOnly);
    EXPECT_EQ(r.pools()[stale.pool].used, 2 * MiB);
    EXPECT_EQ(r.pools()[stale.pool].reserved, 32 * MiB);
    const Fact& staleNoWm = r.complete(es[3]);
    EXPECT_FALSE(staleNoWm.reservedOnly);
    EXPECT_EQ(r.pools()[staleNoWm.pool].reserved, 32 * MiB);
    r.complete(es[4]);
    EXPECT_EQ(es[4].used, 3 * MiB);
    const Fact& fresh = r.complete(es[5]);
    EXPECT_TRUE(fresh.reservedOnly);
    EXPECT_EQ(r.pools()[fresh.pool].reserved, 8 * MiB);
    const Fact& freshWm = r.complete(es[6]);
    EXPECT_TRUE(freshWm.watermarks);
    EXPECT_EQ(r.pools()[freshWm.pool].reserved, 3 * MiB);
    EXPECT_EQ(r.pools()[freshWm.pool].used, 3 * MiB);
}

// Hand-built as the collector wrote traces before it dropped a late release's watermarks (the
// bundled gpt2.poolscope, format 2): the allocs and frees after the release carry a used derived
// from the release's stale value. Read back, they count from the last right value until the next
// value read from the driver, which is taken as it is.
TEST(Replay, HandBuiltOldTraceDerivesUsedAgainAfterAStaleRelease) {
    constexpr uint64_t MiB = 1 << 20;
    Events ev;
    Events::wm(ev.alloc(100, kS1, kPool, 0xA000, 4 * MiB), 32 * MiB, 4 * MiB); // read
    Event& rel = ev.add(EventKind::ImplicitRelease, 50);
    rel.pool = kPool;
    ReleaseFields{32 * MiB, std::nullopt}.into(rel);
    Events::wm(rel, 32 * MiB, MiB); // read at 50 ns, placed after the read at 100 ns
    Event& a = ev.alloc(200, kS1, kPool, 0xB000, MiB);
    Events::wm(a, 32 * MiB, 2 * MiB); // derived by the writer from the stale 1 MiB
    a.flags |= kUsedDerived;
    Event& f = ev.free(300, kS1, kPool, 0xA000);
    FreeFields{0xA000, 4 * MiB}.into(f);
    Events::wm(f, 32 * MiB, 0); // 2 MiB - 4 MiB: the writer's rule left it at 0
    f.flags |= kUsedDerived;
    Events::wm(ev.alloc(400, kS1, kPool, 0xC000, MiB), 32 * MiB, 7 * MiB); // read: taken as is
    Event& after = ev.alloc(500, kS1, kPool, 0xD000, MiB);
    Events::wm(after, 32 * MiB, 8 * MiB);
    after.flags |= kUsedDerived;
    Replay r;
    std::vector<uint64_t> used;
    for (const Event& e : ev.all()) used.push_back(r.pools()[r.apply(e).pool].used);
    EXPECT_EQ(used, (std::vector<uint64_t>{4 * MiB, 4 * MiB, 5 * MiB, MiB, 7 * MiB, 8 * MiB}));
}

TEST(Replay, ImportedPointersGiveTheirPoolButNoSize) {
    Events ev;
    Event& imp = ev.add(EventKind::PointerImport, 1);
    imp.pool = kPool2;
    SharedPointerFields{0x7000}.into(imp);
    Event& fr = ev.free(2, kS1, 0, 0x7000);
    std::vector<Event> es = ev.all();
    Replay r;
    r.complete(es[0]);
    const Fact& f = r.complete(es[1]);
    EXPECT_TRUE(f.freed);
    EXPECT_TRUE(f.block.imported);
    EXPECT_EQ(es[1].pool, kPool2);
    EXPECT_FALSE(es[1].has(kSizeKnown));
    EXPECT_EQ(r.streams()[r.streamIndex(kS1)].pendingFreeBytes(), 0u);
    (void)fr;
}

TEST(Replay, ObserversSeeOnlyTheKindsTheyAskFor) {
    struct Count final : replay::Observer {
        int n = 0;
        void onFact(const Fact&, const Replay&) override { ++n; }
    } frees, all;
    Events ev;
    ev.alloc(1, kS1, kPool, 0xA000, 100);
    ev.free(2, kS1, kPool, 0xA000);
    sync(ev, 3, kS1);
    Replay r;
    r.subscribe(&frees, 1u << unsigned(EventKind::Free));
    r.subscribe(&all);
    for (const Event& e : ev.all()) r.apply(e);
    EXPECT_EQ(frees.n, 1);
    EXPECT_EQ(all.n, 3);
    r.unsubscribe(&all);
    r.apply(ev.all()[0]);
    EXPECT_EQ(all.n, 3);
}

TEST(PendingFreesAnalysis, SeriesPerStreamWithPeak) {
    Events ev;
    ev.alloc(1, kS1, kPool, 0xA000, 100);
    ev.alloc(2, kS1, kPool, 0xB000, 30);
    ev.free(10, kS1, kPool, 0xA000);
    ev.free(20, kS1, kPool, 0xB000);
    sync(ev, 30, kS1);
    ev.alloc(31, kS2, kPool, 0xC000, 5); // never freed: S2 gets no series
    Replay r;
    PendingFreesAnalysis a;
    r.subscribe(&a, PendingFreesAnalysis::kindMask());
    for (const Event& e : ev.all()) r.apply(e);
    const PendingFrees& p = a.result();
    ASSERT_EQ(p.streams.size(), 1u);
    const PendingFrees::Stream* s = p.stream(kS1);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(p.stream(kS2), nullptr);
    EXPECT_EQ(s->peak, 130u);
    EXPECT_EQ(s->peakTsNs, 20);
    EXPECT_EQ(s->bytes.valueAt(15), 100u);
    EXPECT_EQ(s->bytes.valueAt(25), 130u);
    EXPECT_EQ(s->bytes.valueAt(35), 0u);
}

} // namespace
} // namespace poolscope
