#pragma once
// Timeline reconstruction: turns a trace's event stream into what every view draws. Computed in
// core (never in a widget) so the CLI report, the GUI and tests share one truth. Results are
// immutable once built; the GUI keeps a shared_ptr<const Timeline>.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/Result.h"

namespace poolscope {

class TraceReader;

inline constexpr int64_t kStillLive = INT64_MAX; // Allocation::freeTsNs of a never-freed block

// A step series in columnar form (fast range scans): value v[i] holds from t[i] until t[i+1].
// t is strictly increasing and no two consecutive points hold the same value (push() keeps
// both true), so a watermark read at every event costs memory only when it changes.
// Build it with push() only: push() also maintains a min/max summary per block of kBlock
// points, which lets downsample() cross a zoomed-out range of millions of points in
// O(buckets x (kBlock + blocks per bucket)) instead of touching every point. (A series whose
// t/v were filled directly still works; it is just scanned point by point.)
struct Series {
    static constexpr size_t kBlock = 64;
    struct Block {         // values inline so a walk over blocks reads one contiguous array
        uint64_t minV, maxV;
        uint32_t minI, maxI; // indices of the block's first minimum and first maximum
    };
    std::vector<int64_t> t;
    std::vector<uint64_t> v;
    std::vector<Block> blocks;
    size_t size() const { return t.size(); }
    bool empty() const { return t.empty(); }
    // Appends a step. Equal timestamps keep the last value; a timestamp earlier than the last
    // point (threads' clocks interleave slightly in seq order) is treated as equal to it; a
    // value equal to the one in force adds nothing.
    void push(int64_t ts, uint64_t value); // inline below: called at nearly every event
    uint64_t valueAt(int64_t ts) const;        // the step value at ts (0 before the first point)
    uint64_t maxIn(int64_t t0, int64_t t1) const; // max value in force anywhere in [t0, t1)
    uint64_t max() const;                      // max over all points (0 when empty)
    // Indices of the first minimum and first maximum among points [i, j) (i < j).
    void minMaxIndex(size_t i, size_t j, size_t& lo, size_t& hi) const;
    void shrinkToFit(); // after the last push, return growth slack to the allocator
    // Room for n points in one allocation per column (huge pages where available), for a
    // builder that knows an upper bound: no copies while growing, and the unwritten rest of
    // the reservation is never faulted in.
    void reserve(size_t n);

private:
    void pushSlow(int64_t ts, uint64_t value);
    void refreshLastBlock();
};

inline void Series::push(int64_t ts, uint64_t value) {
    // Fast path: a later time, a new value, inside the current (summarised) block.
    const size_t n = t.size();
    if (n != 0 && ts > t.back()) [[likely]] {
        if (v.back() == value) return;
        if (n % kBlock != 0 && blocks.size() == n / kBlock + 1) {
            t.push_back(ts);
            v.push_back(value);
            Block& b = blocks.back();
            const auto idx = static_cast<uint32_t>(n);
            if (value < b.minV) {
                b.minV = value;
                b.minI = idx;
            } else if (value > b.maxV) {
                b.maxV = value;
                b.maxI = idx;
            }
            return;
        }
    }
    pushSlow(ts, value);
}

struct Point {
    int64_t t;
    uint64_t v;
};

// At most maxPoints points covering [t0, t1): the value in force at t0 (at t0), then [t0, t1) is
// cut into downsampleBuckets(maxPoints) equal buckets (the last may be shorter) and each bucket
// contributes the points holding its min and its max, in time order (one point when they are
// the same). A peak inside a bucket is therefore never hidden. maxPoints below 4 counts as 4.
// Cost: O(points in range); empty result when t1 <= t0 or the series is empty.
std::vector<Point> downsample(const Series& s, int64_t t0, int64_t t1, size_t maxPoints);
size_t downsampleBuckets(size_t maxPoints); // (max(maxPoints, 4) - 1) / 2

struct Allocation {
    uint64_t ptr = 0;
    uint64_t size = 0;
    uint64_t pool = 0;
    uint64_t allocStream = 0;
    uint64_t freeStream = 0;   // 0 while live
    int64_t allocTsNs = 0;
    int64_t freeTsNs = kStillLive;
    uint64_t allocSeq = 0;
    uint64_t freeSeq = 0;
    uint32_t tid = 0;
    int16_t device = -1;
    uint8_t api = 0;           // AllocApi
    bool live() const { return freeTsNs == kStillLive; }
};

struct FailedAllocation {
    int64_t tsNs = 0;
    uint64_t seq = 0;
    uint64_t size = 0;
    uint64_t stream = 0;
    uint64_t pool = 0;
    int32_t result = 0;
};

// A point event drawn as a marker: synchronizes, trims, implicit releases, attribute and knob
// changes, failed allocations, pool create/destroy.
struct Marker {
    int64_t tsNs = 0;
    uint64_t seq = 0;
    EventKind kind = EventKind::StreamSynchronize;
    uint64_t stream = 0; // 0 when not stream-bound
    uint64_t pool = 0;   // 0 when not pool-bound
    uint64_t value = 0;  // the event's size field (new value, bytes kept...)
};

// cudaEventRecord on one stream, later waited on by another: drawn as an arrow between lanes.
struct WaitEdge {
    uint64_t event = 0;
    uint64_t fromStream = 0;
    uint64_t toStream = 0;
    int64_t recordTsNs = 0;
    int64_t waitTsNs = 0;
};

struct PoolTimeline {
    PoolInfo info;
    Series reserved;        // exact at events, plus periodic samples
    Series used;
    Series releaseThreshold; // steps at each observed/changed value
    // The three reuse policies (0 = off, 1 = on) as steps, like releaseThreshold. A pool
    // created in the trace starts with the driver's defaults (all on); for a pool that existed
    // before recording, the value before the first change is known only from its old value.
    Series reuseFollowEventDependencies;
    Series reuseAllowOpportunistic;
    Series reuseAllowInternalDependencies;
    // The series of a settable attribute (ReleaseThreshold or a reuse policy), else nullptr.
    const Series* attributeSeries(PoolAttr a) const;
    Series* attributeSeries(PoolAttr a) {
        return const_cast<Series*>(static_cast<const PoolTimeline*>(this)->attributeSeries(a));
    }
    uint64_t peakReserved = 0;
    int64_t peakReservedTsNs = 0;
    uint64_t peakUsed = 0;
    int64_t peakUsedTsNs = 0;
    // Bytes of the allocations seen in this trace and not yet freed, at its highest. Equals
    // peakUsed when every allocation was recorded; the only "used" figure when the collector
    // read no watermarks (and for pool 0, the bucket of allocations whose pool is unknown).
    uint64_t peakLive = 0;
    int64_t peakLiveTsNs = 0;
    uint64_t bytesAllocated = 0;
    uint64_t allocCount = 0;
    uint64_t freeCount = 0;
    uint64_t failedCount = 0;
    uint64_t liveAtEndBytes = 0;
    uint64_t liveAtEndCount = 0;
};

struct StreamTimeline {
    StreamInfo info;
    std::vector<uint32_t> allocations; // indices into Timeline::allocations, by alloc time
    Series liveBytes;                  // bytes allocated on this stream and not yet freed
    uint64_t peakLive = 0;
    int64_t peakLiveTsNs = 0;
    uint64_t bytesAllocated = 0;
    uint64_t allocCount = 0;
    uint64_t freeCount = 0;     // frees issued on this stream that matched an allocation
    uint64_t failedCount = 0;
    uint64_t liveAtEndBytes = 0;
    uint64_t liveAtEndCount = 0;
};

struct Timeline {
    int64_t t0 = 0; // first and last timestamps seen (events and samples)
    int64_t t1 = 0;
    uint64_t eventCount = 0;  // events fed to the builder, samples excluded
    uint64_t sampleCount = 0;
    // Frees whose pointer had no live allocation: memory allocated before recording started,
    // by cudaMalloc, or whose alloc event was dropped. Counted, not drawn.
    uint64_t unmatchedFrees = 0;
    // Allocs returning a pointer that was still live here: its free was never seen (dropped
    // events). The older allocation is closed at the new alloc's time (freeSeq stays 0).
    uint64_t reusedWithoutFree = 0;
    std::vector<DeviceInfo> devices;
    std::vector<PoolTimeline> pools;     // sorted by device, then handle
    std::vector<StreamTimeline> streams; // sorted by device, then handle
    std::vector<Allocation> allocations; // by alloc seq
    std::vector<FailedAllocation> failed;
    std::vector<Marker> markers;         // by seq
    std::vector<WaitEdge> edges;         // by wait time
    std::vector<uint32_t> leaks;         // indices of allocations live at the end

