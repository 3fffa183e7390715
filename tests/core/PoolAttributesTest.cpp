// Issue #17: a pool's reuse policies and release threshold as the collector read them when it
// first saw the pool (the pool_initial_attributes table): written and read back, known from the
// start of the timeline, in the report, tolerated when absent (older traces) or damaged, and
// checked by the GPU check script. Every trace here is hand-built by the test (written by
// TraceWriter), not recorded: "handbuilt" in the file names says so.
#include "TestTraces.h"
#include "poolscope/EventFields.h"
#include "poolscope/Report.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/analysis/TraceReport.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

namespace poolscope {
namespace {

constexpr uint64_t kDefault = 0x9000, kExplicit = 0x9100, kStream = 0x51;
constexpr uint64_t kMiB = 1 << 20;

// A default pool whose attributes the program never sets (read: all on, threshold 0), and an
// explicit pool created mid-run whose opportunistic reuse the program turns off.
std::string writeHandbuilt(const test::ScratchDir& dir, bool withAttributes = true) {
    const std::string path = dir.file("handbuilt-attributes.poolscope");
    auto w = TraceWriter::create(path);
    EXPECT_TRUE(w) << w.error().message;
    TraceWriter& t = **w;
    EXPECT_TRUE(t.setMeta("collector", "hand-built"));
    EXPECT_TRUE(t.addDevice({0, "hand-built, not recorded", 80 * 1024 * kMiB, ""}));
    PoolInfo def;
    def.handle = kDefault;
    def.device = 0;
    def.kind = PoolKind::Default;
    EXPECT_TRUE(t.addPool(def));
    PoolInfo ex = def;
    ex.handle = kExplicit;
    ex.kind = PoolKind::Explicit;
    ex.createdTsNs = 3000;
    EXPECT_TRUE(t.addPool(ex));
    if (withAttributes) {
        for (uint64_t pool : {kDefault, kExplicit}) {
            for (PoolAttr a :
                 {PoolAttr::ReuseFollowEventDependencies, PoolAttr::ReuseAllowOpportunistic,
                  PoolAttr::ReuseAllowInternalDependencies})
                EXPECT_TRUE(t.addPoolAttribute({pool, a, 1}));
            EXPECT_TRUE(t.addPoolAttribute({pool, PoolAttr::ReleaseThreshold, 0}));
        }
        // A second value of the same attribute does not replace the first.
        EXPECT_TRUE(t.addPoolAttribute({kDefault, PoolAttr::ReleaseThreshold, 77}));
    }
    test::Events ev;
    test::Events::wm(ev.alloc(1000, kStream, kDefault, 0x1000, 4 * kMiB), 32 * kMiB, 4 * kMiB);
    Event& create = ev.add(EventKind::PoolCreate, 3000);
    create.pool = kExplicit;
    PoolCreateFields{PoolKind::Explicit, 0, 0, 0}.into(create);
    Event& set = ev.add(EventKind::PoolSetAttribute, 4000);
    set.pool = kExplicit;
    AttributeFields{PoolAttr::ReuseAllowOpportunistic, 0, std::nullopt}.into(set);
    test::Events::wm(ev.alloc(5000, kStream, kExplicit, 0x8000, kMiB), 32 * kMiB, kMiB);
    test::Events::wm(ev.free(6000, kStream, kDefault, 0x1000), 32 * kMiB, 0);
    EXPECT_TRUE(t.append(ev.all()));
    EXPECT_TRUE(t.close());
    return path;
}

const PoolReport* poolOf(const Report& r, uint64_t handle) {
    for (const PoolReport& p : r.pools)
        if (p.info.handle == handle) return &p;
    return nullptr;
}

} // namespace

TEST(PoolAttributes, HandBuiltTraceKnowsThemFromEachPoolsStart) {
    test::ScratchDir dir;
    const std::string path = writeHandbuilt(dir);
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader) << reader.error().message;
    auto attrs = (*reader)->poolAttributes();
    ASSERT_TRUE(attrs);
    ASSERT_EQ(attrs->size(), 8u);
    for (const PoolAttributeValue& a : *attrs)
        if (a.attr == PoolAttr::ReleaseThreshold) EXPECT_EQ(a.value, 0u) << "the first value stays";
    EXPECT_TRUE((*reader)->tableDamage().empty());

