#include "Runtime.h"

#include <bit>
#include <cstring>
#include <new>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "Clock.h"
#include "Decode.h"
#include "Log.h"
#include "PoolAttributes.h"
#include "poolscope/EventFields.h"

namespace poolscope::collector {

namespace {
constexpr size_t kRingPrefetchAhead = 8;

// initial-exec: a dlopen'ed module otherwise reaches its TLS through __tls_get_addr on every
// callback. One pointer fits the static TLS surplus glibc keeps for exactly this.
thread_local ThreadState* t_state __attribute__((tls_model("initial-exec"))) = nullptr;

// Runtime::sharedPtrPools: one word per entry, the pointer's low 48 bits and its pool's slot
// index + 1 above them, so that a reader never sees one alloc's pointer with another's pool.
// Direct-mapped: a newer alloc hashing to the same entry replaces the older, whose free then
// asks the driver as before. An alloc is recorded in its exit callback before the program can
// hand the pointer to another thread, so a free finds its entry whenever it was kept.
constexpr int kPtrBits = 48;
constexpr uint64_t kPtrMask = (uint64_t{1} << kPtrBits) - 1;

constexpr int kSharedBits = std::countr_zero(Runtime::kSharedPtrCache);
static_assert(Runtime::kSharedPtrCache == size_t{1} << kSharedBits);

inline std::atomic<uint64_t>& sharedEntry(Runtime& rt, uint64_t ptr) {
    const uint64_t h = (ptr >> 8) * 0x9E3779B97F4A7C15ull;
    return rt.sharedPtrPools[h >> (64 - kSharedBits)];
}
static_assert(Runtime::kMaxPools < (1 << (64 - kPtrBits)) - 1);

inline void sharedRemember(Runtime& rt, uint64_t ptr, const PoolSlot* slot) {
    if (!slot || (ptr & ~kPtrMask)) return;
    const auto index = static_cast<uint64_t>(slot - rt.pools);
    sharedEntry(rt, ptr).store(ptr | ((index + 1) << kPtrBits), std::memory_order_relaxed);
}

// The pool of a recorded alloc's pointer, or 0. A free clears the entry (`take`): the address
// may come back from an alloc this table never sees (cudaMalloc, an imported pool).
inline uint64_t sharedFind(Runtime& rt, uint64_t ptr, bool take) {
    if (!ptr || (ptr & ~kPtrMask)) return 0;
    std::atomic<uint64_t>& en = sharedEntry(rt, ptr);
    const uint64_t v = en.load(std::memory_order_relaxed);
    if ((v & kPtrMask) != ptr || !(v >> kPtrBits)) return 0;
    if (take) en.store(0, std::memory_order_relaxed);
    // The index came from sharedRemember's slot, which stays in pools[] for good (a destroyed
    // pool's handle reads 0); the bound check needs no other line than the slot's.
    const uint64_t index = (v >> kPtrBits) - 1;
    if (index >= uint64_t(Runtime::kMaxPools)) return 0;
    return rt.pools[index].handle.load(std::memory_order_relaxed);
}

__attribute__((cold, noinline)) ThreadState* makeThreadState(bool guarded) {
    Runtime& rt = runtime();
    auto* t = new (std::nothrow) ThreadState();
    if (!t) return nullptr;
    t->tid = static_cast<uint32_t>(syscall(SYS_gettid));
    t->guard = guarded ? 1 : 0;
    t->ring = new (std::nothrow) EventRing(rt.config.ringEvents);
    if (t->ring) t->ring->tid = t->tid;
    if (!t->ring || !rt.rings.add(t->ring)) {
        logOnce(LogKey::Ring, "too many threads to trace; events of further threads are dropped");
        delete t->ring;
        t->ring = nullptr;
    }
    t_state = t;
    return t;
}

uint64_t readAttr(uint64_t pool, CUmemPool_attribute attr, bool& ok) {
    cuuint64_t v = 0;
    if (cuMemPoolGetAttribute(reinterpret_cast<CUmemoryPool>(pool), attr, &v) != CUDA_SUCCESS)
        ok = false;
    return v;
}

inline PoolSlot* slotFor(ThreadState* t, uint64_t pool) {
    if (t->lastPool == pool && t->lastSlot) return t->lastSlot;
    PoolSlot* s = findPool(pool);
    if (!s) s = registerPool(pool, t->lastDevice);
    t->lastPool = pool;
    t->lastSlot = s;
    return s;
}

// The implicit release the collector itself observed: reserved memory went down across a
// synchronize. CUPTI's MEMORY_POOL activity reports only some of these (and late); this one is
// exact and in place. Its seq is one of the slots the synchronize reserved just below its own.
Event releaseEvent(const Event& sync, uint64_t pool, uint64_t before, uint64_t after,
                   uint64_t used) {
    Event e;
    ReleaseFields{after, before}.into(e);
    e.pool = pool;
    e.reserved = after;
    e.used = used;
    e.flags = kHasWatermarks;
    e.correlation = sync.correlation;
    e.stream = sync.stream;
    e.tid = sync.tid;
    e.device = sync.device;
    e.tsNs = sync.tsNs;
    return e;
}

void pushEvent(ThreadState* t, const Event& e) {
    Event* slot = t->ring ? t->ring->claim() : nullptr;
    if (!slot) {
        if (t->ring) t->ring->noteDrop(static_cast<uint64_t>(e.tsNs));
        return;
    }
    *slot = e;
    t->ring->publish();
}

// The implicit release at a synchronize can shrink every pool, not only the device's current
// one: re-read them all, refresh the cached reserved values, and record each as a sample at the
// synchronize's own timestamp so every pool's graph shows the release exactly where it happened.
// Every pool's sample, the synchronize's own included, carries the driver's high watermarks:
// the trace's peaks are the driver's at each synchronize.
// Synchronizes are rare next to allocs; a few reads per pool are affordable here.
__attribute__((cold, noinline)) void syncOtherPools(ThreadState* t, uint64_t skip, uint64_t ticks,
                                                    const Event* sync, uint64_t syncSeq,
                                                    int slotsUsed) {
    Runtime& rt = runtime();
    const int n = rt.poolCount.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i) {
        PoolSlot& s = rt.pools[i];
        const uint64_t h = s.handle.load(std::memory_order_relaxed);
        PoolWatermarks w;
        if (!h || !readWatermarks(h, w)) continue;
        // The synchronize's own pool: its event carries reserved and used (and its release,
        // if any, is recorded by the caller); the sample adds the driver's high watermarks.
        const uint64_t before = h == skip ? w.reserved
                                          : s.reserved.exchange(w.reserved, std::memory_order_relaxed);
        if (sync && syncSeq && w.reserved < before) {
            Event rel = releaseEvent(*sync, h, before, w.reserved, w.used);
            rel.device = static_cast<int16_t>(s.device.load(std::memory_order_relaxed));
            rel.tsNs = static_cast<int64_t>(ticks);
            rel.seq = slotsUsed < int(kReleaseSlots)
                          ? syncSeq - kReleaseSlots + uint64_t(slotsUsed++)
                          : runtime().seq.fetch_add(1, std::memory_order_relaxed);
            pushEvent(t, rel);
        }
        pushSample(t, h, s, ticks, w);
    }
}

// A call made with no context bound to the thread (CUPTI's cb.context is null): a worker thread's
// first cudaMallocAsync before the runtime bound the primary context, or a driver call the
// runtime makes first and retries. Cold: the context the call bound, else the device of the
// pool or of the returned pointer. -1 only when the driver knows none (a call that failed).
__attribute__((cold, noinline)) int deviceWithoutContext(ThreadState* t, const Event& ev,
                                                         uint8_t needs) {
    CUcontext ctx = nullptr;
    {
        Guard g(t);
        if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) ctx = nullptr;
    }
    if (ctx) {
        const int dev = deviceOfContext(t, ctx);
        if (dev >= 0) return dev;
    }
    const uint64_t pool = (needs & kNeedPtrPool) ? t->enterPool : ev.pool;
    if (pool)
        if (PoolSlot* s = findPool(pool)) {
            const int dev = s->device.load(std::memory_order_relaxed);
            if (dev >= 0) return dev;
        }
    if (ev.ptr && ev.result == 0) {
        int ordinal = -1;
        CUresult r;
        {
            Guard g(t);
            r = cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ev.ptr);
        }
        if (r == CUDA_SUCCESS && ordinal >= 0 && ordinal < Runtime::kMaxDevices) {
            ensureDevice(ordinal);
            return ordinal;
        }
    }
    return -1;
}

