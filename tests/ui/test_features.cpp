// Events table sorting, collapsible timeline lanes and the reuse policies in the details pane.
#include "DetailsPane.h"
#include "EventTableModel.h"
#include "EventsPanel.h"
#include "TestTrace.h"
#include "TimelineWidget.h"
#include "poolscope/TraceReader.h"

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QSettings>
#include <QSignalSpy>
#include <QTest>
#include <gtest/gtest.h>

using namespace poolscope;
using namespace poolscope::ui;
using poolscope::synth::loadTimeline;

namespace {

std::vector<Event> loadEvents(const QString& path) {
    auto reader = TraceReader::open(path.toStdString());
    EXPECT_TRUE(reader.ok());
    if (!reader) return {};
    auto ev = (*reader)->events(INT64_MIN, INT64_MAX);
    EXPECT_TRUE(ev.ok());
    return ev ? ev.value() : std::vector<Event>{};
}

QString samplePath(const char* name) {
    return QStringLiteral(POOLSCOPE_SAMPLES_DIR "/") + QString::fromUtf8(name);
}

// Sizes of the rows that show one, in row order.
std::vector<uint64_t> shownSizes(const EventTableModel& m) {
    std::vector<uint64_t> v;
    for (int r = 0; r < m.rowCount(); ++r)
        if (!m.data(m.index(r, EventTableModel::Size)).isNull()) v.push_back(m.eventAt(r)->size);
    return v;
}

} // namespace

TEST(EventTableModel, SortsBySizeReversiblyUnderTheModelTester) {
    const std::vector<Event> events = loadEvents(synth::syntheticTracePath());
    ASSERT_GT(events.size(), 1000u);
    auto tl = loadTimeline(synth::syntheticTracePath());
    auto snap = TraceSnapshot::fromTimeline(tl, "synthetic");
    EventTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.resetData(std::make_shared<std::vector<Event>>(events), tl->t0, snap.layout);
    const int n = model.rowCount();
    std::vector<uint64_t> seqs;
    for (int r = 0; r < n; ++r)
        seqs.push_back(model.eventAt(r)->seq);

    // A persistent index (what the view's current row is) follows its event through sorts.
    const int pick = n / 2;
    const uint64_t pickedSeq = model.eventAt(pick)->seq;
    QPersistentModelIndex current(model.index(pick, EventTableModel::Kind));

    model.sort(EventTableModel::Size, Qt::AscendingOrder);
    ASSERT_EQ(model.rowCount(), n);
    std::vector<uint64_t> up = shownSizes(model);
    ASSERT_GT(up.size(), 100u);
    EXPECT_TRUE(std::is_sorted(up.begin(), up.end()));
    EXPECT_LT(up.front(), up.back()); // really different sizes, not a trivial order
    // Rows without a size (syncs, records...) come first, like empty text.
    EXPECT_TRUE(model.data(model.index(0, EventTableModel::Size)).isNull());
    EXPECT_EQ(model.eventAt(current.row())->seq, pickedSeq);
    EXPECT_EQ(model.rowOfSeq(pickedSeq), current.row());

    model.sort(EventTableModel::Size, Qt::DescendingOrder);
    std::vector<uint64_t> down = shownSizes(model);
    EXPECT_EQ(std::vector<uint64_t>(up.rbegin(), up.rend()), down);
    EXPECT_EQ(model.eventAt(current.row())->seq, pickedSeq);

    model.sort(EventTableModel::Kind, Qt::AscendingOrder);
    for (int r = 1; r < n; ++r)
        ASSERT_LE(model.data(model.index(r - 1, EventTableModel::Kind)).toString(),
                  model.data(model.index(r, EventTableModel::Kind)).toString());
    model.sort(EventTableModel::Stream, Qt::AscendingOrder); // exercised under the tester

    // Back to query (time) order: exactly the rows as loaded.
    model.sort(-1, Qt::AscendingOrder);
    for (int r = 0; r < n; ++r)
        ASSERT_EQ(model.eventAt(r)->seq, seqs[size_t(r)]);
    EXPECT_EQ(model.eventAt(current.row())->seq, pickedSeq);

    // A new query result is shown in the current sort order.
    model.sort(EventTableModel::Size, Qt::DescendingOrder);
    model.resetData(std::make_shared<std::vector<Event>>(events), tl->t0, snap.layout);
    EXPECT_EQ(shownSizes(model), down);
}

