// The window offscreen: open a trace, select an allocation by clicking its bar, and check that
// the details pane and the linked views follow. Also: bad files, cancel, replay, table jumps.
#include "DetailsPane.h"
#include "EntityTreeModel.h"
#include "EventsPanel.h"
#include "MainWindow.h"
#include "ReplayBar.h"
#include "TestTrace.h"
#include "TimelineWidget.h"
#include "TraceLoader.h"
#include "WatermarkPlot.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/Units.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QHeaderView>
#include <QMessageBox>
#include <QSettings>
#include <QSignalSpy>
#include <QTableView>
#include <QTest>
#include <QTreeView>
#include <gtest/gtest.h>
#include <qcustomplot.h>
#include <sqlite3.h>

using namespace poolscope;
using namespace poolscope::ui;

namespace {

bool openAndWait(MainWindow& w, const QString& path) {
    QSignalSpy shown(&w, &MainWindow::snapshotShown);
    w.openFile(path);
    return shown.wait(60000);
}

bool waitForEvents(MainWindow& w) {
    QSignalSpy done(w.events(), &EventsPanel::queryFinished);
    return done.wait(30000);
}

// The largest allocation of the default pool that is not live at the end.
uint32_t pickAllocation(const Timeline& tl) {
    uint32_t best = 0;
    uint64_t size = 0;
    for (uint32_t i = 0; i < tl.allocations.size(); ++i) {
        const Allocation& a = tl.allocations[i];
        if (a.pool == synth::kSynthDefaultPool && !a.live() && a.size > size) {
            best = i;
            size = a.size;
        }
    }
    return best;
}

} // namespace

TEST(MainWindow, OpensTraceAndSelectingABarUpdatesLinkedViews) {
    MainWindow w;
    w.resize(1400, 900);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    ASSERT_TRUE(openAndWait(w, synth::syntheticTracePath()));
    ASSERT_TRUE(w.snapshot().valid());
    const Timeline& tl = *w.snapshot().timeline;
    EXPECT_TRUE(w.windowTitle().contains("synthetic-20000.poolscope"));
    EXPECT_FALSE(w.windowTitle().contains("bundled sample"));
    EXPECT_GT(w.entityModel()->rowCount(), 0);
    ASSERT_TRUE(waitForEvents(w));
    EXPECT_GT(w.events()->model()->rowCount(), 100);

    // Zoom the timeline onto one allocation, then click its bar as a user would.
    const uint32_t idx = pickAllocation(tl);
    const Allocation& a = tl.allocations[idx];
    w.timeline()->setSelection({Selection::Allocation, idx, 0, {}});
    w.timeline()->zoomToSelection();
    w.timeline()->setSelection({});
    QApplication::processEvents();
    const QRect bar = w.timeline()->allocationRect(idx);
    ASSERT_FALSE(bar.isEmpty());
    QSignalSpy sel(w.timeline(), &TimelineWidget::selectionChanged);
    QTest::mouseClick(w.timeline(), Qt::LeftButton, {}, bar.center());
    ASSERT_EQ(sel.count(), 1);
    EXPECT_EQ(w.timeline()->selection().kind, Selection::Allocation);
    EXPECT_EQ(w.timeline()->selection().index, idx);

    // Details: all fields in human units and the pool's state at that moment.
    const QString details = w.details()->toPlainText();
    EXPECT_TRUE(details.contains("Allocation of")) << details.toStdString();
    EXPECT_TRUE(details.contains(QString::fromStdString(formatBytes(a.size))));
    EXPECT_TRUE(details.contains("stream #")) << details.toStdString();
    EXPECT_TRUE(details.contains("a different stream")); // freed on stream B
    EXPECT_TRUE(details.contains("at that moment"));
    EXPECT_TRUE(details.contains("reserved"));

    // Linked: the plot shows the timeline's range; the events table follows the view and
    // selects the allocation's alloc event.
    const QCPRange r = w.watermarks()->plot()->xAxis->range();
    EXPECT_NEAR(r.lower, double(w.timeline()->viewStart() - tl.t0), 1.0);
    EXPECT_NEAR(r.upper, double(w.timeline()->viewEnd() - tl.t0), 1.0);
    ASSERT_TRUE(waitForEvents(w));
    w.select({Selection::Allocation, idx, 0, {}});
    const QModelIndex cur = w.events()->view()->currentIndex();
    ASSERT_TRUE(cur.isValid());
    EXPECT_EQ(w.events()->model()->eventAt(cur.row())->seq, a.allocSeq);
    EXPECT_GT(w.watermarks()->graphPointCount(), 0);
}

