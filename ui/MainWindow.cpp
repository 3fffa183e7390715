#include "MainWindow.h"

#include "AppPaths.h"
#include "CallSitesView.h"
#include "DetailsPane.h"
#include "EntityTreeModel.h"
#include "EventsPanel.h"
#include "LoadingOverlay.h"
#include "MultiProcessView.h"
#include "RangeLoader.h"
#include "ReplayBar.h"
#include "TimelineWidget.h"
#include "TraceLoad.h"
#include "TraceLoader.h"
#include "WatermarkPlot.h"
#include "WhatIfPanel.h"
#include "WindowModes.h"
#include "poolscope/Units.h"
#include "poolscope/analysis/SiteTree.h"
#include "poolscope/view/AllocationLookup.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollBar>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QStyleFactory>
#include <QTimer>
#include <QTreeView>
#include <QVBoxLayout>
#include <algorithm>
#include <optional>
#include <qcustomplot.h>

namespace poolscope::ui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setWindowTitle(tr("PoolScope"));
    setAcceptDrops(true);
    loader_ = new TraceLoader(this);

    timeline_ = new TimelineWidget(this);
    plot_ = new WatermarkPlot(this);
    plot_->setHorizontalMargins(timeline_->labelWidth(), timeline_->rightPad());
    replay_ = new ReplayBar(this);
    splitter_ = new QSplitter(Qt::Vertical, this);
    splitter_->addWidget(timeline_);
    splitter_->addWidget(plot_);
    splitter_->setStretchFactor(0, 3);
    splitter_->setStretchFactor(1, 2);
    auto* central = new QWidget(this);
    auto* cl = new QVBoxLayout(central);
    cl->setContentsMargins(0, 0, 0, 0);
    cl->setSpacing(0);
    cl->addWidget(replay_);
    cl->addWidget(splitter_, 1);
    modes_ = new WindowModes(this, central);
    setCentralWidget(modes_->stack());

    events_ = new EventsPanel(this);
    auto* eventsDock = eventsDock_ = new QDockWidget(tr("Events"), this);
    eventsDock->setObjectName("eventsDock");
    eventsDock->setWidget(events_);
    addDockWidget(Qt::BottomDockWidgetArea, eventsDock);

    treeModel_ = new EntityTreeModel(this);
    tree_ = new QTreeView(this);
    tree_->setModel(treeModel_);
    tree_->setUniformRowHeights(true);
    tree_->setAlternatingRowColors(true);
    tree_->header()->setStretchLastSection(true);
    connect(treeModel_, &QAbstractItemModel::modelReset, this, [this] {
        tree_->expandAll();
        // A device row ("GPU 0 · NVIDIA H200 · 140 GiB") spans the whole row instead of being
        // cut in the name column; that column fits pool and stream names.
        for (int r = 0; r < treeModel_->rowCount(); ++r)
            tree_->setFirstColumnSpanned(r, {}, true);
        // The name column fits the pool and stream names (device rows span it), and the deeper
        // rows under a shared pool ("GPU 1: read"), no wider.
        int nameW = tree_->header()->sectionSizeHint(0);
        for (int r = 0; r < treeModel_->rowCount(); ++r) {
            const QModelIndex dev = treeModel_->index(r, 0);
            for (int c = 0; c < treeModel_->rowCount(dev); ++c) {
                const QModelIndex child = treeModel_->index(c, 0, dev);
                nameW = std::max(nameW, tree_->fontMetrics().horizontalAdvance(
                                            child.data().toString()) +
                                            2 * tree_->indentation() + 10);
                for (int g = 0; g < treeModel_->rowCount(child); ++g)
                    nameW = std::max(nameW, tree_->fontMetrics().horizontalAdvance(
                                                treeModel_->index(g, 0, child).data().toString()) +
                                                3 * tree_->indentation() + 10);
            }
        }
        tree_->setColumnWidth(0, nameW);
        for (int c = 1; c < EntityTreeModel::ColumnCount - 1; ++c)
            tree_->resizeColumnToContents(c);
        // After the layout has the new widths.
        QTimer::singleShot(0, this, &MainWindow::fitTreeDock);
    });
    auto* treeDock = treeDock_ = new QDockWidget(tr("Pools & streams"), this);
    treeDock->setObjectName("treeDock");
    treeDock->setWidget(tree_);
    addDockWidget(Qt::BottomDockWidgetArea, treeDock);
    splitDockWidget(eventsDock, treeDock, Qt::Horizontal);
    modes_->setTreeDock(treeDock);

    // Call sites (issue #13): a tab beside the events, which stay in front.
    sites_ = new CallSitesView(this);
    sitesDock_ = new QDockWidget(tr("Call sites"), this);
    sitesDock_->setObjectName("callSitesDock");
    sitesDock_->setWidget(sites_);
    addDockWidget(Qt::BottomDockWidgetArea, sitesDock_);
    tabifyDockWidget(eventsDock, sitesDock_);
    eventsDock->raise();

    details_ = new DetailsPane(this);
    auto* detailsDock = new QDockWidget(tr("Details"), this);
    detailsDock->setObjectName("detailsDock");
    detailsDock->setWidget(details_);
    addDockWidget(Qt::RightDockWidgetArea, detailsDock);
    // What if (issue #14): a tab beside the details, which stay in front. A column of
    // controls, numbers and the advisor's sentence: the right side's shape.
    whatIf_ = new WhatIfPanel(this);
    whatIfDock_ = new QDockWidget(tr("What if"), this);
    whatIfDock_->setObjectName("whatIfDock");
    whatIfDock_->setWidget(whatIf_);
    addDockWidget(Qt::RightDockWidgetArea, whatIfDock_);
    tabifyDockWidget(detailsDock, whatIfDock_);
    detailsDock->raise();
    // Its tab in front is what makes the panel read the trace and draw its curve.
    whatIf_->setActive(false);
    connect(whatIfDock_, &QDockWidget::visibilityChanged, whatIf_, &WhatIfPanel::setActive);

    // The details pane takes the right side from top to bottom; events and the pools & streams
    // tree share the bottom.
    setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea);
    // At 1600x1000: about 15 table rows under the views, the details pane no wider than its
    // longest rows need.
    fitDocks();

    statusLabel_ = new QLabel(this);
    summaryLabel_ = new QLabel(this);
    progress_ = new QProgressBar(this);
    progress_->setRange(0, 100);
    progress_->setMaximumWidth(260);
    // The phase is written in the bar: without a minimum the status bar squeezed it to two
    // lines ("Reading events" over "0%") beside a long summary.
    progress_->setMinimumWidth(progress_->fontMetrics().horizontalAdvance(tr("Naming call sites") +
                                                                          QStringLiteral(" 100%")) +
                               32);
    progress_->setFormat(tr("%p%"));
    progress_->hide();
    cancelButton_ = new QPushButton(tr("Cancel"), this);
    cancelButton_->hide();
    statusBar()->addWidget(statusLabel_, 1);
    statusBar()->addPermanentWidget(progress_);
    statusBar()->addPermanentWidget(cancelButton_);
    statusBar()->addPermanentWidget(summaryLabel_);

    // While a trace loads progressively, the part of the time axis not read yet is shaded on
    // both views (they draw the last known values on to the end of the trace).
    timelineOverlay_ = new LoadingOverlay(timeline_, [this]() -> std::optional<QRectF> {
        if (!snap_.valid() || !snap_.timeline->partial) return std::nullopt;
        // TimelineGeometry::xOf, from what the widget exposes.
        const int left = timeline_->labelWidth(),
                  right = timeline_->width() - timeline_->rightPad();
        const int64_t v0 = timeline_->viewStart(), v1 = timeline_->viewEnd();
        const double x = left + double(snap_.timeline->loadedUntilNs - v0) *
                                    std::max(1, right - left) /
                                    double(std::max<int64_t>(1, v1 - v0));
        const double x0 = std::max<double>(x, left);
        if (x0 >= right) return std::nullopt;
        // Over the ruler and the lanes; the legend strip at the bottom stays readable.
        const int bottom = timeline_->height() - timeline_->legendHeight();
        return QRectF(x0, 0, right - x0, std::max(0, bottom));
    });
    QCustomPlot* cp = plot_->plot();
    plotOverlay_ = new LoadingOverlay(cp, [this, cp]() -> std::optional<QRectF> {
        if (!snap_.valid() || !snap_.timeline->partial) return std::nullopt;
        const QRect area = cp->axisRect()->rect(); // the plot's time axis is t - t0
        const double x =
            cp->xAxis->coordToPixel(double(snap_.timeline->loadedUntilNs - snap_.timeline->t0));
        const double x0 = std::max<double>(x, area.left());
        if (x0 >= area.right()) return std::nullopt;
        return QRectF(x0, area.top(), area.right() - x0, area.height());
    });
    plotOverlay_->setContent([this](QPainter& p, const QRectF& r) { plot_->paintOverview(p, r); });
    timelineOverlay_->setContent(
        [this](QPainter& p, const QRectF& r) { timeline_->paintOverview(p, r); });
    setupRangeLoading();

    // Linking: every view reports to this window, which fans out.
    connect(timeline_, &TimelineWidget::viewRangeChanged, this, [this](qint64 a, qint64 b) {
        plot_->setViewRange(a, b);
        events_->setVisibleRange(a, b);
        if (timelineOverlay_->isVisible()) {
            timelineOverlay_->update();
            plotOverlay_->update();
        }
    });
    connect(splitter_, &QSplitter::splitterMoved, this, [this] { splitterMoved_ = true; });
    connect(plot_, &WatermarkPlot::viewRangeRequested, timeline_, &TimelineWidget::setViewRange);
    connect(timeline_, &TimelineWidget::selectionChanged, this,
            [this](const Selection& s) { onSelection(s, timeline_); });
    connect(details_, &DetailsPane::selectionRequested, this,
            [this](const Selection& s) {
                onSelection(s, nullptr);
                // A link's target may lie anywhere in the trace: bring it into view.
                const int64_t t = snap_.timeline->allocations[s.index].allocTsNs;
                if (t < timeline_->viewStart() || t > timeline_->viewEnd()) timeline_->centerOn(t);
            });
    connect(events_, &EventsPanel::eventSelected, this, [this](const Event& e) {
        onSelection({Selection::Event, 0, 0, e}, events_);
    });
    connect(events_, &EventsPanel::eventActivated, this, [this](const Event& e) {
        onSelection({Selection::Event, 0, 0, e}, events_);
        if (!snap_.valid()) return;
        const int64_t span = timeline_->viewEnd() - timeline_->viewStart();
        const int64_t trace = std::max<int64_t>(1, nsBetween(snap_.timeline->t0, snap_.timeline->t1));
        if (timeline_->selection().kind == Selection::Allocation)
            timeline_->zoomToSelection();
        else if (span > trace / 20) {
            const int64_t s = std::max<int64_t>(trace / 100, 2000);
            timeline_->setViewRange(e.tsNs - s / 2, e.tsNs + s / 2);
        } else
            timeline_->centerOn(e.tsNs);
    });
    connect(tree_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& cur) {
                onSelection(treeModel_->selectionFor(cur.siblingAtColumn(0)), tree_);
            });
    connect(sites_, &CallSitesView::sitesSelected, this, &MainWindow::onSitesSelected);
    connect(whatIf_, &WhatIfPanel::predictedSeriesChanged, this,
            [this](quint64 pool, std::shared_ptr<const Series> s, const QString& label) {
                plot_->setPredictedSeries(pool, std::move(s), label);
            });
    connect(timeline_, &TimelineWidget::cursorRequested, replay_, &ReplayBar::setCursor);
    connect(plot_, &WatermarkPlot::cursorRequested, replay_, &ReplayBar::setCursor);
    connect(replay_, &ReplayBar::cursorChanged, this, [this](qint64 t) { setCursorTime(t); });

    connect(loader_, &TraceLoader::started, this, [this](const QString& path) {
        showStatus(tr("Loading %1…").arg(QFileInfo(path).fileName()));
        progress_->setValue(0);
        loadPercent_ = 0;
        progress_->show();
        cancelButton_->show();
    });
    connect(loader_, &TraceLoader::progress, this, [this](int pct, const QString& phase) {
        progress_->setValue(pct);
        progress_->setFormat(phase + QStringLiteral(" %p%"));
        loadPercent_ = pct;
        updateLoadingOverlays();
    });
    connect(loader_, &TraceLoader::partialLoaded, this, &MainWindow::onPartialLoaded);
    connect(loader_, &TraceLoader::loaded, this, &MainWindow::onLoaded);
    connect(loader_, &TraceLoader::failed, this, &MainWindow::onFailed);
    connect(loader_, &TraceLoader::cancelled, this, [this](const QString& path) {
        progress_->hide();
        cancelButton_->hide();
        if (snap_.valid() && snap_.timeline->partial &&
            snap_.path == QFileInfo(path).absoluteFilePath())
            showStatus(tr("Loading %1 cancelled: showing only its first %2 %.")
                           .arg(QFileInfo(path).fileName())
                           .arg(int(snap_.timeline->loadedFraction() * 100)));
        else
            showStatus(tr("Loading %1 cancelled.").arg(QFileInfo(path).fileName()));
        updateLoadingOverlays();
    });
    connect(cancelButton_, &QPushButton::clicked, loader_, &TraceLoader::cancel);

    buildMenus();
    QSettings st;
    restoreGeometry(st.value("window/geometry").toByteArray());
    // A layout the user arranged is theirs: the docks are fitted only to the defaults.
    docksRestored_ = restoreState(st.value("window/state").toByteArray());
    autoTreeDock_ = !docksRestored_;
    splitter_->restoreState(st.value("window/splitter").toByteArray());
    if (st.value("view/colorByPool").toBool()) colorByPool_->trigger();
    setTheme(Theme(st.value("view/theme", int(Theme::System)).toInt()));
    if (!st.contains("window/geometry")) resize(1600, 1000);
    showStatus(tr("Open a .poolscope trace with File > Open, or drop one on the window."));
}

