// Several traces on one time axis (issue #16): the window's lanes per process and its compare
// mode. Real samples where the property is in them (the IPC pair, the NVTX ranges of callsites);
// hand-built ProcessInfo and NvtxRange values, named so, for the cases no sample has (two hosts,
// a trace without a wall-clock start, ranges the runs do not share).
#include "poolscope/Report.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/Units.h"
#include "poolscope/interop/Diff.h"
#include "poolscope/interop/ProcessTree.h"

#include <gtest/gtest.h>

namespace poolscope {
namespace {

const std::string kSamples = POOLSCOPE_SAMPLES_DIR;

struct Loaded {
    std::unique_ptr<TraceReader> reader;
    std::shared_ptr<const Timeline> tl;
    ProcessInfo process;
    StackTables stacks;
};

Loaded load(const std::string& name) {
    Loaded l;
    auto r = TraceReader::open(kSamples + "/" + name);
    EXPECT_TRUE(r.ok()) << name;
    l.reader = std::move(*r);
    auto tl = buildTimeline(*l.reader);
    EXPECT_TRUE(tl.ok());
    l.tl = *tl;
    l.process = *l.reader->process();
    if (auto st = l.reader->stacks()) l.stacks = *st;
    return l;
}

TEST(Align, RealIpcPairSharesTheHostsMonotonicClock) {
    const Loaded parent = load("ipc-parent.poolscope"), child = load("ipc-child.poolscope");
    ASSERT_EQ(parent.process.host, child.process.host);
    const auto a = interop::alignProcesses({{parent.process, parent.tl->t0, parent.tl->t1},
                                            {child.process, child.tl->t0, child.tl->t1}});
    EXPECT_EQ(a.basis, interop::TimeAlignment::Basis::Monotonic);
    EXPECT_EQ(a.offsetNs, (std::vector<int64_t>{0, 0}));
    EXPECT_EQ(a.begin, std::min(parent.tl->t0, child.tl->t0));
    EXPECT_EQ(a.end, std::max(parent.tl->t1, child.tl->t1));
    // Both record their wall-clock start: the spread is the difference of (unix - mono).
    const int64_t d = (parent.process.startTimeUnixNs - parent.process.startTimeMonoNs) -
                      (child.process.startTimeUnixNs - child.process.startTimeMonoNs);
    EXPECT_EQ(a.wallClockSpreadNs, std::llabs(d));
    EXPECT_NE(a.description.find("'" + parent.process.host + "'"), std::string::npos)
        << a.description;
    // The wall clock at the shared start is the earliest trace's mapping of its first event.
    const Loaded& first = parent.tl->t0 <= child.tl->t0 ? parent : child;
    EXPECT_EQ(a.beginUnixNs,
              first.tl->t0 - first.process.startTimeMonoNs + first.process.startTimeUnixNs);
}

// Hand-built process records (no sample was recorded on two hosts).
TEST(Align, HandBuiltTwoHostsUseTheWallClock) {
    ProcessInfo p1, p2;
    p1.host = "node1";
    p2.host = "node2";
    p1.startTimeMonoNs = 1'000'000'000;
    p1.startTimeUnixNs = 1'700'000'000'000'000'000;
    p2.startTimeMonoNs = 5'000'000'000;                     // booted 4 s earlier ...
    p2.startTimeUnixNs = 1'700'000'000'000'000'000 + 2'000; // ... started 2 µs later
    const auto a = interop::alignProcesses(
        {{p1, 1'100'000'000, 1'200'000'000}, {p2, 5'100'000'000, 5'300'000'000}});
    EXPECT_EQ(a.basis, interop::TimeAlignment::Basis::WallClock);
    ASSERT_EQ(a.offsetNs.size(), 2u);
    EXPECT_EQ(a.offsetNs[0], 0);
    // An event at p2's start (mono 5 s) happened 2 µs after p1's start (mono 1 s).
    EXPECT_EQ(5'000'000'000 + a.offsetNs[1], 1'000'000'000 + 2'000);
    EXPECT_EQ(a.end, 5'300'000'000 + a.offsetNs[1]);
}

TEST(Align, HandBuiltMissingWallClockLinesUpFirstEvents) {
    ProcessInfo p1, p2;
    p1.host = "node1";
    p2.host = "node2";
    p1.commandLine = "/usr/bin/python3 -u /src/train.py --rank 0";
    p1.pid = 10;
    p1.startTimeMonoNs = 1;
    p1.startTimeUnixNs = 2;
    p2.commandLine = "/opt/worker";
    p2.pid = 11; // no wall-clock start (an nsys import, say)
    const auto a = interop::alignProcesses({{p1, 100, 900}, {p2, 7000, 7100}});
    EXPECT_EQ(a.basis, interop::TimeAlignment::Basis::FirstEvent);
    EXPECT_EQ(a.offsetNs[1], 100 - 7000);
    EXPECT_EQ(a.begin, 100);
    EXPECT_EQ(a.end, 900);
    EXPECT_NE(a.description.find("worker (pid 11)"), std::string::npos) << a.description;
    EXPECT_EQ(interop::processTitle(p1), "python3 train.py (pid 10)");
}

TEST(Align, ReadIpcEventsMatchesAFullRead) {
    for (const char* name : {"ipc-parent.poolscope", "ipc-child.poolscope", "churn.poolscope"}) {
        const Loaded l = load(name);
        auto ipc = interop::readIpcEvents(*l.reader);
        ASSERT_TRUE(ipc.ok()) << name;
        std::vector<Event> all;
        ASSERT_TRUE(
            l.reader
                ->forEachEvent([&](const Event& e) {
                    if (e.kind == EventKind::PoolExport || e.kind == EventKind::PoolImport ||
                        e.kind == EventKind::PointerExport || e.kind == EventKind::PointerImport)
                        all.push_back(e);
                    return true;
                })
                .ok());
        ASSERT_EQ(ipc->size(), all.size()) << name;
        for (size_t i = 0; i < all.size(); ++i)
            EXPECT_EQ((*ipc)[i].seq, all[i].seq);
        if (std::string(name).rfind("ipc-", 0) == 0) {
            EXPECT_EQ(ipc->size(), 2u) << name; // the pool's and the pointer's export or import
        }
    }
}

TEST(Align, RunsByTheFirstCommonNvtxRange) {
    const Loaded a = load("callsites.poolscope");
    ASSERT_FALSE(a.stacks.ranges.empty());
    const auto common = interop::commonNvtxRanges(&a.stacks, &a.stacks);
    ASSERT_FALSE(common.empty());
    // The first common name is the one that starts first in A.
    const NvtxRange* earliest = &a.stacks.ranges[0];
    for (const NvtxRange& r : a.stacks.ranges)
        if (r.startNs < earliest->startNs) earliest = &r;
    EXPECT_EQ(common.front(), earliest->name);
    const auto al = interop::alignRuns(*a.tl, &a.stacks, *a.tl, &a.stacks);
    EXPECT_EQ(al.basis, interop::RunAlignment::Basis::NvtxRange);
    EXPECT_EQ(al.range, earliest->name);
    EXPECT_EQ(al.originA, earliest->startNs);
    EXPECT_EQ(al.originB, earliest->startNs);
    // Asked for start: the first events.
    const auto byStart = interop::alignRuns(*a.tl, &a.stacks, *a.tl, &a.stacks, std::nullopt);
    EXPECT_EQ(byStart.basis, interop::RunAlignment::Basis::Start);
    EXPECT_EQ(byStart.originA, a.tl->t0);
    // A trace without ranges: by start, whatever is asked.
    const Loaded b = load("churn.poolscope");
    const auto none = interop::alignRuns(*a.tl, &a.stacks, *b.tl, &b.stacks, common.back());
    EXPECT_EQ(none.basis, interop::RunAlignment::Basis::Start);
    EXPECT_EQ(none.originB, b.tl->t0);
    EXPECT_TRUE(interop::commonNvtxRanges(&a.stacks, &b.stacks).empty());
}

// Hand-built ranges: the second run starts its shared range later and has others before it.
TEST(Align, HandBuiltRangesLineUpByName) {
    Timeline ta, tb;
    ta.t0 = 0;
    tb.t0 = 50;
    StackTables sa, sb;
    sa.ranges = {{1, 1, "setup", 10, 20}, {2, 1, "step", 30, 40}, {3, 1, "step", 50, 60}};
    sb.ranges = {{1, 1, "warmup", 60, 70}, {2, 1, "step", 500, 600}, {3, 1, "eval", 700, 800}};
    EXPECT_EQ(interop::commonNvtxRanges(&sa, &sb), std::vector<std::string>{"step"});
    const auto al = interop::alignRuns(ta, &sa, tb, &sb);
    EXPECT_EQ(al.range, "step");
    EXPECT_EQ(al.originA, 30);
    EXPECT_EQ(al.originB, 500);
    const auto missing = interop::alignRuns(ta, &sa, tb, &sb, std::string("eval"));
    EXPECT_EQ(missing.basis, interop::RunAlignment::Basis::Start);
    EXPECT_NE(missing.description.find("'eval'"), std::string::npos);
}

TEST(Align, DiffCellTextIsTheCliText) {
    const Loaded a = load("churn.poolscope"), b = load("pools.poolscope");
    const Report ra = interop::reportForDiff(*a.reader, *a.tl, "churn.poolscope");
    const Report rb = interop::reportForDiff(*b.reader, *b.tl, "pools.poolscope");
    const auto d = interop::diffTraces({&ra, a.tl.get(), &a.stacks}, {&rb, b.tl.get(), &b.stacks});
    const std::string text = interop::diffToText(d, true);
    for (const auto& e : d.pools) {
        EXPECT_TRUE(!e.inA || a.tl->pool(e.handleA)) << e.key;
        EXPECT_TRUE(!e.inB || b.tl->pool(e.handleB)) << e.key;
        for (const auto& v : e.values) {
            if (v.unit == interop::DiffValue::Unit::Text) continue;
            const int dir = interop::diffDirection(v);
            const int want = !v.a || !v.b ? 0 : *v.b > *v.a ? 1 : *v.b < *v.a ? -1 : 0;
            EXPECT_EQ(dir, want) << e.key << " " << v.metric;
            const std::string delta = interop::diffDeltaText(v);
            EXPECT_TRUE(dir <= 0 || delta[0] == '+') << delta;
            EXPECT_TRUE(dir >= 0 || delta[0] == '-') << delta;
            EXPECT_TRUE(delta.empty() || text.find(delta) != std::string::npos) << delta;
        }
    }
    for (const auto& e : d.streams) {
        EXPECT_TRUE(!e.inA || a.tl->stream(e.handleA)) << e.key;
        EXPECT_TRUE(!e.inB || b.tl->stream(e.handleB)) << e.key;
    }
}

} // namespace
} // namespace poolscope
