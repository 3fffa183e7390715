// Models under QAbstractItemModelTester, and the lane layout's invariants that painting relies on.
#include "EntityTreeModel.h"
#include "EventFilter.h"
#include "EventTableModel.h"
#include "LaneLayout.h"
#include "MultiGpuBuilt.h"
#include "poolscope/Units.h"
#include "TestTrace.h"
#include "TimelinePainter.h"
#include "poolscope/TraceReader.h"

#include <QAbstractItemModelTester>
#include <gtest/gtest.h>

using namespace poolscope;
using namespace poolscope::ui;
using poolscope::synth::loadTimeline;

namespace {

TraceSnapshot snapshot() {
    static TraceSnapshot s = [] {
        auto tl = loadTimeline(synth::syntheticTracePath());
        return TraceSnapshot::fromTimeline(tl, "synthetic");
    }();
    return s;
}

} // namespace

TEST(LaneLayout, GroupsDevicePoolStreamAndPacksRowsWithoutOverlap) {
    TraceSnapshot s = snapshot();
    ASSERT_TRUE(s.valid());
    const Timeline& tl = *s.timeline;
    const LaneLayout& L = *s.layout;
    ASSERT_FALSE(L.lanes.empty());
    EXPECT_EQ(L.lanes.front().kind, LaneKind::Device);
    EXPECT_GE(L.laneOfPool(synth::kSynthDefaultPool), 0);
    EXPECT_GE(L.laneOf(synth::kSynthDefaultPool, synth::kSynthStreamA), 0);
    EXPECT_GE(L.laneOf(synth::kSynthExplicitPool, synth::kSynthStreamC), 0);
    // Stream B never allocates but waits: it still has a lane so arrows have an end.
    EXPECT_GE(L.laneOfStream(synth::kSynthStreamB), 0);
    size_t placed = 0;
    for (const auto& row : L.rows) {
        for (size_t i = 1; i < row.size(); ++i) {
            const Allocation& a = tl.allocations[row[i - 1]];
            const Allocation& b = tl.allocations[row[i]];
            ASSERT_LE(a.allocTsNs, b.allocTsNs);
            ASSERT_LE(a.freeTsNs, b.allocTsNs) << "allocations in one row overlap";
        }
        placed += row.size();
    }
    EXPECT_EQ(placed, tl.allocations.size());
    for (size_t i = 0; i < tl.allocations.size(); ++i)
        ASSERT_GE(L.rowOfAlloc[i], 0);
    // Markers went somewhere: syncs, the release-threshold change, the knob, the trim.
    size_t markers = 0;
    for (const Lane& l : L.lanes)
        markers += l.markers.size();
    EXPECT_GE(markers, tl.markers.size());
    EXPECT_EQ(tl.failed.size(), 1u);
}

TEST(EventTableModel, PassesModelTesterAndFormatsHumanUnits) {
    auto reader = TraceReader::open(synth::syntheticTracePath().toStdString());
    ASSERT_TRUE(reader.ok());
    auto ev = (*reader)->events(INT64_MIN, INT64_MAX);
    ASSERT_TRUE(ev.ok());
    ASSERT_GT(ev.value().size(), 1000u);
    EventTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    TraceSnapshot s = snapshot();
    model.resetData(std::make_shared<std::vector<Event>>(ev.value()), s.timeline->t0, s.layout);
    EXPECT_EQ(model.rowCount(), int(ev.value().size()));
    EXPECT_EQ(model.columnCount(), EventTableModel::ColumnCount);
    // The first allocations are the explicit pool's 64 MiB "weights".
    int allocRow = -1;
    for (int r = 0; r < model.rowCount() && allocRow < 0; ++r)
        if (model.eventAt(r)->kind == EventKind::Alloc) allocRow = r;
    ASSERT_GE(allocRow, 0);
    EXPECT_EQ(model.data(model.index(allocRow, EventTableModel::Size)).toString(), "64.0 MiB");
    EXPECT_EQ(model.data(model.index(allocRow, EventTableModel::Kind)).toString(), "alloc");
    EXPECT_TRUE(
        model.data(model.index(allocRow, EventTableModel::Pool)).toString().startsWith("pool #"));
    EXPECT_EQ(model.rowOfSeq(model.eventAt(allocRow)->seq), allocRow);
    model.resetData({}, 0, nullptr);
    EXPECT_EQ(model.rowCount(), 0);
}

