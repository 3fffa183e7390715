#pragma once
// Puts the live session into the main window without the window knowing about it: a "Live"
// menu (Launch..., Attach..., Detach, Stop program), a Knobs dock and a Console dock, all through
// QMainWindow's public API. Launch runs the program through TargetProcess with a private control
// directory, attaches as soon as the collector's socket appears there, pushes live snapshots to
// MainWindow::setSnapshot, and when the program ends opens the saved trace like any other.
//
// Wiring (one line, in gui_main.cpp or MainWindow): poolscope::ui::installLiveSession(&window);

#include "poolscope/control/LaunchSpec.h"

#include <QObject>
#include <QString>
#include <QTemporaryDir>
#include <QTimer>
#include <memory>
#include <utility>

class QAction;
class QDockWidget;

namespace poolscope::ui {

class ConsolePane;
class KnobsPanel;
class LiveSession;
class MainWindow;
class TargetProcess;

class LiveController : public QObject {
    Q_OBJECT
public:
    explicit LiveController(MainWindow* window);
    ~LiveController() override;

    void launch(const control::LaunchSpec& spec);
    QString attach(const QString& socketPath); // "" or the reason it failed
    void detach();

    LiveSession* session() const { return session_; }
    KnobsPanel* knobs() const { return knobs_; }
    ConsolePane* console() const { return console_; }
    TargetProcess* process() const { return process_; }
    QDockWidget* knobsDock() const { return knobsDock_; }
    QDockWidget* consoleDock() const { return consoleDock_; }

signals:
    void attached(const QString& socketPath);
    void targetEnded(const QString& how);

private:
    void showLaunchDialog();
    void showAttachDialog();
    void pollForSocket();
    void onTargetEnded(const QString& how);
    void updateActions();

    MainWindow* window_;
    LiveSession* session_;
    KnobsPanel* knobs_;
    ConsolePane* console_;
    TargetProcess* process_;
    QDockWidget* knobsDock_;
    QDockWidget* consoleDock_;
    QAction* launchAction_;
    QAction* attachAction_;
    QAction* detachAction_;
    QAction* stopAction_;
    QTimer socketPoll_;
    std::unique_ptr<QTemporaryDir> controlDir_;
    QString tracePath_;
    bool firstSnapshot_ = true;
    // The view range this controller last set: while the timeline still shows it, the user has
    // not moved it, and it follows the run.
    std::pair<int64_t, int64_t> autoView_{0, 0};
};

LiveController* installLiveSession(MainWindow* window);

} // namespace poolscope::ui