TEST(MainWindow, TableDoubleClickJumpsTimelineAndTreeHighlightsPool) {
    MainWindow w;
    w.resize(1400, 900);
    w.show();
    ASSERT_TRUE(openAndWait(w, synth::syntheticTracePath()));
    ASSERT_TRUE(waitForEvents(w));
    const Timeline& tl = *w.snapshot().timeline;
    // A free of the default pool near the end of the list (a short-lived block).
    EventTableModel* m = w.events()->model();
    int row = -1;
    for (int r = m->rowCount() - 1; r >= 0 && row < 0; --r)
        if (m->eventAt(r)->kind == EventKind::Free &&
            m->eventAt(r)->pool == synth::kSynthDefaultPool)
            row = r;
    ASSERT_GE(row, 0);
    const Event e = *m->eventAt(row);
    QTableView* v = w.events()->view();
    v->scrollTo(m->index(row, 0));
    const QRect cell = v->visualRect(m->index(row, 1));
    QTest::mouseClick(v->viewport(), Qt::LeftButton, {}, cell.center());
    QTest::mouseDClick(v->viewport(), Qt::LeftButton, {}, cell.center());
    EXPECT_LE(w.timeline()->viewStart(), e.tsNs);
    EXPECT_GE(w.timeline()->viewEnd(), e.tsNs);
    EXPECT_LT(w.timeline()->viewEnd() - w.timeline()->viewStart(), (tl.t1 - tl.t0) / 2);
    EXPECT_EQ(w.timeline()->selection().kind, Selection::Allocation);
    EXPECT_EQ(tl.allocations[w.timeline()->selection().index].freeSeq, e.seq);

    const QModelIndex pool = w.entityModel()->indexFor(Selection::Pool, synth::kSynthExplicitPool);
    w.entityView()->setCurrentIndex(pool);
    EXPECT_TRUE(w.details()->toPlainText().contains("peak reserved"));
    EXPECT_EQ(w.details()->selection().kind, Selection::Pool);
}

TEST(MainWindow, ReplayCursorShowsStateAtThatInstant) {
    MainWindow w;
    w.show();
    ASSERT_TRUE(openAndWait(w, synth::syntheticTracePath()));
    const Timeline& tl = *w.snapshot().timeline;
    const int64_t t = tl.t0 + (tl.t1 - tl.t0) / 3;
    w.replay()->setCursor(t);
    EXPECT_EQ(w.timeline()->cursorTime(), t);
    const QModelIndex pool = w.entityModel()->indexFor(Selection::Pool, synth::kSynthDefaultPool);
    const PoolTimeline* p = tl.pool(synth::kSynthDefaultPool);
    EXPECT_EQ(w.entityModel()->data(pool.siblingAtColumn(EntityTreeModel::ReservedAtCursor)).toString(),
              QString::fromStdString(formatBytes(p->reserved.valueAt(t))));
    EXPECT_EQ(w.entityModel()->data(pool.siblingAtColumn(EntityTreeModel::UsedAtCursor)).toString(),
              QString::fromStdString(formatBytes(p->used.valueAt(t))));
    EXPECT_TRUE(w.details()->toPlainText().contains("At the cursor"));
    // Playing moves the cursor forward.
    w.replay()->play();
    QTest::qWait(200);
    w.replay()->pause();
    EXPECT_GT(w.replay()->cursor(), t);
    w.replay()->clearCursor();
    EXPECT_EQ(w.timeline()->cursorTime(), INT64_MIN);
}

