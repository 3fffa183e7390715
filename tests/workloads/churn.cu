// Two-stream churn with event waits. Two modes:
//   churn [ITER]         the showcase (resources/samples/churn.poolscope): allocations on stream
//                        A freed on stream B after an event wait, a sliding window of live
//                        buffers, release threshold "never" with opportunistic reuse off so
//                        reserved grows above used, then a threshold change, a sync that
//                        releases, reuse back on, a trim; watermarks printed at chosen points.
//   churn --bench ITER [--pin CPU]  the overhead benchmark: one alloc, one event record, one cross-stream
//                        wait and one free per iteration (4 intercepted driver calls), prints
//                        {"type":"bench","ns_per_iter":...}.
//   churn --sustain SECONDS [--threads N]  the same loop, on N threads at once (each with its
//                        own two streams and event, all on the default pool), for SECONDS:
//                        the collector's no-drop check at its highest rate. Prints each
//                        thread's iterations and a summary with the exact counts and the
//                        process's peak RSS.
#include <algorithm>
#include <atomic>
#include <sys/resource.h>
#include <thread>
#include <chrono>
#include <pthread.h>
#include <sched.h>
#include <cstring>
#include <vector>

#include "Truth.h"

__global__ void touch(char* p, size_t n) {
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (i < n) p[i] = char(i);
}

