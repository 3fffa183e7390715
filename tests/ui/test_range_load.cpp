// Detail per visible range (issue #15): a trace larger than the window holds opens with its
// beginning; zooming into a part not loaded loads that part's detail in the background and
// swaps it in, the overview staying around it. The trace is generated (TestTrace.h).
#include "DetailsPane.h"
#include "MainWindow.h"
#include "RangeLoader.h"
#include "StretchExporter.h"
#include "TestTrace.h"
#include "TimelineWidget.h"
#include "TraceLoad.h"
#include "TraceLoader.h"
#include "WatermarkPlot.h"

#include <QAction>
#include <QApplication>
#include <QFile>
#include <QSignalSpy>
#include <QTest>
#include <QTemporaryDir>
#include <chrono>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

using namespace poolscope;
using namespace poolscope::ui;

namespace {

int visibleOverlays(MainWindow& w) {
    int n = 0;
    for (QWidget* o : w.loadingOverlays()) n += o->isVisible();
    return n;
}

struct LimitedWindow {
    explicit LimitedWindow(const QString& path) {
        w.resize(1400, 900);
        w.show();
        w.loader()->setPartialAfter(std::chrono::milliseconds(-1));
        w.rangeLoader()->setDelay(20);
        QSignalSpy shown(&w, &MainWindow::snapshotShown);
        w.openFile(path);
        ok = shown.wait(60000);
    }
    MainWindow w;
    bool ok = false;
};

} // namespace

TEST(RangeLoad, ZoomingIntoAnUnloadedRangeLoadsItsDetail) {
    const QString path = synth::syntheticTracePath(400000);
    const auto whole = synth::loadTimeline(path);
    ASSERT_TRUE(whole);
    qputenv("POOLSCOPE_WINDOW_MAX_EVENTS", "100000");
    {
        LimitedWindow lw(path);
        ASSERT_TRUE(lw.ok);
        MainWindow& w = lw.w;
        const Timeline& first = *w.snapshot().timeline;
        ASSERT_TRUE(first.limited);
        ASSERT_FALSE(first.isRange());
        const int64_t span = whole->t1 - whole->t0;
        // A view at 70 % of the trace, far past the loaded beginning.
        const int64_t a = whole->t0 + span * 70 / 100, b = whole->t0 + span * 72 / 100;
        ASSERT_GT(a, first.loadedUntilNs);
        QSignalSpy range(&w, &MainWindow::rangeShown);
        w.timeline()->setViewRange(a, b);
        ASSERT_TRUE(range.wait(60000));
        const Timeline& tl = *w.snapshot().timeline;
        EXPECT_TRUE(tl.isRange());
        EXPECT_TRUE(tl.limited);
        EXPECT_LE(tl.loadedFromNs, a);
        EXPECT_GE(tl.loadedUntilNs, b);
        EXPECT_LE(tl.eventCount, windowEventLimit());
        EXPECT_EQ(tl.t0, whole->t0);
        EXPECT_EQ(tl.totalEvents, whole->eventCount);
        // The view stayed where the user put it, and the detail is the whole trace's there.
        EXPECT_EQ(w.timeline()->viewStart(), a);
        EXPECT_EQ(w.timeline()->viewEnd(), b);
        size_t inWhole = 0, inRange = 0;
        for (const Allocation& x : whole->allocations)
            inWhole += x.allocTsNs >= tl.loadedFromNs && x.allocTsNs <= tl.loadedUntilNs;
        for (const Allocation& x : tl.allocations)
            inRange += !x.beforeLoaded && x.allocTsNs >= tl.loadedFromNs &&
                       x.allocTsNs <= tl.loadedUntilNs;
        EXPECT_EQ(inRange, inWhole);
        EXPECT_GT(inRange, 1000u);
        EXPECT_TRUE(w.statusText().contains(QStringLiteral("Detail: ")))
            << w.statusText().toStdString();
        // In human units: "6.80 s – 7.21 s".
        EXPECT_TRUE(w.statusText().contains(QStringLiteral(" s – "))) << w.statusText().toStdString();
        EXPECT_TRUE(w.statusText().contains(QStringLiteral("from earlier blocks")))
            << w.statusText().toStdString();
        // The details pane counts the loaded part as such, not as the trace's totals.
        const QString summary = w.details()->toPlainText();
        EXPECT_TRUE(summary.contains(
            QStringLiteral("%L1 of %L2 loaded").arg(tl.eventCount).arg(tl.totalEvents)))
            << summary.toStdString();
        EXPECT_FALSE(summary.contains(QStringLiteral("never freed"))) << summary.toStdString();
        // Zoomed out a little, the loaded range no longer covers the view: before and after it
        // are shaded, with the overview.
        w.timeline()->setViewRange(a - (b - a) * 4, b + (b - a) * 4);
        w.rangeLoader()->cancel();
        QApplication::processEvents();
        EXPECT_EQ(visibleOverlays(w), 2);
        EXPECT_TRUE(w.watermarks()->hasOverview());
        if (const char* d = std::getenv("POOLSCOPE_SCREENSHOT_DIR"))
            w.grab().save(QString::fromUtf8(d) + QStringLiteral("/range-load.png"));

        // A pan inside what is loaded loads nothing.
        const int64_t mid = (tl.loadedFromNs + tl.loadedUntilNs) / 2, q = (b - a) / 4;
        w.timeline()->setViewRange(mid - q, mid + q);
        EXPECT_FALSE(w.rangeLoader()->busy());
        // The whole trace keeps what is shown (the overview outside the loaded range).
        w.timeline()->setViewRange(whole->t0, whole->t1);
        EXPECT_FALSE(w.rangeLoader()->busy());
        EXPECT_TRUE(w.snapshot().timeline->isRange());
    }
    qunsetenv("POOLSCOPE_WINDOW_MAX_EVENTS");
}

