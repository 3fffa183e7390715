#pragma once
// A replay of the trace's events on a thread of its own, beside the streaming report's read
// (analysis/TraceReport.cpp). Internal to core.
//
// Replay is a function of its inputs: the same entities, declared knobs, events and samples in
// the same order make the same facts, so observers that follow a second replay on another thread
// see what they would see following the report's, and the read's work is split across threads
// at the cost of replaying again. The chunks are shared, not copied (ChunkShelf): each is held
// until every thread is done with it, and at most kDepth wait for one thread.

#include <atomic>
#include <chrono>
#include <ctime>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "../replay/LiveLead.h"
#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/Result.h"
#include "poolscope/replay/Replay.h"

namespace poolscope::detail {

using SharedChunk = std::shared_ptr<const std::vector<Event>>;
// A chunk's live-set operations' slots as the live set kept once made them (replay::LiveLead,
// Replay::followLive).
using SharedTape = std::shared_ptr<const std::vector<uint32_t>>;

// The report's order of events and samples, the same on every replay of a read: before each
// event, the samples due by its time (as buildTimeline merges them), each marked a Sample
// whatever the reader filled in. The replay's live set is prefetched kAhead events ahead.
class SampleMerge {
public:
    static constexpr size_t kAhead = 8; // events (Replay::prefetch)

    // The samples, read whole ahead of the events; must outlive the merge's use. `from`: the
    // first still due (a piece of a trace starts past those the pieces before it took).
    void expect(const std::vector<Event>* samples, size_t from = 0) {
        samples_ = samples;
        next_ = from;
    }
    template <class Apply>
    void chunk(const std::vector<Event>& events, const replay::Replay& r, Apply&& apply) {
        const size_t n = events.size();
        for (size_t i = 0; i < n; ++i) {
            if (i + kAhead < n) r.prefetch(events[i + kAhead]);
            while (samples_ && next_ < samples_->size() && (*samples_)[next_].tsNs <= events[i].tsNs)
                sample(apply);
            apply(events[i]);
        }
    }
    // After the last chunk: the samples left.
    template <class Apply> void rest(Apply&& apply) {
        while (samples_ && next_ < samples_->size()) sample(apply);
    }

private:
    template <class Apply> void sample(Apply& apply) {
        Event s = (*samples_)[next_++];
        s.kind = EventKind::Sample;
        apply(s);
    }

