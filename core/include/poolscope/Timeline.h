#pragma once
// What a trace means, as every view draws it: per pool and stream series, allocations with their
// lifetimes, markers and wait edges. Built by TimelineBuilder (TimelineBuilder.h) from the
// allocator replay (replay/Replay.h), so the CLI report, the GUI and tests share one truth.
// Results are immutable once built; the GUI keeps a shared_ptr<const Timeline>.

#include <cstdint>
#include <utility>
#include <vector>

#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/Series.h"
#include "poolscope/analysis/Fragmentation.h"
#include "poolscope/analysis/PendingFrees.h"
#include "poolscope/analysis/StreamHazards.h"

namespace poolscope {

inline constexpr int64_t kStillLive = INT64_MAX; // Allocation::freeTsNs of a never-freed block

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
    uint32_t site = 0;         // call site (Stacks.h), 0 = none recorded
    uint32_t freeSite = 0;     // the free's call site (record --stacks-at-free), 0 = none
    // A range build (TimelineRange.h): the block was allocated before the loaded range and freed
    // inside it. Its alloc is not loaded: allocTsNs is the range's left edge, allocSeq 0, and
    // allocStream the stream it was freed on.
    bool beforeLoaded = false;
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
// changes, failed allocations, pool create/destroy, pool access changes and peer copies.
struct Marker {
    int64_t tsNs = 0;
    uint64_t seq = 0;
    EventKind kind = EventKind::StreamSynchronize;
    // Attribute and knob markers: the PoolAttr, or the KnobAction. PoolSetAccess: the access
    // flags. PeerCopy: the two devices as PeerCopyFields stores them (EventFields.h).
    uint16_t attr = 0;
    uint64_t stream = 0; // 0 when not stream-bound
    uint64_t pool = 0;   // 0 when not pool-bound
    // The kind's number: a failed alloc's bytes, a create's max size, an attribute's new value,
    // a knob's read-back (a trim's: reserved after), a trim's bytes to keep, a release's pool
    // size after, a peer copy's bytes; PoolSetAccess: the device given access (+1; 0 = not a
    // device).
    uint64_t value = 0;
};

// What one location may do with a pool's memory, as the last cudaMemPoolSetAccess for it said
// (the pool's own device always has read-write access and appears only if the call named it).
struct PoolAccess {
    int device = -1;          // -1: a location that is not a device (locationType says which)
    uint8_t locationType = 0; // CUmemLocationType; 0 = not recorded (older traces)
    uint32_t flags = 0;       // CUmemAccess_flags: 0 none, 1 read, 3 read-write
    int64_t tsNs = 0;
};
// A successful PoolSetAccess event (one descriptor) applied to its pool's list: the latest grant
// per location, in order of first grant. The same way by the timeline and the streaming report.
void applyPoolAccess(std::vector<PoolAccess>& access, const Event& e);

// Peer copies (cudaMemcpyPeer(Async)) from one device to another, totalled per direction.
struct PeerCopyTotal {
    int srcDevice = -1;
    int dstDevice = -1;
    uint64_t count = 0;
    uint64_t bytes = 0;
    uint64_t failedCount = 0;
    void add(const Event& e); // a PeerCopy event of this direction
};

// One device's pools together (issue #19): each peak is the highest sum over the device's pools
// at one instant (not the sum of the pools' own peaks, which may come at different times).
struct DeviceTotals {
    int device = -1;
    uint32_t poolCount = 0;
    uint64_t peakReserved = 0;
    int64_t peakReservedTsNs = 0;
    uint64_t peakUsed = 0;
    int64_t peakUsedTsNs = 0;
    uint64_t finalReserved = 0;
    uint64_t finalUsed = 0;
    uint64_t bytesAllocated = 0;
    uint64_t allocCount = 0;
    uint64_t freeCount = 0;
    uint64_t failedCount = 0;
    uint64_t liveAtEndBytes = 0;
    uint64_t liveAtEndCount = 0;

