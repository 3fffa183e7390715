// CollectorApi for the live control server: knobs applied with the collector's guard set (so the
// change is not mistaken for the application's own call) and recorded as KnobChange events.

#include <mutex>
#include <unistd.h>

#include "Clock.h"
#include "ControlHook.h"
#include "Runtime.h"

namespace poolscope::collector {

namespace {

bool isWide(PoolAttr a) {
    return a == PoolAttr::ReleaseThreshold || a == PoolAttr::ReservedMemCurrent ||
           a == PoolAttr::ReservedMemHigh || a == PoolAttr::UsedMemCurrent ||
           a == PoolAttr::UsedMemHigh;
}

Error driverError(const char* what, CUresult r) {
    const char* s = nullptr;
    cuGetErrorName(r, &s);
    return Error{ErrorCode::InvalidArgument, std::string(what) + " failed: " + (s ? s : "?")};
}

void ensureContext(ThreadState* t) {
    Runtime& rt = runtime();
    CUcontext cur = nullptr;
    if (cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur) return;
    if (rt.contextCount.load() > 0) cuCtxSetCurrent(static_cast<CUcontext>(rt.contexts[0].ctx.load()));
    (void)t;
}

class Api final : public CollectorApi {
public:
    ProcessInfo process() const override { return runtime().process; }
    std::vector<DeviceInfo> devices() const override {
        Runtime& rt = runtime();
        std::lock_guard lock(rt.coldMutex);
        return rt.devices;
    }
    std::vector<PoolInfo> pools() const override {
        std::vector<PoolInfo> out;
        Runtime& rt = runtime();
        // Asking the driver which pool is each device's default: on this (server) thread, under
        // the guard, so the query stays out of the trace.
        ThreadState* t = ownThreadState();
        Guard g(t);
        const int n = rt.poolCount.load();
        for (int i = 0; i < n; ++i) {
            const uint64_t h = rt.pools[i].handle.load();
            if (!h) continue;
            PoolInfo p;
            p.handle = h;
            p.device = rt.pools[i].device.load();
            CUdevice dev;
            CUmemoryPool def;
            if (p.device >= 0 && cuDeviceGet(&dev, p.device) == CUDA_SUCCESS &&
                cuDeviceGetDefaultMemPool(&def, dev) == CUDA_SUCCESS)
                p.kind = reinterpret_cast<uint64_t>(def) == h ? PoolKind::Default
                                                             : PoolKind::Explicit;
            out.push_back(p);
        }
        return out;
    }
    Result<uint64_t> poolAttribute(uint64_t pool, PoolAttr attr) override {
        ThreadState* t = ownThreadState();
        Guard g(t);
        ensureContext(t);
        return read(pool, attr);
    }
    Result<uint64_t> setPoolAttribute(uint64_t pool, PoolAttr attr, uint64_t value,
                                      KnobOrigin origin) override {
        ThreadState* t = ownThreadState();
        std::lock_guard lock(mutex_);
        Guard g(t);
        ensureContext(t);
        Result<uint64_t> old = read(pool, attr);
        CUresult r;
        const auto a = static_cast<CUmemPool_attribute>(attr);
        if (isWide(attr)) {
            cuuint64_t v = value;
            r = cuMemPoolSetAttribute(reinterpret_cast<CUmemoryPool>(pool), a, &v);
        } else {
            int v = static_cast<int>(value);
            r = cuMemPoolSetAttribute(reinterpret_cast<CUmemoryPool>(pool), a, &v);
        }
        Result<uint64_t> now = read(pool, attr);
        Event e;
        e.kind = EventKind::KnobChange;
        e.pool = pool;
        e.attr = static_cast<uint16_t>(attr);
        e.size = now ? now.value() : value;
        e.result = static_cast<int32_t>(r);
        e.variant = static_cast<uint8_t>(origin);
        e.flags = kFromPoolScope;
        if (old) {
            e.aux = old.value();
            e.flags |= kHasOldValue;
        }
        push(t, e);
        if (r != CUDA_SUCCESS) return driverError("cuMemPoolSetAttribute", r);
        return e.size;
    }
    Status trimPool(uint64_t pool, uint64_t minBytesToKeep, KnobOrigin origin) override {
        ThreadState* t = ownThreadState();
        std::lock_guard lock(mutex_);
        Guard g(t);
        ensureContext(t);
        CUresult r = cuMemPoolTrimTo(reinterpret_cast<CUmemoryPool>(pool), minBytesToKeep);
        Event e;
        e.kind = EventKind::KnobChange;
        e.pool = pool;
        e.attr = static_cast<uint16_t>(KnobAction::TrimTo);
        e.size = minBytesToKeep;
        e.result = static_cast<int32_t>(r);
        e.variant = static_cast<uint8_t>(origin);
        e.flags = kFromPoolScope;
        Result<uint64_t> res = read(pool, PoolAttr::ReservedMemCurrent);
        Result<uint64_t> used = read(pool, PoolAttr::UsedMemCurrent);
        if (res && used) {
            e.reserved = res.value();
            e.used = used.value();
            e.flags |= kHasWatermarks;
            if (PoolSlot* s = findPool(pool)) s->reserved.store(e.reserved);
        }
        push(t, e);
        if (r != CUDA_SUCCESS) return driverError("cuMemPoolTrimTo", r);
        return {};
    }

private:
    static Result<uint64_t> read(uint64_t pool, PoolAttr attr) {
        CUresult r;
        uint64_t out;
        const auto a = static_cast<CUmemPool_attribute>(attr);
        if (isWide(attr)) {
            cuuint64_t v = 0;
            r = cuMemPoolGetAttribute(reinterpret_cast<CUmemoryPool>(pool), a, &v);
            out = v;
        } else {
            int v = 0;
            r = cuMemPoolGetAttribute(reinterpret_cast<CUmemoryPool>(pool), a, &v);
            out = static_cast<uint64_t>(v);
        }
        if (r != CUDA_SUCCESS) return driverError("cuMemPoolGetAttribute", r);
        return out;
    }
    static void push(ThreadState* t, Event& e) {
        Runtime& rt = runtime();
        if (!t->ring) return;
        e.tid = t->tid;
        e.tsNs = static_cast<int64_t>(Clock::ticks());
        if (PoolSlot* s = findPool(e.pool)) e.device = static_cast<int16_t>(s->device.load());
        Event* slot = t->ring->claim();
        if (!slot) {
            t->ring->dropped.fetch_add(1);
            return;
        }
        e.seq = rt.seq.fetch_add(1);
        *slot = e;
        t->ring->publish();
    }
    std::mutex mutex_; // one knob at a time: each is read-set-read
};

} // namespace

std::unique_ptr<CollectorApi> makeCollectorApi() { return std::make_unique<Api>(); }

} // namespace poolscope::collector