TEST(RangeLoad, AnOutdatedLoadIsCancelledAndATooLargeRangeKeepsTheOverview) {
    const QString path = synth::syntheticTracePath(400000);
    const auto whole = synth::loadTimeline(path);
    ASSERT_TRUE(whole);
    qputenv("POOLSCOPE_WINDOW_MAX_EVENTS", "100000");
    {
        LimitedWindow lw(path);
        ASSERT_TRUE(lw.ok);
        MainWindow& w = lw.w;
        const int64_t span = whole->t1 - whole->t0;
        QSignalSpy range(&w, &MainWindow::rangeShown);
        // The user moves on before the first range has loaded: only the last view is loaded.
        QSignalSpy started(w.rangeLoader(), &RangeLoader::loading);
        w.timeline()->setViewRange(whole->t0 + span * 50 / 100, whole->t0 + span * 51 / 100);
        // Its load has started (not a fixed wait: on a loaded machine the rest delay may not
        // have passed yet, or much more than it).
        ASSERT_TRUE(started.wait(10000));
        const int64_t a = whole->t0 + span * 85 / 100, b = whole->t0 + span * 86 / 100;
        w.timeline()->setViewRange(a, b);
        ASSERT_TRUE(range.wait(60000));
        QTest::qWait(200);
        EXPECT_EQ(range.count(), 1);
        const Timeline& tl = *w.snapshot().timeline;
        EXPECT_LE(tl.loadedFromNs, a);
        EXPECT_GE(tl.loadedUntilNs, b);
        // 40 % of the trace (160,000 events) is more than the window holds: said, not loaded.
        const auto before = w.snapshot().timeline;
        w.timeline()->setViewRange(whole->t0 + span * 10 / 100, whole->t0 + span * 50 / 100);
        for (int i = 0; i < 600 && w.rangeLoader()->busy(); ++i) QTest::qWait(50);
        EXPECT_FALSE(w.rangeLoader()->busy());
        EXPECT_EQ(w.snapshot().timeline, before);
        EXPECT_TRUE(w.statusText().contains(QStringLiteral("more than the window holds")))
            << w.statusText().toStdString();
    }
    qunsetenv("POOLSCOPE_WINDOW_MAX_EVENTS");
}

