// Progressive loading in the window: the beginning of a trace is shown while the rest loads,
// marked as partial, then replaced by the whole trace without losing what the user did.
#include "DetailsPane.h"
#include "MainWindow.h"
#include "TestTrace.h"
#include "TimelineWidget.h"
#include "TraceLoad.h"
#include "TraceLoader.h"
#include "WatermarkPlot.h"

#include <QApplication>
#include <QFile>
#include <QImage>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <chrono>
#include <gtest/gtest.h>
#include <qcustomplot.h>
#include <sqlite3.h>

using namespace poolscope;
using namespace poolscope::ui;

namespace {

int visibleOverlays(MainWindow& w) {
    int n = 0;
    for (QWidget* o : w.loadingOverlays())
        n += o->isVisible();
    return n;
}

// Pixels of a pool's colour (saturated, as the grey wash and hatch are not) in the plot's part
// not loaded yet, as the user sees it: the plot grabbed with the loading overlay over it.
int colouredPixelsPastTheLoadedPart(MainWindow& w) {
    QCustomPlot* cp = w.watermarks()->plot();
    cp->replot(QCustomPlot::rpImmediateRefresh);
    const QImage img = cp->grab().toImage();
    const Timeline& tl = *w.snapshot().timeline;
    const QRect area = cp->axisRect()->rect();
    const int x0 = int(cp->xAxis->coordToPixel(double(tl.loadedUntilNs - w.watermarks()->origin()))) + 4;
    const double dpr = img.devicePixelRatio();
    int n = 0;
    for (int x = std::max(x0, area.left()); x < area.right() - 2; ++x)
        for (int y = area.top() + 2; y < area.bottom() - 2; ++y)
            n += img.pixelColor(int(x * dpr), int(y * dpr)).hsvSaturation() > 90;
    return n;
}

} // namespace

// Issue #15: while the rest loads, the plot draws it from the trace's per-chunk summaries (a
// min/max band per column under the "loading" shading), and a trace without them as before.
TEST(ProgressiveLoad, PartialPlotDrawsTheRestFromTheSummaries) {
    const QString path = synth::syntheticTracePath(60000);
    QTemporaryDir dir;
    const QString old = dir.filePath(QStringLiteral("without-summaries.poolscope"));
    ASSERT_TRUE(QFile::copy(path, old));
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(old.toUtf8().constData(), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "DROP TABLE pool_chunk_summary", nullptr, nullptr, nullptr),
                  SQLITE_OK);
        sqlite3_close(db);
    }
    int coloured[2] = {-1, -1};
    QString note[2];
    for (int i = 0; i < 2; ++i) {
        MainWindow w;
        w.resize(1400, 900);
        w.show();
        w.loader()->setPartialAfter(std::chrono::hours(1), 1);
        QSignalSpy shown(&w, &MainWindow::snapshotShown);
        QObject::connect(&w, &MainWindow::partialShown, [&] {
            EXPECT_EQ(w.watermarks()->hasOverview(), i == 0);
            EXPECT_EQ(w.timeline()->hasOverview(), i == 0); // its pool charts too
            // The user looks at the whole trace, most of which is not loaded yet.
            w.timeline()->setViewRange(w.snapshot().timeline->t0, w.snapshot().timeline->t1);
            // Layout only: processing every event could deliver the whole timeline, queued
            // behind the partial when the rest reads fast, and the plot would have no unloaded
            // part left to draw (2 of 40 runs did).
            QApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
            ASSERT_TRUE(w.snapshot().timeline->partial);
            coloured[i] = colouredPixelsPastTheLoadedPart(w);
            // What the partial held, for a failure's message.
            const Timeline& p = *w.snapshot().timeline;
            note[i] = QStringLiteral("partial %1 of %2 events, loaded until %3 of [%4, %5] ns")
                          .arg(p.eventCount).arg(p.totalEvents).arg(p.loadedUntilNs)
                          .arg(p.t0).arg(p.t1);
            if (const char* d = std::getenv("POOLSCOPE_SCREENSHOT_DIR"))
                w.grab().save(QString::fromUtf8(d) +
                              (i ? QStringLiteral("/partial-without-summaries.png")
                                 : QStringLiteral("/partial-with-summaries.png")));
        });
        w.openFile(i == 0 ? path : old);
        ASSERT_TRUE(shown.wait(60000));
        EXPECT_FALSE(w.watermarks()->hasOverview()); // the whole timeline replaced it
    }
    // With summaries the unloaded part is drawn in the pools' colours; without, it is the grey
    // shading over the last known values, as before.
    EXPECT_GT(coloured[0], 2000) << "without summaries: " << coloured[1] << "; "
                                 << note[0].toStdString() << "; " << note[1].toStdString();
    EXPECT_GT(coloured[0], 10 * std::max(coloured[1], 1));
}

