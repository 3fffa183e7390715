#pragma once
// A pool's used bytes split by NVTX range (issue #13), for the plot's stacked area: each
// allocation counts under the innermost range open on its thread when it was made, the largest
// ranges get a band each, the rest share "other", allocations made outside any range are
// "(no range)", and what the driver's used bytes hold beyond the live allocations the trace
// recorded (memory allocated before recording started, allocations whose events were dropped, a
// pool block released with cudaFree that the driver still counts) is "(no recorded
// allocation)". The bands are defined so that they add up to the pool's `used` series exactly, at
// every instant: the plot's stack ends on its used line. Qt-free; ui/WatermarkPlot draws it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "poolscope/Series.h"
#include "poolscope/Stacks.h"
#include "poolscope/Timeline.h"

namespace poolscope::analysis {

struct RangeBand {
    enum class Kind : uint8_t {
        Range,     // one range name
        Other,     // the range names after the largest, together
        NoRange,   // allocations made while no range was open on their thread
        Unrecorded // used bytes that no live recorded allocation accounts for
    };
    Kind kind = Kind::Range;
    std::string name;    // the range's name, or the band's label ("other (5 ranges)")
    uint32_t ranges = 1; // range names in the band (Other: how many were folded into it)
    // Live bytes of the band's allocations over time (Unrecorded: empty, it is what remains of
    // `used`: see UsedSplit::at).
    Series bytes;
    // The band's highest value as drawn (at() at every point where a band or `used` changes):
    // 0 for a band that never shows.
    uint64_t peak = 0;
};

struct UsedSplit {
    uint64_t pool = 0;
    // Bottom of the stack first: the ranges by peak (largest first), "other", "(no range)",
    // "(no recorded allocation)". The last three are always there (peak 0 when empty).
    std::vector<RangeBand> bands;
    // Instants where the recorded allocations added up to more than `used` (two threads racing
    // on the pool, a driver read between an allocation and its event): there the bands are cut
    // from the top of the stack down to `used`. How many such instants, and the most bytes cut.
    uint64_t overshootCount = 0;
    uint64_t maxOvershoot = 0;
    bool anyRange() const; // some allocation was made inside a range

    // Each band's bytes at ts, given the pool's used bytes at ts (`used.valueAt(ts)`, or a
    // downsampled point's value), into out (one per band): each band's live bytes, cut from the
    // top of the stack where they add up to more than `used`, and the rest of `used` in the
    // Unrecorded band. The values add up to `used` exactly.
    void at(int64_t ts, uint64_t used, std::vector<uint64_t>& out) const;
    // The live bytes of the recorded allocations at ts, before any cut (above `used` where
    // overshootCount counted).
    uint64_t recordedAt(int64_t ts) const;
};

// The innermost NVTX range name open on the allocating thread when `a` was made, "" when none:
// from the range path the collector stored with the allocation's call site, else (a site
// without a path, as for ranges opened with nvtxRangeStart) the trace's range table.
std::string innermostRangeName(const StackTables& t, const Allocation& a);

// Splits pool `pool`'s used bytes (tl.pool(pool)->used) by range: at most topRanges range bands
// (the rest fold into "other"; when only one more name would fold, it keeps its own band).
// Allocations without a block (ptr 0) take no bytes. An unknown pool gives an empty split
// (pool 0, no bands).
UsedSplit splitUsedByRange(const Timeline& tl, const StackTables& t, uint64_t pool,
                           size_t topRanges = 8);

// For drawing: at each of `points` (the pool's used series downsampled for the view), the top
// of each band in the stack: tops[k][i] = the sum of bands 0..k at points[i].t. The last band's
// tops are the points' values.
std::vector<std::vector<uint64_t>> stackedTops(const UsedSplit& split,
                                               const std::vector<Point>& points);

} // namespace poolscope::analysis
