// `poolscope diff` (issue #16): two real samples, a trace against itself, and a hand-built pair
// (written here, named hand-built: the same "program" with release threshold max, then 0).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <thread>

#include "GeneratedTraces.h"
#include "TestTraces.h"
#include "poolscope/EventFields.h"
#include "poolscope/Report.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/interop/Diff.h"

namespace poolscope {
namespace {

const std::string kSamples = POOLSCOPE_SAMPLES_DIR;

struct Side {
    std::unique_ptr<TraceReader> reader;
    std::shared_ptr<const Timeline> tl;
    StackTables stacks;
    Report report;
    interop::DiffSide side() const { return {&report, tl.get(), &stacks}; }
};

Side load(const std::string& path) {
    Side s;
    auto r = TraceReader::open(path);
    EXPECT_TRUE(r.ok()) << path;
    s.reader = std::move(*r);
    auto tl = buildTimeline(*s.reader);
    EXPECT_TRUE(tl.ok());
    s.tl = *tl;
    if (auto st = s.reader->stacks()) s.stacks = *st;
    s.report = buildReport(*s.tl, {}, path);
    return s;
}

const interop::DiffEntity* entity(const std::vector<interop::DiffEntity>& list, const std::string& key) {
    for (const auto& e : list)
        if (e.key == key) return &e;
    return nullptr;
}

const interop::DiffValue* value(const interop::DiffEntity& e, const std::string& metric) {
    for (const auto& v : e.values)
        if (v.metric == metric) return &v;
    return nullptr;
}

TEST(Diff, TwoRealSamplesMatchTheirReports) {
    const Side a = load(kSamples + "/churn.poolscope");
    const Side b = load(kSamples + "/pools.poolscope");
    const interop::TraceDiff d = interop::diffTraces(a.side(), b.side());
    // The default pool of device 0 is in both; the two explicit pools only in B.
    const auto* def = entity(d.pools, "dev 0 default #1");
    ASSERT_NE(def, nullptr);
    EXPECT_TRUE(def->inA && def->inB);
    const PoolReport* pa = nullptr;
    const PoolReport* pb = nullptr;
    for (const PoolReport& p : a.report.pools)
        if (p.info.kind == PoolKind::Default) pa = &p;
    for (const PoolReport& p : b.report.pools)
        if (p.info.kind == PoolKind::Default) pb = &p;
    ASSERT_TRUE(pa && pb);
    const auto* peak = value(*def, "peak reserved");
    ASSERT_NE(peak, nullptr);
    EXPECT_EQ(*peak->a, pa->peakReserved);
    EXPECT_EQ(*peak->b, pb->peakReserved);
    EXPECT_EQ(*value(*def, "allocations")->a, pa->allocCount);
    size_t onlyB = 0;
    for (const auto& e : d.pools) onlyB += !e.inA && e.inB;
    EXPECT_EQ(onlyB, 2u); // pools.cu creates two explicit pools (resources/samples/README.md)
    // Totals are the reports' own.
    EXPECT_EQ(*d.totals[1].a, a.report.eventCount);
    EXPECT_EQ(*d.totals[1].b, b.report.eventCount);
    // JSON: deltas are b - a.
    const auto j = nlohmann::json::parse(interop::diffToJson(d));
    for (const auto& p : j["pools"])
        if (p["key"] == "dev 0 default #1") {
            const auto& v = p["values"]["peak_reserved"];
            EXPECT_EQ(v["delta"].get<int64_t>(), int64_t(pb->peakReserved) - int64_t(pa->peakReserved));
        }
    EXPECT_TRUE(j["call_sites"].is_null());
    EXPECT_EQ(j["call_sites_note"], "neither trace has stacks");
    const std::string text = interop::diffToText(d);
    EXPECT_NE(text.find("only in B"), std::string::npos);
    EXPECT_NE(text.find("-480 MiB"), std::string::npos) << text; // 512 MiB -> 32.0 MiB
}

TEST(Diff, ATraceAgainstItselfHasNoDifference) {
    const Side a = load(kSamples + "/callsites.poolscope");
    const Side b = load(kSamples + "/callsites.poolscope");
    const interop::TraceDiff d = interop::diffTraces(a.side(), b.side());
    for (const auto& v : d.totals) EXPECT_FALSE(v.changed()) << v.metric;
    for (const auto* list : {&d.pools, &d.streams})
        for (const auto& e : *list) {
            EXPECT_TRUE(e.inA && e.inB) << e.key;
            for (const auto& v : e.values) EXPECT_FALSE(v.changed()) << e.key << " " << v.metric;
        }
    ASSERT_TRUE(d.sitesCompared);
    ASSERT_FALSE(d.sites.empty());
    for (const auto& s : d.sites) {
        EXPECT_EQ(s.bytesA, s.bytesB);
        EXPECT_EQ(s.countA, s.countB);
    }
}

// Hand-built pair (not recordings): one stream allocating 4 x 16 MiB and freeing them, then a
// synchronize; A keeps the memory (threshold max), B releases it at the synchronize (threshold 0)
// and has a second stream. Handles differ between the two, as they do between real runs.
constexpr uint64_t kMiB = 1ull << 20;

std::string writeHandBuiltRun(test::ScratchDir& dir, const std::string& name, uint64_t pool,
                              uint64_t stream, bool releases, bool withStacks) {
    test::Events ev;
    Event& set = ev.add(EventKind::PoolSetAttribute, 5);
    set.pool = pool;
    AttributeFields{PoolAttr::ReleaseThreshold, releases ? 0 : UINT64_MAX, std::nullopt}.into(set);
    for (int i = 0; i < 4; ++i) {
        Event& a = test::Events::wm(ev.alloc(10 + i, stream, pool, 0x1000 + i * 0x100, 16 * kMiB),
                                    uint64_t(i + 1) * 16 * kMiB, uint64_t(i + 1) * 16 * kMiB);
        if (withStacks) a.site = 1;
    }
    for (int i = 0; i < 4; ++i)
        test::Events::wm(ev.free(20 + i, stream, pool, 0x1000 + i * 0x100), 64 * kMiB, uint64_t(3 - i) * 16 * kMiB);
    Event& sync = ev.add(EventKind::StreamSynchronize, 30);
    sync.stream = stream;
    if (releases) {
        Event& rel = ev.add(EventKind::ImplicitRelease, 30);
        rel.pool = pool;
        ReleaseFields{0, 64 * kMiB}.into(rel);
        test::Events::wm(rel, 0, 0);
        test::Events::wm(ev.alloc(40, stream + 1, pool, 0x9000, 8 * kMiB), 8 * kMiB, 8 * kMiB);
    }
    const std::string path = dir.file(name);
    auto w = TraceWriter::create(path);
    EXPECT_TRUE(w);
    EXPECT_TRUE((*w)->addDevice(DeviceInfo{0, "hand-built device (not a recording)", 80ull << 30, ""}));
    PoolInfo p;
    p.handle = pool;
    p.device = 0;
    p.kind = PoolKind::Default;
    EXPECT_TRUE((*w)->addPool(p));
    EXPECT_TRUE((*w)->append(ev.all()));
    if (withStacks) {
        StackTables t;
        t.pythonStacks[1] = {PythonFrame{"train.py", "step", 12}};
        t.sites[1] = SiteInfo{1, 0, 1, 0};
        EXPECT_TRUE((*w)->addStacks(t));
    }
    EXPECT_TRUE((*w)->close());
    return path;
}

TEST(Diff, HandBuiltPairThresholdMaxThenZero) {
    test::ScratchDir dir;
    const std::string pa = writeHandBuiltRun(dir, "handbuilt_threshold_max.poolscope", 0x100, 0x10, false, true);
    const std::string pb = writeHandBuiltRun(dir, "handbuilt_threshold_0.poolscope", 0x200, 0x50, true, false);
    const Side a = load(pa);
    const Side b = load(pb);
    const interop::TraceDiff d = interop::diffTraces(a.side(), b.side());
    const auto* pool = entity(d.pools, "dev 0 default #1");
    ASSERT_NE(pool, nullptr);
    ASSERT_TRUE(pool->inA && pool->inB);
    EXPECT_EQ(*value(*pool, "peak reserved")->a, 64 * kMiB);
    EXPECT_EQ(*value(*pool, "peak reserved")->b, 64 * kMiB);
    EXPECT_FALSE(value(*pool, "peak reserved")->changed());
    EXPECT_EQ(*value(*pool, "final reserved")->a, 64 * kMiB);
    EXPECT_EQ(*value(*pool, "final reserved")->b, 8 * kMiB);
    EXPECT_EQ(*value(*pool, "implicit releases")->a, 0u);
    EXPECT_EQ(*value(*pool, "implicit releases")->b, 1u);
    EXPECT_EQ(value(*pool, "release threshold")->textA, "max");
    EXPECT_EQ(value(*pool, "release threshold")->textB, "0 B");
    // Streams: the first-used stream matches across different handles; B's second only in B.
    ASSERT_EQ(d.streams.size(), 2u);
    const auto* s1 = entity(d.streams, "dev 0 stream #1");
    ASSERT_NE(s1, nullptr);
    EXPECT_TRUE(s1->inA && s1->inB);
    EXPECT_EQ(*value(*s1, "allocations")->a, 4u);
    EXPECT_EQ(*value(*s1, "allocations")->b, 4u);
    const auto* s2 = entity(d.streams, "dev 0 stream #2");
    ASSERT_NE(s2, nullptr);
    EXPECT_FALSE(s2->inA);
    EXPECT_TRUE(s2->inB);
    EXPECT_FALSE(d.sitesCompared);
    EXPECT_EQ(d.sitesNote, "trace B has no stacks");
    const std::string text = interop::diffToText(d);
    EXPECT_NE(text.find("-56.0 MiB (-87.5 %)"), std::string::npos) << text; // final reserved
    EXPECT_NE(text.find("only in B"), std::string::npos);
    EXPECT_NE(text.find("trace B has no stacks"), std::string::npos);
}

// `poolscope diff` reads each trace once through the streaming report, gathering the diff's
// facts beside it: those facts against a whole Timeline's, and the diff made from each side.
interop::DiffRead streamed(const TraceReader& r, const StackTables& stacks, const std::string& path) {
    auto got = interop::readForDiff(r, &stacks, path, {}, {});
    EXPECT_TRUE(got) << path;
    return got ? std::move(*got) : interop::DiffRead{};
}

void expectSameFacts(const interop::DiffFacts& a, const interop::DiffFacts& b) {
    EXPECT_EQ(a.releases, b.releases);
    EXPECT_EQ(a.trims, b.trims);
    EXPECT_EQ(a.firstUse, b.firstUse);
    EXPECT_EQ(a.sitesKept, b.sitesKept);
    EXPECT_EQ(a.sites, b.sites);
}

// Generated (not recorded): disorderly events (releases, trims, waits, failures, threads behind)
// with call sites, one of them missing from the stacks table.
std::string writeDisorderlyWithSites(test::ScratchDir& dir, uint64_t seed) {
    test::Disorderly g(seed, 50'000'000);
    g.generate(6000);
    std::vector<Event> events = g.events();
    std::mt19937_64 rng(seed);
    for (Event& e : events)
        if (e.kind == EventKind::Alloc) e.site = static_cast<uint32_t>(rng() % 4) * 7; // 0, 7, 14, 21
    const std::string path = dir.file("disorderly_sites" + std::to_string(seed) + ".poolscope");
    auto w = TraceWriter::create(path);
    EXPECT_TRUE(w);
    EXPECT_TRUE((*w)->addDevice(DeviceInfo{0, "generated device (not a recording)", 80ull << 30, ""}));
    EXPECT_TRUE((*w)->addDevice(DeviceInfo{1, "generated device (not a recording)", 80ull << 30, ""}));
    for (const PoolInfo& p : g.declared()) EXPECT_TRUE((*w)->addPool(p));
    EXPECT_TRUE((*w)->append(events));
    EXPECT_TRUE((*w)->append(g.samples()));
    StackTables t; // sites 7 and 14; 21 is not in it
    t.pythonStacks[1] = {PythonFrame{"train.py", "step", 12}};
    t.pythonStacks[2] = {PythonFrame{"train.py", "forward", 40}};
    t.sites[7] = SiteInfo{7, 0, 1, 0};
    t.sites[14] = SiteInfo{14, 0, 2, 0};
    EXPECT_TRUE((*w)->addStacks(t));
    EXPECT_TRUE((*w)->close());
    return path;
}

TEST(Diff, TheStreamingReadGathersTheTimelinesFacts) {
    test::ScratchDir dir;
    std::vector<std::string> paths;
    for (const auto& f : std::filesystem::directory_iterator(kSamples))
        if (f.path().extension() == ".poolscope") paths.push_back(f.path().string());
    std::sort(paths.begin(), paths.end());
    ASSERT_GE(paths.size(), 10u);
    for (uint64_t seed = 1; seed <= 3; ++seed) paths.push_back(writeDisorderlyWithSites(dir, seed));
    std::vector<Side> sides;
    std::vector<interop::DiffRead> streams;
    uint64_t releases = 0, trims = 0, streamsUsed = 0, unknownSites = 0;
    for (const std::string& path : paths) {
        SCOPED_TRACE(path);
        sides.push_back(load(path));
        const Side& s = sides.back();
        const interop::DiffFacts fromTimeline = interop::diffFacts(*s.tl, &s.stacks);
        streams.push_back(streamed(*s.reader, s.stacks, path));
        expectSameFacts(streams.back().facts, fromTimeline);
        for (const auto& [h, n] : fromTimeline.releases) releases += n;
        for (const auto& [h, n] : fromTimeline.trims) trims += n;
        streamsUsed += fromTimeline.firstUse.size();
        if (auto it = fromTimeline.sites.find(0); it != fromTimeline.sites.end() && path.find("disorderly") != std::string::npos)
            unknownSites += it->second.first;
    }
    // The facts were there to gather.
    EXPECT_GT(releases, 0u);
    EXPECT_GT(trims, 0u);
    EXPECT_GT(streamsUsed, 10u);
    EXPECT_GT(unknownSites, 0u);
    // Each trace against the next (and the last against itself): the same diff either way.
    for (size_t i = 0; i < paths.size(); ++i) {
        const size_t j = std::min(i + 1, paths.size() - 1);
        SCOPED_TRACE(paths[i] + " vs " + paths[j]);
        const interop::TraceDiff whole = interop::diffTraces(sides[i].side(), sides[j].side());
        const interop::TraceDiff streaming = interop::diffTraces(
            {&streams[i].report, nullptr, &sides[i].stacks, &streams[i].facts},
            {&streams[j].report, nullptr, &sides[j].stacks, &streams[j].facts});
        EXPECT_EQ(interop::diffToText(streaming, true), interop::diffToText(whole, true));
        EXPECT_EQ(interop::diffToJson(streaming), interop::diffToJson(whole));
    }
}

// `poolscope diff` reads its two traces at once on a machine with the CPUs: two streaming reads
// on two threads give what each gives alone (and ThreadSanitizer sees them share nothing).
TEST(Diff, TwoStreamingReadsAtOnceGiveWhatEachGivesAlone) {
    test::ScratchDir dir;
    const std::string pa = writeDisorderlyWithSites(dir, 5), pb = kSamples + "/gpt2.poolscope";
    const Side a = load(pa), b = load(pb);
    const interop::DiffRead aloneA = streamed(*a.reader, a.stacks, pa), aloneB = streamed(*b.reader, b.stacks, pb);
    interop::DiffRead togetherB;
    std::thread second([&] { togetherB = streamed(*b.reader, b.stacks, pb); });
    const interop::DiffRead togetherA = streamed(*a.reader, a.stacks, pa);
    second.join();
    expectSameFacts(togetherA.facts, aloneA.facts);
    expectSameFacts(togetherB.facts, aloneB.facts);
    EXPECT_EQ(reportToJson(togetherA.report), reportToJson(aloneA.report));
    EXPECT_EQ(reportToJson(togetherB.report), reportToJson(aloneB.report));
}

// gpt2's Timeline has an unknown pool with nothing in it, which its Report leaves out: the diff
// matches the Report's pools, so no entity stands for it (it was matched by the Timeline's index
// to a Report pool that was not it, or past the Report's last).
TEST(Diff, APoolTheReportLeavesOutIsNotCompared) {
    const Side a = load(kSamples + "/beyond_pool.poolscope");
    const Side b = load(kSamples + "/gpt2.poolscope");
    ASSERT_LT(b.report.pools.size(), b.tl->pools.size());
    for (const auto& [x, y] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
        const interop::TraceDiff d = interop::diffTraces(x->side(), y->side());
        for (const interop::DiffEntity& e : d.pools) {
            SCOPED_TRACE(e.key);
            EXPECT_EQ(e.key.find("unknown pool"), std::string::npos);
            for (const auto& [in, handle, name, r] :
                 {std::tuple{e.inA, e.handleA, e.nameA, &x->report},
                  std::tuple{e.inB, e.handleB, e.nameB, &y->report}}) {
                if (!in) continue;
                bool found = false;
                for (const PoolReport& p : r->pools) found = found || p.info.handle == handle;
                EXPECT_TRUE(found);
                EXPECT_EQ(name, r->names.poolWithHandle(handle));
            }
        }
    }
}

TEST(DiffCli, TextJsonAndErrors) {
    test::ScratchDir dir;
    auto ok = test::runCli("diff " + kSamples + "/churn.poolscope " + kSamples + "/trims_oom.poolscope");
    EXPECT_EQ(ok.exitCode, 0) << ok.output;
    EXPECT_NE(ok.output.find("Pools (matched by device, kind and creation order)"), std::string::npos);
    auto js = test::runCli("diff --json " + kSamples + "/churn.poolscope " + kSamples + "/trims_oom.poolscope");
    EXPECT_EQ(js.exitCode, 0);
    EXPECT_NO_THROW((void)nlohmann::json::parse(js.output));
    auto missing = test::runCli("diff " + kSamples + "/churn.poolscope " + dir.file("nope.poolscope"));
    EXPECT_EQ(missing.exitCode, 3) << missing.output;
    EXPECT_NE(missing.output.find("nope.poolscope"), std::string::npos);
    auto one = test::runCli("diff " + kSamples + "/churn.poolscope");
    EXPECT_NE(one.exitCode, 0);
}

} // namespace
} // namespace poolscope
