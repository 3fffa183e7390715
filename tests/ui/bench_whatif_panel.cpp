// The What-if panel's responsiveness (issue #14: under 100 ms from a control change to the
// redrawn curve on a 1 M-event trace), offscreen, on a generated trace (synthetic, never a
// recording). Prints:
//   - the model's first read of the trace (the tape) once the panel is shown;
//   - per slider step: control change -> the panel's numbers shown and the plot replotted with
//     the new curve (wall), and the model's own time on its worker (wall and CPU; the
//     opportunistic lower bound, asked after the curve is shown, is not in these);
//   - a 60 Hz drag over the slider: how many predictions ran for how many moves, and the time
//     from the last move to its curve on screen.
// Usage: poolscope_bench_whatif_panel [--events N] [--trace PATH] [--moves K]
#include "MainWindow.h"
#include "SyntheticTrace.h"
#include "WatermarkPlot.h"
#include "WhatIfPanel.h"
#include "qcustomplot.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QSignalSpy>
#include <QSlider>
#include <QTest>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace poolscope;
using namespace poolscope::ui;

static void initResources() {
    Q_INIT_RESOURCE(poolscope);
}

namespace {

struct Stats {
    double median = 0, p90 = 0, max = 0;
};
Stats stats(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    if (v.empty()) return {};
    return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 9 / 10)], v.back()};
}

// Waits for the prediction of the controls as they are now.
bool waitShown(WhatIfPanel* p, int ms = 60000) {
    QElapsedTimer t;
    t.start();
    while (p->busy() || !p->prediction()) {
        if (t.elapsed() > ms) return false;
        QApplication::processEvents(QEventLoop::AllEvents, 5);
    }
    return true;
}

} // namespace

int main(int argc, char** argv) {
    uint64_t events = 1'000'000;
    std::string trace;
    int moves = 30;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--events") && i + 1 < argc)
            events = std::stoull(argv[++i]);
        else if (!std::strcmp(argv[i], "--trace") && i + 1 < argc)
            trace = argv[++i];
        else if (!std::strcmp(argv[i], "--moves") && i + 1 < argc)
            moves = std::max(2, std::atoi(argv[++i]));
    }
    if (trace.empty()) trace = "/tmp/poolscope-bench-gui-" + std::to_string(events) + ".poolscope";
    if (!QFile::exists(QString::fromStdString(trace))) {
        std::printf("generating %s (%llu events)...\n", trace.c_str(), (unsigned long long)events);
        std::fflush(stdout);
        synth::SyntheticOptions o;
        o.events = events;
        Status st = synth::writeSyntheticTrace(trace, o);
        if (!st.ok()) {
            std::fprintf(stderr, "generation failed: %s\n", st.error().message.c_str());
            return 1;
        }
    }
    setenv("QT_QPA_PLATFORM", "offscreen", 1);
    QApplication app(argc, argv);
    initResources();
    QApplication::setOrganizationName("PoolScopeBench");

    MainWindow w;
    w.resize(1600, 1000);
    w.show();
    QSignalSpy shown(&w, &MainWindow::snapshotShown);
    w.openFile(QString::fromStdString(trace));
    if (!shown.wait(600000)) {
        std::fprintf(stderr, "load did not finish\n");
        return 1;
    }
    WhatIfPanel* p = w.whatIf();
    QElapsedTimer t;
    t.start();
    w.showWhatIf();
    if (!waitShown(p, 600000)) {
        std::fprintf(stderr, "the panel did not answer\n");
        return 1;
    }
    const double firstMs = t.nsecsElapsed() / 1e6;
    const whatif::Tape& tape = *p->tape();
    std::printf("\ntrace: %s\nevents: %llu  model inputs (tape): %zu ops, %.1f MiB  pool: %s\n",
                trace.c_str(), (unsigned long long)w.snapshot().timeline->eventCount,
                tape.ops.size(), double(tape.bytes()) / (1 << 20),
                qPrintable(p->poolBox()->currentText()));
    std::printf("panel shown -> tape read, advisor answered, first curve on screen: %.0f ms\n\n",
                firstMs);

    QSlider* sl = p->thresholdSlider();
    QCustomPlot* plot = w.watermarks()->plot();
    std::vector<double> latency, modelWall, modelCpu;
    for (int i = 0; i < moves; ++i) {
        // Every position in turn, max included: each move changes the answer.
        const int pos = (sl->value() + 1 + i % 3) % (sl->maximum() + 1);
        QSignalSpy answered(p, &WhatIfPanel::predictionShown);
        t.restart();
        sl->setValue(pos);
        if (!answered.wait(60000)) {
            std::fprintf(stderr, "no answer for move %d\n", i);
            return 1;
        }
        plot->replot(QCustomPlot::rpImmediateRefresh);
        latency.push_back(t.nsecsElapsed() / 1e6);
        modelWall.push_back(p->lastModelMs());
        modelCpu.push_back(p->lastModelCpuMs());
        // The opportunistic lower bound follows on the worker: each move is timed alone.
        waitShown(p);
    }
    const Stats l = stats(latency), mw = stats(modelWall), mc = stats(modelCpu);
    std::printf("%-58s %8s %8s %8s\n", "per slider step (ms)", "median", "p90", "max");
    std::printf("%-58s %8.1f %8.1f %8.1f\n", "control change -> numbers and curve on screen (wall)",
                l.median, l.p90, l.max);
    std::printf("%-58s %8.1f %8.1f %8.1f\n", "  of which the model on its worker (wall)", mw.median,
                mw.p90, mw.max);
    std::printf("%-58s %8.1f %8.1f %8.1f\n", "  the model's CPU time", mc.median, mc.p90, mc.max);

    // A drag: one move every 16 ms for a second, the event loop running between moves.
    const int before = p->predictionsStarted();
    int dragMoves = 0;
    QElapsedTimer drag;
    drag.start();
    while (drag.elapsed() < 1000) {
        sl->setValue((sl->value() + 1) % (sl->maximum() + 1));
        ++dragMoves;
        const qint64 next = drag.elapsed() + 16;
        while (drag.elapsed() < next) QApplication::processEvents(QEventLoop::AllEvents, 2);
    }
    t.restart();
    {
        QSignalSpy answered(p, &WhatIfPanel::predictionShown);
        if (!answered.wait(60000)) return 1;
    }
    plot->replot(QCustomPlot::rpImmediateRefresh);
    std::printf("\n60 Hz drag for 1 s: %d moves, %d predictions run; last move -> its curve on "
                "screen: %.1f ms\n",
                dragMoves, p->predictionsStarted() - before, t.nsecsElapsed() / 1e6);
    return 0;
}