    // One more pool's counts (a PoolTimeline, or a PoolReport in the streaming report).
    template <class Pool>
    void addPoolCounts(const Pool& p) {
        poolCount++;
        bytesAllocated += p.bytesAllocated;
        allocCount += p.allocCount;
        freeCount += p.freeCount;
        failedCount += p.failedCount;
        liveAtEndBytes += p.liveAtEndBytes;
        liveAtEndCount += p.liveAtEndCount;
    }
};

// cudaEventRecord on one stream, later waited on by another: drawn as an arrow between lanes.
struct WaitEdge {
    uint64_t event = 0;
    uint64_t fromStream = 0;
    uint64_t toStream = 0;
    int64_t recordTsNs = 0;
    int64_t waitTsNs = 0;
};

// Device memory outside any pool on one device (cudaMalloc, cudaMallocPitch, cudaMallocManaged
// through the driver's cuMemAlloc family; issue #18).
struct OutsideTimeline {
    int device = -1;         // -1: calls whose device was not known
    Series liveBytes;        // cuMemAlloc / cuMemAllocPitch bytes not yet freed
    Series managedBytes;     // cuMemAllocManaged bytes not yet freed (may live on the host)
    uint64_t peakBytes = 0;
    int64_t peakTsNs = 0;
    uint64_t managedPeakBytes = 0;
    uint64_t allocCount = 0;
    uint64_t freeCount = 0;
    uint64_t failedCount = 0;
    uint64_t liveAtEndBytes = 0;
    // cudaFree calls on this device that synchronized it, and the time they took where measured.
    uint64_t syncFrees = 0;
    uint64_t syncCallNs = 0;
    // What the process held on the device: liveBytes plus the reserved bytes of the device's
    // pools, as one series (so "the pools are small but the GPU is full" is one curve), and its
    // peak; poolsReservedPeak the highest sum of the pools' reserved alone.
    Series withPools;
    uint64_t withPoolsPeak = 0;
    int64_t withPoolsPeakTsNs = 0;
    uint64_t poolsReservedPeak = 0;
};

// A cudaFree / cuMemFree of memory outside the pools: the whole device waits for every stream
// to drain. callNs is how long the call took (enter to exit), 0 when not measured.
struct DeviceSync {
    int64_t tsNs = 0;   // when the call returned
    uint64_t seq = 0;
    int device = -1;
    uint64_t ptr = 0;
    uint64_t bytes = 0; // 0 when the block's allocation is not in the trace
    int64_t callNs = 0;
};

// Pinned (page-locked) host memory of the process.
// Pinned host memory calls counted, the same way by the timeline and the streaming report.
struct PinnedCounts {
    uint64_t allocCount = 0, freeCount = 0, registerCount = 0, unregisterCount = 0;
    uint64_t failedCount = 0;
    // Bytes per flag combination of the allocations (index: the CU_MEMHOSTALLOC_* bits 0..7).
    uint64_t allocatedByFlags[8] = {};
    uint64_t allocsByFlags[8] = {};
    // Counts a HostAlloc or HostRegister; false when it failed (nothing was pinned).
    bool countPin(const Event& e);
};

struct PinnedTimeline : PinnedCounts {
    Series allocated;  // cudaHostAlloc / cudaMallocHost (cuMemHostAlloc, cuMemAllocHost)
    Series registered; // cudaHostRegister (cuMemHostRegister)
    Series total;      // the two together
    uint64_t allocatedPeak = 0;
    uint64_t registeredPeak = 0;
    uint64_t totalPeak = 0;
    int64_t totalPeakTsNs = 0;
    uint64_t allocatedAtEnd = 0, registeredAtEnd = 0;
    bool any() const { return allocCount + registerCount + failedCount != 0; }
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
    // The driver's own high watermarks (ReservedMemHigh / UsedMemHigh), the highest any sample
    // carried; 0 when no sample had them. Where they are known the peaks above equal them, and
    // no point of `used` lies above the high watermark of the next sample (a used value derived
    // in seq order can, when two threads race on the pool).
    uint64_t driverReservedHigh = 0;
    uint64_t driverUsedHigh = 0;
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
    // Access granted to other locations, the latest per location, in order of first grant.
    std::vector<PoolAccess> access;
    // A range build (TimelineRange.h): bytes in use at the loaded range's start (its `used`
    // there) that no loaded allocation accounts for: blocks allocated before the range and not
    // freed inside it. 0 for a build from the trace's beginning.
    uint64_t unaccountedAtLoadStart = 0;
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
    // Each device's pools together, by device (devices with at least one pool).
    std::vector<DeviceTotals> deviceTotals;
    const DeviceTotals* totalsOf(int device) const;
    // Peer copies per (source, destination) device pair, sorted by the pair.
    std::vector<PeerCopyTotal> peerCopies;
    std::vector<StreamTimeline> streams; // sorted by device, then handle
    std::vector<Allocation> allocations; // by alloc seq
    std::vector<FailedAllocation> failed;
    // Driver calls the CUDA runtime retried itself (the replay's Fact::retry: a 201 followed by
    // the same request succeeding on the same thread within kRetryWindowNs). The program never
    // saw a failure: kept here, not in `failed`, not drawn, not counted as a failure.
    std::vector<FailedAllocation> retried;
    static constexpr int64_t kRetryWindowNs = replay::kRetryWindowNs;
    // Two threads allocating from one pool within kRaceWindowNs of each other: the driver may
    // have seen their calls in either order, so `used` between two driver reads is not known
    // there. racingThreads(pool, t) gives two such threads near t, or {0, 0}.
    static constexpr int64_t kRaceWindowNs = 20'000;
    std::pair<uint32_t, uint32_t> racingThreads(uint64_t pool, int64_t t) const;
    std::vector<Marker> markers;         // by seq
    // Memory outside the pools (issue #18): per device (sorted by device), cudaFree's device-wide
    // synchronizations (by seq), pinned host memory, and releases that matched nothing live
    // (memory allocated before recording, or whose allocation was dropped).
    std::vector<OutsideTimeline> outside;
    std::vector<DeviceSync> deviceSyncs;
    PinnedTimeline pinned;
    uint64_t unmatchedMemReleases = 0;
    const OutsideTimeline* outsideOf(int device) const;
    std::vector<WaitEdge> edges;         // by wait time
    std::vector<uint32_t> leaks;         // indices of allocations live at the end
    PendingFrees pendingFrees;           // per stream, see analysis/PendingFrees.h
    // Where the collector lost events (its rings were full), by time: the window marks them.
    std::vector<DropGap> dropGaps;
    uint64_t droppedInGaps() const {
        uint64_t n = 0;
        for (const DropGap& g : dropGaps) n = g.count > UINT64_MAX - n ? UINT64_MAX : n + g.count;
        return n;
    }
    StreamHazards hazards;               // analysis/StreamHazards.h
    Fragmentation fragmentation;         // analysis/Fragmentation.h

