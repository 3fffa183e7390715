#include "FakeDriver.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace fakecuda {

namespace {
thread_local std::vector<uint64_t> t_stack{0}; // back() is the current context
}

State& state() {
    static State* s = new State();
    return *s;
}
void setCurrent(uint64_t ctx) { t_stack.back() = ctx; }
uint64_t current() { return t_stack.back(); }
void reset() {
    State& s = state();
    std::lock_guard l(s.m);
    s.streamContext.clear();
    s.pointerPool.clear();
    s.pointerDevice.clear();
    s.haveStreamGetDevice = true;
    s.streamGetDeviceCalls = s.streamGetCtxCalls = s.pushCalls = s.pointerPoolCalls = 0;
}

} // namespace fakecuda

using fakecuda::state;

namespace {
uint64_t u(const void* p) { return reinterpret_cast<uint64_t>(p); }
int deviceOf(uint64_t ctx) {
    auto it = state().contextDevice.find(ctx);
    return it == state().contextDevice.end() ? -1 : it->second;
}
} // namespace

extern "C" {

CUresult cuCtxGetCurrent(CUcontext* c) {
    *c = reinterpret_cast<CUcontext>(fakecuda::current());
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* d) {
    std::lock_guard l(state().m);
    const int dev = deviceOf(fakecuda::current());
    if (dev < 0) return CUDA_ERROR_INVALID_CONTEXT;
    *d = dev;
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext c) {
    {
        std::lock_guard l(state().m);
        state().pushCalls++;
        if (deviceOf(u(c)) < 0) return CUDA_ERROR_INVALID_CONTEXT;
    }
    fakecuda::t_stack.push_back(u(c));
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext* c) {
    if (fakecuda::t_stack.size() < 2) return CUDA_ERROR_INVALID_CONTEXT;
    if (c) *c = reinterpret_cast<CUcontext>(fakecuda::t_stack.back());
    fakecuda::t_stack.pop_back();
    return CUDA_SUCCESS;
}

CUresult cuStreamGetDevice(CUstream s, CUdevice* d) {
    std::lock_guard l(state().m);
    state().streamGetDeviceCalls++;
    if (!state().haveStreamGetDevice) return CUDA_ERROR_NOT_SUPPORTED;
    auto it = state().streamContext.find(u(s));
    if (it == state().streamContext.end()) return CUDA_ERROR_INVALID_HANDLE;
    *d = deviceOf(it->second);
    return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx(CUstream s, CUcontext* c) {
    std::lock_guard l(state().m);
    state().streamGetCtxCalls++;
    auto it = state().streamContext.find(u(s));
    if (it == state().streamContext.end()) return CUDA_ERROR_INVALID_HANDLE;
    *c = reinterpret_cast<CUcontext>(it->second);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
    std::snprintf(name, size_t(len), "Fake GPU %d", int(d));
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t* bytes, CUdevice d) {
    *bytes = (size_t(80) << 30) + size_t(d);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice d) {
    std::memset(uuid->bytes, 0, sizeof uuid->bytes);
    uuid->bytes[15] = static_cast<char>(d);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* p, CUdevice d) {
    std::lock_guard l(state().m);
    auto it = state().defaultPool.find(d);
    if (it == state().defaultPool.end()) return CUDA_ERROR_INVALID_DEVICE;
    *p = reinterpret_cast<CUmemoryPool>(it->second);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool* p, CUdevice d) {
    std::lock_guard l(state().m);
    auto it = state().currentPool.find(d);
    if (it == state().currentPool.end()) return CUDA_ERROR_INVALID_DEVICE;
    *p = reinterpret_cast<CUmemoryPool>(it->second);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool p, CUmemPool_attribute a, void* v) {
    std::lock_guard l(state().m);
    auto it = state().pools.find(u(p));
    if (it == state().pools.end()) return CUDA_ERROR_INVALID_VALUE;
    const fakecuda::State::Watermarks& w = it->second;
    uint64_t value = 0;
    switch (a) {
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: value = w.reserved; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: value = w.used; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: value = w.reservedHigh; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: value = w.usedHigh; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: value = 0; break;
    default: *static_cast<int*>(v) = 1; return CUDA_SUCCESS; // reuse policies: on
    }
    *static_cast<cuuint64_t*>(v) = value;
    return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void* out, CUpointer_attribute a, CUdeviceptr ptr) {
    std::lock_guard l(state().m);
    if (a == CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE) {
        ++state().pointerPoolCalls;
        auto it = state().pointerPool.find(ptr);
        if (it == state().pointerPool.end()) return CUDA_ERROR_INVALID_VALUE;
        *static_cast<CUmemoryPool*>(out) = reinterpret_cast<CUmemoryPool>(it->second);
        return CUDA_SUCCESS;
    }
    if (a == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) {
        auto it = state().pointerDevice.find(ptr);
        if (it == state().pointerDevice.end()) return CUDA_ERROR_INVALID_VALUE;
        *static_cast<int*>(out) = it->second;
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}

} // extern "C"
