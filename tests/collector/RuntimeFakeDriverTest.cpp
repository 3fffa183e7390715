// The collector's callback (Runtime.cpp onCallback, the hot path itself) on hand-built CUPTI
// records against a driver faked for several devices (FakeDriver.h): which device and pool an
// event is given when the calling thread's current context is one device's and the stream,
// pool or copy is another's. No GPU: the records are what CUPTI would hand the callback, the
// driver's answers are the fake's.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "FakeDriver.h"
#include "Runtime.h"
#include "poolscope/EventFields.h"

using namespace poolscope;
using namespace poolscope::collector;

namespace poolscope::collector {
// Lifecycle.cpp's: not linked here (nothing forks in these tests).
void startForkedChild() {}
} // namespace poolscope::collector

namespace {

// The fake machine: two GPUs with primary contexts 0xC0 / 0xC1, another context 0xC1B on GPU 1
// (known to no one until a stream of it is used), default pools 0xD0 / 0xD1.
constexpr uint64_t kCtx0 = 0xC0, kCtx1 = 0xC1, kCtx1b = 0xC1B;
constexpr uint64_t kDefault0 = 0xD0, kDefault1 = 0xD1;

struct Call {
    CUpti_CallbackData cb{};
    CUresult result = CUDA_SUCCESS;
    template <class P> Call(const P* params, CUpti_ApiCallbackSite site = CUPTI_API_EXIT) {
        cb.callbackSite = site;
        cb.functionParams = params;
        cb.functionReturnValue = &result;
        cb.correlationId = 1;
        cb.context = reinterpret_cast<CUcontext>(fakecuda::current());
    }
};

template <class P> void call(CUpti_CallbackId id, const P& p) {
    Call enter(&p, CUPTI_API_ENTER);
    onCallback(nullptr, CUPTI_CB_DOMAIN_DRIVER_API, id, &enter.cb);
    Call exit(&p, CUPTI_API_EXIT);
    onCallback(nullptr, CUPTI_CB_DOMAIN_DRIVER_API, id, &exit.cb);
}

// One runtime call (cudaMemcpyPeer(Async)) whose body runs between its enter and its exit.
template <class P, class Body> void runtimeCall(CUpti_CallbackId id, const P& p, Body body,
                                                CUresult result = CUDA_SUCCESS) {
    Call enter(&p, CUPTI_API_ENTER);
    onCallback(nullptr, CUPTI_CB_DOMAIN_RUNTIME_API, id, &enter.cb);
    body();
    Call exit(&p, CUPTI_API_EXIT);
    exit.result = result;
    onCallback(nullptr, CUPTI_CB_DOMAIN_RUNTIME_API, id, &exit.cb);
}

CUstream stream(uint64_t v) { return reinterpret_cast<CUstream>(v); }
CUmemoryPool poolH(uint64_t v) { return reinterpret_cast<CUmemoryPool>(v); }

class FakeDriverRuntime : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        fakecuda::State& s = fakecuda::state();
        s.contextDevice = {{kCtx0, 0}, {kCtx1, 1}, {kCtx1b, 1}};
        s.defaultPool = {{0, kDefault0}, {1, kDefault1}};
        s.currentPool = s.defaultPool;
        s.pools[kDefault0] = {2 << 20, 1 << 20, 2 << 20, 1 << 20};
        s.pools[kDefault1] = {8 << 20, 3 << 20, 8 << 20, 3 << 20};
        Runtime& rt = runtime();
        rt.watermarks = WatermarkMode::Exit;
        rt.enabled.store(true);
    }
    void SetUp() override {
        fakecuda::reset();
        fakecuda::setCurrent(kCtx0);
        drain();
    }
    // Everything this thread's ring holds, in order.
    std::vector<Event> drain() {
        std::vector<Event> out;
        ThreadState* t = threadState();
        if (!t || !t->ring) return out;
        Event buf[64];
        for (size_t n; (n = t->ring->drain(buf, 64)) > 0;) out.insert(out.end(), buf, buf + n);
        return out;
    }
    Event only() {
        std::vector<Event> v = drain();
        EXPECT_EQ(v.size(), 1u);
        return v.empty() ? Event{} : v.back();
    }
    void addStream(uint64_t s, uint64_t ctx) {
        std::lock_guard l(fakecuda::state().m);
        fakecuda::state().streamContext[s] = ctx;
    }
    Event allocAsync(uint64_t ptr, size_t bytes, uint64_t s) {
        CUdeviceptr out = ptr;
        cuMemAllocAsync_params p{&out, bytes, stream(s)};
        call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, p);
        return only();
    }
    void setDevicePool(int dev, uint64_t pool) {
        cuDeviceSetMemPool_params p{dev, poolH(pool)};
        call(CUPTI_DRIVER_TRACE_CBID_cuDeviceSetMemPool, p);
        drain();
    }
};

