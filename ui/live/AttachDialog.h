#pragma once
// "Attach...": the running targets of this user that serve a control socket (core Discovery),
// refreshed every second; the chosen one's socket path goes to LiveSession::attach.

#include <QDialog>
#include <QTimer>

class QListWidget;
class QLabel;

namespace poolscope::ui {

class AttachDialog : public QDialog {
    Q_OBJECT
public:
    // directory: the discovery directory ("" = the default one, as `poolscope ctl targets`).
    explicit AttachDialog(QWidget* parent = nullptr, const QString& directory = QString());
    QString socketPath() const;
    QListWidget* list() const { return list_; }
    void refresh();

private:
    QString directory_;
    QListWidget* list_;
    QLabel* empty_;
    QTimer timer_;
};

} // namespace poolscope::ui