TEST(TimelineWidget, CollapsesAndExpandsLanesByMouseAndKeyboard) {
    QSettings().remove("timeline/collapsedLanes");
    auto tl = loadTimeline(samplePath("churn.poolscope"));
    ASSERT_TRUE(tl);
    TraceSnapshot s = TraceSnapshot::fromTimeline(tl, "churn");
    TimelineWidget w;
    w.resize(1200, 700);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    w.setSnapshot(s);
    const auto& lanes = s.layout->lanes;
    int pool = -1, stream = -1;
    for (size_t i = 0; i < lanes.size(); ++i) {
        if (lanes[i].kind == LaneKind::Pool && pool < 0 && i + 1 < lanes.size() &&
            lanes[i + 1].kind == LaneKind::Stream && lanes[i + 1].rowCount > 1)
            pool = int(i);
        if (lanes[i].kind == LaneKind::Stream && lanes[i].rowCount > 1 && stream < 0)
            stream = int(i);
    }
    ASSERT_GE(pool, 0);
    ASSERT_GE(stream, 0);
    const int full = w.contentHeight();
    const int streamH = w.laneHeight(stream);
    ASSERT_GT(streamH, 20);

    // A stream lane collapses to one summary row.
    w.setLaneCollapsed(stream, true);
    EXPECT_TRUE(w.laneCollapsed(stream));
    EXPECT_EQ(w.laneHeight(stream), 18);
    EXPECT_EQ(w.contentHeight(), full - (streamH - 18));
    EXPECT_TRUE(QSettings().value("timeline/collapsedLanes").toStringList().size() == 1);
    w.setLaneCollapsed(stream, false);
    EXPECT_EQ(w.laneHeight(stream), streamH);
    EXPECT_EQ(w.contentHeight(), full);

    // Clicking the pool header's disclosure triangle hides its stream lanes; again restores.
    QSignalSpy changed(&w, &TimelineWidget::lanesCollapsedChanged);
    const int poolY = w.laneTop(pool);
    QTest::mouseClick(&w, Qt::LeftButton, {}, QPoint(20, poolY + 8));
    ASSERT_EQ(changed.count(), 1);
    EXPECT_TRUE(w.laneCollapsed(pool));
    int hiddenRows = 0;
    for (size_t i = size_t(pool) + 1; i < lanes.size() && lanes[i].kind == LaneKind::Stream &&
                                      lanes[i].pool == lanes[size_t(pool)].pool;
         ++i) {
        EXPECT_EQ(w.laneHeight(int(i)), 0) << "lane " << i;
        hiddenRows += lanes[i].rowCount;
    }
    EXPECT_GT(hiddenRows, 0);
    EXPECT_LT(w.contentHeight(), full);
    EXPECT_GT(w.laneHeight(pool), 0); // the pool's chart stays
    QTest::mouseClick(&w, Qt::LeftButton, {}, QPoint(20, poolY + 8));
    EXPECT_FALSE(w.laneCollapsed(pool));
    EXPECT_EQ(w.contentHeight(), full);

    // Keyboard: Ctrl+Down moves the lane focus, Enter toggles, Ctrl+Right expands.
    w.setFocus();
    w.setFocusLane(-1);
    for (int i = 0; i <= stream; ++i)
        QTest::keyClick(&w, Qt::Key_Down, Qt::ControlModifier);
    ASSERT_EQ(w.focusLane(), stream);
    QTest::keyClick(&w, Qt::Key_Return);
    EXPECT_TRUE(w.laneCollapsed(stream));
    EXPECT_EQ(w.laneHeight(stream), 18);
    QTest::keyClick(&w, Qt::Key_Right, Qt::ControlModifier);
    EXPECT_FALSE(w.laneCollapsed(stream));
    EXPECT_EQ(w.contentHeight(), full);

    // Remembered: a new widget on the same trace starts with the lane collapsed.
    w.setLaneCollapsed(pool, true);
    {
        TimelineWidget w2;
        w2.resize(1200, 700);
        w2.setSnapshot(s);
        EXPECT_TRUE(w2.laneCollapsed(pool));
        w2.expandAll();
    }
    TimelineWidget w3;
    w3.setSnapshot(s);
    EXPECT_FALSE(w3.laneCollapsed(pool));
    QSettings().remove("timeline/collapsedLanes");
}

