#include "AttachDialog.h"

#include "poolscope/control/Discovery.h"

#include <QDialogButtonBox>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QVBoxLayout>

namespace poolscope::ui {

AttachDialog::AttachDialog(QWidget* parent, const QString& directory)
    : QDialog(parent), directory_(directory) {
    setWindowTitle(tr("Attach to a running program"));
    list_ = new QListWidget;
    empty_ = new QLabel(tr("No running program can be attached to. Start one with\n"
                           "  poolscope record --listen -- PROGRAM\nor set %1=1 "
                           "for a program recorded with the collector.")
                            .arg(QString::fromLatin1(control::kEnvListen)));
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Attach"));
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(list_, &QListWidget::itemDoubleClicked, this, &QDialog::accept);
    auto* top = new QVBoxLayout(this);
    top->addWidget(list_);
    top->addWidget(empty_);
    top->addWidget(buttons);
    timer_.setInterval(1000);
    connect(&timer_, &QTimer::timeout, this, &AttachDialog::refresh);
    timer_.start();
    refresh();
    resize(560, 320);
}

void AttachDialog::refresh() {
    const QString keep = socketPath();
    list_->clear();
    for (const auto& t : control::listTargets(directory_.toStdString())) {
        QString label = tr("pid %1   %2").arg(t.pid).arg(QString::fromStdString(t.commandLine));
        auto* item = new QListWidgetItem(label, list_);
        item->setData(Qt::UserRole, QString::fromStdString(t.socketPath));
        item->setToolTip(QString::fromStdString(t.socketPath));
        if (item->data(Qt::UserRole).toString() == keep) list_->setCurrentItem(item);
    }
    if (!list_->currentItem() && list_->count() > 0) list_->setCurrentRow(0);
    empty_->setVisible(list_->count() == 0);
}

QString AttachDialog::socketPath() const {
    auto* item = list_->currentItem();
    return item ? item->data(Qt::UserRole).toString() : QString();
}

} // namespace poolscope::ui
