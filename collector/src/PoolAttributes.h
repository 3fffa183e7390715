#pragma once
// The settable attributes a pool has when the collector first sees it (issue #17): the three
// reuse policies and the release threshold, read from the driver and written to the trace's
// pool_initial_attributes table. Without them, policies the program never set read "unknown" in
// every view, although the driver always has a value (documented default: all three on, threshold
// 0). Changes after that are recorded as events (pool_set_attribute, knob_change).
//
// Cold path (once per pool); the caller holds its thread's Guard so the reads are not traced as
// the program's calls. The reader is a parameter so tests replace the driver.

#include "poolscope/Entities.h"

#include <cstdint>
#include <cuda.h>

namespace poolscope::collector {

// cuMemPoolGetAttribute's shape.
using GetPoolAttributeFn = CUresult (*)(CUmemoryPool pool, CUmemPool_attribute attr, void* value);

struct PoolAttributesRead {
    PoolAttributeValue values[4];
    int count = 0; // the attributes the driver answered, in PoolAttr order
};

// Reads each of the four through `get`: the reuse policies as the driver's int (stored 0 or 1),
// the threshold as cuuint64_t. An attribute the driver refuses is left out.
PoolAttributesRead readPoolAttributes(uint64_t pool, GetPoolAttributeFn get);

} // namespace poolscope::collector
