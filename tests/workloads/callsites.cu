// Call sites (issue #13): distinct, non-inlined functions allocate known sizes from the default
// pool, inside NVTX push/pop ranges, so that a trace recorded with stacks can be checked against
// what the program knows. Ground truth on stdout (JSON lines, read by tests/gpu/stacks_check.py):
//   {"type":"site","function":F,"nvtx":"train/forward","bytes":B,"count":N}  live at the peak
//   {"type":"range","name":..,"depth":D}                                     every range pushed
//   {"type":"peak","live_bytes":B,"reserved":R}  the pool's reserved high watermark after the peak
// scratch() allocates and frees 128 MiB before the peak (and a synchronize hands it back): it
// must not be among the sites at the peak.
#include <nvtx3/nvToolsExt.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "Truth.h"

// Plain static functions (no anonymous namespace), so that their names read as written.
constexpr size_t MiB = size_t(1) << 20;
static std::vector<void*> g_live;
static std::string g_path;

static void range(const char* name, int depth) {
    nvtxRangePushA(name);
    std::printf("{\"type\":\"range\",\"name\":\"%s\",\"depth\":%d}\n", name, depth);
}

static void site(const char* fn, size_t bytes, int count) {
    std::printf("{\"type\":\"site\",\"function\":\"%s\",\"nvtx\":\"%s\",\"bytes\":%zu,\"count\":%d}\n",
                fn, g_path.c_str(), bytes * size_t(count), count);
}

__attribute__((noinline)) static void alloc_weights(cudaStream_t s) {
    for (int i = 0; i < 3; ++i) {
        void* p = nullptr;
        CHECK(cudaMallocAsync(&p, 64 * MiB, s));
        g_live.push_back(p);
    }
    site("alloc_weights", 64 * MiB, 3);
}

__attribute__((noinline)) static void alloc_activations(cudaStream_t s) {
    for (int i = 0; i < 4; ++i) {
        void* p = nullptr;
        CHECK(cudaMallocAsync(&p, 16 * MiB, s));
        g_live.push_back(p);
    }
    site("alloc_activations", 16 * MiB, 4);
}

__attribute__((noinline)) static void alloc_workspace(cudaStream_t s) {
    void* p = nullptr;
    CHECK(cudaMallocAsync(&p, 96 * MiB, s));
    g_live.push_back(p);
    site("alloc_workspace", 96 * MiB, 1);
}

__attribute__((noinline)) static void scratch(cudaStream_t s) {
    void* p = nullptr;
    CHECK(cudaMallocAsync(&p, 128 * MiB, s));
    CHECK(cudaFreeAsync(p, s));
    CHECK(cudaStreamSynchronize(s));
}

int main() {
    CHECK(cudaSetDevice(0));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t zero = 0;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &zero));
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));

    scratch(s);
    range("train", 0);
    range("setup", 1);
    g_path = "train/setup";
    alloc_weights(s);
    nvtxRangePop();
    range("forward", 1);
    g_path = "train/forward";
    alloc_activations(s);
    nvtxRangePop();
    range("backward", 1);
    g_path = "train/backward";
    alloc_workspace(s);
    CHECK(cudaStreamSynchronize(s));
    uint64_t reserved = 0, used = 0;
    Truth::watermarks(pool, reserved, used);
    uint64_t high = 0;
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high));
    std::printf("{\"type\":\"peak\",\"live_bytes\":%zu,\"reserved\":%llu,\"used\":%llu}\n",
                size_t(3 * 64 + 4 * 16 + 96) * MiB, (unsigned long long)high,
                (unsigned long long)used);
    nvtxRangePop();
    nvtxRangePop();
    // A range named by a registered string in a domain of its own (as libraries name theirs):
    // the trace must carry its text, not the handle.
    nvtxDomainHandle_t domain = nvtxDomainCreateA("callsites");
    nvtxEventAttributes_t teardown = {};
    teardown.version = NVTX_VERSION;
    teardown.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    teardown.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    teardown.message.registered = nvtxDomainRegisterStringA(domain, "teardown");
    nvtxDomainRangePushEx(domain, &teardown);
    std::printf("{\"type\":\"range\",\"name\":\"teardown\",\"depth\":0}\n");
    for (void* p : g_live) CHECK(cudaFreeAsync(p, s));
    CHECK(cudaStreamSynchronize(s));
    nvtxDomainRangePop(domain);
    CHECK(cudaStreamDestroy(s));
    return 0;
}
