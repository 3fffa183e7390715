// The decode layer on hand-built CUPTI callback records: what the driver would hand the
// collector at API exit, without a GPU.
#include <algorithm>
#include <cstring>
#include <cupti.h>
#include <gtest/gtest.h>

#include "Decode.h"
#include "poolscope/EventFields.h"

using namespace poolscope;
using namespace poolscope::collector;

namespace {

struct Call {
    CUpti_CallbackData cb{};
    CUresult result = CUDA_SUCCESS;
    template <class P> Call(const P* params, uint32_t corr = 7) {
        cb.callbackSite = CUPTI_API_EXIT;
        cb.functionParams = params;
        cb.functionReturnValue = &result;
        cb.correlationId = corr;
    }
};

template <class P> Event decode(CUpti_CallbackId id, const P& p, Decoded* d = nullptr,
                                CUresult result = CUDA_SUCCESS) {
    Call c(&p);
    c.result = result;
    Event e;
    Decoded dd = decodeExit(id, c.cb, e);
    if (d) *d = dd;
    return e;
}

CUstream stream(uint64_t v) { return reinterpret_cast<CUstream>(v); }
CUmemoryPool pool(uint64_t v) { return reinterpret_cast<CUmemoryPool>(v); }

} // namespace

TEST(Decode, AllocAsyncNeedsDevicePoolAndWatermarks) {
    CUdeviceptr out = 0xd000;
    cuMemAllocAsync_params p{&out, 4096, stream(0x51)};
    Decoded d;
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, p, &d);
    EXPECT_TRUE(d.record);
    EXPECT_EQ(e.kind, EventKind::Alloc);
    EXPECT_EQ(e.variant, uint8_t(AllocApi::Async));
    EXPECT_EQ(e.ptr, 0xd000u);
    EXPECT_EQ(e.size, 4096u);
    EXPECT_EQ(e.stream, 0x51u);
    EXPECT_EQ(e.pool, 0u);
    EXPECT_EQ(e.correlation, 7u);
    EXPECT_TRUE(d.needs & kNeedDevicePool);
    EXPECT_TRUE(d.needs & kNeedReserved);
    EXPECT_TRUE(d.needs & kNeedUsed);
}

TEST(Decode, FailedAllocKeepsSizeAndError) {
    CUdeviceptr out = 0xdead; // garbage left by the driver must not be trusted
    cuMemAllocAsync_params p{&out, size_t(1) << 50, stream(0x51)};
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, p, nullptr,
                     CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(e.kind, EventKind::Alloc);
    EXPECT_EQ(e.result, int32_t(CUDA_ERROR_OUT_OF_MEMORY));
    EXPECT_EQ(e.ptr, 0u);
    EXPECT_EQ(e.size, size_t(1) << 50);
    EXPECT_TRUE(e.failed());
}

TEST(Decode, PerThreadStreamVariants) {
    CUdeviceptr out = 0xd100;
    cuMemAllocAsync_ptsz_params p{&out, 256, nullptr};
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, p);
    EXPECT_EQ(e.variant, uint8_t(AllocApi::AsyncPtsz));
    EXPECT_EQ(e.stream, reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD));
    cuMemFreeAsync_ptsz_params f{0xd100, nullptr};
    Decoded d;
    Event ef = decode(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, f, &d);
    EXPECT_EQ(ef.kind, EventKind::Free);
    EXPECT_EQ(ef.stream, reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD));
    EXPECT_TRUE(d.needs & kNeedPtrPool);
    EXPECT_TRUE(d.needs & kNeedUsed);
    EXPECT_FALSE(d.needs & kNeedReserved); // a free never changes reserved memory
}

TEST(Decode, FromPoolCarriesItsPool) {
    CUdeviceptr out = 0xd200;
    cuMemAllocFromPoolAsync_params p{&out, 1 << 20, pool(0xa1), stream(0x52)};
    Decoded d;
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, p, &d);
    EXPECT_EQ(e.variant, uint8_t(AllocApi::FromPool));
    EXPECT_EQ(e.pool, 0xa1u);
    EXPECT_FALSE(d.needs & kNeedDevicePool);
    cuMemAllocFromPoolAsync_ptsz_params q{&out, 64, pool(0xa1), nullptr};
    Event e2 = decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, q);
    EXPECT_EQ(e2.variant, uint8_t(AllocApi::FromPoolPtsz));
}

