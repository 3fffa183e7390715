#include "TargetProcess.h"

#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>
#include <QTimer>
#include <unistd.h>

namespace poolscope::ui {

TargetProcess::TargetProcess(QObject* parent) : QObject(parent) {
    connect(&process_, &QProcess::started, this, [this] { emit started(process_.processId()); });
    connect(&process_, &QProcess::readyReadStandardOutput, this, [this] {
        emit output(QString::fromLocal8Bit(process_.readAllStandardOutput()), false);
    });
    connect(&process_, &QProcess::readyReadStandardError, this,
            [this] { emit output(QString::fromLocal8Bit(process_.readAllStandardError()), true); });
    connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
        if (e == QProcess::FailedToStart)
            emit failedToStart(
                tr("could not start %1: %2").arg(process_.program(), process_.errorString()));
    });
    connect(&process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
        if (status == QProcess::CrashExit)
            emit crashed(tr("the program was killed or crashed (%1)").arg(process_.errorString()));
        else
            emit finished(code);
    });
}

TargetProcess::~TargetProcess() {
    if (running()) {
        process_.kill();
        process_.waitForFinished(1000);
    }
}

void TargetProcess::start(const control::LaunchPlan& planIn) {
    if (running()) return;
    control::LaunchPlan plan = planIn;
    // exec() takes a path: resolve a bare name the way QProcess would.
    if (plan.program.find('/') == std::string::npos) {
        const QString found = QStandardPaths::findExecutable(QString::fromStdString(plan.program));
        if (found.isEmpty()) {
            emit failedToStart(tr("could not start %1: program not found")
                                   .arg(QString::fromStdString(plan.program)));
            return;
        }
        plan.program = found.toStdString();
    }
    // The child execs the plan itself, so QProcess cannot tell a missing program from one that
    // exited with 127: check it here, where the message can still say so.
    QFileInfo program(QString::fromStdString(plan.program));
    if (program.isRelative() && !plan.workingDir.empty())
        program = QFileInfo(QDir(QString::fromStdString(plan.workingDir)), program.filePath());
    if (!program.isFile() || !program.isExecutable()) {
        emit failedToStart(
            tr("could not start %1: %2")
                .arg(QString::fromStdString(plan.program),
                     program.exists() ? tr("not an executable file") : tr("no such file")));
        return;
    }
    exec_ = std::make_unique<control::ChildExec>(plan);
    QStringList args;
    for (size_t i = 1; i < plan.argv.size(); ++i)
        args << QString::fromStdString(plan.argv[i]);
    process_.setProgram(QString::fromStdString(plan.program));
    process_.setArguments(args);
    if (!plan.workingDir.empty())
        process_.setWorkingDirectory(QString::fromStdString(plan.workingDir));
    // In the child, after QProcess's pipes and chdir: exec the plan as `record` does. Only
    // async-signal-safe calls here; a failure is reported on the program's stderr.
    control::ChildExec* exec = exec_.get();
    process_.setChildProcessModifier([exec] {
        exec->exec();
        static const char kMsg[] = "poolscope: could not start the program\n";
        [[maybe_unused]] ssize_t w = ::write(2, kMsg, sizeof kMsg - 1);
        ::_exit(127);
    });
    process_.start();
}

void TargetProcess::stop(int graceMs) {
    if (!running()) return;
    process_.terminate();
    QTimer::singleShot(graceMs, this, [this] {
        if (running()) process_.kill();
    });
}

} // namespace poolscope::ui
