// poolscope-gui: the desktop window. Started by `poolscope` (no verb, a trace file, or
// `open TRACE`), or directly.

#include "LiveController.h"
#include "MainWindow.h"

#include <QApplication>
#include <QByteArray>
#include <QCommandLineParser>
#include <QIcon>
#include <QTimer>
#include <cstdio>

static void initResources() {
    Q_INIT_RESOURCE(poolscope);
}

namespace {
bool wantsInfoOnly(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const QByteArray a(argv[i]);
        if (a == "-h" || a == "--help" || a == "--help-all" || a == "-v" || a == "--version")
            return true;
    }
    return false;
}

struct Options {
    // For headless runs (scripts/run.sh without a display, CI): save a picture of the window,
    // then quit.
    QCommandLineOption screenshot{"screenshot",
                                  "Save a screenshot of the window (1600x1000) to FILE just "
                                  "before quitting (with --quit-after).",
                                  "FILE"};
    QCommandLineOption quitAfter{"quit-after", "Quit after MS milliseconds.", "MS"};
    QCommandLineOption diff{"diff",
                            "Compare two traces, A (the baseline) and B: their plots lined up and "
                            "their differences (the window's File > Compare With...)."};
};

// One parser for both paths, so --help lists every option the window takes.
void describe(QCommandLineParser& parser, const Options& o) {
    parser.setApplicationDescription("PoolScope: visual memory profiler for CUDA's stream-ordered "
                                     "allocator");
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument("TRACE",
                                 "A .poolscope trace to open (default: the bundled "
                                 "sample). Several traces (record writes one per process) "
                                 "open together, a lane group per process.",
                                 "[TRACE...]");
    parser.addOption(o.screenshot);
    parser.addOption(o.quitAfter);
    parser.addOption(o.diff);
}
} // namespace

int main(int argc, char** argv) {
    if (wantsInfoOnly(argc, argv)) {
        // --help and --version must work without a display (over ssh, in scripts).
        QCoreApplication core(argc, argv);
        QCoreApplication::setApplicationVersion(POOLSCOPE_VERSION);
        QCommandLineParser parser;
        Options o;
        describe(parser, o);
        parser.process(core); // prints and exits
        return 0;
    }
    if (qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") &&
        qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) {
        std::fprintf(stderr,
                     "poolscope: no display to open the window on (DISPLAY and WAYLAND_DISPLAY "
                     "are unset).\nOn a headless machine use 'poolscope info TRACE' or "
                     "'poolscope report TRACE', or copy the trace to a desktop.\n");
        return 2;
    }
    QApplication app(argc, argv);
    initResources();
    QApplication::setOrganizationName("PoolScope");
    QApplication::setApplicationName("PoolScope");
    QApplication::setApplicationVersion(POOLSCOPE_VERSION);
    QApplication::setWindowIcon(QIcon(":/poolscope/icons/poolscope.svg"));
    QApplication::setDesktopFileName("poolscope");

    QCommandLineParser parser;
    Options o;
    describe(parser, o);
    parser.process(app);
    const QCommandLineOption& screenshot = o.screenshot;
    const QCommandLineOption& quitAfter = o.quitAfter;

    const QStringList args = parser.positionalArguments();
    const bool diff = parser.isSet(o.diff);
    if (diff && args.size() != 2) {
        std::fprintf(stderr, "poolscope: --diff takes two traces, A and B (%d given)\n",
                     int(args.size()));
        return 2;
    }
    poolscope::ui::MainWindow w;
    poolscope::ui::installLiveSession(&w);
    if (parser.isSet(screenshot)) w.resize(1600, 1000); // a fixed size for comparable pictures
    w.show();
    QTimer::singleShot(0, &w, [&w, args, diff] {
        if (diff)
            w.compareFiles(args[0], args[1]);
        else if (!args.isEmpty())
            w.openFiles(args);
        else
            w.openDefault();
    });
    if (parser.isSet(quitAfter)) {
        bool ok = false;
        const int ms = parser.value(quitAfter).toInt(&ok);
        if (!ok || ms < 0) {
            std::fprintf(stderr, "poolscope: --quit-after takes milliseconds, e.g. 5000\n");
            return 2;
        }
        const QString shotPath = parser.value(screenshot);
        QTimer::singleShot(ms, &w, [&w, shotPath] {
            if (!shotPath.isEmpty()) {
                if (w.grab().save(shotPath))
                    std::fprintf(stderr, "poolscope: saved a screenshot to %s\n",
                                 qPrintable(shotPath));
                else
                    std::fprintf(stderr, "poolscope: could not save %s\n", qPrintable(shotPath));
            }
            QApplication::quit();
        });
    }
    return app.exec();
}
