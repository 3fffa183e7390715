// The core lane layout and entity names (poolscope/view): hand-built traces whose rows, lanes
// and names are worked out by hand in each test.
#include "TestTraces.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/view/EntityNames.h"
#include "poolscope/view/LaneLayout.h"

#include <gtest/gtest.h>

namespace poolscope {
namespace {

using view::EntityNames;
using view::LaneKind;
using view::LaneLayout;

constexpr uint64_t kPool = 0x100, kA = 0xA, kB = 0xB, kC = 0xC, kEvt = 0xE;

std::shared_ptr<const Timeline> build(const test::Events& ev) {
    TimelineBuilder b;
    for (const Event& e : ev.all())
        b.add(e);
    return b.finish();
}

// One explicit pool on device 0. Stream A: a [100, 400), b [200, 300), c [300, 500) and d from
// 450, never freed. Stream B: one allocation. Stream C never allocates: it records an event
// stream B waits on.
test::Events packingScenario() {
    test::Events ev;
    Event& create = ev.add(EventKind::PoolCreate, 10);
    create.pool = kPool;
    create.variant = static_cast<uint8_t>(PoolKind::Explicit);
    ev.alloc(100, kA, kPool, 0x1000, 100); // a
    ev.alloc(200, kA, kPool, 0x2000, 100); // b
    ev.free(300, kA, kPool, 0x2000);
    ev.alloc(300, kA, kPool, 0x3000, 100); // c: b's row is free again at 300
    ev.free(400, kA, kPool, 0x1000);
    ev.alloc(450, kA, kPool, 0x4000, 100); // d: a's row (the lowest free one)
    ev.alloc(460, kB, kPool, 0x5000, 100); // e
    Event& rec = ev.add(EventKind::EventRecord, 470);
    rec.ptr = kEvt;
    rec.stream = kC;
    Event& wait = ev.add(EventKind::StreamWaitEvent, 480);
    wait.ptr = kEvt;
    wait.stream = kB;
    ev.free(500, kA, kPool, 0x3000);
    return ev;
}

TEST(ViewLaneLayout, PacksOverlappingAllocationsIntoLowestFreeRow) {
    const auto tl = build(packingScenario());
    ASSERT_EQ(tl->allocations.size(), 5u);
    ASSERT_EQ(tl->t1, 500);
    const auto L = LaneLayout::build(*tl);
    ASSERT_TRUE(L);
    // device, pool, stream A, stream B, stream C (no allocations)
    ASSERT_EQ(L->lanes.size(), 5u);
    EXPECT_EQ(L->lanes[0].kind, LaneKind::Device);
    EXPECT_EQ(L->lanes[1].kind, LaneKind::Pool);
    EXPECT_EQ(L->lanes[2].stream, kA);
    EXPECT_EQ(L->lanes[3].stream, kB);
    EXPECT_EQ(L->lanes[4].stream, kC);
    EXPECT_EQ(L->lanes[4].rowCount, 0);

    const view::Lane& a = L->lanes[2];
    ASSERT_EQ(a.rowCount, 2);
    const size_t r0 = size_t(a.firstRow), r1 = r0 + 1;
    EXPECT_EQ(L->rows[r0], (std::vector<uint32_t>{0, 3})); // a, d
    EXPECT_EQ(L->rows[r1], (std::vector<uint32_t>{1, 2})); // b, c
    EXPECT_EQ(L->rowStarts[r0], (std::vector<int64_t>{100, 450}));
    EXPECT_EQ(L->rowEnds[r0], (std::vector<int64_t>{400, 500})); // d live: ends at t1
    EXPECT_EQ(L->rowStarts[r1], (std::vector<int64_t>{200, 300}));
    EXPECT_EQ(L->rowEnds[r1], (std::vector<int64_t>{300, 500}));
    EXPECT_EQ(L->rowOfAlloc,
              (std::vector<int32_t>{int(r0), int(r1), int(r1), int(r0), int(r1 + 1)}));
    EXPECT_EQ(L->laneOfRow, (std::vector<int32_t>{2, 2, 3}));
    EXPECT_EQ(L->lanes[3].firstRow, int(r1 + 1));
    EXPECT_EQ(L->lanes[3].rowCount, 1);
}

TEST(ViewLaneLayout, LookupsTitlesAndNames) {
    const auto tl = build(packingScenario());
    const auto L = LaneLayout::build(*tl);
    ASSERT_TRUE(L);
    ASSERT_EQ(L->lanes.size(), 5u);
    EXPECT_EQ(L->laneOfPool(kPool), 1);
    EXPECT_EQ(L->laneOfStream(kA), 2);
    EXPECT_EQ(L->laneOf(kPool, kB), 3);
    EXPECT_EQ(L->laneOfStream(kC), 4);
    EXPECT_EQ(L->laneOf(kPool, kC), -1);
    EXPECT_EQ(L->laneOfStream(0xDEAD), -1);
    EXPECT_EQ(L->laneOfPool(0xDEAD), -1);

    EXPECT_EQ(L->lanes[0].title, "GPU 0");
    EXPECT_EQ(L->lanes[1].title, "pool #1 (explicit)");
    // Subtitles say what the entity did, never its handle (that is in the details pane).
    EXPECT_EQ(L->lanes[1].subtitle.rfind("peak ", 0), 0u) << L->lanes[1].subtitle;
    EXPECT_EQ(L->lanes[1].subtitle.find("0x"), std::string::npos) << L->lanes[1].subtitle;
    EXPECT_EQ(L->lanes[2].title, "stream #1");
    EXPECT_EQ(L->lanes[2].subtitle, "4 allocs · peak 200 B"); // a+b, a+c, c+d: 200 B at most
    EXPECT_EQ(L->lanes[3].subtitle, "1 alloc · peak 100 B");
    EXPECT_EQ(L->lanes[4].title, "stream #3");
    EXPECT_EQ(L->lanes[4].subtitle, "no allocations");
    EXPECT_EQ(L->names.pool(kPool), "pool #1 (explicit)");
    EXPECT_EQ(L->names.stream(kB), "stream #2");
    // The CLI's names, built without packing, are the window's.
    const EntityNames n = EntityNames::fromTimeline(*tl);
    for (uint64_t s : {kA, kB, kC, uint64_t(0), uint64_t(1), uint64_t(2), uint64_t(0x77)})
        EXPECT_EQ(n.stream(s), L->names.stream(s)) << s;
    EXPECT_EQ(n.pool(kPool), L->names.pool(kPool));
    EXPECT_EQ(n.pool(0x999), "0x999"); // no lane: its handle
}

TEST(ViewEntityNames, SpecialStreamsAndUnknownPool) {
    EXPECT_EQ(EntityNames::streamLabel(0), "default stream (0)");
    EXPECT_EQ(EntityNames::streamLabel(1), "legacy stream (0x1)");
    EXPECT_EQ(EntityNames::streamLabel(2), "per-thread stream (0x2)");
    EXPECT_EQ(EntityNames::streamLabel(0x7f00beef), "0x7f00beef");
    EXPECT_EQ(EntityNames::hexHandle(0), "0x0");
    EXPECT_EQ(EntityNames::hexHandle(0xABCDEF0123456789ull), "0xabcdef0123456789");

    // An allocation from an unknown pool (handle 0) on the per-thread stream, and one failure
    // on the legacy stream: the unknown-pool bucket takes the number it would have, unshown.
    test::Events ev;
    Event& create = ev.add(EventKind::PoolCreate, 10);
    create.pool = kPool;
    create.variant = static_cast<uint8_t>(PoolKind::Default);
    ev.alloc(100, 2, 0, 0x1000, 64);
    ev.alloc(150, kA, kPool, 0x2000, 64);
    Event& oom = ev.alloc(200, 1, kPool, 0, 1ull << 40);
    oom.result = 2;
    const auto tl = build(ev);
    const auto L = LaneLayout::build(*tl);
    ASSERT_TRUE(L);
    const EntityNames n = EntityNames::fromTimeline(*tl);
    for (const view::Lane& l : L->lanes) {
        if (l.kind == LaneKind::Pool) {
            EXPECT_EQ(l.title, n.pool(l.pool));
        } else if (l.kind == LaneKind::Stream) {
            EXPECT_EQ(l.title, n.stream(l.stream));
        }
    }
    EXPECT_EQ(n.pool(kPool).substr(n.pool(kPool).size() - 10), " (default)");
    EXPECT_EQ(n.pool(0).rfind("unknown pool (", 0), 0u) << n.pool(0);
    // Lanes for the per-thread and the legacy stream, subtitled by their meaning.
    const int perThread = L->laneOfStream(2), legacy = L->laneOfStream(1);
    ASSERT_GE(perThread, 0);
    ASSERT_GE(legacy, 0);
    EXPECT_EQ(L->lanes[size_t(perThread)].subtitle, "per-thread · 1 alloc · peak 64 B");
    EXPECT_EQ(L->lanes[size_t(legacy)].subtitle.rfind("legacy · ", 0), 0u)
        << L->lanes[size_t(legacy)].subtitle;
    ASSERT_EQ(L->lanes[size_t(legacy)].failed.size(), 1u);
}

TEST(ViewLaneLayout, AllocatorActivitySkipsIdleStartAndEnd) {
    // Hand-built: idle set-up until 1000, allocations 1000..1500, a trim at 1800, then idle
    // until 5000 (a stream record).
    test::Events ev;
    Event& create = ev.add(EventKind::PoolCreate, 10);
    create.pool = kPool;
    create.variant = static_cast<uint8_t>(PoolKind::Explicit);
    ev.alloc(1000, kA, kPool, 0x1000, 100);
    ev.free(1500, kA, kPool, 0x1000);
    Event& trim = ev.add(EventKind::PoolTrimTo, 1800);
    trim.pool = kPool;
    Event& rec = ev.add(EventKind::EventRecord, 5000);
    rec.ptr = kEvt;
    rec.stream = kA;
    const auto tl = build(ev);
    const view::TimeSpan act = view::allocatorActivity(*tl);
    EXPECT_EQ(act.begin, 1000);
    EXPECT_GE(act.end, 1500);
    EXPECT_LE(act.end, 1800);
    EXPECT_FALSE(act.empty());

    test::Events none; // no allocation at all: nothing to fit to
    none.add(EventKind::EventRecord, 5).stream = kA;
    EXPECT_TRUE(view::allocatorActivity(*build(none)).empty());
}

TEST(ViewLaneLayout, CancelledBuildReturnsNull) {
    const auto tl = build(packingScenario());
    std::atomic<bool> cancel{true};
    EXPECT_EQ(LaneLayout::build(*tl, &cancel), nullptr);
}

TEST(ViewLaneLayout, GallopPast) {
    const std::vector<int64_t> ends{1, 2, 3, 5, 8, 13, 21};
    EXPECT_EQ(view::gallopPast(ends, 0, 0), 0u);
    EXPECT_EQ(view::gallopPast(ends, 0, 5), 4u);
    EXPECT_EQ(view::gallopPast(ends, 0, 7), 4u);
    EXPECT_EQ(view::gallopPast(ends, 2, 20), 6u);
    EXPECT_EQ(view::gallopPast(ends, 5, 4), 5u); // never moves back
    EXPECT_EQ(view::gallopPast(ends, 0, 100), 7u);
    EXPECT_EQ(view::gallopPast(ends, 7, 0), 7u);
    // Against a plain upper_bound from every start.
    std::vector<int64_t> big;
    for (int64_t i = 0; i < 1000; ++i)
        big.push_back(i * 3 / 2);
    for (size_t from = 0; from < big.size(); from += 37)
        for (int64_t t = 0; t < 1600; t += 11) {
            const size_t want = std::max<size_t>(
                from, size_t(std::upper_bound(big.begin(), big.end(), t) - big.begin()));
            ASSERT_EQ(view::gallopPast(big, from, t), want) << from << " " << t;
        }
}

} // namespace
} // namespace poolscope