TEST(MainWindow, InvalidFileShowsCoreErrorInADialog) {
    MainWindow w;
    w.show();
    QTemporaryDir dir;
    const QString bad = dir.filePath("garbage.poolscope");
    {
        QFile f(bad);
        ASSERT_TRUE(f.open(QIODevice::WriteOnly));
        f.write("this is not an SQLite database, just bytes");
    }
    QSignalSpy failed(&w, &MainWindow::loadFailed);
    w.openFile(bad);
    ASSERT_TRUE(failed.wait(10000));
    const QString msg = failed.first().first().toString();
    EXPECT_FALSE(msg.isEmpty());
    auto* box = w.findChild<QMessageBox*>("loadErrorBox");
    ASSERT_NE(box, nullptr);
    EXPECT_TRUE(box->text().contains(msg));
    box->close();
    // Missing file: the core's NotFound message, and the window still works.
    QSignalSpy failed2(&w, &MainWindow::loadFailed);
    w.openFile(dir.filePath("missing.poolscope"));
    ASSERT_TRUE(failed2.wait(10000));
    EXPECT_FALSE(w.snapshot().valid());
}

// A file whose event_counts claim 2^62 allocations (a hand-damaged fixture). Such counts once
// sized the build's reservations and made it throw inside the loader's worker, whose exception
// was rethrown by ~TraceLoader. Now the counts are checked against the chunks: the window shows
// the three intact events, says what is damaged, and stays usable; nothing is rethrown at exit.
TEST(MainWindow, InflatedCountsShowTheIntactEventsAndTheDamage) {
    QTemporaryDir dir;
    const QString path = dir.filePath("hand-damaged-inflated-counts.poolscope");
    {
        auto w = TraceWriter::create(path.toStdString());
        ASSERT_TRUE(w) << w.error().message;
        std::vector<Event> events(3);
        for (size_t i = 0; i < events.size(); ++i) {
            Event& e = events[i];
            e.seq = i + 1;
            e.tsNs = int64_t(i) * 10;
            e.kind = EventKind::Alloc;
            e.stream = 0x10;
            e.pool = 0x20;
            e.ptr = 0x1000 + 0x100 * i;
            e.size = 256;
        }
        ASSERT_TRUE((*w)->append(events));
        ASSERT_TRUE((*w)->close());
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
        EXPECT_EQ(sqlite3_exec(db, "UPDATE event_counts SET count = 4611686018427387904", nullptr,
                               nullptr, nullptr),
                  SQLITE_OK);
        sqlite3_close(db);
    }
    {
        MainWindow w;
        w.show();
        ASSERT_TRUE(openAndWait(w, path));
        ASSERT_TRUE(w.snapshot().valid());
        EXPECT_EQ(w.snapshot().timeline->allocations.size(), 3u);
        EXPECT_FALSE(w.snapshot().damage.isEmpty());
        auto* box = w.findChild<QMessageBox*>("damageBox");
        ASSERT_NE(box, nullptr);
        EXPECT_TRUE(box->text().contains(QStringLiteral("event_counts"))) << box->text().toStdString();
        box->close();
        EXPECT_FALSE(w.loader()->busy());
        ASSERT_TRUE(openAndWait(w, synth::syntheticTracePath())); // still usable
        EXPECT_TRUE(w.snapshot().damage.isEmpty());
        w.openFile(path); // and again, left running when the window closes
        QTest::qWait(50);
    } // ~MainWindow, ~TraceLoader: must not rethrow
}

