#pragma once
// The streaming report's one pass (issue #15, analysis/TraceReport.h): the Timeline builder's
// bookkeeping (core/src/Timeline.cpp) event for event, keeping the figures the Report shows
// instead of series and allocation records. Internal to core.
//
// What needs the finished series walked in time order (largest and mean idle bytes, used bytes
// when reserved peaked, the device-wide sums, whether a stream held memory when a cudaFree
// synchronized the device, the live allocations per call site at a pool's peak) goes through a
// time merge: the series' points (StepTail) and the allocations' begin/end steps are held until
// the frontier, kHorizonNs behind the newest timestamp, has passed them, then applied in time
// order, and questions about an instant (a peak's) are answered once the merge reaches it.

#include <cstdint>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ReplayThread.h"
#include "SiteLedger.h"
#include "StepTail.h"
#include "poolscope/Report.h"
#include "poolscope/analysis/Fragmentation.h"
#include "poolscope/analysis/PendingFrees.h"
#include "poolscope/analysis/StreamHazards.h"
#include "poolscope/interop/Diff.h"
#include "poolscope/replay/Replay.h"

namespace poolscope::detail {

struct PieceAnalyses; // PieceRead.h

// The first n failed allocations in seq order, as the Timeline's `failed` ends up once the
// failures the runtime retried itself have left it. A failure stays retractable until its
// thread's next allocation (Replay's Fact::retry); n settled ones decide the list.
class FirstFailures {
public:
    explicit FirstFailures(size_t n = 1) : n_(n) {}
    void add(const FailedAllocation& f, bool pending);
    void settle(uint64_t seq);
    void retract(uint64_t seq);
    std::vector<FailedAllocation> first() const; // at most n, in seq order

private:
    struct Rec {
        FailedAllocation f;
        bool pending;
    };
    size_t n_;
    size_t settled_ = 0;            // of kept_
    std::map<uint64_t, Rec> kept_;  // by seq: everything up to the n-th settled one
};

// The replay's pools and streams in the order a Timeline lists them (device, then handle).
struct EntityOrder {
    std::vector<uint32_t> pools, streams; // replay indices
};
EntityOrder entityOrder(const replay::Replay& replay);

// The names a Timeline would give the trace's lanes. EntityNames numbers them from only the
// entities, whether each pool allocated or reserved (poolCounts[i]: pool i's allocations and
// peak reserved; only zero or not counts), the (pool, stream) pairs that allocated, the streams
// wait edges join and each stream's first failure: a Timeline of just those gives the same names.
view::EntityNames laneNames(const replay::Replay& replay, const EntityOrder& order,
                            const std::vector<DeviceInfo>& devices,
                            const std::vector<std::pair<uint64_t, uint64_t>>& poolCounts,
                            const std::set<std::pair<uint64_t, uint64_t>>& pairs,
                            const std::set<std::pair<uint64_t, uint64_t>>& edgeStreams,
                            const std::unordered_map<uint32_t, FirstFailures>& streamFailed);

class ReportReducer {
public:
    // Events more than this behind the newest timestamp may change the figures computed over
    // time (points are held this long). The recorded samples came up to 47 ms out of order
    // (gpt2); threads race by microseconds.
    static constexpr int64_t kHorizonNs = 1'000'000'000;
    // Points held at once, at most (24 to 32 bytes each, a few MiB): past it the horizon
    // shrinks, halving down to 1 ms while a trace is this dense. A second of a training run
    // recorded at 30 k events/s holds about 45 k; the benchmarks' generator (1.3 M events/s of
    // trace time) gets about 130 ms.
    static constexpr size_t kMaxHeld = size_t{1} << 18;

    ReportReducer(size_t topN, bool sites);
    ReportReducer(const ReportReducer&) = delete;
    ReportReducer& operator=(const ReportReducer&) = delete;