MainWindow::~MainWindow() = default;

void MainWindow::fitDocks() {
    auto* details = findChild<QDockWidget*>("detailsDock");
    auto* events = findChild<QDockWidget*>("eventsDock");
    auto* tree = findChild<QDockWidget*>("treeDock");
    resizeDocks({details}, {380}, Qt::Horizontal);
    resizeDocks({events, tree}, {760, 460}, Qt::Horizontal);
    resizeDocks({events}, {380}, Qt::Vertical);
}

void MainWindow::setTheme(Theme t) {
    theme_ = t;
    if (t != Theme::System) QApplication::setStyle(QStyleFactory::create("Fusion"));
    QApplication::setPalette(ColorScheme::palette(t));
    if (themeActions_.size() == 3) themeActions_[int(t)]->setChecked(true);
}

void MainWindow::openFile(const QString& path) {
    modes_->cancelLoads();
    pendingBundled_ = false;
    loader_->load(path);
}

void MainWindow::openFiles(const QStringList& paths) {
    if (paths.size() == 1)
        openFile(paths.first());
    else if (!paths.isEmpty())
        modes_->openProcesses(paths);
}

void MainWindow::compareFiles(const QString& a, const QString& b) {
    modes_->compareFiles(a, b);
}

void MainWindow::openDefault() {
    const QString sample = bundledSampleTrace();
    if (sample.isEmpty()) {
        showStatus(tr("No trace open and no bundled sample installed. Open a .poolscope trace "
                      "with File > Open, or record one with 'poolscope record'."));
        return;
    }
    pendingBundled_ = true;
    loader_->load(sample);
}

