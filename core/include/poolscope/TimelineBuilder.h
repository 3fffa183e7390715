#pragma once
// Building a Timeline: incrementally from events in seq order (a live session), or from a whole
// trace file with progress, cancel and a partial timeline early (progressive loading).

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
#include "poolscope/Timeline.h"

namespace poolscope {

class TraceReader;
struct TraceDamage;
namespace replay {
class Observer;
class Replay;
} // namespace replay

// Incremental builder: feed events in seq order (from a file or a live socket), then take a
// snapshot. Entities may be given up front; unseen pools/streams are created on first sight.
class TimelineBuilder {
public:
    TimelineBuilder();
    ~TimelineBuilder();
    void setEntities(std::vector<DeviceInfo> devices, std::vector<PoolInfo> pools,
                     std::vector<StreamInfo> streams);
    // A pool learnt after the events began (a live session asks the target about pools its
    // events name): its kind and device replace an unknown kind, never a known one.
    void declarePool(const PoolInfo& info);
    // A device learnt after the events began (a live target learns a device at its first use
    // there): adds it, or fills a name and memory size that were not known.
    void declareDevice(const DeviceInfo& info);
    // Settable attributes as the driver reported them when the pool was first seen
    // (TraceReader::poolAttributes, a live target's pool listing): the views then know them
    // from the start of the trace (or the pool's creation) instead of at their first change.
    // Pools not declared or seen yet are skipped; values an event already set stay.
    void declarePoolAttributes(const std::vector<PoolAttributeValue>& values);
    // Where the collector lost events (TraceReader::dropGaps), carried into the timeline.
    void setDropGaps(std::vector<DropGap> gaps);
    // Capacity hint (e.g. from TraceSummary::countsByKind) so 10M-event traces do not pay for
    // vector doubling twice over.
    void reserve(uint64_t allocs, uint64_t events);
    // Per-kind counts of what is coming (TraceSummary::countsByKind, with the samples' count
    // under EventKind::Sample): reserves every big vector for the bound these counts give, so
    // none is copied while growing (and finish() then leaves their unused, untouched tail).
    void reserve(const std::map<EventKind, uint64_t>& countsByKind);
    void add(const Event& e); // any kind, Sample included
    // Range builds (TimelineRange.h). warmStart: a pool's reserved/used as they were before the
    // first event given, from ts on, without counting a sample; capLater: whether a later
    // sample's driver high watermark may still lower that value (as it would in a whole build).
    void warmStart(uint64_t pool, int16_t device, int64_t ts, uint64_t reserved, uint64_t used,
                   bool capLater);
    // An Alloc standing for a block allocated before the events given and freed among them:
    // drawn from its time, flagged Allocation::beforeLoaded, not counted as an event nor in the
    // allocated totals.
    void addAllocatedBefore(const Event& alloc);
    // The first sample after the events given, not added: only its driver high watermark lowers
    // the used points since the pool's last such sample, as it would in a whole build.
    void capBySampleAfter(const Event& sample);
    // Another analysis follows the builder's replay (a live session's what-if tape). Not owned;
    // must outlive the builder or be removed with unsubscribe.
    void subscribe(replay::Observer* o, uint32_t kindMask);
    void unsubscribe(replay::Observer* o);
    const replay::Replay& replay() const;
    std::shared_ptr<const Timeline> snapshot() const; // copies; cheap enough for live refresh
    std::shared_ptr<const Timeline> finish();          // moves out; the builder is then empty
    // snapshot(), marked partial (Timeline::partial) with its range widened to [t0, t1], the
    // whole trace's, of which totalEvents events are coming.
    std::shared_ptr<const Timeline> partialSnapshot(int64_t t0, int64_t t1,
                                                    uint64_t totalEvents) const;
    // finish(), marked partial the same way: for a build that stops before the end of the
    // trace (BuildOptions::maxEvents). The builder is then empty.
    std::shared_ptr<const Timeline> finishPartial(int64_t t0, int64_t t1, uint64_t totalEvents);

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
    // Times are CLOCK_MONOTONIC nanoseconds: none is negative, nor 2^62 or later (146 years
    // after boot). A damaged trace's can be anything (a sample at INT64_MIN), and every later
    // t - t0, duration and pixel position of the window overflowed on it (issue #12). When set,
    // buildTimeline keeps every time in [0, kLatestPlausibleNs): a sample outside is left out,
    // an event outside is moved to the nearer end (the replay still needs it), and each kind of
    // change is added here once, with its count, for the user to see. An undamaged trace is read
    // exactly as without it.
    std::vector<TraceDamage>* boundTimes = nullptr;
    // When not 0: stop reading once this many events are in (checked between chunks, so a few
    // thousand more may be) and return what was built as a partial timeline with
    // Timeline::limited set, instead of holding every event of a trace larger than the caller
    // can afford (the window: its memory, ~60 bytes an event). Samples are merged up to the
    // last event read.
    uint64_t maxEvents = 0;
    static constexpr int64_t kLatestPlausibleNs = int64_t{1} << 62;
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
