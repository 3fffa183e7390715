// The decode layer on hand-built CUPTI callback records: what the driver would hand the
// collector at API exit, without a GPU.
#include <algorithm>
#include <cstring>
#include <cupti.h>
#include <gtest/gtest.h>

#include "Decode.h"

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
