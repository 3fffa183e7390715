// The report model on a worked example, and that both renderings carry it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "TestTraces.h"
#include "poolscope/Report.h"
#include "poolscope/TimelineBuilder.h"

namespace poolscope {
namespace {

constexpr uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

// The pattern the tool exists for: reserved climbs to 1 GiB while used stays at a few MiB,
// with the release threshold at max so synchronizes give nothing back.
std::shared_ptr<const Timeline> idlePoolTimeline() {
    test::Events ev;
    Event& th = ev.add(EventKind::PoolSetAttribute, 0);
    th.pool = 0x100;
    th.attr = static_cast<uint16_t>(PoolAttr::ReleaseThreshold);
    th.size = UINT64_MAX;
    test::Events::wm(ev.alloc(1000, 0xA, 0x100, 0x1000, 4 * MiB), 256 * MiB, 4 * MiB);
    test::Events::wm(ev.free(2000, 0xB, 0x100, 0x1000), 256 * MiB, 0);
    test::Events::wm(ev.alloc(3000, 0xA, 0x100, 0x2000, 8 * MiB), 1 * GiB, 8 * MiB);
    test::Events::wm(ev.alloc(4000, 0xA, 0x100, 0x3000, 1 * MiB), 1 * GiB, 9 * MiB);
    Event& oom = ev.alloc(5000, 0xB, 0x100, 0, 2 * GiB);
    oom.result = 2;
    test::Events::wm(ev.free(6000, 0xA, 0x100, 0x3000), 1 * GiB, 8 * MiB);
    ev.free(7000, 0xA, 0x100, 0xDEAD);
    TimelineBuilder b;
    for (const Event& e : ev.all()) b.add(e);
    return b.finish();
}

TEST(Report, IdleAtPeakLeaksFailuresAndFindings) {
    auto tl = idlePoolTimeline();
    ProcessInfo proc;
    proc.pid = 77;
    proc.commandLine = "./train";
    Report r = buildReport(*tl, ReportOptions{5}, "x.poolscope", proc, {{"dropped_events", "3"}});
    ASSERT_EQ(r.pools.size(), 1u);
    const PoolReport& p = r.pools[0];
    EXPECT_TRUE(p.hasWatermarks);
    EXPECT_EQ(p.peakReserved, 1 * GiB);
    EXPECT_EQ(p.peakReservedTsNs, 3000);
    EXPECT_EQ(p.usedAtPeakReserved, 8 * MiB);
    EXPECT_EQ(p.idleAtPeak, 1 * GiB - 8 * MiB);
    EXPECT_EQ(p.maxIdle, 1 * GiB - 8 * MiB); // 3000 and 6000 tie; the first wins
    EXPECT_EQ(p.maxIdleTsNs, 3000);
    EXPECT_EQ(p.peakUsed, 9 * MiB);
    EXPECT_EQ(p.finalReserved, 1 * GiB);
    EXPECT_EQ(p.finalUsed, 8 * MiB);
    EXPECT_TRUE(p.thresholdKnown);
    EXPECT_EQ(p.releaseThreshold, UINT64_MAX);
    EXPECT_EQ(p.allocCount, 3u);
    EXPECT_EQ(p.failedCount, 1u);
    EXPECT_EQ(p.liveAtEndBytes, 8 * MiB);

    ASSERT_EQ(r.streams.size(), 2u);
    EXPECT_EQ(r.streams[0].info.handle, 0xAu);
    EXPECT_EQ(r.streams[0].crossStreamFrees, 1u); // 0x1000 freed on B
    EXPECT_EQ(r.streams[1].failedCount, 1u);

    EXPECT_EQ(r.leakCount, 1u);
    EXPECT_EQ(r.leakBytes, 8 * MiB);
    ASSERT_EQ(r.topLeaks.size(), 1u);
    EXPECT_EQ(r.topLeaks[0].ptr, 0x2000u);
    EXPECT_EQ(r.failedCount, 1u);
    EXPECT_EQ(r.unmatchedFrees, 1u);

    ASSERT_GE(r.findings.size(), 5u);
    EXPECT_NE(r.findings[0].find("dropped 3 events"), std::string::npos) << r.findings[0];
    EXPECT_NE(r.findings[1].find("held idle"), std::string::npos) << r.findings[1];
    EXPECT_NE(r.findings[1].find("release threshold"), std::string::npos) << r.findings[1];

    const std::string text = reportToText(r);
    EXPECT_NE(text.find("1.00 GiB"), std::string::npos) << text;
    EXPECT_NE(text.find("0.99 GiB"), std::string::npos) << text; // idle then
    EXPECT_NE(text.find("Leaks: 1 allocation(s) live at the end, 8.00 MiB"), std::string::npos)
        << text;
    EXPECT_NE(text.find("Failed allocations: 1"), std::string::npos) << text;
    // The window's names, each next to its handle.
    const std::string pool = r.names.poolWithHandle(0x100);
    EXPECT_EQ(pool.rfind("pool #1 (", 0), 0u) << pool;
    EXPECT_EQ(pool.substr(pool.size() - 7), ") 0x100") << pool;
    EXPECT_NE(text.find(pool), std::string::npos) << text;
    EXPECT_NE(text.find("stream #1 0xa"), std::string::npos) << text;
    EXPECT_NE(text.find("stream #2 0xb"), std::string::npos) << text;
    EXPECT_NE(r.findings[1].find(pool), std::string::npos) << r.findings[1];
    int lines = 0;
    for (char c : text) lines += c == '\n';
    EXPECT_LT(lines, 50) << "one screen";

    auto j = nlohmann::json::parse(reportToJson(r));
    EXPECT_EQ(j["pools"][0]["peak_reserved"].get<uint64_t>(), 1 * GiB);
    EXPECT_EQ(j["pools"][0]["idle_at_peak"].get<uint64_t>(), 1 * GiB - 8 * MiB);
    EXPECT_EQ(j["pools"][0]["handle"], "0x100");
    EXPECT_EQ(j["pools"][0]["name"], r.names.pool(0x100));
    EXPECT_EQ(j["streams"][0]["name"], "stream #1");
    EXPECT_EQ(j["streams"][1]["name"], "stream #2");
    EXPECT_EQ(j["pools"][0]["release_threshold"].get<uint64_t>(), UINT64_MAX);
    EXPECT_EQ(j["leaks"]["count"], 1);
    EXPECT_EQ(j["leaks"]["top"][0]["ptr"], "0x2000");
    EXPECT_EQ(j["failed_allocations"]["first"][0]["result"], 2);
    EXPECT_EQ(j["process"]["pid"], 77);
    EXPECT_EQ(j["streams"].size(), 2u);
}

TEST(Report, TopNLimitsLists) {
    test::Events ev;
    for (uint64_t i = 1; i <= 30; ++i) ev.alloc(static_cast<int64_t>(i), 0, 0x1, i * 0x1000, i);
    TimelineBuilder b;
    for (const Event& e : ev.all()) b.add(e);
    Report r = buildReport(*b.finish(), ReportOptions{3});
    EXPECT_EQ(r.leakCount, 30u);
    ASSERT_EQ(r.topLeaks.size(), 3u);
    EXPECT_EQ(r.topLeaks[0].size, 30u); // largest first
    EXPECT_EQ(r.topLeaks[2].size, 28u);
    EXPECT_NE(reportToText(r).find("... 27 more"), std::string::npos);
}

// A producer allocates on A, a consumer frees on B after waiting on A, and nothing hands B's
// frees back to A until a synchronize: the pending-free analysis reaches the report.
TEST(Report, PendingFreesOfAConsumerStream) {
    test::Events ev;
    for (uint64_t i = 0; i < 4; ++i) {
        const auto t = static_cast<int64_t>(i * 100);
        ev.alloc(t + 1, 0xA, 0x100, 0x1000 * (i + 1), 2 * MiB);
        Event& rec = ev.add(EventKind::EventRecord, t + 2);
        rec.stream = 0xA;
        rec.ptr = 0xE0;
        Event& w = ev.add(EventKind::StreamWaitEvent, t + 3);
        w.stream = 0xB;
        w.ptr = 0xE0;
        ev.free(t + 4, 0xB, 0x100, 0x1000 * (i + 1));
    }
    Event& sync = ev.add(EventKind::StreamSynchronize, 1000);
    sync.stream = 0xB;
    TimelineBuilder b;
    for (const Event& e : ev.all()) b.add(e);
    Report r = buildReport(*b.finish());
    const StreamReport* consumer = nullptr;
    for (const StreamReport& s : r.streams)
        if (s.info.handle == 0xB) consumer = &s;
    ASSERT_NE(consumer, nullptr);
    EXPECT_EQ(consumer->peakPendingFree, 8 * MiB);
    EXPECT_EQ(consumer->peakPendingFreeTsNs, 304);
    bool found = false;
    for (const std::string& f : r.findings)
        found = found || (f.find(r.names.streamWithHandle(0xB) + " held up to 8.00 MiB") !=
                          std::string::npos);
    EXPECT_TRUE(found) << reportToText(r);
    auto j = nlohmann::json::parse(reportToJson(r));
    bool inJson = false;
    for (const auto& s : j["streams"])
        inJson = inJson || (s["handle"] == "0xb" && s["peak_pending_free"] == 8 * MiB);
    EXPECT_TRUE(inJson);
}

} // namespace
} // namespace poolscope