    auto tl = buildTimeline(**reader);
    ASSERT_TRUE(tl) << tl.error().message;
    const PoolTimeline* def = (*tl)->pool(kDefault);
    const PoolTimeline* ex = (*tl)->pool(kExplicit);
    ASSERT_TRUE(def && ex);
    // Never set by the program: known (on) from the start of the trace, not "unknown".
    for (const Series* s : {&def->reuseFollowEventDependencies, &def->reuseAllowOpportunistic,
                            &def->reuseAllowInternalDependencies}) {
        ASSERT_FALSE(s->empty());
        EXPECT_EQ(s->t.front(), (*tl)->t0);
        EXPECT_EQ(s->valueAt((*tl)->t1), 1u);
    }
    ASSERT_FALSE(def->releaseThreshold.empty());
    EXPECT_EQ(def->releaseThreshold.valueAt((*tl)->t0), 0u);
    // The explicit pool: from its creation, and the program's change after it.
    ASSERT_FALSE(ex->reuseAllowOpportunistic.empty());
    EXPECT_EQ(ex->reuseAllowOpportunistic.t.front(), 3000);
    EXPECT_EQ(ex->reuseAllowOpportunistic.valueAt(3500), 1u);
    EXPECT_EQ(ex->reuseAllowOpportunistic.valueAt(4500), 0u);

    const Report r = buildReport(**tl);
    const PoolReport* dr = poolOf(r, kDefault);
    const PoolReport* er = poolOf(r, kExplicit);
    ASSERT_TRUE(dr && er);
    EXPECT_EQ(dr->reuseFollowEventDependencies, 1);
    EXPECT_EQ(dr->reuseAllowOpportunistic, 1);
    EXPECT_EQ(dr->reuseAllowInternalDependencies, 1);
    EXPECT_TRUE(dr->thresholdKnown);
    EXPECT_EQ(er->reuseAllowOpportunistic, 0);
    const auto j = nlohmann::json::parse(reportToJson(r));
    bool seen = false;
    for (const auto& p : j["pools"])
        if (p["kind"] == "default") {
            seen = true;
            EXPECT_EQ(p["reuse_follow_event_dependencies"], true);
            EXPECT_EQ(p["reuse_allow_opportunistic"], true);
            EXPECT_EQ(p["release_threshold"], 0);
        }
    EXPECT_TRUE(seen);
    const std::string text = reportToText(r);
    EXPECT_NE(text.find("EOI"), std::string::npos) << text;
    EXPECT_NE(text.find("E-I"), std::string::npos) << text;

    // `poolscope report` reads the trace in one streaming pass, not through a Timeline: it must
    // know them from the start too (it once said "never set" for everything the program read).
    auto streamed = reportTrace(**reader, TraceReportOptions{});
    ASSERT_TRUE(streamed) << streamed.error().message;
    const PoolReport* ds = poolOf(streamed->report, kDefault);
    const PoolReport* es = poolOf(streamed->report, kExplicit);
    ASSERT_TRUE(ds && es);
    EXPECT_EQ(ds->reuseFollowEventDependencies, 1);
    EXPECT_EQ(ds->reuseAllowOpportunistic, 1);
    EXPECT_EQ(ds->reuseAllowInternalDependencies, 1);
    EXPECT_TRUE(ds->thresholdKnown);
    EXPECT_EQ(ds->releaseThreshold, 0u);
    EXPECT_EQ(es->reuseAllowOpportunistic, 0);
    EXPECT_EQ(reportToText(streamed->report), reportToText(r));
}

// A trace from before the table (or one whose writer had no values): unknown, as before, and no
// damage reported.
TEST(PoolAttributes, HandBuiltTraceWithoutTheTableShowsThemUnknown) {
    test::ScratchDir dir;
    const std::string path = writeHandbuilt(dir, false);
    test::execSql(path, "DROP TABLE pool_initial_attributes");
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader) << reader.error().message;
    auto attrs = (*reader)->poolAttributes();
    ASSERT_TRUE(attrs);
    EXPECT_TRUE(attrs->empty());
    EXPECT_TRUE((*reader)->tableDamage().empty());
    auto tl = buildTimeline(**reader);
    ASSERT_TRUE(tl);
    EXPECT_TRUE((*tl)->pool(kDefault)->reuseAllowOpportunistic.empty());
    const Report r = buildReport(**tl);
    EXPECT_EQ(poolOf(r, kDefault)->reuseAllowOpportunistic, -1);
    EXPECT_NE(reportToText(r).find("???"), std::string::npos);
}

