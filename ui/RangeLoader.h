#pragma once
// The detail of the visible time range of a trace larger than the window holds (issue #15).
// The window opens such a trace with its beginning (Timeline::limited) and draws the rest from
// the pool summaries; when the user zooms or pans to a range that is not loaded and whose
// chunks hold no more events than windowRangeEventLimit(), this reads that range in the
// background (buildTimelineRange: only the chunks overlapping it) and hands its snapshot to the
// window, which swaps it in. Views of the whole trace keep what is shown. A newer view cancels
// an older load; a result that arrives for a view no longer wanted is dropped.

#include "TraceSnapshot.h"

#include <QFuture>
#include <QObject>
#include <QString>
#include <QTimer>
#include <atomic>
#include <memory>
#include <vector>

namespace poolscope::ui {

class RangeLoader : public QObject {
    Q_OBJECT
public:
    explicit RangeLoader(QObject* parent = nullptr);
    ~RangeLoader() override; // cancels and waits for the running job

    // The window shows `shown` over [v0, v1]: loads that range's detail when it needs one,
    // after the view has rested for delay() ms (zooming and dragging move it many times).
    void viewChanged(const TraceSnapshot& shown, int64_t v0, int64_t v1);
    void cancel();
    bool busy() const { return running_ != nullptr || timer_.isActive(); }
    void setDelay(int ms) { timer_.setInterval(ms); }
    int delay() const { return timer_.interval(); }
    // A view at least this fraction of the trace long is a whole-trace view: nothing is loaded.
    static constexpr double kWholeTraceFraction = 0.5;

signals:
    void loading(qint64 from, qint64 to);
    void loaded(const poolscope::ui::TraceSnapshot& snapshot);
    // The range holds more events than the window holds: the overview stays.
    void tooLarge(qint64 from, qint64 to, quint64 events, quint64 limit);
    void failed(const QString& message);

private:
    struct Job {
        quint64 generation = 0;
        std::atomic<bool> cancel{false};
        QFuture<void> future;
    };
    void start();

    TraceSnapshot pendingSnap_;
    int64_t pending0_ = 0, pending1_ = 0;
    QTimer timer_;
    quint64 generation_ = 0;
    std::shared_ptr<Job> running_;
    std::vector<std::shared_ptr<Job>> abandoned_; // cancelled jobs still winding down
};

} // namespace poolscope::ui
