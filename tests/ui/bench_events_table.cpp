// The events table over a large trace (issue #15; not a test): per kind group, the time from
// setting the filter to the count and first page on screen, a jump to the middle page, and
// selecting an event three quarters in (the timeline's click), offscreen.
// Usage: poolscope_bench_events_table TRACE [--same-source] [GROUP...]
//   (GROUP: a Kinds menu entry, "all"; --same-source: every group asked of one source, as the
//   window asks its filters after a load, instead of one fresh source per group)
//        poolscope_bench_events_table TRACE --window-screenshot PNG
//   (the window on TRACE, its events table scrolled to the middle of every event)
//        poolscope_bench_events_table --plain-view N
//   (a plain QTableView over a model of N empty rows: what showing every row would cost)
#include "EventsPanel.h"
#include "MainWindow.h"
#include "poolscope/TraceReader.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QElapsedTimer>
#include <QHeaderView>
#include <QMenu>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTableView>
#include <QToolButton>
#include <QTest>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

using namespace poolscope;
using namespace poolscope::ui;

namespace {
class EmptyRows : public QAbstractTableModel {
public:
    explicit EmptyRows(int n) : n_(n) {}
    int rowCount(const QModelIndex& p = {}) const override { return p.isValid() ? 0 : n_; }
    int columnCount(const QModelIndex& p = {}) const override { return p.isValid() ? 0 : 10; }
    QVariant data(const QModelIndex&, int) const override { return {}; }

private:
    int n_;
};

long rssKiB() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0;
}

std::string loadavg() {
    std::ifstream f("/proc/loadavg");
    std::string a, b, c;
    f >> a >> b >> c;
    return a + " " + b + " " + c;
}
} // namespace

