// Range builds (issue #15, TimelineRange.h): the Timeline of a time range, decoded from the
// chunks overlapping it and started from the pool summaries, against the whole trace's Timeline
// restricted to that range. Every trace here is generated through TraceWriter (the benchmarks'
// SyntheticTrace generator, or events written out by hand), none is a recording.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "../bench/SyntheticTrace.h"
#include "PerfettoChecks.h"
#include "TestTraces.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TimelineRange.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/analysis/TraceReport.h"
#include "poolscope/interop/Export.h"
#include "poolscope/view/EntityNames.h"

namespace poolscope {
namespace {

using test::execSql;

// The generator's trace (with its variety: a third pool, side streams, failed allocations),
// about `events` events in chunks of 4,096.
std::string writeGenerated(const std::string& path, size_t events) {
    auto w = TraceWriter::create(path);
    EXPECT_TRUE(w) << w.error().message;
    (*w)->addDevice(DeviceInfo{0, "generated GPU", 80ull << 30, ""});
    for (uint64_t h : {bench::SyntheticTrace::kPools[0], bench::SyntheticTrace::kPools[1],
                       bench::SyntheticTrace::kSidePool}) {
        PoolInfo p;
        p.handle = h;
        p.device = 0;
        EXPECT_TRUE((*w)->addPool(p));
    }
    bench::SyntheticTrace gen(5, true);
    std::vector<Event> batch;
    while (gen.events() < events) {
        batch.clear();
        while (batch.size() < 50'000 && gen.events() < events) gen.step(batch);
        EXPECT_TRUE((*w)->append(batch));
        EXPECT_TRUE((*w)->commit());
    }
    EXPECT_TRUE((*w)->close());
    return path;
}

std::unique_ptr<TraceReader> openOk(const std::string& path) {
    auto r = TraceReader::open(path);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? std::move(*r) : nullptr;
}

std::shared_ptr<const Timeline> wholeBuild(const TraceReader& r) {
    BuildOptions o;
    o.readAhead = false;
    auto tl = buildTimeline(r, o);
    EXPECT_TRUE(tl) << tl.error().message;
    return tl ? *tl : nullptr;
}

// Every time a series of either build changes inside [from, until], and the edges.
std::vector<int64_t> timesIn(const Series& a, const Series& b, int64_t from, int64_t until) {
    std::vector<int64_t> ts{from, until};
    for (const Series* s : {&a, &b})
        for (int64_t t : s->t)
            if (t >= from && t <= until) ts.push_back(t);
    return ts;
}

// What the range build must equal: the whole build's series at every instant of the loaded
// range, its allocations that begin there, the blocks allocated before and freed there, and the
// bytes in use at the start that none of those accounts for.
void expectRangeMatchesWhole(const Timeline& whole, const Timeline& range, uint64_t firstSeq,
                             uint64_t lastSeq) {
    ASSERT_TRUE(range.isRange());
    EXPECT_TRUE(range.partial);
    EXPECT_TRUE(range.limited);
    EXPECT_EQ(range.t0, whole.t0);
    const int64_t from = range.loadedFromNs, until = range.loadedUntilNs;
    ASSERT_LE(from, until);
    EXPECT_EQ(range.unmatchedFrees, 0u);
    size_t compared = 0;
    for (const PoolTimeline& wp : whole.pools) {
        const PoolTimeline* rp = range.pool(wp.info.handle);
        ASSERT_NE(rp, nullptr);
        for (int64_t t : timesIn(wp.reserved, rp->reserved, from, until))
            ASSERT_EQ(rp->reserved.valueAt(t), wp.reserved.valueAt(t))
                << "pool " << wp.info.handle << " reserved at " << t << " (range " << from << ".."
                << until << ")";
        for (int64_t t : timesIn(wp.used, rp->used, from, until)) {
            ASSERT_EQ(rp->used.valueAt(t), wp.used.valueAt(t))
                << "pool " << wp.info.handle << " used at " << t << " (range " << from << ".."
                << until << ")";
            ++compared;
        }
    }
    EXPECT_GT(compared, 100u);

    // Allocations whose alloc is loaded: identical, except that a free after the range is not
    // known there.
    std::vector<const Allocation*> inside, before;
    for (const Allocation& a : range.allocations) (a.beforeLoaded ? before : inside).push_back(&a);
    std::vector<const Allocation*> wantInside, wantBefore;
    std::map<uint64_t, uint64_t> unaccounted;
    for (const Allocation& a : whole.allocations) {
        if (a.allocSeq >= firstSeq && a.allocSeq <= lastSeq) wantInside.push_back(&a);
        const bool freedInside = a.freeSeq >= firstSeq && a.freeSeq <= lastSeq;
        if (a.allocSeq < firstSeq && freedInside) wantBefore.push_back(&a);
        if (a.allocSeq < firstSeq && !freedInside && (a.live() || a.freeSeq > lastSeq) && a.ptr)
            unaccounted[a.pool] += a.size;
    }
    ASSERT_EQ(inside.size(), wantInside.size());
    ASSERT_GT(inside.size(), 1000u);
    for (size_t i = 0; i < inside.size(); ++i) {
        const Allocation &r = *inside[i], &w = *wantInside[i];
        ASSERT_EQ(r.allocSeq, w.allocSeq);
        EXPECT_EQ(r.ptr, w.ptr);
        EXPECT_EQ(r.size, w.size);
        EXPECT_EQ(r.pool, w.pool);
        EXPECT_EQ(r.allocStream, w.allocStream);
        EXPECT_EQ(r.allocTsNs, w.allocTsNs);
        if (w.freeSeq != 0 && w.freeSeq <= lastSeq) {
            EXPECT_EQ(r.freeSeq, w.freeSeq);
            EXPECT_EQ(r.freeTsNs, w.freeTsNs);
            EXPECT_EQ(r.freeStream, w.freeStream);
        } else {
            EXPECT_TRUE(r.live()) << "seq " << r.allocSeq;
        }
    }
    // Allocated before, freed inside: one bar each from the left edge, in free order.
    ASSERT_EQ(before.size(), wantBefore.size());
    ASSERT_GT(before.size(), 10u);
    std::sort(wantBefore.begin(), wantBefore.end(),
              [](const Allocation* a, const Allocation* b) { return a->freeSeq < b->freeSeq; });
    for (size_t i = 0; i < before.size(); ++i) {
        const Allocation &r = *before[i], &w = *wantBefore[i];
        EXPECT_EQ(r.ptr, w.ptr);
        EXPECT_EQ(r.size, w.size);
        EXPECT_EQ(r.pool, w.pool);
        EXPECT_EQ(r.freeSeq, w.freeSeq);
        EXPECT_EQ(r.freeTsNs, w.freeTsNs);
        EXPECT_EQ(r.allocSeq, 0u);
        EXPECT_LE(r.allocTsNs, from);
    }
    // The generator's used bytes are its live blocks: the rest of `used` at the start is what
    // lives across the whole range.
    for (const PoolTimeline& p : range.pools)
        EXPECT_EQ(p.unaccountedAtLoadStart, unaccounted[p.info.handle]) << "pool " << p.info.handle;
}

TEST(TimelineRange, GeneratedTraceRangesEqualTheWholeBuildInsideThem) {
    test::ScratchDir dir;
    auto r = openOk(writeGenerated(dir.file("generated-range.poolscope"), 1'300'000));
    ASSERT_TRUE(r);
    auto whole = wholeBuild(*r);
    ASSERT_TRUE(whole);
    auto headers = r->chunkHeaders();
    ASSERT_TRUE(headers);
    const auto& h = *headers;
    ASSERT_GT(h.size(), 300u);
    std::mt19937_64 rng(3);
    for (int q = 0; q < 5; ++q) {
        const size_t a = 1 + rng() % (h.size() - 40), n = 1 + rng() % 30;
        const int64_t t0 = (h[a].tMin + h[a].tMax) / 2, t1 = h[a + n].tMin + 1;
        auto p = planTimelineRange(*r, t0, t1);
        ASSERT_TRUE(p) << p.error().message;
        EXPECT_TRUE(p->summaries);
        EXPECT_EQ(p->firstChunk, a);
        EXPECT_EQ(p->lastChunk, a + n);
        RangeBuildOptions o;
        o.maxEvents = p->events;
        auto range = buildTimelineRange(*r, t0, t1, o);
        ASSERT_TRUE(range) << range.error().message;
        EXPECT_EQ((*range)->eventCount, p->events);
        EXPECT_EQ((*range)->loadedFromNs, p->loadedFromNs);
        EXPECT_LE((*range)->loadedFromNs, t0);
        EXPECT_GE((*range)->loadedUntilNs, t1 - 1);
        SCOPED_TRACE("chunks " + std::to_string(a) + ".." + std::to_string(a + n));
        expectRangeMatchesWhole(*whole, **range, h[a].firstSeq, h[a + n].lastSeq);
        // One event fewer than the range holds is refused, in words.
        o.maxEvents = p->events - 1;
        auto refused = buildTimelineRange(*r, t0, t1, o);
        ASSERT_FALSE(refused);
        EXPECT_EQ(refused.error().code, ErrorCode::InvalidArgument);
        EXPECT_NE(refused.error().message.find("more than"), std::string::npos);
    }
}

TEST(TimelineRange, MissingOrDamagedSummaryRowsAreDecodedInstead) {
    test::ScratchDir dir;
    const std::string path = writeGenerated(dir.file("generated-damaged-rows.poolscope"), 700'000);
    auto headers = openOk(path)->chunkHeaders();
    ASSERT_TRUE(headers);
    const auto h = *headers;
    ASSERT_GT(h.size(), 160u);
    const size_t a = 150;
    // The rows of the three chunks before the range: one rewritten (its checksum fails), two
    // deleted. The pre-roll decodes those chunks instead, and the result is still exact.
    execSql(path, "UPDATE pool_chunk_summary SET used_last = used_last + 4096 WHERE chunk = " +
                      std::to_string(h[a - 1].id));
    execSql(path, "DELETE FROM pool_chunk_summary WHERE chunk IN (" + std::to_string(h[a - 2].id) +
                      "," + std::to_string(h[a - 3].id) + ")");
    auto r = openOk(path);
    ASSERT_TRUE(r);
    auto sums = r->poolSummaries();
    ASSERT_TRUE(sums);
    EXPECT_EQ(sums->chunksWithout, 3u);
    auto whole = wholeBuild(*r);
    ASSERT_TRUE(whole);
    auto range = buildTimelineRange(*r, h[a].tMin, h[a + 5].tMax);
    ASSERT_TRUE(range) << range.error().message;
    expectRangeMatchesWhole(*whole, **range, h[a].firstSeq, h[a + 5].lastSeq);
}

TEST(TimelineRange, TraceWithoutSummariesIsReadFromItsBeginningOrRefused) {
    test::ScratchDir dir;
    const std::string path = writeGenerated(dir.file("generated-old-format.poolscope"), 200'000);
    execSql(path, "DROP TABLE pool_chunk_summary");
    auto r = openOk(path);
    ASSERT_TRUE(r);
    auto headers = r->chunkHeaders();
    ASSERT_TRUE(headers);
    const auto& h = *headers;
    ASSERT_GT(h.size(), 40u);
    auto p = planTimelineRange(*r, h[30].tMin, h[32].tMax);
    ASSERT_TRUE(p);
    EXPECT_FALSE(p->summaries);
    EXPECT_EQ(p->firstChunk, 0u);
    uint64_t prefix = 0;
    for (size_t i = 0; i <= 32; ++i) prefix += h[i].count;
    EXPECT_EQ(p->events, prefix);
    auto tl = buildTimelineRange(*r, h[30].tMin, h[32].tMax);
    ASSERT_TRUE(tl) << tl.error().message;
    EXPECT_FALSE((*tl)->isRange());
    EXPECT_TRUE((*tl)->limited);
    EXPECT_EQ((*tl)->eventCount, prefix);
    EXPECT_EQ((*tl)->loadedFromNs, (*tl)->t0);
    EXPECT_GE((*tl)->loadedUntilNs, h[32].tMax);
    RangeBuildOptions o;
    o.maxEvents = prefix / 2;
    auto refused = buildTimelineRange(*r, h[30].tMin, h[32].tMax, o);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("no pool summaries"), std::string::npos)
        << refused.error().message;
}

TEST(TimelineRange, LyingChunkHeadersNeitherCrashNorGrow) {
    test::ScratchDir dir;
    const std::string path = writeGenerated(dir.file("generated-lying-headers.poolscope"), 200'000);
    auto headers = openOk(path)->chunkHeaders();
    ASSERT_TRUE(headers);
    const auto h = *headers;
    ASSERT_GT(h.size(), 40u);
    // A chunk in the middle claims the whole time axis, another a count it cannot hold.
    execSql(path, "UPDATE event_chunks SET t_min = 0, t_max = 9223372036854775807 WHERE id = " +
                      std::to_string(h[20].id));
    execSql(path, "UPDATE event_chunks SET count = 4000000000 WHERE id = " + std::to_string(h[25].id));
    for (bool skip : {false, true}) {
        auto r = openOk(path);
        ASSERT_TRUE(r);
        r->setSkipDamaged(skip);
        auto tl = buildTimelineRange(*r, h[22].tMin, h[28].tMax);
        if (!skip) {
            ASSERT_FALSE(tl);
            EXPECT_EQ(tl.error().code, ErrorCode::Corrupt) << tl.error().message;
            continue;
        }
        ASSERT_TRUE(tl) << tl.error().message;
        // The lying chunk's checksum fails: it is left out, the rest reads, nothing is invented.
        EXPECT_LE((*tl)->eventCount, 12u * 4096u);
        EXPECT_FALSE(r->damage().empty());
    }
}

// Written out by hand: a block allocated in the first chunk and freed in the fourth, another
// that lives across the whole trace; the range of the fourth chunk shows the first as a bar
// from its left edge and the second only as bytes in use that no bar accounts for.
TEST(TimelineRange, HandBuiltBlockFromBeforeTheRangeIsABarFromItsLeftEdge) {
    test::ScratchDir dir;
    const std::string path = dir.file("handbuilt-range.poolscope");
    constexpr uint64_t kPool = 0xa000, kStream = 0x10;
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        PoolInfo p;
        p.handle = kPool;
        ASSERT_TRUE((*w)->addPool(p));
        uint64_t seq = 0, used = 0;
        int64_t t = 1000;
        auto ev = [&](EventKind k, uint64_t ptr, uint64_t size) {
            Event e;
            e.seq = ++seq;
            e.tsNs = t += 100;
            e.kind = k;
            e.pool = kPool;
            e.stream = kStream;
            e.ptr = ptr;
            e.size = size;
            used = k == EventKind::Alloc ? used + size : used - size;
            e.flags = kHasWatermarks | (k == EventKind::Free ? kSizeKnown : 0);
            e.reserved = 1 << 30;
            e.used = used;
            return e;
        };
        std::vector<Event> chunk;
        chunk.push_back(ev(EventKind::Alloc, 0x1000, 4096));     // freed in chunk 4
        chunk.push_back(ev(EventKind::Alloc, 0x2000, 1 << 20));  // never freed
        for (int c = 0; c < 4; ++c) {
            for (int i = 0; i < 3; ++i) {
                chunk.push_back(ev(EventKind::Alloc, 0x9000 + uint64_t(c * 16 + i) * 0x100, 256));
                chunk.push_back(ev(EventKind::Free, 0x9000 + uint64_t(c * 16 + i) * 0x100, 256));
            }
            if (c == 3) chunk.push_back(ev(EventKind::Free, 0x1000, 4096));
            ASSERT_TRUE((*w)->append(chunk));
            ASSERT_TRUE((*w)->commit()); // one chunk each
            chunk.clear();
        }
        ASSERT_TRUE((*w)->close());
    }
    auto r = openOk(path);
    ASSERT_TRUE(r);
    auto h = r->chunkHeaders();
    ASSERT_TRUE(h);
    ASSERT_EQ(h->size(), 4u);
    auto tl = buildTimelineRange(*r, (*h)[3].tMin, (*h)[3].tMax);
    ASSERT_TRUE(tl) << tl.error().message;
    const Timeline& t = **tl;
    EXPECT_TRUE(t.isRange());
    EXPECT_EQ(t.loadedFromNs, (*h)[3].tMin);
    EXPECT_EQ(t.eventCount, 7u);
    EXPECT_EQ(t.unmatchedFrees, 0u);
    ASSERT_EQ(t.allocations.size(), 4u);
    const Allocation& b = t.allocations[0];
    EXPECT_TRUE(b.beforeLoaded);
    EXPECT_EQ(b.ptr, 0x1000u);
    EXPECT_EQ(b.size, 4096u);
    EXPECT_EQ(b.allocTsNs, (*h)[3].tMin);
    EXPECT_EQ(b.freeTsNs, (*h)[3].tMax);
    for (size_t i = 1; i < 4; ++i) EXPECT_FALSE(t.allocations[i].beforeLoaded);
    const PoolTimeline* p = t.pool(kPool);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->unaccountedAtLoadStart, uint64_t{1} << 20);
    // Started from the summary of the chunk before, then the range's first alloc at the edge.
    EXPECT_EQ(p->used.valueAt(t.loadedFromNs), (uint64_t{1} << 20) + 4096 + 256);
    EXPECT_EQ(p->allocCount, 3u); // the block from before is not counted as allocated here
}


nlohmann::json readJson(const std::string& path) {
    std::FILE* g = std::fopen(path.c_str(), "rb");
    EXPECT_TRUE(g);
    std::string text;
    char buf[1 << 16];
    for (size_t n; g && (n = std::fread(buf, 1, sizeof buf, g)) > 0;) text.append(buf, n);
    if (g) std::fclose(g);
    return nlohmann::json::parse(text); // throws (fails the test) on invalid JSON
}

nlohmann::json exportOf(const interop::ExportInput& in, const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_TRUE(f);
    EXPECT_TRUE(interop::writePerfettoJson({in}, f).ok());
    std::fclose(f);
    return readJson(path);
}

// `export --from/--to` (writePerfettoStretch: a range's Timeline written with the names pass's
// names and the blocks live at its start, cut to the range), against the whole trace's export. Inside the range: the
// same counter points, and each counter starts with its value at the range's start; every
// allocation slice that overlaps it, made inside or before, cut to it; every wait inside has its
// flow's start; nothing lies outside.
TEST(TimelineRange, RangeExportIsTheWholeExportInsideTheRange) {
    test::ScratchDir dir;
    auto r = openOk(writeGenerated(dir.file("generated-export.poolscope"), 200'000));
    ASSERT_TRUE(r);
    auto whole = wholeBuild(*r);
    ASSERT_TRUE(whole);
    interop::ExportInput all;
    all.timeline = whole;
    const nlohmann::json wholeDoc = exportOf(all, dir.file("whole.json"));
    const int64_t base = whole->t0;
    auto micros = [&](int64_t ns) { return double(ns - base) / 1000.0; };
    auto headers = r->chunkHeaders();
    ASSERT_TRUE(headers);
    const auto& h = *headers;
    ASSERT_GT(h.size(), 40u);
    for (const auto& [a, n] : {std::pair<size_t, size_t>{0, 3}, {7, 5}, {20, 12}}) {
        SCOPED_TRACE("chunks " + std::to_string(a) + ".." + std::to_string(a + n));
        const int64_t t0 = (h[a].tMin + h[a].tMax) / 2, t1 = h[a + n].tMin + 1;
        auto plan = planTimelineRange(*r, t0, t1);
        ASSERT_TRUE(plan);
        LiveBlocksBefore live;
        live.beforeSeq = h[plan->firstChunk].firstSeq;
        ASSERT_TRUE(traceNamesAndStart(*r, &live));
        EXPECT_EQ(live.blocks.empty(), plan->firstChunk == 0);
        // What `export --from/--to` runs: [t0, t1 + 1) is the build's [t0, t1].
        const std::string file = dir.file("range.json");
        std::FILE* f = std::fopen(file.c_str(), "wb");
        ASSERT_TRUE(f);
        auto done = interop::writePerfettoStretch(*r, {}, t0, t1 + 1, f, 0);
        std::fclose(f);
        ASSERT_TRUE(done) << done.error().message;
        EXPECT_GE(done->clipFromNs, t0);
        EXPECT_LE(done->clipUntilNs, t1);
        EXPECT_EQ(done->blocksBefore > 0, plan->firstChunk > 0);
        const bool isRange = plan->firstChunk > 0;
        const double from = micros(done->clipFromNs), to = micros(done->clipUntilNs);
        const nlohmann::json doc = readJson(file);
        test::checkStructure(doc);

        // Counters: name -> (ts, bytes) in file order (time order per counter).
        using Points = std::map<std::string, std::vector<std::pair<double, uint64_t>>>;
        auto counters = [](const nlohmann::json& d) {
            Points p;
            for (const auto& e : d["traceEvents"])
                if (e["ph"] == "C") p[e["name"]].push_back({e["ts"].get<double>(), e["args"]["bytes"].get<uint64_t>()});
            return p;
        };
        const Points got = counters(doc), all = counters(wholeDoc);
        size_t compared = 0;
        for (const auto& [name, pts] : all) {
            std::vector<std::pair<double, uint64_t>> want;
            size_t i = 0;
            while (i < pts.size() && pts[i].first < from) ++i;
            if (i > 0 && (i == pts.size() || pts[i].first != from)) want.push_back({from, pts[i - 1].second});
            for (; i < pts.size() && pts[i].first <= to; ++i) want.push_back(pts[i]);
            // A range's timeline holds a stream's blocks allocated inside it only: no
            // live-bytes counters, unless it starts at the trace's first chunk.
            if (isRange && name.ends_with(" live bytes")) want.clear();
            auto it = got.find(name);
            const auto none = std::vector<std::pair<double, uint64_t>>{};
            EXPECT_EQ(it == got.end() ? none : it->second, want) << name;
            compared += want.size();
        }
        EXPECT_GT(compared, 100u);
        for (const auto& [name, pts] : got) EXPECT_TRUE(all.count(name)) << "a counter the whole export has not: " << name;

        // The whole export's allocation slices that overlap the range, by alloc seq: (name, ts
        // and end cut to the range, whether made inside it).
        struct Slice {
            std::string name;
            double ts, end;
            bool inside = false;
        };
        std::map<uint64_t, Slice> want, have;
        for (const auto& e : wholeDoc["traceEvents"])
            if (e["ph"] == "X" && e["cat"] == "allocation") {
                const double ts = e["ts"], end = ts + e["dur"].get<double>();
                if (ts <= to && end >= from)
                    want[e["args"]["alloc_seq"]] = {e["name"], std::max(ts, from), std::min(end, to), ts >= from};
            }
        size_t before = 0, madeBefore = 0;
        for (const auto& e : doc["traceEvents"]) {
            if (e.contains("ts") && e["ph"] != "M" && e["cat"] != "call") {
                EXPECT_GE(e["ts"].get<double>(), from - 0.0005) << e.dump();
                EXPECT_LE(e["ts"].get<double>(), to + 0.0005) << e.dump();
            }
            if (e["ph"] != "X" || e["cat"] != "allocation") continue;
            const double ts = e["ts"];
            if (e["args"].value("allocated_before_range", false)) {
                EXPECT_DOUBLE_EQ(ts, from);
                ++madeBefore;
            }
            if (e["args"]["alloc_seq"] == 0) { // allocated before the range, alloc unknown
                EXPECT_DOUBLE_EQ(ts, from);
                ++before;
                continue;
            }
            have[e["args"]["alloc_seq"]] = {e["name"], ts, ts + e["dur"].get<double>()};
        }
        // Every slice that overlaps the range, cut to it: with the blocks live at its start
        // (liveAtStart), those made before it too, under their own alloc seq.
        EXPECT_GT(have.size(), 100u);
        EXPECT_EQ(before, 0u) << "slices without their alloc's seq";
        EXPECT_EQ(have.size(), want.size());
        for (const auto& [seq, w] : want) {
            auto it = have.find(seq);
            ASSERT_TRUE(it != have.end()) << "a slice of the whole export is missing: alloc seq " << seq
                                          << (w.inside ? ", made inside" : ", made before");
            const Slice& g = it->second;
            EXPECT_EQ(g.name, w.name) << seq;
            EXPECT_NEAR(g.ts, w.ts, 0.0005) << seq;
            EXPECT_NEAR(g.end, w.end, 0.002) << seq;
        }
        EXPECT_EQ(madeBefore > 0, a > 0) << "ranges after the first chunk hold blocks from before them";
        // Flows: every flow_in has its flow_out.
        std::set<uint64_t> outs;
        size_t ins = 0;
        for (const auto& e : doc["traceEvents"])
            if (e.value("flow_out", false)) outs.insert(e["bind_id"].get<uint64_t>());
        for (const auto& e : doc["traceEvents"])
            if (e.value("flow_in", false)) {
                ++ins;
                EXPECT_TRUE(outs.count(e["bind_id"].get<uint64_t>())) << e.dump();
            }
        EXPECT_GT(ins, 0u);
    }
}


// The names pass's LiveBlocksBefore (export --from/--to): the blocks live before a seq, each with
// its alloc's seq, thread, API and call site. Hand-built: an imported mapping freed in between
// must not give away the slot of a live block's site (its tag is no slot), and a block whose
// pointer an import replaces is dropped.
TEST(TimelineRange, NamesPassKeepsTheBlocksLiveBeforeASeqWithTheirSites) {
    test::ScratchDir dir;
    const std::string path = dir.file("handbuilt-live.poolscope");
    constexpr uint64_t kPool = 0xa000, kStream = 0x10;
    test::Events ev;
    Event& a = ev.alloc(1000, kStream, kPool, 0x1000, 4096);
    a.site = 5;
    a.variant = static_cast<uint8_t>(AllocApi::FromPool);
    const uint64_t aSeq = a.seq; // (the reference goes stale as events are added)
    Event& imp = ev.add(EventKind::PointerImport, 1100);
    imp.pool = kPool;
    imp.ptr = 0x5000;
    ev.free(1200, kStream, kPool, 0x5000);                 // the imported mapping's release
    ev.alloc(1300, kStream, kPool, 0x2000, 512).site = 7;  // takes a free slot: not a's
    ev.alloc(1400, kStream, kPool, 0x3000, 64).site = 9;   // replaced by an import below
    Event& over = ev.add(EventKind::PointerImport, 1500);
    over.pool = kPool;
    over.ptr = 0x3000;
    ev.alloc(1600, kStream, kPool, 0x4000, 128).site = 11;
    ev.free(1700, kStream, kPool, 0x4000);
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        PoolInfo p;
        p.handle = kPool;
        ASSERT_TRUE((*w)->addPool(p));
        ASSERT_TRUE((*w)->append(ev.all()));
        ASSERT_TRUE((*w)->close());
    }
    auto r = openOk(path);
    ASSERT_TRUE(r);
    LiveBlocksBefore live;
    live.beforeSeq = ev.all().back().seq + 1; // after everything
    ASSERT_TRUE(traceNamesAndStart(*r, &live));
    ASSERT_EQ(live.blocks.size(), 2u) << "0x1000 and 0x2000; not the imports, nor 0x3000 or 0x4000";
    EXPECT_EQ(live.blocks[0].ptr, 0x1000u);
    EXPECT_EQ(live.blocks[0].site, 5u) << "a live block's site given away by an import's release";
    EXPECT_EQ(live.blocks[0].api, uint8_t(AllocApi::FromPool));
    EXPECT_EQ(live.blocks[0].size, 4096u);
    EXPECT_EQ(live.blocks[0].allocSeq, aSeq);
    EXPECT_EQ(live.blocks[0].pool, kPool);
    EXPECT_EQ(live.blocks[0].allocStream, kStream);
    EXPECT_TRUE(live.blocks[0].beforeLoaded);
    EXPECT_TRUE(live.blocks[0].live());
    EXPECT_EQ(live.blocks[1].ptr, 0x2000u);
    EXPECT_EQ(live.blocks[1].site, 7u);
    // Before the third event: only the first block.
    live.beforeSeq = aSeq + 1;
    ASSERT_TRUE(traceNamesAndStart(*r, &live));
    ASSERT_EQ(live.blocks.size(), 1u);
    EXPECT_EQ(live.blocks[0].site, 5u);
}

} // namespace
} // namespace poolscope
