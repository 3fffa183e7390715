// Calibration of the what-if pool model (core/include/poolscope/whatif/PoolModel.h): measures on
// the GPU what the model assumes, one JSON line per measurement (docs/WHATIF.md says how each
// line feeds the model):
//   {"type":"growth", "size":S, "first_reserved":R, "step":D, "allocs_per_step":N, "ptr_spacing":P}
//      a fresh pool: reserved after one allocation of S bytes, how much the next growth added
//      and after how many more allocations, and the distance between two consecutive pointers
//      (the block's footprint);
//   {"type":"release", "threshold":T, "sync":"stream|event|device", "live":L, "before":B, "after":A}
//      reserved around a synchronize, with L bytes still allocated (spread across the pool);
//   {"type":"trim", "keep":K, "live":L, "before":B, "after":A}  cudaMemPoolTrimTo(pool, K);
//   {"type":"reuse", "case":C, "opportunistic":0|1, "event_deps":0|1, "internal_deps":0|1,
//    "reused":0|1, "grew":0|1, "ok":0|1}
//      whether an allocation took memory freed earlier (same pointer, no growth) under each
//      policy: same_stream, event_ordered (B waited on an event recorded after A's free),
//      completed (A's free finished on the GPU, no ordering to B), pending (A's free still
//      queued behind a long kernel), pending_at_limit (the same in a pool whose maximum size
//      leaves no room to grow).
// Usage: calibrate_pool [--quick]   (about 10 s on an H100; --quick skips the 1 GiB size class)
#include <cstring>
#include <vector>

#include "Truth.h"

__global__ void spin(long long cycles) {
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

static uint64_t reservedOf(cudaMemPool_t p) {
    uint64_t r = 0;
    CHECK(cudaMemPoolGetAttribute(p, cudaMemPoolAttrReservedMemCurrent, &r));
    return r;
}

static cudaMemPool_t makePool(uint64_t threshold, size_t maxSize = 0) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    props.maxSize = maxSize;
    cudaMemPool_t p;
    CHECK(cudaMemPoolCreate(&p, &props));
    CHECK(cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &threshold));
    return p;
}

static void setPolicies(cudaMemPool_t p, int opp, int ev, int internal) {
    CHECK(cudaMemPoolSetAttribute(p, cudaMemPoolReuseAllowOpportunistic, &opp));
    CHECK(cudaMemPoolSetAttribute(p, cudaMemPoolReuseFollowEventDependencies, &ev));
    CHECK(cudaMemPoolSetAttribute(p, cudaMemPoolReuseAllowInternalDependencies, &internal));
}

static void growth(size_t size, cudaStream_t s) {
    const uint64_t never = ~uint64_t{0};
    cudaMemPool_t p = makePool(never);
    std::vector<void*> blocks;
    void* a;
    CHECK(cudaMallocFromPoolAsync(&a, size, p, s));
    blocks.push_back(a);
    const uint64_t first = reservedOf(p);
    uint64_t spacing = 0, step = 0, n = 0;
    // Allocate until the pool grows again (bounded: 4 GiB or 4,096 blocks).
    for (uint64_t i = 1; i < 4096 && i * size < (uint64_t{4} << 30); ++i) {
        void* b;
        CHECK(cudaMallocFromPoolAsync(&b, size, p, s));
        blocks.push_back(b);
        if (i == 1) spacing = uint64_t(static_cast<char*>(b) - static_cast<char*>(a));
        const uint64_t r = reservedOf(p);
        if (r > first) {
            step = r - first;
            n = i;
            break;
        }
    }
    for (void* b : blocks) CHECK(cudaFreeAsync(b, s));
    CHECK(cudaStreamSynchronize(s));
    std::printf("{\"type\":\"growth\",\"size\":%zu,\"first_reserved\":%llu,\"step\":%llu,"
                "\"allocs_per_step\":%llu,\"ptr_spacing\":%lld}\n",
                size, (unsigned long long)first, (unsigned long long)step, (unsigned long long)n,
                (long long)spacing);
    CHECK(cudaMemPoolDestroy(p));
}