// A trace over the limit opens with a shorter beginning (POOLSCOPE_WINDOW_FIRST_EVENTS, here
// 100,000 of a 200,000-event limit): its first frame, a partial timeline, shows the whole trace
// with the rest drawn from the summaries; a view the user zooms to while the beginning loads is
// read by range as soon as that load ends, without another move, and its detail is the whole
// build's there.
TEST(RangeLoad, ATraceOverTheLimitOpensWithAShortBeginningAndLoadsAViewZoomedMeanwhile) {
    const QString path = synth::syntheticTracePath(400000);
    const auto whole = synth::loadTimeline(path);
    ASSERT_TRUE(whole);
    ASSERT_GT(whole->eventCount, 300000u);
    qputenv("POOLSCOPE_WINDOW_MAX_EVENTS", "200000");
    qputenv("POOLSCOPE_WINDOW_FIRST_EVENTS", "100000");
    EXPECT_EQ(windowFirstLoadEvents(), 100000u);
    {
        MainWindow w;
        w.resize(1400, 900);
        w.show();
        w.loader()->setPartialAfter(std::chrono::milliseconds(0)); // after the first chunk
        w.rangeLoader()->setDelay(20);
        const int64_t span = whole->t1 - whole->t0;
        const int64_t a = whole->t0 + span * 70 / 100, b = whole->t0 + span * 72 / 100;
        bool partialWhole = false, partialOverview = false;
        uint64_t partialEvents = 0;
        QObject::connect(&w, &MainWindow::partialShown, [&] {
            partialEvents = w.snapshot().timeline->eventCount;
            partialWhole = w.timeline()->viewStart() <= whole->t0 &&
                           w.timeline()->viewEnd() >= whole->t1;
            partialOverview = w.watermarks()->hasOverview();
            w.timeline()->setViewRange(a, b);
        });
        QSignalSpy shown(&w, &MainWindow::snapshotShown);
        QSignalSpy range(&w, &MainWindow::rangeShown);
        w.openFile(path);
        ASSERT_TRUE(shown.wait(60000));
        EXPECT_GT(partialEvents, 0u);
        EXPECT_LT(partialEvents, 100000u);
        EXPECT_TRUE(partialWhole);
        EXPECT_TRUE(partialOverview);
        {
            const Timeline& first = *w.snapshot().timeline;
            EXPECT_TRUE(first.limited);
            EXPECT_FALSE(first.isRange());
            EXPECT_GE(first.eventCount, 100000u);
            EXPECT_LT(first.eventCount, 100000u + 4096u); // the first load, not the limit
            EXPECT_EQ(first.totalEvents, whole->eventCount);
            EXPECT_LT(first.loadedUntilNs, a);
            EXPECT_TRUE(w.statusText().contains(QStringLiteral("zoom in")))
                << w.statusText().toStdString();
        }
        ASSERT_TRUE(range.count() > 0 || range.wait(60000));
        const Timeline& tl = *w.snapshot().timeline;
        EXPECT_TRUE(tl.isRange());
        EXPECT_LE(tl.loadedFromNs, a);
        EXPECT_GE(tl.loadedUntilNs, b);
        EXPECT_LE(tl.eventCount, 200000u);
        EXPECT_EQ(w.timeline()->viewStart(), a);
        EXPECT_EQ(w.timeline()->viewEnd(), b);
        size_t inWhole = 0, inRange = 0;
        for (const Allocation& x : whole->allocations)
            inWhole += x.allocTsNs >= tl.loadedFromNs && x.allocTsNs <= tl.loadedUntilNs;
        for (const Allocation& x : tl.allocations)
            inRange += !x.beforeLoaded && x.allocTsNs >= tl.loadedFromNs &&
                       x.allocTsNs <= tl.loadedUntilNs;
        EXPECT_EQ(inRange, inWhole);
        EXPECT_GT(inRange, 1000u);
    }
    qunsetenv("POOLSCOPE_WINDOW_FIRST_EVENTS");
    qunsetenv("POOLSCOPE_WINDOW_MAX_EVENTS");
}

