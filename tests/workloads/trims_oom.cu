// Trims and a deliberately failing huge allocation. The default pool keeps everything
// (threshold "never"); 10 x 32 MiB are allocated and freed, a synchronize releases nothing,
// trims to 96 MiB and then 0 give memory back; a 1 PiB allocation fails with an out-of-memory
// error that the trace must keep, with its size; the program carries on afterwards.
#include "Truth.h"

int main() {
    Truth t;
    CHECK(cudaSetDevice(0));
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t never = ~uint64_t{0};
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &never));
    t.count("set_attributes");
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    t.count("stream_creates");
    void* p[10];
    for (int i = 0; i < 10; ++i) {
        CHECK(cudaMallocAsync(&p[i], 32ull << 20, s));
        t.count("allocs");
        t.count("alloc_bytes", 32ull << 20);
        t.wm("alloc", t.note("alloc"), pool);
    }
    for (int i = 0; i < 10; ++i) {
        CHECK(cudaFreeAsync(p[i], s));
        t.count("frees");
        t.count("free_bytes", 32ull << 20);
        t.wm("free", t.note("free"), pool);
    }
    CHECK(cudaStreamSynchronize(s));
    t.count("stream_syncs");
    t.wm("stream_sync", t.note("stream_sync"), pool);
    CHECK(cudaMemPoolTrimTo(pool, 96ull << 20));
    t.count("trims");
    t.wm("trim", t.note("trim"), pool);
    CHECK(cudaMemPoolTrimTo(pool, 0));
    t.count("trims");
    t.wm("trim", t.note("trim"), pool);

    // The failing allocation: 1 PiB.
    void* huge = nullptr;
    cudaError_t e = cudaMallocAsync(&huge, 1ull << 50, s);
    if (e == cudaSuccess) {
        std::fprintf(stderr, "a 1 PiB allocation succeeded?\n");
        return 4;
    }
    cudaGetLastError(); // clear the sticky-free error state of the runtime
    t.note("alloc");
    t.count("failed_allocs");
    t.count("failed_bytes", 1ull << 50);
    std::printf("{\"type\":\"failed_alloc\",\"size\":%llu,\"error\":\"%s\"}\n",
                (unsigned long long)(1ull << 50), cudaGetErrorName(e));
    // Life goes on after the failure.
    void* q;
    CHECK(cudaMallocAsync(&q, 1ull << 20, s));
    t.count("allocs");
    t.count("alloc_bytes", 1ull << 20);
    t.wm("alloc", t.note("alloc"), pool);
    CHECK(cudaFreeAsync(q, s));
    t.count("frees");
    t.count("free_bytes", 1ull << 20);
    t.wm("free", t.note("free"), pool);
    CHECK(cudaDeviceSynchronize());
    t.count("ctx_syncs");
    t.summary("trims_oom");
    return 0;
}
