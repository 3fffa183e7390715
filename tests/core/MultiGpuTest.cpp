// Several GPUs (issue #19) through the timeline, the report and the trace file: each device's
// pools together, pool access across devices, peer copies, and the trace format that holds them.
// Every trace here is hand-built (named so), not recorded.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "MultiGpuBuilt.h"
#include "TestTraces.h"
#include "poolscope/EventFields.h"
#include "poolscope/EventText.h"
#include "poolscope/Report.h"
#include "poolscope/Schema.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/view/LaneLayout.h"

using namespace poolscope;
using poolscope::test::Events;
using poolscope::test::TwoDeviceBuilt;

namespace {

constexpr uint64_t MiB = uint64_t{1} << 20;
constexpr uint64_t kD0 = 0xD0, kE0 = 0xE0, kD1 = 0xD1, kS0 = 0x51, kS1 = 0x61;

std::shared_ptr<const Timeline> timelineOf(const std::vector<Event>& events) {
    TimelineBuilder b;
    for (const Event& e : events) b.add(e);
    return b.finish();
}

Event& onDevice(Event& e, int16_t d) {
    e.device = d;
    return e;
}

} // namespace

TEST(MultiGpu, HandBuiltDeviceTotalsArePeaksOfTheSumNotSumsOfPeaks) {
    Events ev;
    Events::wm(ev.alloc(100, kS0, kD0, 0xA000, 20 * MiB), 32 * MiB, 20 * MiB);
    Events::wm(onDevice(ev.alloc(150, kS1, kD1, 0xD000, 8 * MiB), 1), 8 * MiB, 8 * MiB);
    Events::wm(ev.alloc(200, kS0, kE0, 0xB000, 10 * MiB), 16 * MiB, 10 * MiB);
    Events::wm(ev.free(300, kS0, kD0, 0xA000), 0, 0);
    Events::wm(ev.alloc(400, kS0, kE0, 0xC000, 50 * MiB), 64 * MiB, 60 * MiB);
    const auto tl = timelineOf(ev.all());
    ASSERT_EQ(tl->deviceTotals.size(), 2u);
    const DeviceTotals* d0 = tl->totalsOf(0);
    const DeviceTotals* d1 = tl->totalsOf(1);
    ASSERT_TRUE(d0 && d1);
    EXPECT_EQ(d0->poolCount, 2u);
    EXPECT_EQ(d0->peakReserved, 64 * MiB); // at 400; at 200 it was 32 + 16 = 48
    EXPECT_EQ(d0->peakReservedTsNs, 400);
    EXPECT_LT(d0->peakReserved, tl->pool(kD0)->peakReserved + tl->pool(kE0)->peakReserved);
    EXPECT_EQ(d0->peakUsed, 60 * MiB);
    EXPECT_EQ(d0->peakUsedTsNs, 400);
    EXPECT_EQ(d0->finalReserved, 64 * MiB);
    EXPECT_EQ(d0->allocCount, 3u);
    EXPECT_EQ(d0->bytesAllocated, 80 * MiB);
    EXPECT_EQ(d0->liveAtEndBytes, 60 * MiB);
    EXPECT_EQ(d0->liveAtEndCount, 2u);
    EXPECT_EQ(d1->poolCount, 1u);
    EXPECT_EQ(d1->peakReserved, 8 * MiB);
    EXPECT_EQ(d1->allocCount, 1u);
    EXPECT_EQ(tl->totalsOf(2), nullptr);
}

TEST(MultiGpu, HandBuiltTwoDeviceTraceTotalsMatchABruteForceSumOverTime) {
    const TwoDeviceBuilt b = test::twoDeviceBuilt();
    TimelineBuilder builder;
    builder.setEntities(b.devices, b.pools, b.streams);
    for (const Event& e : b.events) builder.add(e);
    const auto tl = builder.finish();
    ASSERT_EQ(tl->deviceTotals.size(), 2u);
    // The oracle: the sum of the device's pools' values at every instant any of them changed.
    for (const DeviceTotals& d : tl->deviceTotals) {
        std::set<int64_t> times;
        std::vector<const PoolTimeline*> pools;
        uint64_t sumOfPeaks = 0;
        for (const PoolTimeline& p : tl->pools)
            if (p.info.device == d.device) {
                pools.push_back(&p);
                sumOfPeaks += p.peakReserved;
                times.insert(p.reserved.t.begin(), p.reserved.t.end());
                times.insert(p.used.t.begin(), p.used.t.end());
            }
        uint64_t peak = 0, peakUsed = 0;
        for (int64_t t : times) {
            uint64_t r = 0, u = 0;
            for (const PoolTimeline* p : pools) {
                r += p->reserved.valueAt(t);
                u += p->used.valueAt(t);
            }
            peak = std::max(peak, r);
            peakUsed = std::max(peakUsed, u);
        }
        EXPECT_EQ(d.poolCount, 2u) << "device " << d.device;
        EXPECT_EQ(d.peakReserved, peak) << "device " << d.device;
        EXPECT_EQ(d.peakUsed, peakUsed) << "device " << d.device;
        EXPECT_LT(d.peakReserved, sumOfPeaks) << "the built trace staggers its pools' peaks";
        EXPECT_EQ(d.allocCount, b.allocs[d.device]);
        EXPECT_EQ(d.liveAtEndBytes, 0u);
    }
}

