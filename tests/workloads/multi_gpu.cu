// Several GPUs (issue #19), from one thread whose current device is GPU 0 throughout:
//   - each device's default pool and an explicit pool of its own (release threshold max, so each
//     pool's reserved bytes only grow and the device's peak is the sum of its pools' highs);
//   - cudaMallocAsync and cudaMallocFromPoolAsync on each device's stream, and cudaFreeAsync
//     there: a device-1 stream's allocation must land in device 1's current pool although
//     device 0 is current;
//   - device 1's current pool switched to its explicit pool and back (cudaDeviceSetMemPool);
//   - with two GPUs: GPU 0's explicit pool opened to GPU 1 (cudaMemPoolSetAccess) and peer
//     copies both ways (cudaMemcpyPeerAsync) on each device's stream.
// With one GPU (degraded mode) the same steps on GPU 0, a cudaMemcpyPeerAsync from GPU 0 to
// GPU 0, plus a second context on GPU 0 (driver API): a stream created in it, a cuMemAllocAsync /
// cuMemFreeAsync on that stream while the primary context is current, and a cuMemcpyPeerAsync
// between the two contexts: the collector must resolve a stream and a context that are not the
// thread's current ones. Every device
// field is in the ground truth: ordinal, name, total memory, UUID, pool handles.
// Ground truth (Truth.h, checked by tests/gpu/check_trace.py):
//   {"type":"mg_mode","mode":"two_gpus"|"one_gpu","devices_found":N}
//   {"type":"mg_device","ordinal":d,"name":..,"total_memory":..,"uuid":"GPU-.."}
//   {"type":"mg_pool","handle":"0x..","device":d,"kind":"default"|"explicit"}
//   {"type":"mg_alloc","nth":k,"device":d,"pool":"0x..","stream":"0x..","size":n}  (k-th
//     successful alloc in program order), likewise "mg_free" (k-th successful free)
//   {"type":"mg_access","pool":"0x..","device":d,"flags":f}
//   {"type":"mg_peer","nth":k,"src_device":s,"dst_device":d,"bytes":n,"stream":"0x.."}
//   {"type":"mg_total","device":d,"pools":2,"peak_reserved":R}
//   {"type":"mg_note","what":..,"error":..}  (a step the machine refused; not counted)
//   {"type":"summary", counts...}
// usage: multi_gpu [--one-gpu]   (--one-gpu: the degraded mode even where two GPUs exist)
#include <cuda.h>

#include <cstring>
#include <string>
#include <vector>

#include "Truth.h"

namespace {

Truth t;
uint64_t nthAlloc = 0, nthFree = 0, nthPeer = 0;

unsigned long long u(const void* p) { return (unsigned long long)(uintptr_t)p; }

std::string uuidText(const cudaUUID_t& id) {
    static const char* hex = "0123456789abcdef";
    std::string s = "GPU-";
    for (int i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
        const unsigned char b = static_cast<unsigned char>(id.bytes[i]);
        s += hex[b >> 4];
        s += hex[b & 15];
    }
    return s;
}

void allocLine(int device, cudaMemPool_t pool, const void* stream, size_t n) {
    std::printf("{\"type\":\"mg_alloc\",\"nth\":%llu,\"device\":%d,\"pool\":\"0x%llx\","
                "\"stream\":\"0x%llx\",\"size\":%zu}\n",
                (unsigned long long)nthAlloc++, device, u(pool), u(stream), n);
    t.count("allocs");
    t.count("alloc_bytes", n);
}

void freeLine(int device, cudaMemPool_t pool, const void* stream, size_t n) {
    std::printf("{\"type\":\"mg_free\",\"nth\":%llu,\"device\":%d,\"pool\":\"0x%llx\","
                "\"stream\":\"0x%llx\",\"size\":%zu}\n",
                (unsigned long long)nthFree++, device, u(pool), u(stream), n);
    t.count("frees");
    t.count("free_bytes", n);
}

void peerLine(int src, int dst, size_t n, const void* stream) {
    std::printf("{\"type\":\"mg_peer\",\"nth\":%llu,\"src_device\":%d,\"dst_device\":%d,"
                "\"bytes\":%zu,\"stream\":\"0x%llx\"}\n",
                (unsigned long long)nthPeer++, src, dst, n, u(stream));
    t.count("peer_copies");
}

void note(const char* what, const char* error) {
    std::printf("{\"type\":\"mg_note\",\"what\":\"%s\",\"error\":\"%s\"}\n", what, error);
}

const char* cuError(CUresult r) {
    const char* s = nullptr;
    cuGetErrorName(r, &s);
    return s ? s : "unknown";
}

struct Block {
    void* p;
    size_t n;
    int device;
    cudaMemPool_t pool;
    cudaStream_t stream;
};

// GPU 0's second context (driver API): a stream that belongs to neither the thread's current
// context nor another device, an allocation and a free on it, and a peer copy between the two
// contexts of the one device. Refused steps are noted and skipped, never counted.
void secondContext(void* src0, cudaMemPool_t current0) {
    CUcontext primary = nullptr, second = nullptr;
    cuCtxGetCurrent(&primary);
    CUresult r = cuCtxCreate(&second, nullptr, 0, 0);
    if (r != CUDA_SUCCESS) return note("second context", cuError(r));
    CUstream sb = nullptr;
    r = cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING); // in the second context (now current)
    CUcontext popped = nullptr;
    cuCtxPopCurrent(&popped); // cuCtxCreate pushed it: the primary is current again
    if (r != CUDA_SUCCESS) {
        cuCtxDestroy(second);
        return note("stream in the second context", cuError(r));
    }
    t.count("stream_creates");
    const size_t n = size_t(6) << 20;
    CUdeviceptr dp = 0;
    r = cuMemAllocAsync(&dp, n, sb);
    bool pushed = false;
    if (r != CUDA_SUCCESS) {
        // A driver that wants the stream's own context current: the rest with it current.
        note("alloc on the second context's stream while the primary is current", cuError(r));
        if (cuCtxPushCurrent(second) == CUDA_SUCCESS) {
            pushed = true;
            r = cuMemAllocAsync(&dp, n, sb);
        }
    }
    if (r == CUDA_SUCCESS) {
        allocLine(0, current0, sb, n);
        r = cuMemcpyPeerAsync(dp, second, reinterpret_cast<CUdeviceptr>(src0), primary,
                              size_t(1) << 20, sb);
        if (r == CUDA_SUCCESS)
            peerLine(0, 0, size_t(1) << 20, sb);
        else
            note("peer copy between two contexts of GPU 0", cuError(r));
        r = cuMemFreeAsync(dp, sb);
        if (r == CUDA_SUCCESS)
            freeLine(0, current0, sb, n);
        else
            note("free on the second context's stream", cuError(r));
    } else {
        note("alloc on the second context's stream", cuError(r));
    }
    if (cuStreamSynchronize(sb) == CUDA_SUCCESS) t.count("stream_syncs");
    if (pushed) cuCtxPopCurrent(&popped);
    cuStreamDestroy(sb);
    cuCtxDestroy(second);
}

} // namespace

