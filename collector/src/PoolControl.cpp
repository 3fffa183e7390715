// The collector's side of the live control channel: control::PoolControl implemented with the CUDA
// driver API, and the server's start (POOLSCOPE_LISTEN). Every driver call runs with the
// collector's guard set, so the application's trace never shows it as the application's own
// call; what a change means is decided by the server (RequestHandler, makeKnobChange), which
// hands the finished KnobChange back through recordKnobChange.

#include <cstdio>
#include <unistd.h>

#include "Clock.h"
#include "ControlHook.h"
#include "ControlServer.h"
#include "Log.h"
#include "Runtime.h"
#include "poolscope/control/Discovery.h"

namespace poolscope::collector {

namespace {

using control::PoolState;

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

void ensureContext() {
    Runtime& rt = runtime();
    CUcontext cur = nullptr;
    if (cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur) return;
    if (rt.contextCount.load() > 0) cuCtxSetCurrent(static_cast<CUcontext>(rt.contexts[0].ctx.load()));
}

std::string ownCommandLine() {
    std::string s;
    if (FILE* f = std::fopen("/proc/self/cmdline", "rb")) {
        char buf[4096];
        size_t n = std::fread(buf, 1, sizeof buf, f);
        std::fclose(f);
        s.assign(buf, n);
    }
    while (!s.empty() && s.back() == '\0')
        s.pop_back();
    for (char& c : s)
        if (c == '\0') c = ' ';
    return s;
}

class CollectorPoolControl final : public control::PoolControl {
public:
    control::TargetDescription describe() override {
        Runtime& rt = runtime();
        control::TargetDescription d;
        d.process = rt.process;
        {
            std::lock_guard lock(rt.coldMutex);
            d.devices = rt.devices;
        }
        // What the collector leaves empty, the process itself can tell (attach lists show it).
        if (d.process.commandLine.empty()) d.process.commandLine = ownCommandLine();
        if (d.process.host.empty()) {
            char host[256] = {};
            if (gethostname(host, sizeof host - 1) == 0) d.process.host = host;
        }
        return d;
    }
    Result<std::vector<PoolState>> listPools() override {
        std::vector<PoolState> out;
        for (const PoolInfo& info : pools())
            out.push_back(read(info));
        return out;
    }
    Result<PoolState> poolState(uint64_t pool) override {
        for (const PoolInfo& info : pools())
            if (info.handle == pool) return read(info);
        return unknown(pool);
    }
    Result<uint64_t> getAttribute(uint64_t pool, PoolAttr attr) override {
        if (!known(pool)) return unknown(pool);
        Guard g(ownThreadState());
        ensureContext();
        return readAttr(pool, attr);
    }
    Status setAttribute(uint64_t pool, PoolAttr attr, uint64_t value) override {
        if (!known(pool)) return unknown(pool);
        Guard g(ownThreadState());
        ensureContext();
        return writeAttr(pool, attr, value);
    }
    Status trimTo(uint64_t pool, uint64_t minBytesToKeep) override {
        if (!known(pool)) return unknown(pool);
        Guard g(ownThreadState());
        ensureContext();
        CUresult r = cuMemPoolTrimTo(reinterpret_cast<CUmemoryPool>(pool), minBytesToKeep);
        if (r != CUDA_SUCCESS) return driverError("cuMemPoolTrimTo", r);
        // The hot path caches reserved per pool (a Free reads nothing): the trim changed it.
        if (auto res = readAttr(pool, PoolAttr::ReservedMemCurrent))
            if (PoolSlot* s = findPool(pool)) s->reserved.store(*res);
        return {};
    }
    Status resetHighWatermarks(uint64_t pool) override {
        if (!known(pool)) return unknown(pool);
        Guard g(ownThreadState());
        ensureContext();
        // The driver resets a high watermark when it is set to 0.
        for (PoolAttr a : {PoolAttr::ReservedMemHigh, PoolAttr::UsedMemHigh})
            if (Status s = writeAttr(pool, a, 0); !s) return s;
        return {};
    }
    void recordKnobChange(const Event& change) override {
        Runtime& rt = runtime();
        ThreadState* t = ownThreadState();
        if (!t->ring) return;
        Event e = change;
        e.tid = t->tid;
        e.tsNs = static_cast<int64_t>(Clock::ticks());
        if (PoolSlot* s = findPool(e.pool)) e.device = static_cast<int16_t>(s->device.load());
        Event* slot = t->ring->claim();
        if (!slot) {
            t->ring->noteDrop(static_cast<uint64_t>(e.tsNs));
            return;
        }
        e.seq = rt.seq.fetch_add(1);
        *slot = e;
        t->ring->publish();
    }

private:
    static std::vector<PoolInfo> pools() {
        std::vector<PoolInfo> out;
        Runtime& rt = runtime();
        // Asking the driver which pool is each device's default: on this (server) thread, under
        // the guard, so the query stays out of the trace.
        Guard g(ownThreadState());
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
    static bool known(uint64_t pool) {
        for (const PoolInfo& info : pools())
            if (info.handle == pool) return true;
        return false;
    }
    static Error unknown(uint64_t pool) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "no pool with handle 0x%llx in this process",
                      static_cast<unsigned long long>(pool));
        return Error{ErrorCode::NotFound, buf};
    }
    static PoolState read(const PoolInfo& info) {
        Guard g(ownThreadState());
        ensureContext();
        PoolState s;
        s.info = info;
        auto get = [&](PoolAttr a) {
            auto v = readAttr(info.handle, a);
            return v ? *v : 0;
        };
        s.releaseThreshold = get(PoolAttr::ReleaseThreshold);
        s.reuseFollowEventDependencies = get(PoolAttr::ReuseFollowEventDependencies) != 0;
        s.reuseAllowOpportunistic = get(PoolAttr::ReuseAllowOpportunistic) != 0;
        s.reuseAllowInternalDependencies = get(PoolAttr::ReuseAllowInternalDependencies) != 0;
        s.reservedCurrent = get(PoolAttr::ReservedMemCurrent);
        s.reservedHigh = get(PoolAttr::ReservedMemHigh);
        s.usedCurrent = get(PoolAttr::UsedMemCurrent);
        s.usedHigh = get(PoolAttr::UsedMemHigh);
        return s;
    }
    // Call with the guard held.
    static Result<uint64_t> readAttr(uint64_t pool, PoolAttr attr) {
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
    static Status writeAttr(uint64_t pool, PoolAttr attr, uint64_t value) {
        CUresult r;
        const auto a = static_cast<CUmemPool_attribute>(attr);
        if (isWide(attr)) {
            cuuint64_t v = value;
            r = cuMemPoolSetAttribute(reinterpret_cast<CUmemoryPool>(pool), a, &v);
        } else {
            int v = static_cast<int>(value);
            r = cuMemPoolSetAttribute(reinterpret_cast<CUmemoryPool>(pool), a, &v);
        }
        if (r != CUDA_SUCCESS) return driverError("cuMemPoolSetAttribute", r);
        return {};
    }
};

} // namespace

std::unique_ptr<LiveSink> startControlServer(const std::string& listen) {
    auto path = control::socketPathFromListen(listen);
    if (!path) {
        logOnce(LogKey::Control, "%s; no live control", path.error().message.c_str());
        return nullptr;
    }
    if (!*path) return nullptr; // POOLSCOPE_LISTEN=0
    // Stateless (every call asks the driver or the runtime), and never destroyed: a forked
    // child abandons the server that refers to it.
    static CollectorPoolControl* target = new CollectorPoolControl;
    control::ServerOptions o;
    o.socketPath = **path;
    o.log = [](const std::string& line) { logLine("%s", line.c_str()); };
    auto server = std::make_unique<control::ControlServer>(*target, std::move(o));
    if (Status s = server->start(); !s) {
        logOnce(LogKey::Control, "live control is off: %s", s.error().message.c_str());
        return nullptr;
    }
    return server;
}

} // namespace poolscope::collector