bool MainWindow::showingPartialOf(const QString& path) const {
    return snap_.valid() && snap_.timeline->partial && snap_.path == path &&
           partialGeneration_ == loader_->generation();
}

void MainWindow::onPartialLoaded(const TraceSnapshot& loaded) {
    // The beginning of the trace, at once, as a new document; onLoaded() replaces it with the
    // whole trace and keeps whatever the user did meanwhile (same time axis: the partial
    // timeline already spans the whole trace). Progress and Cancel stay in the status bar.
    modes_->setMode(WindowModes::Mode::Single);
    TraceSnapshot s = loaded;
    s.bundledSample = pendingBundled_;
    partialGeneration_ = loader_->generation();
    splitterMoved_ = false;
    setSnapshot(s);
    // The beginning's activity is not the trace's: a trace that opens with its beginning only
    // shows it whole (the summaries draw what is not loaded), as its load will end.
    if (s.timeline->totalEvents > windowEventLimit()) {
        timeline_->fitAll();
        plot_->setViewRange(timeline_->viewStart(), timeline_->viewEnd());
    }
    partialView_ = {timeline_->viewStart(), timeline_->viewEnd()};
    const Timeline& tl = *s.timeline;
    // The events table reads the file itself: it can list every event already.
    setEventProvider(fileEventProvider(s.path, tl.t0, tl.t1, tl.totalEvents));
    showStatus(tr("Loading %1: showing its beginning while the rest is read…").arg(s.title));
    emit partialShown();
}

