#pragma once
// Several traces of one process tree in one view (issue #16): a lane group per process (a
// header naming the program and pid, then that trace's timeline), parents first, on one shared
// time axis (ProcessSet: how the traces were aligned is said above the groups), and the pools
// one process exported and another imported connected: a line from the export to the import
// across the groups, "⇄ pid N" in the linked pools' lane titles, and the Processes tree
// (ProcessTreeModel, shown by the main window in a dock) listing the importer's pool under the
// exporter's. Selecting a pool highlights the pools linked to it in every group and in the tree.
//
// The main window shows this page instead of its single timeline and plot; its docks (events,
// details, call sites, pools & streams) follow the active process, the one last clicked in.

#include "MultiTraceLoader.h"
#include "ProcessSet.h"
#include "ProcessTreeModel.h"
#include "Selection.h"

#include <QWidget>
#include <optional>
#include <utility>
#include <vector>

class QLabel;
class QScrollArea;
class QToolButton;
class QTreeView;
class QVBoxLayout;

namespace poolscope::ui {

class TimelineWidget;
class LinkOverlay;

class MultiProcessView : public QWidget {
    Q_OBJECT
public:
    explicit MultiProcessView(QWidget* parent = nullptr);
    ~MultiProcessView() override;

    // Loads the files in the background; loaded() or loadFailed() follows.
    void open(const QStringList& paths);
    void cancel();
    bool busy() const;
    // Shows already loaded traces (the files that failed are listed in `errors`).
    void setTraces(const std::vector<TraceLoadResult>& results, const QStringList& errors = {});
    void clear();

    const ProcessSet& processes() const { return set_; }
    int processCount() const { return int(sections_.size()); }
    TimelineWidget* timeline(int process) const;
    QString groupTitle(int process) const; // the header's text, as shown
    QWidget* groupHeader(int process) const;
    bool groupCollapsed(int process) const;
    void setGroupCollapsed(int process, bool collapsed);
    QString alignmentText() const;
    QString problemsText() const; // files that could not be opened or were damaged
    QTreeView* tree() const { return tree_; }
    ProcessTreeModel* treeModel() const { return treeModel_; }
    void fitTreeColumns(); // to their contents, every row expanded

    int activeProcess() const { return active_; }
    void setActiveProcess(int process);
    // From the other views (the events table, the details pane): applies to the active process.
    void setSelection(const Selection& s);
    // As if the user picked (process, pool) in a view.
    void selectPool(int process, uint64_t pool);
    std::vector<std::pair<int, uint64_t>> highlightedPools() const { return highlighted_; }

    // The shared axis' visible range (shared time, ProcessSet::toShared).
    std::pair<int64_t, int64_t> viewRange() const;
    void setViewRange(int64_t shared0, int64_t shared1);
    void fitAll();
    void setCursorTime(int64_t sharedT); // INT64_MIN: none

    // Where the line of link i (ProcessSet::links) is drawn, in this widget's coordinates:
    // from the exporter's pool lane at the export to the importer's at the import; nullopt
    // while either group is collapsed.
    std::optional<std::pair<QPointF, QPointF>> linkLine(size_t link) const;

signals:
    void loadStarted(const QStringList& paths);
    void loaded(); // the traces that could be read are shown
    // One line per file that could not be opened or is damaged, naming it; noneOpened: nothing
    // could be shown (what was shown before stays).
    void loadFailed(const QStringList& problems, bool noneOpened);
    void activeProcessChanged(int process);
    void selectionChanged(int process, const poolscope::ui::Selection& s);

protected:
    void resizeEvent(QResizeEvent*) override;
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    struct Section {
        QWidget* frame = nullptr;
        QWidget* header = nullptr;
        QToolButton* toggle = nullptr;
        QLabel* title = nullptr;
        TimelineWidget* timeline = nullptr;
        bool collapsed = false;
    };
    void onLoaded(const QStringList& paths, const std::vector<TraceLoadResult>& results);
    void buildSections();
    void relayoutSections();
    void syncFrom(int process, int64_t t0, int64_t t1);
    void onTimelineSelection(int process, const Selection& s);
    void highlightFor(int process, const Selection& s);
    void updateHeaders();

    MultiTraceLoader* loader_;
    ProcessSet set_;
    QLabel* alignLabel_;
    QLabel* problemLabel_;
    QScrollArea* scroll_;
    QWidget* container_;
    QVBoxLayout* sectionsLayout_;
    LinkOverlay* overlay_;
    QTreeView* tree_;
    ProcessTreeModel* treeModel_;
    std::vector<Section> sections_;
    std::vector<std::pair<int, uint64_t>> highlighted_;
    int active_ = -1;
    bool syncing_ = false;
    int64_t cursor_ = INT64_MIN;

    friend class LinkOverlay;
};

} // namespace poolscope::ui