    // A partial timeline is one buildTimeline hands out while it is still reading the trace
    // (BuildOptions::onPartial): exactly what building its first eventCount events (and the
    // samples up to loadedUntilNs) gives, except that t0/t1 are already the whole trace's range
    // (from the trace summary) so a view's time axis need not move when the rest arrives.
    // Nothing after loadedUntilNs is known yet: series hold their last value from there on,
    // allocations live at that time look live, and `leaks`/liveAtEnd* describe that instant.
    // A complete timeline has partial == false, loadedUntilNs == t1, totalEvents == eventCount.
    // The loaded range is [loadedFromNs, loadedUntilNs]: loadedFromNs == t0 for every build from
    // the trace's beginning; a range build (TimelineRange.h) loads a stretch in the middle,
    // loadedFromNs > t0, and is partial and limited. Inside the loaded range its series and the
    // allocations that begin there are the whole trace's; outside it nothing is known.
    bool partial = false;
    int64_t loadedFromNs = 0;
    int64_t loadedUntilNs = 0;
    bool isRange() const { return loadedFromNs > t0; }
    bool loadedAt(int64_t t) const { return t >= loadedFromNs && t <= loadedUntilNs; }
    uint64_t totalEvents = 0; // events in the whole trace, as far as known
    // The build stopped at BuildOptions::maxEvents: a partial timeline that stays partial (the
    // rest of the trace is not being read), not one handed out while loading.
    bool limited = false;
    double loadedFraction() const {
        return partial && totalEvents ? double(eventCount) / double(totalEvents) : 1.0;
    }

    const PoolTimeline* pool(uint64_t handle) const;
    const StreamTimeline* stream(uint64_t handle) const;
};

} // namespace poolscope
