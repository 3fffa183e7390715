#pragma once
// The collector's process-wide state and the CUPTI callback (the hot path). Everything here lives
// inside the profiled application: the callback copies one Event into the calling thread's ring
// and returns; no malloc (after a thread's first event), no locks, no stdio, no SQLite.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <cuda.h>
#include <cupti.h>

#include "Config.h"
#include "EventRing.h"
#include "RingRegistry.h"
#include "ControlHook.h"
#include "TraceSink.h"

namespace poolscope::collector {

class LiveSink;

// Pool handle -> cached reserved bytes, so a Free (which never changes reserved memory) needs
// one attribute read instead of two.
struct PoolSlot {
    std::atomic<uint64_t> handle{0}; // 0 = free slot (or destroyed)
    std::atomic<uint64_t> reserved{0};
    std::atomic<int> device{-1};
    // Imported from another process: its used bytes move with the exporter's allocations,
    // which this process never sees, so they are always read, never derived.
    std::atomic<bool> imported{false};
};

// A thread's private state. Application threads get one at their first traced call; the
// collector's own threads get one with guard set, so their driver calls are never recorded.
// What every callback reads sits in its first cache line: a callback runs after the driver's
// own code has been through the first-level caches, so each extra line it touches costs.
struct alignas(64) ThreadState {
    static constexpr size_t kStreamCache = 16; // direct-mapped stream -> device (streamDevice)

    EventRing* ring = nullptr;
    void* lastCtx = nullptr;
    uint64_t lastPool = 0;
    PoolSlot* lastSlot = nullptr;
    uint64_t enterPool = 0;   // pool of the pointer a Free/PointerExport names, found at enter
    uint64_t enterSeq = 0;    // a Free's seq, taken at enter (see onEnter)
    uint32_t tid = 0;
    uint32_t guard = 0;
    int lastDevice = -1;
    bool enterHit = false;    // ...found in Runtime::sharedPtrPools (a recorded alloc's)
    // End of the first line: what follows only rarer calls read.
    uint64_t enterTicks = 0;  // when a cuMemFree entered (its duration: the device-wide sync)
    bool oldValid = false;
    uint64_t oldValue = 0;    // PoolSetAttribute: value before the call
    // Inside a runtime cudaMemcpyPeer(Async) (its enter seen, not its exit; runtime calls do not
    // nest), and whether a driver peer copy was recorded inside it: the runtime call is recorded
    // only without one.
    bool inRuntimePeer = false;
    bool driverPeerInside = false;
    ThreadSites* sites = nullptr; // call sites and NVTX ranges (Stacks.h), at first use
    // A stream's device, as the driver answered; valid while epoch equals Runtime::streamEpoch
    // (a destroyed stream's handle may come back as another device's stream).
    struct StreamEntry {
        uint64_t stream;
        uint32_t epoch;
        int32_t device;
    } streams[kStreamCache];
};
static_assert(offsetof(ThreadState, enterHit) < 64 && offsetof(ThreadState, enterTicks) >= 64,
              "an alloc's or free's callback reads the first line of ThreadState only");

struct Runtime {
    static constexpr int kMaxDevices = 64;
    static constexpr int kMaxPools = 512;
    static constexpr int kMaxContexts = 64;

    // Hot: read by every callback, written by the application's threads only (seq), in one
    // cache line together with the first devices' current pools.
    alignas(64) std::atomic<bool> enabled{false};
    std::atomic<bool> forkPending{false};
    WatermarkMode watermarks = WatermarkMode::Exit; // config.watermarks, copied at start
    bool stacksOn = false;                          // stacks.enabled(), copied at start
    // Bumped by every stream destroyed: the threads' stream -> device caches start over.
    std::atomic<uint32_t> streamEpoch{1};
    std::atomic<uint64_t> seq{1};
    std::atomic<uint64_t> currentPool[kMaxDevices] = {};

    // Pointer -> pool of every recorded pool alloc, for its free (sharedEntry in Runtime.cpp).
    // One table for all threads: a third of PyTorch's frees run on another thread than their
    // alloc (its autograd thread frees the forward's tensors), and a per-thread table would send
    // each of them to the driver at the call and for `used` at its exit.
    static constexpr size_t kSharedPtrCache = 1u << 15;
    alignas(64) std::atomic<uint64_t> sharedPtrPools[kSharedPtrCache] = {};