// A trace written with pool_block_summary is first drawn from those blocks (its partial's
// overview), then from the per-chunk rows (the loaded snapshot's), whose scan the snapshot
// hands to the range reads; one without the table (written before it, made here by dropping
// it) is drawn from the per-chunk rows from the first frame, as before, with the same final
// overview and no damage reported.
TEST(RangeLoad, ATraceWithBlockSummariesIsFirstDrawnFromThemThenFromItsChunks) {
    const QString path = synth::syntheticTracePath(400000);
    QTemporaryDir dir;
    const QString old = dir.filePath(QStringLiteral("without-blocks.poolscope"));
    ASSERT_TRUE(QFile::copy(path, old));
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(old.toStdString().c_str(), &db), SQLITE_OK);
        EXPECT_EQ(sqlite3_exec(db, "DROP TABLE pool_block_summary", nullptr, nullptr, nullptr),
                  SQLITE_OK);
        sqlite3_close(db);
    }
    qputenv("POOLSCOPE_WINDOW_MAX_EVENTS", "100000");
    struct Seen {
        std::shared_ptr<const view::Overview> partial, loaded;
        bool scan = false;
        QStringList damage;
    };
    auto load = [](const QString& p) {
        Seen s;
        TraceLoadOptions o;
        o.shortFirstLoad = true;
        o.partialAfter = std::chrono::milliseconds(0);
        o.onPartial = [&](const TraceSnapshot& part) {
            if (!s.partial) s.partial = part.overview;
        };
        std::atomic<bool> cancel{false};
        TraceLoadResult r = loadTraceFile(p, cancel, o);
        EXPECT_TRUE(r.error.isEmpty()) << r.error.toStdString();
        s.loaded = r.snap.overview;
        s.scan = r.snap.scan != nullptr;
        s.damage = r.snap.damage;
        return s;
    };
    const Seen blocks = load(path), chunks = load(old);
    qunsetenv("POOLSCOPE_WINDOW_MAX_EVENTS");
    ASSERT_TRUE(blocks.partial && blocks.loaded && chunks.partial && chunks.loaded);
    EXPECT_NE(blocks.partial, blocks.loaded); // the draft, replaced
    EXPECT_EQ(chunks.partial, chunks.loaded); // one overview from the first frame on
    EXPECT_TRUE(blocks.scan);
    EXPECT_TRUE(chunks.scan);
    EXPECT_TRUE(blocks.damage.isEmpty()) << blocks.damage.join('\n').toStdString();
    EXPECT_TRUE(chunks.damage.isEmpty()) << chunks.damage.join('\n').toStdString();
    // The draft has the trace's peaks, and the loaded overview is the one without the table.
    ASSERT_EQ(blocks.partial->pools(), chunks.loaded->pools());
    ASSERT_FALSE(chunks.loaded->pools().empty());
    for (uint64_t pool : chunks.loaded->pools()) {
        auto d = blocks.partial->whole(pool), l = blocks.loaded->whole(pool),
             c = chunks.loaded->whole(pool);
        ASSERT_TRUE(d && l && c);
        EXPECT_EQ(d->reservedMax, c->reservedMax);
        EXPECT_EQ(d->usedMax, c->usedMax);
        EXPECT_EQ(blocks.loaded->levelCount(pool), chunks.loaded->levelCount(pool));
        EXPECT_GT(chunks.loaded->levelCount(pool), blocks.partial->levelCount(pool));
    }
}

