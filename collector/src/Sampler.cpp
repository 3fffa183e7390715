// The periodic sampler: reads reserved/used (and their high watermarks) of every known pool so
// the graphs are continuous between events. A pool whose four values did not change since its
// last sample is skipped, except for a heartbeat once a second: a step series needs no
// repeated points, and an idle program then costs almost nothing in the trace.

#include <chrono>
#include <cstring>
#include <time.h>

#include "Clock.h"
#include "Runtime.h"

namespace poolscope::collector {

namespace {
struct Last {
    uint64_t handle = 0;
    uint64_t v[4] = {};
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
    static const CUmemPool_attribute kAttrs[4] = {
        CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
        CU_MEMPOOL_ATTR_USED_MEM_CURRENT, CU_MEMPOOL_ATTR_USED_MEM_HIGH};
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
            uint64_t v[4];
            bool ok = true;
            {
                Guard g(t);
                for (int k = 0; k < 4 && ok; ++k) {
                    cuuint64_t x = 0;
                    ok = cuMemPoolGetAttribute(reinterpret_cast<CUmemoryPool>(h), kAttrs[k], &x) ==
                         CUDA_SUCCESS;
                    v[k] = x;
                }
            }
            if (!ok) continue;
            const uint64_t ticks = Clock::ticks();
            const int64_t tnow = monoNowNs();
            Last& l = last[i];
            if (l.handle == h && std::memcmp(l.v, v, sizeof v) == 0 && tnow - l.at < kHeartbeatNs)
                continue;
            l.handle = h;
            std::memcpy(l.v, v, sizeof v);
            l.at = tnow;
            Event* e = t->ring->claim();
            if (!e) {
                t->ring->dropped.fetch_add(1, std::memory_order_relaxed);
                continue;
            }
            *e = Event{};
            e->kind = EventKind::Sample;
            e->tsNs = static_cast<int64_t>(ticks);
            e->pool = h;
            e->reserved = v[0];
            e->size = v[1];
            e->used = v[2];
            e->aux = v[3];
            e->device = static_cast<int16_t>(rt.pools[i].device.load(std::memory_order_relaxed));
            e->tid = t->tid;
            e->flags = kHasWatermarks;
            t->ring->publish();
        }
    }
}

} // namespace poolscope::collector