TEST(ProgressiveLoad, PartialFirstThenWholeTraceKeepingZoomAndSelection) {
    MainWindow w;
    w.resize(1400, 900);
    w.show();
    // A partial timeline after the first chunk (4,096 events) of a 60,000-event trace.
    w.loader()->setPartialAfter(std::chrono::hours(1), 1);
    const QString path = synth::syntheticTracePath(60000);
    QSignalSpy partial(&w, &MainWindow::partialShown);
    QSignalSpy shown(&w, &MainWindow::snapshotShown);

    int64_t zoomed0 = 0, zoomed1 = 0, fullT0 = 0, fullT1 = 0;
    uint64_t partialEvents = 0;
    uint32_t picked = 0;
    int overlaysDuringPartial = -1;
    QObject::connect(&w, &MainWindow::partialShown, [&] {
        const Timeline& tl = *w.snapshot().timeline;
        EXPECT_TRUE(tl.partial);
        EXPECT_EQ(shown.count(), 0); // before the whole trace
        partialEvents = tl.eventCount;
        fullT0 = tl.t0;
        fullT1 = tl.t1;
        overlaysDuringPartial = visibleOverlays(w);
        // The user zooms into the loaded part and selects an allocation there.
        ASSERT_FALSE(tl.allocations.empty());
        picked = uint32_t(tl.allocations.size() / 2);
        const Allocation& a = tl.allocations[picked];
        zoomed0 = a.allocTsNs - 1000000;
        zoomed1 = a.allocTsNs + 1000000;
        w.timeline()->setViewRange(zoomed0, zoomed1);
        w.select({Selection::Allocation, picked, 0, {}});
    });
    w.openFile(path);
    ASSERT_TRUE(shown.wait(60000));
    ASSERT_EQ(partial.count(), 1);
    EXPECT_EQ(partialEvents, 4096u);
    EXPECT_EQ(overlaysDuringPartial, 2); // the timeline and the plot shade the unloaded part

    const Timeline& tl = *w.snapshot().timeline;
    EXPECT_FALSE(tl.partial);
    EXPECT_GT(tl.eventCount, partialEvents);
    EXPECT_EQ(tl.t0, fullT0); // the axis did not move: the partial one spanned the trace
    EXPECT_EQ(tl.t1, fullT1);
    EXPECT_EQ(visibleOverlays(w), 0);
    EXPECT_EQ(w.timeline()->viewStart(), zoomed0); // the user's zoom survived the swap
    EXPECT_EQ(w.timeline()->viewEnd(), zoomed1);
    EXPECT_EQ(w.timeline()->selection().kind, Selection::Allocation);
    EXPECT_EQ(w.timeline()->selection().index, picked); // same allocation in the whole trace
    EXPECT_FALSE(w.loader()->busy());
}

TEST(ProgressiveLoad, WithoutInteractionTheWholeTraceFitsAsBefore) {
    MainWindow w;
    w.resize(1400, 900);
    w.show();
    w.loader()->setPartialAfter(std::chrono::hours(1), 1);
    QSignalSpy partial(&w, &MainWindow::partialShown);
    QSignalSpy shown(&w, &MainWindow::snapshotShown);
    w.openFile(synth::syntheticTracePath(60000));
    ASSERT_TRUE(shown.wait(60000));
    EXPECT_EQ(partial.count(), 1);
    // Same view as a load without a partial timeline: fit to the allocator's activity.
    const int64_t a = w.timeline()->viewStart(), b = w.timeline()->viewEnd();
    w.timeline()->fitActivity();
    EXPECT_EQ(w.timeline()->viewStart(), a);
    EXPECT_EQ(w.timeline()->viewEnd(), b);
    EXPECT_TRUE(w.statusText().contains(QStringLiteral("Opened")));
}

