// Several host threads allocating at once, each on its own stream, from the default pool; every
// fourth block is freed by the next thread (a cross-thread free, whose pool the collector cannot
// take from its own thread's cache). Counts and bytes must match exactly; watermarks are read
// once all threads are done.
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "Truth.h"

int main(int argc, char** argv) {
    const int kThreads = argc > 1 ? std::atoi(argv[1]) : 4;
    const int kIters = argc > 2 ? std::atoi(argv[2]) : 2000;
    CHECK(cudaSetDevice(0));
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cudaFree(nullptr)); // context up before the threads start
    applyEnvSettings(pool);    // a validation run's settings, if any
    std::vector<cudaStream_t> streams(kThreads);
    for (auto& s : streams) CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    std::mutex m;
    std::vector<std::vector<void*>> handoff(kThreads); // blocks thread i frees for thread i-1
    std::atomic<uint64_t> bytes{0}, allocs{0}, frees{0};
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; ++t) {
        th.emplace_back([&, t] {
            CHECK(cudaSetDevice(0));
            cudaStream_t s = streams[t];
            for (int i = 0; i < kIters; ++i) {
                void* p;
                size_t n = size_t(64 + (i % 16) * 64) << 10; // 64 KiB .. 1 MiB
                CHECK(cudaMallocAsync(&p, n, s));
                allocs++;
                bytes += n;
                if (i % 4 == 0) {
                    std::lock_guard lock(m);
                    handoff[(t + 1) % kThreads].push_back(p);
                } else {
                    CHECK(cudaFreeAsync(p, s));
                    frees++;
                }
                std::vector<void*> mine;
                {
                    std::lock_guard lock(m);
                    mine.swap(handoff[t]);
                }
                for (void* q : mine) {
                    // Ordered after the allocating stream: the whole device is synchronized
                    // below before anything is reused across streams, and the pool follows
                    // stream order for the free itself.
                    CHECK(cudaFreeAsync(q, s));
                    frees++;
                }
            }
        });
    }
    for (auto& x : th) x.join();
    for (int t = 0; t < kThreads; ++t)
        for (void* q : handoff[t]) {
            CHECK(cudaFreeAsync(q, streams[t]));
            frees++;
        }
    CHECK(cudaDeviceSynchronize());
    Truth truth;
    truth.count("allocs", allocs);
    truth.count("alloc_bytes", bytes);
    truth.count("frees", frees);
    truth.count("free_bytes", bytes);
    truth.count("threads_allocating", uint64_t(kThreads));
    truth.count("ctx_syncs");
    truth.wm("ctx_sync", 0, pool);
    truth.summary("threads");
    return 0;
}