TEST(EntityTreeModel, PassesModelTesterWithStatsAndCursor) {
    TraceSnapshot s = snapshot();
    EntityTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.resetData(s);
    ASSERT_EQ(model.rowCount(), 1); // one device
    const QModelIndex dev = model.index(0, 0);
    EXPECT_EQ(model.rowCount(dev), 1 + 2 + 3); // its pools together, two pools, three streams
    EXPECT_EQ(model.data(model.index(0, 0, dev)).toString(), "all pools together");
    const QModelIndex pool = model.indexFor(Selection::Pool, synth::kSynthDefaultPool);
    ASSERT_TRUE(pool.isValid());
    EXPECT_EQ(model.parent(pool), dev);
    const QString peak = model.data(pool.siblingAtColumn(EntityTreeModel::PeakReserved)).toString();
    EXPECT_TRUE(peak.endsWith("iB")) << peak.toStdString();
    EXPECT_EQ(model.selectionFor(pool).kind, Selection::Pool);
    EXPECT_TRUE(model.data(pool.siblingAtColumn(EntityTreeModel::ReservedAtCursor)).toString().isEmpty());
    const int64_t mid = (s.timeline->t0 + s.timeline->t1) / 2;
    model.setCursorTime(mid);
    EXPECT_TRUE(
        model.data(pool.siblingAtColumn(EntityTreeModel::ReservedAtCursor)).toString().endsWith("B"));
    EXPECT_TRUE(
        model.data(pool.siblingAtColumn(EntityTreeModel::UsedAtCursor)).toString().endsWith("B"));
    model.resetData({});
    EXPECT_EQ(model.rowCount(), 0);
}