    const std::vector<Event>* samples_ = nullptr;
    size_t next_ = 0;
};

// A CPU-time clock's reading (CLOCK_THREAD_CPUTIME_ID: the calling thread's,
// CLOCK_PROCESS_CPUTIME_ID: the process's), in seconds; 0 where it cannot be read.
double cpuSeconds(clockid_t clock);

// Tests: ReplayThread::start() and HandOff::start() find no thread to be had (as std::thread's
// EAGAIN).
void simulateNoReplayThreads(bool on);
bool replayThreadsSimulatedAway();

// Work handed over in order to a thread of its own (the report's time merge, the models' spill):
// at most kDepth items wait, and a spent item comes back (spare()) for its buffers. Without a
// thread (none started, or none to be had) give() does the work on the caller's.
template <class T> class HandOff {
public:
    explicit HandOff(std::function<void(T&)> work) : work_(std::move(work)) {}
    ~HandOff() { stop(true); }
    HandOff(const HandOff&) = delete;
    HandOff& operator=(const HandOff&) = delete;

    void start() {
        if (thread_.joinable()) return;
        try {
            if (replayThreadsSimulatedAway())
                throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
            thread_ = std::thread([this] { run(); });
        } catch (const std::system_error&) {
        }
    }
    // An item to fill: a spent one (cleared by the caller as it needs), or a new one.
    T spare() {
        std::lock_guard lk(m_);
        if (spares_.empty()) return T{};
        T x = std::move(spares_.back());
        spares_.pop_back();
        return x;
    }
    void give(T&& x) {
        if (!thread_.joinable()) {
            work_(x);
            recycle(std::move(x));
            return;
        }
        std::unique_lock lk(m_);
        room_.wait(lk, [&] { return queue_.size() < kDepth; });
        queue_.push_back(std::move(x));
        lk.unlock();
        ready_.notify_one();
    }
    void recycle(T&& x) {
        std::lock_guard lk(m_);
        spares_.push_back(std::move(x));
    }
    // After stop(): the CPU time its thread used (0 where it had none).
    double cpuSeconds() const { return cpuSeconds_; }
    // Ends the thread once it has done what it was given (`drop`: what still waits is dropped,
    // a read that ended early). Afterwards the work's own state may be read.
    void stop(bool drop) {
        if (!thread_.joinable()) return;
        {
            std::lock_guard lk(m_);
            end_ = true;
            if (drop) queue_.clear();
        }
        ready_.notify_all();
        thread_.join();
    }

private:
    static constexpr size_t kDepth = 4;

    void run() {
        for (;;) {
            T x;
            {
                std::unique_lock lk(m_);
                ready_.wait(lk, [&] { return end_ || !queue_.empty(); });
                if (queue_.empty()) {
                    cpuSeconds_ = detail::cpuSeconds(CLOCK_THREAD_CPUTIME_ID);
                    return;
                }
                x = std::move(queue_.front());
                queue_.pop_front();
            }
            room_.notify_one();
            work_(x);
            recycle(std::move(x));
        }
    }

    std::function<void(T&)> work_;
    std::mutex m_;
    std::condition_variable ready_, room_;
    std::deque<T> queue_;
    std::vector<T> spares_;
    bool end_ = false;
    double cpuSeconds_ = 0; // written by the thread before it ends
    std::thread thread_;
};

// The decoded chunks' buffers, shared between the read and the replay threads and given back
// to the reader once all are done with them. Must outlive every SharedChunk it made.
class ChunkShelf {
public:
    // `chunk`'s events move into a shared holder; `chunk` gets a spare buffer for the reader.
    SharedChunk hold(std::vector<Event>& chunk);

private:
    static constexpr size_t kMaxSpares = 12;
    std::mutex m_;
    std::vector<std::vector<Event>> spares_;
};

class ReplayThread {
public:
    // `afterChunk`: called on the thread after each chunk's events (and the samples due before
    // them) were applied, and once more by end() after the last samples.
    explicit ReplayThread(std::function<void()> afterChunk = {});
    ~ReplayThread(); // stops and joins (a read that ended early)
    ReplayThread(const ReplayThread&) = delete;
    ReplayThread& operator=(const ReplayThread&) = delete;

    // Before start(): give it the entities, knobs and observers the report's replay has.
    replay::Replay& replay() { return replay_; }
    void setEntities(const std::vector<DeviceInfo>& devices, const std::vector<PoolInfo>& pools,
                     const std::vector<StreamInfo>& streams);
    // The samples the report merges in by time, merged the same way here. Must outlive end().
    void expectSamples(const std::vector<Event>* samples) { merge_.expect(samples); }
    // Before start(): this thread keeps the live set for replays that follow it instead of
    // replaying (replay::LiveLead): `out` gets each chunk and its operations' slots once they are
    // made, in order, on this thread.
    void lead(std::function<void(const SharedChunk&, const SharedTape&)> out);
    // Starts the thread; where none can be had, push() applies each chunk on the caller's.
    void start();

    // Hands a chunk over, waiting while kDepth are queued. With a tape (the live set's record
    // of the chunk, replay::LiveLead), this replay follows it.
    void push(SharedChunk chunk, SharedTape tape = {});
    // After the last chunk: joins, then the rest of the samples and a last afterChunk. Once:
    // a later call does nothing (a read may end the threads its owner ends again).
    void end();
    // A read that ended early: the chunks still queued are dropped and the thread joined, so
    // that what it uses (the samples, the observers) may go. end() then does nothing.
    void abort();
    // From any thread: what this replay's observers would give is known otherwise (the analyses
    // read in pieces), so the chunks still to come are taken and dropped unapplied, and end()
    // applies no last samples. The observers' results are then incomplete.
    void retire() { retired_.store(true, std::memory_order_relaxed); }
    bool retired() const { return retired_.load(std::memory_order_relaxed); }

