// poolscope-gui: the desktop window. Started by `poolscope` (no verb, a trace file, or
// `open TRACE`), or directly.

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
} // namespace

int main(int argc, char** argv) {
    if (wantsInfoOnly(argc, argv)) {
        // --help and --version must work without a display (over ssh, in scripts).
        QCoreApplication core(argc, argv);
        QCoreApplication::setApplicationVersion(POOLSCOPE_VERSION);
        QCommandLineParser parser;
        parser.setApplicationDescription("PoolScope: visual memory profiler for CUDA's "
                                         "stream-ordered allocator");
        parser.addHelpOption();
        parser.addVersionOption();
        parser.addPositionalArgument("trace", "A .poolscope trace to open");
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
    parser.setApplicationDescription("PoolScope: visual memory profiler for CUDA's stream-ordered "
                                     "allocator");
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument("trace", "A .poolscope trace to open");
    parser.process(app);

    poolscope::ui::MainWindow w;
    w.show();
    const QStringList args = parser.positionalArguments();
    QTimer::singleShot(0, &w, [&w, args] {
        if (!args.isEmpty())
            w.openFile(args.first());
        else
            w.openDefault();
    });
    return app.exec();
}