// Several GPUs (issue #19), on the hand-built two-device trace (tests/core/MultiGpuBuilt.h, not a
// recording): one row per device holding its pools' totals, a shared pool saying with whom.
TEST(EntityTreeModel, HandBuiltTwoDevicesHaveDeviceRowsWithTheirPoolsTotals) {
    QTemporaryDir dir;
    const QString path = dir.filePath("two_device_built.poolscope");
    ASSERT_TRUE(test::writeTwoDeviceBuiltTrace(path.toStdString()).ok());
    auto tl = loadTimeline(path);
    ASSERT_TRUE(tl);
    TraceSnapshot s = TraceSnapshot::fromTimeline(tl, "two_device_built");
    EntityTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.resetData(s);
    ASSERT_EQ(model.rowCount(), 2);
    for (int d = 0; d < 2; ++d) {
        const QModelIndex dev = model.index(d, 0);
        const DeviceTotals* t = tl->totalsOf(d);
        ASSERT_TRUE(t);
        EXPECT_EQ(model.data(dev).toString(),
                  QStringLiteral("GPU %1 · Hand-built GPU %1 (not a recording) · 80.0 GiB").arg(d));
        const QModelIndex all = model.index(0, 0, dev);
        EXPECT_EQ(model.data(all).toString(), "all pools together");
        EXPECT_EQ(model.data(all.siblingAtColumn(EntityTreeModel::PeakReserved)).toString(),
                  QString::fromStdString(formatBytes(t->peakReserved)));
        EXPECT_EQ(model.data(all.siblingAtColumn(EntityTreeModel::PeakUsed)).toString(),
                  QString::fromStdString(formatBytes(t->peakUsed)));
        EXPECT_EQ(model.data(all.siblingAtColumn(EntityTreeModel::Allocations)).toString(),
                  QString::number(t->allocCount));
        // Its pools and streams are its children, and only its.
        for (int r = 0; r < model.rowCount(dev); ++r) {
            const Selection sel = model.selectionFor(model.index(r, 0, dev));
            if (sel.kind == Selection::Pool) {
                EXPECT_EQ(tl->pool(sel.handle)->info.device, d);
            }
            if (sel.kind == Selection::Stream) {
                EXPECT_EQ(tl->stream(sel.handle)->info.device, d);
            }
        }
    }
    const QModelIndex shared =
        model.indexFor(Selection::Pool, test::TwoDeviceBuilt::kExplicit0);
    ASSERT_TRUE(shared.isValid());
    ASSERT_EQ(model.rowCount(shared), 1);
    EXPECT_EQ(model.data(model.index(0, 0, shared)).toString(), "GPU 1: read-write");
    const QModelIndex shared1 =
        model.indexFor(Selection::Pool, test::TwoDeviceBuilt::kExplicit1);
    ASSERT_EQ(model.rowCount(shared1), 1);
    EXPECT_EQ(model.data(model.index(0, 0, shared1)).toString(), "GPU 0: read");
    // At the cursor the totals row sums the device's pools.
    const int64_t t = tl->totalsOf(1)->peakReservedTsNs;
    model.setCursorTime(t);
    EXPECT_EQ(model.data(model.index(0, EntityTreeModel::ReservedAtCursor, model.index(1, 0))).toString(),
              QString::fromStdString(formatBytes(tl->totalsOf(1)->peakReserved)));
    EXPECT_EQ(model.data(model.index(0, EntityTreeModel::UsedAtCursor, model.index(1, 0))).toString(),
              QString::fromStdString(formatBytes(tl->pool(test::TwoDeviceBuilt::kDefault1)->used.valueAt(t) +
                                                 tl->pool(test::TwoDeviceBuilt::kExplicit1)->used.valueAt(t))));
}

TEST(EventFilter, MatchesKindStreamPoolSizeAndTime) {
    Event e;
    e.kind = EventKind::Alloc;
    e.tsNs = 100;
    e.size = 4096;
    e.stream = 7;
    e.pool = 9;
    EventFilter f;
    EXPECT_TRUE(f.matches(e));
    f.kindMask = EventFilter::bit(EventKind::Free);
    EXPECT_FALSE(f.matches(e));
    f = {};
    f.stream = 8;
    EXPECT_FALSE(f.matches(e));
    f = {};
    f.minSize = 8192;
    EXPECT_FALSE(f.matches(e));
    f.minSize = 1024;
    EXPECT_TRUE(f.matches(e));
    e.kind = EventKind::StreamSynchronize; // no size: hidden while a size filter is set
    EXPECT_FALSE(f.matches(e));
    f = {};
    f.t0 = 101;
    EXPECT_FALSE(f.matches(e));
    f = {};
    f.failedOnly = true;
    EXPECT_FALSE(f.matches(e));
}

TEST(EventFilter, FileProviderCapsAndFilters) {
    TraceSnapshot s = snapshot();
    auto provider = fileEventProvider(synth::syntheticTracePath(), s.timeline->t0, s.timeline->t1,
                                      s.timeline->eventCount);
    std::atomic<bool> cancel{false};
    EventFilter f;
    f.kindMask = EventFilter::bit(EventKind::Alloc);
    EventQueryResult all = provider->page(f, 0, 1000000, cancel);
    ASSERT_TRUE(all.error.isEmpty()) << all.error.toStdString();
    EXPECT_EQ(all.events.size(), s.timeline->allocations.size() + s.timeline->failed.size());
    EXPECT_FALSE(all.truncated);
    EXPECT_EQ(provider->count(f, cancel).total, all.events.size());
    EXPECT_TRUE(provider->countsCheaply(f));
    EventQueryResult capped = provider->page(f, 0, 10, cancel);
    EXPECT_EQ(capped.events.size(), 10u);
    EXPECT_TRUE(capped.truncated);
    // A page further on: the same rows as the whole answer there.
    EventQueryResult later = provider->page(f, 7, 5, cancel);
    ASSERT_EQ(later.events.size(), 5u);
    for (size_t i = 0; i < 5; ++i)
        EXPECT_EQ(later.events[i].seq, all.events[7 + i].seq);
    f.failedOnly = true;
    EXPECT_FALSE(provider->countsCheaply(f));
    EXPECT_EQ(provider->count(f, cancel).total, 1u);
    EventQueryResult failed = provider->page(f, 0, 100, cancel);
    ASSERT_EQ(failed.events.size(), 1u);
    EXPECT_EQ(failed.events[0].result, 2);
}

