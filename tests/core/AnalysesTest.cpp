// The stream-hazard and fragmentation analyses on the replay: hand-built event sequences whose
// answers are worked out here, then real GPU traces from resources/samples.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "TestTraces.h"
#include "poolscope/EventFields.h"
#include "poolscope/Report.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/analysis/Fragmentation.h"
#include "poolscope/analysis/StreamHazards.h"

namespace poolscope {
namespace {

using test::Events;
constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t kPool = 0x100, kS1 = 0x11, kS2 = 0x22, kS3 = 0x33, kS4 = 0x44;

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

std::shared_ptr<const Timeline> build(const Events& ev) {
    TimelineBuilder b;
    for (const Event& e : ev.all()) b.add(e);
    return b.finish();
}

// (first seq, second seq) of each hazard of a kind.
std::vector<std::pair<uint64_t, uint64_t>> pairs(const StreamHazards& h, StreamHazard::Kind k) {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (const StreamHazard& x : h.hazards)
        if (x.kind == k) out.emplace_back(x.first.seq, x.second.seq);
    return out;
}

// Hand-built: blocks allocated on S1 and freed on S2, each with a different ordering (or none).
// The seq of each event is its position in the list (Events numbers from 1).
TEST(StreamHazards, HandBuiltUnorderedFreesAndWhatOrdersAFree) {
    Events ev;
    // 1-2: nothing orders S1's work before the free: hazard (1, 2).
    ev.alloc(10, kS1, kPool, 0x1000, MiB);
    ev.free(20, kS2, kPool, 0x1000);
    // 3-6: S2 waits on a record on S1 after the alloc: ordered (the replay says so too).
    ev.alloc(30, kS1, kPool, 0x2000, MiB);
    record(ev, 40, kS1, 0xE1);
    wait(ev, 50, kS2, 0xE1);
    ev.free(60, kS2, kPool, 0x2000);
    // 7-12: S1 -> S3 -> S2 through two events: ordered transitively, which the replay's direct
    // check does not see.
    ev.alloc(70, kS1, kPool, 0x3000, MiB);
    record(ev, 80, kS1, 0xE1);
    wait(ev, 90, kS3, 0xE1);
    record(ev, 100, kS3, 0xE2);
    wait(ev, 110, kS2, 0xE2);
    ev.free(120, kS2, kPool, 0x3000);
    // 13-15: the host synchronized S1 after the alloc: ordered.
    ev.alloc(130, kS1, kPool, 0x4000, MiB);
    ev.add(EventKind::StreamSynchronize, 140).stream = kS1;
    ev.free(150, kS2, kPool, 0x4000);
    // 16-19: an event synchronize on a record on S1 after the alloc: ordered.
    ev.alloc(160, kS1, kPool, 0x5000, MiB);
    record(ev, 170, kS1, 0xE3);
    CuEventFields{0xE3, 0}.into(ev.add(EventKind::EventSynchronize, 180));
    ev.free(190, kS2, kPool, 0x5000);
    // 20-23: the record S2 waits on was made before the alloc: hazard (21, 23).
    record(ev, 200, kS1, 0xE4);
    ev.alloc(210, kS1, kPool, 0x6000, MiB);
    wait(ev, 220, kS2, 0xE4);
    ev.free(230, kS2, kPool, 0x6000);
    // 24-28: S3 waited on S1 after the alloc and the host synchronized S3: that covers S1's
    // work too.
    ev.alloc(240, kS1, kPool, 0x7000, MiB);
    record(ev, 250, kS1, 0xE5);
    wait(ev, 260, kS3, 0xE5);
    ev.add(EventKind::StreamSynchronize, 270).stream = kS3;
    ev.free(280, kS2, kPool, 0x7000);
    // 29-30: allocated on the legacy default stream (0), freed on S2, not known to be
    // non-blocking: the legacy stream orders them.
    ev.alloc(290, 0, kPool, 0x8000, MiB);
    ev.free(300, kS2, kPool, 0x8000);
    // 31-33: S4 created non-blocking: the legacy stream orders nothing with it: hazard (32, 33).
    Event& create = ev.add(EventKind::StreamCreate, 310);
    create.stream = kS4;
    StreamCreateFields{1, 0}.into(create);
    ev.alloc(320, 0, kPool, 0x9000, MiB);
    ev.free(330, kS4, kPool, 0x9000);
    // 34-36: a context synchronize orders everything before it.
    ev.alloc(340, kS1, kPool, 0xA000, MiB);
    ev.add(EventKind::ContextSynchronize, 350);
    ev.free(360, kS2, kPool, 0xA000);

    replay::Replay r;
    StreamHazardsAnalysis a;
    r.subscribe(&a, StreamHazardsAnalysis::kindMask());
    bool replayOrderedTransitive = true;
    for (const Event& e : ev.all()) {
        const replay::Fact& f = r.apply(e);
        if (e.seq == 12) replayOrderedTransitive = f.orderedByWait;
    }
    EXPECT_FALSE(replayOrderedTransitive) << "the replay sees direct waits only";
    const StreamHazards& h = a.result();
    using P = std::pair<uint64_t, uint64_t>;
    EXPECT_EQ(pairs(h, StreamHazard::Kind::UnorderedFree),
              (std::vector<P>{{1, 2}, {21, 23}, {32, 33}}));
    EXPECT_EQ(h.unorderedFrees, 3u);
    EXPECT_EQ(h.unorderedReuses, 0u); // every address is used once
    ASSERT_EQ(h.hazards.size(), 3u);
    EXPECT_EQ(h.hazards[0].first.stream, kS1);
    EXPECT_EQ(h.hazards[0].second.stream, kS2);
    EXPECT_EQ(h.hazards[0].first.tsNs, 10);
    EXPECT_EQ(h.hazards[0].second.tsNs, 20);
    EXPECT_EQ(h.hazards[0].bytes, MiB);
    EXPECT_EQ(h.hazards[0].ptr, 0x1000u);
    EXPECT_EQ(h.hazards[2].first.stream, 0u);
    EXPECT_EQ(h.hazards[2].second.stream, kS4);
}

// Hand-built: one stream waits on 17 others, one more than a clock holds: the oldest ordering
// (on the first stream) is forgotten, and the result says so. A free of that stream's block is
// still ordered: the replay's own check of the direct wait does not forget. With 16 nothing is
// truncated.
TEST(StreamHazards, HandBuiltOrderingsBeyondTheClockAreFlagged) {
    for (const int others : {16, 17}) {
        Events ev;
        for (int i = 0; i < others; ++i) {
            const uint64_t s = 0x1000 + i;
            ev.alloc(10 * i, s, kPool, 0x100000 * (i + 1), MiB);
            record(ev, 10 * i + 1, s, 0xE000 + i);
            wait(ev, 10 * i + 2, kS1, 0xE000 + i);
        }
        ev.free(1000, kS1, kPool, 0x100000); // allocated on the first other stream
        replay::Replay r;
        StreamHazardsAnalysis a;
        r.subscribe(&a, StreamHazardsAnalysis::kindMask());
        for (const Event& e : ev.all()) r.apply(e);
        EXPECT_EQ(a.result().truncated, others > 16) << others;
        EXPECT_EQ(a.result().unorderedFrees, 0u) << others;
    }
}

// Hand-built: one address going back and forth between S1 and S2.
TEST(StreamHazards, HandBuiltUnorderedReuseAcrossStreams) {
    Events ev;
    constexpr uint64_t P = 0x1000;
    ev.alloc(10, kS1, kPool, P, MiB); // 1   allocation 0
    ev.free(20, kS1, kPool, P);       // 2
    ev.alloc(30, kS2, kPool, P, MiB); // 3   allocation 1: S1's free not ordered before: hazard
    ev.free(40, kS2, kPool, P);       // 4
    record(ev, 50, kS2, 0xE1);        // 5
    wait(ev, 60, kS1, 0xE1);          // 6
    ev.alloc(70, kS1, kPool, P, MiB); // 7   allocation 2: ordered by the wait
    ev.free(80, kS1, kPool, P);       // 8
    ev.alloc(90, kS1, kPool, P, MiB); // 9   allocation 3: the same stream
    ev.free(100, kS1, kPool, P);      // 10
    ev.add(EventKind::StreamSynchronize, 110).stream = kS1; // 11
    ev.alloc(120, kS2, kPool, P, MiB); // 12 allocation 4: the host synchronized S1 after the free
    Event& off = ev.add(EventKind::PoolSetAttribute, 130); // 13: opportunistic reuse off
    off.pool = kPool;
    AttributeFields{PoolAttr::ReuseAllowOpportunistic, 0, std::nullopt}.into(off);
    ev.free(140, kS2, kPool, P);       // 14
    ev.alloc(150, kS1, kPool, P, MiB); // 15  allocation 5: hazard, with opportunistic reuse off
    auto tl = build(ev);
    const StreamHazards& h = tl->hazards;
    using Pr = std::pair<uint64_t, uint64_t>;
    EXPECT_EQ(pairs(h, StreamHazard::Kind::UnorderedReuse), (std::vector<Pr>{{2, 3}, {14, 15}}));
    EXPECT_EQ(h.unorderedFrees, 0u);
    ASSERT_EQ(h.hazards.size(), 2u);
    EXPECT_EQ(h.hazards[0].first.allocation, 0u); // the block freed
    EXPECT_EQ(h.hazards[0].second.allocation, 1u); // the block allocated
    EXPECT_EQ(h.hazards[0].first.stream, kS1);
    EXPECT_EQ(h.hazards[0].second.stream, kS2);
    EXPECT_EQ(h.hazards[0].opportunistic, -1); // the pool's policy is not known yet
    EXPECT_EQ(h.hazards[1].first.allocation, 4u);
    EXPECT_EQ(h.hazards[1].second.allocation, 5u);
    EXPECT_EQ(h.hazards[1].opportunistic, 0);
    ASSERT_EQ(tl->allocations.size(), 6u);
    EXPECT_EQ(tl->allocations[5].allocSeq, 15u);

    // In the report: counted, listed with both events and the streams' names, and a finding.
    Report r = buildReport(*tl);
    EXPECT_EQ(r.unorderedReuses, 2u);
    const std::string text = reportToText(r);
    EXPECT_NE(text.find("0 unordered cross-stream free(s), 2 unordered reuse(s)"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("free 2, 10 ns, " + r.names.stream(kS1)), std::string::npos) << text;
    EXPECT_NE(text.find("alloc 3, 20 ns, " + r.names.stream(kS2)), std::string::npos) << text;
    bool finding = false;
    for (const std::string& f : r.findings)
        finding = finding || f.rfind("2 allocation(s) got memory freed on another stream", 0) == 0;
    EXPECT_TRUE(finding) << text;
    auto j = nlohmann::json::parse(reportToJson(r));
    EXPECT_EQ(j["stream_hazards"]["unordered_reuses"], 2);
    EXPECT_EQ(j["stream_hazards"]["first"][1]["free"]["seq"], 14);
    EXPECT_EQ(j["stream_hazards"]["first"][1]["alloc"]["seq"], 15);
    EXPECT_EQ(j["stream_hazards"]["first"][1]["opportunistic_reuse"], false);
    EXPECT_TRUE(j["stream_hazards"]["first"][0]["opportunistic_reuse"].is_null());
}

// Hand-built: a pool's growths and failures against its idle bytes. Worked out below; all
// sizes in MiB.
TEST(Fragmentation, HandBuiltGrowthsWhileIdle) {
    Events ev;
    Event& create = ev.add(EventKind::PoolCreate, 1000); // 1: reserved 0, used 0
    create.pool = kPool;
    PoolCreateFields{}.into(create);
    // 2: grows 0 -> 32 with nothing idle
    Events::wm(ev.alloc(1010, kS1, kPool, 0x1000, 8 * MiB), 32 * MiB, 8 * MiB);
    Events::wm(ev.alloc(1020, kS1, kPool, 0x2000, 8 * MiB), 32 * MiB, 16 * MiB); // 3: no growth
    Events::wm(ev.free(1030, kS1, kPool, 0x1000), 32 * MiB, 8 * MiB);            // 4: idle 24
    // 5: 20 with 24 idle, grows 32 -> 64: fragmented (S1's own free is reusable by S1)
    Events::wm(ev.alloc(1040, kS1, kPool, 0x3000, 20 * MiB), 64 * MiB, 28 * MiB);
    // 6: freed on S2: 8 pending there until something hands it to S1; idle 44
    Events::wm(ev.free(1050, kS2, kPool, 0x2000), 64 * MiB, 20 * MiB);
    // 7: 40 with 44 idle, of which 8 may be S2's pending frees: 36 < 40, not fragmented;
    // grows 64 -> 96
    Events::wm(ev.alloc(1060, kS1, kPool, 0x4000, 40 * MiB), 96 * MiB, 60 * MiB);
    // 8: fails asking 30 with 36 idle (28 without S2's pending): while idle, not fragmented
    ev.alloc(1070, kS1, kPool, 0, 30 * MiB).result = 2;
    // 9: fails asking 20: 28 >= 20, fragmented
    ev.alloc(1080, kS1, kPool, 0, 20 * MiB).result = 2;
    auto tl = build(ev);
    const Fragmentation& f = tl->fragmentation;
    ASSERT_EQ(f.pools.size(), 1u);
    const Fragmentation::Pool& p = f.pools[0];
    EXPECT_EQ(p.handle, kPool);
    EXPECT_EQ(p.growths, 3u);
    EXPECT_EQ(p.growthsWhileIdle, 2u);
    EXPECT_EQ(p.fragmentedGrowths, 1u);
    EXPECT_EQ(p.grownBytes, 96 * MiB);
    EXPECT_EQ(p.failures, 2u);
    EXPECT_EQ(p.failuresWhileIdle, 2u);
    EXPECT_EQ(p.fragmentedFailures, 1u);
    ASSERT_EQ(f.events.size(), 5u);
    const PoolGrowth* g5 = f.at(5);
    ASSERT_NE(g5, nullptr);
    EXPECT_EQ(g5->idleBefore, 24 * MiB);
    EXPECT_EQ(g5->pendingElsewhere, 0u);
    EXPECT_EQ(g5->grewBy, 32 * MiB);
    EXPECT_EQ(g5->allocation, 2u);
    EXPECT_TRUE(g5->fragmented());
    const PoolGrowth* g7 = f.at(7);
    ASSERT_NE(g7, nullptr);
    EXPECT_EQ(g7->idleBefore, 44 * MiB);
    EXPECT_EQ(g7->pendingElsewhere, 8 * MiB);
    EXPECT_TRUE(g7->whileIdle());
    EXPECT_FALSE(g7->fragmented());
    const PoolGrowth* g9 = f.at(9);
    ASSERT_NE(g9, nullptr);
    EXPECT_TRUE(g9->failed);
    EXPECT_EQ(g9->idleBefore, 36 * MiB);
    EXPECT_TRUE(g9->fragmented());
    EXPECT_EQ(f.at(3), nullptr); // served from what the pool held

    Report r = buildReport(*tl);
    ASSERT_EQ(r.pools.size(), 1u);
    // Idle over [1000, 1060], 10 ns each at 0, 24, 16, 24, 36, 44 MiB: 144 * 10 / 60 = 24 MiB.
    EXPECT_EQ(r.pools[0].meanIdle, 24 * MiB);
    EXPECT_EQ(r.pools[0].fragmentedGrowths, 1u);
    EXPECT_EQ(r.pools[0].fragmentedFailures, 1u);
    ASSERT_EQ(r.fragmented.size(), 2u);
    EXPECT_EQ(r.fragmented[0].seq, 5u);
    EXPECT_EQ(r.fragmented[1].seq, 9u);
    bool finding = false;
    for (const std::string& s : r.findings)
        finding = finding || s.find(": 1 of 3 pool growth(s) and 1 failed allocation(s) came "
                                    "while at least the request's size sat idle") !=
                                 std::string::npos;
    EXPECT_TRUE(finding) << reportToText(r);
    auto j = nlohmann::json::parse(reportToJson(r));
    EXPECT_EQ(j["pools"][0]["growths_while_idle"], 2);
    EXPECT_EQ(j["pools"][0]["fragmented_growths"], 1);
    EXPECT_EQ(j["pools"][0]["mean_idle"], 24 * MiB);
    EXPECT_EQ(j["fragmented_allocations"][1]["failed"], true);
}

std::shared_ptr<const Timeline> sampleTimeline(const std::string& name) {
    auto reader = TraceReader::open(std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope");
    if (!reader) return nullptr;
    auto tl = buildTimeline(**reader);
    return tl ? *tl : nullptr;
}

std::map<std::string, uint64_t> truthSummary(const std::string& name) {
    std::ifstream in(std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".truth.jsonl");
    std::map<std::string, uint64_t> out;
    for (std::string line; std::getline(in, line);) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || j.value("type", "") != "summary") continue;
        for (auto& [k, v] : j.items())
            if (v.is_number_unsigned()) out[k] = v.get<uint64_t>();
    }
    return out;
}

// Recorded on a GPU (tests/workloads/threads.cu): 4 threads on 4 non-blocking streams; every
// 4th block is handed to the next thread, which frees it on its own stream with no event and
// no synchronize until the end. Every such free is an unordered free: the allocations freed on
// another stream, and a quarter of all (truth: allocs).
TEST(StreamHazards, RealThreadsTraceHandoffsAreUnorderedFrees) {
    auto tl = sampleTimeline("threads");
    ASSERT_TRUE(tl);
    const auto truth = truthSummary("threads");
    ASSERT_TRUE(truth.count("allocs"));
    ASSERT_TRUE(tl->edges.empty()) << "the workload records no events";
    uint64_t cross = 0;
    for (const Allocation& a : tl->allocations) cross += !a.live() && a.freeSeq && a.freeStream != a.allocStream;
    EXPECT_EQ(tl->hazards.unorderedFrees, cross);
    EXPECT_EQ(tl->hazards.unorderedFrees, truth.at("allocs") / 4);
    // Reuse: with no ordering at all until the final synchronize, every alloc that got an
    // address last freed on another stream is one. Counted here from the allocation records.
    struct Ev {
        uint64_t seq;
        bool free;
        uint64_t ptr, stream;
    };
    std::vector<Ev> evs;
    for (const Allocation& a : tl->allocations) {
        evs.push_back({a.allocSeq, false, a.ptr, a.allocStream});
        if (a.freeSeq) evs.push_back({a.freeSeq, true, a.ptr, a.freeStream});
    }
    std::sort(evs.begin(), evs.end(), [](const Ev& x, const Ev& y) { return x.seq < y.seq; });
    std::unordered_map<uint64_t, uint64_t> lastFreedOn;
    uint64_t reuses = 0;
    for (const Ev& e : evs) {
        if (e.free) {
            lastFreedOn[e.ptr] = e.stream;
            continue;
        }
        auto it = lastFreedOn.find(e.ptr);
        if (it == lastFreedOn.end()) continue;
        reuses += it->second != e.stream;
        lastFreedOn.erase(it);
    }
    EXPECT_EQ(tl->hazards.unorderedReuses, reuses);
    std::printf("threads sample: %llu unordered frees, %llu unordered reuses\n",
                (unsigned long long)tl->hazards.unorderedFrees,
                (unsigned long long)tl->hazards.unorderedReuses);
}

// Recorded on a GPU (tests/workloads/churn.cu): a producer/consumer pair, every block allocated
// on A and freed on B right after B waited on an event recorded on A after the alloc (truth:
// event_records = stream_waits = frees): no unordered free. B's frees come back to A only
// through B's synchronizes or, once opportunistic reuse is back on, opportunistically.
TEST(StreamHazards, RealChurnTraceOrderedFreesAndItsReuse) {
    auto tl = sampleTimeline("churn");
    ASSERT_TRUE(tl);
    const auto truth = truthSummary("churn");
    ASSERT_EQ(truth.at("event_records"), truth.at("frees"));
    EXPECT_EQ(tl->hazards.unorderedFrees, 0u);
    // The driver reuses without an ordering only through opportunistic reuse (or an internal
    // dependency): the workload turns opportunistic reuse off for its first half, and no
    // unordered reuse may fall there; once it is back on, some do.
    uint64_t whileOff = 0, whileOn = 0;
    for (const StreamHazard& h : tl->hazards.hazards) {
        ASSERT_EQ(h.kind, StreamHazard::Kind::UnorderedReuse);
        EXPECT_EQ(h.first.stream, h.second.stream == tl->streams[0].info.handle
                                      ? tl->streams[1].info.handle
                                      : tl->streams[0].info.handle);
        whileOff += h.opportunistic == 0;
        whileOn += h.opportunistic == 1;
    }
    EXPECT_EQ(whileOff, 0u);
    EXPECT_GT(whileOn, 0u);
    EXPECT_EQ(whileOn, tl->hazards.unorderedReuses);
    std::printf("churn sample: %llu unordered reuses (%llu while opportunistic reuse was off)\n",
                (unsigned long long)tl->hazards.unorderedReuses, (unsigned long long)whileOff);
    const Fragmentation& f = tl->fragmentation;
    for (const Fragmentation::Pool& p : f.pools)
        std::printf("churn sample: pool 0x%llx: %llu growths, %llu while idle, %llu fragmented; "
                    "%llu failures\n",
                    (unsigned long long)p.handle, (unsigned long long)p.growths,
                    (unsigned long long)p.growthsWhileIdle,
                    (unsigned long long)p.fragmentedGrowths, (unsigned long long)p.failures);
}

} // namespace
} // namespace poolscope
