#include "WindowModes.h"

#include "CompareView.h"
#include "EventFilter.h"
#include "EventsPanel.h"
#include "MainWindow.h"
#include "MultiProcessView.h"
#include "TimelineWidget.h"
#include "TraceLoader.h"

#include <QDockWidget>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QStackedWidget>
#include <QTreeView>
#include <algorithm>

namespace poolscope::ui {

WindowModes::WindowModes(MainWindow* w, QWidget* singlePage) : QObject(w), w_(w) {
    stack_ = new QStackedWidget(w);
    stack_->addWidget(singlePage);
    multi_ = new MultiProcessView(w);
    stack_->addWidget(multi_);
    compare_ = new CompareView(w);
    stack_->addWidget(compare_);
    // A stack is as large as its largest page's minimum; the hidden pages must not squeeze the
    // docks around the one shown.
    auto onlyCurrentCounts = [this](int current) {
        for (int i = 0; i < stack_->count(); ++i)
            stack_->widget(i)->setSizePolicy(
                i == current ? QSizePolicy(QSizePolicy::Preferred, QSizePolicy::Preferred)
                             : QSizePolicy(QSizePolicy::Ignored, QSizePolicy::Ignored));
        stack_->updateGeometry();
    };
    connect(stack_, &QStackedWidget::currentChanged, this, onlyCurrentCounts);
    onlyCurrentCounts(0);

    connect(multi_, &MultiProcessView::loadStarted, this, [this](const QStringList& paths) {
        w_->showStatus(tr("Loading %1 traces…").arg(paths.size()));
    });
    connect(multi_, &MultiProcessView::loaded, this, [this] {
        setMode(Mode::Processes);
        const size_t links = multi_->processes().links.size();
        w_->showStatus(
            tr("Opened %1 traces, a lane group per process; %2.")
                .arg(multi_->processCount())
                .arg(links ? tr("lines join what one process exported and another imported")
                           : tr("no pool or block is shared between them")));
        emit w_->snapshotShown();
    });
    connect(multi_, &MultiProcessView::loadFailed, this,
            [this](const QStringList& problems, bool none) {
                showProblems(none ? tr("Cannot open the traces")
                                  : tr("Some traces could not be opened or are damaged"),
                             problems);
                if (none) emit w_->loadFailed(problems.join(QLatin1Char('\n')));
            });
    connect(multi_, &MultiProcessView::activeProcessChanged, this,
            &WindowModes::showProcessInDocks);
    connect(multi_, &MultiProcessView::selectionChanged, this,
            [this](int, const Selection& s) { w_->onSelection(s, multi_); });

    connect(compare_, &CompareView::loaded, this, [this] {
        setMode(Mode::Compare);
        w_->showStatus(tr("Comparing %1 (A) with %2 (B).")
                           .arg(compare_->snapshotA().path, compare_->snapshotB().path));
        emit w_->snapshotShown();
    });
    connect(compare_, &CompareView::loadFailed, this, [this](const QStringList& problems) {
        showProblems(tr("Cannot compare"), problems);
        emit w_->loadFailed(problems.join(QLatin1Char('\n')));
    });
    // Back to what was shown before (a process tree's view stays loaded meanwhile).
    connect(compare_, &CompareView::closeRequested, this, [this] { setMode(beforeCompare_); });
}

QDockWidget* WindowModes::processDock() {
    // Made when first needed: a hidden dock tabbed with another at start-up took part in the
    // window's first dock sizing and left the events table a few rows high.
    if (!processDock_) {
        processDock_ = new QDockWidget(tr("Processes"), w_);
        processDock_->setObjectName("processesDock");
        processDock_->setWidget(multi_->tree());
        multi_->tree()->show();
        w_->addDockWidget(Qt::BottomDockWidgetArea, processDock_);
        // A tab beside the events: with the pools & streams dock put away, that group spans the
        // window's width, which the tree's columns need (the events' filter row keeps their
        // dock too wide to share the row).
        if (auto* events = w_->findChild<QDockWidget*>("eventsDock"))
            w_->tabifyDockWidget(events, processDock_);
    }
    return processDock_;
}

void WindowModes::openProcesses(const QStringList& paths) {
    w_->loader()->cancel();
    compare_->cancel();
    multi_->open(paths);
}

void WindowModes::cancelLoads() {
    multi_->cancel();
    compare_->cancel();
}

void WindowModes::compareFiles(const QString& a, const QString& b) {
    w_->loader()->cancel();
    multi_->cancel();
    w_->showStatus(tr("Loading %1 and %2 to compare them…")
                       .arg(QFileInfo(a).fileName(), QFileInfo(b).fileName()));
    compare_->open(a, b);
}

void WindowModes::setMode(Mode m) {
    if (m == mode_) {
        if (m == Mode::Processes) showProcessInDocks(multi_->activeProcess());
        return;
    }
    if (mode_ == Mode::Compare) w_->restoreState(dockState_); // the docks come back as they were
    if (m == Mode::Compare) {
        beforeCompare_ = mode_;
        dockState_ = w_->saveState();
        for (QDockWidget* d : w_->findChildren<QDockWidget*>())
            d->hide();
    }
    // The Processes dock takes the place of the pools & streams one (it lists every process's).
    if (m == Mode::Processes && !treeHiddenByUs_) {
        treeHiddenByUs_ = treeDock_->isVisible();
        treeDock_->hide();
    }
    if (m == Mode::Single && treeHiddenByUs_) {
        treeDock_->show();
        treeHiddenByUs_ = false;
    }
    mode_ = m;
    stack_->setCurrentIndex(int(m));
    if (m == Mode::Processes) {
        processDock()->show();
        processDock_->raise();
        showProcessInDocks(multi_->activeProcess());
    } else if (m == Mode::Compare) {
        w_->setWindowTitle(tr("%1 vs %2 — PoolScope")
                               .arg(compare_->snapshotA().title, compare_->snapshotB().title));
        w_->summaryLabel_->clear(); // the single trace's counts; the comparison has its own
    } else {
        if (processDock_) processDock_->hide();
        multi_->cancel();
        w_->setSnapshot(w_->snapshot(), true); // the single trace's title and docks again
    }
}

void WindowModes::fitAll() {
    if (mode_ == Mode::Processes)
        multi_->fitAll();
    else if (mode_ == Mode::Compare)
        compare_->fitAll();
    else
        w_->timeline()->fitAll();
}

void WindowModes::zoomBy(double factor) {
    auto zoomed = [factor](std::pair<int64_t, int64_t> r) {
        const double mid = (double(r.first) + double(r.second)) / 2,
                     half = (double(r.second) - double(r.first)) / 2 / factor;
        return std::pair<int64_t, int64_t>(int64_t(mid - half), int64_t(mid + half));
    };
    if (mode_ == Mode::Processes) {
        const auto r = zoomed(multi_->viewRange());
        multi_->setViewRange(r.first, r.second);
    } else if (mode_ == Mode::Compare) {
        const auto r = zoomed(compare_->viewRange());
        compare_->setViewRange(r.first, r.second);
    } else {
        TimelineWidget* t = w_->timeline();
        t->zoomBy(factor, (t->viewStart() + t->viewEnd()) / 2);
    }
}

void WindowModes::restoreDocksForSaving() {
    if (mode_ == Mode::Compare) w_->restoreState(dockState_);
    if (treeHiddenByUs_) treeDock_->show();
    if (processDock_) processDock_->hide();
}

void WindowModes::showProcessInDocks(int i) {
    if (mode_ != Mode::Processes || i < 0 || i >= multi_->processCount()) return;
    const ProcessEntry& e = multi_->processes().entries[size_t(i)];
    w_->setSnapshot(e.snap);
    w_->setEventProvider(fileEventProvider(e.snap.path, e.snap.timeline->t0, e.snap.timeline->t1,
                                           e.snap.timeline->eventCount));
    const int others = multi_->processCount() - 1;
    w_->setWindowTitle(others == 0 ? tr("%1 — PoolScope").arg(e.title)
                       : others == 1
                           ? tr("%1 and 1 more process — PoolScope").arg(e.title)
                           : tr("%1 and %2 more processes — PoolScope").arg(e.title).arg(others));
}

void WindowModes::showProblems(const QString& title, const QStringList& problems) {
    w_->showStatus(problems.first());
    auto* box = new QMessageBox(QMessageBox::Warning, title, problems.join(QStringLiteral("\n\n")),
                                QMessageBox::Ok, w_);
    box->setObjectName("loadErrorBox");
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open(); // window-modal, not a nested event loop
}

} // namespace poolscope::ui
