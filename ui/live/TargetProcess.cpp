#include "TargetProcess.h"

#include <QTimer>

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

void TargetProcess::start(const control::LaunchPlan& plan) {
    QStringList args;
    for (size_t i = 1; i < plan.argv.size(); ++i)
        args << QString::fromStdString(plan.argv[i]);
    QStringList env;
    for (const auto& e : plan.env)
        env << QString::fromStdString(e);
    process_.setProgram(QString::fromStdString(plan.program));
    process_.setArguments(args);
    process_.setEnvironment(env);
    if (!plan.workingDir.empty())
        process_.setWorkingDirectory(QString::fromStdString(plan.workingDir));
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
