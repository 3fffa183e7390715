#pragma once
// The PoolScope window: timeline + watermarks in the centre, events, pools & streams and details
// in docks, replay controls above the timeline. Views are linked only through this class.
//
// Sources: openFile() loads a trace in the background; setSnapshot() shows any TraceSnapshot,
// which is also the entry point for a live session (it pushes new snapshots with keepView=true
// and, if it can answer event queries, an EventProvider).
//
// Several files opened at once, and File > Compare With..., show other pages in the centre
// (WindowModes, issue #16); opening one file returns to the single trace.

#include "ColorScheme.h"
#include "EventFilter.h"
#include "Selection.h"
#include "TraceSnapshot.h"

#include <QMainWindow>
#include <utility>
#include <QStringList>

class QAction;
class QDockWidget;
class QLabel;
class QMenu;
class QProgressBar;
class QPushButton;
class QSplitter;
class QTreeView;

namespace poolscope::ui {

class CallSitesView;
class DetailsPane;
class EntityTreeModel;
class EventsPanel;
class LoadingOverlay;
class RangeLoader;
class StretchExporter;
class ReplayBar;
class TimelineWidget;
class TraceLoader;
class WatermarkPlot;
class WhatIfPanel;
class WindowModes;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    void openFile(const QString& path);
    // One file: openFile; several: a lane group per trace (MultiProcessView).
    void openFiles(const QStringList& paths);
    // The compare mode: A is the baseline, deltas are B - A.
    void compareFiles(const QString& a, const QString& b);
    WindowModes* modes() const { return modes_; }
    // No file given on the command line: show the bundled sample, and say so.
    void openDefault();
    void setSnapshot(const TraceSnapshot& s, bool keepView = false);
    void setEventProvider(EventProvider provider);
    void setTheme(Theme t);
    void select(const Selection& s); // as if the user picked it in a view

    const TraceSnapshot& snapshot() const { return snap_; }
    TimelineWidget* timeline() const { return timeline_; }
    WatermarkPlot* watermarks() const { return plot_; }
    EventsPanel* events() const { return events_; }
    DetailsPane* details() const { return details_; }
    CallSitesView* callSites() const { return sites_; }
    void showCallSites(); // raises its dock
    WhatIfPanel* whatIf() const { return whatIf_; }
    QDockWidget* whatIfDock() const { return whatIfDock_; }
    void showWhatIf(); // raises its dock
    QTreeView* entityView() const { return tree_; }
    EntityTreeModel* entityModel() const { return treeModel_; }
    ReplayBar* replay() const { return replay_; }
    TraceLoader* loader() const { return loader_; }
    RangeLoader* rangeLoader() const { return rangeLoader_; }
    StretchExporter* stretchExporter() const { return stretchExporter_; }
    // File > Export Visible Stretch to Perfetto…: asks where (POOLSCOPE_EXPORT_TO, when set,
    // instead of a dialog: tests and scripts), then writes in the background.
    void exportVisibleStretch();
    QString statusText() const;
    // The shades over the timeline and the plot marking what a progressive load has not read
    // yet (visible only while a partial timeline is shown).
    QList<QWidget*> loadingOverlays() const;

signals:
    void snapshotShown(); // after a new document is on screen (tests, benchmark)
    // After the beginning of a trace that is still loading is on screen (a partial timeline;
    // snapshotShown() follows when the whole trace is).
    void partialShown();
    void rangeShown(); // the detail of a range of a trace larger than the window holds
    void loadFailed(const QString& message);

protected:
    bool event(QEvent* e) override;
    void closeEvent(QCloseEvent*) override;
    void showEvent(QShowEvent*) override;
    void dragEnterEvent(QDragEnterEvent*) override;
    void dropEvent(QDropEvent*) override;

private:
    friend class WindowModes; // reaches the status line, the selection fan-out
    void buildMenus();
    void addRecent(const QString& path);
    void rebuildRecentMenu();
    void setCursorTime(int64_t t);
    void onSelection(const Selection& s, QObject* origin);
    void showStatus(const QString& text);
    void onLoaded(const TraceSnapshot& s);
    void onPartialLoaded(const TraceSnapshot& s);
    void onFailed(const QString& path, const QString& message);
    void fitSplitterToLanes();
    void fitDocks(); // the docks' first sizes (no saved layout)
    void fitTreeDock(); // the Pools & streams dock as wide as its columns, while untouched
    void updateSummary(); // the status bar's counts, from snap_
    bool showingPartialOf(const QString& path) const; // a partial of the load in progress
    void updateLoadingOverlays();
    // Detail per visible range for traces larger than the window holds (MainWindowRange.cpp).
    void setupRangeLoading();
    void onRangeLoaded(const TraceSnapshot& s);
    void applyRequestedView(); // POOLSCOPE_VIEW_RANGE, once per opened trace

    TimelineWidget* timeline_;
    WatermarkPlot* plot_;
    EventsPanel* events_;
    DetailsPane* details_;
    CallSitesView* sites_;
    QDockWidget* sitesDock_ = nullptr;
    WhatIfPanel* whatIf_;
    QDockWidget* whatIfDock_ = nullptr;
    void onSitesSelected(const std::vector<uint32_t>& sites, const QString& label);
    QTreeView* tree_;
    QDockWidget* eventsDock_ = nullptr;
    QDockWidget* treeDock_ = nullptr;
    bool autoTreeDock_ = true; // false once the user arranged the docks
    EntityTreeModel* treeModel_;
    ReplayBar* replay_;
    QSplitter* splitter_;
    TraceLoader* loader_;
    RangeLoader* rangeLoader_ = nullptr;
    StretchExporter* stretchExporter_ = nullptr;
    QAction* exportStretch_ = nullptr; // its text says "Cancel…" while an export runs
    QString exportingWhat_;            // "Exporting 5.92 s – 6.02 s:", for its progress
    QLabel* statusLabel_;
    QLabel* summaryLabel_;
    QProgressBar* progress_;
    QPushButton* cancelButton_;
    QMenu* recentMenu_ = nullptr;
    QAction* colorBySize_ = nullptr;
    QAction* showIdleStreams_ = nullptr;
    std::pair<int64_t, int64_t> partialView_{0, 0}; // the view the partial timeline opened with
    QAction* colorByPool_ = nullptr;
    QList<QAction*> themeActions_;
    TraceSnapshot snap_;
    // Progressive loading: the shaded "not loaded yet" part of the timeline and the plot, the
    // load whose partial timeline is shown, and whether the user has resized the views since.
    LoadingOverlay* timelineOverlay_ = nullptr;
    LoadingOverlay* plotOverlay_ = nullptr;
    quint64 partialGeneration_ = 0;
    int loadPercent_ = 0;
    bool splitterMoved_ = false;
    bool pendingBundled_ = false;
    bool docksRestored_ = false; // a saved layout was restored: the user's sizes stay
    bool docksFitted_ = false;
    Theme theme_ = Theme::System;
    WindowModes* modes_ = nullptr;
};

} // namespace poolscope::ui
