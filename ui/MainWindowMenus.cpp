// The main window's menus (File, View, Help and the rest) and its recent files: what each
// entry does, beside the window's own parts (MainWindow.cpp).
#include "MainWindow.h"

#include "AppPaths.h"
#include "EntityTreeModel.h"
#include "ReplayBar.h"
#include "TimelineWidget.h"
#include "TraceLoader.h"
#include "WatermarkPlot.h"
#include "WindowModes.h"

#include <QAction>
#include <QActionGroup>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>

namespace poolscope::ui {

namespace {
constexpr int kMaxRecent = 10;
} // namespace

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    const QString traces = tr("PoolScope traces (*.poolscope);;All files (*)");
    file->addAction(tr("&Open…"), QKeySequence::Open, this, [this, traces] {
        // Several files (a process tree's traces, one per process) open side by side.
        const QStringList paths = QFileDialog::getOpenFileNames(
            this, tr("Open a trace, or several to see their processes together"),
            QSettings().value("files/lastDir").toString(), traces);
        if (!paths.isEmpty()) openFiles(paths);
    });
    file->addAction(tr("&Compare With…"), this, [this, traces] {
        const QString dir = QSettings().value("files/lastDir").toString();
        if (modes_->mode() == WindowModes::Mode::Single && snap_.valid() && !snap_.path.isEmpty()) {
            const QString b = QFileDialog::getOpenFileName(
                this, tr("Compare %1 (A) with trace B").arg(snap_.title), dir, traces);
            if (!b.isEmpty()) compareFiles(snap_.path, b);
            return;
        }
        const QStringList two = QFileDialog::getOpenFileNames(
            this, tr("Choose two traces to compare (A, then B)"), dir, traces);
        if (two.size() == 2)
            compareFiles(two[0], two[1]);
        else if (!two.isEmpty())
            showStatus(tr("Compare needs two traces; %1 chosen.").arg(two.size()));
    });
    recentMenu_ = file->addMenu(tr("Open &Recent"));
    exportStretch_ = file->addAction(tr("&Export Visible Stretch to Perfetto…"), this,
                                     &MainWindow::exportVisibleStretch);
    exportStretch_->setObjectName(QStringLiteral("exportStretch"));
    file->addAction(tr("Open the Bundled &Sample"), this, [this] {
        const QString sample = bundledSampleTrace();
        if (sample.isEmpty())
            showStatus(tr("No bundled sample trace is installed."));
        else {
            pendingBundled_ = true;
            loader_->load(sample);
        }
    });
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
    rebuildRecentMenu();