    // Before the first event: the series' points (StepTail), their peaks and the time merge on
    // threads of their own (the same figures: the reading thread hands each chunk's points over
    // as commands, the series' thread keeps them and hands each flush's points to the merge's
    // thread in order; the reading thread, the read's slowest, keeps the counts and the replay).
    // Without threads to be had, on this one.
    void setMergeThread(bool on);
    void setEntities(std::vector<DeviceInfo> devices, const std::vector<PoolInfo>& pools,
                     const std::vector<StreamInfo>& streams);
    // The samples to come, read ahead: their high watermarks cap the `used` points before them.
    void expectSamples(const std::vector<Event>& samples);
    // Events and samples (kind Sample) in the order buildTimeline feeds its builder.
    void add(const Event& e);
    // Between chunks: applies the points the frontier has passed.
    void advance();
    // After the last event: the report's figures (everything but path, process, meta, drop
    // gaps, findings) and, with sites, each pool's call sites at its peak (top n).
    void finish(Report& r, std::vector<analysis::PoolSites>* sites, size_t n);

    replay::Replay& replay() { return replay_; }
    // `poolscope diff`'s facts, gathered from every event too (null: none).
    void setDiffFacts(interop::DiffFacts* facts) { diffFacts_ = facts; }
    // The pending-frees, hazards and fragmentation analyses, taken off this replay for another
    // replay of the same events (another thread's) to drive instead, before the first event and
    // done before finish(). They use nothing of the reducer's, and the block tags they keep
    // (StreamHazard::At::allocation) are not in a Report.
    struct Lent {
        replay::Observer* observer;
        uint32_t kindMask;
        bool heaviest; // the stream hazards: about four times the other two together
    };
    std::vector<Lent> lendAnalyses();
    // Before finish(): the analyses' results read elsewhere (analysesInPieces), reported instead
    // of those of the analyses above (which, lent to a replay that stopped, may be short).
    void useAnalyses(std::shared_ptr<const PieceAnalyses> done);
    // After finish(): a reuse policy recorded off at some time (cmd_report's condition for the
    // advisor).
    bool anyPolicyOff() const;
    // After finish(): the CPU time of the series' and the time merge's threads (0 without them).
    double seriesCpu() const { return series_.cpuSeconds(); }
    double mergeCpu() const { return merger_.cpuSeconds(); }

private:
    // ---- The reading side: the replay and the counts, event by event.
    struct Pool {
        uint64_t peakLive = 0;
        int64_t peakLiveTsNs = 0;
        uint64_t bytesAllocated = 0, allocCount = 0, freeCount = 0, failedCount = 0;
        uint64_t withPointer = 0; // allocations that got a pointer (call sites look at those)
        bool knobPushed[4] = {};  // a point went to the knob's series (StepTail::empty())
        // The last reserved and used handed to the series (each series' back()): an equal one
        // changes nothing there (StepTail::push), so it is not handed over. Unknown once a high
        // watermark capped the used points.
        uint64_t lastReserved = 0, lastUsed = 0;
        bool reservedKnown = false, usedKnown = false;
        std::vector<PoolAccess> access; // applyPoolAccess, as the Timeline keeps it
    };
    struct Stream {
        uint64_t allocCount = 0, bytesAllocated = 0, freeCount = 0, crossStreamFrees = 0;
        uint64_t failedCount = 0, peakLive = 0;
        int64_t peakLiveTsNs = 0;
    };
    struct Outside {
        int device = -1;
        uint64_t peakBytes = 0, managedPeakBytes = 0;
        int64_t peakTsNs = 0;
        uint64_t allocCount = 0, freeCount = 0, failedCount = 0, syncFrees = 0, syncCallNs = 0;
    };