TEST(DetailsPane, ShowsReusePoliciesInForceBeforeAndAfterAChange) {
    // pools.poolscope (recorded on an H200) turns all three reuse policies of its second
    // explicit pool off mid-run; the events themselves say what held before (old value) and
    // after (new value), independently of the timeline's series.
    const QString path = samplePath("pools.poolscope");
    auto tl = loadTimeline(path);
    ASSERT_TRUE(tl);
    TraceSnapshot s = TraceSnapshot::fromTimeline(tl, "pools");
    DetailsPane pane;
    pane.setSnapshot(s);
    const char* names[] = {"", "event deps", "opportunistic", "internal deps"};
    int checked = 0;
    for (const Event& e : loadEvents(path)) {
        if (e.kind != EventKind::PoolSetAttribute || e.attr < 1 || e.attr > 3) continue;
        ASSERT_TRUE(e.has(kHasOldValue));
        ASSERT_NE(e.aux, e.size); // a real change
        const QString pool = s.layout->poolName(e.pool);
        auto stateAt = [&](int64_t t) {
            pane.setCursorTime(t);
            // The cursor section: the pool's row, then its threshold and reuse line.
            const QStringList lines = pane.toPlainText().split('\n');
            for (qsizetype i = lines.size() - 1; i >= 0; --i)
                if (lines[i].startsWith(pool)) return (lines.mid(i, 4).join(' '));
            return QString();
        };
        const QString key = QString::fromUtf8(names[e.attr]);
        const QString before = stateAt(e.tsNs - 1), after = stateAt(e.tsNs);
        EXPECT_TRUE(before.contains(key + (e.aux ? " on" : " off"))) << before.toStdString();
        EXPECT_TRUE(after.contains(key + (e.size ? " on" : " off"))) << after.toStdString();
        ++checked;
    }
    EXPECT_EQ(checked, 3);

    // The attribute marker names the policy and its new value, and the pool state at that
    // moment lists all three.
    for (uint32_t i = 0; i < tl->markers.size(); ++i) {
        const Marker& m = tl->markers[i];
        if (m.kind != EventKind::PoolSetAttribute) continue;
        const QString change = DetailsPane::attributeChange(*tl, m);
        if (!change.contains("opportunistic")) continue;
        EXPECT_EQ(change, "reuse_allow_opportunistic → off");
        pane.showSelection({Selection::Marker, i, 0, {}});
        const QString text = pane.toPlainText();
        EXPECT_TRUE(text.contains("reuse_allow_opportunistic → off")) << text.toStdString();
        EXPECT_TRUE(text.contains("reuse: allow opportunistic")) << text.toStdString();
        ++checked;
    }
    EXPECT_EQ(checked, 4);
}

namespace {
// A frame painted from scratch: a colouring round trip changes the cache key twice.
QImage freshFrame(TimelineWidget& w) {
    const BarColoring c = w.barColoring();
    w.setBarColoring(c == BarColoring::BySize ? BarColoring::ByPool : BarColoring::BySize);
    w.grab();
    w.setBarColoring(c);
    QImage img = w.grab().toImage();
    EXPECT_EQ(w.lastContentPaint(), TimelineWidget::ContentPaint::Full);
    return img;
}

int differingPixels(const QImage& a, const QImage& b) {
    if (a.size() != b.size()) return -1;
    const QImage x = a.convertToFormat(QImage::Format_RGB32),
                 y = b.convertToFormat(QImage::Format_RGB32);
    int n = 0;
    QRect box;
    for (int r = 0; r < x.height(); ++r)
        for (int c = 0; c < x.width(); ++c)
            if (x.pixel(c, r) != y.pixel(c, r)) {
                ++n;
                box |= QRect(c, r, 1, 1);
            }
    if (n)
        std::fprintf(stderr, "%d pixels differ in %d,%d %dx%d\n", n, box.x(), box.y(), box.width(),
                     box.height());
    return n;
}
} // namespace

