#pragma once
// A live connection to a target's control server, for the window. Wraps the core ControlClient
// (the same one `poolscope ctl` uses) in the Qt event loop: a QSocketNotifier wakes it when the
// target sends something, events go into an incremental TimelineBuilder, and a timer hands the
// window a fresh snapshot at most every refreshIntervalMs (default 100 ms) while events arrive,
// which keeps event-to-screen latency under the 250 ms the issue asks for.
//
// Knob requests are asynchronous: the answer arrives as knobApplied (with the driver's read-back)
// or requestFailed (in plain words). Nothing here ever blocks longer than the connect timeout.

#include "LiveEventLog.h"
#include "TraceSnapshot.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/control/ControlClient.h"
#include "poolscope/whatif/PoolModel.h"

#include <QObject>
#include <QString>
#include <QTimer>
#include <functional>
#include <map>
#include <set>
#include <memory>

class QSocketNotifier;

namespace poolscope::ui {

class LiveSession : public QObject {
    Q_OBJECT
public:
    explicit LiveSession(QObject* parent = nullptr);
    ~LiveSession() override;

    // Connects to a control socket. Returns an empty string, or what went wrong in plain words.
    QString attach(const QString& socketPath, int timeoutMs = 3000);
    void detach();
    bool attached() const { return client_ != nullptr; }
    QString socketPath() const { return socketPath_; }

    const control::ServerHello& hello() const { return hello_; }
    // The latest pool states the driver reported (hello, then every ack and refresh).
    const std::vector<control::PoolState>& pools() const { return pools_; }
    const control::PoolState* pool(uint64_t handle) const;
    bool knowsDevice(int ordinal) const; // listed by the hello or learnt since

    void setAttribute(uint64_t pool, PoolAttr attr, uint64_t value);
    void trimTo(uint64_t pool, uint64_t minBytesToKeep);
    void resetWatermarks(uint64_t pool);
    void refreshPools();

    // Builds a snapshot of everything received so far (also what snapshotReady carries).
    TraceSnapshot snapshot() const;
    // The what-if model's inputs so far (a copy; null before attaching): the What-if panel
    // predicts the running program's pools from it.
    std::shared_ptr<const whatif::Tape> whatIfTape() const;
    uint64_t eventsReceived() const { return eventsReceived_; }
    // The events table's source: the latest events received (bounded, see LiveEventLog).
    const LiveEventLog& eventLog() const { return log_; }
    uint64_t droppedForDisplay() const { return dropped_; }
    void setRefreshIntervalMs(int ms) {
        baseIntervalMs_ = ms;
        tick_.setInterval(ms);
    }

signals:
    void poolsChanged();
    void knobApplied(const poolscope::control::Ack& ack);
    void requestFailed(const QString& message);
    void snapshotReady(const poolscope::ui::TraceSnapshot& snapshot);
    void droppedEvents(quint64 count, const QString& message);
    // The connection ended: the target exited, crashed or closed it.
    void ended(const QString& reason);

private:
    void onReadable();
    void onTick();
    void send(const control::Request& r);
    void updatePool(const control::PoolState& s);
    void end(const QString& reason);

    std::unique_ptr<control::ControlClient> client_;
    QSocketNotifier* notifier_ = nullptr;
    QTimer tick_;
    QString socketPath_;
    control::ServerHello hello_;
    std::vector<control::PoolState> pools_;
    std::set<uint64_t> askedPools_; // pools named by events that ListPools was asked about
    std::set<int> askedDevices_;    // the same for devices the hello did not list
    std::map<uint32_t, control::Op> pending_; // request id -> what it was
    std::unique_ptr<TimelineBuilder> builder_;
    // Follows builder_'s replay (declared after it: gone first, and the builder never calls
    // an observer while it is destroyed).
    std::unique_ptr<whatif::TapeRecorder> recorder_;
    LiveEventLog log_;
    bool dirty_ = false;
    int baseIntervalMs_ = 100;
    uint64_t eventsReceived_ = 0;
    uint64_t dropped_ = 0;
};

} // namespace poolscope::ui

Q_DECLARE_METATYPE(poolscope::control::Ack)
