#pragma once
// Ground truth printed by each workload as JSON lines on stdout, read by tests/gpu/check_trace.py:
//   {"type":"wm","what":"alloc","nth":N,"pool":"0x..","reserved":R,"used":U}
//     the pool's watermarks read by the program itself right after its N-th (0-based) call of
//     that kind (alloc, free, sync, trim), in program order;
//   {"type":"summary", counts...} once at the end.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <map>
#include <string>
#include <cstring>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t err_ = (x);                                                                    \
        if (err_ != cudaSuccess) {                                                                 \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,                       \
                         cudaGetErrorString(err_));                                                \
            std::exit(3);                                                                          \
        }                                                                                          \
    } while (0)

struct Truth {
    std::map<std::string, uint64_t> counts;
    std::map<std::string, uint64_t> nth; // calls so far, per kind

    void count(const char* key, uint64_t n = 1) { counts[key] += n; }

    static void watermarks(cudaMemPool_t pool, uint64_t& reserved, uint64_t& used) {
        CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
        CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
    }
    // Call right after the call whose index is nth[what]-1 (note() first, then wm()).
    uint64_t note(const char* what) { return nth[what]++; }
    void wm(const char* what, uint64_t index, cudaMemPool_t pool) {
        uint64_t r, u;
        watermarks(pool, r, u);
        std::printf("{\"type\":\"wm\",\"what\":\"%s\",\"nth\":%llu,\"pool\":\"0x%llx\","
                    "\"reserved\":%llu,\"used\":%llu}\n",
                    what, (unsigned long long)index, (unsigned long long)(uintptr_t)pool,
                    (unsigned long long)r, (unsigned long long)u);
    }
    // The pool's settable attributes as the program reads them (issue #17): the trace's
    // pool_initial_attributes must hold these for a pool read before the program changes any.
    //   {"type":"attributes","pool":"0x..","follow_event_dependencies":F,
    //    "allow_opportunistic":O,"allow_internal_dependencies":I,"release_threshold":T}
    static void attributes(cudaMemPool_t pool) {
        int f = -1, o = -1, i = -1;
        uint64_t t = 0;
        CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseFollowEventDependencies, &f));
        CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &o));
        CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &i));
        CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &t));
        std::printf("{\"type\":\"attributes\",\"pool\":\"0x%llx\",\"follow_event_dependencies\":%d,"
                    "\"allow_opportunistic\":%d,\"allow_internal_dependencies\":%d,"
                    "\"release_threshold\":%llu}\n",
                    (unsigned long long)(uintptr_t)pool, f, o, i, (unsigned long long)t);
    }
    void summary(const char* workload) {
        std::printf("{\"type\":\"summary\",\"workload\":\"%s\"", workload);
        for (auto& [k, v] : counts) std::printf(",\"%s\":%llu", k.c_str(), (unsigned long long)v);
        std::printf("}\n");
        std::fflush(stdout);
    }
};

// Settings a validation run imposes on a workload's pool (tests/gpu/whatif_validate.sh):
// POOLSCOPE_WL_RELEASE_THRESHOLD (bytes, or "max") and POOLSCOPE_WL_REUSE_OPPORTUNISTIC (0 or 1).
// Returns true when either was given: the workload then leaves the pool's knobs alone.
inline bool applyEnvSettings(cudaMemPool_t pool) {
    bool any = false;
    if (const char* t = std::getenv("POOLSCOPE_WL_RELEASE_THRESHOLD")) {
        uint64_t v = std::strcmp(t, "max") == 0 ? ~uint64_t{0} : std::strtoull(t, nullptr, 10);
        CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &v));
        any = true;
    }
    if (const char* o = std::getenv("POOLSCOPE_WL_REUSE_OPPORTUNISTIC")) {
        int v = std::atoi(o) != 0;
        CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &v));
        any = true;
    }
    return any;
}
