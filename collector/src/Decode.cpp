#include "Decode.h"

#include <cuda.h>

#include "poolscope/EventFields.h"

namespace poolscope::collector {

namespace {

constexpr CUpti_CallbackId kIds[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolDestroy,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAccess,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceSetMemPool,
    CUPTI_DRIVER_TRACE_CBID_cuMemSetMemPool,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolExportToShareableHandle,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportFromShareableHandle,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolExportPointer,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportPointer,
    CUPTI_DRIVER_TRACE_CBID_cuEventRecord,
    CUPTI_DRIVER_TRACE_CBID_cuEventRecord_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags,
    CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent,
    CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamCreate,
    CUPTI_DRIVER_TRACE_CBID_cuStreamCreateWithPriority,
    CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy,
    CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy_v2,
    // Beyond the pools (issue #18). The driver domain alone: cudaMalloc, cudaFree,
    // cudaMallocHost... each fire exactly one of these (as cudaMallocAsync fires
    // cuMemAllocAsync), so subscribing to the runtime domain too would count them twice.
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc,
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister,
    // Several GPUs (issue #19): copies between two devices' memory. The runtime's
    // cudaMemcpyPeer(Async) calls these.
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz,
};

constexpr CUpti_CallbackId kRuntimeIds[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000,
};

template <class P> const P& params(const CUpti_CallbackData& cb) {
    return *static_cast<const P*>(cb.functionParams);
}

uint64_t h(const void* p) { return reinterpret_cast<uint64_t>(p); }

// Per-thread default stream variants name stream 0 for "this thread's stream": keep it apart
// from the legacy default stream by storing CU_STREAM_PER_THREAD's handle value.
uint64_t ptszStream(CUstream s) { return s ? h(s) : h(CU_STREAM_PER_THREAD); }

int32_t resultOf(const CUpti_CallbackData& cb) {
    return cb.functionReturnValue ? *static_cast<const int32_t*>(cb.functionReturnValue) : 0;
}

template <class P>
void alloc(const CUpti_CallbackData& cb, Event& e, AllocApi api, bool ptsz, bool fromPool,
           Decoded& d) {
    const P& p = params<P>(cb);
    AllocFields{(e.result == 0 && p.dptr) ? static_cast<uint64_t>(*p.dptr) : 0, p.bytesize, api}
        .into(e);
    e.stream = ptsz ? ptszStream(p.hStream) : h(p.hStream);
    if constexpr (requires { p.pool; }) e.pool = h(p.pool);
    d.needs = kNeedReserved | kNeedUsed | (fromPool ? 0 : kNeedDevicePool);
}

// cuMemAlloc (v1: 32-bit pointer and size, kept for completeness) and cuMemAlloc_v2.
template <class P> void deviceAlloc(const CUpti_CallbackData& cb, Event& e) {
    const P& p = params<P>(cb);
    DeviceAllocFields{(e.result == 0 && p.dptr) ? static_cast<uint64_t>(*p.dptr) : 0,
                      static_cast<uint64_t>(p.bytesize), DeviceAllocApi::Malloc, 0}
        .into(e);
}

// cuMemAllocPitch: the memory taken is pitch * height (the pitch is the driver's answer).
template <class P> void deviceAllocPitch(const CUpti_CallbackData& cb, Event& e) {
    const P& p = params<P>(cb);
    const bool ok = e.result == 0 && p.dptr && p.pPitch;
    const uint64_t pitch = ok ? static_cast<uint64_t>(*p.pPitch) : 0;
    const uint64_t bytes = ok ? pitch * static_cast<uint64_t>(p.Height)
                              : static_cast<uint64_t>(p.WidthInBytes) * p.Height;
    DeviceAllocFields{ok ? static_cast<uint64_t>(*p.dptr) : 0, bytes, DeviceAllocApi::Pitch, pitch}
        .into(e);
}

template <class P> void allocHost(const CUpti_CallbackData& cb, Event& e) {
    const P& p = params<P>(cb);
    PinnedFields{(e.result == 0 && p.pp) ? h(*p.pp) : 0, static_cast<uint64_t>(p.bytesize), 0,
                 HostAllocApi::AllocHost}
        .into(e, EventKind::HostAlloc);
}

// The devices are the contexts' (the caller resolves them: peerContexts); 0 until then.
template <class P>
void peerCopy(const CUpti_CallbackData& cb, Event& e, PeerCopyApi api, uint64_t stream) {
    const P& p = params<P>(cb);
    PeerCopyFields{static_cast<uint64_t>(p.dstDevice), static_cast<uint64_t>(p.srcDevice),
                   static_cast<uint64_t>(p.ByteCount), -1, -1, api}
        .into(e);
    e.stream = stream;
}

template <class P> void peerContextsOf(const CUpti_CallbackData& cb, void*& src, void*& dst) {
    const P& p = params<P>(cb);
    src = p.srcContext;
    dst = p.dstContext;
}

template <class P> void hostRegister(const CUpti_CallbackData& cb, Event& e) {
    const P& p = params<P>(cb);
    PinnedFields{h(p.p), static_cast<uint64_t>(p.bytesize), p.Flags}.into(e, EventKind::HostRegister);
}

} // namespace

std::span<const CUpti_CallbackId> tracedCallbackIds() { return kIds; }
std::span<const CUpti_CallbackId> tracedRuntimeCallbackIds() { return kRuntimeIds; }

bool decodeRuntimePeerCopy(CUpti_CallbackId cbid, const CUpti_CallbackData& cb, Event& e) {
    auto fields = [&](const auto& p, PeerCopyApi api) {
        PeerCopyFields{h(p.dst), h(p.src), static_cast<uint64_t>(p.count), p.srcDevice,
                       p.dstDevice, api}
            .into(e);
    };
    if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000) {
        fields(params<cudaMemcpyPeer_v4000_params>(cb), PeerCopyApi::RuntimeSync);
        e.stream = 0;
    } else if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000) {
        const auto& p = params<cudaMemcpyPeerAsync_v4000_params>(cb);
        fields(p, PeerCopyApi::RuntimeAsync);
        e.stream = h(p.stream);
    } else {
        return false;
    }
    e.result = resultOf(cb);
    e.correlation = cb.correlationId;
    return true;
}

