#pragma once
// Single-producer/single-consumer ring of poolscope::Event. The producer is one application thread
// (inside a CUPTI callback), the consumer is the collector's writer thread. No locks, no malloc
// after construction: the hot path claims a slot, fills it in place and publishes it with one
// release store.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "poolscope/Event.h"

namespace poolscope::collector {

class EventRing {
public:
    // capacity is rounded up to a power of two (at least 64).
    explicit EventRing(size_t capacity) {
        size_t c = 64;
        while (c < capacity) c <<= 1;
        mask_ = c - 1;
        storage_ = std::unique_ptr<Event[]>(new Event[c]);
        slots_ = storage_.get();
    }
    EventRing(const EventRing&) = delete;
    EventRing& operator=(const EventRing&) = delete;

    size_t capacity() const { return mask_ + 1; }

    // Producer: a slot to fill, or nullptr when the ring is full (the caller counts a drop).
    // The tail is re-read only when the cached copy says the ring is full, so the common case
    // touches no cache line the consumer writes.
    Event* claim() {
        const uint64_t h = head_.load(std::memory_order_relaxed);
        if (h - cachedTail_ > mask_) {
            cachedTail_ = tail_.load(std::memory_order_acquire);
            if (h - cachedTail_ > mask_) return nullptr;
        }
        return &slots_[h & mask_];
    }
    // Producer: asks for the lines of the slot `ahead` events on to be brought in for writing
    // (PREFETCHW; a no-op on CPUs without it), so that a later claim() writes to lines already
    // owned instead of waiting for them.
    void prefetchForWrite(size_t ahead) const {
        const char* p = reinterpret_cast<const char*>(
            &slots_[(head_.load(std::memory_order_relaxed) + ahead) & mask_]);
#if defined(__x86_64__) || defined(__i386__)
        asm volatile("prefetchw (%0)" ::"r"(p));
        asm volatile("prefetchw (%0)" ::"r"(p + sizeof(Event) - 1));
#else
        __builtin_prefetch(p, 1);
        __builtin_prefetch(p + sizeof(Event) - 1, 1);
#endif
    }
    // Producer: makes the slot returned by the last claim() visible to the consumer.
    void publish() { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

    bool push(const Event& e) {
        Event* s = claim();
        if (!s) return false;
        *s = e;
        publish();
        return true;
    }

    // Consumer: copies up to max events into out, returns how many.
    size_t drain(Event* out, size_t max) {
        const uint64_t t = tail_.load(std::memory_order_relaxed);
        const uint64_t h = head_.load(std::memory_order_acquire);
        size_t n = static_cast<size_t>(h - t);
        if (n > max) n = max;
        for (size_t i = 0; i < n; ++i) out[i] = slots_[(t + i) & mask_];
        tail_.store(t + n, std::memory_order_release);
        return n;
    }
    bool empty() const {
        return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_relaxed);
    }
    // Producer and consumer both gone (fork child): start over.
    void reset() {
        head_.store(0, std::memory_order_relaxed);
        tail_.store(0, std::memory_order_relaxed);
        cachedTail_ = 0;
        dropped.store(0, std::memory_order_relaxed);
        droppedSeen_ = 0;
        gapFirst_.store(0, std::memory_order_relaxed);
        gapLast_.store(0, std::memory_order_relaxed);
    }

    // Producer, when claim() failed: counts the lost event and remembers when the gap began and
    // when it last grew, so the trace can mark the gap at its time. Cold: only a full ring gets
    // here.
    void noteDrop(uint64_t ticks) {
        if (gapFirst_.load(std::memory_order_relaxed) == 0)
            gapFirst_.store(ticks, std::memory_order_relaxed);
        gapLast_.store(ticks, std::memory_order_relaxed);
        dropped.fetch_add(1, std::memory_order_release);
    }
    struct Gap {
        uint64_t count = 0;
        uint64_t firstTicks = 0, lastTicks = 0; // clock ticks of the first and last lost event
    };
    // Consumer: the events lost since the last call, if any. A drop racing with this call may
    // leave its gap's first tick unknown; the gap then starts at its last tick.
    bool takeGap(Gap& g) {
        const uint64_t d = dropped.load(std::memory_order_acquire);
        if (d == droppedSeen_) return false;
        g.count = d - droppedSeen_;
        droppedSeen_ = d;
        g.lastTicks = gapLast_.load(std::memory_order_relaxed);
        g.firstTicks = gapFirst_.exchange(0, std::memory_order_relaxed);
        if (g.firstTicks == 0 || g.firstTicks > g.lastTicks) g.firstTicks = g.lastTicks;
        return true;
    }

    // Events the producer could not store because the ring was full.
    std::atomic<uint64_t> dropped{0};
    uint32_t tid = 0; // the producer thread, set once at registration

private:
    // What the producer touches per event is one cache line: head_, cachedTail_, mask_, slots_
    // (the consumer reads head_ once a pass anyway, and mask_/slots_ never change).
    alignas(64) std::atomic<uint64_t> head_{0}; // written by the producer
    uint64_t cachedTail_ = 0;                   // producer's last view of tail_
    size_t mask_ = 0;
    Event* slots_ = nullptr;                    // storage_
    alignas(64) std::atomic<uint64_t> tail_{0}; // written by the consumer
    uint64_t droppedSeen_ = 0;                  // consumer's count of drops already reported
    std::atomic<uint64_t> gapFirst_{0}, gapLast_{0}; // written by the producer's drop path
    std::unique_ptr<Event[]> storage_;
};

} // namespace poolscope::collector
