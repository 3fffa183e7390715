#include "LiveController.h"

#include "AttachDialog.h"
#include "ConsolePane.h"
#include "EventsPanel.h"
#include "KnobsPanel.h"
#include "LaunchDialog.h"
#include "LiveSession.h"
#include "MainWindow.h"
#include "TargetProcess.h"
#include "TimelineWidget.h"
#include "WhatIfPanel.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/control/Discovery.h"

#include <QAction>
#include <QDir>
#include <QDockWidget>
#include <QFileInfo>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>

namespace poolscope::ui {

LiveController* installLiveSession(MainWindow* window) {
    return new LiveController(window);
}

LiveController::LiveController(MainWindow* window) : QObject(window), window_(window) {
    session_ = new LiveSession(this);
    process_ = new TargetProcess(this);
    knobs_ = new KnobsPanel(session_);
    console_ = new ConsolePane;

    knobsDock_ = new QDockWidget(tr("Knobs"), window);
    knobsDock_->setObjectName("knobsDock");
    knobsDock_->setWidget(knobs_);
    window->addDockWidget(Qt::RightDockWidgetArea, knobsDock_);
    consoleDock_ = new QDockWidget(tr("Console"), window);
    consoleDock_->setObjectName("consoleDock");
    consoleDock_->setWidget(console_);
    window->addDockWidget(Qt::BottomDockWidgetArea, consoleDock_);
    knobsDock_->hide();
    consoleDock_->hide();

    QMenu* menu = window->menuBar()->addMenu(tr("&Live"));
    launchAction_ = menu->addAction(tr("&Launch..."), this, &LiveController::showLaunchDialog);
    launchAction_->setShortcut(QKeySequence(tr("Ctrl+L")));
    attachAction_ = menu->addAction(tr("&Attach..."), this, &LiveController::showAttachDialog);
    detachAction_ = menu->addAction(tr("&Detach"), this, &LiveController::detach);
    stopAction_ = menu->addAction(tr("&Stop program"), this, [this] { process_->stop(); });
    menu->addSeparator();
    menu->addAction(knobsDock_->toggleViewAction());
    menu->addAction(consoleDock_->toggleViewAction());

    connect(session_, &LiveSession::snapshotReady, this, [this](const TraceSnapshot& s) {
        // The first view is fitted once the program has done something (a snapshot taken at
        // attach time spans nothing). After that, while the view is still the one set here, it
        // follows the run (all of it so far); once the user zooms or pans it stays put.
        const bool empty = !s.valid() || s.timeline->allocations.empty();
        TimelineWidget* tl = window_->timeline();
        const bool following = !firstSnapshot_ && tl->viewStart() == autoView_.first &&
                               tl->viewEnd() == autoView_.second;
        window_->setSnapshot(s, !firstSnapshot_);
        // The events table lists the latest events of the run and follows it.
        window_->events()->updateSource(window_->snapshot(), session_->eventLog().provider());
        if (following && s.valid()) tl->setViewRange(s.timeline->t0, s.timeline->t1);
        if (firstSnapshot_ || following) autoView_ = {tl->viewStart(), tl->viewEnd()};
        firstSnapshot_ = empty;
    });
    // What if: the session's model inputs, and "Apply to the running program" through the
    // Knobs panel's own requests.
    WhatIfPanel* whatIf = window_->whatIf();
    whatIf->setTapeSource([s = session_] { return s->whatIfTape(); });
    connect(whatIf, &WhatIfPanel::applyRequested, this,
            [this](quint64 pool, quint64 threshold, bool follow, bool opportunistic,
                   bool internal) {
                if (!session_->attached()) return;
                knobsDock_->show();
                knobs_->apply(pool, threshold, follow, opportunistic, internal);
            });
    connect(session_, &LiveSession::ended, whatIf, [whatIf] { whatIf->setLive(false); });
    connect(session_, &LiveSession::droppedEvents, this,
            [this](quint64, const QString& m) { console_->appendNote(m); });
    connect(session_, &LiveSession::ended, this, [this](const QString& why) {
        console_->appendNote(tr("live connection ended: %1").arg(why));
        updateActions();
        // Attached to a program we did not start: its trace (if any) becomes the document.
        if (!process_->running() && tracePath_.isEmpty()) {
            QString trace = QString::fromStdString(session_->hello().tracePath);
            if (!trace.isEmpty() && QFileInfo::exists(trace)) window_->openFile(trace);
        }
    });

    connect(process_, &TargetProcess::started, this, [this](qint64 pid) {
        console_->appendNote(tr("started pid %1; waiting for its CUDA initialization").arg(pid));
        socketPoll_.start();
        updateActions();
    });
    connect(process_, &TargetProcess::output, console_, &ConsolePane::appendOutput);
    connect(process_, &TargetProcess::finished, this,
            [this](int code) { onTargetEnded(tr("exited with code %1").arg(code)); });
    connect(process_, &TargetProcess::crashed, this, &LiveController::onTargetEnded);
    connect(process_, &TargetProcess::failedToStart, this, [this](const QString& m) {
        console_->appendNote(m);
        QMessageBox::warning(window_, tr("Launch failed"), m);
        updateActions();
    });
    socketPoll_.setInterval(100);
    connect(&socketPoll_, &QTimer::timeout, this, &LiveController::pollForSocket);
    updateActions();
}

LiveController::~LiveController() = default;

void LiveController::updateActions() {
    const bool running = process_->running();
    launchAction_->setEnabled(!running);
    attachAction_->setEnabled(!session_->attached());
    detachAction_->setEnabled(session_->attached());
    stopAction_->setEnabled(running);
}

void LiveController::showLaunchDialog() {
    LaunchDialog d(window_);
    if (d.exec() == QDialog::Accepted) launch(d.spec());
}

void LiveController::showAttachDialog() {
    AttachDialog d(window_);
    if (d.exec() != QDialog::Accepted || d.socketPath().isEmpty()) return;
    QString err = attach(d.socketPath());
    if (!err.isEmpty()) QMessageBox::warning(window_, tr("Attach failed"), err);
}

void LiveController::launch(const control::LaunchSpec& specIn) {
    control::LaunchSpec spec = specIn;
    if (spec.listen) {
        // A private directory per launch: whatever process of the program initializes CUDA
        // (the program itself or a child) puts its socket here, and only there.
        controlDir_ =
            std::make_unique<QTemporaryDir>(QDir::tempPath() + "/poolscope-launch-XXXXXX");
        spec.controlDir = controlDir_->path().toStdString();
    }
    auto plan = control::buildLaunchPlan(spec, control::currentEnvironment());
    if (!plan) {
        QMessageBox::warning(window_, tr("Cannot launch"),
                             QString::fromStdString(plan.error().message));
        return;
    }
    tracePath_ = QString::fromStdString(spec.tracePath);
    consoleDock_->show();
    knobsDock_->setVisible(spec.listen);
    console_->appendNote(QString::fromStdString(plan->displayCommand()));
    for (const auto& w : plan->warnings)
        console_->appendNote(QString::fromStdString(w));
    firstSnapshot_ = true;
    process_->start(*plan);
}

void LiveController::pollForSocket() {
    if (session_->attached() || !controlDir_) {
        socketPoll_.stop();
        return;
    }
    auto targets = control::listTargets(controlDir_->path().toStdString());
    if (targets.empty()) return;
    socketPoll_.stop();
    QString err = attach(QString::fromStdString(targets.front().socketPath));
    if (!err.isEmpty()) console_->appendNote(tr("could not attach: %1").arg(err));
}

QString LiveController::attach(const QString& socketPath) {
    QString err = session_->attach(socketPath);
    if (err.isEmpty()) {
        console_->appendNote(
            tr("attached to %1 (pid %2)").arg(socketPath).arg(session_->hello().process.pid));
        knobsDock_->show();
        window_->whatIf()->setLive(true);
        emit attached(socketPath);
    }
    updateActions();
    return err;
}

void LiveController::detach() {
    session_->detach();
    knobs_->setEnabled(false);
    window_->whatIf()->setLive(false);
    updateActions();
}

void LiveController::onTargetEnded(const QString& how) {
    socketPoll_.stop();
    console_->appendNote(tr("the program %1").arg(how));
    session_->detach();
    window_->whatIf()->setLive(false);
    updateActions();
    emit targetEnded(how);
    // A trace the collector could not close (the program was killed, the disk filled) is in
    // <trace>.partial with what was committed: finish it and move it into place, as record does.
    if (!tracePath_.isEmpty()) {
        auto done = finishPartialTrace(tracePath_.toStdString());
        if (!done)
            console_->appendNote(tr("the trace was not finished (%1); what was recorded is in "
                                    "%2.partial")
                                     .arg(QString::fromStdString(done.error().message),
                                          tracePath_));
        else if (*done)
            console_->appendNote(tr("the collector did not close the trace (the program was "
                                    "killed, or the disk filled): it holds what was recorded "
                                    "until then"));
    }
    // The session becomes an ordinary saved trace.
    if (!tracePath_.isEmpty() && QFileInfo::exists(tracePath_))
        window_->openFile(tracePath_);
    else if (!tracePath_.isEmpty())
        console_->appendNote(
            tr("no trace was written to %1 (did the program use CUDA?)").arg(tracePath_));
    controlDir_.reset();
}

} // namespace poolscope::ui