// pin >= 0: after CUDA is up (so the driver's and the collector's threads keep the whole
// machine), the measuring thread alone is moved to that CPU: the app thread then never shares
// a core with them, as on an unpinned, idle machine, and never migrates mid-loop.
static int bench(long iters, int pin) {
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    // Warm-up: pool growth and first-call costs out of the measured loop.
    for (int i = 0; i < 1000; ++i) {
        void* p;
        CHECK(cudaMallocAsync(&p, 1 << 20, a));
        CHECK(cudaFreeAsync(p, a));
    }
    CHECK(cudaDeviceSynchronize());
    if (pin >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(pin, &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
            std::fprintf(stderr, "churn: cannot pin to CPU %d\n", pin);
    }
    // The loop in 10 segments (a sync between them, as every 10,000 iterations anyway): the
    // fastest segment is the figure least disturbed by other work on the machine.
    const long segments = iters >= 100000 ? 10 : 1;
    const long per = iters / segments;
    double total = 0, best = 1e300;
    for (long s = 0; s < segments; ++s) {
        auto t0 = std::chrono::steady_clock::now();
        for (long i = 0; i < per; ++i) {
            void* p;
            CHECK(cudaMallocAsync(&p, 1 << 20, a));
            CHECK(cudaEventRecord(ev, a));
            CHECK(cudaStreamWaitEvent(b, ev, 0));
            CHECK(cudaFreeAsync(p, b));
            if ((i + 1) % 10000 == 0) CHECK(cudaStreamSynchronize(b));
        }
        CHECK(cudaDeviceSynchronize());
        double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
        total += ns;
        best = std::min(best, ns / double(per));
    }
    std::printf("{\"type\":\"bench\",\"iterations\":%ld,\"ns_per_iter\":%.1f,"
                "\"best_segment_ns_per_iter\":%.1f,\"calls_per_iter\":4}\n",
                per * segments, total / double(per * segments), best);
    return 0;
}

// One thread of the sustained run: the bench loop until the deadline, counting what it did.
struct SustainCounts {
    long iters = 0, syncs = 0;
    double ns = 0;
};
static void sustainThread(int index, std::chrono::steady_clock::time_point deadline,
                          std::atomic<int>& ready, int threads, SustainCounts& out) {
    CHECK(cudaSetDevice(0));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    // All threads start the loop together, so the rate measured is that of N at once.
    ready.fetch_add(1);
    while (ready.load() < threads) std::this_thread::yield();
    auto t0 = std::chrono::steady_clock::now();
    long i = 0;
    // The clock is read every 256 iterations: cheap next to four driver calls each.
    for (;; ++i) {
        if ((i & 255) == 0 && std::chrono::steady_clock::now() >= deadline) break;
        void* p;
        CHECK(cudaMallocAsync(&p, 1 << 20, a));
        CHECK(cudaEventRecord(ev, a));
        CHECK(cudaStreamWaitEvent(b, ev, 0));
        CHECK(cudaFreeAsync(p, b));
        if ((i + 1) % 10000 == 0) {
            CHECK(cudaStreamSynchronize(b));
            ++out.syncs;
        }
    }
    CHECK(cudaStreamSynchronize(b));
    ++out.syncs;
    out.ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    out.iters = i;
    std::printf("{\"type\":\"sustain_thread\",\"thread\":%d,\"iterations\":%ld,\"ns_per_iter\":%.1f}\n",
                index, i, out.ns / double(i ? i : 1));
    CHECK(cudaEventDestroy(ev));
    CHECK(cudaStreamDestroy(a));
    CHECK(cudaStreamDestroy(b));
}

static int sustain(double seconds, int threads) {
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(nullptr));
    std::atomic<int> ready{0};
    std::vector<SustainCounts> counts(static_cast<size_t>(threads));
    std::vector<std::thread> workers;
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(long(seconds * 1000)) +
                          std::chrono::milliseconds(200 * threads); // thread start-up
    for (int k = 0; k < threads; ++k)
        workers.emplace_back([&, k] { sustainThread(k, deadline, ready, threads, counts[size_t(k)]); });
    for (auto& th : workers) th.join();
    long iters = 0, syncs = 0;
    double nsSum = 0;
    for (const auto& c : counts) {
        iters += c.iters;
        syncs += c.syncs;
        nsSum += c.ns;
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const double perThreadNs = nsSum / double(iters ? iters : 1);
    std::printf("{\"type\":\"sustain\",\"threads\":%d,\"iterations\":%ld,\"ns_per_iter\":%.1f,"
                "\"events_per_s\":%.0f,\"max_rss_kib\":%ld}\n",
                threads, iters, perThreadNs, 4.0 * double(iters) / (nsSum / double(threads) / 1e9),
                long(ru.ru_maxrss));
    std::printf("{\"type\":\"summary\",\"workload\":\"churn_sustain\",\"allocs\":%ld,\"frees\":%ld,"
                "\"event_records\":%ld,\"stream_waits\":%ld,\"stream_syncs\":%ld,\"stream_creates\":%d}\n",
                iters, iters, iters, iters, syncs, 2 * threads);
    return 0;
}

int main(int argc, char** argv) {
    if (argc > 2 && std::strcmp(argv[1], "--sustain") == 0)
        return sustain(std::atof(argv[2]), argc > 4 && std::strcmp(argv[3], "--threads") == 0 ? std::max(1, std::atoi(argv[4])) : 1);
    if (argc > 2 && std::strcmp(argv[1], "--bench") == 0)
        return bench(std::atol(argv[2]), argc > 4 && std::strcmp(argv[3], "--pin") == 0 ? std::atoi(argv[4]) : -1);
    const long iters = argc > 1 ? std::atol(argv[1]) : 1200;
    Truth t;
    int dev = 0;
    CHECK(cudaSetDevice(dev));
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, dev));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    t.count("stream_creates", 2);
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));

    // Phase 1: keep everything (threshold "never") and forbid opportunistic reuse: blocks freed
    // on B are not reusable on A until A learns of B's progress, so reserved outgrows used.
    // Under a validation run's settings (applyEnvSettings) the knobs stay as it set them.
    const bool fixed = applyEnvSettings(pool);
    uint64_t never = ~uint64_t{0};
    int off = 0, on = 1;
    if (!fixed) {
        CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &never));
        CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &off));
        t.count("set_attributes", 2);
    }

    std::vector<void*> window;
    std::vector<size_t> windowSizes;
    uint32_t lcg = 12345;
    auto nextSize = [&] {
        lcg = lcg * 1664525u + 1013904223u;
        return size_t(1 + (lcg >> 8) % 8) << 20; // 1..8 MiB
    };
    auto allocOn = [&](cudaStream_t s, bool mark) {
        void* p;
        size_t n = nextSize();
        CHECK(cudaMallocAsync(&p, n, s));
        uint64_t k = t.note("alloc");
        t.count("allocs");
        t.count("alloc_bytes", n);
        if (mark) t.wm("alloc", k, pool);
        touch<<<1, 256, 0, s>>>(static_cast<char*>(p), 256);
        window.push_back(p);
        windowSizes.push_back(n);
    };
    auto freeOldest = [&](bool mark) {
        void* p = window.front();
        window.erase(window.begin());
        size_t n = windowSizes.front();
        windowSizes.erase(windowSizes.begin());
        CHECK(cudaEventRecord(ev, a));
        t.count("event_records");
        CHECK(cudaStreamWaitEvent(b, ev, 0));
        t.count("stream_waits");
        CHECK(cudaFreeAsync(p, b));
        uint64_t k = t.note("free");
        t.count("frees");
        t.count("free_bytes", n);
        if (mark) t.wm("free", k, pool);
    };
    auto syncB = [&](bool mark) {
        CHECK(cudaStreamSynchronize(b));
        uint64_t k = t.note("stream_sync");
        t.count("stream_syncs");
        if (mark) t.wm("stream_sync", k, pool);
    };

    const long phase = iters / 4;
    for (long i = 0; i < iters; ++i) {
        const bool mark = i % 97 == 0;
        if (i == phase * 2) {
            // Phase 3: give memory back at every synchronize from now on. With every block
            // freed, the next synchronize hands the whole pool back (an implicit release).
            uint64_t zero = 0;
            if (!fixed) {
                CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &zero));
                t.count("set_attributes");
            }
            while (!window.empty()) freeOldest(true);
            syncB(true);
            if (!fixed) t.count("implicit_releases_min");
        }
        if (i == phase * 3 && !fixed) {
            CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &on));
            t.count("set_attributes");
        }
        allocOn(a, mark);
        if (window.size() > 6) freeOldest(mark);
        if ((i + 1) % 100 == 0) syncB(true);
    }
    while (!window.empty()) freeOldest(true);
    syncB(true);
    // Phase 4: a threshold that keeps memory, then an explicit trim.
    uint64_t keep = 256ull << 20;
    if (!fixed) {
        CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
        t.count("set_attributes");
    }
    for (int i = 0; i < 32; ++i) allocOn(a, true);
    while (!window.empty()) freeOldest(true);
    syncB(true);
    CHECK(cudaMemPoolTrimTo(pool, 64ull << 20));
    uint64_t k = t.note("trim");
    t.count("trims");
    t.wm("trim", k, pool);
    CHECK(cudaMemPoolTrimTo(pool, 0));
    k = t.note("trim");
    t.count("trims");
    t.wm("trim", k, pool);
    t.summary("churn");
    return 0;
}
