// The live window against a real GPU program (issue #17), driven the way a user drives it: the
// Live menu's Launch... action opens the Launch dialog, the program, arguments and environment are
// typed into it and OK is pressed; the window attaches when the collector's socket appears. While
// the program runs the tool takes screenshots, presses the Knobs panel's "0" threshold preset (a
// knob change acknowledged by the driver), and after the program exits shows the saved trace.
//
// Event-to-screen latency: each live snapshot is painted at once (repaint), and the time from the
// newest event in it to the end of that paint is taken. The trace's times are CLOCK_MONOTONIC
// nanoseconds of this machine (collector/src/Clock.h), so the difference needs no clock mapping.
// Refreshes are counted only while the program runs and after its first allocation.
//
// Not a ctest test (it needs a GPU and a program): tests/gpu/live_window.sh runs it.
//   QT_QPA_PLATFORM=offscreen poolscope_live_window_gpu --out DIR --program P [--args "A B"]
//       [--env "K=V" ...] [--knob-after SECONDS] [--timeout SECONDS]
#include "LaunchDialog.h"
#include "KnobsPanel.h"
#include "LiveController.h"
#include "LiveSession.h"
#include "MainWindow.h"
#include "TimelineWidget.h"

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QCommandLineParser>
#include <QDir>
#include <QElapsedTimer>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <vector>

using namespace poolscope::ui;