    // A partial timeline is one buildTimeline hands out while it is still reading the trace
    // (BuildOptions::onPartial): exactly what building its first eventCount events (and the
    // samples up to loadedUntilNs) gives, except that t0/t1 are already the whole trace's range
    // (from the trace summary) so a view's time axis need not move when the rest arrives.
    // Nothing after loadedUntilNs is known yet: series hold their last value from there on,
    // allocations live at that time look live, and `leaks`/liveAtEnd* describe that instant.
    // A complete timeline has partial == false, loadedUntilNs == t1, totalEvents == eventCount.
    bool partial = false;
    int64_t loadedUntilNs = 0;
    uint64_t totalEvents = 0; // events in the whole trace, as far as known
    double loadedFraction() const {
        return partial && totalEvents ? double(eventCount) / double(totalEvents) : 1.0;
    }

    const PoolTimeline* pool(uint64_t handle) const;
    const StreamTimeline* stream(uint64_t handle) const;
};

// Incremental builder: feed events in seq order (from a file or a live socket), then take a
// snapshot. Entities may be given up front; unseen pools/streams are created on first sight.
class TimelineBuilder {
public:
    TimelineBuilder();
    ~TimelineBuilder();
    void setEntities(std::vector<DeviceInfo> devices, std::vector<PoolInfo> pools,
                     std::vector<StreamInfo> streams);
    // Capacity hint (e.g. from TraceSummary::countsByKind) so 10M-event traces do not pay for
    // vector doubling twice over.
    void reserve(uint64_t allocs, uint64_t events);
    // Per-kind counts of what is coming (TraceSummary::countsByKind, with the samples' count
    // under EventKind::Sample): reserves every big vector for the bound these counts give, so
    // none is copied while growing (and finish() then leaves their unused, untouched tail).
    void reserve(const std::map<EventKind, uint64_t>& countsByKind);
    void add(const Event& e); // any kind, Sample included
    std::shared_ptr<const Timeline> snapshot() const; // copies; cheap enough for live refresh
    std::shared_ptr<const Timeline> finish();          // moves out; the builder is then empty
    // snapshot(), marked partial (Timeline::partial) with its range widened to [t0, t1], the
    // whole trace's, of which totalEvents events are coming.
    std::shared_ptr<const Timeline> partialSnapshot(int64_t t0, int64_t t1,
                                                    uint64_t totalEvents) const;

private:
    struct Impl;
    std::unique_ptr<Impl> d_;
};

struct BuildOptions {
    // Gets (done, total) events after every chunk (a few thousand events).
    std::function<void(uint64_t, uint64_t)> progress;
    // Setting *cancel makes buildTimeline return ErrorCode::Cancelled within a chunk.
    const std::atomic<bool>* cancel = nullptr;
    // Progressive loading: called once, on the building thread, with a partial timeline (see
    // Timeline::partial) as soon as partialAfter has passed since the first events were read,
    // or partialAfterEvents events are in when that is not 0, whichever comes first (checked
    // between chunks). Taking it early keeps it small: it is a copy of what is built so far.
    // Not called when the whole trace is read before then. The build waits for the callback.
    std::function<void(std::shared_ptr<const Timeline>)> onPartial;
    std::chrono::milliseconds partialAfter{300};
    uint64_t partialAfterEvents = 0;
    // Read and decode chunks on a second thread while this one builds (same result either way).
    // Default: on with 4 or more hardware threads. On the 2-vCPU development VM it did not pay:
    // the same instructions, 5-10 % more cycles (decoded events cross cores), and no overlap
    // while other work keeps both vCPUs busy (docs/PERFORMANCE.md).
    bool readAhead = defaultReadAhead();
    static bool defaultReadAhead();
};

// Reads the whole trace through a builder: one pass in seq order, samples merged in by time.
Result<std::shared_ptr<const Timeline>> buildTimeline(const TraceReader& reader,
                                                      const BuildOptions& options);
// The same with only progress and cancel.
Result<std::shared_ptr<const Timeline>>
buildTimeline(const TraceReader& reader,
              const std::function<void(uint64_t, uint64_t)>& progress = {},
              const std::atomic<bool>* cancel = nullptr);

} // namespace poolscope
