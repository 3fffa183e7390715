#include "PoolAttributes.h"

namespace poolscope::collector {

PoolAttributesRead readPoolAttributes(uint64_t pool, GetPoolAttributeFn get) {
    PoolAttributesRead out;
    if (!pool || !get) return out;
    auto* handle = reinterpret_cast<CUmemoryPool>(pool);
    // The reuse policies are ints: the driver writes four bytes, not eight.
    for (CUmemPool_attribute a : {CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES,
                                  CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
                                  CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES}) {
        int v = 0;
        if (get(handle, a, &v) == CUDA_SUCCESS)
            out.values[out.count++] = {pool, static_cast<PoolAttr>(a), v != 0 ? 1u : 0u};
    }
    cuuint64_t threshold = 0;
    if (get(handle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold) == CUDA_SUCCESS)
        out.values[out.count++] = {pool, PoolAttr::ReleaseThreshold, threshold};
    return out;
}

} // namespace poolscope::collector
