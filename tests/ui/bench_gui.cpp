// GUI benchmark, offscreen, on a generated trace (10M events by default):
//   open -> first frame with data (the partial timeline of a progressive load), open -> the
//   whole timeline on screen, pan/zoom redraw times at several zoom levels, memory vs event data.
// Usage: poolscope_bench_gui [--events N] [--trace PATH] [--no-partial] [--load-only]
//                            [--levels 1,0.1,...] [--frames N] [--partial-screenshot PNG]
//                            [--zoom-at-first-frame FRACTION [--zoom-again]]
//   (the trace is generated if missing; --no-partial loads without a partial timeline, as
//   before progressive loading; --load-only stops after the load figures; --zoom-at-first-frame
//   zooms, at the first frame with data, to that fraction of the trace around its middle and
//   times open -> that view's detail on screen, for a trace larger than the window holds)
#include "MainWindow.h"
#include "SyntheticTrace.h"
#include "TimelineWidget.h"
#include "TraceLoader.h"
#include "WatermarkPlot.h"
#include "poolscope/Units.h"
#include "qcustomplot.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QSignalSpy>
#include <QTest>
#include <QTimer>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

using namespace poolscope;
using namespace poolscope::ui;

static void initResources() {
    Q_INIT_RESOURCE(poolscope);
}

namespace {

long statusKiB(const char* key) {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::strlen(key)));
    return 0;
}

double ms(qint64 ns) {
    return double(ns) / 1e6;
}

// CPU time of this thread: on a shared, loaded machine wall time mostly measures the others.
double cpuMs() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// CPU time of the whole process (the loader's threads included).
double processCpuMs() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct Stats {
    double median = 0, p95 = 0, max = 0;
};
Stats stats(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    if (v.empty()) return {};
    return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 95 / 100)], v.back()};
}

} // namespace