TEST(MultiGpu, HandBuiltPoolAccessKeepsTheLatestGrantPerDevice) {
    Events ev;
    ev.add(EventKind::PoolCreate, 10).pool = kE0;
    auto grant = [&](int64_t ts, int16_t dev, uint32_t flags, uint8_t loc = 1) {
        Event& e = ev.add(EventKind::PoolSetAccess, ts);
        e.pool = kE0;
        e.device = dev;
        SetAccessFields{flags, 1, loc}.into(e);
    };
    grant(20, 1, 1);
    grant(30, 2, 3);
    grant(40, 1, 3);       // GPU 1 upgraded to read-write
    grant(50, -1, 3, 4);   // a host NUMA node
    const auto tl = timelineOf(ev.all());
    const PoolTimeline* p = tl->pool(kE0);
    ASSERT_TRUE(p);
    ASSERT_EQ(p->access.size(), 3u);
    EXPECT_EQ(p->access[0].device, 1);
    EXPECT_EQ(p->access[0].flags, 3u);
    EXPECT_EQ(p->access[0].tsNs, 40);
    EXPECT_EQ(p->access[1].device, 2);
    EXPECT_EQ(p->access[2].device, -1);
    EXPECT_EQ(p->access[2].locationType, 4u);
    EXPECT_EQ(p->info.device, 0) << "the grant's device is the one given access, not the pool's";
    size_t markers = 0;
    for (const Marker& m : tl->markers) markers += m.kind == EventKind::PoolSetAccess;
    EXPECT_EQ(markers, 4u);
    Event e;
    e.device = 1;
    SetAccessFields{3, 2, 1}.into(e);
    EXPECT_EQ(describeEvent(e), "GPU 1: read-write (one of 2 in the call)");
}

TEST(MultiGpu, HandBuiltPeerCopiesAreTotalledPerDirectionAndMarkedOnTheirStream) {
    const TwoDeviceBuilt b = test::twoDeviceBuilt();
    TimelineBuilder builder;
    builder.setEntities(b.devices, b.pools, b.streams);
    for (const Event& e : b.events) builder.add(e);
    const auto tl = builder.finish();
    ASSERT_EQ(tl->peerCopies.size(), 2u);
    EXPECT_EQ(tl->peerCopies[0].srcDevice, 0);
    EXPECT_EQ(tl->peerCopies[0].dstDevice, 1);
    EXPECT_EQ(tl->peerCopies[0].count, b.peerCopies01);
    EXPECT_EQ(tl->peerCopies[0].bytes, b.peerBytes01);
    EXPECT_EQ(tl->peerCopies[1].srcDevice, 1);
    EXPECT_EQ(tl->peerCopies[1].count, b.peerCopies10);
    EXPECT_EQ(tl->peerCopies[1].bytes, b.peerBytes10);
    const auto layout = view::LaneLayout::build(*tl);
    ASSERT_TRUE(layout);
    const view::LaneLayout& L = *layout;
    size_t onStream1 = 0;
    for (const view::Lane& l : L.lanes)
        if (l.kind == view::LaneKind::Stream && l.stream == TwoDeviceBuilt::kStream1)
            for (uint32_t i : l.markers) onStream1 += tl->markers[i].kind == EventKind::PeerCopy;
    EXPECT_EQ(onStream1, b.peerCopies01);
    // Each device lane holds its own pools and streams.
    for (const view::Lane& l : L.lanes)
        if (l.kind == view::LaneKind::Pool || l.kind == view::LaneKind::Stream) {
            const int want = l.kind == view::LaneKind::Pool ? tl->pool(l.pool)->info.device
                                                             : tl->stream(l.stream)->info.device;
            EXPECT_EQ(l.device, want);
        }
    Event e;
    PeerCopyFields{0x1, 0x2, 16 * MiB, 0, 1, PeerCopyApi::Async}.into(e);
    EXPECT_EQ(describeEvent(e), "16.0 MiB GPU 0 → GPU 1");
}