TEST(EntityTreeModel, HidesStreamsWithoutAllocationsUntilAsked) {
    // The real PyTorch sample: ~129 streams created, most never allocate, free or fail.
    auto tl = loadTimeline(QStringLiteral(POOLSCOPE_SAMPLES_DIR "/torch_async.poolscope"));
    ASSERT_TRUE(tl);
    TraceSnapshot s = TraceSnapshot::fromTimeline(tl, "torch_async");
    size_t idle = 0, active = 0;
    for (const StreamTimeline& st : tl->streams)
        (st.allocCount == 0 && st.freeCount == 0 && st.failedCount == 0 ? idle : active) += 1;
    ASSERT_GT(idle, 100u);
    ASSERT_GT(active, 0u);
    EntityTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.resetData(s);
    auto streamRows = [&] {
        size_t n = 0;
        for (int d = 0; d < model.rowCount(); ++d) {
            const QModelIndex dev = model.index(d, 0);
            for (int r = 0; r < model.rowCount(dev); ++r)
                n += model.selectionFor(model.index(r, 0, dev)).kind == Selection::Stream;
        }
        return n;
    };
    EXPECT_EQ(streamRows(), active);
    model.setShowIdleStreams(true);
    EXPECT_EQ(streamRows(), active + idle);
    model.setShowIdleStreams(false);
    EXPECT_EQ(streamRows(), active);

}

TEST(TimelineGeometry, HidesLanesOfStreamsWithoutAllocationActivity) {
    // Every bundled real trace: a stream's lane is hidden exactly when the stream never
    // allocates, frees or fails (it only syncs or waits), and it is then drawn as its device's.
    size_t hiddenStreams = 0;
    for (const char* name : {"churn", "pools", "trims_oom", "threads", "ipc-parent", "ipc-child",
                             "torch_async", "jax", "cupy", "gpt2", "thread_first", "threads_race"}) {
        auto tl = loadTimeline(QStringLiteral(POOLSCOPE_SAMPLES_DIR "/%1.poolscope").arg(name));
        ASSERT_TRUE(tl) << name;
        TraceSnapshot s = TraceSnapshot::fromTimeline(tl, name);
        TimelineGeometry g;
        g.layoutLanes(*s.layout, {}, tl.get());
        for (size_t i = 0; i < s.layout->lanes.size(); ++i) {
            const view::Lane& l = s.layout->lanes[i];
            if (l.kind != LaneKind::Stream) continue;
            const StreamTimeline* st = tl->stream(l.stream);
            ASSERT_TRUE(st) << name;
            const bool isIdle = st->allocCount == 0 && st->freeCount == 0 && st->failedCount == 0;
            EXPECT_EQ(g.hidden(i), isIdle) << name << " " << l.title;
            if (g.hidden(i)) {
                ++hiddenStreams;
                EXPECT_EQ(s.layout->lanes[size_t(g.shownAs[i])].kind, LaneKind::Device);
            }
        }
        g.layoutLanes(*s.layout, {}, nullptr); // shown when asked for
        for (size_t i = 0; i < s.layout->lanes.size(); ++i) EXPECT_FALSE(g.hidden(i)) << name;
    }
    EXPECT_GT(hiddenStreams, 0u);
}