    // ---- The series' side: a chunk's points and questions as commands, applied in order.
    enum class Op : uint8_t {
        NewPool,      // idx: the pool, v: its handle
        Reserved,     // watermarks(): reservedPoint()
        Used,         // watermarks(): the used point
        HighUsed,     // driverHighs(), v: the sample's UsedMemHigh
        HighReserved, // driverHighs(), v: its ReservedMemHigh
        StreamLive,
        OutsideLive,
        Knob,         // site: the knob index; not through the time merge
        Step,         // the call sites' step: v the bytes (int64), site, count
        Ask,          // a device-wide cudaFree's instant
    };
    struct Cmd {
        int64_t t;
        uint64_t v;
        uint32_t idx;
        uint32_t site;
        uint32_t event; // the event's number in its chunk: an event with late points counts once
        Op op;
        int8_t count;
    };
    struct Commands {
        std::vector<Cmd> cmds;
        std::vector<int> poolDevice, outsideDevice; // as the replay knew them at the chunk's end
        size_t streams = 0;
        int64_t t1 = 0; // the newest timestamp so far
        bool anyTime = false;
        bool last = false; // finish(): every point and question due
    };
    // A pool's series and the figures taken from them.
    struct SeriesPool {
        StepTail reserved, used;
        StepTail knobs[4]; // by PoolState::knobIndex
        bool knobZero[4] = {};
        uint64_t peakReserved = 0, peakUsed = 0;
        int64_t peakReservedTsNs = 0, peakUsedTsNs = 0;
        uint64_t handle = 0;
        bool active = false;      // some series holds points
        uint32_t peakVersion = 0; // raised at each new peak reserved: the instant asked about
    };
    struct SeriesLive {
        StepTail live;
        bool active = false;
    };

    // A pool in the time merge (its side alone reads and writes these): reserved and used at
    // the merge's instant, the idle figures, the call sites' ledger.
    struct MergePool {
        uint64_t curReserved = 0, curUsed = 0, gap = 0;
        uint32_t device = replay::kNone; // devices_ index its reserved and used bytes are summed under
        int deviceOrdinal = -1;
        bool seen = false; // a reserved or used point above 0 went into its device's sums
        bool idleTouched = false, stepTouched = false, started = false;
        uint64_t maxIdle = 0;
        int64_t maxIdleTsNs = 0, first = 0, prev = 0;
        long double area = 0;
        uint64_t usedAtPeak = 0;
        uint64_t usedAtZero = 0;  // Series::valueAt(0): the instant of a peak never raised
        // Live bytes of its allocations by time (the call sites' instant without watermarks).
        int64_t stepLive = 0, stepBest = -1, stepAt = 0;
        SiteLedger ledger; // slot 0: at the peak reserved; slot 1: at the most live bytes
    };
    // A device's sums at the merge's instant and their peaks (Timeline's DeviceTotals and
    // OutsideTimeline::withPools: peaks of the sum at one instant, first reached).
    struct Device {
        int device = -1;
        uint64_t pools = 0, outside = 0; // reserved of its pools, live outside them, now
        uint64_t used = 0;               // used of its pools, now
        uint64_t poolsPeak = 0, usedPeak = 0, withPoolsPeak = 0;
        int64_t poolsPeakTsNs = 0, usedPeakTsNs = 0, withPoolsPeakTsNs = 0;
        bool touched = false;
    };
    // A point or step waiting for the time merge.
    enum class Kind : uint8_t { Reserved, Used, StreamLive, OutsideLive, Step };
    struct Entry {
        int64_t t;
        uint64_t v;        // Step: the bytes, as int64
        uint32_t idx;      // pool, stream or outside index
        uint32_t site = 0; // Step
        Kind kind;
        int8_t count = 0;  // Step: +1 at the allocation, -1 at its end
    };
    struct Later {
        bool operator()(const Entry& a, const Entry& b) const { return a.t > b.t; }
    };
    // An instant to answer at: a pool's peak reserved (idx pool) or a device-wide cudaFree.
    struct Question {
        int64_t t;
        uint32_t idx;
        uint32_t version; // PeakQuestion: the pool's peak it asks about
        bool peak;
        bool operator>(const Question& o) const { return t > o.t; }
    };
    // One flush's share of the merge: the points and steps before its frontier (sorted runs),
    // the questions due, asked of the state as the series' side had it then (a peak replaced
    // since is dropped here), and the devices the replay knew the pools and the memory outside
    // them on.
    struct Batch {
        std::vector<Entry> entries;
        std::vector<size_t> runs; // where each sorted run of entries starts, then its end
        std::vector<Question> questions; // in time order
        std::vector<int> poolDevice, outsideDevice;
        size_t streams = 0;
        int64_t frontier = 0;
        bool all = false;
    };
    // A live allocation's fields the replay's block does not carry, by the block's tag.
    struct Slot {
        uint32_t site;
        int16_t device;
        uint8_t api;
    };