int main(int argc, char** argv) {
    const bool forceOne = argc > 1 && std::strcmp(argv[1], "--one-gpu") == 0;
    int found = 0;
    CHECK(cudaGetDeviceCount(&found));
    const int devs = (found >= 2 && !forceOne) ? 2 : 1;
    std::printf("{\"type\":\"mg_mode\",\"mode\":\"%s\",\"devices_found\":%d}\n",
                devs == 2 ? "two_gpus" : "one_gpu", found);

    cudaMemPool_t def[2] = {}, own[2] = {};
    cudaStream_t s[2] = {};
    const uint64_t keepAll = ~uint64_t{0};
    for (int d = 0; d < devs; ++d) {
        CHECK(cudaSetDevice(d));
        cudaDeviceProp p;
        CHECK(cudaGetDeviceProperties(&p, d));
        std::printf("{\"type\":\"mg_device\",\"ordinal\":%d,\"name\":\"%s\",\"total_memory\":%zu,"
                    "\"uuid\":\"%s\"}\n",
                    d, p.name, p.totalGlobalMem, uuidText(p.uuid).c_str());
        CHECK(cudaDeviceGetDefaultMemPool(&def[d], d));
        cudaMemPoolProps props{};
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = d;
        CHECK(cudaMemPoolCreate(&own[d], &props));
        t.count("pool_creates");
        for (cudaMemPool_t pool : {def[d], own[d]}) {
            CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold,
                                          const_cast<uint64_t*>(&keepAll)));
            t.count("set_attributes");
        }
        std::printf("{\"type\":\"mg_pool\",\"handle\":\"0x%llx\",\"device\":%d,\"kind\":\"default\"}\n",
                    u(def[d]), d);
        std::printf("{\"type\":\"mg_pool\",\"handle\":\"0x%llx\",\"device\":%d,\"kind\":\"explicit\"}\n",
                    u(own[d]), d);
        CHECK(cudaStreamCreateWithFlags(&s[d], cudaStreamNonBlocking));
        t.count("stream_creates");
    }
    // From here on GPU 0 is the thread's current device: every other device's work goes
    // through its stream or its pool only.
    CHECK(cudaSetDevice(0));
    std::vector<Block> blocks;
    auto async = [&](int d, size_t n) {
        void* p;
        CHECK(cudaMallocAsync(&p, n, s[d]));
        cudaMemPool_t cur;
        CHECK(cudaDeviceGetMemPool(&cur, d));
        allocLine(d, cur, s[d], n);
        blocks.push_back({p, n, d, cur, s[d]});
        return p;
    };
    auto fromPool = [&](int d, size_t n) {
        void* p;
        CHECK(cudaMallocFromPoolAsync(&p, n, own[d], s[d]));
        allocLine(d, own[d], s[d], n);
        blocks.push_back({p, n, d, own[d], s[d]});
        return p;
    };
    for (int round = 0; round < 3; ++round)
        for (int d = 0; d < devs; ++d) {
            async(d, (size_t(4 + 4 * d) + size_t(round)) << 20);
            fromPool(d, (size_t(16) + size_t(8 * round)) << 20);
        }
    // The last device's current pool becomes its explicit pool, then its default again.
    const int last = devs - 1;
    CHECK(cudaDeviceSetMemPool(last, own[last]));
    t.count("set_mempool");
    async(last, size_t(10) << 20);
    CHECK(cudaDeviceSetMemPool(last, def[last]));
    t.count("set_mempool");
    async(last, size_t(3) << 20);

    // Access to GPU 0's explicit pool, and peer copies.
    auto grant = [&](cudaMemPool_t pool, int device, cudaMemAccessFlags flags) {
        cudaMemAccessDesc desc{};
        desc.location.type = cudaMemLocationTypeDevice;
        desc.location.id = device;
        desc.flags = flags;
        const cudaError_t e = cudaMemPoolSetAccess(pool, &desc, 1);
        if (e != cudaSuccess) return note("cudaMemPoolSetAccess", cudaGetErrorName(e));
        t.count("pool_set_access");
        std::printf("{\"type\":\"mg_access\",\"pool\":\"0x%llx\",\"device\":%d,\"flags\":%d}\n",
                    u(pool), device, int(flags));
    };
    void* src0 = blocks[1].p; // GPU 0's explicit pool, 16 MiB
    // The copies read blocks allocated on other streams: those allocations complete first.
    for (int d = 0; d < devs; ++d) {
        CHECK(cudaStreamSynchronize(s[d]));
        t.count("stream_syncs");
    }
    if (devs == 2) {
        int can = 0;
        CHECK(cudaDeviceCanAccessPeer(&can, 1, 0));
        if (can)
            grant(own[0], 1, cudaMemAccessFlagsProtReadWrite);
        else
            note("cudaMemPoolSetAccess", "GPU 1 cannot access GPU 0 (cudaDeviceCanAccessPeer)");
        void* dst1 = blocks[3].p; // GPU 1's explicit pool, 16 MiB
        auto copy = [&](void* dst, int dd, void* src, int sd, size_t n, cudaStream_t st) {
            const cudaError_t e = cudaMemcpyPeerAsync(dst, dd, src, sd, n, st);
            if (e != cudaSuccess) return note("cudaMemcpyPeerAsync", cudaGetErrorName(e));
            peerLine(sd, dd, n, st);
        };
        for (int i = 0; i < 3; ++i) copy(dst1, 1, src0, 0, size_t(1 + i) << 20, s[1]);
        CHECK(cudaStreamSynchronize(s[1])); // the copy back reads what these wrote
        t.count("stream_syncs");
        copy(src0, 0, dst1, 1, size_t(2) << 20, s[0]);
    } else {
        // The owner's own access (read-write) granted again: legal on some drivers only.
        grant(own[0], 0, cudaMemAccessFlagsProtReadWrite);
        // A runtime peer copy within GPU 0 (its driver call need not be a cuMemcpyPeer*), from
        // the explicit pool's block to the first block of the default pool (4 MiB).
        const cudaError_t e = cudaMemcpyPeerAsync(blocks[0].p, 0, src0, 0, size_t(1) << 20, s[0]);
        if (e == cudaSuccess)
            peerLine(0, 0, size_t(1) << 20, s[0]);
        else
            note("cudaMemcpyPeerAsync within GPU 0", cudaGetErrorName(e));
        cudaMemPool_t cur0;
        CHECK(cudaDeviceGetMemPool(&cur0, 0));
        secondContext(src0, cur0);
    }

    // Frees on each block's own stream, still from GPU 0's context; then each stream drains.
    for (const Block& b : blocks) {
        CHECK(cudaFreeAsync(b.p, b.stream));
        freeLine(b.device, b.pool, b.stream, b.n);
    }
    for (int d = 0; d < devs; ++d) {
        CHECK(cudaStreamSynchronize(s[d]));
        t.count("stream_syncs");
    }
    // Nothing was ever released (threshold max): each pool's reserved only grew, so the device's
    // pools together peaked at the sum of their high watermarks.
    for (int d = 0; d < devs; ++d) {
        uint64_t sum = 0;
        for (cudaMemPool_t pool : {def[d], own[d]}) {
            uint64_t high = 0;
            CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high));
            sum += high;
        }
        std::printf("{\"type\":\"mg_total\",\"device\":%d,\"pools\":2,\"peak_reserved\":%llu}\n", d,
                    (unsigned long long)sum);
    }
    for (int d = 0; d < devs; ++d) {
        CHECK(cudaStreamDestroy(s[d]));
        CHECK(cudaMemPoolDestroy(own[d]));
        t.count("pool_destroys");
    }
    t.summary("multi_gpu");
    return 0;
}