TEST(MultiGpu, HandBuiltReportHasDeviceTotalsPeerCopiesAndSharedPools) {
    const TwoDeviceBuilt b = test::twoDeviceBuilt();
    TimelineBuilder builder;
    builder.setEntities(b.devices, b.pools, b.streams);
    for (const Event& e : b.events) builder.add(e);
    const auto tl = builder.finish();
    const Report r = buildReport(*tl);
    ASSERT_EQ(r.deviceTotals.size(), 2u);
    EXPECT_EQ(r.peerAccessGrants, 2u);
    const std::string text = reportToText(r);
    EXPECT_NE(text.find("Devices (their pools together)"), std::string::npos) << text;
    EXPECT_NE(text.find("peer copies GPU 0 → GPU 1: " + std::to_string(b.peerCopies01)),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("(GPU 0) shared: GPU 1 read-write"), std::string::npos) << text;
    EXPECT_NE(text.find("(GPU 1) shared: GPU 0 read-only"), std::string::npos) << text;
    const auto j = nlohmann::json::parse(reportToJson(r));
    ASSERT_EQ(j["device_totals"].size(), 2u);
    EXPECT_EQ(j["device_totals"][1]["device"], 1);
    EXPECT_EQ(j["device_totals"][1]["peak_reserved"], tl->totalsOf(1)->peakReserved);
    EXPECT_EQ(j["peer_copies"][0]["bytes"], b.peerBytes01);
    bool shared = false;
    for (const auto& p : j["pools"])
        if (p["handle"] == formatHandle(TwoDeviceBuilt::kExplicit0)) {
            ASSERT_EQ(p["access"].size(), 1u);
            EXPECT_EQ(p["access"][0]["device"], 1);
            EXPECT_EQ(p["access"][0]["access"], "read-write");
            shared = true;
        }
    EXPECT_TRUE(shared);
}

TEST(MultiGpu, HandBuiltOneDeviceReportHasNoDevicesSection) {
    Events ev;
    Events::wm(ev.alloc(100, kS0, kD0, 0xA000, 20 * MiB), 32 * MiB, 20 * MiB);
    const Report r = buildReport(*timelineOf(ev.all()));
    EXPECT_EQ(r.deviceTotals.size(), 1u);
    EXPECT_EQ(reportToText(r).find("Devices (their pools together)"), std::string::npos);
}

TEST(MultiGpu, HandBuiltTraceWritesFormat6AndReadsPeerCopiesBack) {
    test::ScratchDir dir;
    const std::string path = dir.file("two_device_built.poolscope");
    TwoDeviceBuilt b;
    ASSERT_TRUE(test::writeTwoDeviceBuiltTrace(path, &b));
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ((*r)->schemaVersion(), schema::kPeerCopyVersion);
    static_assert(schema::kPeerCopyVersion > schema::kBeyondPoolVersion);
    EXPECT_TRUE((*r)->damage().empty());
    std::vector<Event> read;
    ASSERT_TRUE((*r)->forEachEvent([&](const Event& e) {
        read.push_back(e);
        return true;
    }));
    ASSERT_EQ(read.size(), b.events.size());
    size_t peers = 0;
    for (size_t i = 0; i < read.size(); ++i) {
        EXPECT_EQ(read[i].kind, b.events[i].kind) << i;
        if (read[i].kind != EventKind::PeerCopy) continue;
        ++peers;
        const PeerCopyFields got = PeerCopyFields::of(read[i]), want = PeerCopyFields::of(b.events[i]);
        EXPECT_EQ(got.srcDevice, want.srcDevice);
        EXPECT_EQ(got.dstDevice, want.dstDevice);
        EXPECT_EQ(got.bytes, want.bytes);
        EXPECT_EQ(read[i].stream, b.events[i].stream);
    }
    EXPECT_EQ(peers, b.peerCopies01 + b.peerCopies10);
}

TEST(MultiGpu, HandBuiltPeerCopyInAFormat5TraceIsDamage) {
    test::ScratchDir dir;
    const std::string path = dir.file("relabelled.poolscope");
    Events ev;
    Event& e = ev.add(EventKind::PeerCopy, 1);
    PeerCopyFields{0x1, 0x2, 4096, 0, 1, PeerCopyApi::Async}.into(e);
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        ASSERT_TRUE((*w)->append(ev.all()));
        ASSERT_TRUE((*w)->close());
    }
    test::execSql(path, "PRAGMA user_version = " + std::to_string(schema::kBeyondPoolVersion));
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    size_t n = 0;
    (void)(*r)->forEachEvent([&](const Event&) {
        ++n;
        return true;
    });
    EXPECT_EQ(n, 0u);
    bool named = false;
    for (const TraceDamage& d : (*r)->damage())
        named = named || d.what.find("peer_copy event, which trace format 5 cannot hold") != std::string::npos;
    EXPECT_TRUE(named);
}

TEST(MultiGpu, RecordedFormat5SamplesStillOpen) {
    for (const char* name : {"beyond_pool", "churn"}) {
        const std::string path = std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope";
        auto r = TraceReader::open(path);
        ASSERT_TRUE(r) << path << ": " << r.error().message;
        EXPECT_LT((*r)->schemaVersion(), schema::kPeerCopyVersion);
        size_t n = 0;
        ASSERT_TRUE((*r)->forEachEvent([&](const Event&) {
            ++n;
            return true;
        }));
        EXPECT_GT(n, 0u);
    }
}