int main(int argc, char** argv) {
    uint64_t events = 10'000'000;
    std::string trace, partialShot; // --partial-screenshot: the window at the partial timeline
    bool partial = true, loadOnly = false;
    std::vector<double> levels{1.0, 0.1, 0.01, 1e-3, 1e-4, 1e-5, 1e-6};
    int frames = 30;
    double zoomAtFirst = 0; // --zoom-at-first-frame
    bool zoomAgain = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--events") && i + 1 < argc)
            events = std::stoull(argv[++i]);
        else if (!std::strcmp(argv[i], "--trace") && i + 1 < argc)
            trace = argv[++i];
        else if (!std::strcmp(argv[i], "--partial-screenshot") && i + 1 < argc)
            partialShot = argv[++i];
        else if (!std::strcmp(argv[i], "--no-partial"))
            partial = false;
        else if (!std::strcmp(argv[i], "--load-only"))
            loadOnly = true;
        else if (!std::strcmp(argv[i], "--zoom-at-first-frame") && i + 1 < argc)
            zoomAtFirst = std::atof(argv[++i]);
        else if (!std::strcmp(argv[i], "--zoom-again"))
            zoomAgain = true;
        else if (!std::strcmp(argv[i], "--frames") && i + 1 < argc)
            frames = std::max(1, std::atoi(argv[++i]));
        else if (!std::strcmp(argv[i], "--levels") && i + 1 < argc) {
            // Visible spans as fractions of the trace, e.g. "1,0.1" (profiling one level).
            levels.clear();
            for (const QString& f : QString::fromUtf8(argv[++i]).split(QLatin1Char(',')))
                levels.push_back(f.toDouble());
        }
    }
    if (trace.empty()) trace = "/tmp/poolscope-bench-gui-" + std::to_string(events) + ".poolscope";
    if (!QFile::exists(QString::fromStdString(trace))) {
        std::printf("generating %s (%llu events)...\n", trace.c_str(), (unsigned long long)events);
        std::fflush(stdout);
        QElapsedTimer g;
        g.start();
        synth::SyntheticOptions o;
        o.events = events;
        Status st = synth::writeSyntheticTrace(trace, o);
        if (!st.ok()) {
            std::fprintf(stderr, "generation failed: %s\n", st.error().message.c_str());
            return 1;
        }
        std::printf("generated in %.1f s\n", g.elapsed() / 1000.0);
    }
    setenv("QT_QPA_PLATFORM", "offscreen", 1);
    QApplication app(argc, argv);
    initResources();
    QApplication::setOrganizationName("PoolScopeBench");
    const long rss0 = statusKiB("VmRSS:");

    MainWindow w;
    w.resize(1600, 1000);
    w.show();
    QApplication::processEvents();
    if (!partial) w.loader()->setPartialAfter(std::chrono::milliseconds(-1));
    // Each figure is taken where the window first has it on screen: a signal, then a synchronous
    // paint of the timeline and the plot (offscreen, nothing else would paint them in a
    // benchmark that does not return to the event loop at once).
    qint64 partialNs = -1, partialFrameNs = -1;
    uint64_t partialEvents = 0, partialAllocs = 0;
    double partialCpuMs = 0;
    QElapsedTimer t;
    QObject::connect(&w, &MainWindow::partialShown, [&] {
        partialNs = t.nsecsElapsed();
        const double c = cpuMs();
        w.timeline()->repaint();
        w.watermarks()->plot()->replot(QCustomPlot::rpImmediateRefresh);
        partialFrameNs = t.nsecsElapsed();
        partialCpuMs = cpuMs() - c;
        partialEvents = w.snapshot().timeline->eventCount;
        partialAllocs = w.snapshot().timeline->allocations.size();
        // After the figures: the whole trace in view (most of it not loaded yet: the plot
        // draws it from the summaries), grabbed as the user sees it.
        if (!partialShot.empty()) {
            const Timeline& tl = *w.snapshot().timeline;
            w.timeline()->setViewRange(tl.t0, tl.t1);
            QApplication::processEvents();
            w.grab().save(QString::fromStdString(partialShot));
        }
    });
    // The user's move at the first frame with data (the partial's, else the whole load's).
    bool zoomed = false;
    int64_t zoomA = 0, zoomB = 0;
    auto zoomNow = [&] {
        if (zoomed || zoomAtFirst <= 0 || !w.snapshot().valid()) return;
        zoomed = true;
        const Timeline& z = *w.snapshot().timeline;
        const int64_t mid = z.t0 + (z.t1 - z.t0) / 2;
        const int64_t half = std::max<int64_t>(1, int64_t(double(z.t1 - z.t0) * zoomAtFirst / 2));
        zoomA = mid - half;
        zoomB = mid + half;
        w.timeline()->setViewRange(zoomA, zoomB);
    };
    QObject::connect(&w, &MainWindow::partialShown, zoomNow);
    // How long the window's event loop went without answering while it loaded: a click or a
    // key waits at most about that long (a 5 ms timer; its longest gap).
    QElapsedTimer gap;
    qint64 maxGapNs = 0;
    QTimer beat;
    beat.setInterval(5);
    QObject::connect(&beat, &QTimer::timeout, [&] {
        maxGapNs = std::max(maxGapNs, gap.nsecsElapsed());
        gap.restart();
    });
    QSignalSpy shown(&w, &MainWindow::snapshotShown);
    QSignalSpy rangeShown(&w, &MainWindow::rangeShown);
    const double cpu0 = processCpuMs();
    t.start();
    gap.start();
    beat.start();
    w.openFile(QString::fromStdString(trace));
    if (!shown.wait(600000)) {
        std::fprintf(stderr, "load did not finish\n");
        return 1;
    }
    const qint64 loadedNs = t.nsecsElapsed();
    w.timeline()->repaint();
    w.watermarks()->plot()->replot(QCustomPlot::rpImmediateRefresh);
    const qint64 firstFrameNs = t.nsecsElapsed();
    const double loadCpu = processCpuMs() - cpu0;
    const qint64 firstPaintNs = w.timeline()->lastPaintNs();
    zoomNow(); // no partial was shown
    qint64 detailNs = -1;
    if (zoomed) {
        // The zoomed view's detail: loaded by range once the beginning is (or at once, for a
        // trace the window holds whole).
        const Timeline& z = *w.snapshot().timeline;
        if (z.limited && !(z.loadedFromNs <= zoomA && z.loadedUntilNs >= zoomB) &&
            (rangeShown.count() > 0 || rangeShown.wait(600000)))
            QApplication::processEvents();
        w.timeline()->repaint();
        w.watermarks()->plot()->replot(QCustomPlot::rpImmediateRefresh);
        detailNs = t.nsecsElapsed();
    }
    beat.stop();
    // --zoom-again: then the same span at a quarter of the trace, a second range built while
    // the first is held (the window's peak memory with two ranges).
    qint64 againNs = -1;
    // The first zoom's figures, before a second replaces its timeline.
    uint64_t zoomEvents = 0;
    double zoomFrom = 0, zoomUntil = 0;
    bool zoomRange = false;
    if (zoomed) {
        const Timeline& z = *w.snapshot().timeline;
        const double span = double(std::max<int64_t>(1, z.t1 - z.t0));
        zoomEvents = z.eventCount;
        zoomFrom = 100.0 * double(z.loadedFromNs - z.t0) / span;
        zoomUntil = 100.0 * double(z.loadedUntilNs - z.t0) / span;
        zoomRange = z.isRange();
    }
    if (zoomed && zoomAgain) {
        const Timeline& z = *w.snapshot().timeline;
        const int64_t half = (zoomB - zoomA) / 2, at = z.t0 + (z.t1 - z.t0) / 4;
        QElapsedTimer a;
        a.start();
        const int before = rangeShown.count();
        w.timeline()->setViewRange(at - half, at + half);
        while (rangeShown.count() == before && rangeShown.wait(600000)) {
        }
        againNs = a.nsecsElapsed();
    }
    const Timeline& tl = *w.snapshot().timeline;
    const long rssLoaded = statusKiB("VmRSS:"), hwmLoaded = statusKiB("VmHWM:");

    std::printf("\ntrace: %s\nevents: %llu  allocations: %zu  markers: %zu  edges: %zu  lanes: %zu "
                " rows: %zu\n",
                trace.c_str(), (unsigned long long)tl.eventCount, tl.allocations.size(),
                tl.markers.size(), tl.edges.size(), w.snapshot().layout->lanes.size(),
                w.snapshot().layout->rows.size());
    if (partialNs >= 0) {
        std::printf("open -> partial timeline on screen (%llu events = %.1f %%, %llu allocations): "
                    "%.0f ms\n",
                    (unsigned long long)partialEvents,
                    100.0 * double(partialEvents) / double(tl.eventCount),
                    (unsigned long long)partialAllocs, ms(partialNs));
        std::printf("partial frame painted (timeline + plot): %.1f ms wall, %.1f ms CPU\n",
                    ms(partialFrameNs - partialNs), partialCpuMs);
        std::printf("open -> first frame with data (partial): %.0f ms\n", ms(partialFrameNs));
    } else {
        std::printf("no partial timeline (%s)\n",
                    partial ? "the whole trace was read before one was due" : "--no-partial");
    }
    std::printf(
        "open -> whole timeline ready (read + rebuild + lane layout, background): %.0f ms\n",
        ms(loadedNs));
    std::printf("whole timeline ready -> frame painted (timeline + plot): %.1f ms (timeline paint "
                "%.1f ms)\n",
                ms(firstFrameNs - loadedNs), ms(firstPaintNs));
    std::printf("open -> frame of the whole timeline: %.0f ms\n", ms(firstFrameNs));
    std::printf("open -> %s: %.0f ms\n", partialNs >= 0 ? "first frame with data" : "first frame",
                ms(partialNs >= 0 ? partialFrameNs : firstFrameNs));
    std::printf("CPU time of the whole process during the load (all threads): %.0f ms\n", loadCpu);
    if (zoomed)
        std::printf("zoomed at the first frame to %g of the trace: open -> its detail on screen: "
                    "%.0f ms (%s, %llu events loaded, %.1f %%-%.1f %% of the trace)\n",
                    zoomAtFirst, ms(detailNs), zoomRange ? "range" : "prefix",
                    (unsigned long long)zoomEvents, zoomFrom, zoomUntil);
    if (againNs >= 0) {
        const Timeline& z = *w.snapshot().timeline;
        std::printf("zoomed again to the same span at a quarter of the trace: its detail in %.0f "
                    "ms (%llu events loaded); peak RSS so far %.0f MiB\n",
                    ms(againNs), (unsigned long long)z.eventCount, statusKiB("VmHWM:") / 1024.0);
    }
    std::printf("longest the event loop did not answer (5 ms timer) until then: %.0f ms\n",
                ms(maxGapNs));
    if (loadOnly) {
        const double eventData = double(tl.eventCount) * sizeof(Event) / 1048576.0;
        std::printf("memory: RSS before open %.0f MiB, after load %.0f MiB (%.2fx the event data "
                    "of %.0f MiB), peak %.0f MiB (%.2fx)\n",
                    rss0 / 1024.0, rssLoaded / 1024.0, (rssLoaded - rss0) / 1024.0 / eventData,
                    eventData, hwmLoaded / 1024.0, hwmLoaded / 1024.0 / eventData);
        return 0;
    }
    std::printf("\n");

    // Redraw: 30 frames (--frames) per zoom level and kind. A frame = setViewRange on the timeline (which
    // also refreshes the plot's data through the window's link) + a synchronous repaint of the
    // timeline + an immediate replot of the plot. "pan" frames move the view by 5-20 % of its
    // span (the timeline shifts its cached image and paints the exposed strip); "zoom" frames
    // alternate the span by 1.25x around the same centre (everything is repainted).
    std::printf("wall = elapsed time; cpu = this thread's CPU time (robust to a loaded machine)\n");
    std::printf(
        "plot = its data refresh (inside setViewRange) + replot; total = timeline + plot\n");
    std::printf("%-18s %-4s | %7s %7s | %7s %7s | %7s %7s %7s | %7s %7s | %s\n", "zoom (span)",
                "kind", "tl cpu", "tl wall", "pl cpu", "pl wall", "tot cpu", "tot wal", "tot p95",
                "bars", "merged", "timeline content");
    const int64_t span0 = tl.t1 - tl.t0;
    for (double frac : levels) {
        for (int zoom = 0; zoom < 2; ++zoom) {
            const int64_t span = std::max<int64_t>(1000, int64_t(double(span0) * frac));
            std::vector<double> tlCpu, tlWall, plCpu, plWall, totCpu, totWall;
            const int64_t start = tl.t0 + (span0 - span) / 3;
            PaintStats ps{};
            int full = 0, strip = 0;
            long stripPx = 0;
            // Start each series from a settled view.
            w.timeline()->setViewRange(start, start + span);
            w.timeline()->repaint();
            for (int i = 0; i < frames; ++i) {
                int64_t a = start, sp = span;
                if (zoom) {
                    sp = i % 2 ? span * 5 / 4 : span;
                    a = start + span / 2 - sp / 2;
                } else {
                    a = start + (i % 2 ? 1 : -1) * span / 20 * (i / 2 % 5);
                }
                QElapsedTimer f;
                f.start();
                double c = cpuMs();
                w.timeline()->setViewRange(a, a + sp); // also feeds the plot (downsampled range)
                const double setCpu = cpuMs() - c, setWall = ms(f.nsecsElapsed());
                f.restart();
                c = cpuMs();
                w.timeline()->repaint();
                const double tc = cpuMs() - c, tw = ms(f.nsecsElapsed());
                f.restart();
                c = cpuMs();
                w.watermarks()->plot()->replot(QCustomPlot::rpImmediateRefresh);
                const double pc = cpuMs() - c + setCpu, pw = ms(f.nsecsElapsed()) + setWall;
                tlCpu.push_back(tc);
                tlWall.push_back(tw);
                plCpu.push_back(pc);
                plWall.push_back(pw);
                totCpu.push_back(tc + pc);
                totWall.push_back(tw + pw);
                ps = w.timeline()->lastPaintStats();
                if (w.timeline()->lastContentPaint() == TimelineWidget::ContentPaint::Full) ++full;
                if (w.timeline()->lastContentPaint() == TimelineWidget::ContentPaint::Strip) {
                    ++strip;
                    stripPx += w.timeline()->lastStripWidth();
                }
            }
            char label[64];
            std::snprintf(label, sizeof label, "%g (%s)", frac,
                          QString::fromStdString(formatDuration(span)).toUtf8().constData());
            char content[96];
            std::snprintf(content, sizeof content, "%d full, %d strip (avg %ld px), %d cached",
                          full, strip, strip ? stripPx / strip : 0L, frames - full - strip);
            std::printf(
                "%-18s %-4s | %7.2f %7.2f | %7.2f %7.2f | %7.2f %7.2f %7.2f | %7llu %7llu | "
                "%s\n",
                label, zoom ? "zoom" : "pan", stats(tlCpu).median, stats(tlWall).median,
                stats(plCpu).median, stats(plWall).median, stats(totCpu).median,
                stats(totWall).median, stats(totWall).p95, (unsigned long long)ps.bars,
                (unsigned long long)ps.mergedRuns, content);
            std::fflush(stdout);
        }
    }
    QTest::qWait(2000); // let the events table's query of the visible range finish
    const long rssEnd = statusKiB("VmRSS:"), hwm = statusKiB("VmHWM:");
    const double eventData = double(tl.eventCount) * sizeof(Event) / 1048576.0;
    std::printf(
        "\nmemory: RSS before open %.0f MiB, after load %.0f MiB, at end %.0f MiB, peak %.0f MiB\n",
        rss0 / 1024.0, rssLoaded / 1024.0, rssEnd / 1024.0, hwm / 1024.0);
    std::printf("event data (events x %zu B): %.0f MiB; (RSS at end - before) / event data = %.2f; "
                "peak / event data = %.2f\n",
                sizeof(Event), eventData, (rssEnd - rss0) / 1024.0 / eventData,
                hwm / 1024.0 / eventData);
    return 0;
}