// 12 blocks of 20 MiB (240 MiB), all freed except `keep` of them (every third one), then a
// synchronize of the given kind.
static void release(uint64_t threshold, const char* sync, int keep, cudaStream_t s) {
    cudaMemPool_t p = makePool(threshold);
    std::vector<void*> blocks(12);
    for (auto& b : blocks) CHECK(cudaMallocFromPoolAsync(&b, 20u << 20, p, s));
    uint64_t live = 0;
    for (int i = 0; i < 12; ++i) {
        if (i % 3 == 1 && keep > 0) {
            --keep;
            live += 20u << 20;
            continue;
        }
        CHECK(cudaFreeAsync(blocks[i], s));
        blocks[i] = nullptr;
    }
    const uint64_t before = reservedOf(p);
    if (std::strcmp(sync, "stream") == 0) {
        CHECK(cudaStreamSynchronize(s));
    } else if (std::strcmp(sync, "event") == 0) {
        cudaEvent_t ev;
        CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        CHECK(cudaEventRecord(ev, s));
        CHECK(cudaEventSynchronize(ev));
        CHECK(cudaEventDestroy(ev));
    } else {
        CHECK(cudaDeviceSynchronize());
    }
    const uint64_t after = reservedOf(p);
    std::printf("{\"type\":\"release\",\"threshold\":%llu,\"sync\":\"%s\",\"live\":%llu,"
                "\"before\":%llu,\"after\":%llu}\n",
                (unsigned long long)threshold, sync, (unsigned long long)live,
                (unsigned long long)before, (unsigned long long)after);
    for (void* b : blocks)
        if (b) CHECK(cudaFreeAsync(b, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemPoolDestroy(p));
}

static void trim(uint64_t keepBytes, int liveBlocks, cudaStream_t s) {
    const uint64_t never = ~uint64_t{0};
    cudaMemPool_t p = makePool(never);
    std::vector<void*> blocks(16);
    for (auto& b : blocks) CHECK(cudaMallocFromPoolAsync(&b, 20u << 20, p, s));
    uint64_t live = 0;
    int keep = liveBlocks;
    for (int i = 0; i < 16; ++i) {
        if (i % 4 == 2 && keep > 0) {
            --keep;
            live += 20u << 20;
            continue;
        }
        CHECK(cudaFreeAsync(blocks[i], s));
        blocks[i] = nullptr;
    }
    CHECK(cudaStreamSynchronize(s));
    const uint64_t before = reservedOf(p);
    CHECK(cudaMemPoolTrimTo(p, keepBytes));
    const uint64_t after = reservedOf(p);
    std::printf("{\"type\":\"trim\",\"keep\":%llu,\"live\":%llu,\"before\":%llu,\"after\":%llu}\n",
                (unsigned long long)keepBytes, (unsigned long long)live,
                (unsigned long long)before, (unsigned long long)after);
    for (void* b : blocks)
        if (b) CHECK(cudaFreeAsync(b, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemPoolDestroy(p));
}

static long long spinCycles() {
    int khz = 0;
    CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    return (long long)khz * 200; // about 200 ms
}

// One reuse case under one policy setting; a fresh pool each time. The block is 8 MiB in a
// pool that already holds 32 MiB, so reuse is visible as the same pointer and no growth.
static void reuse(const char* c, int opp, int ev, int internal, cudaStream_t a, cudaStream_t b) {
    const bool atLimit = std::strcmp(c, "pending_at_limit") == 0;
    const size_t n = atLimit ? (32u << 20) : (8u << 20);
    cudaMemPool_t p = makePool(~uint64_t{0}, atLimit ? (32u << 20) : 0);
    setPolicies(p, opp, ev, internal);
    // Fill the first 32 MiB chunk except the block under test, so a new block that does not
    // reuse the freed one needs a growth.
    void* filler = nullptr;
    if (!atLimit) CHECK(cudaMallocFromPoolAsync(&filler, (32u << 20) - n, p, a));
    void* x;
    CHECK(cudaMallocFromPoolAsync(&x, n, p, a));
    CHECK(cudaStreamSynchronize(a)); // everything so far done: a clean start
    const uint64_t before = reservedOf(p);
    cudaStream_t target = b;
    cudaEvent_t e;
    CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    if (std::strcmp(c, "same_stream") == 0) {
        spin<<<1, 1, 0, a>>>(spinCycles());
        CHECK(cudaFreeAsync(x, a));
        target = a;
    } else if (std::strcmp(c, "event_ordered") == 0) {
        spin<<<1, 1, 0, a>>>(spinCycles());
        CHECK(cudaFreeAsync(x, a));
        CHECK(cudaEventRecord(e, a));
        CHECK(cudaStreamWaitEvent(b, e, 0));
    } else if (std::strcmp(c, "completed") == 0) {
        CHECK(cudaFreeAsync(x, a));
        CHECK(cudaEventRecord(e, a));
        // Wait for the free to finish without a synchronize call (which would also release).
        while (cudaEventQuery(e) == cudaErrorNotReady) {
        }
    } else { // pending, pending_at_limit
        spin<<<1, 1, 0, a>>>(spinCycles());
        CHECK(cudaFreeAsync(x, a));
    }
    void* y = nullptr;
    const cudaError_t err = cudaMallocFromPoolAsync(&y, n, p, target);
    if (err != cudaSuccess) (void)cudaGetLastError();
    const uint64_t after = reservedOf(p);
    std::printf("{\"type\":\"reuse\",\"case\":\"%s\",\"opportunistic\":%d,\"event_deps\":%d,"
                "\"internal_deps\":%d,\"reused\":%d,\"grew\":%d,\"ok\":%d}\n",
                c, opp, ev, internal, err == cudaSuccess && y == x ? 1 : 0, after > before ? 1 : 0,
                err == cudaSuccess ? 1 : 0);
    if (err == cudaSuccess) CHECK(cudaFreeAsync(y, target));
    if (filler) CHECK(cudaFreeAsync(filler, a));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaEventDestroy(e));
    CHECK(cudaMemPoolDestroy(p));
}

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(nullptr));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    std::vector<size_t> sizes = {1u << 10, 4u << 10, 64u << 10, 1u << 20, 2u << 20,
                                 (2u << 20) + 1, 4u << 20, 16u << 20, 31u << 20, 32u << 20,
                                 (32u << 20) + 4096, 48u << 20, 64u << 20, 100u << 20, 256u << 20};
    if (!quick) sizes.push_back(size_t{1} << 30);
    for (size_t s : sizes) growth(s, a);
    const uint64_t thresholds[] = {0, 48u << 20, 64u << 20, ~uint64_t{0}};
    for (uint64_t t : thresholds)
        for (const char* sync : {"stream", "event", "device"}) release(t, sync, 0, a);
    for (uint64_t t : {uint64_t{0}, uint64_t{64} << 20})
        for (int keep : {1, 2, 4}) release(t, "stream", keep, a);
    for (uint64_t k : {uint64_t{0}, uint64_t{96} << 20, uint64_t{100} << 20})
        for (int live : {0, 2}) trim(k, live, a);
    const char* cases[] = {"same_stream", "event_ordered", "completed", "pending", "pending_at_limit"};
    for (const char* c : cases)
        for (int bits = 0; bits < 8; ++bits) reuse(c, bits & 1, (bits >> 1) & 1, (bits >> 2) & 1, a, b);
    std::printf("{\"type\":\"summary\",\"workload\":\"calibrate_pool\"}\n");
    return 0;
}
