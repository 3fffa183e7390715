#pragma once
// The report model: what `poolscope report` prints and scripts read as JSON. Computed from a
// finished Timeline (plus the trace's process facts), so the CLI, the GUI's summary panel and
// tests agree. Plain data; rendering lives in reportToText / reportToJson.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "poolscope/Entities.h"
#include "poolscope/Timeline.h"
#include "poolscope/view/EntityNames.h"

namespace poolscope {

struct PoolReport {
    PoolInfo info;
    bool hasWatermarks = false;     // reserved/used were read (at events or by samples)
    uint64_t peakReserved = 0;
    int64_t peakReservedTsNs = 0;
    uint64_t usedAtPeakReserved = 0; // used in force when reserved peaked
    // The headline: memory the pool held but the program was not using when reserved peaked.
    uint64_t idleAtPeak = 0;         // peakReserved - usedAtPeakReserved
    uint64_t maxIdle = 0;            // largest reserved - used at any time
    int64_t maxIdleTsNs = 0;
    uint64_t peakUsed = 0;
    int64_t peakUsedTsNs = 0;
    uint64_t peakLive = 0;           // from the allocations seen (see PoolTimeline::peakLive)
    uint64_t bytesAllocated = 0;
    uint64_t allocCount = 0;
    uint64_t freeCount = 0;
    uint64_t failedCount = 0;
    uint64_t liveAtEndBytes = 0;
    uint64_t liveAtEndCount = 0;
    uint64_t finalReserved = 0;
    uint64_t finalUsed = 0;
    bool thresholdKnown = false;
    uint64_t releaseThreshold = 0;   // the last value seen
    uint64_t thresholdChanges = 0;
    // The reuse policies at the end (1 on, 0 off, -1 unknown: never set and not read from the
    // driver, as in traces from before pool_initial_attributes).
    int8_t reuseFollowEventDependencies = -1;
    int8_t reuseAllowOpportunistic = -1;
    int8_t reuseAllowInternalDependencies = -1;
    // Idle bytes (reserved - used) averaged over the time the pool's watermarks were known.
    uint64_t meanIdle = 0;
    // Fragmentation (analysis/Fragmentation.h): allocations that grew the pool or failed, and of
    // them those made while at least their size was idle, and while it was idle even without
    // other streams' pending frees (the fragmentation signature).
    uint64_t growths = 0, growthsWhileIdle = 0, fragmentedGrowths = 0;
    uint64_t failuresWhileIdle = 0, fragmentedFailures = 0;
    std::vector<PoolAccess> access; // cudaMemPoolSetAccess: other locations' access (Timeline)
};

struct StreamReport {
    StreamInfo info;
    uint64_t allocCount = 0;
    uint64_t bytesAllocated = 0;
    uint64_t freeCount = 0;
    uint64_t crossStreamFrees = 0; // allocations made here and freed on another stream
    uint64_t failedCount = 0;
    uint64_t peakLive = 0;
    int64_t peakLiveTsNs = 0;
    uint64_t liveAtEndBytes = 0;
    uint64_t liveAtEndCount = 0;
    // Freed here in stream order but not yet reusable by other streams (analysis/PendingFrees.h)
    uint64_t peakPendingFree = 0;
    int64_t peakPendingFreeTsNs = 0;
};

// Device memory outside any pool on one device (cudaMalloc & co., issue #18), beside the pools'
// reserved bytes on the same device.
struct OutsideReport {
    int device = -1;
    uint64_t peakBytes = 0;       // cudaMalloc / cudaMallocPitch bytes live at once, at most
    int64_t peakTsNs = 0;
    uint64_t liveAtEndBytes = 0;
    uint64_t managedPeakBytes = 0;
    uint64_t allocCount = 0, freeCount = 0, failedCount = 0;
    uint64_t syncFrees = 0;       // cudaFree calls that synchronized the device
    uint64_t syncCallNs = 0;      // the time those calls took, where measured
    uint64_t poolsPeakReserved = 0; // the highest sum of this device's pools' reserved bytes
    // The highest sum of both at one time: what the process held on the device.
    uint64_t combinedPeak = 0;
    int64_t combinedPeakTsNs = 0;
};

struct PinnedReport {
    uint64_t allocatedPeak = 0, registeredPeak = 0, totalPeak = 0;
    int64_t totalPeakTsNs = 0;
    uint64_t allocatedAtEnd = 0, registeredAtEnd = 0;
    uint64_t allocCount = 0, freeCount = 0, registerCount = 0, unregisterCount = 0;
    uint64_t failedCount = 0;
    uint64_t allocatedByFlags[8] = {}; // index: portable 1 | mapped 2 | write-combined 4
    uint64_t allocsByFlags[8] = {};
    bool any() const { return allocCount + registerCount + failedCount != 0; }
};

struct Report {
    std::string tracePath;
    ProcessInfo process;
    std::map<std::string, std::string> meta;
    int64_t t0 = 0;
    int64_t t1 = 0;
    uint64_t eventCount = 0;
    uint64_t sampleCount = 0;
    uint64_t unmatchedFrees = 0;
    uint64_t reusedWithoutFree = 0;
    uint64_t waitEdges = 0;
    uint64_t syncCount = 0; // stream, event and context synchronizes
    uint64_t implicitReleases = 0;
    uint64_t trims = 0;
    std::vector<DeviceInfo> devices;
    std::vector<PoolReport> pools;     // Timeline order: device, then handle
    // Several GPUs (issue #19): each device's pools together, and peer copies per direction.
    std::vector<DeviceTotals> deviceTotals;
    std::vector<PeerCopyTotal> peerCopies;
    uint64_t peerAccessGrants = 0;     // cudaMemPoolSetAccess descriptors recorded
    std::vector<StreamReport> streams;
    uint64_t leakCount = 0;            // allocations live at the end
    uint64_t leakBytes = 0;
    std::vector<Allocation> topLeaks;  // largest first, at most topN
    uint64_t failedCount = 0;
    std::vector<FailedAllocation> failed; // first topN in time order
    std::vector<DropGap> dropGaps;     // where the collector lost events (Timeline::dropGaps)
    // Stream-order hazards (analysis/StreamHazards.h): all counted, the first topN listed.
    uint64_t unorderedFrees = 0;
    uint64_t unorderedReuses = 0;
    bool hazardsTruncated = false; // StreamHazards::truncated
    bool freedForgotten = false;   // StreamHazards::freedForgotten
    std::vector<StreamHazard> hazards;
    // Growths and failures with the fragmentation signature, the first topN (all pools).
    std::vector<PoolGrowth> fragmented;
    // Beyond the pools (issue #18).
    std::vector<OutsideReport> outside; // by device; empty when nothing was allocated outside
    uint64_t deviceSyncs = 0;           // cudaFree calls that synchronized a device
    // Of those, made while stream-ordered allocations were live (the pool workload was running).
    uint64_t deviceSyncsDuringPoolWork = 0;
    PinnedReport pinned;
    uint64_t unmatchedMemReleases = 0;
    // Events further out of time order than the streaming report (TraceReport.h) holds points
    // for, which it could only place approximately in the figures it computes over time; 0 from
    // a Timeline.
    uint64_t outOfOrderEvents = 0;
    std::vector<std::string> findings; // one-line statements for a person, most important first
    view::EntityNames names;           // the window's names for pools and streams
};

struct ReportOptions {
    size_t topN = 10;
};

// Context facts (path, process, meta) are copied as given; pass empty ones for a live timeline.
Report buildReport(const Timeline& timeline, const ReportOptions& options = {},
                   std::string tracePath = {}, ProcessInfo process = {},
                   std::map<std::string, std::string> meta = {});

namespace detail {
// The findings a Report's figures call for (buildReport adds them; so does reportTrace).
void addFindings(Report& report);
// Drops the pool "0x0" that only a failed driver call without a pool made known (PyTorch's
// cuMemAllocAsync that the runtime retried after binding a context): a row of nothing under a
// raw handle. A pool 0 that holds, allocated, failed or read anything stays. Both reports call
// it before addFindings.
void dropEmptyUnknownPool(Report& report);
} // namespace detail

// Human text for a terminal: aligned tables, human units, about one screen.
std::string reportToText(const Report& report);
// JSON for scripts: bytes and times as integers (times in ns since the trace's first event as
// "*_ns", plus absolute "t0_ns"), handles as "0x..." strings.
std::string reportToJson(const Report& report, int indent = 2);

// Handle formatting shared by the text and JSON renderers and the CLI.
std::string formatHandle(uint64_t handle);

} // namespace poolscope