__attribute__((hot)) void onEnter(ThreadState* t, CUpti_CallbackId cbid, const CUpti_CallbackData& cb) {
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister:
        // As for a free below: the address may come back from another thread's call before
        // this one returns.
        t->enterSeq = runtime().seq.fetch_add(1, std::memory_order_relaxed);
        return;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
        // cudaFree waits for the whole device: its duration is worth the clock read.
        t->enterTicks = Clock::ticks();
        [[fallthrough]];
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolExportPointer: {
        const bool isFree = cbid != CUPTI_DRIVER_TRACE_CBID_cuMemPoolExportPointer;
        uint64_t ptr = isFree ? freePointer(cbid, cb)
                              : static_cast<const cuMemPoolExportPointer_params*>(cb.functionParams)->ptr;
        // A free takes its sequence number before the driver releases the block: another
        // thread may get the same address from its next alloc before this call returns, and
        // that alloc must come after this free in the trace.
        Runtime& rt = runtime();
        if (isFree) t->enterSeq = rt.seq.fetch_add(1, std::memory_order_relaxed);
        if (const uint64_t pool = sharedFind(rt, ptr, isFree)) {
            t->enterPool = pool;
            t->enterHit = true; // a recorded alloc: the trace knows its size
            return;
        }
        t->enterHit = false;
        // Not allocated through a recorded call, or its entry was taken by a newer alloc: ask
        // the driver (the pointer is still valid here, before the free).
        CUmemoryPool pool = nullptr;
        Guard g(t);
        if (ptr && cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, ptr) !=
                       CUDA_SUCCESS)
            pool = nullptr;
        t->enterPool = reinterpret_cast<uint64_t>(pool);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAttribute: {
        uint64_t pool;
        int attr;
        t->oldValid = false;
        if (!setAttributeTarget(cbid, cb, pool, attr)) return;
        Guard g(t);
        cuuint64_t v64 = 0;
        int v32 = 0;
        const bool wide = attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD ||
                          attr >= CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT;
        CUresult r = cuMemPoolGetAttribute(reinterpret_cast<CUmemoryPool>(pool),
                                           static_cast<CUmemPool_attribute>(attr),
                                           wide ? static_cast<void*>(&v64) : &v32);
        t->oldValid = r == CUDA_SUCCESS;
        t->oldValue = wide ? v64 : static_cast<uint64_t>(v32);
        return;
    }
    default:
        return;
    }
}