// A copy of a real trace with its first watermark sample moved to INT64_MIN (a hand-damaged
// copy: the damage hostile.corpus's "values" files make). The window once overflowed on every
// t - t0 after such a sample (UBSan, hostile.window under the debug preset); now the sample is
// left out where the trace is read, and the window says so.
TEST(MainWindow, ASampleAtInt64MinIsLeftOutAndSaid) {
    QTemporaryDir dir;
    const QString path = dir.filePath("hand-damaged-beyond_pool-sample-at-int64-min.poolscope");
    ASSERT_TRUE(QFile::copy(QStringLiteral(POOLSCOPE_SAMPLES_DIR "/beyond_pool.poolscope"), path));
    QFile::setPermissions(path, QFile::ReadOwner | QFile::WriteOwner);
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
        EXPECT_EQ(sqlite3_exec(db, "UPDATE samples SET ts_ns = -9223372036854775808 WHERE id = "
                                   "(SELECT min(id) FROM samples)",
                               nullptr, nullptr, nullptr),
                  SQLITE_OK);
        EXPECT_EQ(sqlite3_changes(db), 1);
        sqlite3_close(db);
    }
    MainWindow w;
    w.resize(1200, 800);
    w.show();
    ASSERT_TRUE(openAndWait(w, QStringLiteral(POOLSCOPE_SAMPLES_DIR "/beyond_pool.poolscope")));
    const int64_t intactT0 = w.snapshot().timeline->t0;
    const uint64_t intactSamples = w.snapshot().timeline->sampleCount;
    EXPECT_TRUE(w.snapshot().damage.isEmpty());
    ASSERT_TRUE(openAndWait(w, path));
    ASSERT_TRUE(w.snapshot().valid());
    EXPECT_GE(w.snapshot().timeline->t0, intactT0);
    EXPECT_EQ(w.snapshot().timeline->sampleCount + 1, intactSamples);
    auto* box = w.findChild<QMessageBox*>("damageBox");
    ASSERT_NE(box, nullptr);
    EXPECT_TRUE(box->text().contains(QStringLiteral("1 watermark sample(s) dated at a time no "
                                                    "recording has")))
        << box->text().toStdString();
    box->close();
    w.grab();
}

// 1,000 pools: one graph set each (used, reserved, high watermark, threshold, markers) and none
// of them in QCustomPlot's hidden legend, whose per-item removal (a linear search and a relayout
// each) made closing such a trace take a minute. The timing is poolscope_bench_many_pools's.
TEST(WatermarkPlot, ThousandPoolsGetOneGraphSetEachAndClear) {
    QTemporaryDir dir;
    const QString path = dir.filePath("many-pools.poolscope");
    ASSERT_TRUE(synth::writeManyPoolsTrace(path.toStdString(), 1000, 100000).ok());
    auto tl = synth::loadTimeline(path);
    ASSERT_NE(tl, nullptr);
    ASSERT_EQ(tl->pools.size(), 1000u);
    const TraceSnapshot snap = TraceSnapshot::fromTimeline(tl, QStringLiteral("many pools"));
    WatermarkPlot plot;
    plot.resize(1200, 400);
    plot.show();
    plot.setSnapshot(snap);
    EXPECT_EQ(plot.plot()->graphCount(), 6 * 1000); // 6 per pool
    EXPECT_EQ(plot.plot()->legend->itemCount(), 0) << "the plot's own legend is a QLabel";
    EXPECT_GT(plot.graphPointCount(), 100000);
    plot.setSnapshot(TraceSnapshot{});
    EXPECT_EQ(plot.plot()->graphCount(), 0);
    plot.setSnapshot(snap); // and back: the graphs are rebuilt, not left behind
    EXPECT_EQ(plot.plot()->graphCount(), 6 * 1000); // 6 per pool
}

TEST(MainWindow, CancelledLoadLeavesWindowUsable) {
    MainWindow w;
    w.show();
    const QString big = synth::syntheticTracePath(300000);
    QSignalSpy cancelled(w.loader(), &TraceLoader::cancelled);
    QSignalSpy shown(&w, &MainWindow::snapshotShown);
    w.openFile(big);
    w.loader()->cancel();
    EXPECT_EQ(cancelled.count(), 1);
    QTest::qWait(300);
    EXPECT_EQ(shown.count(), 0); // the stale job's result is dropped
    EXPECT_FALSE(w.loader()->busy());
    ASSERT_TRUE(openAndWait(w, synth::syntheticTracePath()));
    EXPECT_TRUE(w.snapshot().valid());
}

