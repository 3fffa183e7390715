// Several host threads racing on the same pools (issue #11, point 3): each thread allocates and
// frees on its own stream from the default pool and from one shared explicit pool, with no
// synchronize in between, so the order in which the driver saw their calls is not the order
// they were recorded in. Ground truth: the driver's own ReservedMemHigh / UsedMemHigh of both
// pools, read once every thread is done; the trace's peaks must equal them exactly.
//   {"type":"peak","pool":"0x..","reserved_high":R,"used_high":U}
#include <atomic>
#include <thread>
#include <vector>

#include "Truth.h"

static void peak(cudaMemPool_t pool) {
    uint64_t r = 0, u = 0;
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &r));
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &u));
    std::printf("{\"type\":\"peak\",\"pool\":\"0x%llx\",\"reserved_high\":%llu,\"used_high\":%llu}\n",
                (unsigned long long)(uintptr_t)pool, (unsigned long long)r, (unsigned long long)u);
}

int main(int argc, char** argv) {
    const int kThreads = argc > 1 ? std::atoi(argv[1]) : 4;
    const int kIters = argc > 2 ? std::atoi(argv[2]) : 3000;
    CHECK(cudaSetDevice(0));
    cudaMemPool_t def;
    CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool;
    CHECK(cudaMemPoolCreate(&pool, &props));
    CHECK(cudaFree(nullptr));
    std::vector<cudaStream_t> streams(kThreads);
    for (auto& s : streams) CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    std::atomic<uint64_t> bytes{0}, allocs{0};
    std::atomic<int> ready{0};
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; ++t) {
        th.emplace_back([&, t] {
            CHECK(cudaSetDevice(0));
            cudaStream_t s = streams[t];
            ready++;
            while (ready.load() < kThreads) {
            }
            std::vector<std::pair<void*, size_t>> held;
            for (int i = 0; i < kIters; ++i) {
                const bool fromPool = (i + t) % 3 == 0;
                const size_t n = size_t(256 + ((i * 7 + t * 13) % 32) * 128) << 10; // 256 KiB .. 4.3 MiB
                void* p;
                if (fromPool)
                    CHECK(cudaMallocFromPoolAsync(&p, n, pool, s));
                else
                    CHECK(cudaMallocAsync(&p, n, s));
                allocs++;
                bytes += n;
                held.push_back({p, n});
                // Hold up to 6 blocks, then free a burst: used swings up and down quickly.
                if (held.size() > size_t(3 + (i + t) % 4)) {
                    for (auto& [q, m] : held) CHECK(cudaFreeAsync(q, s));
                    held.clear();
                }
            }
            for (auto& [q, m] : held) CHECK(cudaFreeAsync(q, s));
        });
    }
    for (auto& x : th) x.join();
    CHECK(cudaDeviceSynchronize());
    peak(def);
    peak(pool);
    Truth truth;
    truth.count("allocs", allocs);
    truth.count("alloc_bytes", bytes);
    truth.count("frees", allocs);
    truth.count("free_bytes", bytes);
    truth.count("threads_allocating", uint64_t(kThreads));
    truth.summary("threads_race");
    for (auto& s : streams) CHECK(cudaStreamDestroy(s));
    return 0;
}