// The allocating thread's call site (Stacks.h). Out of line: the unwind and the cache lookup are
// the cost of the stacks mode, and the callback without stacks stays as it was.
__attribute__((noinline)) uint32_t captureSite(ThreadState* t) {
    Runtime& rt = runtime();
    if (!t->sites) [[unlikely]] {
        t->sites = rt.stacks.newThread(t->tid);
        if (!t->sites) return 0;
    }
    return rt.stacks.capture(*t->sites);
}

// A peer copy names the contexts of its two sides: their devices (the stream's is the event's).
__attribute__((cold, noinline)) void peerCopyDevices(ThreadState* t, CUpti_CallbackId cbid,
                                                     const CUpti_CallbackData& cb, Event& ev) {
    void* src = nullptr;
    void* dst = nullptr;
    if (!peerContexts(cbid, cb, src, dst)) return;
    PeerCopyFields c = PeerCopyFields::of(ev);
    c.srcDevice = deviceOfAnyContext(t, src);
    c.dstDevice = deviceOfAnyContext(t, dst);
    c.into(ev);
    if (t->inRuntimePeer) t->driverPeerInside = true;
    if (runtime().config.debug)
        logLine("peer copy: driver callback %u, GPU %d -> GPU %d, %llu B", cbid, c.srcDevice,
                c.dstDevice, static_cast<unsigned long long>(c.bytes));
}