// Rows no collector writes (an attribute outside 1-4, a policy neither on nor off, text) are
// skipped and named as damage; the good rows still count.
TEST(PoolAttributes, HandBuiltImpossibleRowsAreSkippedAndNamed) {
    test::ScratchDir dir;
    const std::string path = writeHandbuilt(dir);
    test::execSql(path,
                  "DELETE FROM pool_initial_attributes WHERE pool=" + std::to_string(kExplicit) +
                      ";INSERT INTO pool_initial_attributes VALUES(" + std::to_string(kExplicit) +
                      ",2,7),(" + std::to_string(kExplicit) + ",9,1),(" +
                      std::to_string(kExplicit) + ",1,'on')");
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    auto attrs = (*reader)->poolAttributes();
    ASSERT_TRUE(attrs);
    EXPECT_EQ(attrs->size(), 4u); // the default pool's
    for (const PoolAttributeValue& a : *attrs)
        EXPECT_EQ(a.pool, kDefault);
    const auto damage = (*reader)->tableDamage();
    ASSERT_EQ(damage.size(), 1u);
    EXPECT_NE(damage[0].what.find("pool_initial_attributes table has 3 row(s)"), std::string::npos)
        << damage[0].what;
    auto tl = buildTimeline(**reader);
    ASSERT_TRUE(tl);
    EXPECT_EQ((*tl)->pool(kDefault)->reuseAllowOpportunistic.valueAt((*tl)->t1), 1u);
}

#if defined(POOLSCOPE_CLI) && defined(POOLSCOPE_GPU_CHECK_SCRIPT)
namespace {
std::string runCheck(const std::string& trace, const std::string& truth) {
    const std::string cmd = std::string("python3 '") + POOLSCOPE_GPU_CHECK_SCRIPT + "' '" +
                            POOLSCOPE_CLI + "' '" + trace + "' '" + truth + "' 2>&1";
    std::string out;
    if (FILE* f = ::popen(cmd.c_str(), "r")) {
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
            out.append(buf, n);
        ::pclose(f);
    }
    return out;
}

std::string writeText(const test::ScratchDir& dir, const std::string& name,
                      const std::string& text) {
    const std::string p = dir.file(name);
    FILE* f = std::fopen(p.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
    return p;
}
} // namespace

// tests/gpu/check_trace.py's attributes check (what tests/workloads/pools.cu prints) on the
// hand-built trace: it passes when the recorded values equal the program's, and names the
// attribute when they do not.
TEST(PoolAttributes, HandBuiltTracePassesTheGpuChecksAttributesAndAWrongTruthFails) {
    if (std::system("python3 -c 'import sqlite3' >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "no python3";
    test::ScratchDir dir;
    const std::string trace = writeHandbuilt(dir);
    auto line = [](uint64_t pool, int opportunistic) {
        char buf[256];
        std::snprintf(
            buf, sizeof buf,
            "{\"type\":\"attributes\",\"pool\":\"0x%llx\",\"follow_event_dependencies\":1,"
            "\"allow_opportunistic\":%d,\"allow_internal_dependencies\":1,"
            "\"release_threshold\":0}\n",
            static_cast<unsigned long long>(pool), opportunistic);
        return std::string(buf);
    };
    const std::string summary = "{\"type\":\"summary\",\"workload\":\"pools\",\"allocs\":2,"
                                "\"frees\":1,\"set_attributes\":1,"
                                "\"pool_creates\":1}\n";
    const std::string good = runCheck(
        trace, writeText(dir, "good.truth", line(kDefault, 1) + line(kExplicit, 1) + summary));
    EXPECT_NE(good.find("PASS handbuilt-attributes.poolscope"), std::string::npos) << good;
    const std::string bad = runCheck(
        trace, writeText(dir, "bad.truth", line(kDefault, 0) + line(kExplicit, 1) + summary));
    EXPECT_NE(bad.find("FAIL pool 0x9000 allow_opportunistic read at first sight"),
              std::string::npos)
        << bad;
}
#endif

} // namespace poolscope
