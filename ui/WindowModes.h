#pragma once
// The main window's modes besides its single trace (issue #16), kept out of MainWindow: the
// processes view (several traces, a lane group per process: MultiProcessView, with a Processes
// dock for their tree and shared pools, the other docks following the active process) and the
// compare mode (CompareView; the docks are put away while it is shown and come back as they
// were). The Processes dock (a tab beside the events) stands in for the pools & streams dock
// while several processes are shown. Owns the central stack of pages: the single trace's views,
// then these two.

#include <QByteArray>
#include <QObject>
#include <QStringList>

class QDockWidget;
class QStackedWidget;
class QWidget;

namespace poolscope::ui {

class CompareView;
class MainWindow;
class MultiProcessView;

class WindowModes : public QObject {
    Q_OBJECT
public:
    enum class Mode { Single, Processes, Compare };

    // singlePage: the single trace's central widget.
    WindowModes(MainWindow* window, QWidget* singlePage);
    // The pools & streams dock, which the Processes dock stands in for.
    void setTreeDock(QDockWidget* d) { treeDock_ = d; }

    QStackedWidget* stack() const { return stack_; }
    MultiProcessView* processes() const { return multi_; }
    CompareView* compare() const { return compare_; }
    QDockWidget* processDock(); // made on first use
    Mode mode() const { return mode_; }

    void openProcesses(const QStringList& paths); // two or more traces
    void compareFiles(const QString& a, const QString& b);
    void cancelLoads(); // a single trace is being opened instead
    void setMode(Mode m);
    void fitAll();              // of the page shown
    void zoomBy(double factor); // about the middle of the page shown
    // Before the window saves its state: the docks as the user arranged them, not put away.
    void restoreDocksForSaving();

private:
    void showProcessInDocks(int process);
    void showProblems(const QString& title, const QStringList& problems);

    MainWindow* w_;
    QStackedWidget* stack_;
    MultiProcessView* multi_;
    CompareView* compare_;
    QDockWidget* processDock_ = nullptr;
    QDockWidget* treeDock_ = nullptr;
    bool treeHiddenByUs_ = false; // the pools & streams dock, for the Processes one
    QByteArray dockState_;
    Mode mode_ = Mode::Single;
    Mode beforeCompare_ = Mode::Single;
};

} // namespace poolscope::ui
