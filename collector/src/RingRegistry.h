#pragma once
// Every producer thread's ring, registered once (the first time the thread is traced) and kept
// for the life of the process so the writer can drain what a finished thread left behind.
// Registration is a lock-free append; the writer reads the array up to count().

#include <atomic>
#include <cstddef>

#include "EventRing.h"

namespace poolscope::collector {

class RingRegistry {
public:
    static constexpr size_t kMaxRings = 4096;

    // Returns false when the table is full (the caller then records nothing on that thread and
    // counts drops; 4096 tracing threads is far beyond real programs).
    bool add(EventRing* r) {
        const size_t i = count_.fetch_add(1, std::memory_order_acq_rel);
        if (i >= kMaxRings) {
            count_.store(kMaxRings, std::memory_order_release);
            return false;
        }
        rings_[i].store(r, std::memory_order_release);
        return true;
    }
    size_t count() const {
        const size_t n = count_.load(std::memory_order_acquire);
        return n < kMaxRings ? n : kMaxRings;
    }
    // May be null for a moment while a registration is in flight.
    EventRing* at(size_t i) const { return rings_[i].load(std::memory_order_acquire); }

    // Fork child: the other threads' rings belong to threads that do not exist here.
    void resetKeeping(EventRing* keep) {
        for (size_t i = 0; i < count(); ++i) rings_[i].store(nullptr, std::memory_order_relaxed);
        count_.store(0, std::memory_order_relaxed);
        if (keep) {
            keep->reset();
            add(keep);
        }
    }

private:
    std::atomic<size_t> count_{0};
    std::atomic<EventRing*> rings_[kMaxRings] = {};
};

} // namespace poolscope::collector
