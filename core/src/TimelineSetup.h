#pragma once
// What buildTimeline and buildTimelineRange both hand a TimelineBuilder before any event: the
// trace's devices, pools, streams and drop gaps, read the same way for a whole or a range build.

#include "poolscope/Result.h"

namespace poolscope {
class TimelineBuilder;
class TraceReader;

namespace detail {
// Entities from their tables (an error if one cannot be read); a drop_gaps table that cannot be
// read (damaged) loses the marks, not the trace: the total stays in meta, and `info` names the
// damage.
Status setEntitiesFromTrace(TimelineBuilder& b, const TraceReader& reader);
} // namespace detail
} // namespace poolscope