int main(int argc, char** argv) {
    if (!std::getenv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
    QApplication app(argc, argv);
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s TRACE [GROUP...]\n", argv[0]);
        return 2;
    }
    if (argc == 3 && !std::strcmp(argv[1], "--plain-view")) {
        const long before = rssKiB();
        QElapsedTimer t;
        t.start();
        EmptyRows model(std::atoi(argv[2]));
        QTableView view;
        view.verticalHeader()->hide();
        view.setModel(&model);
        view.resize(800, 600);
        view.show();
        QCoreApplication::processEvents();
        std::printf("plain QTableView, %d rows: %.3f s, RSS +%ld MiB\n", model.rowCount(),
                    double(t.nsecsElapsed()) / 1e9, (rssKiB() - before) / 1024);
        return 0;
    }
    const std::string path = argv[1];
    if (argc == 4 && !std::strcmp(argv[2], "--window-screenshot")) {
        MainWindow w;
        w.resize(1600, 1000);
        w.show();
        QSignalSpy shown(&w, &MainWindow::snapshotShown);
        QSignalSpy rows(w.events(), &EventsPanel::queryFinished);
        w.openFile(QString::fromStdString(path));
        if (!shown.wait(120000) || (rows.isEmpty() && !rows.wait(120000))) return 1;
        // The timeline's first visible range reaches the table after the load: its query too.
        for (int i = 0; i < 20 && (i < 3 || w.events()->queryRunning()); ++i) QTest::qWait(300);
        w.events()->scrollToRow(w.events()->rowTotal() / 2);
        QSignalSpy page(w.events(), &EventsPanel::pageLoaded);
        w.events()->view()->viewport()->repaint();
        page.wait(60000);
        // A row selected, as after a click.
        w.events()->view()->setFocus();
        w.events()->view()->selectRow(w.events()->model()->rowCount() / 2);
        QTest::qWait(300);
        return w.grab().save(QString::fromUtf8(argv[3])) ? 0 : 1;
    }
    QStringList groups;
    bool sameSource = false;
    for (int i = 2; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--same-source"))
            sameSource = true;
        else
            groups << QString::fromUtf8(argv[i]);
    }
    if (groups.isEmpty()) groups << "Releases and trims" << "Pool and stream lifetime" << "all";
    auto reader = TraceReader::open(path);
    if (!reader) {
        std::fprintf(stderr, "%s\n", reader.error().message.c_str());
        return 1;
    }
    auto sum = (*reader)->summary();
    if (!sum) return 1;
    // The table needs the trace's span and names only: an empty timeline stands for the window's.
    auto tl = std::make_shared<Timeline>();
    tl->t0 = sum->firstTsNs;
    tl->t1 = sum->lastTsNs;
    tl->eventCount = tl->totalEvents = sum->eventCount;
    TraceSnapshot snap = TraceSnapshot::fromTimeline(tl, "bench");
    snap.path = QString::fromStdString(path);
    std::printf("trace %s: %llu events, load average %s\n", path.c_str(),
                (unsigned long long)sum->eventCount, loadavg().c_str());

    const EventProvider shared = fileEventProvider(snap.path, tl->t0, tl->t1, tl->eventCount);
    for (const QString& group : groups) {
        EventsPanel panel;
        panel.resize(1000, 600);
        panel.show();
        panel.findChildren<QCheckBox*>().front()->setChecked(false); // the whole trace
        for (QAction* a : panel.findChild<QToolButton*>()->menu()->actions())
            if (a->isCheckable() && a->objectName() != "failedOnly")
                a->setChecked(group == "all" || a->text() == group);
        QCoreApplication::processEvents();
        QSignalSpy shown(&panel, &EventsPanel::rowsShown);
        QElapsedTimer t;
        t.start();
        panel.setSource(snap, sameSource ? shared
                                         : fileEventProvider(snap.path, tl->t0, tl->t1, tl->eventCount));
        if (!shown.wait(120000)) {
            std::printf("%s: no answer\n", qPrintable(group));
            continue;
        }
        const double first = double(t.nsecsElapsed()) / 1e9;
        const bool final = shown.front().at(2).toBool();
        const uint64_t total = panel.rowTotal();
        std::printf("%-28s %12llu rows  count+first page %.3f s (incl. 150 ms debounce)  %s\n",
                    qPrintable(group), (unsigned long long)total, first,
                    panel.paged() ? "paged" : "held");
        if (!panel.paged() || !final) {
            // Few enough to hold (and sort): the rest is read after the first page.
            QSignalSpy done(&panel, &EventsPanel::queryFinished);
            if (panel.queryRunning()) done.wait(120000);
            std::printf("%-28s all rows held after %.3f s\n", "", double(t.nsecsElapsed()) / 1e9);
            continue;
        }
        // The middle page: the scroll bar moved there, the rows painted (asked for), fetched.
        QSignalSpy page(&panel, &EventsPanel::pageLoaded);
        t.restart();
        panel.pageScrollBar()->setValue(panel.pageScrollBar()->maximum() / 2);
        panel.view()->viewport()->repaint();
        const bool got = page.wait(120000);
        std::printf("%-28s middle page (row %llu) %.3f s%s\n", "",
                    (unsigned long long)panel.model()->base(), double(t.nsecsElapsed()) / 1e9,
                    got ? "" : " (no answer)");
        // An event three quarters in, as the timeline's click selects it (its seq and time).
        auto target = (*reader)->events(panel.filter(), 1, nullptr, nullptr, total * 3 / 4);
        if (!target || target->empty()) continue;
        QSignalSpy located(&panel, &EventsPanel::seqLocated);
        t.restart();
        panel.selectSeq(target->front().seq, target->front().tsNs);
        if (located.isEmpty()) located.wait(120000);
        std::printf("%-28s select seq %llu: row %lld (expected %llu) %.3f s\n", "",
                    (unsigned long long)target->front().seq,
                    located.isEmpty() ? -2LL : (long long)located.front().front().toLongLong(),
                    (unsigned long long)(total * 3 / 4), double(t.nsecsElapsed()) / 1e9);
    }
    std::printf("load average after: %s\n", loadavg().c_str());
    return 0;
}