void MainWindow::onLoaded(const TraceSnapshot& loaded) {
    rangeLoader_->cancel();
    modes_->setMode(WindowModes::Mode::Single);
    progress_->hide();
    cancelButton_->hide();
    TraceSnapshot s = loaded;
    s.bundledSample = pendingBundled_;
    pendingBundled_ = false;
    const bool replacingPartial = showingPartialOf(s.path);
    // Untouched since the partial was shown: the first view is the whole trace's activity, as
    // for a trace loaded at once (the partial's activity was only its beginning's).
    const bool refit = replacingPartial &&
                       partialView_ == std::pair(timeline_->viewStart(), timeline_->viewEnd());
    setSnapshot(s, replacingPartial); // keeps zoom, selection, cursor of the partial's display
    if (refit || (!replacingPartial && s.timeline->limited)) {
        if (s.timeline->limited)
            timeline_->fitAll(); // the loaded beginning's activity is not the trace's
        else
            timeline_->fitActivity();
        plot_->setViewRange(timeline_->viewStart(), timeline_->viewEnd());
    }
    if (replacingPartial && !splitterMoved_) fitSplitterToLanes();
    // Also when replacing a partial: the table's filter choices and names come from the whole
    // trace now, and the partial timeline's memory is released with its last holder.
    setEventProvider(
        fileEventProvider(s.path, s.timeline->t0, s.timeline->t1, s.timeline->eventCount));
    if (replacingPartial && timeline_->selection().kind != Selection::None)
        onSelection(timeline_->selection(), timeline_);
    if (!s.bundledSample) addRecent(s.path);
    QSettings().setValue("files/lastDir", QFileInfo(s.path).absolutePath());
    const Timeline& tl = *s.timeline;
    QString gpu = tl.devices.empty() ? tr("a GPU") : QString::fromStdString(tl.devices[0].name);
    if (s.bundledSample)
        showStatus(tr("Showing the bundled sample trace %1, recorded on %2. Open your own trace "
                      "with File > Open or drop one here.")
                       .arg(s.title, gpu));
    else if (tl.limited)
        showStatus((tl.eventCount < windowEventLimit() // the short first load (TraceLoad.h)
                        ? tr("Opened %1: its first %2 of %3 events (%4 of %5); zoom in to read any "
                             "part in detail. `poolscope report` reads it all.")
                        : tr("Opened %1: its first %2 of %3 events (%4 of %5), as many as the "
                             "window holds on this machine. `poolscope report` reads all of it."))
                       // The file's name, not its path: the message shares one line with the
                       // permanent counts and was cut at 1600 px with a long path.
                       .arg(QFileInfo(s.path).fileName(),
                            QString::fromStdString(formatCount(tl.eventCount)),
                            QString::fromStdString(formatCount(tl.totalEvents)),
                            QString::fromStdString(formatDuration(nsBetween(tl.t0, tl.loadedUntilNs))),
                            QString::fromStdString(formatDuration(nsBetween(tl.t0, tl.t1)))));
    else if (!tl.dropGaps.empty())
        showStatus(tr("Opened %1. The collector lost %2 events in %3 gap(s), marked in red on the "
                      "timeline: counts near them are incomplete.")
                       .arg(s.path, QString::fromStdString(formatCount(tl.droppedInGaps())))
                       .arg(tl.dropGaps.size()));
    else
        showStatus(tr("Opened %1.").arg(s.path));
    if (!s.damage.isEmpty()) {
        showStatus(tr("Opened %1: damaged, showing what is intact.").arg(s.path));
        auto* box = new QMessageBox(
            QMessageBox::Warning, tr("Damaged trace"),
            tr("Parts of\n%1\nare damaged and were left out; the rest is shown.\n\n%2")
                .arg(s.path, s.damage.join(QLatin1Char('\n'))),
            QMessageBox::Ok, this);
        box->setObjectName("damageBox");
        box->setAttribute(Qt::WA_DeleteOnClose);
        box->open();
    }
    applyRequestedView();
    // A view the user zoomed to while the beginning loaded is read now, without another move.
    if (tl.limited) rangeLoader_->viewChanged(snap_, timeline_->viewStart(), timeline_->viewEnd());
    emit snapshotShown();
}