TEST(Decode, FreeAtEnterNamesThePointer) {
    cuMemFreeAsync_params f{0xd300, stream(0x51)};
    Call c(&f);
    c.cb.callbackSite = CUPTI_API_ENTER;
    EXPECT_EQ(freePointer(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, c.cb), 0xd300u);
    EXPECT_EQ(freePointer(CUPTI_DRIVER_TRACE_CBID_cuEventRecord, c.cb), 0u);
}

TEST(Decode, PoolCreateReadsProps) {
    CUmemoryPool out = pool(0xb0);
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 1;
    props.maxSize = 1 << 30;
    cuMemPoolCreate_params p{&out, &props};
    Decoded d;
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemPoolCreate, p, &d);
    EXPECT_EQ(e.kind, EventKind::PoolCreate);
    EXPECT_EQ(e.pool, 0xb0u);
    EXPECT_EQ(e.device, 1);
    EXPECT_EQ(e.size, 1u << 30);
    EXPECT_EQ(e.aux, uint64_t(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    EXPECT_EQ(e.variant, uint8_t(PoolKind::Explicit));
    EXPECT_TRUE(d.needs & kNeedPoolEntity);
}

TEST(Decode, SetAttributeWideAndNarrowValues) {
    cuuint64_t threshold = 64ull << 20;
    cuMemPoolSetAttribute_params p{pool(0xb0), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold};
    Decoded d;
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAttribute, p, &d);
    EXPECT_EQ(e.kind, EventKind::PoolSetAttribute);
    EXPECT_EQ(e.attr, uint16_t(PoolAttr::ReleaseThreshold));
    EXPECT_EQ(e.size, 64ull << 20);
    EXPECT_TRUE(d.needs & kNeedOldValue);
    int off = 0;
    cuMemPoolSetAttribute_params q{pool(0xb0), CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &off};
    Event e2 = decode(CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAttribute, q);
    EXPECT_EQ(e2.attr, uint16_t(PoolAttr::ReuseAllowOpportunistic));
    EXPECT_EQ(e2.size, 0u);
    uint64_t poolOut = 0;
    int attr = 0;
    Call c(&q);
    ASSERT_TRUE(setAttributeTarget(CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAttribute, c.cb, poolOut, attr));
    EXPECT_EQ(poolOut, 0xb0u);
    EXPECT_EQ(attr, int(CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC));
}

TEST(Decode, TrimAndMempoolForms) {
    cuMemPoolTrimTo_params t{pool(0xb0), 4096};
    Decoded d;
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo, t, &d);
    EXPECT_EQ(e.kind, EventKind::PoolTrimTo);
    EXPECT_EQ(e.size, 4096u);
    EXPECT_TRUE(d.needs & kNeedReserved);

    cuDeviceSetMemPool_params s{2, pool(0xb1)};
    Event e2 = decode(CUPTI_DRIVER_TRACE_CBID_cuDeviceSetMemPool, s);
    EXPECT_EQ(e2.kind, EventKind::DeviceSetMempool);
    EXPECT_EQ(e2.device, 2);
    EXPECT_EQ(e2.pool, 0xb1u);

    CUmemLocation loc{};
    loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
    loc.id = 3;
    cuMemSetMemPool_params m{&loc, CU_MEM_ALLOCATION_TYPE_PINNED, pool(0xb2)};
    Event e3 = decode(CUPTI_DRIVER_TRACE_CBID_cuMemSetMemPool, m);
    EXPECT_EQ(e3.kind, EventKind::DeviceSetMempool);
    EXPECT_EQ(e3.device, 3);
    EXPECT_EQ(e3.pool, 0xb2u);
}