uint64_t freePointer(CUpti_CallbackId cbid, const CUpti_CallbackData& cb) {
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync)
        return params<cuMemFreeAsync_params>(cb).dptr;
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz)
        return params<cuMemFreeAsync_ptsz_params>(cb).dptr;
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2) return params<cuMemFree_v2_params>(cb).dptr;
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFree) return params<cuMemFree_params>(cb).dptr;
    return 0;
}

bool peerContexts(CUpti_CallbackId cbid, const CUpti_CallbackData& cb, void*& src, void*& dst) {
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer: peerContextsOf<cuMemcpyPeer_params>(cb, src, dst); break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds:
        peerContextsOf<cuMemcpyPeer_ptds_params>(cb, src, dst);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync:
        peerContextsOf<cuMemcpyPeerAsync_params>(cb, src, dst);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz:
        peerContextsOf<cuMemcpyPeerAsync_ptsz_params>(cb, src, dst);
        break;
    default: return false;
    }
    return true;
}

size_t accessDescriptor(CUpti_CallbackId cbid, const CUpti_CallbackData& cb, size_t i, Event& e) {
    if (cbid != CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAccess) return 0;
    const auto& p = params<cuMemPoolSetAccess_params>(cb);
    if (!p.map || i >= p.count) return p.map ? p.count : 0;
    const CUmemAccessDesc& d = p.map[i];
    SetAccessFields f{static_cast<uint32_t>(d.flags), p.count,
                      static_cast<uint8_t>(d.location.type)};
    e.device = d.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? static_cast<int16_t>(d.location.id)
                                                              : int16_t{-1};
    f.into(e);
    return p.count;
}

