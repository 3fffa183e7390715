#pragma once
// Typed access to an Event's kind-dependent fields. `Event` stays the one fixed 96-byte record
// (rings, chunks, socket); what its ptr, size, aux, variant and attr mean depends on the kind,
// and this header is the only place that knows it. Each kind gets a small value struct:
// `X::of(e)` reads it (the event must be of that kind) and `x.into(e)` writes it. The fields
// every kind shares (seq, tsNs, stream, pool, device, tid, correlation, result, flags and the
// reserved/used watermarks) are read from Event directly.
//
// Everything is inline and copies a few integers, so the 10 M-event replay loops pay nothing
// for the names.

#include <cassert>
#include <cstdint>
#include <optional>

#include "poolscope/Event.h"

namespace poolscope {

// Alloc: cudaMallocAsync / cudaMallocFromPoolAsync (and the driver's forms).
// A failed call has result != 0 and ptr 0; a successful zero-byte request returns ptr 0 too.
struct AllocFields {
    uint64_t ptr = 0;
    uint64_t bytes = 0; // the requested size
    AllocApi api = AllocApi::Async;

    static AllocFields of(const Event& e) {
        assert(e.kind == EventKind::Alloc);
        return {e.ptr, e.size, static_cast<AllocApi>(e.variant)};
    }
    void into(Event& e) const {
        e.kind = EventKind::Alloc;
        e.ptr = ptr;
        e.size = bytes;
        e.variant = static_cast<uint8_t>(api);
    }
};

// Free: cudaFreeAsync. The pool and the size are filled in by the replay from the alloc that
// returned the pointer; bytes is empty when that alloc is not in the trace.
struct FreeFields {
    uint64_t ptr = 0;
    std::optional<uint64_t> bytes;

    static FreeFields of(const Event& e) {
        assert(e.kind == EventKind::Free);
        FreeFields f{e.ptr, std::nullopt};
        if (e.has(kSizeKnown)) f.bytes = e.size;
        return f;
    }
    void into(Event& e) const {
        e.kind = EventKind::Free;
        e.ptr = ptr;
        e.size = bytes.value_or(0);
        if (bytes)
            e.flags |= kSizeKnown;
        else
            e.flags &= static_cast<uint8_t>(~kSizeKnown);
    }
};

// PoolCreate (cuMemPoolCreate; the pool handle is Event::pool, 0 when the call failed) and
// PoolImport (kind Imported).
struct PoolCreateFields {
    PoolKind kind = PoolKind::Explicit;
    uint64_t maxSize = 0;      // 0 = no limit
    uint32_t handleTypes = 0;  // CUmemAllocationHandleType bits (PoolImport: the one imported)
    uint16_t locationType = 0; // CUmemLocationType

    static PoolCreateFields of(const Event& e) {
        assert(e.kind == EventKind::PoolCreate || e.kind == EventKind::PoolImport);
        return {static_cast<PoolKind>(e.variant), e.size, static_cast<uint32_t>(e.aux), e.attr};
    }
    void into(Event& e) const {
        e.variant = static_cast<uint8_t>(kind);
        e.size = maxSize;
        e.aux = handleTypes;
        e.attr = locationType;
    }
};

// PoolSetAttribute: the application's own cuMemPoolSetAttribute.
struct AttributeFields {
    PoolAttr attr = PoolAttr::ReleaseThreshold;
    uint64_t value = 0;            // as passed (reuse policies 0/1, bytes otherwise)
    std::optional<uint64_t> old;   // read just before the call, when the driver answered