TEST(TimelineWidget, PannedCachedFramesEqualFreshOnes) {
    // The lanes image is reused and shifted on pans: every such frame must be pixel-identical
    // to one painted from scratch, and selection, cursor and collapse must never leave stale
    // content.
    QSettings().remove("timeline/collapsedLanes");
    auto tl = loadTimeline(synth::syntheticTracePath());
    TraceSnapshot s = TraceSnapshot::fromTimeline(tl, "synthetic");
    TimelineWidget w;
    w.resize(1100, 600);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    w.setSnapshot(s);
    const int64_t span0 = tl->t1 - tl->t0;
    for (int64_t span : {span0, span0 / 10, span0 / 300}) {
        const int64_t a = tl->t0 + span0 / 4;
        w.setViewRange(a, a + span);
        w.grab();
        for (int step : {1, -3, 7, 40, -90}) {
            const int64_t before = w.viewStart();
            w.setViewRange(w.viewStart() + span * step / 200,
                           w.viewStart() + span * step / 200 + span);
            const QImage panned = w.grab().toImage();
            // (At the whole-trace level a pan can hit the view's limit and not move.)
            if (w.viewStart() != before) {
                EXPECT_EQ(w.lastContentPaint(), TimelineWidget::ContentPaint::Strip)
                    << span << " " << step;
            }
            EXPECT_EQ(differingPixels(panned, freshFrame(w)), 0)
                << "span " << span << " step " << step;
        }
    }
    // Overlay changes reuse the image as is, and show the change.
    uint32_t idx = 0;
    for (uint32_t i = 0; i < tl->allocations.size(); ++i)
        if (!w.allocationRect(i).isEmpty() && w.allocationRect(i).width() > 6) {
            idx = i;
            break;
        }
    const QImage before = w.grab().toImage();
    w.setSelection({Selection::Allocation, idx, 0, {}});
    const QImage selected = w.grab().toImage();
    EXPECT_EQ(w.lastContentPaint(), TimelineWidget::ContentPaint::Cached);
    EXPECT_GT(differingPixels(before, selected), 0);
    EXPECT_EQ(differingPixels(selected, freshFrame(w)), 0);
    w.setCursorTime(w.viewStart() + (w.viewEnd() - w.viewStart()) / 3);
    const QImage cursor = w.grab().toImage();
    EXPECT_EQ(differingPixels(cursor, freshFrame(w)), 0);
    w.setSelection({});
    w.setCursorTime(INT64_MIN);
    EXPECT_EQ(differingPixels(w.grab().toImage(), before), 0);
    // Collapsing repaints (the lanes move).
    int lane = -1;
    for (size_t i = 0; i < s.layout->lanes.size() && lane < 0; ++i)
        if (s.layout->lanes[i].kind == LaneKind::Stream && s.layout->lanes[i].rowCount > 1)
            lane = int(i);
    ASSERT_GE(lane, 0);
    w.setLaneCollapsed(lane, true);
    const QImage collapsed = w.grab().toImage();
    EXPECT_EQ(w.lastContentPaint(), TimelineWidget::ContentPaint::Full);
    EXPECT_GT(differingPixels(collapsed, before), 0);
    w.setLaneCollapsed(lane, false);
    EXPECT_EQ(differingPixels(w.grab().toImage(), before), 0);
    QSettings().remove("timeline/collapsedLanes");
}

// A damaged trace can date something at INT64_MIN: the widget's fits subtracted the trace's
// start from its end in int64_t (UBSan "signed integer overflow" in fitActivity under the debug
// preset; 3 files of hostile.window). Hand-built: the synthetic timeline with its start moved.
TEST(TimelineWidget, FitsATraceThatStartsAtInt64Min) {
    auto real = loadTimeline(synth::syntheticTracePath());
    auto tl = std::make_shared<Timeline>(*real);
    tl->t0 = INT64_MIN;
    TimelineWidget w;
    w.resize(900, 500);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    w.setSnapshot(TraceSnapshot::fromTimeline(tl, "starts at INT64_MIN (hand-built)"));
    for (int fit = 0; fit < 2; ++fit) {
        fit == 0 ? w.fitActivity() : w.fitAll();
        EXPECT_LT(w.viewStart(), w.viewEnd()) << fit;
        EXPECT_GE(w.viewEnd(), real->t1) << fit; // the real events stay in view
        w.grab();
    }
    w.setViewRange(INT64_MIN, INT64_MAX);
    EXPECT_LT(w.viewStart(), w.viewEnd());
    w.grab();
}

TEST(TimelineWidget, PoolChartsFromBlockTimesEqualTheColumnByColumnScan) {
    // Pool charts and collapsed stream profiles search their columns through the layout's block
    // times (when zoomed out); without them (the plain column-by-column scan) every frame must
    // be the same. Forced at every zoom level here: this trace is small.
    QSettings().remove("timeline/collapsedLanes");
    const size_t minPoints = TimelinePainter::blockScanMinPoints;
    TimelinePainter::blockScanMinPoints = 0;
    auto tl = loadTimeline(synth::syntheticTracePath());
    TraceSnapshot s = TraceSnapshot::fromTimeline(tl, "synthetic");
    auto plain = std::make_shared<LaneLayout>(*s.layout);
    plain->poolBlockT.assign(plain->poolBlockT.size(), {});
    plain->streamBlockT.assign(plain->streamBlockT.size(), {});
    TraceSnapshot s2 = s;
    s2.layout = plain;
    TimelineWidget a, b;
    for (TimelineWidget* w : {&a, &b}) {
        w->resize(1100, 600);
        w->show();
        ASSERT_TRUE(QTest::qWaitForWindowExposed(w));
    }
    a.setSnapshot(s);
    b.setSnapshot(s2);
    int stream = -1;
    for (size_t i = 0; i < s.layout->lanes.size() && stream < 0; ++i)
        if (s.layout->lanes[i].kind == LaneKind::Stream && s.layout->lanes[i].rowCount > 0)
            stream = int(i);
    const int64_t span0 = tl->t1 - tl->t0;
    for (bool collapsed : {false, true}) {
        a.setLaneCollapsed(stream, collapsed);
        b.setLaneCollapsed(stream, collapsed);
        ASSERT_EQ(a.laneCollapsed(stream), collapsed);
        ASSERT_EQ(b.laneCollapsed(stream), collapsed);
        for (int64_t span : {span0 * 11 / 10, span0, span0 / 7, span0 / 300, span0 / 20000}) {
            const int64_t from = tl->t0 - span0 / 20 + span0 / 3;
            a.setViewRange(from, from + span);
            b.setViewRange(from, from + span);
            EXPECT_EQ(differingPixels(a.grab().toImage(), b.grab().toImage()), 0)
                << "span " << span << " collapsed " << collapsed;
        }
    }
    TimelinePainter::blockScanMinPoints = minPoints;
    QSettings().remove("timeline/collapsedLanes");
}