TEST(Decode, EventsWaitsAndSyncs) {
    CUevent ev = reinterpret_cast<CUevent>(0xe1);
    cuEventRecordWithFlags_params r{ev, stream(0x51), 1};
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags, r);
    EXPECT_EQ(e.kind, EventKind::EventRecord);
    EXPECT_EQ(e.ptr, 0xe1u);
    EXPECT_EQ(e.stream, 0x51u);
    EXPECT_EQ(e.aux, 1u);

    cuStreamWaitEvent_params w{stream(0x52), ev, 0};
    Event e2 = decode(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent, w);
    EXPECT_EQ(e2.kind, EventKind::StreamWaitEvent);
    EXPECT_EQ(e2.stream, 0x52u);
    EXPECT_EQ(e2.ptr, 0xe1u);

    cuStreamSynchronize_params s{stream(0x52)};
    Decoded d;
    Event e3 = decode(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, s, &d);
    EXPECT_EQ(e3.kind, EventKind::StreamSynchronize);
    EXPECT_TRUE(d.needs & kSync);

    cuCtxSynchronize_v2_params c{nullptr};
    Event e4 = decode(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2, c);
    EXPECT_EQ(e4.kind, EventKind::ContextSynchronize);
}

TEST(Decode, StreamCreateWithPriority) {
    CUstream out = stream(0x77);
    cuStreamCreateWithPriority_params p{&out, 1, -2};
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuStreamCreateWithPriority, p);
    EXPECT_EQ(e.kind, EventKind::StreamCreate);
    EXPECT_EQ(e.stream, 0x77u);
    EXPECT_EQ(e.aux, 1u);
    EXPECT_EQ(int(e.variant) - 128, -2);
}

TEST(Decode, IpcCalls) {
    CUmemoryPool out = pool(0xc0);
    int fd = 5;
    cuMemPoolImportFromShareableHandle_params p{&out, reinterpret_cast<void*>(intptr_t(fd)),
                                                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0};
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportFromShareableHandle, p);
    EXPECT_EQ(e.kind, EventKind::PoolImport);
    EXPECT_EQ(e.pool, 0xc0u);
    EXPECT_EQ(e.variant, uint8_t(PoolKind::Imported));
    CUdeviceptr ptr = 0xf000;
    CUmemPoolPtrExportData data{};
    cuMemPoolImportPointer_params q{&ptr, pool(0xc0), &data};
    Event e2 = decode(CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportPointer, q);
    EXPECT_EQ(e2.kind, EventKind::PointerImport);
    EXPECT_EQ(e2.ptr, 0xf000u);
    EXPECT_EQ(e2.pool, 0xc0u);
}

TEST(Decode, UnsubscribedIdIsNotRecorded) {
    cuMemAllocAsync_params p{};
    Decoded d;
    decode(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, p, &d);
    EXPECT_FALSE(d.record);
}

TEST(Decode, EveryTracedIdDecodes) {
    // A record for each id we subscribe to must decode (no id subscribed but unhandled).
    alignas(16) unsigned char zeros[512] = {};
    CUdeviceptr ptr = 0;
    for (CUpti_CallbackId id : tracedCallbackIds()) {
        // Output-pointer first fields get a real target; every other pointer is null.
        void* slots[4] = {&ptr, nullptr, nullptr, nullptr};
        std::memcpy(zeros, slots, sizeof slots);
        Call c(zeros);
        Event e;
        EXPECT_TRUE(decodeExit(id, c.cb, e).record) << "cbid " << id;
    }
    auto ids = tracedCallbackIds();
    EXPECT_NE(std::find(ids.begin(), ids.end(), CUPTI_DRIVER_TRACE_CBID_cuMemSetMemPool), ids.end());
    EXPECT_NE(std::find(ids.begin(), ids.end(), CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz), ids.end());
}