    static AttributeFields of(const Event& e) {
        assert(e.kind == EventKind::PoolSetAttribute);
        AttributeFields f{static_cast<PoolAttr>(e.attr), e.size, std::nullopt};
        if (e.has(kHasOldValue)) f.old = e.aux;
        return f;
    }
    void into(Event& e) const {
        e.kind = EventKind::PoolSetAttribute;
        e.attr = static_cast<uint16_t>(attr);
        e.size = value;
        e.aux = old.value_or(0);
        if (old)
            e.flags |= kHasOldValue;
        else
            e.flags &= static_cast<uint8_t>(~kHasOldValue);
    }
};

// KnobChange: a change PoolScope itself made (ctl, the Knobs panel). One meaning for every
// producer (the collector's control API, the request handler, tests):
//   target     a PoolAttr for attribute sets, a KnobAction for trim / watermark reset
//   requested  what the client asked for (TrimTo: minBytesToKeep; reset: 0)
//   value      the driver's read-back after the change (TrimTo: reserved bytes after the trim;
//              ResetHighWatermarks: the reserved high watermark after the reset)
//   old        the same quantity before the change, when it was read
// The pool's reserved/used right after the change go into Event::reserved/used
// (kHasWatermarks) through makeKnobChange.
struct KnobFields {
    uint16_t target = 0;
    uint64_t requested = 0;
    uint64_t value = 0;
    std::optional<uint64_t> old;
    KnobOrigin origin = KnobOrigin::Cli;

    bool isAttribute() const { return target < 1000; }
    PoolAttr attr() const { return static_cast<PoolAttr>(target); }
    KnobAction action() const { return static_cast<KnobAction>(target); }

    static KnobFields of(const Event& e) {
        assert(e.kind == EventKind::KnobChange);
        KnobFields f{e.attr, e.ptr, e.size, std::nullopt, static_cast<KnobOrigin>(e.variant)};
        if (e.has(kHasOldValue)) f.old = e.aux;
        return f;
    }
    void into(Event& e) const {
        e.kind = EventKind::KnobChange;
        e.attr = target;
        e.ptr = requested;
        e.size = value;
        e.aux = old.value_or(0);
        e.variant = static_cast<uint8_t>(origin);
        e.flags |= kFromPoolScope;
        if (old)
            e.flags |= kHasOldValue;
        else
            e.flags &= static_cast<uint8_t>(~kHasOldValue);
    }
};

struct KnobWatermarks {
    uint64_t reserved = 0;
    uint64_t used = 0;
};

// The one way to build a KnobChange event; seq, tsNs and tid are the recorder's to set.
// result is the driver's CUresult of the change (0 = applied).
inline Event makeKnobChange(uint64_t pool, int device, const KnobFields& k, int32_t result,
                            std::optional<KnobWatermarks> after) {
    Event e;
    e.pool = pool;
    e.device = static_cast<int16_t>(device);
    e.result = result;
    k.into(e);
    if (after) {
        e.reserved = after->reserved;
        e.used = after->used;
        e.flags |= kHasWatermarks;
    }
    return e;
}

// PoolTrimTo: the application's own cuMemPoolTrimTo (watermarks after it, when read).
struct TrimFields {
    uint64_t minBytesToKeep = 0;

    static TrimFields of(const Event& e) {
        assert(e.kind == EventKind::PoolTrimTo);
        return {e.size};
    }
    void into(Event& e) const {
        e.kind = EventKind::PoolTrimTo;
        e.size = minBytesToKeep;
    }
};

// ImplicitRelease: memory above the release threshold handed back at a synchronize.
struct ReleaseFields {
    uint64_t reservedAfter = 0;
    std::optional<uint64_t> reservedBefore; // when the collector saw the drop itself

    static ReleaseFields of(const Event& e) {
        assert(e.kind == EventKind::ImplicitRelease);
        ReleaseFields f{e.size, std::nullopt};
        if (e.aux != 0) f.reservedBefore = e.aux;
        return f;
    }
    void into(Event& e) const {
        e.kind = EventKind::ImplicitRelease;
        e.size = reservedAfter;
        e.aux = reservedBefore.value_or(0);
    }
};

// EventRecord, StreamWaitEvent and EventSynchronize name a CUevent.
struct CuEventFields {
    uint64_t event = 0; // the CUevent handle
    uint32_t flags = 0; // cuEventRecordWithFlags / cuStreamWaitEvent flags

