// Issue #17: the reuse policies and release threshold a pool starts with, read from the driver
// when the collector first sees the pool (collector/src/PoolAttributes.h), written by the sink
// to pool_initial_attributes, and shown from the start of the trace. The driver is faked: each fake
// writes what cuMemPoolGetAttribute writes (an int for a reuse policy, a cuuint64_t for the
// threshold) or refuses.
#include "PoolAttributes.h"

#include "EventRing.h"
#include "RingRegistry.h"
#include "TraceSink.h"
#include "poolscope/EventFields.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"

#include <atomic>
#include <cstring>
#include <filesystem>
#include <gtest/gtest.h>
#include <unistd.h>

using namespace poolscope;
using namespace poolscope::collector;

namespace {

constexpr uint64_t kPool = 0x7f00aa00;

// A driver whose pool has event dependencies followed, opportunistic reuse off, internal
// dependencies allowed, and the threshold at UINT64_MAX.
CUresult fakeGet(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
    if (reinterpret_cast<uint64_t>(pool) != kPool) return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: {
        const int on = 1;
        std::memcpy(value, &on, sizeof on); // four bytes, as the driver writes an int
        return CUDA_SUCCESS;
    }
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: {
        const int off = 0;
        std::memcpy(value, &off, sizeof off);
        return CUDA_SUCCESS;
    }
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: {
        const cuuint64_t max = ~cuuint64_t{0};
        std::memcpy(value, &max, sizeof max);
        return CUDA_SUCCESS;
    }
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

// A driver that refuses the opportunistic policy (an imported pool, an older driver).
CUresult refusingGet(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
    if (attr == CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC) return CUDA_ERROR_NOT_SUPPORTED;
    return fakeGet(pool, attr, value);
}

uint64_t valueOf(const PoolAttributesRead& r, PoolAttr a) {
    for (int i = 0; i < r.count; ++i)
        if (r.values[i].attr == a) return r.values[i].value;
    ADD_FAILURE() << "attribute " << int(a) << " not read";
    return 0;
}

std::string tempTrace(const char* name) {
    auto p =
        std::filesystem::temp_directory_path() /
        (std::string("poolscope_attrs_") + name + "_" + std::to_string(getpid()) + ".poolscope");
    std::filesystem::remove(p);
    return p.string();
}

} // namespace

TEST(PoolAttributes, ReadsTheFourSettableAttributesWithTheDriversTypes) {
    const PoolAttributesRead r = readPoolAttributes(kPool, &fakeGet);
    ASSERT_EQ(r.count, 4);
    EXPECT_EQ(valueOf(r, PoolAttr::ReuseFollowEventDependencies), 1u);
    EXPECT_EQ(valueOf(r, PoolAttr::ReuseAllowOpportunistic), 0u);
    EXPECT_EQ(valueOf(r, PoolAttr::ReuseAllowInternalDependencies), 1u);
    EXPECT_EQ(valueOf(r, PoolAttr::ReleaseThreshold), ~uint64_t{0});
    for (int i = 0; i < r.count; ++i)
        EXPECT_EQ(r.values[i].pool, kPool);

    const PoolAttributesRead some = readPoolAttributes(kPool, &refusingGet);
    EXPECT_EQ(some.count, 3) << "a refused attribute is left out, not recorded as 0";
    for (int i = 0; i < some.count; ++i)
        EXPECT_NE(some.values[i].attr, PoolAttr::ReuseAllowOpportunistic);
    EXPECT_EQ(readPoolAttributes(0x1234, &fakeGet).count, 0); // the driver knows no such pool
    EXPECT_EQ(readPoolAttributes(0, &fakeGet).count, 0);
}

// Through the sink into the trace and back: a default pool whose attributes the program never
// sets shows the values read from the start; one the program changes shows the read value
// before the change and the new one after.
TEST(PoolAttributes, SinkWritesThemAndTheTimelineKnowsThemFromTheStart) {
    const std::string path = tempTrace("sink");
    RingRegistry rings;
    std::atomic<uint64_t> seq{1};
    EventRing ring(64);
    rings.add(&ring);
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w.ok());
        TraceSink sink(std::move(w.value()), rings, seq);
        sink.addDevice({0, "fake GPU", 0, ""});
        PoolInfo p;
        p.handle = kPool;
        p.device = 0;
        p.kind = PoolKind::Default;
        sink.addPool(p);
        const PoolAttributesRead r = readPoolAttributes(kPool, &fakeGet);
        sink.addPoolAttributes(std::span(r.values, size_t(r.count)));
        // Read again (a second registration would not, but the first value must win anyway).
        PoolAttributeValue again{kPool, PoolAttr::ReuseAllowOpportunistic, 1};
        sink.addPoolAttributes(std::span(&again, 1));
        auto push = [&](Event e) {
            e.seq = seq.fetch_add(1);
            e.pool = kPool;
            e.device = 0;
            ASSERT_TRUE(ring.push(e));
        };
        Event a;
        a.kind = EventKind::Alloc;
        a.ptr = 0x1000;
        a.size = 4096;
        a.tsNs = 1000;
        push(a);
        Event set;
        AttributeFields{PoolAttr::ReuseAllowInternalDependencies, 0, std::nullopt}.into(set);
        set.tsNs = 5000;
        push(set);
        Event f;
        f.kind = EventKind::Free;
        f.ptr = 0x1000;
        f.tsNs = 9000;
        push(f);
        ASSERT_TRUE(sink.close().ok());
    }
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader.ok()) << reader.error().message;
    auto attrs = (*reader)->poolAttributes();
    ASSERT_TRUE(attrs.ok());
    ASSERT_EQ(attrs->size(), 4u);
    for (const PoolAttributeValue& v : *attrs)
        if (v.attr == PoolAttr::ReuseAllowOpportunistic) EXPECT_EQ(v.value, 0u);
    for (const TraceDamage& d : (*reader)->tableDamage())
        ADD_FAILURE() << d.what;

    auto tl = buildTimeline(**reader);
    ASSERT_TRUE(tl.ok()) << tl.error().message;
    const PoolTimeline* p = (*tl)->pool(kPool);
    ASSERT_NE(p, nullptr);
    const int64_t t0 = (*tl)->t0, t1 = (*tl)->t1;
    for (const Series* s : {&p->reuseFollowEventDependencies, &p->reuseAllowOpportunistic,
                            &p->reuseAllowInternalDependencies, &p->releaseThreshold}) {
        ASSERT_FALSE(s->empty());
        EXPECT_EQ(s->t.front(), t0) << "known from the start of the trace";
    }
    EXPECT_EQ(p->reuseFollowEventDependencies.valueAt(t1), 1u);
    EXPECT_EQ(p->reuseAllowOpportunistic.valueAt(t1), 0u);
    EXPECT_EQ(p->releaseThreshold.valueAt(t0), ~uint64_t{0});
    // The program's change: on (as read) before it, off after.
    EXPECT_EQ(p->reuseAllowInternalDependencies.valueAt(t0), 1u);
    EXPECT_EQ(p->reuseAllowInternalDependencies.valueAt(t1), 0u);
    std::filesystem::remove(path);
}