TEST(ProgressiveLoad, CancelAfterThePartialKeepsItMarkedNotLoaded) {
    MainWindow w;
    w.resize(1400, 900);
    w.show();
    w.loader()->setPartialAfter(std::chrono::hours(1), 1);
    QSignalSpy shown(&w, &MainWindow::snapshotShown);
    QSignalSpy cancelled(w.loader(), &TraceLoader::cancelled);
    bool cancelledInPartial = false;
    QObject::connect(&w, &MainWindow::partialShown, [&] {
        // The loader may have finished already (its result then waits in the queue): cancel
        // drops it either way.
        w.loader()->cancel();
        cancelledInPartial = true;
    });
    w.openFile(synth::syntheticTracePath(300000));
    for (int i = 0; i < 600 && !cancelledInPartial; ++i)
        QTest::qWait(50);
    ASSERT_TRUE(cancelledInPartial);
    QTest::qWait(300);
    EXPECT_EQ(shown.count(), 0);
    EXPECT_EQ(cancelled.count(), 1);
    ASSERT_TRUE(w.snapshot().valid());
    EXPECT_TRUE(w.snapshot().timeline->partial);
    EXPECT_EQ(visibleOverlays(w), 2);
    EXPECT_TRUE(w.statusText().contains(QStringLiteral("cancelled")));
    // A new load replaces it as usual.
    w.loader()->setPartialAfter(std::chrono::milliseconds(-1));
    QSignalSpy shown2(&w, &MainWindow::snapshotShown);
    w.openFile(synth::syntheticTracePath());
    ASSERT_TRUE(shown2.wait(60000));
    EXPECT_FALSE(w.snapshot().timeline->partial);
    EXPECT_EQ(visibleOverlays(w), 0);
}

// A trace larger than the window holds (POOLSCOPE_WINDOW_MAX_EVENTS, here its floor of 100,000,
// for a 300,000-event trace): it opens with its beginning, over the whole trace's time axis,
// the rest marked as beyond the window's limit, and the status bar says so and what reads it
// all. Without the limit the same trace loads whole.
TEST(ProgressiveLoad, ATraceLargerThanTheWindowHoldsOpensWithItsBeginning) {
    const QString path = synth::syntheticTracePath(300000);
    const auto whole = synth::loadTimeline(path);
    ASSERT_TRUE(whole);
    ASSERT_GT(whole->eventCount, 200000u);
    qputenv("POOLSCOPE_WINDOW_MAX_EVENTS", "100000");
    EXPECT_EQ(windowEventLimit(), 100000u);
    {
        MainWindow w;
        w.resize(1400, 900);
        w.show();
        w.loader()->setPartialAfter(std::chrono::milliseconds(-1));
        QSignalSpy shown(&w, &MainWindow::snapshotShown);
        w.openFile(path);
        ASSERT_TRUE(shown.wait(60000));
        const Timeline& tl = *w.snapshot().timeline;
        EXPECT_TRUE(tl.partial);
        EXPECT_TRUE(tl.limited);
        EXPECT_GE(tl.eventCount, 100000u);
        EXPECT_LT(tl.eventCount, 100000u + 4096u); // stopped at the next chunk boundary
        EXPECT_EQ(tl.totalEvents, whole->eventCount);
        EXPECT_EQ(tl.t0, whole->t0);
        EXPECT_EQ(tl.t1, whole->t1);
        EXPECT_LT(tl.loadedUntilNs, whole->t1);
        EXPECT_LT(tl.allocations.size(), whole->allocations.size());
        EXPECT_EQ(visibleOverlays(w), 2);
        EXPECT_TRUE(w.statusText().contains(QStringLiteral("as many as the window holds")))
            << w.statusText().toStdString();
        EXPECT_TRUE(w.statusText().contains(QStringLiteral("poolscope report")));
    }
    qunsetenv("POOLSCOPE_WINDOW_MAX_EVENTS");
    EXPECT_GT(windowEventLimit(), 100000u);
    MainWindow w;
    w.resize(1400, 900);
    w.show();
    w.loader()->setPartialAfter(std::chrono::milliseconds(-1));
    QSignalSpy shown(&w, &MainWindow::snapshotShown);
    w.openFile(path);
    ASSERT_TRUE(shown.wait(60000));
    EXPECT_FALSE(w.snapshot().timeline->partial);
    EXPECT_EQ(w.snapshot().timeline->eventCount, whole->eventCount);
    EXPECT_EQ(visibleOverlays(w), 0);
}
