// The periodic sampler: reads reserved/used (and their high watermarks) of every known pool so
// the graphs are continuous between events. A pool whose four values did not change since its
// last sample is skipped, except for a heartbeat once a second: a step series needs no
// repeated points, and an idle program then costs almost nothing in the trace.

#include <chrono>
#include <time.h>

#include "Clock.h"
#include "Runtime.h"

namespace poolscope::collector {

namespace {
struct Last {
    uint64_t handle = 0;
    PoolWatermarks w;
    int64_t at = 0;
};
} // namespace

void samplerLoop() {
    Runtime& rt = runtime();
    ThreadState* t = ownThreadState();
    pthread_setname_np(pthread_self(), "poolscope-smp");
    static Last last[Runtime::kMaxPools];
    const int64_t periodNs = static_cast<int64_t>(rt.config.samplePeriodMs * 1e6);
    constexpr int64_t kHeartbeatNs = 1'000'000'000;
    bool haveContext = false;
    int64_t next = monoNowNs();
    while (!rt.stopping.load(std::memory_order_acquire)) {
        next += periodNs;
        const int64_t now = monoNowNs();
        if (next < now) next = now; // fell behind (descheduled): no burst to catch up
        timespec ts{static_cast<time_t>(next / 1'000'000'000), static_cast<long>(next % 1'000'000'000)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
        if (!rt.enabled.load(std::memory_order_relaxed) || !t->ring) continue;
        if (!haveContext) {
            // Attribute reads want a context on this thread: borrow the application's.
            if (rt.contextCount.load(std::memory_order_acquire) == 0) continue;
            Guard g(t);
            cuCtxSetCurrent(static_cast<CUcontext>(rt.contexts[0].ctx.load()));
            haveContext = true;
        }
        const int n = rt.poolCount.load(std::memory_order_acquire);
        for (int i = 0; i < n; ++i) {
            const uint64_t h = rt.pools[i].handle.load(std::memory_order_acquire);
            if (!h) continue;
            PoolWatermarks w;
            bool ok;
            {
                Guard g(t);
                ok = readWatermarks(h, w);
            }
            if (!ok) continue;
            const uint64_t ticks = Clock::ticks();
            const int64_t tnow = monoNowNs();
            Last& l = last[i];
            if (l.handle == h && l.w == w && tnow - l.at < kHeartbeatNs) continue;
            l = {h, w, tnow};
            pushSample(t, h, rt.pools[i], ticks, w);
        }
    }
}

} // namespace poolscope::collector