    // The reading side.
    void mirror();
    void cmd(Op op, int64_t t, uint64_t v, uint32_t idx, uint32_t site = 0, int8_t count = 0) {
        cmds_.cmds.push_back(Cmd{t, v, idx, site, event_, op, count});
    }
    void watermarks(uint32_t pool, int64_t ts, uint64_t reserved, uint64_t used);
    void reservedPoint(uint32_t pool, int64_t ts, uint64_t reserved);
    void driverHighs(uint32_t pool, const Event& e);
    void knobPoint(uint32_t pool, int k, int64_t ts, uint64_t v);
    void step(int64_t t, uint32_t pool, uint32_t site, int64_t bytes, int8_t count);
    void close(const replay::Block& b, int64_t ts, uint64_t seq, uint64_t freeStream);
    void alloc(const Event& e, const replay::Fact& f, uint32_t tag);
    void failures(const Event& e, const replay::Fact& f);
    void knob(uint32_t pool, const Event& e, const replay::Fact& f);
    void orphan(const replay::Block& b);
    void beyondPool(const Event& e, const replay::Fact& f);
    Outside& outsideAt(uint32_t idx);
    void memSeries(const Event& e, const replay::MemBlock& m);
    void memReleased(const Event& e, const replay::MemBlock& m);
    // The chunk's commands to the series' side (`last`: with every point due).
    void handOver(bool last);
    struct KnobEnd {
        size_t points; // 0: unknown
        uint64_t value;
    };
    KnobEnd knobAtEnd(uint32_t pool, PoolAttr a) const;
    Allocation allocationOf(const replay::Block& b) const;
    void topLeaks(std::vector<Allocation>& leaks) const; // the largest topN, in the report's order

    // The series' side: seriesRun() applies a chunk's commands, then flushes the points the
    // frontier passed, here or on the series' thread (stopped in finish(): its state may then be
    // read).
    void seriesRun(Commands& c);
    SeriesPool& seriesPool(uint32_t pool);
    SeriesLive& seriesLive(std::vector<SeriesLive>& v, uint32_t idx);
    void capAhead(uint32_t pool);
    // A point into a series; merged: its points go through the time merge (not a knob's).
    void push(StepTail& s, int64_t ts, uint64_t v, bool merged = true);
    void poolActive(uint32_t pool);
    void raisePeakReserved(uint32_t pool, int64_t ts, uint64_t reserved);
    void seriesHighUsed(uint32_t pool, int64_t ts, uint64_t usedHigh);
    void liveActive(std::vector<SeriesLive>& v, std::vector<uint32_t>& active, uint32_t idx);
    void ask(int64_t t, uint32_t idx, bool peak);

    // The time merge: flush() on the series' side makes a batch, run() applies it, there or on
    // the merge's thread (merged(): the thread's work is done, its state may be read).
    void flush(int64_t frontier, bool all, const Commands& c);
    void merged();
    void run(Batch& b);
    static void mergeRuns(Batch& b);
    void apply(const Entry& e, const Batch& b);
    void settleTouched(int64_t t);
    void answer(const Batch& b, size_t& next, int64_t upTo, bool all);
    uint32_t deviceIndex(int device);
    Device& poolDevice(uint32_t pool, const Batch& b); // the device the pool's points are summed under

    size_t topN_;
    bool sites_;
    interop::DiffFacts* diffFacts_ = nullptr;
    replay::Replay replay_;
    PendingFreesAnalysis pending_;
    StreamHazardsAnalysis hazards_;
    FragmentationAnalysis fragmentation_;
    std::shared_ptr<const PieceAnalyses> analysesDone_; // useAnalyses
    std::vector<Pool> pools_;       // replay order
    std::vector<Stream> streams_;   // replay order
    std::vector<Outside> outside_;  // replay order, mirrored as the builder does
    std::vector<DeviceInfo> deviceInfo_;