// A runtime cudaMemcpyPeer(Async). Its driver call is a cuMemcpyPeer* between two devices,
// recorded at the driver with both contexts; where the runtime made none (a copy within one
// device may go through a plain device-to-device copy), the runtime call is the peer copy.
__attribute__((cold, noinline)) void onRuntime(ThreadState* t, CUpti_CallbackId cbid,
                                               const CUpti_CallbackData& cb) {
    if (cb.callbackSite == CUPTI_API_ENTER) {
        t->inRuntimePeer = true;
        t->driverPeerInside = false;
        return;
    }
    if (!t->inRuntimePeer) return; // its enter came before the collector started
    t->inRuntimePeer = false;
    const bool seen = t->driverPeerInside;
    t->driverPeerInside = false;
    Event ev;
    if (!decodeRuntimePeerCopy(cbid, cb, ev)) return;
    if (runtime().config.debug)
        logLine("peer copy: runtime callback %u, GPU %d -> GPU %d, %s", cbid,
                PeerCopyFields::of(ev).srcDevice, PeerCopyFields::of(ev).dstDevice,
                seen ? "recorded at the driver" : "no driver peer copy inside: recorded here");
    if (seen) return;
    ev.tid = t->tid;
    if (isExplicitStream(ev.stream)) ev.device = static_cast<int16_t>(streamDevice(t, ev.stream));
    if (ev.device < 0 && cb.context) ev.device = static_cast<int16_t>(deviceOfContext(t, cb.context));
    ev.tsNs = static_cast<int64_t>(Clock::ticks());
    ev.seq = runtime().seq.fetch_add(1, std::memory_order_relaxed);
    pushEvent(t, ev);
}

// cuMemPoolSetAccess with several descriptors: the first is the call's event, each further one
// an event of its own (same call, time and correlation) right after it.
__attribute__((cold, noinline)) void moreAccessDescriptors(ThreadState* t, CUpti_CallbackId cbid,
                                                           const CUpti_CallbackData& cb,
                                                           const Event& first) {
    Event e = first;
    const size_t n = accessDescriptor(cbid, cb, 0, e);
    // A device can be named once per location; more than that many is not a real call.
    const size_t limit = n < size_t(Runtime::kMaxDevices) * 2 ? n : size_t(Runtime::kMaxDevices) * 2;
    for (size_t i = 1; i < limit; ++i) {
        e = first;
        accessDescriptor(cbid, cb, i, e);
        e.seq = runtime().seq.fetch_add(1, std::memory_order_relaxed);
        pushEvent(t, e);
    }
}