// Issue #18: memory outside the pools, each driver entry point the runtime's cudaMalloc,
// cudaFree, cudaMallocPitch, cudaMallocManaged, cudaHostAlloc, cudaMallocHost, cudaFreeHost,
// cudaHostRegister and cudaHostUnregister arrive through (hand-built records).
TEST(Decode, CuMemAllocBothFormsAreDeviceAllocsOutsideThePools) {
    CUdeviceptr out = 0x7f00'0000'0000;
    cuMemAlloc_v2_params p{&out, 64u << 20};
    Decoded d;
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, p, &d);
    EXPECT_TRUE(d.record);
    EXPECT_EQ(e.kind, EventKind::DeviceAlloc);
    EXPECT_EQ(e.variant, uint8_t(DeviceAllocApi::Malloc));
    EXPECT_EQ(e.ptr, 0x7f00'0000'0000u);
    EXPECT_EQ(e.size, 64u << 20);
    EXPECT_EQ(e.pool, 0u);
    EXPECT_EQ(e.stream, 0u);
    EXPECT_EQ(d.needs, 0); // no pool, no watermarks: nothing for the hot path to read
    CUdeviceptr_v1 out1 = 0x1000;
    cuMemAlloc_params p1{&out1, 4096};
    Event e1 = decode(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc, p1);
    EXPECT_EQ(e1.kind, EventKind::DeviceAlloc);
    EXPECT_EQ(e1.ptr, 0x1000u);
    EXPECT_EQ(e1.size, 4096u);
    // A failed cudaMalloc keeps its size and error, not the garbage left in the output.
    CUdeviceptr junk = 0xdead;
    cuMemAlloc_v2_params big{&junk, size_t(1) << 45};
    Event f = decode(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, big, nullptr, CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(f.kind, EventKind::DeviceAlloc);
    EXPECT_EQ(f.ptr, 0u);
    EXPECT_EQ(f.size, size_t(1) << 45);
    EXPECT_EQ(f.result, int32_t(CUDA_ERROR_OUT_OF_MEMORY));
}

TEST(Decode, PitchAndManagedAllocs) {
    CUdeviceptr out = 0x9000;
    size_t pitch = 1024;
    cuMemAllocPitch_v2_params p{&out, &pitch, 1000, 300, 4};
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, p);
    EXPECT_EQ(e.kind, EventKind::DeviceAlloc);
    EXPECT_EQ(e.variant, uint8_t(DeviceAllocApi::Pitch));
    EXPECT_EQ(e.size, 1024u * 300); // what it takes: pitch * height, not width * height
    EXPECT_EQ(DeviceAllocFields::of(e).detail, 1024u);
    CUdeviceptr m = 0xA000;
    cuMemAllocManaged_params mp{&m, 12u << 20, CU_MEM_ATTACH_HOST};
    Event em = decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, mp);
    EXPECT_EQ(em.kind, EventKind::DeviceAlloc);
    EXPECT_EQ(em.variant, uint8_t(DeviceAllocApi::Managed));
    EXPECT_EQ(em.ptr, 0xA000u);
    EXPECT_EQ(em.size, 12u << 20);
    EXPECT_EQ(em.aux, uint64_t(CU_MEM_ATTACH_HOST));
}

TEST(Decode, CuMemFreeNeedsThePointersPoolAndIsSizedByTheWriter) {
    cuMemFree_v2_params p{0x7f00'0000'0000};
    Decoded d;
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, p, &d);
    EXPECT_EQ(e.kind, EventKind::DeviceFree);
    EXPECT_EQ(e.ptr, 0x7f00'0000'0000u);
    EXPECT_FALSE(e.has(kSizeKnown));
    EXPECT_TRUE(d.needs & kNeedPtrPool); // a cudaMallocAsync block may be freed with cudaFree
    EXPECT_FALSE(d.needs & kSync);       // not a pool synchronize: no implicit release read
    Call c(&p);
    EXPECT_EQ(freePointer(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, c.cb), 0x7f00'0000'0000u);
    cuMemFree_params p1{0x2000};
    Call c1(&p1);
    EXPECT_EQ(freePointer(CUPTI_DRIVER_TRACE_CBID_cuMemFree, c1.cb), 0x2000u);
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemFree, p1).kind, EventKind::DeviceFree);
}

