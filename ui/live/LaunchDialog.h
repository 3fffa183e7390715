#pragma once
// "Launch...": program, arguments, working directory, environment additions, trace path and
// live control. It only collects a control::LaunchSpec and checks it with the core builder;
// running it is TargetProcess's job.

#include "poolscope/control/LaunchSpec.h"

#include <QDialog>

class QCheckBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;

namespace poolscope::ui {

class LaunchDialog : public QDialog {
    Q_OBJECT
public:
    explicit LaunchDialog(QWidget* parent = nullptr);

    control::LaunchSpec spec() const;
    void setSpec(const control::LaunchSpec& s);
    // The collector next to the executable (or $POOLSCOPE_COLLECTOR); empty when not built.
    static QString findCollector();

    QLineEdit* programEdit() const { return program_; }
    QLineEdit* argumentsEdit() const { return args_; }
    QLineEdit* workingDirEdit() const { return workDir_; }
    QPlainTextEdit* environmentEdit() const { return env_; }
    QLineEdit* traceEdit() const { return trace_; }
    QCheckBox* listenBox() const { return listen_; }
    QLabel* errorLabel() const { return error_; }

    void accept() override; // refuses, with the reason shown, when the spec cannot be built

private:
    QLineEdit* program_;
    QLineEdit* args_;
    QLineEdit* workDir_;
    QPlainTextEdit* env_;
    QLineEdit* trace_;
    QCheckBox* listen_;
    QLabel* error_;
    QString collector_;
};

} // namespace poolscope::ui
