#pragma once
// Between the threads' rings and the writer. A ring holds a few milliseconds of a busy thread's
// events; the writer thread, which orders, resolves, encodes and commits, stalls for longer than
// that now and then (a WAL checkpoint, a slow disk), and a ring that fills loses events. So a
// drainer thread that does nothing else empties the rings into the spool every millisecond, and
// the writer takes from the spool: the writer's stalls are absorbed by the spool's bound instead
// of the rings'. Past the bound the drainer leaves events in the rings, which then drop and count
// as before: memory stays bounded whatever the writer does.
//
// Every ring is drained under the spool's mutex, so whichever thread fills (the drainer, or the
// writer when no drainer runs: tests, exit, a fatal signal's flush) is the rings' only consumer
// at that moment. The writer's take() is a swap under the same mutex.

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <vector>

#include "RingRegistry.h"
#include "poolscope/Event.h"

namespace poolscope::collector {

// A ring's lost events (EventRing::Gap) with the producer thread named; ticks are raw clock.
struct SpoolGap {
    uint32_t tid = 0;
    EventRing::Gap gap;
};

class Spool {
public:
    // At most maxEvents wait in the spool (and as many again in the writer's hands).
    explicit Spool(size_t maxEvents) : max_(std::max<size_t>(maxEvents, 1024)) {}

    size_t maxEvents() const { return max_; }

    // Moves what the rings hold into the spool, up to its bound. Returns the events moved.
    size_t fill(RingRegistry& rings) {
        std::lock_guard lock(mutex_);
        size_t moved = 0;
        const size_t n = rings.count();
        for (size_t i = 0; i < n; ++i) {
            EventRing* r = rings.at(i);
            if (!r) continue;
            SpoolGap g{r->tid, {}};
            if (r->takeGap(g.gap)) gaps_.push_back(g);
            // Through a scratch buffer that stays in L2: the spool's memory is written once.
            while (events_.size() < max_) {
                const size_t room = std::min(max_ - events_.size(), kStep);
                const size_t got = r->drain(scratch_.data(), room);
                events_.insert(events_.end(), scratch_.begin(), scratch_.begin() + long(got));
                moved += got;
                if (got < room) break;
            }
        }
        if (events_.size() > peak_) peak_ = events_.size();
        return moved;
    }

    // The writer: everything in the spool, appended to events (whose capacity comes back to the
    // spool on the next take, so steady state allocates nothing).
    void take(std::vector<Event>& events, std::vector<SpoolGap>& gaps) {
        events.clear();
        std::lock_guard lock(mutex_);
        events_.swap(events);
        gaps.insert(gaps.end(), gaps_.begin(), gaps_.end());
        gaps_.clear();
    }

    // The most events that waited in the spool at once.
    size_t peak() const {
        std::lock_guard lock(mutex_);
        return peak_;
    }

private:
    static constexpr size_t kStep = 1024; // 96 KiB
    const size_t max_;
    std::vector<Event> scratch_ = std::vector<Event>(kStep);
    mutable std::mutex mutex_;
    std::vector<Event> events_;
    std::vector<SpoolGap> gaps_;
    size_t peak_ = 0;
};

} // namespace poolscope::collector