TEST(Decode, PinnedHostAllocsKeepTheirFlags) {
    void* host = reinterpret_cast<void*>(0x5000'0000);
    cuMemHostAlloc_params p{&host, 3u << 20,
                            CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                CU_MEMHOSTALLOC_WRITECOMBINED};
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, p);
    EXPECT_EQ(e.kind, EventKind::HostAlloc);
    EXPECT_EQ(e.variant, uint8_t(HostAllocApi::HostAlloc));
    EXPECT_EQ(e.ptr, 0x5000'0000u);
    EXPECT_EQ(e.size, 3u << 20);
    EXPECT_EQ(e.aux, uint64_t(kHostAllocPortable | kHostAllocMapped | kHostAllocWriteCombined));
    static_assert(kHostAllocPortable == CU_MEMHOSTALLOC_PORTABLE);
    static_assert(kHostAllocMapped == CU_MEMHOSTALLOC_DEVICEMAP);
    static_assert(kHostAllocWriteCombined == CU_MEMHOSTALLOC_WRITECOMBINED);
    static_assert(kHostRegisterPortable == CU_MEMHOSTREGISTER_PORTABLE);
    static_assert(kHostRegisterMapped == CU_MEMHOSTREGISTER_DEVICEMAP);
    static_assert(kHostRegisterIoMemory == CU_MEMHOSTREGISTER_IOMEMORY);
    static_assert(kHostRegisterReadOnly == CU_MEMHOSTREGISTER_READ_ONLY);
    void* h2 = reinterpret_cast<void*>(0x5100'0000);
    cuMemAllocHost_v2_params a{&h2, 4096};
    Event ea = decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2, a);
    EXPECT_EQ(ea.kind, EventKind::HostAlloc);
    EXPECT_EQ(ea.variant, uint8_t(HostAllocApi::AllocHost));
    EXPECT_EQ(ea.ptr, 0x5100'0000u);
    EXPECT_EQ(ea.aux, 0u);
    void* junk = reinterpret_cast<void*>(0xdead);
    cuMemHostAlloc_params fail{&junk, size_t(1) << 44, 0};
    Event ef = decode(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, fail, nullptr, CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(ef.ptr, 0u);
    EXPECT_TRUE(ef.failed());
    cuMemFreeHost_params fh{h2};
    Event efh = decode(CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, fh);
    EXPECT_EQ(efh.kind, EventKind::HostFree);
    EXPECT_EQ(efh.ptr, 0x5100'0000u);
}

TEST(Decode, HostRegisterAndUnregister) {
    void* p = reinterpret_cast<void*>(0x6000'0000);
    cuMemHostRegister_v2_params r{p, 2u << 20, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_READ_ONLY};
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2, r);
    EXPECT_EQ(e.kind, EventKind::HostRegister);
    EXPECT_EQ(e.ptr, 0x6000'0000u);
    EXPECT_EQ(e.size, 2u << 20);
    EXPECT_EQ(e.aux, uint64_t(kHostRegisterPortable | kHostRegisterReadOnly));
    cuMemHostRegister_params r1{p, 8192, CU_MEMHOSTREGISTER_DEVICEMAP};
    Event e1 = decode(CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister, r1);
    EXPECT_EQ(e1.kind, EventKind::HostRegister);
    EXPECT_EQ(e1.aux, uint64_t(kHostRegisterMapped));
    cuMemHostUnregister_params u{p};
    Event eu = decode(CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister, u);
    EXPECT_EQ(eu.kind, EventKind::HostUnregister);
    EXPECT_EQ(eu.ptr, 0x6000'0000u);
}

TEST(Decode, BeyondPoolIdsAreSubscribedOnceInTheDriverDomain) {
    auto ids = tracedCallbackIds();
    for (CUpti_CallbackId id :
         {CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
          CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
          CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
          CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2,
          CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister})
        EXPECT_EQ(std::count(ids.begin(), ids.end(), id), 1) << "cbid " << id;
}

// Issue #19: several GPUs. Peer copies name two contexts (the caller turns them into devices),
// and each access descriptor of a cudaMemPoolSetAccess is readable on its own (hand-built
// records).
TEST(Decode, PeerCopiesOfEachFormKeepBothSidesBytesAndStream) {
    auto ctx = [](uint64_t v) { return reinterpret_cast<CUcontext>(v); };
    cuMemcpyPeerAsync_params a{0xD100, ctx(0xC1), 0xD000, ctx(0xC0), 3u << 20, stream(0x51)};
    Decoded d;
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync, a, &d);
    EXPECT_TRUE(d.record);
    EXPECT_EQ(e.kind, EventKind::PeerCopy);
    const PeerCopyFields f = PeerCopyFields::of(e);
    EXPECT_EQ(f.dst, 0xD100u);
    EXPECT_EQ(f.src, 0xD000u);
    EXPECT_EQ(f.bytes, 3u << 20);
    EXPECT_EQ(f.api, PeerCopyApi::Async);
    EXPECT_EQ(f.srcDevice, -1); // the contexts' devices are the callback's to find
    EXPECT_EQ(e.stream, 0x51u);
    Call c(&a);
    void* src = nullptr;
    void* dst = nullptr;
    ASSERT_TRUE(peerContexts(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync, c.cb, src, dst));
    EXPECT_EQ(src, reinterpret_cast<void*>(0xC0));
    EXPECT_EQ(dst, reinterpret_cast<void*>(0xC1));

    cuMemcpyPeerAsync_ptsz_params pz{0xD100, ctx(0xC1), 0xD000, ctx(0xC0), 64, nullptr};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz, pz).stream,
              reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD));
    cuMemcpyPeer_params s{0xD100, ctx(0xC1), 0xD000, ctx(0xC0), 128};
    Event es = decode(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer, s);
    EXPECT_EQ(es.kind, EventKind::PeerCopy);
    EXPECT_EQ(PeerCopyFields::of(es).api, PeerCopyApi::Sync);
    EXPECT_EQ(es.stream, 0u);
    cuMemcpyPeer_ptds_params sp{0xD100, ctx(0xC1), 0xD000, ctx(0xC0), 128};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds, sp).stream,
              reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD));
    Call other(&a);
    EXPECT_FALSE(peerContexts(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, other.cb, src, dst));
    auto ids = tracedCallbackIds();
    for (CUpti_CallbackId id :
         {CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer, CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds,
          CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync, CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz})
        EXPECT_EQ(std::count(ids.begin(), ids.end(), id), 1) << "cbid " << id;
}

