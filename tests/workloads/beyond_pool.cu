// Memory outside the stream-ordered pools (issue #18), mixed into a cudaMallocAsync workload:
// cudaMalloc/cudaFree (each cudaFree synchronizes the device), cudaMallocPitch, cudaMallocManaged,
// cudaHostAlloc with each flag, cudaMallocHost, cudaHostRegister/Unregister with flags, a
// stream-ordered block freed with cudaFree and a cudaMalloc block freed with cudaFreeAsync (both
// allowed by the programming guide). Prints its ground truth (Truth.h): counts, bytes, the live
// peaks it computed itself, and one "host" line per pinned call with the flags it passed.
#include <cstdlib>
#include <vector>

#include "Truth.h"

namespace {

struct Live {
    uint64_t now = 0, peak = 0;
    void add(uint64_t n) { peak = std::max(peak, now += n); }
    void sub(uint64_t n) { now -= n; }
};

} // namespace

int main(int argc, char** argv) {
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 20;
    Truth t;
    CHECK(cudaSetDevice(0));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    t.count("stream_creates");
    Live device, allocated, registered, pinned;

    auto deviceMalloc = [&](size_t n) {
        void* p;
        CHECK(cudaMalloc(&p, n));
        t.count("beyond_device_allocs");
        t.count("beyond_device_alloc_bytes", n);
        device.add(n);
        return p;
    };
    auto deviceFree = [&](void* p, size_t n) {
        CHECK(cudaFree(p));
        t.count("beyond_device_frees");
        t.count("beyond_device_free_bytes", n);
        t.count("beyond_device_syncs");
        device.sub(n);
    };
    auto hostLine = [&](const char* what, size_t n, unsigned flags) {
        std::printf("{\"type\":\"host\",\"what\":\"%s\",\"size\":%zu,\"flags\":%u}\n", what, n, flags);
    };
    auto hostAlloc = [&](size_t n, unsigned flags) {
        void* p;
        CHECK(cudaHostAlloc(&p, n, flags));
        t.count("beyond_host_allocs");
        t.count("beyond_host_alloc_bytes", n);
        allocated.add(n);
        pinned.add(n);
        hostLine("host_alloc", n, flags);
        return p;
    };
    auto hostFree = [&](void* p, size_t n) {
        CHECK(cudaFreeHost(p));
        t.count("beyond_host_frees");
        allocated.sub(n);
        pinned.sub(n);
    };

    // 1. A stream-ordered loop with cudaMalloc/cudaFree in the middle of it: every cudaFree
    //    synchronizes the device while pool blocks are live.
    std::vector<std::pair<void*, size_t>> legacy;
    for (int r = 0; r < rounds; ++r) {
        void* a;
        const size_t an = size_t(1 + r % 4) << 20;
        CHECK(cudaMallocAsync(&a, an, s));
        t.count("allocs");
        t.count("alloc_bytes", an);
        const size_t ln = (size_t(r % 5) + 1) * (3u << 20) + 4096 * size_t(r);
        legacy.push_back({deviceMalloc(ln), ln});
        if (r % 3 == 2) { // free the oldest legacy block while `a` is live
            deviceFree(legacy.front().first, legacy.front().second);
            legacy.erase(legacy.begin());
        }
        CHECK(cudaFreeAsync(a, s));
        t.count("frees");
        t.count("free_bytes", an);
    }
    CHECK(cudaStreamSynchronize(s));
    t.count("stream_syncs");

    // 2. Pitch and managed memory.
    void* pitched;
    size_t pitch = 0;
    const size_t width = 1000, height = 300;
    CHECK(cudaMallocPitch(&pitched, &pitch, width, height));
    t.count("beyond_device_allocs");
    t.count("beyond_device_alloc_bytes", pitch * height);
    t.count("beyond_pitch_allocs");
    device.add(pitch * height);
    void* managed;
    const size_t mn = 12u << 20;
    CHECK(cudaMallocManaged(&managed, mn, cudaMemAttachGlobal));
    t.count("beyond_managed_allocs");
    t.count("beyond_managed_bytes", mn);

    // 3. A stream-ordered block freed with cudaFree (no device sync), and a cudaMalloc block
    //    freed with cudaFreeAsync (no device sync either).
    void* pb;
    const size_t pbn = 5u << 20;
    CHECK(cudaMallocAsync(&pb, pbn, s));
    t.count("allocs");
    t.count("alloc_bytes", pbn);
    CHECK(cudaStreamSynchronize(s));
    t.count("stream_syncs");
    CHECK(cudaFree(pb));
    t.count("beyond_pool_blocks_cudafree");
    void* la = deviceMalloc(7u << 20);
    CHECK(cudaFreeAsync(la, s));
    t.count("frees");
    t.count("free_bytes", 7u << 20);
    t.count("beyond_legacy_freed_async");
    device.sub(7u << 20);
    CHECK(cudaStreamSynchronize(s));
    t.count("stream_syncs");

    // 4. Pinned host memory: cudaHostAlloc with each flag, cudaMallocHost, cudaHostRegister.
    const unsigned flags[] = {cudaHostAllocDefault, cudaHostAllocPortable, cudaHostAllocMapped,
                              cudaHostAllocWriteCombined,
                              cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined};
    std::vector<std::pair<void*, size_t>> hosts;
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; ++i) {
        const size_t n = (i + 1) * (1u << 20) + 512 * i;
        hosts.push_back({hostAlloc(n, flags[i]), n});
    }
    void* mh;
    const size_t mhn = 3u << 20;
    CHECK(cudaMallocHost(&mh, mhn));
    t.count("beyond_host_allocs");
    t.count("beyond_host_alloc_bytes", mhn);
    allocated.add(mhn);
    pinned.add(mhn);
    hostLine("host_alloc", mhn, 0);
    const unsigned regFlags[] = {cudaHostRegisterDefault, cudaHostRegisterPortable,
                                 cudaHostRegisterMapped};
    std::vector<std::pair<void*, size_t>> regs;
    for (size_t i = 0; i < sizeof regFlags / sizeof regFlags[0]; ++i) {
        const size_t n = (i + 2) * (1u << 20);
        void* p = std::aligned_alloc(4096, n);
        if (!p) std::exit(3);
        CHECK(cudaHostRegister(p, n, regFlags[i]));
        t.count("beyond_host_registers");
        t.count("beyond_host_register_bytes", n);
        registered.add(n);
        pinned.add(n);
        hostLine("host_register", n, regFlags[i]);
        regs.push_back({p, n});
    }
    // Release some (peaks above are reached before these).
    hostFree(hosts[0].first, hosts[0].second);
    hostFree(hosts[3].first, hosts[3].second);
    hostFree(mh, mhn);
    for (size_t i = 0; i < 2; ++i) {
        CHECK(cudaHostUnregister(regs[i].first));
        t.count("beyond_host_unregisters");
        registered.sub(regs[i].second);
        pinned.sub(regs[i].second);
        std::free(regs[i].first);
    }

    // 5. The rest of the device memory goes, except one block left live on purpose.
    while (legacy.size() > 1) {
        deviceFree(legacy.back().first, legacy.back().second);
        legacy.pop_back();
    }
    deviceFree(pitched, pitch * height);
    CHECK(cudaFree(managed));
    t.count("beyond_managed_frees");
    t.count("beyond_device_syncs");

    t.count("beyond_device_peak", device.peak);
    t.count("beyond_device_live_at_end", device.now);
    t.count("beyond_host_allocated_peak", allocated.peak);
    t.count("beyond_host_registered_peak", registered.peak);
    t.count("beyond_host_total_peak", pinned.peak);
    t.count("beyond_host_allocated_at_end", allocated.now);
    t.count("beyond_host_registered_at_end", registered.now);
    t.summary("beyond_pool");
    return 0; // the live legacy block, host allocations and registration stay: leaks to report
}
