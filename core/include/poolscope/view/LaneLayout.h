#pragma once
// The timeline's lane structure, computed once per Timeline (off the UI thread in the window):
// lanes grouped device > pool > stream, allocations packed into non-overlapping rows per lane,
// and markers split per lane. Painting then only does binary searches over these vectors.
// Qt-free, so the window, the CLI and exports group and name things the same way.

#include "poolscope/Timeline.h"
#include "poolscope/view/EntityNames.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace poolscope::view {

// Outside: a device's memory outside any pool (cudaMalloc & co.), right under its device lane;
// Host: the process's pinned host memory, one lane after every device.
enum class LaneKind { Device, Pool, Stream, Outside, Host };

struct Lane {
    LaneKind kind = LaneKind::Stream;
    int device = -1;
    int poolIndex = -1;   // into Timeline::pools (Pool lanes, and Stream lanes under a pool)
    int streamIndex = -1; // into Timeline::streams (-1 when the stream has no entity record)
    int outsideIndex = -1; // into Timeline::outside (Outside lanes)
    // The pool's place among the pool lanes (0 for pool #1), on its lane and the stream lanes
    // under it: what picks its colours, so pool #1 looks the same in every trace.
    int poolSlot = -1;
    uint64_t pool = 0;
    uint64_t stream = 0;
    int firstRow = 0; // into LaneLayout::rows
    int rowCount = 0;
    std::vector<uint32_t> markers; // indices into Timeline::markers, by time
    std::vector<uint32_t> failed;  // indices into Timeline::failed, by time
    std::string title;             // UTF-8
    std::string subtitle;
};

class LaneLayout {
public:
    // Returns nullptr when cancelled.
    static std::shared_ptr<const LaneLayout> build(const Timeline& tl,
                                                   const std::atomic<bool>* cancel = nullptr);
    // Fills this (empty) layout; false when cancelled (the layout is then incomplete).
    bool compute(const Timeline& tl, const std::atomic<bool>* cancel = nullptr);

    std::vector<Lane> lanes;
    // Allocation indices per row, ordered by alloc time; allocations in one row never overlap,
    // so they are ordered by free time too (which is what makes culling a binary search).
    std::vector<std::vector<uint32_t>> rows;
    // Per row, each allocation's drawn end (free time, or the trace's end while live), stored
    // contiguously: the painter's per-pixel skips gallop through these instead of chasing
    // allocation records across memory (which would be most of a fit-all frame on 10M events).
    std::vector<std::vector<int64_t>> rowEnds;
    std::vector<std::vector<int64_t>> rowStarts; // alloc times, same layout as rowEnds
    // The time of every Series::kBlock-th point of the series the area charts scan (a pool's
    // reserved and used, a stream's live bytes): a pixel column's search for its last point
    // looks here first, then in one block of the series' times, instead of galloping through
    // a time array of millions of points (a cache miss per step).
    struct BlockTimes {
        std::vector<int64_t> reserved, used;
    };
    std::vector<BlockTimes> poolBlockT;             // by Timeline::pools index
    std::vector<std::vector<int64_t>> streamBlockT; // by Timeline::streams index: liveBytes
    std::vector<int32_t> rowOfAlloc;                // row of each allocation
    std::vector<int32_t> laneOfRow;
    // Pools and streams numbered in lane order.
    EntityNames names;

    int laneOfStream(uint64_t stream) const; // first lane of the stream, -1 if none
    int laneOfPool(uint64_t pool) const;
    int laneOf(uint64_t pool, uint64_t stream) const;

private:
    void addOutsideLane(const Timeline& tl, int device);
    std::unordered_map<uint64_t, int> streamLane_, poolLane_;
    std::map<std::pair<uint64_t, uint64_t>, int> pairLane_;
};

// First index i >= from with ends[i] > t (ends sorted): an exponential search from `from`, so a
// scan that moves forward a little at a time touches only nearby memory.
size_t gallopPast(const std::vector<int64_t>& ends, size_t from, int64_t t);

// The span where the allocator was busy: from the first allocation (or failed one) to the last
// free, allocation or change of a pool's reserved memory. The first view of a trace fits this
// rather than the whole trace, which often starts and ends with idle time (start-up, teardown).
// {0, 0} when the trace has no allocator activity.
struct TimeSpan {
    int64_t begin = 0, end = 0;
    bool empty() const { return end <= begin; }
};
TimeSpan allocatorActivity(const Timeline& tl);

} // namespace poolscope::view