bool setAttributeTarget(CUpti_CallbackId cbid, const CUpti_CallbackData& cb, uint64_t& pool,
                        int& attr) {
    if (cbid != CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAttribute) return false;
    const auto& p = params<cuMemPoolSetAttribute_params>(cb);
    pool = h(p.pool);
    attr = static_cast<int>(p.attr);
    return true;
}

__attribute__((hot)) Decoded decodeExit(CUpti_CallbackId cbid, const CUpti_CallbackData& cb, Event& e) {
    Decoded d;
    d.record = true;
    e.result = resultOf(cb);
    e.correlation = cb.correlationId;
    const bool ok = e.result == 0;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
        alloc<cuMemAllocAsync_params>(cb, e, AllocApi::Async, false, false, d);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
        alloc<cuMemAllocAsync_ptsz_params>(cb, e, AllocApi::AsyncPtsz, true, false, d);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
        alloc<cuMemAllocFromPoolAsync_params>(cb, e, AllocApi::FromPool, false, true, d);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
        alloc<cuMemAllocFromPoolAsync_ptsz_params>(cb, e, AllocApi::FromPoolPtsz, true, true, d);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync: {
        const auto& p = params<cuMemFreeAsync_params>(cb);
        FreeFields{p.dptr, std::nullopt}.into(e); // the size is the writer's to resolve
        e.stream = h(p.hStream);
        d.needs = kNeedPtrPool | kNeedUsed;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
        const auto& p = params<cuMemFreeAsync_ptsz_params>(cb);
        FreeFields{p.dptr, std::nullopt}.into(e);
        e.stream = ptszStream(p.hStream);
        d.needs = kNeedPtrPool | kNeedUsed;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolCreate: {
        const auto& p = params<cuMemPoolCreate_params>(cb);
        e.kind = EventKind::PoolCreate;
        e.pool = (ok && p.pool) ? h(*p.pool) : 0;
        PoolCreateFields f{PoolKind::Explicit};
        if (p.poolProps) {
            f.maxSize = p.poolProps->maxSize;
            f.handleTypes = static_cast<uint32_t>(p.poolProps->handleTypes);
            f.locationType = static_cast<uint16_t>(p.poolProps->location.type);
            if (p.poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
                e.device = static_cast<int16_t>(p.poolProps->location.id);
        }
        f.into(e);
        d.needs = ok ? kNeedPoolEntity : 0;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolDestroy:
        e.kind = EventKind::PoolDestroy;
        e.pool = h(params<cuMemPoolDestroy_params>(cb).pool);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAttribute: {
        const auto& p = params<cuMemPoolSetAttribute_params>(cb);
        e.pool = h(p.pool);
        // The old value is read at enter; the caller adds it (kNeedOldValue).
        AttributeFields f{static_cast<PoolAttr>(p.attr), 0, std::nullopt};
        if (p.value) {
            // Reuse policies are ints, thresholds and high-watermark resets are cuuint64_t.
            if (p.attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD ||
                p.attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH || p.attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH)
                f.value = *static_cast<const cuuint64_t*>(p.value);
            else
                f.value = static_cast<uint64_t>(*static_cast<const int*>(p.value));
        }
        f.into(e);
        d.needs = kNeedOldValue;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo: {
        const auto& p = params<cuMemPoolTrimTo_params>(cb);
        e.pool = h(p.pool);
        TrimFields{p.minBytesToKeep}.into(e);
        d.needs = kNeedReserved | kNeedUsed;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAccess: {
        // The first descriptor; the caller records the others as events of their own
        // (accessDescriptor).
        const auto& p = params<cuMemPoolSetAccess_params>(cb);
        e.pool = h(p.pool);
        if (accessDescriptor(cbid, cb, 0, e) == 0) SetAccessFields{0, 0, 0}.into(e);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuDeviceSetMemPool: {
        const auto& p = params<cuDeviceSetMemPool_params>(cb);
        e.device = static_cast<int16_t>(p.dev);
        e.pool = h(p.pool);
        SetMempoolFields{CU_MEM_LOCATION_TYPE_DEVICE}.into(e);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemSetMemPool: {
        // CUDA 13's location form: only device locations have a "device current pool".
        const auto& p = params<cuMemSetMemPool_params>(cb);
        e.pool = h(p.pool);
        SetMempoolFields f;
        if (p.location) {
            f.locationType = static_cast<uint32_t>(p.location->type);
            if (p.location->type == CU_MEM_LOCATION_TYPE_DEVICE)
                e.device = static_cast<int16_t>(p.location->id);
        }
        f.into(e);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolExportToShareableHandle: {
        const auto& p = params<cuMemPoolExportToShareableHandle_params>(cb);
        e.pool = h(p.pool);
        PoolExportFields{static_cast<uint32_t>(p.handleType)}.into(e);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportFromShareableHandle: {
        const auto& p = params<cuMemPoolImportFromShareableHandle_params>(cb);
        e.kind = EventKind::PoolImport;
        e.pool = (ok && p.pool_out) ? h(*p.pool_out) : 0;
        PoolCreateFields f{PoolKind::Imported};
        f.handleTypes = static_cast<uint32_t>(p.handleType);
        f.into(e);
        d.needs = ok ? kNeedPoolEntity : 0;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolExportPointer: {
        const auto& p = params<cuMemPoolExportPointer_params>(cb);
        e.kind = EventKind::PointerExport;
        SharedPointerFields{p.ptr}.into(e);
        d.needs = kNeedPtrPool;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportPointer: {
        const auto& p = params<cuMemPoolImportPointer_params>(cb);
        e.kind = EventKind::PointerImport;
        e.pool = h(p.pool);
        SharedPointerFields{(ok && p.ptr_out) ? static_cast<uint64_t>(*p.ptr_out) : 0}.into(e);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuEventRecord: {
        const auto& p = params<cuEventRecord_params>(cb);
        e.kind = EventKind::EventRecord;
        CuEventFields{h(p.hEvent)}.into(e);
        e.stream = h(p.hStream);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuEventRecord_ptsz: {
        const auto& p = params<cuEventRecord_ptsz_params>(cb);
        e.kind = EventKind::EventRecord;
        CuEventFields{h(p.hEvent)}.into(e);
        e.stream = ptszStream(p.hStream);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags: {
        const auto& p = params<cuEventRecordWithFlags_params>(cb);
        e.kind = EventKind::EventRecord;
        CuEventFields{h(p.hEvent), p.flags}.into(e);
        e.stream = h(p.hStream);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags_ptsz: {
        const auto& p = params<cuEventRecordWithFlags_ptsz_params>(cb);
        e.kind = EventKind::EventRecord;
        CuEventFields{h(p.hEvent), p.flags}.into(e);
        e.stream = ptszStream(p.hStream);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent: {
        const auto& p = params<cuStreamWaitEvent_params>(cb);
        e.kind = EventKind::StreamWaitEvent;
        CuEventFields{h(p.hEvent), p.Flags}.into(e);
        e.stream = h(p.hStream);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz: {
        const auto& p = params<cuStreamWaitEvent_ptsz_params>(cb);
        e.kind = EventKind::StreamWaitEvent;
        CuEventFields{h(p.hEvent), p.Flags}.into(e);
        e.stream = ptszStream(p.hStream);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
        e.kind = EventKind::StreamSynchronize;
        e.stream = h(params<cuStreamSynchronize_params>(cb).hStream);
        d.needs = kSync | kNeedDevicePool | kNeedReserved | kNeedUsed;
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz:
        e.kind = EventKind::StreamSynchronize;
        e.stream = ptszStream(params<cuStreamSynchronize_ptsz_params>(cb).hStream);
        d.needs = kSync | kNeedDevicePool | kNeedReserved | kNeedUsed;
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize:
        e.kind = EventKind::EventSynchronize;
        CuEventFields{h(params<cuEventSynchronize_params>(cb).hEvent)}.into(e);
        d.needs = kSync | kNeedDevicePool | kNeedReserved | kNeedUsed;
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2:
        e.kind = EventKind::ContextSynchronize;
        d.needs = kSync | kNeedDevicePool | kNeedReserved | kNeedUsed;
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamCreate: {
        const auto& p = params<cuStreamCreate_params>(cb);
        e.stream = (ok && p.phStream) ? h(*p.phStream) : 0;
        StreamCreateFields{p.Flags, 0}.into(e);
        d.needs = ok ? kNeedStreamEntity : 0;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamCreateWithPriority: {
        const auto& p = params<cuStreamCreateWithPriority_params>(cb);
        e.stream = (ok && p.phStream) ? h(*p.phStream) : 0;
        StreamCreateFields{p.flags, p.priority}.into(e);
        d.needs = ok ? kNeedStreamEntity : 0;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy:
        e.kind = EventKind::StreamDestroy;
        e.stream = h(params<cuStreamDestroy_params>(cb).hStream);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy_v2:
        e.kind = EventKind::StreamDestroy;
        e.stream = h(params<cuStreamDestroy_v2_params>(cb).hStream);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc: deviceAlloc<cuMemAlloc_params>(cb, e); break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: deviceAlloc<cuMemAlloc_v2_params>(cb, e); break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch:
        deviceAllocPitch<cuMemAllocPitch_params>(cb, e);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2:
        deviceAllocPitch<cuMemAllocPitch_v2_params>(cb, e);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
        const auto& p = params<cuMemAllocManaged_params>(cb);
        DeviceAllocFields{(ok && p.dptr) ? static_cast<uint64_t>(*p.dptr) : 0, p.bytesize,
                          DeviceAllocApi::Managed, p.flags}
            .into(e);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
        // The size is the writer's to resolve; the pool (a stream-ordered block freed with
        // cudaFree) and the call's duration are looked up at enter.
        ReleaseMemFields{freePointer(cbid, cb), std::nullopt, 0}.into(e, EventKind::DeviceFree);
        d.needs = kNeedPtrPool | kNeedUsed;
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost: allocHost<cuMemAllocHost_params>(cb, e); break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2:
        allocHost<cuMemAllocHost_v2_params>(cb, e);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
        const auto& p = params<cuMemHostAlloc_params>(cb);
        PinnedFields{(ok && p.pp) ? h(*p.pp) : 0, p.bytesize, p.Flags, HostAllocApi::HostAlloc}
            .into(e, EventKind::HostAlloc);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
        ReleaseMemFields{h(params<cuMemFreeHost_params>(cb).p), std::nullopt, 0}.into(e, EventKind::HostFree);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister:
        hostRegister<cuMemHostRegister_params>(cb, e);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2:
        hostRegister<cuMemHostRegister_v2_params>(cb, e);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister:
        ReleaseMemFields{h(params<cuMemHostUnregister_params>(cb).p), std::nullopt, 0}
            .into(e, EventKind::HostUnregister);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer:
        peerCopy<cuMemcpyPeer_params>(cb, e, PeerCopyApi::Sync, 0);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds:
        peerCopy<cuMemcpyPeer_ptds_params>(cb, e, PeerCopyApi::Sync, h(CU_STREAM_PER_THREAD));
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync:
        peerCopy<cuMemcpyPeerAsync_params>(cb, e, PeerCopyApi::Async,
                                           h(params<cuMemcpyPeerAsync_params>(cb).hStream));
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz:
        peerCopy<cuMemcpyPeerAsync_ptsz_params>(
            cb, e, PeerCopyApi::Async, ptszStream(params<cuMemcpyPeerAsync_ptsz_params>(cb).hStream));
        break;
    default:
        d.record = false;
        break;
    }
    return d;
}

} // namespace poolscope::collector