    alignas(64) Config config;
    RingRegistry rings;
    StackRecorder stacks;
    std::unique_ptr<TraceSink> sink;
    CUpti_SubscriberHandle subscriber = nullptr;

    PoolSlot pools[kMaxPools];
    std::atomic<int> poolCount{0};
    std::atomic<bool> deviceReady[kMaxDevices] = {};
    struct Ctx {
        std::atomic<void*> ctx{nullptr};
        std::atomic<int> device{-1};
    } contexts[kMaxContexts];
    std::atomic<int> contextCount{0};
    std::mutex coldMutex; // cold paths only: device discovery, pool registration

    std::thread writer;
    std::thread drainer; // rings -> the sink's spool (Spool.h)
    std::thread sampler;
    std::atomic<bool> stopping{false};
    std::atomic<int> flushRequest{0}; // signal handler -> writer: commit now
    std::atomic<int> flushDone{0};
    std::unique_ptr<LiveSink> live;
    ProcessInfo process;              // as written to the trace (for the control server's hello)
    std::vector<DeviceInfo> devices;  // guarded by coldMutex
};

Runtime& runtime();

// The CUPTI callback (driver domain).
void CUPTIAPI onCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* data);

// The calling thread's state, created on first use (guarded when the thread is the collector's).
ThreadState* threadState();
ThreadState* ownThreadState(); // for collector threads: creates it with guard set
// RAII guard: driver calls made while it lives are not traced.
class Guard {
public:
    explicit Guard(ThreadState* t) : t_(t) { ++t_->guard; }
    ~Guard() { --t_->guard; }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

private:
    ThreadState* t_;
};

// A pool's four watermarks as the driver reports them. Cold paths only (synchronize, sampler);
// call with the thread's Guard held.
struct PoolWatermarks {
    uint64_t reserved = 0, reservedHigh = 0, used = 0, usedHigh = 0;
    bool operator==(const PoolWatermarks&) const = default;
};
bool readWatermarks(uint64_t pool, PoolWatermarks& w); // false when the driver refuses
// A Sample event of pool (on device, of the slot), at ticks, into t's ring (a full ring counts a
// drop). pool is the handle the caller read the watermarks of.
void pushSample(ThreadState* t, uint64_t pool, const PoolSlot& slot, uint64_t ticks,
                const PoolWatermarks& w);

PoolSlot* findPool(uint64_t handle);
PoolSlot* registerPool(uint64_t handle, int device, bool imported = false);
void ensureDevice(int device);       // cold: default pool, current pool, device facts
int deviceOfContextSlow(ThreadState* t, void* ctx); // first call in a context: looks it up
inline int deviceOfContext(ThreadState* t, void* ctx) {
    return ctx == t->lastCtx ? t->lastDevice : deviceOfContextSlow(t, ctx);
}
// The device of any context (current or not): the table of contexts seen, else the driver.
int deviceOfAnyContext(ThreadState* t, void* ctx);
// Streams the application created: 0 (legacy default), CU_STREAM_LEGACY and
// CU_STREAM_PER_THREAD name "the current context's" stream and belong to its device.
inline bool isExplicitStream(uint64_t stream) { return stream > 2; }
// The device an explicit stream belongs to, which need not be the calling thread's current
// context's (a cudaMallocAsync on another device's stream allocates from that device's pool).
// -1 when the driver does not know the stream (destroyed, or not a stream).
int streamDeviceSlow(ThreadState* t, uint64_t stream, uint32_t epoch);
inline size_t streamCacheIndex(uint64_t stream) {
    return static_cast<size_t>((stream >> 4) ^ (stream >> 12)) & (ThreadState::kStreamCache - 1);
}
inline int streamDevice(ThreadState* t, uint64_t stream) {
    const uint32_t epoch = runtime().streamEpoch.load(std::memory_order_acquire);
    const ThreadState::StreamEntry& s = t->streams[streamCacheIndex(stream)];
    if (s.stream == stream && s.epoch == epoch) return s.device;
    return streamDeviceSlow(t, stream, epoch);
}
void disableCollector(const char* why); // logs, switches the callback off, notes it in the trace
void startForkedChild();                // Lifecycle.cpp
// A callback of CUPTI's NVTX domain (Nvtx.cpp): ranges pushed and popped become the thread's
// range path, start/end ranges are listed.
void onNvtx(ThreadState* t, CUpti_CallbackId cbid, const CUpti_NvtxData* d);

} // namespace poolscope::collector