// Always inlined into onCallback, with the decode it inlines: GCC's size estimate counts the
// decode's stores of fields the fresh event already holds (they fold away once inlined here),
// and would otherwise leave one call more on every exit callback.
__attribute__((hot, always_inline)) inline void onExit(ThreadState* t, CUpti_CallbackId cbid,
                                                      const CUpti_CallbackData& cb) {
    Runtime& rt = runtime();
    const uint64_t ticks = Clock::ticks();
    // Built here and copied into the ring slot once at the end: the slot's lines are written
    // only by that copy, never read back field by field while they are still on their way in.
    Event ev;
    const Decoded d = decodeExit(cbid, cb, ev);
    if (!d.record) return;
    ev.tid = t->tid;
    // An explicit stream's own device first: the calling thread's context may be another
    // device's (a cudaMallocAsync on device 1's stream while device 0 is current allocates from
    // device 1's current pool). A destroyed stream is only looked up in the cache.
    if (ev.device < 0 && isExplicitStream(ev.stream) && ev.kind != EventKind::StreamCreate) {
        if (ev.kind != EventKind::StreamDestroy) {
            ev.device = static_cast<int16_t>(streamDevice(t, ev.stream));
        } else {
            const ThreadState::StreamEntry& se = t->streams[streamCacheIndex(ev.stream)];
            if (se.stream == ev.stream &&
                se.epoch == rt.streamEpoch.load(std::memory_order_relaxed))
                ev.device = static_cast<int16_t>(se.device);
        }
    }
    // A set-access descriptor's device is the location given access (-1: not a device).
    if (ev.device < 0 && cb.context && ev.kind != EventKind::PoolSetAccess)
        ev.device = static_cast<int16_t>(deviceOfContext(t, cb.context));
    if (ev.device < 0 && (d.needs & (kNeedDevicePool | kNeedPtrPool | kNeedUsed))) [[unlikely]]
        ev.device = static_cast<int16_t>(deviceWithoutContext(t, ev, d.needs));

    if (d.needs & kNeedDevicePool) {
        if (ev.device >= 0 && ev.device < Runtime::kMaxDevices)
            ev.pool = rt.currentPool[ev.device].load(std::memory_order_relaxed);
    } else if (d.needs & kNeedPtrPool) {
        ev.pool = t->enterPool;
    }

    const WatermarkMode wm = rt.watermarks;
    uint64_t reservedBefore = 0;
    if (ev.pool && (d.needs & (kNeedReserved | kNeedUsed)) && wm != WatermarkMode::Off) {
        PoolSlot* slot = slotFor(t, ev.pool);
        Guard g(t);
        bool ok = true;
        // Default mode: a successful alloc or free moves the pool's used bytes by exactly its
        // size (measured on the driver), so the writer derives `used` in seq order from the
        // sizes and the last value read (kUsedDerived) and the hot path skips that read. A free
        // of a pointer this thread did not allocate (its size is known only to the writer, and
        // only if the alloc was recorded) and imported pools are read.
        const bool derive =
            wm == WatermarkMode::Exit && slot && ev.result == 0 &&
            !slot->imported.load(std::memory_order_relaxed) &&
            (ev.kind == EventKind::Alloc || (ev.kind == EventKind::Free && t->enterHit));
        if (derive)
            ev.flags |= kUsedDerived;
        else
            ev.used = readAttr(ev.pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, ok);
        if ((d.needs & kNeedReserved) || wm == WatermarkMode::Full || !slot) {
            if (slot) reservedBefore = slot->reserved.load(std::memory_order_relaxed);
            ev.reserved = readAttr(ev.pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, ok);
            if (slot && ok) slot->reserved.store(ev.reserved, std::memory_order_relaxed);
        } else {
            // A free returns memory to the pool, never to the OS: reserved is what the last
            // alloc, synchronize or trim read.
            ev.reserved = slot->reserved.load(std::memory_order_relaxed);
        }
        if (ok) ev.flags |= kHasWatermarks;
    }

    const bool ok = ev.result == 0;
    switch (ev.kind) {
    case EventKind::Alloc:
    case EventKind::PointerImport:
        if (ok && ev.ptr && ev.pool) sharedRemember(rt, ev.ptr, slotFor(t, ev.pool));
        break;
    case EventKind::DeviceAlloc:
        // The address may have been a pool block whose free went unseen: its stale entry must
        // not make a later cudaFree of it look like a pool free.
        if (ok && ev.ptr) (void)sharedFind(rt, ev.ptr, true);
        break;
    case EventKind::DeviceFree:
        // Raw ticks, converted to ns by the writer with the event's time (TraceSink).
        if (t->enterTicks && ticks > t->enterTicks) ev.aux = ticks - t->enterTicks;
        t->enterTicks = 0;
        break;
    case EventKind::PoolSetAttribute:
        if (t->oldValid) {
            AttributeFields a = AttributeFields::of(ev);
            a.old = t->oldValue;
            a.into(ev);
        }
        break;
    case EventKind::PoolCreate:
    case EventKind::PoolImport:
        if (ok && ev.pool) registerPool(ev.pool, ev.device, ev.kind == EventKind::PoolImport);
        break;
    case EventKind::PoolDestroy:
        if (ok) {
            if (PoolSlot* s = findPool(ev.pool)) s->handle.store(0, std::memory_order_release);
            if (t->lastPool == ev.pool) t->lastSlot = nullptr, t->lastPool = 0;
        }
        break;
    case EventKind::PeerCopy: peerCopyDevices(t, cbid, cb, ev); break;
    case EventKind::StreamCreate:
        // Created in the calling context: its device is known without asking the driver.
        if (ok && isExplicitStream(ev.stream) && ev.device >= 0)
            t->streams[streamCacheIndex(ev.stream)] = {
                ev.stream, rt.streamEpoch.load(std::memory_order_relaxed), ev.device};
        break;
    case EventKind::StreamDestroy:
        if (ok) rt.streamEpoch.fetch_add(1, std::memory_order_release);
        break;
    case EventKind::DeviceSetMempool:
        if (ok && ev.device >= 0 && ev.device < Runtime::kMaxDevices) {
            ensureDevice(ev.device);
            rt.currentPool[ev.device].store(ev.pool, std::memory_order_relaxed);
            if (!findPool(ev.pool)) registerPool(ev.pool, ev.device);
        }
        break;
    default:
        break;
    }

    if (rt.stacksOn && ev.result == 0 &&
        (ev.kind == EventKind::Alloc || (ev.kind == EventKind::Free && rt.config.stacksAtFree)))
        ev.site = captureSite(t);

    const bool sync = (d.needs & kSync) && wm != WatermarkMode::Off;
    ev.tsNs = static_cast<int64_t>(ticks);
    Event* e = t->ring ? t->ring->claim() : nullptr;
    if (!e) {
        if (t->ring) t->ring->noteDrop(ticks);
        if (ev.kind == EventKind::PoolSetAccess) [[unlikely]]
            moreAccessDescriptors(t, cbid, cb, ev);
        t->enterSeq = 0;
        if (sync) {
            Guard g(t);
            syncOtherPools(t, ev.pool, ticks, nullptr, 0, 0);
        }
        return;
    }
    if (t->enterSeq && (ev.kind == EventKind::Free || ev.kind == EventKind::DeviceFree ||
                        ev.kind == EventKind::HostFree || ev.kind == EventKind::HostUnregister))
        ev.seq = t->enterSeq;
    else
        ev.seq = (d.needs & kSync) ? rt.seq.fetch_add(1 + kReleaseSlots, std::memory_order_relaxed) +
                                         kReleaseSlots
                                   : rt.seq.fetch_add(1, std::memory_order_relaxed);
    t->enterSeq = 0;
    std::memcpy(static_cast<void*>(e), &ev, sizeof ev);
    // The slot 8 events on is asked for now, while the driver runs: claiming it later then
    // writes to lines this core already owns (measured: -20 ns/iteration, docs/PERFORMANCE.md).
    t->ring->prefetchForWrite(kRingPrefetchAhead);
    t->ring->publish();
    if (ev.kind == EventKind::PoolSetAccess) [[unlikely]]
        moreAccessDescriptors(t, cbid, cb, ev);
    if (!sync) return;
    const Event& s = ev;
    int slot = 0;
    if ((s.flags & kHasWatermarks) && s.reserved < reservedBefore) {
        Event rel = releaseEvent(s, s.pool, reservedBefore, s.reserved, s.used);
        rel.seq = s.seq - kReleaseSlots + uint64_t(slot++);
        pushEvent(t, rel);
    }
    Guard g(t);
    syncOtherPools(t, s.pool, ticks, &s, s.seq, slot);
}
} // namespace

