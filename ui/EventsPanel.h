#pragma once
// The events table with its filter bar. Queries run off the UI thread through an EventProvider;
// each query carries a generation number and stale answers are dropped.

#include "EventFilter.h"
#include "EventTableModel.h"
#include "TraceSnapshot.h"

#include <QFuture>
#include <QTimer>
#include <QWidget>
#include <atomic>
#include <memory>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QTableView;
class QToolButton;
class QMenu;

namespace poolscope::ui {

class EventsPanel : public QWidget {
    Q_OBJECT
public:
    explicit EventsPanel(QWidget* parent = nullptr);
    ~EventsPanel() override;

    void setSource(const TraceSnapshot& s, EventProvider provider);
    // A live run: a newer snapshot and provider of the same run, many times a second. The rows
    // stay until the new query answers (no flicker), queries run at most once per debounce
    // interval however often this is called, and while the table is scrolled to its end it
    // follows the newest events. setSource() ends this mode.
    void updateSource(const TraceSnapshot& s, EventProvider provider);
    bool live() const { return live_; }
    void clear();
    // The timeline's visible range; followed while "Follow timeline" is checked.
    void setVisibleRange(int64_t t0, int64_t t1);
    void selectSeq(uint64_t seq); // selects and scrolls to the event if it is loaded
    EventFilter filter() const;
    EventTableModel* model() const { return model_; }
    QTableView* view() const { return view_; }
    bool queryRunning() const { return running_ != nullptr; }

    static constexpr size_t kRowCap = 200000;

signals:
    void eventSelected(const poolscope::Event& e);
    void eventActivated(const poolscope::Event& e); // double-click: jump there
    void queryFinished(int rows);

private:
    void scheduleQuery();
    void runQuery();
    void rebuildFilterChoices();
    void fitSeqColumn(const std::vector<Event>& events);

    struct Job {
        quint64 generation = 0;
        std::atomic<bool> cancel{false};
        QFuture<void> future;
    };

    EventTableModel* model_;
    QTableView* view_;
    QToolButton* kindButton_;
    QMenu* kindMenu_;
    QComboBox* streamBox_;
    QComboBox* poolBox_;
    QLineEdit* minSize_;
    QLineEdit* maxSize_;
    QCheckBox* follow_;
    QLabel* status_;
    QTimer debounce_;

    TraceSnapshot snap_;
    EventProvider provider_;
    int64_t visible0_ = INT64_MIN, visible1_ = INT64_MAX;
    quint64 generation_ = 0;
    bool live_ = false;
    int autoSeqWidth_ = 0; // the Seq column's width as last set here
    std::shared_ptr<Job> running_;
    std::vector<std::shared_ptr<Job>> jobs_;
};

} // namespace poolscope::ui
