#include "ReplayThread.h"

#include <atomic>
#include <system_error>

namespace poolscope::detail {

SharedChunk ChunkShelf::hold(std::vector<Event>& chunk) {
    auto* held = new std::vector<Event>(std::move(chunk));
    chunk.clear(); // moved-from: make it a valid empty vector either way
    {
        std::lock_guard lk(m_);
        if (!spares_.empty()) {
            chunk = std::move(spares_.back());
            spares_.pop_back();
        }
    }
    return SharedChunk(held, [this](const std::vector<Event>* p) {
        auto* v = const_cast<std::vector<Event>*>(p);
        v->clear();
        {
            std::lock_guard lk(m_);
            if (spares_.size() < kMaxSpares) spares_.push_back(std::move(*v));
        }
        delete v;
    });
}

ReplayThread::ReplayThread(std::function<void()> afterChunk) : afterChunk_(std::move(afterChunk)) {}

ReplayThread::~ReplayThread() { abort(); }

void ReplayThread::abort() {
    ended_ = true;
    if (thread_.joinable()) {
        {
            std::lock_guard lk(m_);
            stop_ = true;
        }
        notEmpty_.notify_all();
        notFull_.notify_all();
        thread_.join();
    }
    // The chunks still queued go back to their shelf now, while it is sure to exist (a lent
    // thread outlives the read's shelf).
    queue_.clear();
}

void ReplayThread::setEntities(const std::vector<DeviceInfo>& devices,
                               const std::vector<PoolInfo>& pools,
                               const std::vector<StreamInfo>& streams) {
    replay_.setDevices(devices);
    for (const PoolInfo& info : pools) replay_.declarePool(info);
    for (const StreamInfo& info : streams) replay_.declareStream(info);
}

namespace {
std::atomic<bool> noThreads{false};
} // namespace

void simulateNoReplayThreads(bool on) { noThreads = on; }
bool replayThreadsSimulatedAway() { return noThreads; }

void ReplayThread::start() {
    try {
        if (noThreads) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
        thread_ = std::thread([this] { run(); });
    } catch (const std::system_error&) {
        // No thread to be had (a process or container limit): push() applies the chunks on
        // the caller's thread instead, the same facts a little later.
    }
}

void ReplayThread::lead(std::function<void(const SharedChunk&, const SharedTape&)> out) {
    out_ = std::move(out);
}

void ReplayThread::push(SharedChunk chunk, SharedTape tape) {
    if (!thread_.joinable()) {
        apply(Work{std::move(chunk), std::move(tape)});
        return;
    }
    {
        std::unique_lock lk(m_);
        if (!stop_ && queue_.size() >= kDepth) {
            const auto t = std::chrono::steady_clock::now();
            notFull_.wait(lk, [&] { return stop_ || queue_.size() < kDepth; });
            pushWaited_ += std::chrono::steady_clock::now() - t;
        }
        if (stop_) return;
        queue_.push_back(Work{std::move(chunk), std::move(tape)});
    }
    notEmpty_.notify_one();
}

void ReplayThread::apply(const Work& w) {
    if (out_) {
        using Ops = std::vector<uint32_t>;
        auto* ops = new Ops();
        {
            std::lock_guard lk(tapeSpares_->m);
            if (!tapeSpares_->spares.empty()) {
                *ops = std::move(tapeSpares_->spares.back());
                tapeSpares_->spares.pop_back();
            }
        }
        std::shared_ptr<Ops> tape(ops, [spares = tapeSpares_](Ops* p) {
            p->clear();
            {
                std::lock_guard lk(spares->m);
                if (spares->spares.size() < 16) spares->spares.push_back(std::move(*p));
            }
            delete p;
        });
        // About 1.3 operations an event on the generator's trace (an alloc's take and put, a
        // free's take).
        tape->reserve(w.chunk->size() * 3 / 2 + 16);
        const std::vector<Event>& events = *w.chunk;
        const size_t n = events.size();
        for (size_t i = 0; i < n; ++i) {
            if (i + SampleMerge::kAhead < n) lead_.prefetch(events[i + SampleMerge::kAhead]);
            lead_.apply(events[i], *tape);
        }
        out_(w.chunk, std::move(tape));
        return;
    }
    if (retired()) return;
    if (w.tape) replay_.followLive(w.tape->data(), w.tape->size());
    const uint64_t missing = replay_.liveOpsMissing();
    merge_.chunk(*w.chunk, replay_, [this](const Event& e) { replay_.apply(e); });
    if (w.tape && (replay_.liveOpsLeft() != 0 || replay_.liveOpsMissing() != missing)) [[unlikely]]
        tapeMismatches_++;
    if (afterChunk_) afterChunk_();
}

double cpuSeconds(clockid_t clock) {
    timespec ts{};
    if (clock_gettime(clock, &ts) != 0) return 0;
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

void ReplayThread::run() {
    for (;;) {
        Work c;
        {
            std::unique_lock lk(m_);
            if (!stop_ && !done_ && queue_.empty()) {
                const auto t = std::chrono::steady_clock::now();
                notEmpty_.wait(lk, [&] { return stop_ || done_ || !queue_.empty(); });
                chunkWaited_ += std::chrono::steady_clock::now() - t;
            }
            if (stop_ || queue_.empty()) {
                cpuSeconds_ = detail::cpuSeconds(CLOCK_THREAD_CPUTIME_ID);
                return;
            }
            c = std::move(queue_.front());
            queue_.pop_front();
        }
        notFull_.notify_one();
        apply(c);
    }
}

void ReplayThread::end() {
    if (ended_) return;
    ended_ = true;
    if (thread_.joinable()) {
        {
            std::lock_guard lk(m_);
            done_ = true;
        }
        notEmpty_.notify_all();
        thread_.join();
    }
    if (out_ || retired()) return; // leading: samples make no operation on the live set
    merge_.rest([this](const Event& e) { replay_.apply(e); });
    if (afterChunk_) afterChunk_();
}

LiveFollow::LiveFollow(std::vector<ReplayThread*> followers, replay::Replay& mine,
                       std::function<bool(const std::vector<Event>&)> apply)
    : mine_(mine), apply_(std::move(apply)), lead_(std::make_unique<ReplayThread>()) {
    lead_->lead([this, followers = std::move(followers)](const SharedChunk& c, const SharedTape& t) {
        for (ReplayThread* f : followers) f->push(c, t);
        {
            std::lock_guard lk(m_);
            items_.emplace_back(c, t);
        }
        ready_.notify_one();
    });
    lead_->start();
}

LiveFollow::~LiveFollow() { lead_->abort(); }

void LiveFollow::followOne() {
    std::pair<SharedChunk, SharedTape> it;
    {
        std::unique_lock lk(m_);
        ready_.wait(lk, [&] { return !items_.empty(); });
        it = std::move(items_.front());
        items_.pop_front();
    }
    outstanding_--;
    if (stopped_) return;
    const uint64_t missing = mine_.liveOpsMissing();
    mine_.followLive(it.second->data(), it.second->size());
    stopped_ = !apply_(*it.first);
    if (mine_.liveOpsLeft() != 0 || mine_.liveOpsMissing() != missing) [[unlikely]]
        mismatches_++;
}

bool LiveFollow::push(SharedChunk chunk) {
    lead_->push(std::move(chunk));
    outstanding_++;
    for (;;) {
        bool ready;
        {
            std::lock_guard lk(m_);
            ready = !items_.empty();
        }
        if (stopped_ || outstanding_ == 0 || (outstanding_ <= kAhead && !ready)) break;
        followOne();
    }
    return !stopped_;
}

Status followersInStep(const LiveFollow* live, const std::vector<ReplayThread*>& threads) {
    uint64_t mismatches = live ? live->mismatches() : 0;
    for (const ReplayThread* t : threads) mismatches += t->tapeMismatches();
    if (mismatches != 0)
        return Error{ErrorCode::Internal, "internal fault: the replays following the live set went out of step"};
    return {};
}

bool LiveFollow::finish() {
    lead_->end();
    while (outstanding_ > 0 && !stopped_) followOne();
    return !stopped_;
}

} // namespace poolscope::detail