void MainWindow::onFailed(const QString& path, const QString& message) {
    progress_->hide();
    cancelButton_->hide();
    updateLoadingOverlays(); // a partial timeline stays, marked as not loaded
    showStatus(tr("Could not open %1.").arg(QFileInfo(path).fileName()));
    auto* box = new QMessageBox(QMessageBox::Warning, tr("Cannot open trace"),
                                tr("PoolScope could not open\n%1\n\n%2").arg(path, message),
                                QMessageBox::Ok, this);
    box->setObjectName("loadErrorBox");
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open(); // window-modal but not a nested event loop: loading stays asynchronous
    emit loadFailed(message);
}

void MainWindow::setSnapshot(const TraceSnapshot& s, bool keepView) {
    snap_ = s;
    timeline_->setSnapshot(s, keepView);
    plot_->setSnapshot(s);
    plot_->setViewRange(timeline_->viewStart(), timeline_->viewEnd());
    treeModel_->resetData(s); // the tree's layout follows in its modelReset handler
    details_->setSnapshot(s, keepView); // a live refresh keeps what the user is looking at
    sites_->setSnapshot(s);
    whatIf_->setSnapshot(s);
    if (!keepView && s.valid()) fitSplitterToLanes();
    if (!keepView) {
        replay_->setRange(s.valid() ? s.timeline->t0 : 0, s.valid() ? s.timeline->t1 : 1);
        events_->setSource(s, {});
    }
    if (s.valid()) {
        QString title = s.title;
        if (s.bundledSample) title += tr(" (bundled sample)");
        setWindowTitle(tr("%1 — PoolScope").arg(title));
    } else {
        setWindowTitle(tr("PoolScope"));
    }
    updateSummary();
    updateLoadingOverlays();
}

