// Several GPUs (issue #19) through the timeline, the report and the trace file: each device's
// pools together, pool access across devices, peer copies, and the trace format that holds them.
// Every trace here is hand-built (named so), not recorded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "MultiGpuBuilt.h"
#include "TestTraces.h"
#include "poolscope/EventCodec.h"
#include "poolscope/EventFields.h"
#include "poolscope/EventText.h"
#include "poolscope/Report.h"
#include "poolscope/Schema.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/analysis/TraceReport.h"
#include "poolscope/interop/Export.h"
#include "poolscope/replay/Replay.h"
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

// The report of a trace file both ways: streamed (what `poolscope report` prints) and from a
// whole Timeline; the text and JSON must be the same. Returns the streamed one.
Report streamedIsTimelines(const std::string& path) {
    auto reader = TraceReader::open(path);
    EXPECT_TRUE(reader) << path;
    if (!reader) return {};
    TraceReportOptions o;
    o.topSites = 2;
    auto old = reportTraceViaTimeline(**reader, o, "t.poolscope");
    auto now = reportTrace(**reader, o, "t.poolscope");
    EXPECT_TRUE(old && now);
    if (!old || !now) return {};
    EXPECT_EQ(reportToText(old->report), reportToText(now->report)) << path;
    EXPECT_EQ(reportToJson(old->report), reportToJson(now->report)) << path;
    EXPECT_EQ(now->report.outOfOrderEvents, 0u);
    return now->report;
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
    // Recorded at the runtime call (no driver peer copy inside it): said so, with its error code
    // as the runtime's (a cudaError_t, not a CUresult).
    Event r;
    PeerCopyFields{0x1, 0x2, 1 * MiB, 0, 0, PeerCopyApi::RuntimeSync}.into(r);
    EXPECT_EQ(describeEvent(r), "1.00 MiB GPU 0 → GPU 0 (synchronous) (seen at the runtime call)");
    r.result = 1;
    EXPECT_EQ(describeEvent(r),
              "FAILED: cudaError 1 (1.00 MiB GPU 0 → GPU 0 (synchronous) (seen at the runtime call))");
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

// `poolscope report` streams (ReportReducer): device totals, peer copies and shared pools must
// come out as the Timeline's report has them (they were missing there once: the CI failure that
// reverted the first merge of this work).
TEST(MultiGpu, HandBuiltTwoDeviceTraceStreamedReportIsTheTimelines) {
    test::ScratchDir dir;
    const std::string path = dir.file("two_device_built.poolscope");
    TwoDeviceBuilt b;
    ASSERT_TRUE(test::writeTwoDeviceBuiltTrace(path, &b).ok());
    const Report r = streamedIsTimelines(path);
    ASSERT_EQ(r.deviceTotals.size(), 2u);
    EXPECT_EQ(r.deviceTotals[0].poolCount, 2u);
    EXPECT_GT(r.deviceTotals[0].peakReserved, 0u);
    EXPECT_GT(r.deviceTotals[1].peakUsedTsNs, 0);
    ASSERT_FALSE(r.peerCopies.empty());
    EXPECT_EQ(r.peerCopies[0].srcDevice, 0);
    EXPECT_EQ(r.peerCopies[0].dstDevice, 1);
    EXPECT_EQ(r.peerCopies[0].count, b.peerCopies01);
    EXPECT_EQ(r.peerAccessGrants, 2u);
    size_t shared = 0;
    for (const PoolReport& p : r.pools) shared += p.access.size();
    EXPECT_EQ(shared, 2u);
}

TEST(MultiGpu, HandBuiltPerfettoExportShowsPeerCopiesOnTheirStreamAndAccessOnThePool) {
    const TwoDeviceBuilt b = test::twoDeviceBuilt();
    TimelineBuilder builder;
    builder.setEntities(b.devices, b.pools, b.streams);
    for (const Event& e : b.events) builder.add(e);
    interop::ExportInput in;
    in.timeline = builder.finish();
    in.label = "two_device_built";
    test::ScratchDir dir;
    const std::string path = dir.file("out.json");
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_TRUE(f);
    ASSERT_TRUE(interop::writePerfettoJson({in}, f));
    std::fclose(f);
    std::FILE* r = std::fopen(path.c_str(), "r");
    std::string text;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, r)) > 0;) text.append(buf, n);
    std::fclose(r);
    const auto doc = nlohmann::json::parse(text);
    uint64_t copies01 = 0, access = 0;
    for (const auto& e : doc["traceEvents"]) {
        const std::string name = e.value("name", "");
        copies01 += name.rfind("peer copy 16.0 MiB GPU 0 → GPU 1", 0) == 0;
        access += name == "access: GPU 1: read-write" || name == "access: GPU 0: read-only";
    }
    EXPECT_EQ(copies01, b.peerCopies01);
    EXPECT_EQ(access, 2u);
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
    EXPECT_EQ((*r)->schemaVersion(), schema::kVersion); // the current format holds peer copies
    static_assert(schema::kVersion >= schema::kPeerCopyVersion);
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
        WriterOptions o;
        o.zstdCodec = kZstdCodecVersion; // a codec format 5 holds: the kind is what is wrong
        auto w = TraceWriter::create(path, o);
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