// File > Export Visible Stretch to Perfetto…: the stretch the timeline shows, past what the
// window loaded, written as `export --from --to` writes it, in the background; the status bar
// says what was written. The file is Perfetto JSON whose entries lie in the stretch.
TEST(RangeLoad, TheVisibleStretchExportsToPerfetto) {
    const QString path = synth::syntheticTracePath(400000);
    QTemporaryDir dir;
    const QString out = dir.filePath("stretch.json");
    qputenv("POOLSCOPE_EXPORT_TO", out.toUtf8());
    qputenv("POOLSCOPE_WINDOW_MAX_EVENTS", "100000");
    {
        LimitedWindow lw(path);
        ASSERT_TRUE(lw.ok);
        MainWindow& w = lw.w;
        const Timeline& first = *w.snapshot().timeline;
        const int64_t t0 = first.t0, span = first.t1 - first.t0;
        const int64_t a = t0 + span * 60 / 100, b = t0 + span * 61 / 100;
        ASSERT_GT(a, first.loadedUntilNs);
        w.timeline()->setViewRange(a, b);
        QSignalSpy done(w.stretchExporter(), &StretchExporter::finished);
        QSignalSpy failed(w.stretchExporter(), &StretchExporter::failed);
        QAction* act = w.findChild<QAction*>(QStringLiteral("exportStretch"));
        ASSERT_TRUE(act);
        act->trigger();
        ASSERT_TRUE(done.wait(60000)) << (failed.isEmpty() ? "no answer" : failed.first().first().toString().toStdString());
        EXPECT_TRUE(w.statusText().contains(QStringLiteral("Wrote stretch.json"))) << w.statusText().toStdString();
        // To look at (docs/screenshots/export-stretch.png is one such run).
        if (const QString shots = qEnvironmentVariable("POOLSCOPE_SCREENSHOT_DIR"); !shots.isEmpty()) {
            QTest::qWait(300);
            w.grab().save(shots + QStringLiteral("/export-stretch.png"));
        }
        QFile f(out);
        ASSERT_TRUE(f.open(QIODevice::ReadOnly));
        const auto doc = nlohmann::json::parse(f.readAll().toStdString());
        size_t slices = 0, counters = 0;
        const double from = double(a - t0) / 1000.0, to = double(b - t0) / 1000.0;
        for (const auto& e : doc["traceEvents"]) {
            if (e["ph"] == "M" || e.value("cat", "") == "call") continue;
            EXPECT_GE(e["ts"].get<double>(), from - 0.001) << e.dump();
            EXPECT_LE(e["ts"].get<double>(), to + 0.001) << e.dump();
            slices += e["ph"] == "X";
            counters += e["ph"] == "C";
        }
        EXPECT_GT(slices, 100u);
        EXPECT_GT(counters, 100u);
    }
    qunsetenv("POOLSCOPE_EXPORT_TO");
    qunsetenv("POOLSCOPE_WINDOW_MAX_EVENTS");
}

// The same action while an export runs reads "Cancel the Stretch Export" and stops it: nothing is
// left on disk, the action reads as before, the status bar says so.
TEST(RangeLoad, AStretchExportCanBeCancelled) {
    const QString path = synth::syntheticTracePath(400000);
    QTemporaryDir dir;
    const QString out = dir.filePath("cancelled.json");
    qputenv("POOLSCOPE_EXPORT_TO", out.toUtf8());
    {
        LimitedWindow lw(path); // (not limited here: the trace fits the window)
        ASSERT_TRUE(lw.ok);
        MainWindow& w = lw.w;
        QAction* act = w.findChild<QAction*>(QStringLiteral("exportStretch"));
        ASSERT_TRUE(act);
        const QString idle = act->text();
        QSignalSpy cancelled(w.stretchExporter(), &StretchExporter::cancelled);
        QSignalSpy finished(w.stretchExporter(), &StretchExporter::finished);
        act->trigger();
        EXPECT_TRUE(act->text().contains(QStringLiteral("Cancel")));
        act->trigger(); // at once: the worker has not reached its first chunk
        ASSERT_TRUE(cancelled.wait(60000)) << "finished instead: " << finished.size();
        EXPECT_TRUE(finished.isEmpty());
        EXPECT_FALSE(QFile::exists(out)) << "a cancelled export leaves no file";
        EXPECT_EQ(act->text(), idle);
        EXPECT_TRUE(w.statusText().contains(QStringLiteral("cancelled"))) << w.statusText().toStdString();
    }
    qunsetenv("POOLSCOPE_EXPORT_TO");
}
