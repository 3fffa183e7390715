// A thread's first call (issue #11, point 1): worker std::threads that never call cudaSetDevice
// make their first cudaMallocAsync, cudaMallocFromPoolAsync or cudaFreeAsync before the runtime
// has bound a context to them. Each runs alone (joined before the next starts), so the program
// order of the calls is the trace's order. Every alloc and free must name its device and pool
// and carry the watermarks the program reads right after it.
#include <thread>
#include <vector>

#include "Truth.h"

int main() {
    Truth truth;
    CHECK(cudaFree(nullptr)); // the main thread binds the primary context; the workers do not
    cudaMemPool_t def;
    CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool;
    CHECK(cudaMemPoolCreate(&pool, &props));
    truth.count("pool_creates");
    cudaStream_t s[3];
    for (auto& x : s) CHECK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
    uint64_t bytes = 0;
    auto alloc = [&](void** p, size_t n, cudaStream_t st, cudaMemPool_t from) {
        if (from)
            CHECK(cudaMallocFromPoolAsync(p, n, from, st));
        else
            CHECK(cudaMallocAsync(p, n, st));
        truth.wm("alloc", truth.note("alloc"), from ? from : def);
        truth.count("allocs");
        truth.count("alloc_bytes", n);
        bytes += n;
    };
    auto release = [&](void* p, size_t n, cudaStream_t st, cudaMemPool_t from) {
        CHECK(cudaFreeAsync(p, st));
        truth.wm("free", truth.note("free"), from ? from : def);
        truth.count("frees");
        truth.count("free_bytes", n);
    };
    // A block the main thread allocates and a worker frees as its very first call.
    void* fromMain;
    alloc(&fromMain, 5 << 20, s[0], nullptr);
    CHECK(cudaStreamSynchronize(s[0]));
    truth.count("stream_syncs");

    // 1. First call: cudaMallocAsync on the device's current (default) pool.
    std::thread([&] {
        std::vector<void*> ps;
        for (int i = 0; i < 8; ++i) {
            void* p;
            alloc(&p, size_t(3 + i) << 20, s[1], nullptr);
            ps.push_back(p);
        }
        for (int i = 0; i < 8; ++i) release(ps[i], size_t(3 + i) << 20, s[1], nullptr);
    }).join();
    // 2. First call: cudaMallocFromPoolAsync on an explicit pool, then the default pool.
    std::thread([&] {
        void *a, *b;
        alloc(&a, 7 << 20, s[2], pool);
        alloc(&b, 1 << 20, s[2], nullptr);
        release(a, 7 << 20, s[2], pool);
        release(b, 1 << 20, s[2], nullptr);
    }).join();
    // 3. First call: a free of a block another thread allocated.
    std::thread([&] { release(fromMain, 5 << 20, s[0], nullptr); }).join();

    CHECK(cudaDeviceSynchronize());
    truth.count("ctx_syncs");
    truth.wm("ctx_sync", 0, def);
    (void)bytes;
    for (auto& x : s) CHECK(cudaStreamDestroy(x));
    truth.summary("thread_first");
    CHECK(cudaMemPoolDestroy(pool));
    return 0;
}
