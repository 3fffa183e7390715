#include "LiveSession.h"

#include <QElapsedTimer>
#include <QSocketNotifier>
#include <algorithm>

namespace poolscope::ui {

using namespace poolscope::control;

namespace {
// What the target's driver reports for each pool's settable attributes: known from the start
// of the session (events change them from there), not "unknown" until the program sets them.
std::vector<PoolAttributeValue> attributesOf(const std::vector<PoolState>& pools) {
    std::vector<PoolAttributeValue> out;
    for (const PoolState& p : pools)
        for (PoolAttr a : {PoolAttr::ReleaseThreshold, PoolAttr::ReuseFollowEventDependencies,
                           PoolAttr::ReuseAllowOpportunistic,
                           PoolAttr::ReuseAllowInternalDependencies})
            out.push_back({p.info.handle, a, p.attribute(a)});
    return out;
}
} // namespace

LiveSession::LiveSession(QObject* parent) : QObject(parent) {
    tick_.setInterval(baseIntervalMs_);
    connect(&tick_, &QTimer::timeout, this, &LiveSession::onTick);
}

LiveSession::~LiveSession() {
    detach();
}

QString LiveSession::attach(const QString& socketPath, int timeoutMs) {
    detach();
    ClientOptions o;
    o.clientName = "poolscope-gui";
    o.origin = KnobOrigin::Gui;
    o.subscribeEvents = true;
    o.timeoutMs = timeoutMs;
    auto c = ControlClient::connect(socketPath.toStdString(), o);
    if (!c) return QString::fromStdString(c.error().message);
    client_ = std::move(*c);
    socketPath_ = socketPath;
    hello_ = client_->hello();
    pools_ = hello_.pools;
    askedPools_.clear();
    askedDevices_.clear();
    builder_ = std::make_unique<TimelineBuilder>();
    std::vector<PoolInfo> infos;
    for (const auto& p : pools_)
        infos.push_back(p.info);
    builder_->setEntities(hello_.devices, infos, hello_.streams);
    recorder_ = std::make_unique<whatif::TapeRecorder>();
    builder_->subscribe(recorder_.get(), whatif::TapeRecorder::kindMask());
    builder_->declarePoolAttributes(attributesOf(pools_));
    eventsReceived_ = dropped_ = 0;
    log_.clear();
    dirty_ = true;
    notifier_ = new QSocketNotifier(client_->fd(), QSocketNotifier::Read, this);
    connect(notifier_, &QSocketNotifier::activated, this, &LiveSession::onReadable);
    tick_.start();
    emit poolsChanged();
    // Anything that arrived together with the hello.
    QTimer::singleShot(0, this, &LiveSession::onReadable);
    return {};
}

void LiveSession::detach() {
    tick_.stop();
    delete notifier_;
    notifier_ = nullptr;
    client_.reset();
    pending_.clear();
}

bool LiveSession::knowsDevice(int ordinal) const {
    return std::any_of(hello_.devices.begin(), hello_.devices.end(),
                       [&](const DeviceInfo& d) { return d.ordinal == ordinal; });
}

const PoolState* LiveSession::pool(uint64_t handle) const {
    for (const auto& p : pools_)
        if (p.info.handle == handle) return &p;
    return nullptr;
}

void LiveSession::send(const Request& r) {
    if (!client_) {
        emit requestFailed(tr("not connected to a target"));
        return;
    }
    auto id = client_->sendRequest(r);
    if (!id) {
        emit requestFailed(QString::fromStdString(id.error().message));
        end(QString::fromStdString(id.error().message));
        return;
    }
    pending_[*id] = r.op;
}

void LiveSession::setAttribute(uint64_t pool, PoolAttr attr, uint64_t value) {
    send({Op::Set, pool, uint16_t(attr), value});
}
void LiveSession::trimTo(uint64_t pool, uint64_t bytes) {
    send({Op::TrimTo, pool, 0, bytes});
}
void LiveSession::resetWatermarks(uint64_t pool) {
    send({Op::ResetWatermarks, pool, 0, 0});
}
void LiveSession::refreshPools() {
    send({Op::ListPools, 0, 0, 0});
}

void LiveSession::updatePool(const PoolState& s) {
    for (auto& p : pools_)
        if (p.info.handle == s.info.handle) {
            p = s;
            return;
        }
    pools_.push_back(s);
}

void LiveSession::onReadable() {
    if (!client_) return;
    Status st = client_->pump(0);
    Incoming in;
    bool poolsTouched = false;
    while (client_ && client_->nextIncoming(in)) {
        switch (in.kind) {
        case Incoming::Kind::Events:
            for (const Event& e : in.events)
                builder_->add(e);
            log_.append(in.events);
            eventsReceived_ += in.events.size();
            dirty_ = true;
            // A pool created while we watch, or one the target had before we attached (a device's
            // default pool is never created: the collector learns it at its first use): ask for
            // its kind and attributes, once per handle.
            // The same for a device the hello did not list (the target learns a device at its
            // first CUDA call there): ListPools answers with the devices known by then.
            for (const Event& e : in.events)
                if ((e.pool && !pool(e.pool) && askedPools_.insert(e.pool).second) ||
                    (e.device >= 0 && !knowsDevice(e.device) &&
                     askedDevices_.insert(e.device).second)) {
                    refreshPools();
                    break;
                }
            break;
        case Incoming::Kind::Notice:
            dropped_ += in.notice.dropped;
            emit droppedEvents(in.notice.dropped, QString::fromStdString(in.notice.message));
            break;
        case Incoming::Kind::Reply: {
            pending_.erase(in.requestId);
            if (!in.ack) {
                emit requestFailed(QString::fromStdString(in.error.message));
                break;
            }
            if (in.ack->op == Op::ListPools) {
                pools_ = in.ack->pools;
                for (const PoolState& p : pools_)
                    if (builder_) builder_->declarePool(p.info);
                if (builder_) builder_->declarePoolAttributes(attributesOf(pools_));
                for (const DeviceInfo& d : in.ack->devices) {
                    if (knowsDevice(d.ordinal)) continue;
                    hello_.devices.push_back(d);
                    if (builder_) builder_->declareDevice(d);
                }
                dirty_ = true;
                poolsTouched = true;
            } else if (in.ack->state) {
                updatePool(*in.ack->state);
                poolsTouched = true;
            }
            emit knobApplied(*in.ack);
            break;
        }
        }
    }
    if (poolsTouched) emit poolsChanged();
    if (!st) end(QString::fromStdString(st.error().message));
}

void LiveSession::onTick() {
    if (!dirty_ || !builder_) return;
    dirty_ = false;
    QElapsedTimer t;
    t.start();
    TraceSnapshot s = snapshot();
    // Snapshots copy the timeline and lay it out on this thread: when that gets expensive (long
    // sessions), refresh less often rather than let the window stutter. Never below the
    // configured interval, never slower than 1 s.
    const int spent = int(t.elapsed());
    tick_.setInterval(std::max(baseIntervalMs_, std::min(spent * 4, 1000)));
    emit snapshotReady(s);
}

std::shared_ptr<const whatif::Tape> LiveSession::whatIfTape() const {
    if (!builder_ || !recorder_) return nullptr;
    return std::make_shared<const whatif::Tape>(recorder_->tape(builder_->replay()));
}

TraceSnapshot LiveSession::snapshot() const {
    if (!builder_) return {};
    TraceSnapshot s = TraceSnapshot::fromTimeline(builder_->snapshot(),
                                                  tr("live: pid %1").arg(hello_.process.pid));
    s.process = hello_.process;
    return s;
}

void LiveSession::end(const QString& reason) {
    if (!client_) return;
    onTick(); // the last events reach the window
    detach();
    emit ended(reason);
}

} // namespace poolscope::ui