TEST(MainWindow, NewerLoadWinsOverOlder) {
    MainWindow w;
    w.show();
    const QString big = synth::syntheticTracePath(300000);
    const QString small = synth::syntheticTracePath();
    QSignalSpy shown(&w, &MainWindow::snapshotShown);
    w.openFile(big);
    w.openFile(small);
    ASSERT_TRUE(shown.wait(60000));
    QTest::qWait(500);
    EXPECT_EQ(shown.count(), 1);
    EXPECT_TRUE(w.snapshot().path.endsWith("synthetic-20000.poolscope"));
}

TEST(MainWindow, OpensTheRealSampleTrace) {
    const QString sample = QStringLiteral(POOLSCOPE_SAMPLE_TRACE);
    if (!QFile::exists(sample)) GTEST_SKIP() << "no recorded sample at " << sample.toStdString();
    MainWindow w;
    w.show();
    ASSERT_TRUE(openAndWait(w, sample));
    const Timeline& tl = *w.snapshot().timeline;
    ASSERT_FALSE(tl.allocations.empty());
    w.select({Selection::Allocation, 0, 0, {}});
    EXPECT_TRUE(w.details()->toPlainText().contains("Allocation of"));
}

// Every recorded sample opens, paints at several zoom levels and shows details: catches
// layouts the generated trace never produces (129 streams, unknown pools, IPC, forks).
TEST(MainWindow, EveryRecordedSampleOpensAndPaints) {
    const QDir dir = QFileInfo(QStringLiteral(POOLSCOPE_SAMPLE_TRACE)).absoluteDir();
    const QStringList files = dir.entryList({"*.poolscope"}, QDir::Files, QDir::Name);
    if (files.isEmpty()) GTEST_SKIP() << "no recorded samples in " << dir.path().toStdString();
    MainWindow w;
    w.resize(1400, 900);
    w.show();
    for (const QString& f : files) {
        SCOPED_TRACE(f.toStdString());
        ASSERT_TRUE(openAndWait(w, dir.filePath(f)));
        const Timeline& tl = *w.snapshot().timeline;
        // A process that never used the allocator (torchrun's launcher) has no lanes.
        EXPECT_EQ(w.snapshot().layout->lanes.empty(), tl.eventCount == 0);
        for (int zoom = 0; zoom < 3; ++zoom) {
            const QImage img = w.timeline()->grab().toImage();
            EXPECT_FALSE(img.isNull());
            w.timeline()->zoomBy(20.0, (tl.t0 + tl.t1) / 2);
        }
        if (!tl.allocations.empty()) {
            w.select({Selection::Allocation, uint32_t(tl.allocations.size() / 2), 0, {}});
            EXPECT_TRUE(w.details()->toPlainText().contains("Allocation of"));
        }
        if (!tl.markers.empty()) w.select({Selection::Marker, 0, 0, {}});
        w.replay()->setCursor((tl.t0 + tl.t1) / 2);
        QApplication::processEvents();
    }
}

// First start with nothing given: the bundled recorded sample, and the window says so.
TEST(MainWindow, FirstStartShowsBundledSampleAndSaysSo) {
    if (!QFile::exists(QStringLiteral(POOLSCOPE_SAMPLE_TRACE))) GTEST_SKIP() << "no bundled sample";
    MainWindow w;
    w.show();
    QSignalSpy shown(&w, &MainWindow::snapshotShown);
    w.openDefault();
    ASSERT_TRUE(shown.wait(30000));
    EXPECT_TRUE(w.snapshot().bundledSample);
    EXPECT_TRUE(w.statusText().contains("bundled sample")) << w.statusText().toStdString();
    EXPECT_TRUE(w.statusText().contains("recorded on")) << w.statusText().toStdString();
    EXPECT_TRUE(w.windowTitle().contains("bundled sample"));
}

