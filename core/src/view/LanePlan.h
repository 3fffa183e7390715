#pragma once
// Which lanes a timeline gets, in order, without packing any rows: what LaneLayout lays out and
// what EntityNames numbers, so the two can never disagree. Internal to core.

#include "poolscope/Timeline.h"

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace poolscope::view {

using PoolStream = std::pair<uint64_t, uint64_t>; // (pool, stream)

struct LanePlan {
    struct PoolLanes {
        uint64_t pool = 0;
        int poolIndex = -1;            // into Timeline::pools
        std::vector<uint64_t> streams; // a stream lane per (pool, stream), by stream handle
    };
    struct DeviceLanes {
        int device = -1;
        std::vector<PoolLanes> pools;
        std::vector<uint64_t> extraStreams; // streams that never allocate but sync or wait
    };
    std::vector<DeviceLanes> devices;
};

// The (pool, stream) pairs the allocations use, in one pass: traces have a handful of pairs and
// allocations alternate between them, so a few recent ones are compared before the set.
std::set<PoolStream> allocatingPairs(const Timeline& tl);

// pairs: the allocating (pool, stream) pairs; the failed allocations of streams without a lane
// add theirs (returned through pairs too).
LanePlan planLanes(const Timeline& tl, std::set<PoolStream>& pairs);

class EntityNames;
// Streams in Timeline::streams order, then pools and the streams only seen in lanes, in lane order.
void numberInLaneOrder(const Timeline& tl, const LanePlan& plan, EntityNames& names);

} // namespace poolscope::view
