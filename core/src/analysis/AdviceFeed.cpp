#include "AdviceFeed.h"

namespace poolscope::detail {

AdviceFeed::AdviceFeed(replay::Replay& report, bool threaded, bool spill)
    : threaded_(threaded), replay_(threaded ? &own_ : &report),
      neverReleasing_(whatif::neverReleasing()) {
    if (spill) spill_ = std::make_unique<whatif::TapeSpill>();
    asRecorded_.recordInto(&tape_);
    replay_->subscribe(&asRecorded_, whatif::PoolModel::kindMask());
    replay_->subscribe(&races_, whatif::RaceBounds::kindMask());
    if (threaded_) thread_ = std::thread([this] { run(); });
}

AdviceFeed::~AdviceFeed() {
    if (thread_.joinable()) {
        {
            std::lock_guard lk(m_);
            stop_ = true;
        }
        notEmpty_.notify_all();
        notFull_.notify_all();
        thread_.join();
    }
    // The queued chunks' holders give their buffers back to spares_: before it goes.
    queue_.clear();
    if (!threaded_) {
        replay_->unsubscribe(&asRecorded_);
        replay_->unsubscribe(&races_);
    }
}

void AdviceFeed::setEntities(const std::vector<DeviceInfo>& devices,
                             const std::vector<PoolInfo>& pools,
                             const std::vector<StreamInfo>& streams) {
    if (!threaded_) return;
    own_.setDevices(devices);
    for (const PoolInfo& info : pools) own_.declarePool(info);
    for (const StreamInfo& info : streams) own_.declareStream(info);
}

void AdviceFeed::declareKnob(uint64_t pool, PoolAttr attr, uint64_t value) {
    if (threaded_) own_.declareKnob(pool, attr, value);
}

void AdviceFeed::follow(replay::Observer* o, uint32_t kindMask) {
    if (threaded_) own_.subscribe(o, kindMask);
}

std::vector<Event> AdviceFeed::spareBuffer() {
    std::lock_guard lk(m_);
    if (spares_.empty()) return {};
    std::vector<Event> v = std::move(spares_.back());
    spares_.pop_back();
    return v;
}

AdviceFeed::Chunk AdviceFeed::share(std::vector<Event>& chunk) {
    auto* held = new std::vector<Event>(std::move(chunk));
    chunk = spareBuffer();
    Chunk c(held, [this](const std::vector<Event>* p) {
        auto* v = const_cast<std::vector<Event>*>(p);
        v->clear();
        {
            std::lock_guard lk(m_);
            if (spares_.size() < kDepth + 2) spares_.push_back(std::move(*v));
        }
        delete v;
    });
    {
        std::unique_lock lk(m_);
        notFull_.wait(lk, [&] { return stop_ || queue_.size() < kDepth; });
        if (!stop_) queue_.push_back(c);
    }
    notEmpty_.notify_one();
    return c;
}

void AdviceFeed::addSample(Event s) {
    s.kind = EventKind::Sample; // as the report's loop merges them
    own_.apply(s);
}

void AdviceFeed::apply(const std::vector<Event>& chunk) {
    static const std::vector<Event> none;
    const std::vector<Event>& ss = samples_ ? *samples_ : none;
    size_t si = nextSample_;
    for (const Event& e : chunk) {
        while (si < ss.size() && ss[si].tsNs <= e.tsNs) addSample(ss[si++]);
        own_.apply(e);
    }
    nextSample_ = si;
    step();
}

void AdviceFeed::run() {
    for (;;) {
        Chunk c;
        {
            std::unique_lock lk(m_);
            notEmpty_.wait(lk, [&] { return stop_ || done_ || !queue_.empty(); });
            if (stop_ || queue_.empty()) return;
            c = std::move(queue_.front());
            queue_.pop_front();
        }
        notFull_.notify_one();
        apply(*c);
    }
}

void AdviceFeed::step() {
    tape_.seeStreams(*replay_);
    if (spill_) spill_->append(tape_, *replay_);
    const whatif::Op* ops = tape_.ops.data();
    neverReleasing_.feed(ops, ops + tape_.ops.size(), tape_.allocSeq.data(), tape_.allocSeq.size(),
                         tape_.streamHandles, noMute_);
    tape_.dropOps();
}

void AdviceFeed::end() {
    if (threaded_) {
        {
            std::lock_guard lk(m_);
            done_ = true;
        }
        notEmpty_.notify_all();
        thread_.join();
        if (samples_)
            while (nextSample_ < samples_->size()) addSample((*samples_)[nextSample_++]);
    }
    step();
}

void AdviceFeed::finish() {
    asRecorded_.finishTape(tape_, *replay_);
    if (spill_) spill_->finish(tape_);
}

std::vector<whatif::PoolPrediction> AdviceFeed::neverReleasing() {
    return neverReleasing_.collect(tape_);
}

} // namespace poolscope::detail