    static CuEventFields of(const Event& e) {
        assert(e.kind == EventKind::EventRecord || e.kind == EventKind::StreamWaitEvent ||
               e.kind == EventKind::EventSynchronize);
        return {e.ptr, static_cast<uint32_t>(e.aux)};
    }
    void into(Event& e) const {
        e.ptr = event;
        e.aux = flags;
    }
};

// DeviceSetMempool: Event::device's current pool became Event::pool.
struct SetMempoolFields {
    uint32_t locationType = 0; // CUmemLocationType

    static SetMempoolFields of(const Event& e) {
        assert(e.kind == EventKind::DeviceSetMempool);
        return {static_cast<uint32_t>(e.aux)};
    }
    void into(Event& e) const {
        e.kind = EventKind::DeviceSetMempool;
        e.aux = locationType;
    }
};

// PoolExport: the pool was exported to a shareable handle of this type.
struct PoolExportFields {
    uint32_t handleType = 0;

    static PoolExportFields of(const Event& e) {
        assert(e.kind == EventKind::PoolExport);
        return {static_cast<uint32_t>(e.aux)};
    }
    void into(Event& e) const {
        e.kind = EventKind::PoolExport;
        e.aux = handleType;
    }
};

// PointerExport / PointerImport: a block shared between processes.
struct SharedPointerFields {
    uint64_t ptr = 0;

    static SharedPointerFields of(const Event& e) {
        assert(e.kind == EventKind::PointerExport || e.kind == EventKind::PointerImport);
        return {e.ptr};
    }
    void into(Event& e) const { e.ptr = ptr; }
};

// PoolSetAccess: one access descriptor of the call (Event::device is the device given access;
// -1 for a location that is not a device). The collector records one event per descriptor
// (traces before issue #19: the first descriptor only).
struct SetAccessFields {
    uint32_t accessFlags = 0; // CUmemAccess_flags: 0 none, 1 read, 3 read-write
    uint64_t descriptors = 0; // how many descriptors the call passed
    uint8_t locationType = 0; // CUmemLocationType of the descriptor; 0 = not recorded

    static SetAccessFields of(const Event& e) {
        assert(e.kind == EventKind::PoolSetAccess);
        return {static_cast<uint32_t>(e.aux), e.size, e.variant};
    }
    void into(Event& e) const {
        e.kind = EventKind::PoolSetAccess;
        e.aux = accessFlags;
        e.size = descriptors;
        e.variant = locationType;
    }
};

// StreamCreate: the new stream is Event::stream.
struct StreamCreateFields {
    uint32_t flags = 0;
    int priority = 0;

    static StreamCreateFields of(const Event& e) {
        assert(e.kind == EventKind::StreamCreate);
        return {static_cast<uint32_t>(e.aux), static_cast<int>(e.variant) - 128};
    }
    void into(Event& e) const {
        e.kind = EventKind::StreamCreate;
        e.aux = flags;
        e.variant = static_cast<uint8_t>(priority + 128); // stored with a bias of 128
    }
};

// Sample: a periodic read of one pool's four watermarks (current ones in reserved/used).
struct SampleFields {
    uint64_t reservedHigh = 0;
    uint64_t usedHigh = 0;

    static SampleFields of(const Event& e) {
        assert(e.kind == EventKind::Sample);
        return {e.size, e.aux};
    }
    void into(Event& e) const {
        e.kind = EventKind::Sample;
        e.size = reservedHigh;
        e.aux = usedHigh;
    }
};

// DeviceAlloc: device memory outside the pools (cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged;
// cudaMalloc and friends arrive through them). ptr is 0 when the call failed.
struct DeviceAllocFields {
    uint64_t ptr = 0;
    uint64_t bytes = 0;  // what the memory takes: the request, or pitch * height for Pitch
    DeviceAllocApi api = DeviceAllocApi::Malloc;
    uint64_t detail = 0; // Managed: CU_MEM_ATTACH_* flags; Pitch: the pitch in bytes