void MainWindow::updateSummary() {
    if (!snap_.valid()) {
        summaryLabel_->clear();
        return;
    }
    const Timeline& tl = *snap_.timeline;
    const QString events = tl.partial
                               ? tr("%L1 of %L2 events loaded").arg(tl.eventCount).arg(tl.totalEvents)
                               : tr("%L1 events").arg(tl.eventCount);
    size_t idle = 0;
    for (const StreamTimeline& st : tl.streams)
        idle += st.allocCount == 0 && st.freeCount == 0 && st.failedCount == 0;
    QString streams = tr("%L1 streams").arg(tl.streams.size());
    if (idle && !timeline_->showIdleStreams())
        streams += tr(" (%L1 without allocations hidden: View menu)").arg(idle);
    summaryLabel_->setText(tr("%1 · %L2 allocations · %3 · %4 pools · %5")
                               .arg(events)
                               .arg(tl.allocations.size())
                               .arg(QString::fromStdString(formatDuration(nsBetween(tl.t0, tl.t1))))
                               .arg(tl.pools.size())
                               .arg(streams));
}

void MainWindow::fitSplitterToLanes() {
    // Give the lanes the height they need (up to 60%) and the plot the rest.
    const int total = splitter_->height();
    const int want = timeline_->contentHeight() + 30;
    const int top = std::clamp(want, total * 4 / 10, total * 6 / 10);
    splitter_->setSizes({top, std::max(120, total - top)});
}

