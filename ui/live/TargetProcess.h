#pragma once
// Runs a launch plan (built and tested in core: control::LaunchSpec) and reports only through
// signals, like hotspot's perf wrapper: started, output, finished, crashed, failedToStart.
// QProcess forks and sets up the pipes; the exec itself is core's ChildExec, the same as
// `poolscope record`'s, so the program's environment (POOLSCOPE_ROOT_PID included) is the same.

#include "poolscope/control/LaunchSpec.h"

#include <QObject>
#include <QProcess>
#include <memory>

namespace poolscope::ui {

class TargetProcess : public QObject {
    Q_OBJECT
public:
    explicit TargetProcess(QObject* parent = nullptr);
    ~TargetProcess() override;

    void start(const control::LaunchPlan& plan);
    // SIGTERM, then SIGKILL after graceMs if it is still running.
    void stop(int graceMs = 3000);
    bool running() const { return process_.state() != QProcess::NotRunning; }
    qint64 pid() const { return process_.processId(); }

signals:
    void started(qint64 pid);
    void output(const QString& text, bool isError);
    void finished(int exitCode);
    void crashed(const QString& reason);
    void failedToStart(const QString& message);

private:
    QProcess process_;
    std::unique_ptr<control::ChildExec> exec_; // read by the forked child until it execs
};

} // namespace poolscope::ui