    QMenu* view = menuBar()->addMenu(tr("&View"));
    view->addAction(tr("&Fit All"), QKeySequence(Qt::CTRL | Qt::Key_0), modes_,
                    &WindowModes::fitAll);
    view->addAction(tr("Fit to Allocator &Activity"), QKeySequence(Qt::CTRL | Qt::Key_9),
                    timeline_, &TimelineWidget::fitActivity);
    view->addAction(tr("Zoom &In"), QKeySequence::ZoomIn, this, [this] { modes_->zoomBy(1.5); });
    view->addAction(tr("Zoom &Out"), QKeySequence::ZoomOut, this,
                    [this] { modes_->zoomBy(1 / 1.5); });
    view->addAction(tr("Zoom to &Selection"), QKeySequence(Qt::CTRL | Qt::Key_E), timeline_,
                    &TimelineWidget::zoomToSelection);
    view->addSeparator();
    auto* colors = new QActionGroup(this);
    colorBySize_ = view->addAction(tr("Colour Bars by &Size"));
    colorByPool_ = view->addAction(tr("Colour Bars by &Pool"));
    for (QAction* a : {colorBySize_, colorByPool_}) {
        a->setCheckable(true);
        colors->addAction(a);
    }
    colorBySize_->setChecked(true);
    connect(colorBySize_, &QAction::triggered, this,
            [this] { timeline_->setBarColoring(BarColoring::BySize); });
    connect(colorByPool_, &QAction::triggered, this,
            [this] { timeline_->setBarColoring(BarColoring::ByPool); });
    view->addSeparator();
    showIdleStreams_ = view->addAction(tr("Show Streams &Without Allocations"));
    showIdleStreams_->setCheckable(true);
    showIdleStreams_->setToolTip(tr("Streams that only synchronize or wait (PyTorch creates "
                                    "about 128 of them) are hidden by default"));
    connect(showIdleStreams_, &QAction::toggled, this, [this](bool on) {
        timeline_->setShowIdleStreams(on);
        treeModel_->setShowIdleStreams(on);
        QSettings().setValue("view/showIdleStreams", on);
        updateSummary();
    });
    showIdleStreams_->setChecked(QSettings().value("view/showIdleStreams", false).toBool());
    // Enabled by the plot for traces with NVTX ranges.
    view->addAction(plot_->splitByRangeAction());
    QMenu* theme = view->addMenu(tr("&Theme"));
    auto* themes = new QActionGroup(this);
    const char* names[] = {"System", "Light", "Dark"};
    for (int i = 0; i < 3; ++i) {
        QAction* a = theme->addAction(tr(names[i]));
        a->setCheckable(true);
        themes->addAction(a);
        themeActions_ << a;
        connect(a, &QAction::triggered, this, [this, i] { setTheme(Theme(i)); });
    }
    view->addSeparator();
    for (QDockWidget* d : findChildren<QDockWidget*>()) {
        // A menu reads '&' as a mnemonic ("Pools & streams" became "Pools _streams").
        QAction* a = d->toggleViewAction();
        a->setText(d->windowTitle().replace('&', QStringLiteral("&&")));
        view->addAction(a);
    }

    QMenu* replay = menuBar()->addMenu(tr("&Replay"));
    replay->addAction(tr("&Play / Pause"), QKeySequence(Qt::Key_Space), this,
                      [this] { replay_->playing() ? replay_->pause() : replay_->play(); });
    replay->addAction(tr("&Remove Cursor"), this, [this] { replay_->clearCursor(); });

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&Mouse and Keys"), this, [this] {
        QMessageBox::information(
            this, tr("Mouse and keys"),
            tr("<b>Timeline</b><br>Wheel: zoom at the pointer · Drag: pan · Shift+wheel: scroll "
               "lanes<br>Right-drag or Shift+drag: zoom to the marked range<br>"
               "Click: select · Double-click: zoom to it · Double-click empty space: fit all<br>"
               "Click the time ruler: place the replay cursor<br>"
               "Keys: + / − zoom, ← / → pan, Home or F fit all, Z zoom to selection, Esc "
               "clear<br><br><b>Watermarks</b><br>Drag: pan · Wheel: zoom · Click: place the "
               "cursor<br>Right-click: split used bytes by NVTX range (hover a band for its "
               "bytes)<br><br><b>Events</b><br>Double-click a row: jump there on the timeline"));
    });
    help->addAction(tr("&About PoolScope"), this, [this] {
        QMessageBox::about(this, tr("About PoolScope"),
                           tr("<b>PoolScope %1</b><br>Visual memory profiler for CUDA's "
                              "stream-ordered allocator (cudaMallocAsync and memory pools).")
                               .arg(QStringLiteral(POOLSCOPE_VERSION)));
    });
}

void MainWindow::addRecent(const QString& path) {
    QSettings st;
    QStringList recent = st.value("files/recent").toStringList();
    recent.removeAll(path);
    recent.prepend(path);
    while (recent.size() > kMaxRecent)
        recent.removeLast();
    st.setValue("files/recent", recent);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
    recentMenu_->clear();
    const QStringList recent = QSettings().value("files/recent").toStringList();
    for (const QString& p : recent)
        recentMenu_->addAction(QFileInfo(p).fileName() + QStringLiteral("  —  ") + p, this,
                               [this, p] { openFile(p); });
    recentMenu_->setEnabled(!recent.isEmpty());
}

} // namespace poolscope::ui
