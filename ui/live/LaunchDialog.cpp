#include "LaunchDialog.h"

#include <QCheckBox>
#include <QCoreApplication>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QVBoxLayout>

namespace poolscope::ui {

QString LaunchDialog::findCollector() {
    const QString name = "libpoolscope_collector.so";
    if (QString env = qEnvironmentVariable(control::kEnvCollector);
        !env.isEmpty() && QFileInfo(env).isReadable())
        return QFileInfo(env).absoluteFilePath();
    const QString self = QCoreApplication::applicationDirPath();
    for (const QString& dir : {self, self + "/../lib/poolscope", self + "/../lib"}) {
        QFileInfo f(dir + "/" + name);
        if (f.isReadable()) return f.canonicalFilePath();
    }
    return {};
}

namespace {
QWidget* withBrowse(QLineEdit* edit, QWidget* parent, bool directory) {
    auto* w = new QWidget(parent);
    auto* h = new QHBoxLayout(w);
    h->setContentsMargins(0, 0, 0, 0);
    auto* b = new QPushButton(QObject::tr("Browse..."), w);
    h->addWidget(edit, 1);
    h->addWidget(b);
    QObject::connect(b, &QPushButton::clicked, w, [edit, w, directory] {
        QString p = directory
                        ? QFileDialog::getExistingDirectory(w, QObject::tr("Working directory"),
                                                            edit->text())
                        : QFileDialog::getOpenFileName(w, QObject::tr("Program"), edit->text());
        if (!p.isEmpty()) edit->setText(p);
    });
    return w;
}
} // namespace

LaunchDialog::LaunchDialog(QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("Launch a program under PoolScope"));
    auto* form = new QFormLayout;
    program_ = new QLineEdit;
    program_->setPlaceholderText(tr("/path/to/program or python3"));
    args_ = new QLineEdit;
    args_->setPlaceholderText(tr("train.py --epochs 3 (quote arguments with spaces)"));
    workDir_ = new QLineEdit(QDir::currentPath());
    env_ = new QPlainTextEdit;
    env_->setPlaceholderText(
        tr("NAME=value, one per line, e.g.\nPYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync"));
    env_->setMaximumHeight(90);
    trace_ = new QLineEdit(QDir::homePath() + "/live.poolscope");
    listen_ = new QCheckBox(tr("Watch live and allow knob changes (control socket)"));
    listen_->setChecked(true);
    form->addRow(tr("Program:"), withBrowse(program_, this, false));
    form->addRow(tr("Arguments:"), args_);
    form->addRow(tr("Working directory:"), withBrowse(workDir_, this, true));
    form->addRow(tr("Environment additions:"), env_);
    form->addRow(tr("Trace file:"), trace_);
    form->addRow(QString(), listen_);
    error_ = new QLabel;
    error_->setWordWrap(true);
    error_->setStyleSheet("color: palette(link-visited)");
    collector_ = findCollector();
    if (collector_.isEmpty())
        error_->setText(tr("This build has no collector (it was built without the CUDA Toolkit), "
                           "so it cannot launch programs for recording."));
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Launch"));
    connect(buttons, &QDialogButtonBox::accepted, this, &LaunchDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &LaunchDialog::reject);
    auto* top = new QVBoxLayout(this);
    top->addLayout(form);
    top->addWidget(error_);
    top->addWidget(buttons);
    resize(640, sizeHint().height());
}

control::LaunchSpec LaunchDialog::spec() const {
    control::LaunchSpec s;
    s.program = program_->text().trimmed().toStdString();
    for (const QString& a : QProcess::splitCommand(args_->text()))
        s.args.push_back(a.toStdString());
    s.workingDir = workDir_->text().trimmed().toStdString();
    for (const QString& line : env_->toPlainText().split('\n', Qt::SkipEmptyParts)) {
        QString l = line.trimmed();
        if (l.isEmpty() || l.startsWith('#')) continue;
        int eq = l.indexOf('=');
        // A line without '=' becomes a name the builder refuses, with its own message.
        s.env.emplace_back((eq < 0 ? l : l.left(eq)).toStdString(),
                           eq < 0 ? std::string() : l.mid(eq + 1).toStdString());
    }
    s.tracePath = trace_->text().trimmed().toStdString();
    s.listen = listen_->isChecked();
    s.collectorPath = collector_.toStdString();
    return s;
}

void LaunchDialog::setSpec(const control::LaunchSpec& s) {
    program_->setText(QString::fromStdString(s.program));
    QStringList args;
    for (const auto& a : s.args)
        args << QString::fromStdString(control::shellQuote(a));
    args_->setText(args.join(' '));
    workDir_->setText(QString::fromStdString(s.workingDir));
    QStringList env;
    for (const auto& [k, v] : s.env)
        env << QString::fromStdString(k + "=" + v);
    env_->setPlainText(env.join('\n'));
    trace_->setText(QString::fromStdString(s.tracePath));
    listen_->setChecked(s.listen);
    if (!s.collectorPath.empty()) collector_ = QString::fromStdString(s.collectorPath);
}

void LaunchDialog::accept() {
    auto plan = control::buildLaunchPlan(spec(), {});
    if (!plan) {
        error_->setText(QString::fromStdString(plan.error().message));
        return;
    }
    if (!workDir_->text().isEmpty() && !QFileInfo(workDir_->text()).isDir()) {
        error_->setText(tr("The working directory %1 does not exist.").arg(workDir_->text()));
        return;
    }
    QDialog::accept();
}

} // namespace poolscope::ui