void MainWindow::fitTreeDock() {
    // The events and the tree share the bottom: the tree gets what its columns need (the
    // columns are sized to the trace's values), up to 55 % of the two; the table scrolls
    // sideways. Only until the user drags a dock divider (see event()): then the layout is
    // theirs.
    if (!autoTreeDock_ || !treeDock_->isVisible() || !eventsDock_->isVisible()) return;
    int need = tree_->frameWidth() * 2 + tree_->verticalScrollBar()->sizeHint().width() + 4;
    for (int c = 0; c < EntityTreeModel::ColumnCount - 1; ++c)
        need += tree_->columnWidth(c);
    // The last column stretches, down to the header's default section size at the least.
    need += std::max(tree_->header()->sectionSizeHint(EntityTreeModel::ColumnCount - 1),
                     tree_->header()->defaultSectionSize());
    const int both = treeDock_->width() + eventsDock_->width();
    const int w = std::clamp(need, std::min(360, both / 2), both * 55 / 100);
    resizeDocks({eventsDock_, treeDock_}, {both - w, w}, Qt::Horizontal);
}

bool MainWindow::event(QEvent* e) {
    // A press on a dock separator (the layout shows a split cursor over it) starts a drag: the
    // user arranges the docks from here on. Window resizes and new documents do not count.
    if (e->type() == QEvent::MouseButtonPress &&
        (cursor().shape() == Qt::SplitHCursor || cursor().shape() == Qt::SplitVCursor))
        autoTreeDock_ = false;
    return QMainWindow::event(e);
}

void MainWindow::updateLoadingOverlays() {
    const bool partial = snap_.valid() && snap_.timeline->partial;
    QString text;
    if (partial) {
        if (showingPartialOf(snap_.path) && loader_->busy()) {
            // The percentage is the status bar's (events read; 90-100 is the lane layout), in
            // 5 % steps: each change repaints the timeline under the note.
            const int pct = std::max(loadPercent_, int(snap_.timeline->loadedFraction() * 90));
            text = tr("loading %1 %").arg(pct / 5 * 5);
        } else {
            text = !snap_.timeline->limited ? tr("not loaded")
                   // Read by range (RangeLoader) when zoomed into: say how.
                   : snap_.overview ? tr("not loaded: zoom in to read it")
                                    : tr("not loaded: beyond what the window holds");
        }
    }
    // The views draw the rest from the trace's summaries: say that it is an overview.
    const QString overview =
        partial && plot_->hasOverview() && !text.isEmpty() ? tr("%1 · min/max overview").arg(text)
                                                           : text;
    timelineOverlay_->setText(overview);
    plotOverlay_->setText(overview);
    for (LoadingOverlay* o : {timelineOverlay_, plotOverlay_}) {
        if (o->isVisible() == partial) continue;
        o->setVisible(partial);
        if (partial) o->raise();
    }
}

void MainWindow::setEventProvider(EventProvider provider) {
    events_->setSource(snap_, std::move(provider));
    events_->setVisibleRange(timeline_->viewStart(), timeline_->viewEnd());
}

void MainWindow::setCursorTime(int64_t t) {
    timeline_->setCursorTime(t);
    plot_->setCursorTime(t);
    treeModel_->setCursorTime(t);
    details_->setCursorTime(t);
    sites_->setCursorTime(t);
    // Keep a playing cursor on screen.
    if (t != INT64_MIN && (t < timeline_->viewStart() || t > timeline_->viewEnd()))
        timeline_->centerOn(t);
}

void MainWindow::showCallSites() {
    sitesDock_->show();
    sitesDock_->raise();
}

void MainWindow::showWhatIf() {
    whatIfDock_->show();
    whatIfDock_->raise();
}