// Events the collector lost (drop_gaps rows written into a generated trace, not a recording):
// the status bar says how many and where to look, and the timeline's hover names each gap.
TEST(MainWindow, LostEventsAreAnnouncedAndMarked) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("drops-generated.poolscope"));
    synth::SyntheticOptions o;
    o.events = 5000;
    o.dropGaps = 2;
    o.dropCount = 1234;
    Status st = synth::writeSyntheticTrace(path.toStdString(), o);
    ASSERT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    MainWindow w;
    w.resize(1400, 900);
    w.show();
    ASSERT_TRUE(openAndWait(w, path));
    const Timeline& tl = *w.snapshot().timeline;
    ASSERT_EQ(tl.dropGaps.size(), 2u);
    EXPECT_EQ(tl.droppedInGaps(), 2468u);
    EXPECT_EQ(tl.dropGaps[0].tid, 777u);
    EXPECT_TRUE(w.statusText().contains(QStringLiteral("lost 2,468 events in 2 gap(s)")))
        << w.statusText().toStdString();
    // Zoomed out on the whole trace, the first gap sits at its share of the width.
    w.timeline()->fitAll();
    QApplication::processEvents();
    const double share = double(tl.dropGaps[0].tsNs - w.timeline()->viewStart()) /
                         double(w.timeline()->viewEnd() - w.timeline()->viewStart());
    EXPECT_GT(share, 0.2);
    EXPECT_LT(share, 0.5);
}

// At 1600x1000 with the default layout, the Pools & streams dock beside the events (and the
// call sites tabbed with them) opened about 370 px wide: only two of its columns showed. It
// now gets the width its columns need.
TEST(MainWindow, PoolsAndStreamsDockShowsItsColumnsAt1600x1000) {
    const QString sample = QStringLiteral(POOLSCOPE_SAMPLES_DIR "/gpt2.poolscope");
    if (!QFile::exists(sample)) GTEST_SKIP() << "no gpt2 sample";
    QSettings().remove("window/state");
    QSettings().remove("window/geometry");
    MainWindow w;
    w.resize(1600, 1000);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    ASSERT_TRUE(openAndWait(w, sample));
    w.replay()->setCursor(w.snapshot().timeline->t0 + 1000); // fills the cursor columns
    QTreeView* tree = w.entityView();
    auto lastRight = [&] {
        const int last = EntityTreeModel::ColumnCount - 1;
        return tree->header()->sectionViewportPosition(last) + tree->header()->sectionSize(last);
    };
    // The dock is fitted after the tree's columns, and the layout applies it a moment later.
    for (int i = 0; i < 60 && lastRight() > tree->viewport()->width(); ++i) QTest::qWait(50);
    const int visible = tree->viewport()->width();
    for (int c = 0; c < EntityTreeModel::ColumnCount; ++c) {
        const int w = tree->header()->sectionSize(c);
        const int right = tree->header()->sectionViewportPosition(c) + w;
        EXPECT_LE(right, visible) << "column " << c << " cut: "
                                  << tree->model()->headerData(c, Qt::Horizontal).toString().toStdString();
    }
    // The events table keeps room for its first columns (it scrolls sideways for the rest),
    // the size among them, after every query.
    EXPECT_GE(w.events()->width(), 520);
    const QHeaderView* h = w.events()->view()->horizontalHeader();
    for (int i = 0; i < 2; ++i) { // each query's answer keeps the order
        const Timeline& tl = *w.snapshot().timeline;
        w.timeline()->setViewRange(tl.t0, tl.t0 + (tl.t1 - tl.t0) / (2 + i));
        ASSERT_TRUE(waitForEvents(w));
        EXPECT_EQ(h->visualIndex(EventTableModel::Size), h->visualIndex(EventTableModel::Kind) + 1);
    }
}
