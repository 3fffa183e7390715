#pragma once
// The one event representation of PoolScope. The collector's rings, the SQLite writer, the live
// socket and (later) the pool simulator all carry this same fixed-size record, so adding a
// consumer never means a new conversion layer. Keep it trivially copyable: the collector's hot
// path copies it into a lock-free ring with a plain store.

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace poolscope {

// Stored in the trace as an integer: never renumber, only append.
enum class EventKind : uint8_t {
    Alloc = 1,          // size, ptr (0 on failure), stream, pool, variant=AllocApi, result
    Free = 2,           // ptr, stream, pool (resolved by the collector when known), size if known
    PoolCreate = 3,     // pool, device, variant=PoolKind, size=max size (0 = unlimited), aux=handle
                        // types, attr=location type
    PoolDestroy = 4,    // pool
    PoolSetAttribute = 5, // pool, attr=PoolAttr, size=new value, aux=old value (flags&HasOld)
    DeviceSetMempool = 6, // device, pool (the device's new current pool), aux=location type
    PoolTrimTo = 7,     // pool, size=minBytesToKeep, reserved/used after the trim when read
    ImplicitRelease = 8, // pool, size=pool size after the release, correlation=the sync's;
                         // aux=reserved before, when the collector saw the drop itself
    EventRecord = 9,    // ptr=CUevent handle, stream, aux=flags
    StreamWaitEvent = 10, // ptr=CUevent handle, stream (the waiting stream), aux=flags
    StreamSynchronize = 11, // stream
    EventSynchronize = 12,  // ptr=CUevent handle
    ContextSynchronize = 13,
    PoolExport = 14,    // pool exported to a shareable handle; aux=handle type
    PoolImport = 15,    // pool imported from a shareable handle; aux=handle type
    PointerExport = 16, // ptr exported from pool
    PointerImport = 17, // ptr imported into pool (the importing process's mapping)
    PoolSetAccess = 18, // pool, device=accessing device, aux=CUmemAccess_flags, size=number of
                        // access descriptors in the call
    KnobChange = 19,    // a change PoolScope itself made: pool, attr, size=new (driver read-back),
                        // aux=old, ptr=the value requested; variant=KnobOrigin; attr=PoolAttr or
                        // KnobAction (KnobFields in EventFields.h)
    StreamCreate = 20,  // stream, aux=flags, variant=priority (+128 bias)
    StreamDestroy = 21, // stream
    Sample = 22,        // periodic watermark sample: pool, reserved, used, size=reserved high,
                        // aux=used high
    // Memory outside the stream-ordered pools (issue #18). Only in traces of format
    // schema::kBeyondPoolVersion or later: an older reader refuses those as a newer trace's.
    DeviceAlloc = 23,   // cuMemAlloc / cudaMalloc (and Pitch, Managed): ptr (0 on failure),
                        // size=bytes obtained, variant=DeviceAllocApi, aux=managed flags or pitch
    DeviceFree = 24,    // cuMemFree / cudaFree: ptr, size if known (kSizeKnown), pool when the
                        // pointer was a pool block, aux=how long the call took (ns, 0 = unknown)
    HostAlloc = 25,     // cuMemHostAlloc / cuMemAllocHost (cudaHostAlloc / cudaMallocHost):
                        // ptr (host, 0 on failure), size, aux=CU_MEMHOSTALLOC_* flags,
                        // variant=HostAllocApi
    HostFree = 26,      // cuMemFreeHost / cudaFreeHost: ptr, size if known (kSizeKnown)
    HostRegister = 27,  // cuMemHostRegister / cudaHostRegister: ptr, size, aux=
                        // CU_MEMHOSTREGISTER_* flags
    HostUnregister = 28, // cuMemHostUnregister / cudaHostUnregister: ptr, size if known
    // Several GPUs (issue #19). Only in traces of format schema::kPeerCopyVersion or later.
    PeerCopy = 29,      // cuMemcpyPeer(Async) (cudaMemcpyPeer(Async)): ptr=destination,
                        // aux=source, size=bytes, stream, attr=the two devices, variant=
                        // PeerCopyApi (PeerCopyFields in EventFields.h); device=the stream's
};
inline constexpr int kEventKindCount = 30; // one past the largest value
// The first kind stored only in traces of format schema::kBeyondPoolVersion or later.
inline constexpr EventKind kFirstBeyondPoolKind = EventKind::DeviceAlloc;
inline constexpr bool isBeyondPoolKind(EventKind k) {
    return static_cast<uint8_t>(k) >= static_cast<uint8_t>(kFirstBeyondPoolKind);
}
// The first kind stored only in traces of format schema::kPeerCopyVersion or later.
inline constexpr EventKind kFirstPeerCopyKind = EventKind::PeerCopy;
inline constexpr bool isPeerCopyKind(EventKind k) {
    return static_cast<uint8_t>(k) >= static_cast<uint8_t>(kFirstPeerCopyKind);
}

enum class AllocApi : uint8_t {
    Async = 0,         // cudaMallocAsync / cuMemAllocAsync on the stream's current pool
    FromPool = 1,      // cudaMallocFromPoolAsync / cuMemAllocFromPoolAsync
    AsyncPtsz = 2,     // per-thread default stream variants
    FromPoolPtsz = 3,
};

// DeviceAlloc::variant: which driver call handed the memory out.
enum class DeviceAllocApi : uint8_t {
    Malloc = 0,  // cuMemAlloc(_v2) (cudaMalloc)
    Pitch = 1,   // cuMemAllocPitch(_v2) (cudaMallocPitch; size = pitch * height)
    Managed = 2, // cuMemAllocManaged (cudaMallocManaged; aux = CU_MEM_ATTACH_* flags)
};

// PeerCopy::variant: which call copied.
enum class PeerCopyApi : uint8_t {
    Sync = 0,  // cuMemcpyPeer (cudaMemcpyPeer), stream 0 (legacy) or 2 (_ptds)
    Async = 1, // cuMemcpyPeerAsync(_ptsz) (cudaMemcpyPeerAsync)
    // Recorded at the runtime's cudaMemcpyPeer / cudaMemcpyPeerAsync because the driver call it
    // made was no cuMemcpyPeer* (the collector saw none inside it): the devices are the
    // runtime's arguments, result is a cudaError_t.
    RuntimeSync = 2,
    RuntimeAsync = 3,
};

// HostAlloc::variant.
enum class HostAllocApi : uint8_t {
    HostAlloc = 0, // cuMemHostAlloc (cudaHostAlloc, and cudaMallocHost in current runtimes)
    AllocHost = 1, // cuMemAllocHost(_v2)
};

// Flag bits of HostAlloc (CU_MEMHOSTALLOC_*) and HostRegister (CU_MEMHOSTREGISTER_*), as the
// driver numbers them.
inline constexpr uint32_t kHostAllocPortable = 0x01;
inline constexpr uint32_t kHostAllocMapped = 0x02;        // DEVICEMAP
inline constexpr uint32_t kHostAllocWriteCombined = 0x04;
inline constexpr uint32_t kHostRegisterPortable = 0x01;
inline constexpr uint32_t kHostRegisterMapped = 0x02;     // DEVICEMAP
inline constexpr uint32_t kHostRegisterIoMemory = 0x04;
inline constexpr uint32_t kHostRegisterReadOnly = 0x08;

enum class PoolKind : uint8_t { Unknown = 0, Default = 1, Explicit = 2, Imported = 3 };

// Mirrors CUmemPool_attribute's numbering so values from the driver store unchanged.
enum class PoolAttr : uint16_t {
    ReuseFollowEventDependencies = 1,
    ReuseAllowOpportunistic = 2,
    ReuseAllowInternalDependencies = 3,
    ReleaseThreshold = 4,
    ReservedMemCurrent = 5,
    ReservedMemHigh = 6,
    UsedMemCurrent = 7,
    UsedMemHigh = 8,
};

// For KnobChange events whose attr is not a pool attribute.
enum class KnobAction : uint16_t { TrimTo = 1001, ResetHighWatermarks = 1002 };

enum class KnobOrigin : uint8_t { Gui = 1, Cli = 2, Script = 3 };

// Event::flags bits.
enum EventFlags : uint8_t {
    kHasWatermarks = 1 << 0, // reserved/used hold exact values read at this event
    kHasOldValue = 1 << 1,   // aux holds the attribute's value before the change
    kFromPoolScope = 1 << 2, // made by PoolScope itself (knob), never by the application
    kSizeKnown = 1 << 3,     // Free: size was resolved from the matching Alloc
    // Alloc/Free: `used` was computed by the collector (the pool's used bytes at the last
    // driver read, plus/minus the sizes of every alloc and free since, in seq order) instead of
    // read from the driver. Exact, not an estimate: measured on an H200, the driver moves
    // USED_MEM_CURRENT by exactly the requested size at the alloc and at the free call.
    kUsedDerived = 1 << 4,
};

inline constexpr uint64_t kUnknown = ~uint64_t{0};

struct Event {
    uint64_t seq = 0;        // global order across threads, assigned by the collector
    int64_t tsNs = 0;        // CLOCK_MONOTONIC nanoseconds
    uint64_t stream = 0;     // CUstream handle value (0 = legacy default, 2 = per-thread default)
    uint64_t pool = 0;       // CUmemoryPool handle value (0 = unknown)
    uint64_t ptr = 0;        // device pointer, or CUevent handle for event kinds
    uint64_t size = 0;       // bytes, or the kind's value (see EventKind)
    uint64_t aux = 0;        // the kind's second value (see EventKind)
    uint64_t reserved = 0;   // pool reserved bytes at this event, valid with kHasWatermarks
    uint64_t used = 0;       // pool used bytes at this event, valid with kHasWatermarks
    uint32_t tid = 0;        // OS thread id of the caller
    uint32_t correlation = 0; // CUPTI correlation id, 0 if none
    int32_t result = 0;      // CUresult of the call (0 = success)
    int16_t device = -1;     // device ordinal, -1 if unknown
    EventKind kind = EventKind::Alloc;
    uint8_t variant = 0;     // AllocApi, PoolKind, KnobOrigin... depending on kind
    uint16_t attr = 0;       // PoolAttr or KnobAction
    uint8_t flags = 0;       // EventFlags
    uint8_t reserved0 = 0;
    // Call site (issue #13): the interned (native stack, Python stack, NVTX range path) of the
    // call, an id of the trace's sites table; 0 = none recorded. Set on Allocs (and on Frees
    // when the collector records stacks at frees). Stored since event codec 4.
    uint32_t site = 0;

    bool has(EventFlags f) const { return (flags & f) != 0; }
    bool failed() const { return result != 0; }
};

static_assert(std::is_trivially_copyable_v<Event>);
static_assert(sizeof(Event) == 96, "Event is a wire and ring format: keep its size fixed");

// Stable lower-case names used in the schema's lookup table, the CLI and JSON output.
std::string_view eventKindName(EventKind k);
std::string_view poolAttrName(uint16_t attr);
std::string_view allocApiName(AllocApi a);
std::string_view poolKindName(PoolKind k);
std::string_view deviceAllocApiName(DeviceAllocApi a);
std::string_view hostAllocApiName(HostAllocApi a);
bool eventKindFromName(std::string_view name, EventKind& out);

} // namespace poolscope
