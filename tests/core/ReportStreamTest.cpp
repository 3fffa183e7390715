// The streaming report (reportTrace, issue #15) against the report computed from a whole Timeline
// (reportTraceViaTimeline, the way `report` worked before): the same text, JSON and call sites on
// every sample, on the benchmarks' synthetic workload and on hand-built disorderly traces
// (generated here, not recorded: threads out of time order, same-nanosecond events, driver high
// watermarks that cap `used`, retried failures, pointer imports, memory outside the pools). And
// that an event beyond the streaming horizon is counted and said, not silently placed.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>

#include "../../core/src/analysis/ReplayThread.h"
#include "../../core/src/analysis/StepTail.h"
#include "../bench/SyntheticTrace.h"
#include "GeneratedTraces.h"
#include "TestTraces.h"
#include "poolscope/Series.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/analysis/TraceReport.h"

namespace poolscope {
namespace {

const std::string kSamples = POOLSCOPE_SAMPLES_DIR;
using test::MiB;
using test::namesPass;
using test::namesText;

std::string firstDifference(const std::string& want, const std::string& got) {
    std::istringstream a(want), b(got);
    std::string la, lb;
    for (int line = 1;; ++line) {
        const bool ea = !std::getline(a, la), eb = !std::getline(b, lb);
        if (ea && eb) return "same lines";
        if (ea || eb || la != lb)
            return "line " + std::to_string(line) + ":\n  timeline: " + (ea ? "<end>" : la) +
                   "\n  streamed: " + (eb ? "<end>" : lb);
    }
}

std::string sitesText(const std::vector<analysis::PoolSites>& pools) {
    std::string s;
    for (const analysis::PoolSites& p : pools) {
        s += std::to_string(p.pool) + " at " + std::to_string(p.atTsNs) + " peak " +
             std::to_string(p.atPeakReserved) + " reserved " + std::to_string(p.reserved) +
             " live " + std::to_string(p.liveBytes) + "/" + std::to_string(p.liveCount) + ":";
        for (const analysis::SiteBytes& b : p.top)
            s += " " + std::to_string(b.site) + "=" + std::to_string(b.bytes) + "/" +
                 std::to_string(b.count);
        s += "\n";
    }
    return s;
}

// Whether expectSame's last names pass on three threads replayed only the filtered events.
bool lastFiltered = false;
// Over expectSame's reports with questions asked during the read: those answered there, and
// those asked after it.
uint64_t aheadGiven = 0, aheadAsked = 0;

// Both ways, compared; returns the streamed one.
TraceReport expectSame(const std::string& path, size_t topN, size_t topSites) {
    SCOPED_TRACE(path + " --top " + std::to_string(topN) + " --top-sites " + std::to_string(topSites));
    auto reader = TraceReader::open(path);
    EXPECT_TRUE(reader);
    if (!reader) return {};
    (*reader)->setSkipDamaged(true);
    TraceReportOptions o;
    o.report.topN = topN;
    o.topSites = topSites;
    auto old = reportTraceViaTimeline(**reader, o, "t.poolscope");
    using Thread = TraceReportOptions::FeedThread;
    o.parallel = false;
    o.adviceFeedThread = Thread::Off;
    o.mergeThread = Thread::Off;
    auto now = reportTrace(**reader, o, "t.poolscope");
    // The advisor's models and the report's analyses during the read on a second thread (with a
    // replay of their own); then decoding on a second thread, the models on a third, the
    // analyses on a fourth, the time merge on a fifth, the spill on a sixth, and the advisor's
    // questions on several: the same report.
    o.adviceFeedThread = Thread::On;
    o.analysesThread = Thread::Off;
    o.spillThread = Thread::Off;
    o.leadThread = Thread::Off;
    auto two = reportTrace(**reader, o, "t.poolscope");
    o.parallel = true;
    o.analysesThread = Thread::On;
    o.mergeThread = Thread::On; // the time merge's batches applied on a thread of its own
    o.spillThread = Thread::On; // and the models' ops spilled and followed on another
    o.leadThread = Thread::On;  // one replay keeping the live set, the others following it
    o.racesThread = Thread::On; // the racing threads' ranges following the models' record
    o.askAhead = Thread::Off;
    auto par = reportTrace(**reader, o, "t.poolscope");
    // The report's own replay keeping the live set for the others instead, the analyses over
    // two threads following it.
    o.leadThread = Thread::Off;
    o.reportLeads = Thread::On;
    o.analysesSplit = Thread::On;
    auto led = reportTrace(**reader, o, "t.poolscope");
    // Neither keeping it: the analyses over two threads, each with a replay of its own.
    o.reportLeads = Thread::Auto;
    auto split = reportTrace(**reader, o, "t.poolscope");
    o.analysesSplit = Thread::Auto;
    o.leadThread = Thread::On;
    // And the advisor's questions asked during the read, following the spill as it is written.
    o.askAhead = Thread::On;
    auto ahead = reportTrace(**reader, o, "t.poolscope");
    // The analyses on the report's own replay (none on a replay of their own), and the questions
    // asked during the read giving way to it, as lanes of fewer LaneModels.
    o.analysesOnReport = Thread::On;
    o.aheadYield = TraceReportOptions::AheadYield::Nice;
    o.aheadLanes[0] = 12;
    o.aheadLanes[1] = 8;
    auto onReport = reportTrace(**reader, o, "t.poolscope");
    o.analysesOnReport = Thread::Auto;
    o.aheadYield = TraceReportOptions::AheadYield::None;
    o.aheadLanes[0] = o.aheadLanes[1] = 0;
    // The advisor's models on the report's own replay, their follower and the racing threads'
    // ranges on threads of their own, the analyses on a replay of their own.
    o.modelsOnReport = Thread::On;
    auto models = reportTrace(**reader, o, "t.poolscope");
    o.modelsOnReport = Thread::Auto;
    EXPECT_TRUE(old && now && two && par && led && split && ahead && onReport && models);
    if (!old || !now || !two || !par || !led || !split || !ahead || !onReport || !models) return {};
    EXPECT_EQ(reportToJson(now->report), reportToJson(models->report));
    EXPECT_EQ(sitesText(now->sites), sitesText(models->sites));
    EXPECT_EQ(reportToJson(now->report), reportToJson(onReport->report));
    EXPECT_EQ(sitesText(now->sites), sitesText(onReport->sites));
    EXPECT_EQ(reportToJson(now->report), reportToJson(led->report));
    EXPECT_EQ(sitesText(now->sites), sitesText(led->sites));
    EXPECT_EQ(reportToJson(now->report), reportToJson(split->report));
    EXPECT_EQ(sitesText(now->sites), sitesText(split->sites));
    EXPECT_EQ(reportToJson(now->report), reportToJson(two->report));
    EXPECT_EQ(sitesText(now->sites), sitesText(two->sites));
    EXPECT_EQ(reportToJson(now->report), reportToJson(par->report));
    EXPECT_EQ(sitesText(now->sites), sitesText(par->sites));
    { const std::string a = reportToJson(now->report), b = reportToJson(ahead->report); EXPECT_TRUE(a == b) << firstDifference(a, b); }
    EXPECT_EQ(sitesText(now->sites), sitesText(ahead->sites));
    EXPECT_EQ(par->aheadThreads, 0u);
    aheadGiven += ahead->aheadGiven;
    aheadAsked += ahead->aheadAsked;
    EXPECT_EQ(now->report.outOfOrderEvents, 0u);
    const std::string ot = reportToText(old->report), nt = reportToText(now->report);
    EXPECT_TRUE(ot == nt) << firstDifference(ot, nt);
    const std::string oj = reportToJson(old->report), nj = reportToJson(now->report);
    EXPECT_TRUE(oj == nj) << firstDifference(oj, nj);
    EXPECT_EQ(sitesText(old->sites), sitesText(now->sites));
    // The names-only pass (dump --names, export --format csv) gives the report's names and t0:
    // replaying every event, and replaying only what NamesFilter keeps, on the calling thread
    // and with the chunks filtered on three threads.
    (*reader)->setReuseHeaderScan(true);
    std::string madeFrom;
    for (int way = 0; way < 3; ++way) {
        SCOPED_TRACE(way == 0 ? "every event" : way == 1 ? "filtered, one thread" : "filtered, three threads");
        auto names = namesPass(**reader, way == 2 ? 3 : 1, way == 1);
        EXPECT_TRUE(names);
        if (!names) continue;
        EXPECT_EQ(names->t0, now->report.t0);
        EXPECT_EQ(namesText(**reader, names->names), namesText(**reader, now->report.names));
        if (way == 0) {
            EXPECT_FALSE(names->filtered);
            madeFrom = names->madeFrom;
        } else if (names->filtered) {
            EXPECT_EQ(names->madeFrom, madeFrom);
        }
        lastFiltered = names->filtered;
    }
    return std::move(*now);
}

TEST(ReportStream, EverySampleMatchesTheTimelineReport) {
    int n = 0;
    const uint64_t given = aheadGiven;
    for (const auto& entry : std::filesystem::directory_iterator(kSamples)) {
        if (entry.path().extension() != ".poolscope") continue;
        expectSame(entry.path().string(), 10, 0);
        expectSame(entry.path().string(), 3, 5);
        expectSame(entry.path().string(), 0, 1);
        ++n;
    }
    EXPECT_GE(n, 15);
    // The samples whose advisor asks something had it asked during the read.
    EXPECT_GT(aheadGiven, given);
}

// StepTail (the streaming report's series) against Series itself, capped at high watermarks the
// way the Timeline builder caps `used`: random pushes on a small set of values (equal neighbours,
// replacements, merges reaching back), clocks up to `lag` behind, points handed out as the
// frontier passes them. Every point handed out, the size and the last value must be Series'.
TEST(ReportStream, StepTailIsSeriesHeldAtItsNewestEnd) {
    std::mt19937_64 rng(3);
    for (int trial = 0; trial < 300; ++trial) {
        const int64_t lag = 1 + static_cast<int64_t>(rng() % 20);
        struct Op {
            bool high;
            int64_t ts;
            uint64_t v;
        };
        std::vector<Op> ops;
        int64_t now = 0;
        for (int i = 0; i < 400; ++i) {
            now += static_cast<int64_t>(rng() % 3);
            const int64_t ts = rng() % 3 == 0 ? now - static_cast<int64_t>(rng() % (lag + 1)) : now;
            ops.push_back({rng() % 25 == 0, ts, rng() % 5});
        }
        std::vector<uint64_t> caps;
        for (const Op& o : ops)
            if (o.high) caps.push_back(o.v);
        Series ref;
        detail::StepTail st;
        size_t nextCap = 0;
        st.setCapAhead(caps.empty() ? std::optional<uint64_t>() : caps[0]);
        size_t from = 0;
        uint64_t peak = 0;
        int64_t peakTs = 0, maxTs = INT64_MIN, merged = INT64_MIN;
        std::vector<Point> out;
        auto sink = [&](int64_t t, uint64_t v) { out.push_back({t, v}); };
        for (size_t i = 0; i < ops.size(); ++i) {
            const Op& o = ops[i];
            maxTs = std::max(maxTs, o.ts);
            if (!o.high) {
                ref.push(o.ts, o.v);
                EXPECT_TRUE(st.push(o.ts, o.v, merged)) << "trial " << trial << " op " << i;
            } else { // TimelineBuilder::Impl::driverHighs
                ref.capFrom(from, o.v);
                uint64_t want = peak;
                int64_t wantTs = peakTs;
                for (size_t k = from; k < ref.size(); ++k)
                    if (ref.v[k] > want) want = ref.v[k], wantTs = ref.t[k];
                from = ref.size();
                uint64_t got = 0;
                int64_t gotTs = 0;
                st.capSinceHigh(o.v, got, gotTs);
                EXPECT_EQ(got, want) << "trial " << trial << " op " << i;
                EXPECT_EQ(gotTs, wantTs) << "trial " << trial << " op " << i;
                peak = want, peakTs = wantTs;
                st.setHighPeak(peak, peakTs);
                ++nextCap;
                st.setCapAhead(nextCap < caps.size() ? std::optional<uint64_t>(caps[nextCap]) : std::nullopt);
            }
            ASSERT_EQ(st.size(), ref.size()) << "trial " << trial << " op " << i;
            if (!ref.empty()) EXPECT_EQ(st.back(), ref.v.back()) << "trial " << trial << " op " << i;
            if (i % 7 == 0) {
                merged = maxTs - lag; // no later clock is further behind than lag
                st.emitBefore(merged, false, sink);
            }
        }
        st.emitBefore(0, true, sink);
        ASSERT_EQ(out.size(), ref.size()) << "trial " << trial;
        for (size_t k = 0; k < out.size(); ++k) {
            EXPECT_EQ(out[k].t, ref.t[k]) << "trial " << trial << " point " << k;
            EXPECT_EQ(out[k].v, ref.v[k]) << "trial " << trial << " point " << k;
        }
    }
}

// The benchmarks' generator's events and samples, written as a trace.
struct Synthetic {
    std::string path;
    size_t events = 0, samples = 0;
};
Synthetic writeSynthetic(const test::ScratchDir& dir, uint64_t seed, size_t n) {
    const std::vector<Event> all = bench::SyntheticTrace(seed).generate(n);
    std::vector<Event> events, samples;
    for (const Event& e : all) (e.kind == EventKind::Sample ? samples : events).push_back(e);
    return {test::writeEvents(dir.file("synthetic.poolscope"), events, samples), events.size(), samples.size()};
}

// The benchmarks' workload (its samples carry high watermarks, so `used` gets capped).
TEST(ReportStream, SyntheticWorkloadMatches) {
    test::ScratchDir dir;
    const Synthetic t = writeSynthetic(dir, 7, 300'000);
    ASSERT_GT(t.samples, 20u);
    expectSame(t.path, 10, 0);
    expectSame(t.path, 4, 3);
}

// A read that stops part-way, cancelled or on a damaged chunk, with the advisor's models and the
// analyses on threads of their own (waiting for chunks, or blocked handing one over): the report
// says why, the threads are stopped, and the same reader reports whole afterwards.
TEST(ReportStream, AReadThatStopsPartWayStopsTheFeedThread) {
    test::ScratchDir dir;
    const Synthetic t = writeSynthetic(dir, 11, 200'000);
    const std::string& path = t.path;
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    ASSERT_GT((*reader)->chunkedEventCount(), 0u);
    for (bool parallel : {false, true}) {
        for (uint64_t stopAfter : {uint64_t{1}, uint64_t{100'000}, uint64_t{50'000}}) {
            SCOPED_TRACE(std::to_string(parallel) + " after " + std::to_string(stopAfter));
            std::atomic<bool> cancel{false};
            TraceReportOptions o;
            o.parallel = parallel;
            o.adviceFeedThread = TraceReportOptions::FeedThread::On;
            o.analysesThread = TraceReportOptions::FeedThread::On;
            o.mergeThread = TraceReportOptions::FeedThread::On;
            o.spillThread = TraceReportOptions::FeedThread::On;
            o.askAhead = TraceReportOptions::FeedThread::On;
            o.racesThread = TraceReportOptions::FeedThread::On;
            // The last: the report's replay keeping the live set instead of a thread of its own.
            const bool reportLeads = stopAfter == 50'000;
            o.leadThread = reportLeads ? TraceReportOptions::FeedThread::Off : TraceReportOptions::FeedThread::On;
            if (reportLeads) o.reportLeads = TraceReportOptions::FeedThread::On;
            // The second: the models on the report's own replay, their follower and ranges on
            // threads that must stop with it.
            if (stopAfter == 100'000) o.modelsOnReport = TraceReportOptions::FeedThread::On;
            o.cancel = &cancel;
            uint64_t seen = 0;
            o.progress = [&](uint64_t done, uint64_t) {
                seen = done;
                if (done >= stopAfter) cancel = true;
            };
            auto r = reportTrace(**reader, o);
            ASSERT_FALSE(r);
            EXPECT_EQ(r.error().code, ErrorCode::Cancelled);
            EXPECT_LT(seen, t.events);
        }
    }
    TraceReportOptions o;
    o.adviceFeedThread = TraceReportOptions::FeedThread::On;
    o.analysesThread = TraceReportOptions::FeedThread::On;
    auto whole = reportTrace(**reader, o);
    ASSERT_TRUE(whole);
    EXPECT_EQ(whole->report.eventCount, t.events);

    // A chunk past the first damaged: strict reading fails there.
    test::execSql(path, "UPDATE event_chunks SET crc = -1 WHERE id = 3");
    auto damaged = TraceReader::open(path);
    ASSERT_TRUE(damaged);
    for (bool parallel : {false, true})
        for (auto lead : {TraceReportOptions::FeedThread::Off, TraceReportOptions::FeedThread::On}) {
            o.parallel = parallel;
            o.leadThread = lead;
            o.modelsOnReport = parallel ? TraceReportOptions::FeedThread::On : TraceReportOptions::FeedThread::Auto;
            o.spillThread = o.racesThread = o.modelsOnReport;
            o.reportLeads = lead == TraceReportOptions::FeedThread::Off ? TraceReportOptions::FeedThread::On
                                                                        : TraceReportOptions::FeedThread::Off;
            auto r = reportTrace(**damaged, o);
            ASSERT_FALSE(r);
            EXPECT_EQ(r.error().code, ErrorCode::Corrupt) << r.error().message;
        }
}

// The advisor's models and the report's analyses on threads of their own follow replays of their
// own: given the pools' knobs as read when each was first seen (pool_initial_attributes), as the
// report's replay is, or their answers would differ from following the report's replay.
TEST(ReportStream, TheFeedThreadsReplayKnowsTheDeclaredKnobs) {
    test::ScratchDir dir;
    const std::vector<Event> all = bench::SyntheticTrace(5).generate(300'000);
    // Without the workload's own threshold changes, so that the declared values hold throughout.
    std::vector<Event> events, samples;
    for (const Event& e : all) {
        if (e.kind == EventKind::Sample) samples.push_back(e);
        else if (e.kind != EventKind::PoolSetAttribute) events.push_back(e);
    }
    for (size_t i = 0; i < events.size(); ++i) events[i].seq = i + 1;
    std::vector<PoolAttributeValue> knobs;
    for (uint64_t handle : bench::SyntheticTrace::kPools) knobs.push_back({handle, PoolAttr::ReleaseThreshold, 8 * MiB});
    knobs.push_back({bench::SyntheticTrace::kPools[1], PoolAttr::ReuseAllowOpportunistic, 0});
    events.insert(events.end(), samples.begin(), samples.end()); // (to their table, after the events)
    const std::string path = test::writeGenerated(dir.file("generated_declared_knobs.poolscope"), events, 0, knobs);
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    std::string want;
    using Thread = TraceReportOptions::FeedThread;
    for (auto [feed, analyses] : {std::pair{Thread::Off, Thread::Off}, std::pair{Thread::On, Thread::Off},
                                  std::pair{Thread::On, Thread::On}}) {
        TraceReportOptions o;
        o.adviceFeedThread = feed;
        o.analysesThread = analyses;
        auto r = reportTrace(**reader, o, "t.poolscope");
        ASSERT_TRUE(r);
        const std::string got = reportToText(r->report) + reportToJson(r->report);
        if (want.empty()) {
            want = got;
            EXPECT_NE(got.find("what-if model"), std::string::npos) << got; // the advice to compare
        } else {
            EXPECT_TRUE(got == want) << firstDifference(want, got);
        }
    }
}

// Where no thread can be started (a process or container limit), the replays that would have
// run on threads of their own run on the report's: the same report.
TEST(ReportStream, WithoutThreadsTheReplaysRunOnTheReportsThread) {
    test::ScratchDir dir;
    auto reader = TraceReader::open(writeSynthetic(dir, 3, 100'000).path);
    ASSERT_TRUE(reader);
    TraceReportOptions o;
    o.adviceFeedThread = TraceReportOptions::FeedThread::Off;
    auto want = reportTrace(**reader, o, "t.poolscope");
    ASSERT_TRUE(want);
    EXPECT_GT(want->report.unorderedReuses, 0u); // the analyses have something to find
    o.adviceFeedThread = TraceReportOptions::FeedThread::On;
    o.analysesThread = TraceReportOptions::FeedThread::On;
    o.mergeThread = TraceReportOptions::FeedThread::On;
    o.spillThread = TraceReportOptions::FeedThread::On;
    o.leadThread = TraceReportOptions::FeedThread::On;
    detail::simulateNoReplayThreads(true);
    auto got = reportTrace(**reader, o, "t.poolscope");
    // The report's replay keeping the live set, the others following it on this thread.
    o.leadThread = TraceReportOptions::FeedThread::Off;
    o.reportLeads = TraceReportOptions::FeedThread::On;
    auto led = reportTrace(**reader, o, "t.poolscope");
    detail::simulateNoReplayThreads(false);
    ASSERT_TRUE(got && led);
    EXPECT_EQ(reportToText(got->report), reportToText(want->report));
    EXPECT_EQ(reportToJson(got->report), reportToJson(want->report));
    EXPECT_EQ(reportToJson(led->report), reportToJson(want->report));
}

TEST(ReportStream, DisorderlyTracesMatch) {
    test::ScratchDir dir;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
        test::Disorderly g(seed, 50'000'000); // threads up to 50 ms behind: inside the horizon
        g.generate(seed == 1 ? 120'000 : 20'000);
        const std::string path = test::writeEvents(dir.file("disorderly" + std::to_string(seed) + ".poolscope"),
                                       g.events(), g.samples(), g.declared());
        const TraceReport r = expectSame(path, 10, 4);
        if (seed <= 2) expectSame(path, 2, 1); // fewer listed than retried failures
        // The traces do reach what they are for.
        EXPECT_GT(r.report.failedCount, 0u);
        EXPECT_GT(r.report.reusedWithoutFree + r.report.leakCount, 0u);
        EXPECT_FALSE(r.report.outside.empty());
        EXPECT_GT(r.report.deviceSyncsDuringPoolWork, 0u);
    }
}

// Hand-built (not a recording): frees whose events name another pool than their block's, with
// watermarks. Pool 0xC00 never allocates; it gets reserved bytes only from a free of pool
// 0xD00's block that names it, and is marked as reserved only at the free of the block it
// imported, by the replay of every event. The filtered pass (which keeps no allocated blocks,
// so its frees mark their own pool) sees a pool marked by frees alone and replays every event
// instead. (The names depend on those marks only through the unknown pool's lane today, so
// they would agree here anyway; the pass must not rely on it.)
TEST(ReportStream, FreesNamingAnotherPoolThanTheirBlocksAreNamedAsTheWholeReplayNamesThem) {
    test::ScratchDir dir;
    test::Events ev;
    ev.alloc(100, 0x20, 0xD00, 0x5000, 4 * MiB);
    Event& imp = ev.add(EventKind::PointerImport, 150);
    imp.pool = 0xC00;
    imp.ptr = 0x9000;
    test::Events::wm(ev.free(200, 0x20, 0xC00, 0x5000), 8 * MiB, 0);
    test::Events::wm(ev.free(300, 0x20, 0xE00, 0x9000), 2 * MiB, 0);
    ev.alloc(400, 0x30, 0xB00, 0x7000, 4 * MiB);
    const std::string path = test::writeEvents(dir.file("handbuilt_free_other_pool.poolscope"), ev.all(), {});
    const TraceReport r = expectSame(path, 10, 0);
    EXPECT_FALSE(lastFiltered) << "the filtered pass must not answer for this trace";
    EXPECT_EQ(r.report.names.pool(0xC00), "pool #2 (unknown)");
}

// Hand-built (not a recording): streams whose lanes only a wait or a failure gives, numbered
// before the stream that allocates (lower handles). Stream 0x10 only waits on an event recorded
// on 0x20; stream 0x18 only fails; pool 0xA00 only reserves (in its samples). The names-only
// pass must number them as the report does (a stream without a lane is numbered after those
// with one).
TEST(ReportStream, HandBuiltLanesOfWaitsAndFailuresAreNamedByTheNamesPass) {
    test::ScratchDir dir;
    test::Events ev;
    test::Events::wm(ev.alloc(100, 0x20, 0xB00, 0x1000, 4 * MiB), 32 * MiB, 4 * MiB);
    Event& rec = ev.add(EventKind::EventRecord, 200);
    rec.stream = 0x20;
    rec.ptr = 0xE1;
    Event& wait = ev.add(EventKind::StreamWaitEvent, 300);
    wait.stream = 0x10;
    wait.ptr = 0xE1;
    Event& failed = ev.alloc(400, 0x18, 0xB00, 0, 64 * MiB);
    failed.result = 2; // out of memory
    std::vector<Event> samples = {ev.sample(150, 0xA00, 2 * MiB, 0, 0, 0),
                                  ev.sample(350, 0xA00, 0, 0, 2 * MiB, 0)};
    const std::string path = test::writeEvents(dir.file("handbuilt_lanes.poolscope"), ev.all(), samples);
    const TraceReport r = expectSame(path, 10, 2);
    EXPECT_EQ(r.report.names.stream(0x10), "stream #1") << "a lane from its wait";
    EXPECT_EQ(r.report.names.stream(0x18), "stream #2") << "a lane from its failure";
    EXPECT_EQ(r.report.names.stream(0x20), "stream #3");
}


// cudaFree of a pointer another process exported (a pointer import): the replay frees the mapping,
// which has no allocation record. The Timeline builder closed a record it did not have (a crash
// on such a trace); both reports count it with the frees of memory not allocated here.
TEST(ReportStream, CudaFreeOfAnImportedPointerIsNoAllocation) {
    test::ScratchDir dir;
    test::Events ev;
    test::Events::wm(ev.alloc(100, 0x10, 0xA00, 0x1000, 4 * MiB), 32 * MiB, 4 * MiB);
    Event& imp = ev.add(EventKind::PointerImport, 200);
    imp.pool = 0xA00;
    imp.ptr = 0x9000;
    Event& f = ev.add(EventKind::DeviceFree, 300);
    f.pool = 0xA00;
    f.ptr = 0x9000;
    const std::string path = test::writeEvents(dir.file("handbuilt_import_free.poolscope"), ev.all(), {});
    const TraceReport r = expectSame(path, 10, 2);
    EXPECT_EQ(r.report.unmatchedFrees, 1u);
    EXPECT_EQ(r.report.leakCount, 1u);
}

// Hand-built: PyTorch's first cuMemAllocAsync on its autograd thread returns 201 with no pool
// (no context yet) and the runtime's retry succeeds on the default pool. Both reports list the
// default pool only: no "0x0" row of nothing. A pool-less failure the runtime did not retry
// (out of memory) keeps its row: it is a failure of that (unknown) pool.
TEST(ReportStream, HandBuiltRetriedCallWithoutAPoolMakesNoPoolRow) {
    constexpr uint64_t kPool = 0xD00;
    test::ScratchDir dir;
    test::Events ev;
    Event& first = ev.alloc(1'000'000, 0x10, 0, 0, 16 * MiB);
    first.result = 201;
    first.device = -1;
    test::Events::wm(ev.alloc(1'230'000, 0x10, kPool, 0x1000, 16 * MiB), 32 * MiB, 16 * MiB);
    test::Events::wm(ev.free(1'300'000, 0x10, kPool, 0x1000), 32 * MiB, 0);
    const TraceReport r =
        expectSame(test::writeEvents(dir.file("handbuilt_retry_no_pool.poolscope"), ev.all(), {}), 10, 0);
    ASSERT_EQ(r.report.pools.size(), 1u);
    EXPECT_EQ(r.report.pools[0].info.handle, kPool);
    EXPECT_EQ(reportToText(r.report).find("0x0 "), std::string::npos) << reportToText(r.report);

    Event& oom = ev.alloc(2'000'000, 0x10, 0, 0, 1ull << 50);
    oom.result = 2;
    oom.device = -1;
    const TraceReport r2 =
        expectSame(test::writeEvents(dir.file("handbuilt_oom_no_pool.poolscope"), ev.all(), {}), 10, 0);
    ASSERT_EQ(r2.report.pools.size(), 2u);
    size_t unknown = 0;
    for (const PoolReport& p : r2.report.pools)
        if (p.info.handle == 0) {
            ++unknown;
            EXPECT_EQ(p.failedCount, 1u);
        }
    EXPECT_EQ(unknown, 1u);
}

// An allocation right after the free of an imported mapping: the replay handed it out still
// marked imported (a flag left over in its Fact), so its free counted as a free of memory not
// allocated here and it stayed a leak in the Timeline's report (and vanished from the streamed
// one's). Found by the disorderly traces above.
TEST(ReportStream, AllocationAfterAnImportedFreeIsAnAllocation) {
    test::ScratchDir dir;
    test::Events ev;
    test::Events::wm(ev.alloc(100, 0x10, 0xA00, 0x1000, 4 * MiB), 32 * MiB, 4 * MiB);
    Event& imp = ev.add(EventKind::PointerImport, 200);
    imp.pool = 0xA00;
    imp.ptr = 0x9000;
    ev.free(300, 0x10, 0xA00, 0x9000);
    test::Events::wm(ev.alloc(400, 0x10, 0xA00, 0x2000, 2 * MiB), 32 * MiB, 6 * MiB);
    test::Events::wm(ev.free(500, 0x10, 0xA00, 0x2000), 32 * MiB, 4 * MiB);
    const std::string path = test::writeEvents(dir.file("handbuilt_import_then_alloc.poolscope"), ev.all(), {});
    const TraceReport r = expectSame(path, 10, 2);
    EXPECT_EQ(r.report.unmatchedFrees, 1u);
    EXPECT_EQ(r.report.leakCount, 1u);
    EXPECT_EQ(r.report.leakBytes, 4 * MiB);
}

// An event five seconds behind the newest one: its points were already used, so the figures
// over time are approximate, and the report says how many such events there were.
TEST(ReportStream, EventsBeyondTheHorizonAreCountedAndSaid) {
    test::ScratchDir dir;
    test::Disorderly g(11, 5'000'000'000);
    g.generate(400'000);
    const std::string path = test::writeEvents(dir.file("late.poolscope"), g.events(), g.samples(), g.declared());
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    TraceReportOptions o;
    o.topSites = 3;
    auto old = reportTraceViaTimeline(**reader, o);
    o.mergeThread = TraceReportOptions::FeedThread::Off;
    auto now = reportTrace(**reader, o);
    // The time merge on a thread of its own counts and approximates the same way: it is handed
    // the points in the order and at the frontiers the reading side chose.
    o.mergeThread = TraceReportOptions::FeedThread::On;
    auto merged = reportTrace(**reader, o);
    ASSERT_TRUE(old && now && merged);
    EXPECT_EQ(reportToJson(merged->report), reportToJson(now->report));
    EXPECT_EQ(sitesText(merged->sites), sitesText(now->sites));
    EXPECT_GT(now->report.outOfOrderEvents, 0u);
    EXPECT_EQ(old->report.outOfOrderEvents, 0u);
    bool said = false;
    for (const std::string& f : now->report.findings)
        said = said || f.find("out of time order") != std::string::npos;
    EXPECT_TRUE(said);
    EXPECT_NE(reportToJson(now->report).find("\"out_of_order_events\""), std::string::npos);
    // What does not depend on time order is still exact.
    ASSERT_EQ(old->report.pools.size(), now->report.pools.size());
    for (size_t i = 0; i < old->report.pools.size(); ++i) {
        EXPECT_EQ(old->report.pools[i].allocCount, now->report.pools[i].allocCount);
        EXPECT_EQ(old->report.pools[i].peakReserved, now->report.pools[i].peakReserved);
        EXPECT_EQ(old->report.pools[i].liveAtEndBytes, now->report.pools[i].liveAtEndBytes);
    }
    EXPECT_EQ(old->report.leakBytes, now->report.leakBytes);
    EXPECT_EQ(old->report.failedCount, now->report.failedCount);
}

// A hand-built trace (not a recording): an allocation on pool A six seconds behind the newest
// event (pool B's), in a later chunk, after A's points were used: its reserved, used, stream
// live bytes and new peak all come too late. It is one event out of time order, not four, on
// the reading thread and with the series on threads of their own.
TEST(ReportStream, AnEventWithSeveralLatePointsIsCountedOnce) {
    test::ScratchDir dir;
    test::Events ev;
    test::Events::wm(ev.alloc(100'000'000, 0x10, 0xA00, 0x1000, 4 * MiB), 32 * MiB, 4 * MiB);
    test::Events::wm(ev.alloc(7'000'000'000, 0x20, 0xB00, 0x2000, 4 * MiB), 64 * MiB, 8 * MiB);
    test::Events::wm(ev.alloc(1'000'000'000, 0x10, 0xA00, 0x3000, 4 * MiB), 96 * MiB, 12 * MiB);
    test::Events::wm(ev.free(7'100'000'000, 0x20, 0xB00, 0x2000), 64 * MiB, 4 * MiB);
    const std::string path =
        test::writeEvents(dir.file("handbuilt_late_event.poolscope"), ev.all(), {}, {}, /*perChunk=*/2);
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    for (auto thread : {TraceReportOptions::FeedThread::Off, TraceReportOptions::FeedThread::On}) {
        TraceReportOptions o;
        o.mergeThread = thread;
        auto r = reportTrace(**reader, o);
        ASSERT_TRUE(r);
        EXPECT_EQ(r->report.outOfOrderEvents, 1u);
        ASSERT_EQ(r->report.pools.size(), 2u);
        EXPECT_EQ(r->report.pools[0].peakReserved, 96 * MiB);
        EXPECT_EQ(r->report.pools[0].peakUsed, 12 * MiB);
    }
}

} // namespace
} // namespace poolscope
