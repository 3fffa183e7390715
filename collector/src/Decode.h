#pragma once
// The decode layer: one CUPTI driver-API callback record (CUpti_CallbackData and its parameter
// struct) becomes one poolscope::Event. Pure: it reads only the record, calls neither CUDA nor
// CUPTI, so tests feed it hand-built records on a machine without a GPU. What only the driver
// can tell (the pool of a plain cudaMallocAsync, watermarks) is left to the caller, flagged in
// Decoded::needs.

#include <cstdint>
#include <span>

#include <cupti.h>

#include "poolscope/Event.h"

namespace poolscope::collector {

enum DecodeNeed : uint8_t {
    kNeedDevicePool = 1 << 0, // pool = the current pool of the calling context's device
    kNeedPtrPool = 1 << 1,    // pool = the pool the pointer came from (looked up at API enter)
    kNeedReserved = 1 << 2,   // read the pool's reserved bytes at exit
    kNeedUsed = 1 << 3,       // read the pool's used bytes at exit
    kNeedPoolEntity = 1 << 4, // a pool came into existence (create/import): register it
    kNeedStreamEntity = 1 << 5,
    kNeedOldValue = 1 << 6,   // attribute's previous value read at enter (PoolSetAttribute)
    kSync = 1 << 7,           // a synchronize: may have released pool memory (implicit release)
};

struct Decoded {
    bool record = false; // false: not one of ours
    uint8_t needs = 0;
};

// The driver callback ids the collector subscribes to. Everything else is not ours.
std::span<const CUpti_CallbackId> tracedCallbackIds();
// The runtime callback ids it subscribes to: cudaMemcpyPeer(Async), whose driver call is not
// always a cuMemcpyPeer* (the caller records one only where the call made none).
std::span<const CUpti_CallbackId> tracedRuntimeCallbackIds();

// Decodes a callback at CUPTI_API_EXIT into e (kind, variant, stream, pool, ptr, size, aux,
// attr, device where the parameters name it, result, correlation). Leaves seq, tsNs, tid and
// watermarks to the caller.
Decoded decodeExit(CUpti_CallbackId cbid, const CUpti_CallbackData& cb, Event& e);

// The pointer a Free will release, read at CUPTI_API_ENTER (0 when cbid is not a free).
uint64_t freePointer(CUpti_CallbackId cbid, const CUpti_CallbackData& cb);
// The contexts a peer copy (cuMemcpyPeer*) names, whose devices the caller looks up (false when
// cbid is not a peer copy).
bool peerContexts(CUpti_CallbackId cbid, const CUpti_CallbackData& cb, void*& src, void*& dst);
// A runtime cudaMemcpyPeer(Async) at CUPTI_API_EXIT into e (a PeerCopy of the runtime's
// variants: both devices as the runtime numbers them, the stream, result = its cudaError_t,
// correlation). False when cbid is not one of tracedRuntimeCallbackIds.
bool decodeRuntimePeerCopy(CUpti_CallbackId cbid, const CUpti_CallbackData& cb, Event& e);
// Access descriptor i of a cuMemPoolSetAccess into e (kind, flags, device or -1 for a location
// that is not a device, the call's descriptor count), when i is below that count. Returns the
// count (0 when cbid is not a set-access or it passed no descriptors).
size_t accessDescriptor(CUpti_CallbackId cbid, const CUpti_CallbackData& cb, size_t i, Event& e);
// The pool and attribute of a cuMemPoolSetAttribute, read at enter to fetch the old value.
bool setAttributeTarget(CUpti_CallbackId cbid, const CUpti_CallbackData& cb, uint64_t& pool,
                        int& attr);

} // namespace poolscope::collector
