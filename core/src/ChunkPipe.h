#pragma once
// Reading ahead: chunks read and decoded on a second thread while the caller's thread consumes
// them (buildTimeline, the streaming report). Internal to core.

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "poolscope/Event.h"
#include "poolscope/Result.h"
#include "poolscope/TraceReader.h"

namespace poolscope::detail {

// Reads and decodes chunks on a second thread while the caller's thread builds: SQLite's page
// reads plus decoding are about as much work as the builder's, and the two need not wait for
// each other. At most kDepth decoded chunks (~400 KB each) are in flight; buffers circulate
// between the threads by swapping vectors, so events are decoded once and never copied.
class ChunkPipe {
public:
    explicit ChunkPipe(const TraceReader& reader) : thread_([this, &reader] { run(reader); }) {}
    ~ChunkPipe() {
        {
            std::lock_guard lk(m_);
            stop_ = true;
        }
        notFull_.notify_all();
        thread_.join();
    }
    ChunkPipe(const ChunkPipe&) = delete;
    ChunkPipe& operator=(const ChunkPipe&) = delete;

    // Swaps the next chunk into `chunk` (whose old buffer goes back to the reader); false at the
    // end, when status() says whether the reader finished or failed.
    bool next(std::vector<Event>& chunk) {
        std::unique_lock lk(m_);
        notEmpty_.wait(lk, [&] { return !full_.empty() || done_; });
        if (full_.empty()) return false;
        spare_.push_back(std::move(chunk));
        chunk = std::move(full_.front());
        full_.pop_front();
        lk.unlock();
        notFull_.notify_one();
        return true;
    }
    Status status() {
        std::lock_guard lk(m_);
        return status_;
    }

private:
    static constexpr size_t kDepth = 4;

    void run(const TraceReader& reader) {
        Status st = reader.forEachChunk([&](std::vector<Event>& chunk) {
            std::unique_lock lk(m_);
            notFull_.wait(lk, [&] { return stop_ || full_.size() < kDepth; });
            if (stop_) return false;
            full_.push_back(std::move(chunk));
            chunk.clear(); // moved-from: make it a valid empty vector either way
            if (!spare_.empty()) {
                chunk = std::move(spare_.back());
                spare_.pop_back();
            }
            lk.unlock();
            notEmpty_.notify_one();
            return true;
        });
        {
            std::lock_guard lk(m_);
            status_ = std::move(st);
            done_ = true;
        }
        notEmpty_.notify_one();
    }

    std::mutex m_;
    std::condition_variable notEmpty_, notFull_;
    std::deque<std::vector<Event>> full_;
    std::vector<std::vector<Event>> spare_;
    bool stop_ = false, done_ = false;
    Status status_;
    std::thread thread_; // last: starts after the members above exist
};

// Every chunk of `reader` to `consume` (which returns false to stop), read ahead on a second
// thread when `ahead`: the one loop buildTimeline and the streaming report share.
template <class Consume>
Status forEachChunk(const TraceReader& reader, bool ahead, Consume&& consume) {
    if (!ahead) return reader.forEachChunk(consume);
    ChunkPipe pipe(reader);
    std::vector<Event> chunk;
    while (pipe.next(chunk))
        if (!consume(chunk)) return {};
    return pipe.status();
}

} // namespace poolscope::detail