Runtime& runtime() {
    // Never destroyed: callbacks and the atexit flush may run during static destruction.
    static Runtime* rt = new Runtime();
    return *rt;
}

ThreadState* threadState() {
    ThreadState* t = t_state;
    return t ? t : makeThreadState(false);
}

ThreadState* ownThreadState() {
    ThreadState* t = t_state;
    if (t) {
        if (!t->guard) t->guard = 1;
        return t;
    }
    return makeThreadState(true);
}

__attribute__((hot)) void CUPTIAPI onCallback(void*, CUpti_CallbackDomain domain,
                                               CUpti_CallbackId cbid, const void* data) {
    Runtime& rt = runtime();
    if (!rt.enabled.load(std::memory_order_relaxed)) {
        if (!rt.forkPending.load(std::memory_order_relaxed)) return;
        startForkedChild();
        if (!rt.enabled.load(std::memory_order_relaxed)) return;
    }
    ThreadState* t = t_state;
    if (!t) {
        t = makeThreadState(false);
        if (!t) return;
    }
    if (t->guard) return;
    if (domain == CUPTI_CB_DOMAIN_NVTX) [[unlikely]] {
        onNvtx(t, cbid, static_cast<const CUpti_NvtxData*>(data));
        return;
    }
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) [[unlikely]] {
        onRuntime(t, cbid, *cb);
        return;
    }
    if (cb->callbackSite == CUPTI_API_ENTER)
        onEnter(t, cbid, *cb);
    else
        onExit(t, cbid, *cb);
}

PoolSlot* findPool(uint64_t handle) {
    Runtime& rt = runtime();
    const int n = rt.poolCount.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i)
        if (rt.pools[i].handle.load(std::memory_order_relaxed) == handle) return &rt.pools[i];
    return nullptr;
}

bool readWatermarks(uint64_t pool, PoolWatermarks& w) {
    bool ok = true;
    w.reserved = readAttr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, ok);
    w.used = readAttr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, ok);
    w.reservedHigh = readAttr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, ok);
    w.usedHigh = readAttr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, ok);
    return ok;
}