    static DeviceAllocFields of(const Event& e) {
        assert(e.kind == EventKind::DeviceAlloc);
        return {e.ptr, e.size, static_cast<DeviceAllocApi>(e.variant), e.aux};
    }
    void into(Event& e) const {
        e.kind = EventKind::DeviceAlloc;
        e.ptr = ptr;
        e.size = bytes;
        e.variant = static_cast<uint8_t>(api);
        e.aux = detail;
    }
};

// HostAlloc (cuMemHostAlloc / cuMemAllocHost) and HostRegister (cuMemHostRegister): pinned host
// memory. flags are the call's CU_MEMHOSTALLOC_* or CU_MEMHOSTREGISTER_* bits (kHostAlloc*,
// kHostRegister*); ptr is the host address (0 when an alloc failed).
struct PinnedFields {
    uint64_t ptr = 0;
    uint64_t bytes = 0;
    uint32_t flags = 0;
    HostAllocApi api = HostAllocApi::HostAlloc; // HostAlloc only

    static PinnedFields of(const Event& e) {
        assert(e.kind == EventKind::HostAlloc || e.kind == EventKind::HostRegister);
        return {e.ptr, e.size, static_cast<uint32_t>(e.aux), static_cast<HostAllocApi>(e.variant)};
    }
    // kind: HostAlloc or HostRegister
    void into(Event& e, EventKind kind) const {
        assert(kind == EventKind::HostAlloc || kind == EventKind::HostRegister);
        e.kind = kind;
        e.ptr = ptr;
        e.size = bytes;
        e.aux = flags;
        e.variant = kind == EventKind::HostAlloc ? static_cast<uint8_t>(api) : 0;
    }
};

// DeviceFree (cuMemFree), HostFree (cuMemFreeHost), HostUnregister (cuMemHostUnregister). The
// size is filled in by the replay from the call that handed the memory out (kSizeKnown).
// DeviceFree's callNs: how long the call took, enter to exit (the device-wide synchronization a
// cudaFree waits for is inside it); 0 when not measured.
struct ReleaseMemFields {
    uint64_t ptr = 0;
    std::optional<uint64_t> bytes;
    uint64_t callNs = 0;

    static ReleaseMemFields of(const Event& e) {
        assert(e.kind == EventKind::DeviceFree || e.kind == EventKind::HostFree ||
               e.kind == EventKind::HostUnregister);
        ReleaseMemFields f{e.ptr, std::nullopt, e.aux};
        if (e.has(kSizeKnown)) f.bytes = e.size;
        return f;
    }
    void into(Event& e, EventKind kind) const {
        assert(kind == EventKind::DeviceFree || kind == EventKind::HostFree ||
               kind == EventKind::HostUnregister);
        e.kind = kind;
        e.ptr = ptr;
        e.size = bytes.value_or(0);
        e.aux = callNs;
        if (bytes)
            e.flags |= kSizeKnown;
        else
            e.flags &= static_cast<uint8_t>(~kSizeKnown);
    }
};

// PeerCopy (cuMemcpyPeer / cuMemcpyPeerAsync): bytes copied from srcDevice's memory to
// dstDevice's, ordered on Event::stream (whose device is Event::device). The devices are those of
// the contexts the call named, -1 where not known; stored one byte each in Event::attr (+1).
struct PeerCopyFields {
    uint64_t dst = 0;
    uint64_t src = 0;
    uint64_t bytes = 0;
    int srcDevice = -1;
    int dstDevice = -1;
    PeerCopyApi api = PeerCopyApi::Async;

    static PeerCopyFields of(const Event& e) {
        assert(e.kind == EventKind::PeerCopy);
        return {e.ptr,
                e.aux,
                e.size,
                static_cast<int>(e.attr & 0xFF) - 1,
                static_cast<int>(e.attr >> 8) - 1,
                static_cast<PeerCopyApi>(e.variant)};
    }
    static uint16_t deviceByte(int device) {
        return device >= 0 && device < 255 ? static_cast<uint16_t>(device + 1) : 0;
    }
    void into(Event& e) const {
        e.kind = EventKind::PeerCopy;
        e.ptr = dst;
        e.aux = src;
        e.size = bytes;
        e.variant = static_cast<uint8_t>(api);
        e.attr = static_cast<uint16_t>(deviceByte(srcDevice) | (deviceByte(dstDevice) << 8));
    }
};

} // namespace poolscope
