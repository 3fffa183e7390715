#pragma once
// The detailed Timeline of one time range of a trace (issue #15), for a trace too large to hold
// whole: only the chunks that overlap the range are decoded. Each pool's reserved/used start
// from the per-chunk summaries before the range (PoolSummary.h) and the few chunks just before
// it that can change them without a summary (implicit releases, attribute changes, chunks whose
// summary rows are missing); blocks allocated before the range and freed inside it appear as
// allocations from the range's left edge (Allocation::beforeLoaded), and the bytes in use at
// the start that no loaded block accounts for are PoolTimeline::unaccountedAtLoadStart.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "poolscope/Result.h"
#include "poolscope/Timeline.h"

namespace poolscope {

class TraceReader;

// Which chunks a range build reads, found from the chunk headers alone (no data read).
struct RangePlan {
    size_t firstChunk = 0, lastChunk = 0; // positions in seq order, inclusive
    size_t chunkCount = 0;                // chunks in the trace
    uint64_t events = 0;                  // events in [firstChunk, lastChunk]
    // The range whose series equal the whole build's: the chunks' time span, less the times
    // chunks before or after them also reach (threads' clocks interleave slightly).
    int64_t loadedFromNs = 0, loadedUntilNs = 0;
    int64_t traceT0 = 0, traceT1 = 0;
    uint64_t traceEvents = 0;
    // The trace has per-chunk pool summaries; without them the detail can only be read from
    // the beginning (firstChunk is then 0).
    bool summaries = false;
    bool fromStart() const { return firstChunk == 0; }
};

// The chunks overlapping [t0, t1], and how many events they hold.
Result<RangePlan> planTimelineRange(const TraceReader& reader, int64_t t0, int64_t t1);

struct RangeBuildOptions {
    std::function<void(uint64_t, uint64_t)> progress; // (done, total) events, per chunk
    const std::atomic<bool>* cancel = nullptr;        // set: ErrorCode::Cancelled
    // Not 0: refuse (ErrorCode::InvalidArgument, said in words) a range whose chunks hold more.
    uint64_t maxEvents = 0;
    // Chunks before the range decoded at most to find what the summaries do not say (implicit
    // releases, attribute changes, chunks without summary rows): a bound on the work, whatever
    // the trace holds. Beyond it the summaries alone start the pools.
    size_t maxPrerollChunks = 256;
};

// The Timeline of the chunks that overlap [t0, t1] (at least one chunk). t0/t1 of the result are
// the whole trace's; it is partial and limited, with loadedFromNs/loadedUntilNs from the plan.
// A range that starts at the first chunk, and every range of a trace without summaries, is
// built from the beginning (buildTimeline with maxEvents): the prefix up to the range's end.
Result<std::shared_ptr<const Timeline>> buildTimelineRange(const TraceReader& reader, int64_t t0,
                                                           int64_t t1,
                                                           const RangeBuildOptions& options = {});

} // namespace poolscope