    bool anyTime_ = false;
    int64_t t0_ = 0, t1_ = 0;
    uint64_t eventCount_ = 0, sampleCount_ = 0, unmatchedFrees_ = 0, waitEdges_ = 0;
    uint64_t syncCount_ = 0, implicitReleases_ = 0, trims_ = 0, unmatchedMemReleases_ = 0;
    uint64_t accessGrants_ = 0; // PoolSetAccess events (descriptors)
    std::map<std::pair<int, int>, PeerCopyTotal> peerCopies_; // by (source, destination)
    struct PinnedAgg : PinnedCounts {
        uint64_t allocatedPeak = 0, registeredPeak = 0, totalPeak = 0;
        int64_t totalPeakTsNs = 0;
    } pinned_;

    // Live allocations' slots (tag = index), reused once freed.
    std::vector<Slot> slots_;
    std::vector<uint32_t> freeSlots_;
    // Blocks a pointer import took over: the Timeline never ends their allocation.
    uint64_t orphanCount_ = 0, orphanBytes_ = 0;
    std::vector<Allocation> orphanTop_; // the largest topN among them (up to 2 topN kept)
    struct Held {
        uint64_t bytes = 0, count = 0;
    };
    std::unordered_map<uint32_t, Held> orphanPools_, orphanStreams_; // replay index

    // Failures: the report's first topN and each stream's first (for the lane names), the
    // retractable one per thread.
    uint64_t failedTotal_ = 0;
    FirstFailures firstFailed_;
    std::unordered_map<uint32_t, FirstFailures> streamFailed_; // replay stream index
    struct PendingFailure {
        uint64_t seq;
        uint32_t stream, pool;
    };
    std::unordered_map<uint32_t, PendingFailure> pendingByTid_;

    // For the names (EntityNames numbers lanes): (pool, stream) pairs that allocated, and the
    // streams joined by wait edges.
    std::set<std::pair<uint64_t, uint64_t>> pairs_;
    std::vector<uint32_t> streamLastPool_; // by replay stream index: the pool last paired with it
    std::set<std::pair<uint64_t, uint64_t>> edgeStreams_;

    // The chunk's commands so far, and the number of its current event.
    Commands cmds_;
    uint32_t event_ = 0;

    // The series' side's state (seriesRun(); on its thread, if any, until the last commands).
    std::vector<SeriesPool> sPools_;                   // replay pool order
    std::vector<SeriesLive> sStreams_, sOutside_;      // replay order
    std::unordered_map<uint64_t, std::vector<uint64_t>> highCaps_; // pool -> coming UsedMemHighs
    std::unordered_map<uint64_t, size_t> highNext_;                // pool -> index into those
    int64_t horizon_ = kHorizonNs;
    int64_t done_ = INT64_MIN; // everything before this instant is handed to the merge
    std::vector<uint32_t> activePools_, activeStreams_, activeOutside_;
    std::priority_queue<Entry, std::vector<Entry>, Later> steps_;
    std::priority_queue<Question, std::vector<Question>, std::greater<>> questions_;
    bool late_ = false;           // the current command's event came more than the horizon out of order
    uint64_t lateEvents_ = 0;

    // The merge's side (run(); on its thread, if any, until merged()).
    std::vector<MergePool> merge_;   // replay pool order
    std::vector<Device> devices_;    // device-wide sums, by first sight
    std::vector<uint64_t> streamCur_; // each stream's live bytes at the merge's instant
    std::vector<uint32_t> touchedPools_, touchedDevices_;
    uint64_t streamsHolding_ = 0; // streams whose live bytes are above 0 at the merge's instant
    uint64_t deviceSyncsDuringPoolWork_ = 0;

    // The threads, if any (last: stopped before the state they work on goes; the series' first,
    // as it hands work to the merge's).
    HandOff<Batch> merger_{[this](Batch& b) { run(b); }};
    HandOff<Commands> series_{[this](Commands& c) { seriesRun(c); }};
};

} // namespace poolscope::detail
