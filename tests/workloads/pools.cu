// Explicit pools: two pools with different release thresholds, cudaMallocFromPoolAsync on both,
// thresholds and reuse policies changed mid-run, one pool made the device's current pool so a
// plain cudaMallocAsync lands in it, then back to the default pool; both destroyed at the end.
#include "Truth.h"

int main() {
    Truth t;
    CHECK(cudaSetDevice(0));
    cudaMemPool_t def;
    CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pa, pb;
    CHECK(cudaMemPoolCreate(&pa, &props));
    CHECK(cudaMemPoolCreate(&pb, &props));
    t.count("pool_creates", 2);
    // What each pool starts with, before the program changes anything (issue #17: the
    // collector reads the same when it first sees the pool).
    Truth::attributes(def);
    Truth::attributes(pa);
    Truth::attributes(pb);
    uint64_t zero = 0, big = 64ull << 20;
    CHECK(cudaMemPoolSetAttribute(pa, cudaMemPoolAttrReleaseThreshold, &zero));
    CHECK(cudaMemPoolSetAttribute(pb, cudaMemPoolAttrReleaseThreshold, &big));
    t.count("set_attributes", 2);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    t.count("stream_creates");

    auto fromPool = [&](cudaMemPool_t p, size_t n) {
        void* ptr;
        CHECK(cudaMallocFromPoolAsync(&ptr, n, p, s));
        t.count("allocs");
        t.count("alloc_bytes", n);
        t.wm("alloc", t.note("alloc"), p);
        return ptr;
    };
    auto freeIt = [&](void* ptr, size_t n, cudaMemPool_t p) {
        CHECK(cudaFreeAsync(ptr, s));
        t.count("frees");
        t.count("free_bytes", n);
        t.wm("free", t.note("free"), p);
    };
    auto sync = [&](cudaMemPool_t p) {
        CHECK(cudaStreamSynchronize(s));
        t.count("stream_syncs");
        t.wm("stream_sync", t.note("stream_sync"), p);
    };

    for (int round = 0; round < 4; ++round) {
        if (round == 2) {
            // Mid-run: A keeps 32 MiB, B gives everything back; B's reuse policies off.
            uint64_t keep = 32ull << 20;
            CHECK(cudaMemPoolSetAttribute(pa, cudaMemPoolAttrReleaseThreshold, &keep));
            CHECK(cudaMemPoolSetAttribute(pb, cudaMemPoolAttrReleaseThreshold, &zero));
            int off = 0;
            CHECK(cudaMemPoolSetAttribute(pb, cudaMemPoolReuseAllowOpportunistic, &off));
            CHECK(cudaMemPoolSetAttribute(pb, cudaMemPoolReuseAllowInternalDependencies, &off));
            CHECK(cudaMemPoolSetAttribute(pb, cudaMemPoolReuseFollowEventDependencies, &off));
            t.count("set_attributes", 5);
        }
        void* a1 = fromPool(pa, 8ull << 20);
        void* a2 = fromPool(pa, 24ull << 20);
        void* b1 = fromPool(pb, 16ull << 20);
        freeIt(a1, 8ull << 20, pa);
        freeIt(b1, 16ull << 20, pb);
        sync(pa);
        freeIt(a2, 24ull << 20, pa);
        sync(pb);
    }

    // B as the device's current pool: cudaMallocAsync now allocates from it.
    CHECK(cudaDeviceSetMemPool(0, pb));
    t.count("set_mempool");
    void* c;
    CHECK(cudaMallocAsync(&c, 4ull << 20, s));
    t.count("allocs");
    t.count("alloc_bytes", 4ull << 20);
    t.wm("alloc", t.note("alloc"), pb);
    freeIt(c, 4ull << 20, pb);
    sync(pb);
    CHECK(cudaDeviceSetMemPool(0, def));
    t.count("set_mempool");
    void* d;
    CHECK(cudaMallocAsync(&d, 2ull << 20, s));
    t.count("allocs");
    t.count("alloc_bytes", 2ull << 20);
    t.wm("alloc", t.note("alloc"), def);
    freeIt(d, 2ull << 20, def);
    sync(def);

    CHECK(cudaMemPoolDestroy(pa));
    CHECK(cudaMemPoolDestroy(pb));
    t.count("pool_destroys", 2);
    t.summary("pools");
    return 0;
}
