// poolscope-gui: the desktop window. Started by `poolscope` (no verb, a trace file, or
// `open TRACE`), or directly.

#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QTimer>

#include "MainWindow.h"

static void initResources() { Q_INIT_RESOURCE(poolscope); }

int main(int argc, char** argv) {
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
        if (!args.isEmpty()) w.openFile(args.first());
        else w.openDefault();
    });
    return app.exec();
}