void pushSample(ThreadState* t, uint64_t pool, const PoolSlot& slot, uint64_t ticks,
                const PoolWatermarks& w) {
    Event e;
    SampleFields{w.reservedHigh, w.usedHigh}.into(e);
    e.tsNs = static_cast<int64_t>(ticks);
    e.pool = pool;
    e.reserved = w.reserved;
    e.used = w.used;
    e.tid = t->tid;
    e.device = static_cast<int16_t>(slot.device.load(std::memory_order_relaxed));
    e.flags = kHasWatermarks;
    pushEvent(t, e);
}

namespace {
// Returns the pool's slot, and whether this call registered it.
PoolSlot* addPoolSlot(uint64_t handle, int device, bool imported, bool& added) {
    Runtime& rt = runtime();
    std::lock_guard lock(rt.coldMutex);
    if (PoolSlot* s = findPool(handle)) {
        if (imported) s->imported.store(true, std::memory_order_relaxed);
        return s;
    }
    int n = rt.poolCount.load(std::memory_order_relaxed);
    PoolSlot* slot = nullptr;
    for (int i = 0; i < n && !slot; ++i)
        if (rt.pools[i].handle.load(std::memory_order_relaxed) == 0) slot = &rt.pools[i];
    if (!slot) {
        if (n >= Runtime::kMaxPools) return nullptr;
        slot = &rt.pools[n];
    }
    slot->device.store(device, std::memory_order_relaxed);
    slot->reserved.store(0, std::memory_order_relaxed);
    slot->imported.store(imported, std::memory_order_relaxed);
    slot->handle.store(handle, std::memory_order_release);
    if (slot == &rt.pools[n]) rt.poolCount.store(n + 1, std::memory_order_release);
    added = true;
    return slot;
}
} // namespace

__attribute__((cold)) PoolSlot* registerPool(uint64_t handle, int device, bool imported) {
    if (!handle) return nullptr;
    bool added = false;
    PoolSlot* slot = addPoolSlot(handle, device, imported, added);
    // What the pool starts with (its reuse policies and release threshold), read once, outside
    // the lock: a program that never sets them would otherwise show them as unknown.
    Runtime& rt = runtime();
    if (added && rt.sink) {
        if (ThreadState* t = threadState()) {
            Guard g(t);
            const PoolAttributesRead r = readPoolAttributes(handle, &cuMemPoolGetAttribute);
            rt.sink->addPoolAttributes(std::span(r.values, size_t(r.count)));
        }
    }
    return slot;
}

namespace {
int knownContextDevice(void* ctx) {
    Runtime& rt = runtime();
    const int n = rt.contextCount.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i)
        if (rt.contexts[i].ctx.load(std::memory_order_relaxed) == ctx)
            return rt.contexts[i].device.load(std::memory_order_relaxed);
    return -1;
}

void rememberContext(void* ctx, int dev) {
    Runtime& rt = runtime();
    std::lock_guard lock(rt.coldMutex);
    const int m = rt.contextCount.load(std::memory_order_relaxed);
    for (int i = 0; i < m; ++i)
        if (rt.contexts[i].ctx.load(std::memory_order_relaxed) == ctx) return;
    if (m < Runtime::kMaxContexts) {
        rt.contexts[m].ctx.store(ctx, std::memory_order_relaxed);
        rt.contexts[m].device.store(dev, std::memory_order_relaxed);
        rt.contextCount.store(m + 1, std::memory_order_release);
    }
}
} // namespace

__attribute__((cold)) int deviceOfContextSlow(ThreadState* t, void* ctx) {
    int dev = knownContextDevice(ctx);
    if (dev < 0) {
        // Cold: first call seen in this context. The context is current for the call.
        CUdevice d = -1;
        {
            Guard g(t);
            if (cuCtxGetDevice(&d) != CUDA_SUCCESS) d = -1;
        }
        if (d < 0 || d >= Runtime::kMaxDevices) return -1;
        dev = d;
        rememberContext(ctx, dev);
    }
    ensureDevice(dev);
    t->lastCtx = ctx;
    t->lastDevice = dev;
    return dev;
}