TEST_F(FakeDriverRuntime, AllocOnAnotherDevicesStreamFromDevice0ContextUsesDevice1Pool) {
    addStream(0x5100, kCtx1);
    const Event e = allocAsync(0x7000'0000, 1 << 20, 0x5100);
    EXPECT_EQ(e.kind, EventKind::Alloc);
    EXPECT_EQ(e.device, 1);
    EXPECT_EQ(e.pool, kDefault1);
    // Reserved is device 1's default pool's, read from the driver at the call.
    ASSERT_TRUE(e.has(kHasWatermarks));
    EXPECT_EQ(e.reserved, uint64_t(8) << 20);
    // The thread's context is still device 0's: the legacy default stream is device 0's.
    const Event d = allocAsync(0x7000'1000, 4096, 0);
    EXPECT_EQ(d.device, 0);
    EXPECT_EQ(d.pool, kDefault0);
    EXPECT_EQ(d.reserved, uint64_t(2) << 20);
}

TEST_F(FakeDriverRuntime, StreamDeviceIsCachedUntilAStreamIsDestroyed) {
    addStream(0x5200, kCtx1);
    EXPECT_EQ(allocAsync(0x7001'0000, 256, 0x5200).device, 1);
    EXPECT_EQ(allocAsync(0x7001'1000, 256, 0x5200).device, 1);
    EXPECT_EQ(allocAsync(0x7001'2000, 256, 0x5200).device, 1);
    EXPECT_EQ(fakecuda::state().streamGetDeviceCalls, 1) << "the hot path asked the driver again";

    // Destroyed, and the same handle comes back as a stream of device 0.
    cuStreamDestroy_v2_params d{stream(0x5200)};
    call(CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy_v2, d);
    const Event destroyed = only();
    EXPECT_EQ(destroyed.kind, EventKind::StreamDestroy);
    EXPECT_EQ(destroyed.device, 1) << "a destroyed stream keeps the device it had";
    addStream(0x5200, kCtx0);
    EXPECT_EQ(allocAsync(0x7001'3000, 256, 0x5200).device, 0);
    EXPECT_EQ(fakecuda::state().streamGetDeviceCalls, 2);
}

TEST_F(FakeDriverRuntime, StreamCreatedHereIsKnownWithoutAskingTheDriver) {
    fakecuda::setCurrent(kCtx1);
    CUstream created = stream(0x5300);
    cuStreamCreate_params p{&created, 0};
    addStream(0x5300, kCtx1);
    call(CUPTI_DRIVER_TRACE_CBID_cuStreamCreate, p);
    const Event c = only();
    EXPECT_EQ(c.kind, EventKind::StreamCreate);
    EXPECT_EQ(c.device, 1);
    fakecuda::setCurrent(kCtx0);
    EXPECT_EQ(allocAsync(0x7002'0000, 512, 0x5300).device, 1);
    EXPECT_EQ(fakecuda::state().streamGetDeviceCalls, 0);
}

TEST_F(FakeDriverRuntime, WithoutStreamGetDeviceTheStreamsContextGivesTheDevice) {
    // A driver before 12.8: cuStreamGetCtx, then the device of a context nobody made current
    // yet (pushed for the question and popped: the thread's context stays device 0's).
    fakecuda::state().haveStreamGetDevice = false;
    addStream(0x5400, kCtx1b);
    const Event e = allocAsync(0x7003'0000, 2048, 0x5400);
    EXPECT_EQ(e.device, 1);
    EXPECT_EQ(e.pool, kDefault1);
    EXPECT_EQ(fakecuda::state().streamGetCtxCalls, 1);
    EXPECT_EQ(fakecuda::state().pushCalls, 1);
    EXPECT_EQ(fakecuda::current(), kCtx0);
    // The context is remembered: another of its streams needs no push.
    addStream(0x5410, kCtx1b);
    EXPECT_EQ(allocAsync(0x7003'1000, 2048, 0x5410).device, 1);
    EXPECT_EQ(fakecuda::state().pushCalls, 1);
}

TEST_F(FakeDriverRuntime, UnknownStreamFallsBackToTheContextsDevice) {
    // A handle the driver does not know as a stream (destroyed before the call, or garbage):
    // the event keeps the calling context's device, and the answer is not cached.
    const Event e = allocAsync(0, 64, 0x5500);
    EXPECT_EQ(e.device, 0);
    allocAsync(0, 64, 0x5500);
    EXPECT_EQ(fakecuda::state().streamGetDeviceCalls, 2);
}

TEST_F(FakeDriverRuntime, EachDevicesCurrentPoolFollowsItsSetMemPool) {
    constexpr uint64_t kExplicit1 = 0xE1, kExplicit0 = 0xE0;
    {
        std::lock_guard l(fakecuda::state().m);
        fakecuda::state().pools[kExplicit1] = {32 << 20, 16 << 20, 32 << 20, 16 << 20};
        fakecuda::state().pools[kExplicit0] = {4 << 20, 0, 4 << 20, 0};
    }
    addStream(0x5600, kCtx1);
    addStream(0x5610, kCtx0);
    setDevicePool(1, kExplicit1); // called from device 0's context: device 1's pool changes
    Event a1 = allocAsync(0x7004'0000, 1 << 20, 0x5600);
    EXPECT_EQ(a1.device, 1);
    EXPECT_EQ(a1.pool, kExplicit1);
    EXPECT_EQ(a1.reserved, uint64_t(32) << 20);
    Event a0 = allocAsync(0x7004'1000, 1 << 20, 0x5610);
    EXPECT_EQ(a0.device, 0);
    EXPECT_EQ(a0.pool, kDefault0) << "device 0's current pool is still its default";
    setDevicePool(0, kExplicit0);
    EXPECT_EQ(allocAsync(0x7004'2000, 64, 0x5610).pool, kExplicit0);
    EXPECT_EQ(allocAsync(0x7004'3000, 64, 0x5600).pool, kExplicit1);
    // From a pool named in the call: the stream's device, the named pool.
    CUdeviceptr out = 0x7004'4000;
    cuMemAllocFromPoolAsync_params fp{&out, 128, poolH(kExplicit1), stream(0x5600)};
    call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, fp);
    const Event f = only();
    EXPECT_EQ(f.device, 1);
    EXPECT_EQ(f.pool, kExplicit1);
    // A stream synchronize of device 1's stream reads device 1's current pool.
    cuStreamSynchronize_params sp{stream(0x5600)};
    call(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, sp);
    std::vector<Event> sync = drain();
    ASSERT_FALSE(sync.empty());
    EXPECT_EQ(sync[0].kind, EventKind::StreamSynchronize);
    EXPECT_EQ(sync[0].device, 1);
    EXPECT_EQ(sync[0].pool, kExplicit1);
    setDevicePool(0, kDefault0);
    setDevicePool(1, kDefault1);
}

TEST_F(FakeDriverRuntime, FreeOnAnotherDevicesStreamNamesThatDeviceAndTheBlocksPool) {
    addStream(0x5700, kCtx1);
    const Event a = allocAsync(0x7005'0000, 4096, 0x5700);
    ASSERT_EQ(a.pool, kDefault1);
    cuMemFreeAsync_params f{0x7005'0000, stream(0x5700)};
    call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, f);
    const Event e = only();
    EXPECT_EQ(e.kind, EventKind::Free);
    EXPECT_EQ(e.device, 1);
    EXPECT_EQ(e.pool, kDefault1);
}

} // namespace

namespace {

// A free on another thread than its alloc (PyTorch's autograd thread freeing the forward's
// tensors) finds the alloc's pool in the table all threads share: no driver call at the free,
// and its `used` derived like a same-thread free's. Its entry is gone after the free: a second
// free of the address (now someone else's, or nobody's) asks the driver again.
TEST_F(FakeDriverRuntime, FreeOnAnotherThreadFindsTheAllocsPoolWithoutAskingTheDriver) {
    constexpr uint64_t kPtr = 0x7106'0000;
    Event a;
    ThreadState* otherState = nullptr;
    std::thread other([&] {
        fakecuda::setCurrent(kCtx0);
        a = allocAsync(kPtr, 8192, 0);
        otherState = threadState();
    });
    other.join();
    // The collector keeps a thread's state for the process's life (a callback may come from a
    // thread's own exit path); the test's thread is gone, so its state goes with it here.
    delete otherState;
    ASSERT_EQ(a.kind, EventKind::Alloc);
    ASSERT_EQ(a.pool, kDefault0);

    cuMemFreeAsync_params f{kPtr, nullptr};
    call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, f);
    const Event e = only();
    EXPECT_EQ(e.kind, EventKind::Free);
    EXPECT_EQ(e.pool, kDefault0);
    EXPECT_TRUE(e.flags & kUsedDerived);
    EXPECT_EQ(fakecuda::state().pointerPoolCalls, 0);

    call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, f);
    const Event again = only();
    EXPECT_EQ(fakecuda::state().pointerPoolCalls, 1);
    EXPECT_EQ(again.pool, 0u); // the fake driver knows no pool for it
    EXPECT_FALSE(again.flags & kUsedDerived);
}

TEST_F(FakeDriverRuntime, SetAccessRecordsEveryDescriptorWithItsDevice) {
    // Device 0's explicit pool opened to device 1 (read-write) and to a host location, in one
    // call made from device 0's context.
    CUmemAccessDesc map[2] = {};
    map[0].location = {CU_MEM_LOCATION_TYPE_DEVICE, 1};
    map[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    map[1].location = {CU_MEM_LOCATION_TYPE_HOST_NUMA, 0};
    map[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
    cuMemPoolSetAccess_params p{poolH(0xE7), map, 2};
    call(CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAccess, p);
    const std::vector<Event> ev = drain();
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[0].kind, EventKind::PoolSetAccess);
    EXPECT_EQ(ev[0].pool, 0xE7u);
    EXPECT_EQ(ev[0].device, 1);
    EXPECT_EQ(SetAccessFields::of(ev[0]).accessFlags, uint32_t(CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    EXPECT_EQ(ev[1].kind, EventKind::PoolSetAccess);
    EXPECT_EQ(ev[1].device, -1) << "the host location must not take the calling context's device";
    EXPECT_EQ(SetAccessFields::of(ev[1]).locationType, uint8_t(CU_MEM_LOCATION_TYPE_HOST_NUMA));
    EXPECT_EQ(ev[1].correlation, ev[0].correlation);
    EXPECT_EQ(ev[1].tsNs, ev[0].tsNs);
    EXPECT_GT(ev[1].seq, ev[0].seq);
}

TEST_F(FakeDriverRuntime, PeerCopyNamesBothDevicesAndTheStreamsDevice) {
    // Device 1's stream copies from device 0 to device 1, called from device 0's context; the
    // source context is current, the destination one is device 1's primary.
    addStream(0x5800, kCtx1);
    cuMemcpyPeerAsync_params p{0x8100'0000, reinterpret_cast<CUcontext>(kCtx1), 0x8000'0000,
                               reinterpret_cast<CUcontext>(kCtx0), 5 << 20, stream(0x5800)};
    call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync, p);
    const Event e = only();
    EXPECT_EQ(e.kind, EventKind::PeerCopy);
    EXPECT_EQ(e.device, 1) << "ordered on device 1's stream";
    const PeerCopyFields f = PeerCopyFields::of(e);
    EXPECT_EQ(f.srcDevice, 0);
    EXPECT_EQ(f.dstDevice, 1);
    EXPECT_EQ(f.bytes, uint64_t(5) << 20);
    EXPECT_EQ(e.ptr, 0x8100'0000u);
    EXPECT_EQ(e.aux, 0x8000'0000u);
    EXPECT_FALSE(e.has(kHasWatermarks)) << "a copy reads no pool";
    // The synchronous form on the legacy stream: the calling context's device orders it.
    cuMemcpyPeer_params s{0x8000'0000, reinterpret_cast<CUcontext>(kCtx0), 0x8100'0000,
                          reinterpret_cast<CUcontext>(kCtx1b), 4096};
    call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer, s);
    const Event es = only();
    EXPECT_EQ(es.device, 0);
    EXPECT_EQ(PeerCopyFields::of(es).srcDevice, 1);
    EXPECT_EQ(PeerCopyFields::of(es).dstDevice, 0);
    EXPECT_EQ(PeerCopyFields::of(es).api, PeerCopyApi::Sync);
    EXPECT_EQ(fakecuda::current(), kCtx0);
}

// cudaMemcpyPeerAsync between two devices: the runtime calls cuMemcpyPeerAsync, recorded at the
// driver with both contexts; the runtime's own callback adds nothing.
TEST_F(FakeDriverRuntime, RuntimePeerCopyWithADriverPeerCopyInsideIsRecordedOnce) {
    addStream(0x5900, kCtx1);
    void* dst = reinterpret_cast<void*>(0x8100'0000);
    const void* src = reinterpret_cast<const void*>(0x8000'0000);
    cudaMemcpyPeerAsync_v4000_params rp{dst, 1, src, 0, 3 << 20, reinterpret_cast<cudaStream_t>(0x5900)};
    runtimeCall(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000, rp, [&] {
        cuMemcpyPeerAsync_params p{0x8100'0000, reinterpret_cast<CUcontext>(kCtx1), 0x8000'0000,
                                   reinterpret_cast<CUcontext>(kCtx0), 3 << 20, stream(0x5900)};
        call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync, p);
    });
    const Event e = only();
    EXPECT_EQ(e.kind, EventKind::PeerCopy);
    EXPECT_EQ(PeerCopyFields::of(e).api, PeerCopyApi::Async) << "the driver's record";
    EXPECT_EQ(PeerCopyFields::of(e).srcDevice, 0);
    EXPECT_EQ(PeerCopyFields::of(e).dstDevice, 1);
    // The next runtime copy starts afresh: one the driver does not see is recorded.
    runtimeCall(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000, rp, [] {});
    EXPECT_EQ(PeerCopyFields::of(only()).api, PeerCopyApi::RuntimeAsync);
}

// cudaMemcpyPeerAsync within one device: the runtime may copy with a plain device-to-device copy
// (no cuMemcpyPeer*, which the collector does not subscribe to), so the runtime call is recorded,
// with the runtime's devices, stream and result.
TEST_F(FakeDriverRuntime, RuntimePeerCopyWithoutADriverPeerCopyInsideIsRecordedAtTheRuntime) {
    addStream(0x5910, kCtx1);
    void* dst = reinterpret_cast<void*>(0x8100'2000);
    const void* src = reinterpret_cast<const void*>(0x8100'0000);
    cudaMemcpyPeerAsync_v4000_params rp{dst, 1, src, 1, 7 << 20, reinterpret_cast<cudaStream_t>(0x5910)};
    runtimeCall(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000, rp, [] {});
    const Event e = only();
    ASSERT_EQ(e.kind, EventKind::PeerCopy);
    const PeerCopyFields f = PeerCopyFields::of(e);
    EXPECT_EQ(f.api, PeerCopyApi::RuntimeAsync);
    EXPECT_EQ(f.srcDevice, 1);
    EXPECT_EQ(f.dstDevice, 1);
    EXPECT_EQ(f.bytes, uint64_t(7) << 20);
    EXPECT_EQ(e.ptr, 0x8100'2000u);
    EXPECT_EQ(e.aux, 0x8100'0000u);
    EXPECT_EQ(e.stream, 0x5910u);
    EXPECT_EQ(e.device, 1) << "ordered on device 1's stream, called from device 0's context";
    EXPECT_EQ(e.result, 0);
    EXPECT_GT(e.seq, 0u);
    // The synchronous form, failed: the legacy stream of the calling context's device.
    cudaMemcpyPeer_v4000_params sp{dst, 0, src, 0, 4096};
    runtimeCall(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000, sp, [] {},
                static_cast<CUresult>(cudaErrorInvalidValue));
    const Event s = only();
    EXPECT_EQ(PeerCopyFields::of(s).api, PeerCopyApi::RuntimeSync);
    EXPECT_EQ(s.stream, 0u);
    EXPECT_EQ(s.device, 0);
    EXPECT_EQ(s.result, int32_t(cudaErrorInvalidValue));
    EXPECT_TRUE(s.failed());
    // An exit whose enter came before the collector was on records nothing.
    Call exit(&sp, CUPTI_API_EXIT);
    onCallback(nullptr, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000,
               &exit.cb);
    EXPECT_TRUE(drain().empty());
}

} // namespace