#if defined(POOLSCOPE_CLI) && defined(POOLSCOPE_GPU_CHECK_SCRIPT)
namespace {

// What the collector would record for tests/workloads/multi_gpu.cu, simulated on the CPU
// (hand-built: no GPU ran it), with the ground truth that workload prints, in the same order.
// devs = 2: the two-GPU run; devs = 1: the one-GPU mode with its second context on GPU 0.
// Writes the trace and returns the truth lines.
std::string simulateMultiGpuWorkload(const std::string& path, int devs) {
    auto w = TraceWriter::create(path);
    if (!w) return {};
    (*w)->setMeta("collector", "simulated");
    std::string truth;
    auto line = [&](const std::string& s) { truth += s + "\n"; };
    auto hex = [](uint64_t v) {
        char b[32];
        std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
        return std::string(b);
    };
    std::map<std::string, uint64_t> c;
    std::vector<Event> ev;
    int64_t t = 0;
    auto add = [&](EventKind k, int dev) -> Event& {
        Event e;
        e.seq = ev.size() + 1;
        e.tsNs = (t += 1000);
        e.kind = k;
        e.device = static_cast<int16_t>(dev);
        e.tid = 9;
        ev.push_back(e);
        return ev.back();
    };
    line(std::string("{\"type\":\"mg_mode\",\"mode\":\"") + (devs == 2 ? "two_gpus" : "one_gpu") +
         "\",\"devices_found\":" + std::to_string(devs) + "}");
    const uint64_t def[2] = {0x5550000d00, 0x5550001d00}, own[2] = {0x5550000e00, 0x5550001e00};
    const uint64_t s[2] = {0x7770000100, 0x7770001100};
    std::map<uint64_t, uint64_t> reserved, used;
    for (int d = 0; d < devs; ++d) {
        DeviceInfo di;
        di.ordinal = d;
        di.name = "Simulated H100 " + std::to_string(d);
        di.totalMemory = (uint64_t{80} << 30) + uint64_t(d);
        di.uuid = "GPU-0000000" + std::to_string(d) + "-0000-0000-0000-000000000000";
        (*w)->addDevice(di);
        line("{\"type\":\"mg_device\",\"ordinal\":" + std::to_string(d) + ",\"name\":\"" + di.name +
             "\",\"total_memory\":" + std::to_string(di.totalMemory) + ",\"uuid\":\"" + di.uuid + "\"}");
        PoolInfo p;
        p.handle = def[d];
        p.device = d;
        p.kind = PoolKind::Default;
        (*w)->addPool(p);
        p.handle = own[d];
        p.kind = PoolKind::Explicit;
        (*w)->addPool(p);
        Event& pc = add(EventKind::PoolCreate, d);
        pc.pool = own[d];
        PoolCreateFields{PoolKind::Explicit}.into(pc);
        c["pool_creates"]++;
        for (uint64_t pool : {def[d], own[d]}) {
            Event& a = add(EventKind::PoolSetAttribute, d);
            a.pool = pool;
            AttributeFields{PoolAttr::ReleaseThreshold, ~uint64_t{0}, std::nullopt}.into(a);
            c["set_attributes"]++;
        }
        line("{\"type\":\"mg_pool\",\"handle\":\"" + hex(def[d]) + "\",\"device\":" +
             std::to_string(d) + ",\"kind\":\"default\"}");
        line("{\"type\":\"mg_pool\",\"handle\":\"" + hex(own[d]) + "\",\"device\":" +
             std::to_string(d) + ",\"kind\":\"explicit\"}");
        Event& sc = add(EventKind::StreamCreate, d);
        sc.stream = s[d];
        c["stream_creates"]++;
    }
    struct Block {
        uint64_t ptr, n, pool, stream;
        int dev;
    };
    std::vector<Block> blocks;
    uint64_t nthAlloc = 0, nthFree = 0, nthPeer = 0, nextPtr = 0x3000'0000'0000;
    uint64_t current[2] = {def[0], def[1]};
    auto alloc = [&](int d, uint64_t pool, uint64_t stream, uint64_t n, AllocApi api) {
        used[pool] += n;
        reserved[pool] = std::max(reserved[pool], (used[pool] + (32u << 20) - 1) / (32u << 20) * (32u << 20));
        Event& a = add(EventKind::Alloc, d);
        AllocFields{nextPtr, n, api}.into(a);
        a.stream = stream;
        a.pool = pool;
        Events::wm(a, reserved[pool], used[pool]);
        blocks.push_back({nextPtr, n, pool, stream, d});
        nextPtr += 0x1000'0000;
        line("{\"type\":\"mg_alloc\",\"nth\":" + std::to_string(nthAlloc++) + ",\"device\":" +
             std::to_string(d) + ",\"pool\":\"" + hex(pool) + "\",\"stream\":\"" + hex(stream) +
             "\",\"size\":" + std::to_string(n) + "}");
        c["allocs"]++;
        c["alloc_bytes"] += n;
    };
    auto free = [&](const Block& b) {
        used[b.pool] -= b.n;
        Event& f = add(EventKind::Free, b.dev);
        FreeFields{b.ptr, std::nullopt}.into(f);
        f.stream = b.stream;
        f.pool = b.pool;
        Events::wm(f, reserved[b.pool], used[b.pool]);
        line("{\"type\":\"mg_free\",\"nth\":" + std::to_string(nthFree++) + ",\"device\":" +
             std::to_string(b.dev) + ",\"pool\":\"" + hex(b.pool) + "\",\"stream\":\"" +
             hex(b.stream) + "\",\"size\":" + std::to_string(b.n) + "}");
        c["frees"]++;
        c["free_bytes"] += b.n;
    };
    auto sync = [&](int d, uint64_t stream) {
        add(EventKind::StreamSynchronize, d).stream = stream;
        c["stream_syncs"]++;
    };
    auto peer = [&](int streamDev, uint64_t stream, int src, int dst, uint64_t n,
                    PeerCopyApi api = PeerCopyApi::Async) {
        Event& p = add(EventKind::PeerCopy, streamDev);
        PeerCopyFields{0x1, 0x2, n, src, dst, api}.into(p);
        p.stream = stream;
        line("{\"type\":\"mg_peer\",\"nth\":" + std::to_string(nthPeer++) + ",\"src_device\":" +
             std::to_string(src) + ",\"dst_device\":" + std::to_string(dst) + ",\"bytes\":" +
             std::to_string(n) + ",\"stream\":\"" + hex(stream) + "\"}");
        c["peer_copies"]++;
    };
    for (int round = 0; round < 3; ++round)
        for (int d = 0; d < devs; ++d) {
            alloc(d, current[d], s[d], uint64_t(4 + 4 * d + round) << 20, AllocApi::Async);
            alloc(d, own[d], s[d], uint64_t(16 + 8 * round) << 20, AllocApi::FromPool);
        }
    const int last = devs - 1;
    for (uint64_t pool : {own[last], def[last]}) {
        Event& m = add(EventKind::DeviceSetMempool, last);
        m.pool = pool;
        SetMempoolFields{1}.into(m);
        current[last] = pool;
        c["set_mempool"]++;
        alloc(last, pool, s[last], pool == own[last] ? 10u << 20 : 3u << 20, AllocApi::Async);
    }
    for (int d = 0; d < devs; ++d) sync(d, s[d]);
    auto grant = [&](uint64_t pool, int device) {
        Event& g = add(EventKind::PoolSetAccess, device);
        g.pool = pool;
        SetAccessFields{3, 1, 1}.into(g);
        c["pool_set_access"]++;
        line("{\"type\":\"mg_access\",\"pool\":\"" + hex(pool) + "\",\"device\":" +
             std::to_string(device) + ",\"flags\":3}");
    };
    if (devs == 2) {
        grant(own[0], 1);
        for (int i = 0; i < 3; ++i) peer(1, s[1], 0, 1, uint64_t(1 + i) << 20);
        sync(1, s[1]);
        peer(0, s[0], 1, 0, 2u << 20);
    } else {
        grant(own[0], 0);
        peer(0, s[0], 0, 0, 1u << 20, PeerCopyApi::RuntimeAsync); // cudaMemcpyPeerAsync, 0 -> 0
        const uint64_t sb = 0x7770009900;
        add(EventKind::StreamCreate, 0).stream = sb;
        c["stream_creates"]++;
        alloc(0, def[0], sb, 6u << 20, AllocApi::Async);
        const Block b = blocks.back();
        blocks.pop_back();
        peer(0, sb, 0, 0, 1u << 20);
        free(b);
        sync(0, sb);
        add(EventKind::StreamDestroy, 0).stream = sb;
    }
    for (const Block& b : blocks) free(b);
    for (int d = 0; d < devs; ++d) sync(d, s[d]);
    for (int d = 0; d < devs; ++d)
        line("{\"type\":\"mg_total\",\"device\":" + std::to_string(d) +
             ",\"pools\":2,\"peak_reserved\":" + std::to_string(reserved[def[d]] + reserved[own[d]]) +
             "}");
    for (int d = 0; d < devs; ++d) {
        add(EventKind::StreamDestroy, d).stream = s[d];
        add(EventKind::PoolDestroy, d).pool = own[d];
        c["pool_destroys"]++;
    }
    replay::Replay rp; // the free sizes, as the collector's writer fills them
    for (Event& e : ev) rp.complete(e);
    (void)(*w)->append(ev);
    if (!(*w)->close()) return {};
    truth += "{\"type\":\"summary\",\"workload\":\"multi_gpu\"";
    for (auto& [k, v] : c) truth += ",\"" + k + "\":" + std::to_string(v);
    return truth + "}\n";
}

std::string runGpuCheck(const std::string& trace, const std::string& truth) {
    std::string out;
    const std::string cmd = std::string("python3 '") + POOLSCOPE_GPU_CHECK_SCRIPT + "' '" +
                            POOLSCOPE_CLI + "' '" + trace + "' '" + truth + "' 2>&1";
    FILE* f = ::popen(cmd.c_str(), "r");
    if (!f) return out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    ::pclose(f);
    return out;
}

std::string writeText(const test::ScratchDir& dir, const std::string& name, const std::string& text) {
    const std::string p = dir.file(name);
    FILE* f = std::fopen(p.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
    return p;
}

} // namespace

// The GPU check's multi-GPU logic (tests/gpu/check_trace.py check_multi_gpu) on simulated traces
// of both modes of tests/workloads/multi_gpu.cu: it passes when trace and truth agree, and names
// the field when they do not (an allocation given the calling context's device instead of its
// stream's, a peer copy's devices swapped, a device total that is the sum of peaks).
TEST(MultiGpu, HandBuiltSimulatedWorkloadPassesTheGpuCheckAndWrongFieldsFail) {
    if (std::system("python3 -c 'import sqlite3' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
    test::ScratchDir dir;
    for (int devs : {2, 1}) {
        const std::string name = devs == 2 ? "multi_gpu" : "multi_gpu_one";
        const std::string trace = dir.file(name + ".poolscope");
        const std::string truth = simulateMultiGpuWorkload(trace, devs);
        ASSERT_FALSE(truth.empty());
        const Report streamed = streamedIsTimelines(trace);
        EXPECT_EQ(streamed.deviceTotals.size(), size_t(devs));
        const std::string good = runGpuCheck(trace, writeText(dir, name + ".truth", truth));
        EXPECT_NE(good.find("PASS " + name + ".poolscope"), std::string::npos) << good;
        EXPECT_NE(good.find("multi_gpu mode " + std::string(devs == 2 ? "two_gpus" : "one_gpu")),
                  std::string::npos)
            << good;
        auto wrong = [&](const std::string& from, const std::string& to, const std::string& failure) {
            std::string bad = truth;
            const size_t at = bad.find(from);
            ASSERT_NE(at, std::string::npos) << from;
            bad.replace(at, from.size(), to);
            const std::string out = runGpuCheck(trace, writeText(dir, name + ".bad", bad));
            EXPECT_NE(out.find("FAIL " + failure), std::string::npos) << out;
            EXPECT_NE(out.find("FAIL " + name + ".poolscope"), std::string::npos) << out;
        };
        wrong("\"nth\":3,\"device\":" + std::to_string(devs - 1),
              "\"nth\":3,\"device\":" + std::to_string(devs == 2 ? 0 : 1), "alloc #3");
        wrong("\"name\":\"Simulated H100 0\"", "\"name\":\"Simulated H100 9\"", "device 0 name");
        wrong("\"kind\":\"explicit\"", "\"kind\":\"default\"", "default pool");
        wrong("\"src_device\":0", "\"src_device\":1", "peer copy #0 source device");
        wrong("{\"type\":\"mg_total\",\"device\":0,\"pools\":2,\"peak_reserved\":",
              "{\"type\":\"mg_total\",\"device\":0,\"pools\":2,\"peak_reserved\":1", "report: device 0 peak reserved");
        wrong("\"flags\":3}", "\"flags\":1}", "access to pool");
    }
}
#endif