TEST(Decode, SetAccessDescriptorsEachNameTheirLocationAndFlags) {
    CUmemAccessDesc map[3] = {};
    map[0].location = {CU_MEM_LOCATION_TYPE_DEVICE, 1};
    map[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    map[1].location = {CU_MEM_LOCATION_TYPE_DEVICE, 2};
    map[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
    map[2].location = {CU_MEM_LOCATION_TYPE_HOST_NUMA, 0};
    map[2].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    cuMemPoolSetAccess_params p{pool(0x9000), map, 3};
    Event e = decode(CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAccess, p);
    EXPECT_EQ(e.kind, EventKind::PoolSetAccess);
    EXPECT_EQ(e.pool, 0x9000u);
    EXPECT_EQ(e.device, 1);
    SetAccessFields f = SetAccessFields::of(e);
    EXPECT_EQ(f.accessFlags, uint32_t(CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    EXPECT_EQ(f.descriptors, 3u);
    EXPECT_EQ(f.locationType, uint8_t(CU_MEM_LOCATION_TYPE_DEVICE));
    Call c(&p);
    Event e1 = e, e2 = e;
    EXPECT_EQ(accessDescriptor(CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAccess, c.cb, 1, e1), 3u);
    EXPECT_EQ(e1.device, 2);
    EXPECT_EQ(SetAccessFields::of(e1).accessFlags, uint32_t(CU_MEM_ACCESS_FLAGS_PROT_READ));
    EXPECT_EQ(accessDescriptor(CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAccess, c.cb, 2, e2), 3u);
    EXPECT_EQ(e2.device, -1) << "a host location is no device";
    EXPECT_EQ(SetAccessFields::of(e2).locationType, uint8_t(CU_MEM_LOCATION_TYPE_HOST_NUMA));
    // No descriptors: nothing to read, a count of 0.
    cuMemPoolSetAccess_params none{pool(0x9000), nullptr, 0};
    Event en = decode(CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAccess, none);
    EXPECT_EQ(en.kind, EventKind::PoolSetAccess);
    EXPECT_EQ(en.device, -1);
    EXPECT_EQ(SetAccessFields::of(en).descriptors, 0u);
}
