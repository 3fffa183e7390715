#pragma once
// A CUDA driver faked in this process for the collector's callback (Runtime.cpp), so its
// device and pool decisions are tested on a machine without a GPU: the cu* functions the
// collector calls are defined in FakeDriver.cpp with the driver's own signatures (cuda.h), and
// answer from the state below. Several devices, contexts current per thread, streams that
// belong to a context, per-device default and current pools, pool watermarks, pointers.
// Built into the test binary instead of CudaLibs.cpp (which forwards to the real libcuda).

#include <cstdint>
#include <map>
#include <mutex>

#include <cuda.h>

namespace fakecuda {

struct State {
    std::mutex m;
    std::map<uint64_t, int> contextDevice;   // CUcontext -> device ordinal
    std::map<uint64_t, uint64_t> streamContext; // CUstream -> CUcontext
    std::map<int, uint64_t> defaultPool;     // device -> default pool
    std::map<int, uint64_t> currentPool;     // device -> current pool
    struct Watermarks {
        uint64_t reserved = 0, used = 0, reservedHigh = 0, usedHigh = 0;
    };
    std::map<uint64_t, Watermarks> pools;    // pool -> what cuMemPoolGetAttribute answers
    std::map<uint64_t, uint64_t> pointerPool; // device pointer -> pool
    std::map<uint64_t, int> pointerDevice;   // device pointer -> device ordinal
    // false: cuStreamGetDevice answers CUDA_ERROR_NOT_SUPPORTED, as the collector's forwarder
    // does where the driver predates it (the collector then asks cuStreamGetCtx).
    bool haveStreamGetDevice = true;
    // Calls the collector made, to test that its caches spare the driver.
    int streamGetDeviceCalls = 0;
    int streamGetCtxCalls = 0;
    int pushCalls = 0;
    int pointerPoolCalls = 0; // cuPointerGetAttribute(MEMPOOL_HANDLE)
};

State& state();
// The calling thread's current context (cuCtxGetCurrent), as the runtime would bind it.
void setCurrent(uint64_t ctx);
uint64_t current();
// Clears everything (each test builds its own devices; handles differ between tests because
// the collector's process-wide tables keep what earlier tests taught them).
void reset();

} // namespace fakecuda