namespace {

int64_t monoNowNs() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

QAction* findAction(QMenuBar* bar, const QString& text) {
    for (QAction* menu : bar->actions()) {
        if (!menu->menu()) continue;
        for (QAction* a : menu->menu()->actions())
            if (a->text().remove('&').startsWith(text)) return a;
    }
    return nullptr;
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t i = size_t(p * double(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

} // namespace

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QCommandLineParser parser;
    parser.addHelpOption();
    QCommandLineOption outOpt{"out", "Directory for screenshots.", "DIR"};
    QCommandLineOption programOpt{"program", "Program to launch.", "PROGRAM"};
    QCommandLineOption argsOpt{"args", "Its arguments, as one string.", "ARGS"};
    QCommandLineOption envOpt{"env", "An environment addition K=V (repeatable).", "K=V"};
    QCommandLineOption knobOpt{"knob-after",
                               "Seconds after the first allocation to press the threshold preset "
                               "\"0\".",
                               "SECONDS", "8"};
    QCommandLineOption timeoutOpt{"timeout", "Give up after SECONDS.", "SECONDS", "300"};
    parser.addOptions({outOpt, programOpt, argsOpt, envOpt, knobOpt, timeoutOpt});
    parser.process(app);
    if (!parser.isSet(outOpt) || !parser.isSet(programOpt)) {
        std::fprintf(stderr, "live_window_gpu: --out and --program are required\n");
        return 2;
    }
    const QString out = parser.value(outOpt);
    QDir().mkpath(out);
    const double knobAfterS = parser.value(knobOpt).toDouble();
    const int timeoutS = parser.value(timeoutOpt).toInt();

    MainWindow w;
    w.resize(1600, 1000);
    w.show();
    LiveController* live = installLiveSession(&w);

    auto shot = [&](const QString& name) {
        const QString path = out + "/" + name;
        bool ok = w.grab().toImage().save(path);
        std::printf("screenshot %s %s\n", qPrintable(path), ok ? "saved" : "FAILED");
    };

    int rc = 1;
    std::vector<double> latencyMs;
    int64_t firstAllocNs = 0;
    bool knobPressed = false, runningShot = false;
    QString knobStatus;
    QElapsedTimer clock;
    clock.start();

    // The dialog is modal: fill it from the event loop that exec() runs.
    QTimer::singleShot(500, &w, [&] {
        auto* d = qobject_cast<LaunchDialog*>(QApplication::activeModalWidget());
        if (!d) {
            std::fprintf(stderr, "live_window_gpu: the Launch dialog did not open\n");
            app.exit(1);
            return;
        }
        d->programEdit()->setText(parser.value(programOpt));
        d->argumentsEdit()->setText(parser.value(argsOpt));
        d->environmentEdit()->setPlainText(parser.values(envOpt).join('\n'));
        d->traceEdit()->setText(out + "/live.poolscope");
        d->listenBox()->setChecked(true);
        d->grab().toImage().save(out + "/live-launch-dialog.png");
        d->accept();
        if (d->isVisible())
            std::fprintf(stderr, "live_window_gpu: the dialog refused: %s\n",
                         qPrintable(d->errorLabel()->text()));
    });
    QTimer::singleShot(100, &w, [&] {
        QAction* launch = findAction(w.menuBar(), "Launch");
        if (!launch) {
            std::fprintf(stderr, "live_window_gpu: no Live > Launch... action\n");
            app.exit(1);
            return;
        }
        launch->trigger();
    });

    QObject::connect(live, &LiveController::attached, &w, [&](const QString& socket) {
        std::printf("attached %s after %.1f s\n", qPrintable(socket), clock.elapsed() / 1000.0);
    });
    QObject::connect(live->session(), &LiveSession::snapshotReady, &w,
                     [&](const TraceSnapshot& s) {
        if (!s.valid() || !live->session()->attached()) return;
        const auto& tl = *s.timeline;
        if (tl.eventCount == 0) return;
        if (tl.allocations.empty()) return;
        // The window's own slot ran first (connected earlier): paint what it now shows.
        w.timeline()->repaint();
        const int64_t now = monoNowNs();
        if (!firstAllocNs) firstAllocNs = now;
        latencyMs.push_back(double(now - tl.t1) / 1e6);
        const double sinceFirst = double(now - firstAllocNs) / 1e9;
        if (!runningShot && sinceFirst > knobAfterS / 2) {
            runningShot = true;
            shot("live-running.png");
        }
        // The Knobs panel lists the target's pools once the session has learnt them.
        if (!knobPressed && sinceFirst > knobAfterS && live->knobs()->poolBox()->count() > 0) {
            knobPressed = true;
            std::printf("pressing the threshold preset 0 on pool '%s'\n",
                        qPrintable(live->knobs()->poolBox()->currentText()));
            live->knobs()->presetZero()->click();
            QTimer::singleShot(4000, &w, [&] {
                knobStatus = live->knobs()->statusLabel()->text();
                std::printf("knobs status: %s\n", qPrintable(knobStatus));
                shot("live-after-knob.png");
            });
        }
    });
    QObject::connect(live, &LiveController::targetEnded, &w, [&](const QString& how) {
        std::printf("program %s after %.1f s\n", qPrintable(how), clock.elapsed() / 1000.0);
        // The saved trace opens in the background: wait until the window shows it.
        auto* poll = new QTimer(&w);
        QObject::connect(poll, &QTimer::timeout, &w, [&, poll] {
            if (w.snapshot().valid() && !w.snapshot().path.isEmpty() &&
                !w.snapshot().timeline->partial) {
                poll->stop();
                shot("live-ended.png");
                rc = 0;
                app.exit(0);
            }
        });
        poll->start(200);
    });
    QTimer::singleShot(timeoutS * 1000, &w, [&] {
        std::fprintf(stderr, "live_window_gpu: timed out after %d s\n", timeoutS);
        shot("live-timeout.png");
        app.exit(1);
    });

    app.exec();
    std::printf("| refreshes | median | p95 | max | events shown at the end |\n|---|---|---|---|---|\n");
    std::printf("| %zu | %.1f ms | %.1f ms | %.1f ms | %llu |\n", latencyMs.size(),
                percentile(latencyMs, 0.5), percentile(latencyMs, 0.95),
                percentile(latencyMs, 1.0),
                w.snapshot().valid() ? (unsigned long long)w.snapshot().timeline->eventCount : 0ull);
    if (!knobPressed) std::fprintf(stderr, "live_window_gpu: the knob was never pressed\n");
    return knobPressed && !latencyMs.empty() ? rc : 1;
}