__attribute__((cold)) int deviceOfAnyContext(ThreadState* t, void* ctx) {
    if (!ctx) return -1;
    if (ctx == t->lastCtx) return t->lastDevice;
    int dev = knownContextDevice(ctx);
    if (dev >= 0) return dev;
    CUdevice d = -1;
    {
        Guard g(t);
        CUcontext cur = nullptr;
        if (cuCtxGetCurrent(&cur) != CUDA_SUCCESS) cur = nullptr;
        if (cur == ctx) {
            if (cuCtxGetDevice(&d) != CUDA_SUCCESS) d = -1;
        } else if (cuCtxPushCurrent(static_cast<CUcontext>(ctx)) == CUDA_SUCCESS) {
            // Made current for the one question, and popped at once: the application's
            // current context is what it was.
            if (cuCtxGetDevice(&d) != CUDA_SUCCESS) d = -1;
            CUcontext popped = nullptr;
            cuCtxPopCurrent(&popped);
        }
    }
    if (d < 0 || d >= Runtime::kMaxDevices) return -1;
    rememberContext(ctx, d);
    ensureDevice(d);
    return d;
}

__attribute__((cold)) int streamDeviceSlow(ThreadState* t, uint64_t stream, uint32_t epoch) {
    CUdevice d = -1;
    CUcontext ctx = nullptr;
    CUresult r;
    {
        Guard g(t);
        r = cuStreamGetDevice(reinterpret_cast<CUstream>(stream), &d);
        if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_NOT_FOUND) {
            // A driver before 12.8: the stream's context, then that context's device.
            d = -1;
            if (cuStreamGetCtx(reinterpret_cast<CUstream>(stream), &ctx) != CUDA_SUCCESS)
                ctx = nullptr;
        } else if (r != CUDA_SUCCESS) {
            d = -1;
        }
    }
    int dev = d;
    if (dev < 0 && ctx) dev = deviceOfAnyContext(t, ctx);
    if (dev < 0 || dev >= Runtime::kMaxDevices) return -1; // not cached: asked again next time
    ensureDevice(dev);
    t->streams[streamCacheIndex(stream)] = {stream, epoch, dev};
    return dev;
}

__attribute__((cold)) void ensureDevice(int device) {
    Runtime& rt = runtime();
    if (device < 0 || device >= Runtime::kMaxDevices) return;
    if (rt.deviceReady[device].load(std::memory_order_acquire)) return;
    ThreadState* t = threadState();
    if (!t) return;
    Guard g(t);
    CUmemoryPool def = nullptr, cur = nullptr;
    DeviceInfo info;
    info.ordinal = device;
    char name[256] = {};
    if (cuDeviceGetName(name, sizeof name - 1, device) == CUDA_SUCCESS) info.name = name;
    size_t total = 0;
    if (cuDeviceTotalMem(&total, device) == CUDA_SUCCESS) info.totalMemory = total;
    CUuuid uuid;
    if (cuDeviceGetUuid_v2(&uuid, device) == CUDA_SUCCESS) {
        static const char* hex = "0123456789abcdef";
        std::string s = "GPU-";
        for (int i = 0; i < 16; ++i) {
            if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
            s += hex[(uuid.bytes[i] >> 4) & 15];
            s += hex[uuid.bytes[i] & 15];
        }
        info.uuid = s;
    }
    if (cuDeviceGetDefaultMemPool(&def, device) != CUDA_SUCCESS) def = nullptr;
    if (cuDeviceGetMemPool(&cur, device) != CUDA_SUCCESS) cur = def;
    {
        std::lock_guard lock(rt.coldMutex);
        if (rt.deviceReady[device].load(std::memory_order_relaxed)) return;
        rt.currentPool[device].store(reinterpret_cast<uint64_t>(cur), std::memory_order_relaxed);
        rt.deviceReady[device].store(true, std::memory_order_release);
    }
    {
        std::lock_guard lock(rt.coldMutex);
        rt.devices.push_back(info);
    }
    if (def) registerPool(reinterpret_cast<uint64_t>(def), device);
    if (cur && cur != def) registerPool(reinterpret_cast<uint64_t>(cur), device);
    if (rt.sink) {
        rt.sink->addDevice(info);
        if (def) {
            PoolInfo p;
            p.handle = reinterpret_cast<uint64_t>(def);
            p.device = device;
            p.kind = PoolKind::Default;
            p.locationType = CU_MEM_LOCATION_TYPE_DEVICE;
            p.locationId = device;
            rt.sink->addPool(p);
        }
    }
}

void disableCollector(const char* why) {
    Runtime& rt = runtime();
    if (!rt.enabled.exchange(false)) return;
    logOnce(LogKey::Info, "recording stopped: %s", why);
    if (rt.sink) rt.sink->setMeta("collector_disabled_reason", why);
}

} // namespace poolscope::collector
