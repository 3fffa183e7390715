// The watermark plot with many pools (issue #12: closing a trace with 1,000 pools and 100 k
// samples took 62 s, in QCPLegend::removeItem). Times, offscreen: showing the trace in the plot,
// one replot, and clearing it (what closing or replacing the trace does).
// Usage: poolscope_bench_many_pools [--pools N] [--samples N] [--runs N]
#include "SyntheticTrace.h"
#include "WatermarkPlot.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "qcustomplot.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace poolscope;
using namespace poolscope::ui;

int main(int argc, char** argv) {
    uint32_t pools = 1000;
    uint64_t samples = 100000;
    int runs = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--pools")) pools = uint32_t(std::stoul(argv[i + 1]));
        else if (!std::strcmp(argv[i], "--samples")) samples = std::stoull(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--runs")) runs = std::max(1, std::atoi(argv[i + 1]));
    }
    setenv("QT_QPA_PLATFORM", "offscreen", 1);
    QApplication app(argc, argv);
    QTemporaryDir dir;
    const std::string path = dir.filePath("many-pools.poolscope").toStdString();
    if (Status st = synth::writeManyPoolsTrace(path, pools, samples); !st) {
        std::fprintf(stderr, "generation failed: %s\n", st.error().message.c_str());
        return 1;
    }
    auto reader = TraceReader::open(path);
    auto tl = reader ? buildTimeline(**reader) : Result<std::shared_ptr<const Timeline>>(reader.error());
    if (!tl) {
        std::fprintf(stderr, "load failed: %s\n", tl.error().message.c_str());
        return 1;
    }
    const TraceSnapshot snap = TraceSnapshot::fromTimeline(*tl, QStringLiteral("many pools"));
    std::printf("%u pools, %llu samples, %d runs (ms: show / replot / clear)\n", pools,
                (unsigned long long)samples, runs);
    for (int r = 0; r < runs; ++r) {
        WatermarkPlot plot;
        plot.resize(1600, 400);
        plot.show();
        QApplication::processEvents();
        QElapsedTimer t;
        t.start();
        plot.setSnapshot(snap);
        const double show = t.nsecsElapsed() / 1e6;
        t.restart();
        plot.plot()->replot(QCustomPlot::rpImmediateRefresh);
        const double replot = t.nsecsElapsed() / 1e6;
        t.restart();
        plot.setSnapshot(TraceSnapshot{});
        const double clear = t.nsecsElapsed() / 1e6;
        std::printf("run %d: %9.1f %9.1f %9.1f   (%d graphs)\n", r + 1, show, replot, clear,
                    5 * int(pools));
    }
    return 0;
}
