#pragma once
// Loads a trace off the UI thread: open, rebuild the Timeline, lay out lanes. One job at a time
// from the user's point of view; a newer load cancels the older one, and results carry a
// generation number so a stale job that finishes late is dropped.
//
// Progressive: shortly after a big load starts (partialAfter), partialLoaded() hands out a
// snapshot of the beginning of the trace (Timeline::partial, already spanning the whole trace's
// time range) so the window can draw something at once; loaded() follows with the whole trace.
// A load that finishes before then only sends loaded().

#include "TraceSnapshot.h"

#include <QFuture>
#include <QObject>
#include <QString>
#include <QTimer>
#include <atomic>
#include <chrono>
#include <memory>

namespace poolscope::ui {

class TraceLoader : public QObject {
    Q_OBJECT
public:
    explicit TraceLoader(QObject* parent = nullptr);
    ~TraceLoader() override; // cancels and waits for the running job

    void load(const QString& path);
    void cancel();
    bool busy() const { return running_ != nullptr; }
    quint64 generation() const { return generation_; }
    // When the partial snapshot is taken (see BuildOptions): after this long, or after this
    // many events when not 0. A negative duration turns partial snapshots off.
    void setPartialAfter(std::chrono::milliseconds after, uint64_t events = 0) {
        partialAfter_ = after;
        partialAfterEvents_ = events;
    }

signals:
    void started(const QString& path);
    void progress(int percent, const QString& phase);
    void partialLoaded(const poolscope::ui::TraceSnapshot& snapshot); // then loaded() or an end
    void loaded(const poolscope::ui::TraceSnapshot& snapshot);
    void failed(const QString& path, const QString& message);
    void cancelled(const QString& path);

private:
    struct Job {
        quint64 generation = 0;
        QString path;
        std::atomic<bool> cancel{false};
        std::atomic<uint64_t> done{0};
        std::atomic<uint64_t> total{0};
        std::atomic<int> phase{0};
        QFuture<void> future;
    };
    void finish(quint64 generation, TraceSnapshot snap, QString error, bool wasCancelled);
    void partial(quint64 generation, const TraceSnapshot& snap);

    quint64 generation_ = 0;
    std::chrono::milliseconds partialAfter_{300};
    uint64_t partialAfterEvents_ = 0;
    std::shared_ptr<Job> running_;
    std::vector<std::shared_ptr<Job>> abandoned_; // cancelled jobs still winding down
    QTimer poll_;
};

} // namespace poolscope::ui