TEST(ColorScheme, NoPoolsUsedColourIsAnotherPoolsReservedColour) {
    auto hueGap = [](int a, int b) {
        const int d = std::abs(a - b) % 360;
        return std::min(d, 360 - d);
    };
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            if (i % 3 == j % 3) continue; // pool #4 takes pool #1's hues, darker
            EXPECT_GE(hueGap(ColorScheme::usedHue(i), ColorScheme::reservedHue(j)), 25) << i << " " << j;
            EXPECT_GE(hueGap(ColorScheme::reservedHue(i), ColorScheme::reservedHue(j)), 25);
            EXPECT_GE(hueGap(ColorScheme::usedHue(i), ColorScheme::usedHue(j)), 25);
        }
    for (int i = 0; i < 3; ++i)
        EXPECT_GE(hueGap(ColorScheme::usedHue(i), ColorScheme::reservedHue(i)), 25);
}

// One colour, one meaning: no pool line takes a marker's colour (pool #2's reserved line was
// the implicit releases' orange, pool #3's the trims' purple), in either theme, and the first
// nine pools' lines are all told apart.
TEST(ColorScheme, PoolColoursAreNotMarkerColours) {
    auto hueGap = [](int a, int b) {
        const int d = std::abs(a - b) % 360;
        return std::min(d, 360 - d);
    };
    for (Theme t : {Theme::Light, Theme::Dark}) {
        const ColorScheme c(ColorScheme::palette(t));
        const QColor markers[] = {c.syncColor(),      c.releaseColor(), c.trimColor(),
                                  c.attributeColor(), c.knobColor(),    c.failColor(),
                                  c.outsideColor(),   c.pinnedColor()};
        std::vector<QColor> lines;
        for (int slot = 0; slot < 9; ++slot) {
            for (const QColor& line : {c.poolColor(slot), c.usedColor(slot)}) {
                for (const QColor& m : markers)
                    EXPECT_GE(hueGap(line.hsvHue(), m.hsvHue()), 18)
                        << "slot " << slot << " " << line.name().toStdString() << " vs marker "
                        << m.name().toStdString();
                lines.push_back(line);
            }
        }
        for (size_t a = 0; a < lines.size(); ++a)
            for (size_t b = a + 1; b < lines.size(); ++b) {
                const int d = std::abs(lines[a].red() - lines[b].red()) +
                              std::abs(lines[a].green() - lines[b].green()) +
                              std::abs(lines[a].blue() - lines[b].blue());
                EXPECT_GE(d, 60) << lines[a].name().toStdString() << " "
                                 << lines[b].name().toStdString();
            }
    }
}

// Colours follow the pool's number, not its place in the timeline: in the GPT-2 sample the
// default pool is the second pool record (the first has no lane), and it was drawn in the
// second pool's colours (orange, like the releases).
TEST(ColorScheme, PoolNumberOnePicksTheFirstColours) {
    auto tl = loadTimeline(QStringLiteral(POOLSCOPE_SAMPLES_DIR "/gpt2.poolscope"));
    ASSERT_TRUE(tl);
    TraceSnapshot s = TraceSnapshot::fromTimeline(tl, "gpt2");
    int pools = 0;
    for (const view::Lane& l : s.layout->lanes) {
        if (l.kind != LaneKind::Pool) continue;
        EXPECT_EQ(l.poolSlot, pools) << l.title;
        ++pools;
        if (l.title.starts_with("pool #1 ")) {
            EXPECT_EQ(l.poolSlot, 0);
            EXPECT_NE(l.poolIndex, 0) << "the sample no longer shows the index/number mismatch";
        }
    }
    EXPECT_GE(pools, 1);
    for (const view::Lane& l : s.layout->lanes)
        if (l.kind == LaneKind::Stream && l.poolIndex >= 0) {
            EXPECT_EQ(l.poolSlot, s.layout->lanes[size_t(s.layout->laneOfPool(l.pool))].poolSlot);
        }
}
