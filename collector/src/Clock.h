#pragma once
// The hot path's clock. Reading the TSC costs a few ns where clock_gettime costs ~20 (more in a
// VM with kvm-clock); the writer thread maps ticks to CLOCK_MONOTONIC nanoseconds, so the trace
// only ever holds monotonic times. Falls back to CLOCK_MONOTONIC where the TSC is not invariant.

#include <cstdint>
#include <ctime>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace poolscope::collector {

inline int64_t monoNowNs() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

class Clock {
public:
    // Decides once, at start: TSC when the CPU says it is constant and non-stop, unless forced.
    static void init(bool allowTsc);
    static bool usesTsc() { return useTsc_; }

    static uint64_t ticks() {
#if defined(__x86_64__)
        if (useTsc_) return __rdtsc();
#endif
        return static_cast<uint64_t>(monoNowNs());
    }

private:
    static inline bool useTsc_ = false;
};

// Maps ticks to CLOCK_MONOTONIC ns. Owned by the writer thread. The rate is re-estimated from
// the anchor at start to the latest (ticks, ns) pair, so its error shrinks as the run goes on
// and any correction stays within the jitter of one clock read.
class TickConverter {
public:
    TickConverter();
    void recalibrate();              // takes a fresh (ticks, ns) pair
    int64_t toNs(uint64_t ticks) const;

private:
    uint64_t t0_ = 0;
    int64_t ns0_ = 0;
    double nsPerTick_ = 1.0;
};

} // namespace poolscope::collector
