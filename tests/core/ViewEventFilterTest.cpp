// The events list's filter (poolscope/view/EventFilter.h) and the allocation an event belongs
// to (poolscope/view/AllocationLookup.h).
#include "TestTraces.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/view/AllocationLookup.h"
#include "poolscope/view/EventFilter.h"

#include <gtest/gtest.h>

namespace poolscope {
namespace {

using view::EventFilter;

Event event(EventKind k, int64_t ts, uint64_t size = 0, uint64_t stream = 7, uint64_t pool = 9) {
    Event e;
    e.kind = k;
    e.tsNs = ts;
    e.size = size;
    e.stream = stream;
    e.pool = pool;
    return e;
}

TEST(ViewEventFilter, ByKind) {
    EventFilter f;
    f.kindMask = EventFilter::bit(EventKind::Alloc) | EventFilter::bit(EventKind::PoolTrimTo);
    EXPECT_TRUE(f.matches(event(EventKind::Alloc, 1)));
    EXPECT_TRUE(f.matches(event(EventKind::PoolTrimTo, 1)));
    EXPECT_FALSE(f.matches(event(EventKind::Free, 1)));
    EXPECT_FALSE(f.matches(event(EventKind::StreamSynchronize, 1)));
    f.kindMask = 0;
    EXPECT_FALSE(f.matches(event(EventKind::Alloc, 1)));
}

TEST(ViewEventFilter, ByTimeHalfOpen) {
    EventFilter f;
    f.t0 = 100;
    f.t1 = 200;
    EXPECT_FALSE(f.matches(event(EventKind::Alloc, 99)));
    EXPECT_TRUE(f.matches(event(EventKind::Alloc, 100)));
    EXPECT_TRUE(f.matches(event(EventKind::Alloc, 199)));
    EXPECT_FALSE(f.matches(event(EventKind::Alloc, 200)));
}

TEST(ViewEventFilter, BySizeHidesKindsWithoutOne) {
    EventFilter f;
    EXPECT_TRUE(f.matches(event(EventKind::StreamSynchronize, 1)));
    f.minSize = 1024;
    f.maxSize = 4096;
    EXPECT_TRUE(f.sizeActive());
    EXPECT_FALSE(f.matches(event(EventKind::Alloc, 1, 1023)));
    EXPECT_TRUE(f.matches(event(EventKind::Alloc, 1, 1024)));
    EXPECT_TRUE(f.matches(event(EventKind::Free, 1, 4096)));
    EXPECT_FALSE(f.matches(event(EventKind::Free, 1, 4097)));
    // A trim's size is its target, not a block: hidden while a size is set.
    EXPECT_FALSE(f.matches(event(EventKind::PoolTrimTo, 1, 2048)));
}

TEST(ViewEventFilter, ByStreamPoolAndFailure) {
    EventFilter f;
    f.stream = 7;
    f.pool = 9;
    EXPECT_TRUE(f.matches(event(EventKind::Alloc, 1, 8, 7, 9)));
    EXPECT_FALSE(f.matches(event(EventKind::Alloc, 1, 8, 8, 9)));
    EXPECT_FALSE(f.matches(event(EventKind::Alloc, 1, 8, 7, 10)));
    f = {};
    f.failedOnly = true;
    Event oom = event(EventKind::Alloc, 1, 8);
    EXPECT_FALSE(f.matches(oom));
    oom.result = 2;
    EXPECT_TRUE(f.matches(oom));
}

TEST(ViewAllocationLookup, EventToAllocation) {
    // 0x1000 is allocated, freed and handed out again: each free finds its own allocation.
    test::Events ev;
    const Event a1 = ev.alloc(100, 0xA, 0x100, 0x1000, 64);
    const Event a2 = ev.alloc(110, 0xA, 0x100, 0x2000, 64);
    const Event f1 = ev.free(120, 0xA, 0x100, 0x1000);
    const Event a3 = ev.alloc(130, 0xB, 0x100, 0x1000, 128);
    const Event f3 = ev.free(140, 0xB, 0x100, 0x1000);
    const Event sync = ev.add(EventKind::StreamSynchronize, 150);
    TimelineBuilder b;
    for (const Event& e : ev.all())
        b.add(e);
    const auto tl = b.finish();
    ASSERT_EQ(tl->allocations.size(), 3u);
    EXPECT_EQ(view::allocationOf(*tl, a1), 0);
    EXPECT_EQ(view::allocationOf(*tl, a2), 1);
    EXPECT_EQ(view::allocationOf(*tl, a3), 2);
    EXPECT_EQ(view::allocationOf(*tl, f1), 0);
    EXPECT_EQ(view::allocationOf(*tl, f3), 2);
    EXPECT_EQ(view::allocationOf(*tl, sync), -1);
    Event stray = f3;
    stray.seq = 999;
    EXPECT_EQ(view::allocationOf(*tl, stray), -1);
}

} // namespace
} // namespace poolscope
