#pragma once
// A replay of the trace's events on a thread of its own, beside the streaming report's read
// (analysis/TraceReport.cpp). Internal to core.
//
// Replay is a function of its inputs: the same entities, declared knobs, events and samples in
// the same order make the same facts, so observers that follow a second replay on another thread
// see what they would see following the report's, and the read's work is split across threads
// at the cost of replaying again. The chunks are shared, not copied (ChunkShelf): each is held
// until every thread is done with it, and at most kDepth wait for one thread.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/replay/Replay.h"

namespace poolscope::detail {

using SharedChunk = std::shared_ptr<const std::vector<Event>>;

// The report's order of events and samples, the same on every replay of a read: before each
// event, the samples due by its time (as buildTimeline merges them), each marked a Sample
// whatever the reader filled in. The replay's live set is prefetched kAhead events ahead.
class SampleMerge {
public:
    static constexpr size_t kAhead = 8; // events (Replay::prefetch)

    // The samples, read whole ahead of the events; must outlive the merge's use.
    void expect(const std::vector<Event>* samples) { samples_ = samples; }
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

// Tests: ReplayThread::start() finds no thread to be had (as std::thread's EAGAIN).
void simulateNoReplayThreads(bool on);
bool replayThreadsSimulatedAway();

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
    // Starts the thread; where none can be had, push() applies each chunk on the caller's.
    void start();

    // Hands a chunk over, waiting while kDepth are queued.
    void push(SharedChunk chunk);
    // After the last chunk: joins, then the rest of the samples and a last afterChunk.
    void end();

    // After end(): how long push() waited (this thread was behind) and this thread waited for
    // a chunk (the read was behind), in seconds.
    double pushWaited() const { return std::chrono::duration<double>(pushWaited_).count(); }
    double chunkWaited() const { return std::chrono::duration<double>(chunkWaited_).count(); }
    // After end(): the CPU time its thread used (0 where it had none).
    double cpuSeconds() const { return cpuSeconds_; }

private:
    static constexpr size_t kDepth = 4;

    void run();
    void apply(const std::vector<Event>& chunk);

    std::function<void()> afterChunk_;
    replay::Replay replay_;
    SampleMerge merge_;

    std::mutex m_;
    std::condition_variable notEmpty_, notFull_;
    std::deque<SharedChunk> queue_;
    bool stop_ = false, done_ = false;
    std::chrono::steady_clock::duration pushWaited_{}, chunkWaited_{}; // under m_
    double cpuSeconds_ = 0; // written by the thread before it ends
    std::thread thread_;
};

// The calling thread's CPU time so far, in seconds (0 where it cannot be read).
double threadCpuSeconds();

} // namespace poolscope::detail