    // After end(): how long push() waited (this thread was behind) and this thread waited for
    // a chunk (the read was behind), in seconds.
    double pushWaited() const { return std::chrono::duration<double>(pushWaited_).count(); }
    double chunkWaited() const { return std::chrono::duration<double>(chunkWaited_).count(); }
    // After end(): the CPU time its thread used (0 where it had none).
    double cpuSeconds() const { return cpuSeconds_; }
    // After end(): chunks whose tape was not of their events (a fault: the facts may differ).
    uint64_t tapeMismatches() const { return tapeMismatches_; }

private:
    static constexpr size_t kDepth = 4;
    struct Work {
        SharedChunk chunk;
        SharedTape tape;
    };

    void run();
    void apply(const Work& w);

    // Spent tapes' buffers for the next chunks: shared with the deleters of the tapes handed
    // out, which may outlive this thread's owner (a follower's queue).
    struct TapeSpares {
        std::mutex m;
        std::vector<std::vector<uint32_t>> spares;
    };
    std::shared_ptr<TapeSpares> tapeSpares_ = std::make_shared<TapeSpares>();

    std::atomic<bool> retired_{false};
    std::function<void()> afterChunk_;
    std::function<void(const SharedChunk&, const SharedTape&)> out_;
    replay::LiveLead lead_;
    replay::Replay replay_;
    SampleMerge merge_;
    uint64_t tapeMismatches_ = 0;

    std::mutex m_;
    std::condition_variable notEmpty_, notFull_;
    std::deque<Work> queue_;
    bool stop_ = false, done_ = false;
    bool ended_ = false; // end() or abort() ran
    std::chrono::steady_clock::duration pushWaited_{}, chunkWaited_{}; // under m_
    double cpuSeconds_ = 0; // written by the thread before it ends
    std::thread thread_;
};

// The live set kept once on a thread of its own (ReplayThread::lead) for `followers`, each
// handed every chunk with its record, and for the reading thread's replay `mine`, which follows
// it at most kAhead chunks behind through `apply` (TraceReport.cpp, Predict.cpp).
class LiveFollow {
public:
    static constexpr size_t kAhead = 8;
    // `apply` applies a chunk on `mine` (its record already given to it); false stops the read:
    // the chunks still to come are dropped.
    LiveFollow(std::vector<ReplayThread*> followers, replay::Replay& mine,
               std::function<bool(const std::vector<Event>&)> apply);
    ~LiveFollow(); // a read that ended early: the live set's thread stopped first
    LiveFollow(const LiveFollow&) = delete;
    LiveFollow& operator=(const LiveFollow&) = delete;

    // A chunk read, to the live set; then whatever of `mine`'s share is ready, or due. False once
    // `apply` stopped the read.
    bool push(SharedChunk chunk);
    // After the last chunk: the live set's thread ended, the rest followed. False as push().
    bool finish();
    // Chunks whose record `mine` did not take in step (a fault: its facts may differ).
    uint64_t mismatches() const { return mismatches_; }
    // After finish(): the CPU time of the live set's thread.
    double cpuSeconds() const { return lead_->cpuSeconds(); }

private:
    void followOne();

    replay::Replay& mine_;
    std::function<bool(const std::vector<Event>&)> apply_;
    // The live set's chunks and records in order: unbounded (at most kAhead are outstanding), so
    // the live set's thread never waits on the reader, which may be waiting to hand it a chunk.
    std::mutex m_;
    std::condition_variable ready_;
    std::deque<std::pair<SharedChunk, SharedTape>> items_;
    size_t outstanding_ = 0;
    uint64_t mismatches_ = 0;
    bool stopped_ = false;
    std::unique_ptr<ReplayThread> lead_; // last: its thread, which pushes to the above, goes first
};

// After a read whose replays followed a live set's record (`live`'s, or the reading replay's,
// Replay::leadLive), with `threads` ended: a record that was not of the events it came with would
// have made other facts, so the read's result is not to be used (ErrorCode::Internal).
Status followersInStep(const LiveFollow* live, const std::vector<ReplayThread*>& threads);

} // namespace poolscope::detail
