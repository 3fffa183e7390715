// EventFields.h: every kind's value struct goes into an Event and comes back unchanged, and
// describeEvent (the Details text of the window and of `poolscope dump`) reads them right.
#include <gtest/gtest.h>

#include "poolscope/EventFields.h"
#include "poolscope/EventText.h"

namespace poolscope {
namespace {

template <class F> Event into(const F& f, EventKind kind = EventKind::Alloc) {
    Event e;
    e.kind = kind; // for the structs shared by several kinds, whose into() leaves it
    f.into(e);
    return e;
}

TEST(EventFields, AllocRoundTrips) {
    const AllocFields f{0xffff'0000'0000'1000ull, 1ull << 40, AllocApi::FromPoolPtsz};
    const Event e = into(f);
    EXPECT_EQ(e.kind, EventKind::Alloc);
    const AllocFields g = AllocFields::of(e);
    EXPECT_EQ(g.ptr, f.ptr);
    EXPECT_EQ(g.bytes, f.bytes);
    EXPECT_EQ(g.api, f.api);
}

TEST(EventFields, FreeRoundTripsWithAndWithoutSize) {
    Event e = into(FreeFields{0xd000, 4096});
    EXPECT_EQ(e.kind, EventKind::Free);
    EXPECT_TRUE(e.has(kSizeKnown));
    EXPECT_EQ(FreeFields::of(e).ptr, 0xd000u);
    EXPECT_EQ(FreeFields::of(e).bytes, std::optional<uint64_t>(4096));
    FreeFields{0xd000, std::nullopt}.into(e); // clears what a size set
    EXPECT_FALSE(e.has(kSizeKnown));
    EXPECT_EQ(FreeFields::of(e).bytes, std::nullopt);
}

TEST(EventFields, PoolCreateAndImportRoundTrip) {
    const PoolCreateFields f{PoolKind::Explicit, 1ull << 33, 0x9, 1};
    for (EventKind k : {EventKind::PoolCreate, EventKind::PoolImport}) {
        const Event e = into(f, k);
        EXPECT_EQ(e.kind, k);
        const PoolCreateFields g = PoolCreateFields::of(e);
        EXPECT_EQ(g.kind, f.kind);
        EXPECT_EQ(g.maxSize, f.maxSize);
        EXPECT_EQ(g.handleTypes, f.handleTypes);
        EXPECT_EQ(g.locationType, f.locationType);
    }
}

TEST(EventFields, AttributeRoundTripsWithAndWithoutOldValue) {
    Event e = into(AttributeFields{PoolAttr::ReleaseThreshold, ~uint64_t{0}, 1ull << 20});
    EXPECT_EQ(e.kind, EventKind::PoolSetAttribute);
    EXPECT_TRUE(e.has(kHasOldValue));
    AttributeFields g = AttributeFields::of(e);
    EXPECT_EQ(g.attr, PoolAttr::ReleaseThreshold);
    EXPECT_EQ(g.value, ~uint64_t{0});
    EXPECT_EQ(g.old, std::optional<uint64_t>(1ull << 20));
    AttributeFields{PoolAttr::ReuseAllowOpportunistic, 1, std::nullopt}.into(e);
    g = AttributeFields::of(e);
    EXPECT_EQ(g.attr, PoolAttr::ReuseAllowOpportunistic);
    EXPECT_EQ(g.value, 1u);
    EXPECT_EQ(g.old, std::nullopt);
}

TEST(EventFields, KnobRoundTrips) {
    const KnobFields f{uint16_t(KnobAction::TrimTo), 1ull << 30, 1ull << 31, 1ull << 32,
                       KnobOrigin::Script};
    const Event e = into(f);
    EXPECT_EQ(e.kind, EventKind::KnobChange);
    EXPECT_TRUE(e.has(kFromPoolScope));
    const KnobFields g = KnobFields::of(e);
    EXPECT_EQ(g.target, f.target);
    EXPECT_FALSE(g.isAttribute());
    EXPECT_EQ(g.action(), KnobAction::TrimTo);
    EXPECT_EQ(g.requested, f.requested);
    EXPECT_EQ(g.value, f.value);
    EXPECT_EQ(g.old, f.old);
    EXPECT_EQ(g.origin, KnobOrigin::Script);
}

TEST(EventFields, SingleValueKindsRoundTrip) {
    EXPECT_EQ(TrimFields::of(into(TrimFields{123456})).minBytesToKeep, 123456u);
    EXPECT_EQ(into(TrimFields{1}).kind, EventKind::PoolTrimTo);

    const ReleaseFields r = ReleaseFields::of(into(ReleaseFields{1024, 4096}));
    EXPECT_EQ(r.reservedAfter, 1024u);
    EXPECT_EQ(r.reservedBefore, std::optional<uint64_t>(4096));
    EXPECT_EQ(ReleaseFields::of(into(ReleaseFields{1024, std::nullopt})).reservedBefore,
              std::nullopt);

    EXPECT_EQ(SetMempoolFields::of(into(SetMempoolFields{2})).locationType, 2u);
    EXPECT_EQ(into(SetMempoolFields{}).kind, EventKind::DeviceSetMempool);
    EXPECT_EQ(PoolExportFields::of(into(PoolExportFields{8})).handleType, 8u);
    EXPECT_EQ(into(PoolExportFields{}).kind, EventKind::PoolExport);
    for (EventKind k : {EventKind::PointerExport, EventKind::PointerImport})
        EXPECT_EQ(SharedPointerFields::of(into(SharedPointerFields{0xbeef}, k)).ptr, 0xbeefu);
}

TEST(EventFields, CuEventRoundTripsForEachKind) {
    for (EventKind k :
         {EventKind::EventRecord, EventKind::StreamWaitEvent, EventKind::EventSynchronize}) {
        const CuEventFields g = CuEventFields::of(into(CuEventFields{0xe0e0, 1}, k));
        EXPECT_EQ(g.event, 0xe0e0u);
        EXPECT_EQ(g.flags, 1u);
    }
}

TEST(EventFields, SetAccessStreamCreateAndSampleRoundTrip) {
    const SetAccessFields a = SetAccessFields::of(into(SetAccessFields{3, 2}));
    EXPECT_EQ(a.accessFlags, 3u);
    EXPECT_EQ(a.descriptors, 2u);
    for (int priority : {-5, 0, 5}) {
        const Event e = into(StreamCreateFields{1, priority});
        EXPECT_EQ(e.kind, EventKind::StreamCreate);
        EXPECT_EQ(StreamCreateFields::of(e).flags, 1u);
        EXPECT_EQ(StreamCreateFields::of(e).priority, priority);
    }
    const SampleFields s = SampleFields::of(into(SampleFields{1ull << 34, 1ull << 33}));
    EXPECT_EQ(s.reservedHigh, 1ull << 34);
    EXPECT_EQ(s.usedHigh, 1ull << 33);
}

TEST(EventText, AllocsAndFailures) {
    EXPECT_EQ(describeEvent(into(AllocFields{0x1, 256, AllocApi::Async})), "async");
    EXPECT_EQ(describeEvent(into(AllocFields{0x1, 256, AllocApi::FromPool})), "from_pool");
    Event failed = into(AllocFields{0, 1ull << 40, AllocApi::Async});
    failed.result = 2;
    EXPECT_EQ(describeEvent(failed), "FAILED: CUDA_ERROR_OUT_OF_MEMORY (2)");
}

TEST(EventText, AttributesAndKnobs) {
    EXPECT_EQ(describeEvent(into(AttributeFields{PoolAttr::ReleaseThreshold, 1ull << 30,
                                                 64ull << 20})),
              "release_threshold: 64.0 MiB → 1.00 GiB");
    EXPECT_EQ(describeEvent(into(AttributeFields{PoolAttr::ReleaseThreshold, 1ull << 30,
                                                 std::nullopt})),
              "release_threshold: 1.00 GiB");
    EXPECT_EQ(describeEvent(into(AttributeFields{PoolAttr::ReuseAllowOpportunistic, 0, 1})),
              "reuse_allow_opportunistic: on → off");
    EXPECT_EQ(describeEvent(into(KnobFields{uint16_t(PoolAttr::ReleaseThreshold), 0, 512, 0,
                                            KnobOrigin::Gui})),
              "release_threshold: 0 B → 512 B (set by PoolScope)");
    EXPECT_EQ(describeEvent(into(KnobFields{uint16_t(KnobAction::TrimTo), 0, 1ull << 20,
                                            std::nullopt, KnobOrigin::Cli})),
              "trim to keep at least 0 B: reserved 1.00 MiB (set by PoolScope)");
    EXPECT_EQ(describeEvent(into(KnobFields{uint16_t(KnobAction::TrimTo), 4096, 1ull << 20,
                                            64ull << 20, KnobOrigin::Gui})),
              "trim to keep at least 4.00 KiB: reserved 64.0 MiB → 1.00 MiB (set by PoolScope)");
}

TEST(EventText, PoolsReleasesEventsAndSamples) {
    EXPECT_EQ(describeEvent(into(TrimFields{32ull << 20})), "keep at least 32.0 MiB");
    EXPECT_EQ(describeEvent(into(ReleaseFields{2048, 8192})), "pool size after release 2.00 KiB");
    EXPECT_EQ(describeEvent(into(PoolCreateFields{PoolKind::Explicit, 0, 0, 1},
                                 EventKind::PoolCreate)),
              "explicit pool, max size unlimited");
    EXPECT_EQ(describeEvent(into(PoolCreateFields{PoolKind::Explicit, 1ull << 30, 0, 1},
                                 EventKind::PoolCreate)),
              "explicit pool, max size 1.00 GiB");
    EXPECT_EQ(describeEvent(into(CuEventFields{0xabc0, 0}, EventKind::StreamWaitEvent)),
              "event 0xabc0");
    Event set = into(SetMempoolFields{1});
    set.device = 3;
    EXPECT_EQ(describeEvent(set), "device 3 current pool");
    EXPECT_EQ(describeEvent(into(SampleFields{3ull << 20, 1ull << 20})),
              "reserved high 3.00 MiB, used high 1.00 MiB");
    EXPECT_EQ(describeEvent(into(FreeFields{0xd000, 4096})), "");
}

} // namespace
} // namespace poolscope
