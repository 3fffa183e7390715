// Memory outside the stream-ordered pools (issue #18): cudaMalloc-style device memory, cudaFree's
// device-wide synchronizations and pinned host memory, through the replay, the timeline, the
// report and the trace file. Every trace here is hand-built (named so), not recorded.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "TestTraces.h"
#include "poolscope/EventCodec.h"
#include "poolscope/EventFields.h"
#include "poolscope/EventText.h"
#include "poolscope/Report.h"
#include "poolscope/Schema.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/replay/Replay.h"
#include "poolscope/view/LaneLayout.h"

using namespace poolscope;
using namespace poolscope::replay;
using poolscope::test::Events;

namespace {

constexpr uint64_t kPool = 0x9000, kS1 = 0x51, kS2 = 0x52;
constexpr uint64_t MiB = uint64_t{1} << 20;

Event& deviceAlloc(Events& ev, int64_t ts, uint64_t ptr, uint64_t bytes, int16_t device = 0,
                   DeviceAllocApi api = DeviceAllocApi::Malloc) {
    Event& e = ev.add(EventKind::DeviceAlloc, ts);
    DeviceAllocFields{ptr, bytes, api, 0}.into(e);
    e.device = device;
    return e;
}

Event& deviceFree(Events& ev, int64_t ts, uint64_t ptr, int16_t device = 0, uint64_t callNs = 0) {
    Event& e = ev.add(EventKind::DeviceFree, ts);
    ReleaseMemFields{ptr, std::nullopt, callNs}.into(e, EventKind::DeviceFree);
    e.device = device;
    return e;
}

Event& pinned(Events& ev, EventKind kind, int64_t ts, uint64_t ptr, uint64_t bytes,
              uint32_t flags = 0) {
    Event& e = ev.add(kind, ts);
    PinnedFields{ptr, bytes, flags}.into(e, kind);
    return e;
}

Event& release(Events& ev, EventKind kind, int64_t ts, uint64_t ptr) {
    Event& e = ev.add(kind, ts);
    ReleaseMemFields{ptr}.into(e, kind);
    return e;
}

// A hand-built mixed workload: stream-ordered allocations on two streams, cudaMalloc'd memory on
// devices 0 and 1 (one block freed with cudaFree while pool blocks are live), managed memory, a
// pool block freed with cudaFree, a cudaMalloc block freed with cudaFreeAsync, and pinned host
// memory allocated with each flag and registered.
Events handBuiltMixedWorkload() {
    Events ev;
    Events::wm(ev.alloc(100, kS1, kPool, 0xA000, 4 * MiB), 32 * MiB, 4 * MiB);
    deviceAlloc(ev, 200, 0x7000'0000, 64 * MiB);
    deviceAlloc(ev, 300, 0x7100'0000, 16 * MiB);
    deviceAlloc(ev, 350, 0x8000'0000, 8 * MiB, 1);
    deviceAlloc(ev, 400, 0x7200'0000, 10 * MiB, 0, DeviceAllocApi::Managed);
    Events::wm(ev.alloc(500, kS2, kPool, 0xB000, 2 * MiB), 32 * MiB, 6 * MiB);
    deviceFree(ev, 600, 0x7000'0000, 0, 1500); // 80 MiB live before: the peak
    deviceFree(ev, 700, 0xB000);               // a pool block freed with cudaFree: no sync
    ev.free(800, kS1, 0, 0x7100'0000);         // cudaFreeAsync of cudaMalloc memory
    pinned(ev, EventKind::HostAlloc, 900, 0x5000'0000, 1 * MiB, kHostAllocPortable);
    pinned(ev, EventKind::HostAlloc, 910, 0x5100'0000, 2 * MiB, kHostAllocMapped);
    pinned(ev, EventKind::HostAlloc, 920, 0x5200'0000, 4 * MiB, kHostAllocWriteCombined);
    pinned(ev, EventKind::HostAlloc, 930, 0x5300'0000, 8 * MiB, 0);
    pinned(ev, EventKind::HostRegister, 940, 0x6000'0000, 16 * MiB, kHostRegisterPortable);
    release(ev, EventKind::HostFree, 950, 0x5300'0000);
    release(ev, EventKind::HostUnregister, 960, 0x6000'0000);
    release(ev, EventKind::HostFree, 970, 0x5000'0000);
    deviceFree(ev, 980, 0x1234); // allocated before recording: a sync, but matches nothing
    return ev;
}

Replay replayAll(std::vector<Event>& events) {
    Replay r;
    for (Event& e : events) r.complete(e);
    return r;
}

std::shared_ptr<const Timeline> timelineOf(const std::vector<Event>& events) {
    TimelineBuilder b;
    for (const Event& e : events) b.add(e);
    return b.finish();
}

} // namespace

TEST(BeyondPool, HandBuiltReplayKeepsDeviceMemoryOutsideThePoolsPerDevice) {
    std::vector<Event> events = handBuiltMixedWorkload().all();
    Replay r = replayAll(events);
    ASSERT_EQ(r.outside().size(), 2u);
    const OutsideState& d0 = r.outside()[0];
    EXPECT_EQ(d0.device, 0);
    EXPECT_EQ(d0.peakBytes, 80 * MiB);    // 64 + 16 before the cudaFree at 600
    EXPECT_EQ(d0.peakTsNs, 300);
    EXPECT_EQ(d0.liveBytes, 0u);          // 64 freed by cudaFree, 16 by cudaFreeAsync
    EXPECT_EQ(d0.managedLiveBytes, 10 * MiB);
    EXPECT_EQ(d0.managedPeakBytes, 10 * MiB);
    EXPECT_EQ(d0.allocs, 3u);
    EXPECT_EQ(d0.frees, 2u);
    EXPECT_EQ(d0.syncFrees, 2u);          // the cudaMalloc block and the unknown pointer
    EXPECT_EQ(d0.syncCallNs, 1500u);
    const OutsideState& d1 = r.outside()[1];
    EXPECT_EQ(d1.device, 1);
    EXPECT_EQ(d1.peakBytes, 8 * MiB);
    EXPECT_EQ(d1.liveBytes, 8 * MiB);
    // The pool's own accounting is untouched by memory outside it; its block freed with
    // cudaFree left it.
    EXPECT_EQ(r.pools()[r.poolIndex(kPool)].liveBytes, 4 * MiB);
    EXPECT_EQ(r.liveBlock(0xB000), nullptr);
    EXPECT_EQ(r.unmatchedFrees(), 0u);
    // complete() gave every release its size.
    EXPECT_EQ(events[6].size, 64 * MiB);
    EXPECT_TRUE(events[6].has(kSizeKnown));
    EXPECT_EQ(events[7].size, 2 * MiB);
    EXPECT_EQ(events[7].pool, kPool);
    EXPECT_FALSE(events.back().has(kSizeKnown));
}

TEST(BeyondPool, HandBuiltReplayKeepsPinnedHostMemoryAllocatedAndRegisteredApart) {
    std::vector<Event> events = handBuiltMixedWorkload().all();
    Replay r = replayAll(events);
    const PinnedState& p = r.pinned();
    EXPECT_EQ(p.allocatedPeak, 15 * MiB);
    EXPECT_EQ(p.registeredPeak, 16 * MiB);
    EXPECT_EQ(p.totalPeak, 31 * MiB);
    EXPECT_EQ(p.totalPeakTsNs, 940);
    EXPECT_EQ(p.allocatedBytes, 6 * MiB); // 2 (mapped) + 4 (write-combined) still pinned
    EXPECT_EQ(p.registeredBytes, 0u);
    EXPECT_EQ(p.allocs, 4u);
    EXPECT_EQ(p.frees, 2u);
    EXPECT_EQ(p.registers, 1u);
    EXPECT_EQ(p.unregisters, 1u);
    ASSERT_NE(r.liveMem(0x5100'0000, true), nullptr);
    EXPECT_EQ(r.liveMem(0x5100'0000, true)->flags, kHostAllocMapped);
    EXPECT_EQ(r.liveMem(0x5100'0000, false), nullptr); // host and device addresses kept apart
}

TEST(BeyondPool, HandBuiltFactsSayWhatEachCallDid) {
    Events ev;
    Events::wm(ev.alloc(10, kS1, kPool, 0xA000, 100), 1000, 100);
    deviceAlloc(ev, 20, 0xC000, 300);
    deviceFree(ev, 30, 0xA000);            // pool block
    deviceFree(ev, 40, 0xC000);            // cudaMalloc block: device-wide sync
    release(ev, EventKind::HostFree, 50, 0xC000); // a device pointer is no pinned block
    Event& failed = deviceAlloc(ev, 60, 0, 1ull << 40);
    failed.result = 2;
    Replay r;
    std::vector<Event> events = ev.all();
    r.complete(events[0]);
    EXPECT_TRUE(r.complete(events[1]).memAllocated);
    const Fact& poolFree = r.complete(events[2]);
    EXPECT_TRUE(poolFree.freed);
    EXPECT_FALSE(poolFree.deviceSync);
    EXPECT_EQ(poolFree.block.bytes, 100u);
    // A pool block freed with cudaFree moves the pool's used bytes like a cudaFreeAsync.
    EXPECT_TRUE(events[2].has(kHasWatermarks));
    EXPECT_EQ(events[2].used, 0u);
    const Fact& legacy = r.complete(events[3]);
    EXPECT_TRUE(legacy.deviceSync);
    EXPECT_TRUE(legacy.memReleased);
    EXPECT_EQ(legacy.mem.bytes, 300u);
    const Fact& wrong = r.complete(events[4]);
    EXPECT_TRUE(wrong.memUnmatched);
    EXPECT_FALSE(wrong.memReleased);
    r.complete(events[5]);
    EXPECT_EQ(r.outside()[0].failedAllocs, 1u);
    EXPECT_EQ(r.outside()[0].liveBytes, 0u);
}

TEST(BeyondPool, HandBuiltTimelineDrawsLanesSyncsAndPinnedSeries) {
    auto tl = timelineOf(handBuiltMixedWorkload().all());
    ASSERT_EQ(tl->outside.size(), 2u);
    const OutsideTimeline* d0 = tl->outsideOf(0);
    ASSERT_NE(d0, nullptr);
    EXPECT_EQ(d0->liveBytes.max(), 80 * MiB);
    EXPECT_EQ(d0->liveBytes.valueAt(650), 16 * MiB);
    EXPECT_EQ(d0->liveBytes.valueAt(850), 0u);
    EXPECT_EQ(d0->managedBytes.max(), 10 * MiB);
    EXPECT_EQ(d0->syncFrees, 2u);
    EXPECT_EQ(d0->allocCount, 3u);
    EXPECT_EQ(d0->freeCount, 2u);
    ASSERT_EQ(tl->deviceSyncs.size(), 2u);
    EXPECT_EQ(tl->deviceSyncs[0].tsNs, 600);
    EXPECT_EQ(tl->deviceSyncs[0].bytes, 64 * MiB);
    EXPECT_EQ(tl->deviceSyncs[0].callNs, 1500);
    EXPECT_EQ(tl->deviceSyncs[1].bytes, 0u); // its allocation is not in the trace
    EXPECT_EQ(tl->outsideOf(1)->liveAtEndBytes, 8 * MiB);
    const PinnedTimeline& p = tl->pinned;
    EXPECT_EQ(p.total.max(), 31 * MiB);
    EXPECT_EQ(p.allocated.valueAt(935), 15 * MiB);
    EXPECT_EQ(p.registered.valueAt(945), 16 * MiB);
    EXPECT_EQ(p.allocatedAtEnd, 6 * MiB);
    EXPECT_EQ(p.allocsByFlags[kHostAllocMapped], 1u);
    EXPECT_EQ(p.allocatedByFlags[kHostAllocWriteCombined], 4 * MiB);
    EXPECT_EQ(tl->unmatchedMemReleases, 1u); // the cudaFree of memory allocated before recording
    // The pool block freed with cudaFree ends its allocation there.
    bool found = false;
    for (const Allocation& a : tl->allocations)
        if (a.ptr == 0xB000) {
            found = true;
            EXPECT_EQ(a.freeTsNs, 700);
        }
    EXPECT_TRUE(found);
}

TEST(BeyondPool, HandBuiltLaneLayoutPutsOutsideUnderEachDeviceAndOneHostLaneLast) {
    auto tl = timelineOf(handBuiltMixedWorkload().all());
    // What the device held in all: its pools' reserved plus the memory outside them.
    const OutsideTimeline* d0 = tl->outsideOf(0);
    ASSERT_NE(d0, nullptr);
    EXPECT_EQ(d0->withPools.valueAt(300), 32 * MiB + 80 * MiB);
    EXPECT_EQ(d0->withPools.valueAt(650), 32 * MiB + 16 * MiB);
    EXPECT_EQ(d0->withPoolsPeak, 112 * MiB);
    EXPECT_EQ(d0->poolsReservedPeak, 32 * MiB);
    auto layout = view::LaneLayout::build(*tl);
    ASSERT_TRUE(layout);
    const auto& lanes = layout->lanes;
    std::vector<int> outside, devices;
    for (size_t i = 0; i < lanes.size(); ++i) {
        if (lanes[i].kind == view::LaneKind::Outside) outside.push_back(int(i));
        if (lanes[i].kind == view::LaneKind::Device) devices.push_back(int(i));
    }
    ASSERT_EQ(outside.size(), 2u); // devices 0 and 1
    ASSERT_EQ(devices.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
        EXPECT_EQ(outside[k], devices[k] + 1); // right under its device, above the pools
        EXPECT_EQ(lanes[size_t(outside[k])].device, lanes[size_t(devices[k])].device);
    }
    EXPECT_EQ(lanes[size_t(outside[0])].subtitle, "peak 80.0 MiB · with pools 112 MiB");
    EXPECT_EQ(lanes.back().kind, view::LaneKind::Host);
    EXPECT_EQ(lanes.back().subtitle, "peak 31.0 MiB · registered 16.0 MiB");
}

TEST(BeyondPool, HandBuiltReportCountsSyncsPinnedTotalsAndFindsTheMix) {
    auto tl = timelineOf(handBuiltMixedWorkload().all());
    const Report r = buildReport(*tl);
    ASSERT_EQ(r.outside.size(), 2u);
    EXPECT_EQ(r.outside[0].peakBytes, 80 * MiB);
    EXPECT_EQ(r.outside[0].poolsPeakReserved, 32 * MiB);
    EXPECT_EQ(r.outside[0].combinedPeak, 112 * MiB); // 32 reserved + 80 outside at 300
    EXPECT_EQ(r.outside[0].combinedPeakTsNs, 300);
    EXPECT_EQ(r.deviceSyncs, 2u);
    EXPECT_EQ(r.deviceSyncsDuringPoolWork, 2u); // stream 1's block is live until the end
    EXPECT_EQ(r.pinned.totalPeak, 31 * MiB);
    EXPECT_EQ(r.pinned.allocatedAtEnd, 6 * MiB);
    auto has = [&](const std::string& needle) {
        for (const std::string& f : r.findings)
            if (f.find(needle) != std::string::npos) return true;
        return false;
    };
    EXPECT_TRUE(has("mixes cudaMalloc-style allocations (4, up to 80.0 MiB"));
    EXPECT_TRUE(has("2 cudaFree call(s) synchronized the whole device"));
    EXPECT_TRUE(has("device 0 held up to 80.0 MiB outside any pool"));
    EXPECT_TRUE(has("6.00 MiB of pinned host memory"));
    EXPECT_TRUE(has("8.00 MiB allocated with cudaMalloc on device 1 was still allocated"));
    EXPECT_FALSE(has("allocated with cudaMalloc on device 0")); // all of it freed there

    const std::string text = reportToText(r);
    EXPECT_NE(text.find("Device memory outside the pools"), std::string::npos) << text;
    EXPECT_NE(text.find("Pinned host memory: peak 31.0 MiB"), std::string::npos) << text;
    EXPECT_NE(text.find("write-combined 1 (4.00 MiB)"), std::string::npos) << text;

    const auto j = nlohmann::json::parse(reportToJson(r));
    EXPECT_EQ(j["outside_pools"]["device_syncs"], 2);
    EXPECT_EQ(j["outside_pools"]["devices"][0]["peak_bytes"], 80 * MiB);
    EXPECT_EQ(j["outside_pools"]["devices"][0]["combined_peak"], 112 * MiB);
    EXPECT_EQ(j["pinned_host"]["total_peak"], 31 * MiB);
    EXPECT_EQ(j["pinned_host"]["registered_peak"], 16 * MiB);
    EXPECT_EQ(j["pinned_host"]["allocations_by_flags"].size(), 4u);
}

TEST(BeyondPool, HandBuiltPoolOnlyOrLegacyOnlyWorkloadsAreNotAMix) {
    Events poolOnly;
    poolOnly.alloc(10, kS1, kPool, 0xA000, 100);
    EXPECT_EQ(buildReport(*timelineOf(poolOnly.all())).outside.size(), 0u);
    Events legacyOnly; // PyTorch's native allocator: cudaMalloc segments only
    deviceAlloc(legacyOnly, 10, 0xC000, 2 * MiB);
    deviceFree(legacyOnly, 20, 0xC000);
    const Report r = buildReport(*timelineOf(legacyOnly.all()));
    ASSERT_EQ(r.outside.size(), 1u);
    EXPECT_EQ(r.outside[0].peakBytes, 2 * MiB);
    for (const std::string& f : r.findings) EXPECT_EQ(f.find("mixes"), std::string::npos) << f;
}

TEST(BeyondPool, DescribeEventNamesFlagsAndSyncs) {
    Events ev;
    Event& h = pinned(ev, EventKind::HostAlloc, 1, 0x10, 4096,
                      kHostAllocPortable | kHostAllocMapped | kHostAllocWriteCombined);
    EXPECT_EQ(describeEvent(h), "host_alloc, flags portable|mapped|write-combined");
    Event& g = pinned(ev, EventKind::HostRegister, 2, 0x10, 4096, kHostRegisterReadOnly);
    EXPECT_EQ(describeEvent(g), "flags read-only");
    Event& f = deviceFree(ev, 3, 0x20, 0, 2'500'000);
    f.size = 3 * MiB;
    f.flags |= kSizeKnown;
    EXPECT_EQ(describeEvent(f), "3.00 MiB, synchronizes the device (call took 2.50 ms)");
    Event& m = deviceAlloc(ev, 4, 0x30, 10, 0, DeviceAllocApi::Managed);
    EXPECT_EQ(describeEvent(m), "malloc_managed, attach global, outside the pools");
    EXPECT_EQ(eventKindName(EventKind::HostUnregister), "host_unregister");
    EventKind k;
    ASSERT_TRUE(eventKindFromName("device_free", k));
    EXPECT_EQ(k, EventKind::DeviceFree);
}

TEST(BeyondPool, HandBuiltTraceWritesBeyondPoolKindsWithTheirOwnCodecAndReadsThemBack) {
    test::ScratchDir dir;
    const std::string path = dir.file("beyond.poolscope");
    std::vector<Event> events = handBuiltMixedWorkload().all();
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w) << w.error().message;
        // A first chunk with pool events only, then one with the new kinds.
        ASSERT_TRUE((*w)->append(std::span<const Event>(events.data(), 1)));
        ASSERT_TRUE((*w)->commit());
        ASSERT_TRUE((*w)->append(std::span<const Event>(events.data() + 1, events.size() - 1)));
        ASSERT_TRUE((*w)->close());
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT codec FROM event_chunks ORDER BY first_seq", -1, &st,
                                 nullptr),
              SQLITE_OK);
    std::vector<int> codecs;
    while (sqlite3_step(st) == SQLITE_ROW) codecs.push_back(sqlite3_column_int(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    EXPECT_EQ(codecs.size(), 2u);

    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    // A reader of format 4 refuses the whole trace as a newer PoolScope's.
    EXPECT_GE((*r)->schemaVersion(), schema::kBeyondPoolVersion);
    static_assert(schema::kBeyondPoolVersion > schema::kStacksVersion);
    EXPECT_TRUE((*r)->damage().empty());
    std::vector<Event> read;
    ASSERT_TRUE((*r)->forEachEvent([&](const Event& e) {
        read.push_back(e);
        return true;
    }));
    ASSERT_EQ(read.size(), events.size());
    for (size_t i = 0; i < read.size(); ++i) {
        EXPECT_EQ(read[i].kind, events[i].kind) << i;
        EXPECT_EQ(read[i].ptr, events[i].ptr) << i;
        EXPECT_EQ(read[i].size, events[i].size) << i;
        EXPECT_EQ(read[i].aux, events[i].aux) << i;
    }
}

// What a reader of codec 4 does with such a chunk: it refuses its codec as a newer PoolScope's.
// The same rule in this reader, one codec further on: a chunk labelled above what it reads.
TEST(BeyondPool, HandBuiltChunkBeyondTheReadersCodecIsANewerPoolScopeError) {
    test::ScratchDir dir;
    const std::string path = dir.file("newer.poolscope");
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        Events ev;
        deviceAlloc(ev, 1, 0xC000, 4096);
        ASSERT_TRUE((*w)->append(ev.all()));
        ASSERT_TRUE((*w)->close());
    }
    test::execSql(path, "UPDATE event_chunks SET codec = " +
                            std::to_string(kEventCodecVersion + 1));
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    auto ev = (*r)->events(INT64_MIN, INT64_MAX);
    ASSERT_FALSE(ev);
    EXPECT_EQ(ev.error().code, ErrorCode::NewerVersion);
    EXPECT_NE(ev.error().message.find("newer PoolScope"), std::string::npos);
}

// A trace of the older format cannot hold the new kinds: damage, not a silent read.
TEST(BeyondPool, HandBuiltBeyondPoolKindInAnOlderFormatTraceIsDamage) {
    test::ScratchDir dir;
    const std::string path = dir.file("relabelled.poolscope");
    Events ev;
    deviceAlloc(ev, 1, 0xC000, 4096);
    {
        WriterOptions o;
        o.compressEvents = false; // codec 4, which format 4 may hold
        auto w = TraceWriter::create(path, o);
        ASSERT_TRUE(w);
        ASSERT_TRUE((*w)->append(ev.all()));
        ASSERT_TRUE((*w)->close());
    }
    test::execSql(path, "PRAGMA user_version = " + std::to_string(schema::kStacksVersion));
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
        named = named || d.what.find("device_alloc event, which trace format 4 cannot hold") != std::string::npos;
    EXPECT_TRUE(named);
}

#ifdef POOLSCOPE_CLI
TEST(BeyondPool, HandBuiltTraceInInfoDumpAndReport) {
    test::ScratchDir dir;
    const std::string path = dir.file("cli.poolscope");
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        ASSERT_TRUE((*w)->append(handBuiltMixedWorkload().all()));
        ASSERT_TRUE((*w)->close());
    }
    const test::CliRun info = test::runCli("info '" + path + "'");
    EXPECT_EQ(info.exitCode, 0) << info.output;
    EXPECT_NE(info.output.find("device_alloc"), std::string::npos) << info.output;
    EXPECT_NE(info.output.find("host_register"), std::string::npos) << info.output;
    const test::CliRun dump = test::runCli("dump --format csv '" + path + "'");
    EXPECT_EQ(dump.exitCode, 0) << dump.output;
    EXPECT_NE(dump.output.find("synchronizes the device"), std::string::npos) << dump.output;
    EXPECT_NE(dump.output.find("host_alloc, flags write-combined"), std::string::npos) << dump.output;
    const test::CliRun report = test::runCli("report '" + path + "'");
    EXPECT_EQ(report.exitCode, 0) << report.output;
    EXPECT_NE(report.output.find("Pinned host memory"), std::string::npos) << report.output;
    const test::CliRun json = test::runCli("report --json '" + path + "'");
    EXPECT_EQ(json.exitCode, 0) << json.output;
    EXPECT_NE(json.output.find("\"outside_pools\""), std::string::npos) << json.output;
}
#endif

#if defined(POOLSCOPE_CLI) && defined(POOLSCOPE_GPU_CHECK_SCRIPT)
namespace {
// What the collector would record for tests/workloads/beyond_pool.cu (3 rounds), simulated on
// the CPU (hand-built: no GPU ran it; the runtime is made to add the DEVICEMAP bit to every
// cudaHostAlloc, as it may), with the truth that workload prints.
// Writes the trace and returns the truth lines the workload would print.
std::string simulateBeyondPoolWorkload(const std::string& path) {
    auto w = TraceWriter::create(path);
    if (!w) return {};
    (*w)->setMeta("collector", "simulated");
    DeviceInfo d; d.ordinal = 0; d.name = "sim"; (*w)->addDevice(d);
    PoolInfo p; p.handle = 0x9000; p.device = 0; p.kind = PoolKind::Default; (*w)->addPool(p);
    std::vector<Event> ev; int64_t t = 0; std::map<std::string, uint64_t> c;
    auto add = [&](EventKind k) -> Event& { Event e; e.seq = ev.size() + 1; e.tsNs = (t += 1000); e.kind = k; e.device = 0; e.tid = 5; ev.push_back(e); return ev.back(); };
    uint64_t used = 0, devNow = 0, devPeak = 0, aNow = 0, aPeak = 0, rNow = 0, rPeak = 0, pNow = 0, pPeak = 0;
    auto devAdd = [&](uint64_t n) { devNow += n; devPeak = std::max(devPeak, devNow); };
    Event& sc = add(EventKind::StreamCreate); sc.stream = 0x51; c["stream_creates"]++;
    auto asyncAlloc = [&](uint64_t ptr, uint64_t n) { Event& a = add(EventKind::Alloc); AllocFields{ptr, n, AllocApi::Async}.into(a); a.stream = 0x51; a.pool = 0x9000; used += n; a.flags = kHasWatermarks; a.reserved = 64 << 20; a.used = used; c["allocs"]++; c["alloc_bytes"] += n; };
    auto asyncFree = [&](uint64_t ptr, uint64_t n, bool pool) { Event& f = add(EventKind::Free); FreeFields{ptr, std::nullopt}.into(f); f.stream = 0x51; if (pool) { f.pool = 0x9000; used -= n; f.flags |= kHasWatermarks; f.reserved = 64 << 20; f.used = used; } c["frees"]++; c["free_bytes"] += n; };
    auto dAlloc = [&](uint64_t ptr, uint64_t n, DeviceAllocApi api = DeviceAllocApi::Malloc) { Event& a = add(EventKind::DeviceAlloc); DeviceAllocFields{ptr, n, api, 0}.into(a); };
    auto dFree = [&](uint64_t ptr) { Event& f = add(EventKind::DeviceFree); ReleaseMemFields{ptr, std::nullopt, 2000}.into(f, EventKind::DeviceFree); };
    std::vector<std::pair<uint64_t, uint64_t>> legacy;
    for (int r = 0; r < 3; ++r) {
        uint64_t an = (1 + r % 4) << 20; asyncAlloc(0xA000 + r * 0x100000, an);
        uint64_t ln = (r % 5 + 1) * (3u << 20) + 4096 * r; uint64_t lp = 0x70000000 + r * 0x1000000;
        dAlloc(lp, ln); legacy.push_back({lp, ln}); devAdd(ln); c["beyond_device_allocs"]++; c["beyond_device_alloc_bytes"] += ln;
        if (r % 3 == 2) { dFree(legacy.front().first); c["beyond_device_frees"]++; c["beyond_device_free_bytes"] += legacy.front().second; c["beyond_device_syncs"]++; devNow -= legacy.front().second; legacy.erase(legacy.begin()); }
        asyncFree(0xA000 + r * 0x100000, an, true);
    }
    add(EventKind::StreamSynchronize).stream = 0x51; c["stream_syncs"]++;
    uint64_t pitchBytes = 1024 * 300; dAlloc(0x80000000, pitchBytes, DeviceAllocApi::Pitch); devAdd(pitchBytes); c["beyond_device_allocs"]++; c["beyond_device_alloc_bytes"] += pitchBytes; c["beyond_pitch_allocs"]++;
    dAlloc(0x90000000, 12 << 20, DeviceAllocApi::Managed); c["beyond_managed_allocs"]++; c["beyond_managed_bytes"] += 12 << 20;
    asyncAlloc(0xB000000, 5 << 20); add(EventKind::StreamSynchronize).stream = 0x51; c["stream_syncs"]++;
    { Event& f = add(EventKind::DeviceFree); ReleaseMemFields{0xB000000, std::nullopt, 800}.into(f, EventKind::DeviceFree); f.pool = 0x9000; c["beyond_pool_blocks_cudafree"]++; }
    dAlloc(0x95000000, 7 << 20); devAdd(7 << 20); c["beyond_device_allocs"]++; c["beyond_device_alloc_bytes"] += 7 << 20;
    asyncFree(0x95000000, 7 << 20, false); c["beyond_legacy_freed_async"]++; devNow -= 7 << 20;
    add(EventKind::StreamSynchronize).stream = 0x51; c["stream_syncs"]++;
    unsigned flags[] = {0, 1, 2, 4, 7}; std::vector<std::string> host;
    std::vector<std::pair<uint64_t, uint64_t>> hosts;
    for (int i = 0; i < 5; ++i) { uint64_t n = (i + 1) * (1u << 20) + 512 * i; Event& h = add(EventKind::HostAlloc); PinnedFields{0x50000000ull + i * 0x1000000, n, flags[i] | 2u}.into(h, EventKind::HostAlloc); hosts.push_back({h.ptr, n}); c["beyond_host_allocs"]++; c["beyond_host_alloc_bytes"] += n; aNow += n; aPeak = std::max(aPeak, aNow); pNow += n; pPeak = std::max(pPeak, pNow); host.push_back("{\"type\":\"host\",\"what\":\"host_alloc\",\"size\":" + std::to_string(n) + ",\"flags\":" + std::to_string(flags[i]) + "}"); }
    { uint64_t n = 3 << 20; Event& h = add(EventKind::HostAlloc); PinnedFields{0x58000000, n, 0, HostAllocApi::HostAlloc}.into(h, EventKind::HostAlloc); c["beyond_host_allocs"]++; c["beyond_host_alloc_bytes"] += n; aNow += n; aPeak = std::max(aPeak, aNow); pNow += n; pPeak = std::max(pPeak, pNow); host.push_back("{\"type\":\"host\",\"what\":\"host_alloc\",\"size\":" + std::to_string(n) + ",\"flags\":0}"); }
    unsigned rf[] = {0, 1, 2};
    for (int i = 0; i < 3; ++i) { uint64_t n = (i + 2) * (1u << 20); Event& h = add(EventKind::HostRegister); PinnedFields{0x60000000ull + i * 0x1000000, n, rf[i]}.into(h, EventKind::HostRegister); c["beyond_host_registers"]++; c["beyond_host_register_bytes"] += n; rNow += n; rPeak = std::max(rPeak, rNow); pNow += n; pPeak = std::max(pPeak, pNow); host.push_back("{\"type\":\"host\",\"what\":\"host_register\",\"size\":" + std::to_string(n) + ",\"flags\":" + std::to_string(rf[i]) + "}"); }
    auto hf = [&](uint64_t ptr, uint64_t n) { Event& f = add(EventKind::HostFree); ReleaseMemFields{ptr}.into(f, EventKind::HostFree); c["beyond_host_frees"]++; aNow -= n; pNow -= n; };
    hf(hosts[0].first, hosts[0].second); hf(hosts[3].first, hosts[3].second); hf(0x58000000, 3 << 20);
    for (int i = 0; i < 2; ++i) { Event& u = add(EventKind::HostUnregister); ReleaseMemFields{0x60000000ull + i * 0x1000000}.into(u, EventKind::HostUnregister); c["beyond_host_unregisters"]++; uint64_t n = (i + 2) * (1u << 20); rNow -= n; pNow -= n; }
    while (legacy.size() > 1) { dFree(legacy.back().first); c["beyond_device_frees"]++; c["beyond_device_free_bytes"] += legacy.back().second; c["beyond_device_syncs"]++; devNow -= legacy.back().second; legacy.pop_back(); }
    dFree(0x80000000); c["beyond_device_frees"]++; c["beyond_device_free_bytes"] += pitchBytes; c["beyond_device_syncs"]++; devNow -= pitchBytes;
    dFree(0x90000000); c["beyond_managed_frees"]++; c["beyond_device_syncs"]++;
    c["beyond_device_peak"] = devPeak; c["beyond_device_live_at_end"] = devNow; c["beyond_host_allocated_peak"] = aPeak; c["beyond_host_registered_peak"] = rPeak; c["beyond_host_total_peak"] = pPeak; c["beyond_host_allocated_at_end"] = aNow; c["beyond_host_registered_at_end"] = rNow;
    replay::Replay rp; for (Event& e : ev) rp.complete(e);
    (void)(*w)->append(ev);
    if (!(*w)->close()) return {};
    std::string out;
    for (auto& h : host) out += h + "\n";
    out += "{\"type\":\"summary\",\"workload\":\"beyond_pool\"";
    for (auto& [k, v] : c) out += ",\"" + k + "\":" + std::to_string(v);
    return out + "}\n";
}

std::string runCheck(const std::string& trace, const std::string& truth) {
    const test::CliRun r = [&] {
        test::CliRun out;
        const std::string cmd = std::string("python3 '") + POOLSCOPE_GPU_CHECK_SCRIPT + "' '" +
                                POOLSCOPE_CLI + "' '" + trace + "' '" + truth + "' 2>&1";
        FILE* f = ::popen(cmd.c_str(), "r");
        if (!f) return out;
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.output.append(buf, n);
        out.exitCode = ::pclose(f);
        return out;
    }();
    return r.output;
}
} // namespace

// The GPU check's own logic (tests/gpu/check_trace.py) on a simulated trace: it passes when the
// trace and the truth agree, and names the difference when they do not.
TEST(BeyondPool, HandBuiltSimulatedWorkloadPassesTheGpuCheckAndAWrongTruthFails) {
    if (std::system("python3 -c 'import sqlite3' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
    test::ScratchDir dir;
    const std::string trace = dir.file("beyond_pool.poolscope");
    const std::string truth = simulateBeyondPoolWorkload(trace);
    ASSERT_FALSE(truth.empty());
    auto write = [&](const std::string& name, const std::string& text) {
        const std::string p = dir.file(name);
        FILE* f = std::fopen(p.c_str(), "w");
        std::fputs(text.c_str(), f);
        std::fclose(f);
        return p;
    };
    const std::string good = runCheck(trace, write("good.truth", truth));
    EXPECT_NE(good.find("PASS beyond_pool.poolscope"), std::string::npos) << good;
    EXPECT_NE(good.find("program passed flags 0, driver call had 2"), std::string::npos) << good;
    std::string wrong = truth;
    const size_t at = wrong.find("\"beyond_host_total_peak\":");
    ASSERT_NE(at, std::string::npos);
    wrong.insert(at + std::string("\"beyond_host_total_peak\":").size(), "9");
    const std::string bad = runCheck(trace, write("bad.truth", wrong));
    EXPECT_NE(bad.find("FAIL beyond_host_total_peak"), std::string::npos) << bad;
    EXPECT_NE(bad.find("FAIL beyond_pool.poolscope"), std::string::npos) << bad;
}

// The real H100 traces (resources/samples, recorded by tests/gpu/run.sh) against the truth their
// workloads printed: today's reader and replay still agree with what the GPU run checked.
TEST(BeyondPool, RecordedSamplesStillPassTheGpuCheck) {
    if (std::system("python3 -c 'import sqlite3' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
    for (const char* name : {"beyond_pool", "torch_native"}) {
        const std::string base = std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name;
        const std::string out = runCheck(base + ".poolscope", base + ".truth.jsonl");
        EXPECT_NE(out.find(std::string("PASS ") + name + ".poolscope"), std::string::npos) << out;
        EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
    }
}
#endif