void MainWindow::onSitesSelected(const std::vector<uint32_t>& sites, const QString& label) {
    if (!snap_.valid() || sites.empty()) {
        timeline_->setHighlightedAllocations(nullptr);
        plot_->setHighlightedSeries(nullptr, {});
        return;
    }
    const Timeline& tl = *snap_.timeline;
    auto allocs = std::make_shared<const std::vector<uint32_t>>(
        analysis::allocationsOfSites(tl, sites));
    plot_->setHighlightedSeries(
        std::make_shared<const Series>(analysis::liveBytesSeries(tl, *allocs)), label);
    timeline_->setHighlightedAllocations(allocs);
    uint64_t bytes = 0;
    for (uint32_t i : *allocs) bytes += tl.allocations[i].size;
    showStatus(tr("%1: %L2 allocations (%3 in all) marked on the timeline and the plot.")
                   .arg(label)
                   .arg(allocs->size())
                   .arg(QString::fromStdString(formatBytes(bytes))));
}

void MainWindow::select(const Selection& s) {
    onSelection(s, nullptr);
}

void MainWindow::onSelection(const Selection& in, QObject* origin) {
    if (!snap_.valid()) return;
    const Timeline& tl = *snap_.timeline;
    Selection s = in;
    // An alloc or free row stands for its allocation: the richer view of the same thing.
    if (s.kind == Selection::Event) {
        const int64_t a = view::allocationOf(tl, s.event);
        if (a >= 0) s = {Selection::Allocation, uint32_t(a), 0, {}};
    }
    details_->showSelection(s.kind == Selection::None ? in : s);
    if (origin != timeline_) timeline_->setSelection(s);
    if (modes_->mode() == WindowModes::Mode::Processes && origin != modes_->processes())
        modes_->processes()->setSelection(s);
    if (origin != events_ && s.kind == Selection::Allocation)
        events_->selectSeq(tl.allocations[s.index].allocSeq, tl.allocations[s.index].allocTsNs);
    if (origin != events_ && s.kind == Selection::Marker)
        events_->selectSeq(tl.markers[s.index].seq, tl.markers[s.index].tsNs);
    int lane = -1;
    uint64_t pool = 0;
    if (s.kind == Selection::Pool) {
        lane = snap_.layout->laneOfPool(s.handle);
        pool = s.handle;
    } else if (s.kind == Selection::Stream) {
        lane = snap_.layout->laneOfStream(s.handle);
    }
    timeline_->setHighlightedLane(lane);
    if (lane >= 0) timeline_->scrollToLane(lane);
    plot_->setHighlightedPool(pool);
    if (pool) whatIf_->selectPool(pool);
    if (origin != tree_ && (s.kind == Selection::Pool || s.kind == Selection::Stream)) {
        const QModelIndex idx = treeModel_->indexFor(s.kind, s.handle);
        const QSignalBlocker b(tree_->selectionModel());
        tree_->setCurrentIndex(idx);
    }
}

void MainWindow::showStatus(const QString& text) {
    statusLabel_->setText(text);
}

QList<QWidget*> MainWindow::loadingOverlays() const {
    return {timelineOverlay_, plotOverlay_};
}

QString MainWindow::statusText() const {
    return statusLabel_->text();
}

void MainWindow::showEvent(QShowEvent* e) {
    QMainWindow::showEvent(e);
    // Again at the size the window is shown at: at the unshown window's default size the
    // What-if panel's minimum width left the bottom docks too little room for their
    // proportions, and they kept the squeezed ones.
    if (!docksRestored_ && !docksFitted_) fitDocks();
    docksFitted_ = true;
}

void MainWindow::closeEvent(QCloseEvent* e) {
    modes_->restoreDocksForSaving();
    QSettings st;
    st.setValue("window/geometry", saveGeometry());
    st.setValue("window/state", saveState());
    st.setValue("window/splitter", splitter_->saveState());
    st.setValue("view/colorByPool", colorByPool_->isChecked());
    st.setValue("view/theme", int(theme_));
    loader_->cancel();
    QMainWindow::closeEvent(e);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
    const auto urls = e->mimeData()->urls();
    if (!urls.isEmpty() && urls.first().isLocalFile()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
    QStringList paths;
    for (const QUrl& u : e->mimeData()->urls())
        if (u.isLocalFile()) paths << u.toLocalFile();
    if (paths.isEmpty()) return;
    openFiles(paths);
    e->acceptProposedAction();
}

} // namespace poolscope::ui