// A new snapshot of the same trace (the whole timeline replacing the partial one of a progressive
// load, a live refresh) keeps the stream and pool the user filtered on.
TEST(EventsPanel, KeepsStreamAndPoolFilterAcrossANewSnapshot) {
    auto tl = loadTimeline(samplePath("churn.poolscope"));
    ASSERT_TRUE(tl);
    ASSERT_GE(tl->streams.size(), 2u);
    TraceSnapshot s = TraceSnapshot::fromTimeline(tl, "churn");
    EventsPanel panel;
    panel.setSource(s, {});
    const auto boxes = panel.findChildren<QComboBox*>();
    QComboBox* streamBox = nullptr;
    for (QComboBox* b : boxes)
        if (b->count() == int(tl->streams.size()) + 1 && b->itemData(1).toULongLong() == tl->streams[0].info.handle)
            streamBox = b;
    ASSERT_NE(streamBox, nullptr);
    streamBox->setCurrentIndex(2); // the second stream
    ASSERT_TRUE(panel.filter().stream.has_value());
    EXPECT_EQ(*panel.filter().stream, tl->streams[1].info.handle);
    panel.setSource(TraceSnapshot::fromTimeline(tl, "churn"), {});
    ASSERT_TRUE(panel.filter().stream.has_value());
    EXPECT_EQ(*panel.filter().stream, tl->streams[1].info.handle);
    panel.clear(); // another document: back to all
    panel.setSource(s, {});
    EXPECT_FALSE(panel.filter().stream.has_value());
}

// A tall stream lane (GPT-2's one stream with thousands of rows) names itself on the line of its
// disclosure triangle: the name used to sit centred in the lane's upper half, which left the
// triangle's line looking like a header with no label.
TEST(TimelineWidget, TallLaneTitleSitsOnItsTrianglesLine) {
    QSettings().remove("timeline/collapsedLanes");
    auto tl = loadTimeline(samplePath("gpt2.poolscope"));
    ASSERT_TRUE(tl);
    TraceSnapshot s = TraceSnapshot::fromTimeline(tl, "gpt2");
    TimelineWidget w;
    w.resize(1200, 700);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    w.setSnapshot(s);
    int tall = -1;
    for (size_t i = 0; i < s.layout->lanes.size(); ++i)
        if (s.layout->lanes[i].kind == LaneKind::Stream && w.laneHeight(int(i)) >= 80) tall = int(i);
    ASSERT_GE(tall, 0) << "no tall stream lane in the sample";
    const QImage img = w.grab().toImage();
    const int top = w.laneTop(tall), h = w.laneHeight(tall);
    // Text pixels (dark on the light label column) per band of the label, left of the plot.
    auto textIn = [&](int y0, int y1) {
        int n = 0;
        for (int y = std::max(0, y0); y < std::min(img.height(), y1); ++y)
            for (int x = TimelineGeometry::labelIndent(s.layout->lanes[size_t(tall)]);
                 x < w.labelWidth() - 6; ++x)
                n += qGray(img.pixel(x, y)) < 110;
        return n;
    };
    EXPECT_GT(textIn(top + 2, top + 20), 20) << "no title on the triangle's line";
    // ...and the subtitle right under it, not at the lane's bottom.
    EXPECT_GT(textIn(top + 21, top + 38), 10);
    EXPECT_EQ(textIn(top + h / 2, top + h - 2), 0) << "text left in the lane's lower half";
}
