// Timeline reconstruction: one pass over the events in seq order through the allocator replay,
// keeping the series and records the views draw.
#include "poolscope/TimelineBuilder.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "HugeReserve.h"
#include "TimelineFinish.h"
#include "poolscope/EventFields.h"
#include "poolscope/replay/Replay.h"

namespace poolscope {

const Series* PoolTimeline::attributeSeries(PoolAttr a) const {
    switch (a) {
    case PoolAttr::ReleaseThreshold: return &releaseThreshold;
    case PoolAttr::ReuseFollowEventDependencies: return &reuseFollowEventDependencies;
    case PoolAttr::ReuseAllowOpportunistic: return &reuseAllowOpportunistic;
    case PoolAttr::ReuseAllowInternalDependencies: return &reuseAllowInternalDependencies;
    default: return nullptr;
    }
}

const PoolTimeline* Timeline::pool(uint64_t handle) const {
    for (const PoolTimeline& p : pools)
        if (p.info.handle == handle) return &p;
    return nullptr;
}

const DeviceTotals* Timeline::totalsOf(int device) const {
    for (const DeviceTotals& d : deviceTotals)
        if (d.device == device) return &d;
    return nullptr;
}

const OutsideTimeline* Timeline::outsideOf(int device) const {
    for (const OutsideTimeline& o : outside)
        if (o.device == device) return &o;
    return nullptr;
}

const StreamTimeline* Timeline::stream(uint64_t handle) const {
    for (const StreamTimeline& s : streams)
        if (s.info.handle == handle) return &s;
    return nullptr;
}

std::pair<uint32_t, uint32_t> Timeline::racingThreads(uint64_t pool, int64_t t) const {
    // Allocations are in seq order, which follows time up to the threads' clock skew: scan the
    // window around t, with a margin.
    auto it = std::partition_point(allocations.begin(), allocations.end(), [&](const Allocation& a) {
        return a.allocTsNs < t - kRaceWindowNs;
    });
    uint32_t first = 0;
    int64_t firstTs = 0;
    for (; it != allocations.end() && it->allocTsNs <= t + kRaceWindowNs; ++it) {
        if (it->pool != pool) continue;
        if (!first) {
            first = it->tid;
            firstTs = it->allocTsNs;
        } else if (it->tid != first && it->allocTsNs - firstTs <= kRaceWindowNs) {
            return {first, it->tid};
        }
    }
    return {0, 0};
}

// What the timeline keeps beside the replay: the series, records and counters the views draw.
// The allocator's state itself (live blocks, pools, streams, knobs, event records) is the
// replay's; pools and streams share its indices until finalize() sorts a copy.
struct TimelineBuilder::Impl {
    Timeline tl;
    replay::Replay replay;
    PendingFreesAnalysis pending;
    StreamHazardsAnalysis hazards;
    FragmentationAnalysis fragmentation;
    bool anyTime = false;
    // Per pool (replay index): the first point of `used` after its last sample with high
    // watermarks (points from there are capped by the next such sample's UsedMemHigh), and the
    // peak of the points before it.
    struct HighWindow {
        size_t from = 0;
        uint64_t peakUsed = 0;
        int64_t peakUsedTsNs = 0;
    };
    std::vector<HighWindow> highs;
    // tl.peerCopies' index by (source, destination): a damaged trace may name many pairs.
    std::map<std::pair<int, int>, size_t> peerIndex;

    Impl() {
        replay.subscribe(&pending, PendingFreesAnalysis::kindMask());
        replay.subscribe(&hazards, StreamHazardsAnalysis::kindMask());
        replay.subscribe(&fragmentation, FragmentationAnalysis::kindMask());
    }
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;

    // Capacity hints from reserve(): upper bounds on the points of a pool's watermark series
    // and of a stream's live-bytes series and allocation list. Only the first few pools and
    // streams get a reservation (each is address space sized for the whole trace); the rest,
    // if a trace has that many, grow as usual.
    static constexpr int kReservedPools = 8, kReservedStreams = 16;
    uint64_t poolPointsHint = 0, streamPointsHint = 0, streamAllocsHint = 0;
    int reservedPools = 0, reservedStreams = 0;
    bool reservedBig = false;

    void reservePool(PoolTimeline& p) {
        if (!poolPointsHint || reservedPools >= kReservedPools) return;
        ++reservedPools;
        p.reserved.reserve(poolPointsHint);
        p.used.reserve(poolPointsHint);
    }

    void reserveStream(StreamTimeline& s) {
        if (!streamPointsHint || reservedStreams >= kReservedStreams) return;
        ++reservedStreams;
        s.liveBytes.reserve(streamPointsHint);
        detail::reserveHuge(s.allocations, streamAllocsHint);
    }

    // New entities of the replay get their timeline records, at the same index.
    [[gnu::noinline]] void mirrorEntities() {
        while (tl.pools.size() < replay.pools().size()) {
            PoolTimeline p;
            reservePool(p);
            tl.pools.push_back(std::move(p));
        }
        while (tl.streams.size() < replay.streams().size()) {
            StreamTimeline s;
            reserveStream(s);
            tl.streams.push_back(std::move(s));
        }
    }

    // The replay's view of each entity (devices learnt late, kinds from create events...) and
    // the totals it keeps, into the timeline.
    void syncFromReplay(Timeline& out) const {
        for (size_t i = 0; i < out.pools.size(); ++i) out.pools[i].info = replay.pools()[i].info;
        // A settable attribute known without any change in the trace (read by the collector
        // when it first saw the pool, TraceReader::poolAttributes) holds from the pool's start.
        for (size_t i = 0; i < out.pools.size(); ++i)
            for (PoolAttr a : {PoolAttr::ReleaseThreshold, PoolAttr::ReuseFollowEventDependencies,
                               PoolAttr::ReuseAllowOpportunistic,
                               PoolAttr::ReuseAllowInternalDependencies}) {
                Series* s = out.pools[i].attributeSeries(a);
                const replay::Knob& k = replay.pools()[i].knob(a);
                if (s && s->empty() && k.known)
                    s->push(std::max(out.t0, out.pools[i].info.createdTsNs), k.value);
            }
        for (size_t i = 0; i < out.streams.size(); ++i)
            out.streams[i].info = replay.streams()[i].info;
        out.reusedWithoutFree = replay.reusedWithoutFree();
        for (size_t i = 0; i < out.outside.size() && i < replay.outside().size(); ++i)
            out.outside[i].liveAtEndBytes = replay.outside()[i].liveBytes;
        out.pinned.allocatedAtEnd = replay.pinned().allocatedBytes;
        out.pinned.registeredAtEnd = replay.pinned().registeredBytes;
    }

    PoolTimeline* poolOf(uint64_t handle) {
        const uint32_t i = replay.poolIndex(handle);
        return i < tl.pools.size() ? &tl.pools[i] : nullptr;
    }
    StreamTimeline* streamOf(uint64_t handle) {
        const uint32_t i = replay.streamIndex(handle);
        return i < tl.streams.size() ? &tl.streams[i] : nullptr;
    }

    // The number a marker shows next to its kind.
    static uint64_t markerValue(const Event& e) {
        switch (e.kind) {
        case EventKind::Alloc: return AllocFields::of(e).bytes;
        case EventKind::PoolCreate: return PoolCreateFields::of(e).maxSize;
        case EventKind::PoolSetAttribute: return AttributeFields::of(e).value;
        case EventKind::KnobChange: return KnobFields::of(e).value;
        case EventKind::PoolTrimTo: return TrimFields::of(e).minBytesToKeep;
        case EventKind::ImplicitRelease: return ReleaseFields::of(e).reservedAfter;
        case EventKind::PeerCopy: return PeerCopyFields::of(e).bytes;
        case EventKind::PoolSetAccess:
            return SetAccessFields::of(e).locationType <= 1 && e.device >= 0
                       ? static_cast<uint64_t>(e.device) + 1
                       : 0;
        default: return 0;
        }
    }

    void marker(const Event& e, uint64_t stream, uint64_t pool) {
        uint16_t attr = 0;
        if (e.kind == EventKind::PoolSetAttribute)
            attr = static_cast<uint16_t>(AttributeFields::of(e).attr);
        else if (e.kind == EventKind::KnobChange)
            attr = KnobFields::of(e).target;
        else if (e.kind == EventKind::PoolSetAccess)
            attr = static_cast<uint16_t>(SetAccessFields::of(e).accessFlags);
        else if (e.kind == EventKind::PeerCopy)
            attr = e.attr;
        tl.markers.push_back(Marker{e.tsNs, e.seq, e.kind, attr, stream, pool, markerValue(e)});
    }

    static void reservedPoint(PoolTimeline& p, int64_t ts, uint64_t reserved) {
        p.reserved.push(ts, reserved);
        if (reserved > p.peakReserved) {
            p.peakReserved = reserved;
            p.peakReservedTsNs = ts;
        }
    }

    static void watermarks(PoolTimeline& p, int64_t ts, uint64_t reserved, uint64_t used) {
        reservedPoint(p, ts, reserved);
        p.used.push(ts, used);
        if (used > p.peakUsed) {
            p.peakUsed = used;
            p.peakUsedTsNs = ts;
        }
    }

    // A sample with the driver's high watermarks: the peaks are the driver's, and the used
    // values derived since the pool's previous such sample cannot have been above UsedMemHigh
    // (seq order is not the driver's order when two threads race on one pool).
    void driverHighs(uint32_t pool, const Event& e) {
        const SampleFields h = SampleFields::of(e);
        if (h.reservedHigh == 0 && h.usedHigh == 0) return;
        PoolTimeline& p = tl.pools[pool];
        if (highs.size() <= pool) highs.resize(pool + 1);
        HighWindow& w = highs[pool];
        // The points since the previous sample, capped; the peak is then the highest of the
        // points before them, the capped ones and the driver's own high watermark.
        p.used.capFrom(w.from, h.usedHigh);
        uint64_t peak = w.peakUsed;
        int64_t peakTs = w.peakUsedTsNs;
        for (size_t i = w.from; i < p.used.size(); ++i)
            if (p.used.v[i] > peak) peak = p.used.v[i], peakTs = p.used.t[i];
        // The high watermark was reached at or before this sample: at the highest point since
        // the previous one if that reaches it, else (a peak between two reads) at the sample.
        if (h.usedHigh > peak) peak = h.usedHigh, peakTs = e.tsNs;
        p.peakUsed = w.peakUsed = peak;
        p.peakUsedTsNs = w.peakUsedTsNs = peakTs;
        w.from = p.used.size();
        p.driverUsedHigh = std::max(p.driverUsedHigh, h.usedHigh);
        p.driverReservedHigh = std::max(p.driverReservedHigh, h.reservedHigh);
        if (h.reservedHigh > p.peakReserved) {
            p.peakReserved = h.reservedHigh;
            p.peakReservedTsNs = e.tsNs;
        }
    }

    // Ends an allocation that the replay released at (ts, seq) on freeStream.
    void close(const replay::Block& b, int64_t ts, uint64_t seq, uint64_t freeStream,
               uint32_t freeSite = 0) {
        Allocation& a = tl.allocations[b.tag];
        a.freeTsNs = std::max(ts, a.allocTsNs);
        a.freeSeq = seq;
        a.freeStream = freeStream;
        a.freeSite = freeSite;
        tl.pools[b.pool].freeCount++;
        tl.streams[b.stream].liveBytes.push(a.freeTsNs, replay.streams()[b.stream].liveBytes);
    }

    // The replay found that this alloc retried an earlier failed one (Fact::retry): that
    // failure moves from `failed` (and its marker and counts) to `retried`.
    [[gnu::noinline]] void retried(uint64_t seq) {
        auto it = std::lower_bound(tl.failed.begin(), tl.failed.end(), seq,
                                   [](const FailedAllocation& f, uint64_t s) { return f.seq < s; });
        if (it == tl.failed.end() || it->seq != seq) return;
        const FailedAllocation f = *it;
        tl.retried.push_back(f);
        tl.failed.erase(it);
        for (size_t i = tl.markers.size(); i-- > 0;)
            if (tl.markers[i].seq == seq && tl.markers[i].kind == EventKind::Alloc) {
                tl.markers.erase(tl.markers.begin() + static_cast<ptrdiff_t>(i));
                break;
            }
        if (const uint32_t si = replay.streamIndex(f.stream); si < tl.streams.size())
            tl.streams[si].failedCount--;
        if (const uint32_t pi = replay.poolIndex(f.pool); pi < tl.pools.size())
            tl.pools[pi].failedCount--;
    }

    void alloc(const Event& e, const replay::Fact& f) {
        StreamTimeline& s = tl.streams[f.stream];
        PoolTimeline& p = tl.pools[f.pool];
        if (f.retry) [[unlikely]]
            retried(f.retriedSeq);
        if (f.failedAlloc) {
            tl.failed.push_back(
                FailedAllocation{e.tsNs, e.seq, AllocFields::of(e).bytes, e.stream, e.pool, e.result});
            marker(e, e.stream, e.pool);
            s.failedCount++;
            p.failedCount++;
            return;
        }
        const replay::Block& b = f.block;
        Allocation a;
        a.ptr = b.ptr;
        a.size = b.bytes;
        a.pool = e.pool;
        a.allocStream = e.stream;
        a.allocTsNs = e.tsNs;
        a.allocSeq = e.seq;
        a.tid = e.tid;
        a.device = e.device;
        a.api = static_cast<uint8_t>(AllocFields::of(e).api);
        a.site = e.site;
        if (b.ptr == 0) a.freeTsNs = e.tsNs; // a zero-byte request: nothing to free later
        tl.allocations.push_back(a);
        // An imported mapping the pointer replaces has no allocation record (like its free).
        if (f.replacedLive && !f.closed.imported) close(f.closed, e.tsNs, 0, 0);
        s.allocations.push_back(b.tag);
        s.allocCount++;
        s.bytesAllocated += b.bytes;
        p.allocCount++;
        p.bytesAllocated += b.bytes;
        if (b.ptr == 0) return;
        const uint64_t streamLive = replay.streams()[f.stream].liveBytes;
        s.liveBytes.push(e.tsNs, streamLive);
        if (streamLive > s.peakLive) {
            s.peakLive = streamLive;
            s.peakLiveTsNs = e.tsNs;
        }
        const uint64_t poolLive = replay.pools()[f.pool].liveBytes;
        if (poolLive > p.peakLive) {
            p.peakLive = poolLive;
            p.peakLiveTsNs = e.tsNs;
        }
    }

    // A change of a settable attribute (threshold or reuse policy), by the app or by a knob.
    void knob(PoolTimeline& p, const Event& e, const replay::Fact& f) {
        Series* s = p.attributeSeries(f.knobAttr);
        if (!s) return;
        // Knowing the value before tells us what held since the trace start.
        if (s->empty() && f.knobBefore.known && e.tsNs > tl.t0) s->push(tl.t0, f.knobBefore.value);
        s->push(e.tsNs, replay.pools()[f.pool].knob(f.knobAttr).value);
    }

    void add(const Event& e) {
        if (!anyTime) {
            tl.t0 = tl.t1 = e.tsNs;
            anyTime = true;
        } else {
            tl.t0 = std::min(tl.t0, e.tsNs);
            tl.t1 = std::max(tl.t1, e.tsNs);
        }
        const auto tag = static_cast<uint32_t>(tl.allocations.size());
        const replay::Fact& f = replay.apply(e, tag);
        if (f.newPool || f.newStream) [[unlikely]]
            mirrorEntities();
        if (e.kind == EventKind::Sample) {
            tl.sampleCount++;
            watermarks(tl.pools[f.pool], e.tsNs, e.reserved, e.used);
            driverHighs(f.pool, e);
            return;
        }
        tl.eventCount++;
        if (f.watermarks) {
            const replay::PoolState& ps = replay.pools()[f.pool];
            watermarks(tl.pools[f.pool], e.tsNs, ps.reserved, ps.used);
        } else if (f.reservedOnly) {
            reservedPoint(tl.pools[f.pool], e.tsNs, replay.pools()[f.pool].reserved);
        }

        switch (e.kind) {
        case EventKind::Alloc: alloc(e, f); break;
        case EventKind::Free:
            if (f.unmatchedFree || (f.freed && f.block.imported)) {
                tl.unmatchedFrees++;
            } else if (f.freed) {
                tl.streams[f.stream].freeCount++;
                close(f.block, e.tsNs, e.seq, e.stream, e.site);
            }
            break;
        case EventKind::PoolCreate: {
            PoolTimeline& p = tl.pools[f.pool];
            const replay::PoolState& ps = replay.pools()[f.pool];
            for (PoolAttr a : {PoolAttr::ReleaseThreshold, PoolAttr::ReuseFollowEventDependencies,
                               PoolAttr::ReuseAllowOpportunistic,
                               PoolAttr::ReuseAllowInternalDependencies})
                if (Series* s = p.attributeSeries(a); s->empty()) s->push(e.tsNs, ps.knob(a).value);
            marker(e, 0, e.pool);
            break;
        }
        case EventKind::PoolSetAttribute:
        case EventKind::KnobChange:
            if (f.knobChanged) knob(tl.pools[f.pool], e, f);
            marker(e, 0, e.pool);
            break;
        case EventKind::PoolDestroy:
        case EventKind::DeviceSetMempool:
        case EventKind::PoolTrimTo:
        case EventKind::ImplicitRelease: marker(e, 0, e.pool); break;
        case EventKind::StreamWaitEvent:
            if (f.edge)
                tl.edges.push_back(WaitEdge{CuEventFields::of(e).event,
                                            replay.streams()[f.edgeFrom].info.handle, e.stream,
                                            f.edgeRecordTsNs, e.tsNs});
            break;
        case EventKind::StreamSynchronize: marker(e, e.stream, 0); break;
        case EventKind::PoolSetAccess:
            if (!e.failed() && f.pool != replay::kNone) applyPoolAccess(tl.pools[f.pool].access, e);
            marker(e, 0, e.pool);
            break;
        case EventKind::PeerCopy: peerCopy(e); break;
        case EventKind::EventSynchronize:
        case EventKind::ContextSynchronize: marker(e, 0, 0); break;
        case EventKind::DeviceAlloc:
        case EventKind::DeviceFree:
        case EventKind::HostAlloc:
        case EventKind::HostFree:
        case EventKind::HostRegister:
        case EventKind::HostUnregister: beyondPool(e, f); break;
        default: break;
        }
        if (f.memReleased && e.kind == EventKind::Free) [[unlikely]]
            memReleased(e, f.mem); // cudaFreeAsync of a cudaMalloc pointer
    }

    void peerCopy(const Event& e) {
        const PeerCopyFields c = PeerCopyFields::of(e);
        auto [it, added] = peerIndex.try_emplace({c.srcDevice, c.dstDevice}, tl.peerCopies.size());
        if (added) tl.peerCopies.push_back(PeerCopyTotal{c.srcDevice, c.dstDevice, 0, 0, 0});
        tl.peerCopies[it->second].add(e);
        marker(e, e.stream, 0);
    }

    OutsideTimeline& outsideAt(uint32_t idx) {
        // The replay's outside() and ours have the same order (finalize sorts a copy's).
        while (tl.outside.size() < replay.outside().size()) {
            OutsideTimeline o;
            o.device = replay.outside()[tl.outside.size()].device;
            tl.outside.push_back(std::move(o));
        }
        return tl.outside[idx];
    }

    // The series of the device or host memory a block belonged to, after the replay moved it.
    void memSeries(const Event& e, const replay::MemBlock& m) {
        if (m.kind == EventKind::DeviceAlloc) {
            uint32_t idx = 0;
            for (; idx < replay.outside().size(); ++idx)
                if (replay.outside()[idx].device == m.device) break;
            if (idx == replay.outside().size()) return;
            const replay::OutsideState& os = replay.outside()[idx];
            OutsideTimeline& o = outsideAt(idx);
            if (m.api == static_cast<uint8_t>(DeviceAllocApi::Managed)) {
                o.managedBytes.push(e.tsNs, os.managedLiveBytes);
                o.managedPeakBytes = os.managedPeakBytes;
            } else {
                o.liveBytes.push(e.tsNs, os.liveBytes);
                if (os.peakBytes > o.peakBytes) {
                    o.peakBytes = os.peakBytes;
                    o.peakTsNs = os.peakTsNs;
                }
            }
            return;
        }
        const replay::PinnedState& ps = replay.pinned();
        PinnedTimeline& p = tl.pinned;
        if (m.kind == EventKind::HostAlloc)
            p.allocated.push(e.tsNs, ps.allocatedBytes);
        else
            p.registered.push(e.tsNs, ps.registeredBytes);
        p.total.push(e.tsNs, ps.totalBytes());
        p.allocatedPeak = ps.allocatedPeak;
        p.registeredPeak = ps.registeredPeak;
        if (ps.totalPeak > p.totalPeak) {
            p.totalPeak = ps.totalPeak;
            p.totalPeakTsNs = ps.totalPeakTsNs;
        }
    }

    void beyondPool(const Event& e, const replay::Fact& f) {
        switch (e.kind) {
        case EventKind::DeviceAlloc: {
            OutsideTimeline& o = outsideAt(f.outside);
            if (e.failed()) {
                o.failedCount++; // not in `failed`: those are pool allocations
                marker(e, 0, 0);
                return;
            }
            o.allocCount++;
            break;
        }
        case EventKind::HostAlloc:
        case EventKind::HostRegister:
            if (!tl.pinned.countPin(e)) {
                marker(e, 0, 0);
                return;
            }
            break;
        case EventKind::DeviceFree:
            if (f.freed && f.block.imported) { // an imported mapping: no allocation record
                tl.unmatchedFrees++;
                return;
            }
            if (f.freed) { // a pool block freed with cudaFree
                close(f.block, e.tsNs, e.seq, 0, e.site);
                return;
            }
            if (f.unmatchedFree) tl.unmatchedFrees++;
            if (f.deviceSync) {
                OutsideTimeline& o = outsideAt(f.outside);
                const uint64_t callNs = ReleaseMemFields::of(e).callNs;
                o.syncFrees++;
                o.syncCallNs += callNs;
                tl.deviceSyncs.push_back(DeviceSync{e.tsNs, e.seq, e.device, e.ptr,
                                                    f.memReleased ? f.mem.bytes : 0,
                                                    static_cast<int64_t>(callNs)});
            }
            break;
        case EventKind::HostFree:
            if (f.memReleased) tl.pinned.freeCount++;
            break;
        case EventKind::HostUnregister:
            if (f.memReleased) tl.pinned.unregisterCount++;
            break;
        default: break;
        }
        if (f.memUnmatched) tl.unmatchedMemReleases++;
        if (f.memAllocated) memSeries(e, f.mem);
        if (f.memReleased) memReleased(e, f.mem);
    }

    void memReleased(const Event& e, const replay::MemBlock& m) {
        memSeries(e, m);
        if (m.kind != EventKind::DeviceAlloc) return;
        for (uint32_t i = 0; i < replay.outside().size(); ++i)
            if (replay.outside()[i].device == m.device) outsideAt(i).freeCount++;
    }
};


void applyPoolAccess(std::vector<PoolAccess>& access, const Event& e) {
    const SetAccessFields a = SetAccessFields::of(e);
    const int device = a.locationType <= 1 ? e.device : -1;
    for (PoolAccess& x : access)
        if (x.device == device && x.locationType == a.locationType) {
            x.flags = a.accessFlags;
            x.tsNs = e.tsNs;
            return;
        }
    access.push_back(PoolAccess{device, a.locationType, a.accessFlags, e.tsNs});
}

void PeerCopyTotal::add(const Event& e) {
    if (e.failed()) {
        failedCount++;
    } else {
        count++;
        bytes += PeerCopyFields::of(e).bytes;
    }
}

bool PinnedCounts::countPin(const Event& e) {
    if (e.failed()) {
        failedCount++;
        return false;
    }
    if (e.kind == EventKind::HostRegister) {
        registerCount++;
    } else {
        allocCount++;
        const uint32_t fl = PinnedFields::of(e).flags & 7u;
        allocatedByFlags[fl] += e.size;
        allocsByFlags[fl]++;
    }
    return true;
}

TimelineBuilder::TimelineBuilder() : d_(std::make_unique<Impl>()) {}
TimelineBuilder::~TimelineBuilder() = default;

void TimelineBuilder::subscribe(replay::Observer* o, uint32_t kindMask) {
    d_->replay.subscribe(o, kindMask);
}
void TimelineBuilder::unsubscribe(replay::Observer* o) { d_->replay.unsubscribe(o); }
const replay::Replay& TimelineBuilder::replay() const { return d_->replay; }

void TimelineBuilder::setEntities(std::vector<DeviceInfo> devices, std::vector<PoolInfo> pools,
                                  std::vector<StreamInfo> streams) {
    d_->tl.devices = devices;
    d_->replay.setDevices(std::move(devices));
    for (const PoolInfo& info : pools) d_->replay.declarePool(info);
    for (const StreamInfo& info : streams) d_->replay.declareStream(info);
    d_->mirrorEntities();
}

void TimelineBuilder::declarePool(const PoolInfo& info) {
    d_->replay.declarePool(info);
    d_->mirrorEntities();
}

void TimelineBuilder::declareDevice(const DeviceInfo& info) {
    std::vector<DeviceInfo> devices = d_->replay.devices();
    auto it = std::find_if(devices.begin(), devices.end(),
                           [&](const DeviceInfo& d) { return d.ordinal == info.ordinal; });
    if (it == devices.end()) {
        devices.push_back(info);
    } else {
        if (it->name.empty()) it->name = info.name;
        if (!it->totalMemory) it->totalMemory = info.totalMemory;
        if (it->uuid.empty()) it->uuid = info.uuid;
    }
    d_->tl.devices = devices;
    d_->replay.setDevices(std::move(devices));
}

void TimelineBuilder::declarePoolAttributes(const std::vector<PoolAttributeValue>& values) {
    for (const PoolAttributeValue& a : values)
        d_->replay.declareKnob(a.pool, a.attr, a.value);
}

void TimelineBuilder::setDropGaps(std::vector<DropGap> gaps) {
    d_->tl.dropGaps = std::move(gaps);
}

void TimelineBuilder::reserve(uint64_t allocs, uint64_t events) {
    d_->tl.allocations.reserve(allocs);
    (void)events; // series sizes depend on the workload; growing them is cheap enough
}

void TimelineBuilder::reserve(const std::map<EventKind, uint64_t>& countsByKind) {
    // The counts come from the file (event_counts): a hint, never trusted to size memory. The
    // caller bounds them by what the chunks can hold (buildTimeline clamps them to the validated
    // chunk rows' total); here each is also capped and every sum saturates, so that no count
    // (2^63, say) can wrap a sum or ask for an impossible allocation.
    constexpr uint64_t kMaxHint = uint64_t{1} << 32;
    auto n = [&](EventKind k) {
        auto it = countsByKind.find(k);
        return it == countsByKind.end() ? uint64_t{0} : std::min(it->second, kMaxHint);
    };
    Impl& d = *d_;
    Timeline& tl = d.tl;
    detail::reserveHuge(tl.allocations, n(EventKind::Alloc));
    detail::reserveHuge(tl.edges, n(EventKind::StreamWaitEvent)); // at most one per wait
    uint64_t markers = 0;
    for (EventKind k : {EventKind::PoolCreate, EventKind::PoolDestroy, EventKind::PoolSetAttribute,
                        EventKind::KnobChange, EventKind::DeviceSetMempool, EventKind::PoolTrimTo,
                        EventKind::ImplicitRelease, EventKind::StreamSynchronize,
                        EventKind::EventSynchronize, EventKind::ContextSynchronize})
        markers += n(k);
    detail::reserveHuge(tl.markers, markers + 64); // plus failed allocations, which are rare
    // Bounds: a watermark point per event or sample at most (an event carries one pool's); a
    // stream's live bytes change at its allocs and at frees of its blocks.
    uint64_t all = 0;
    for (const auto& [kind, count] : countsByKind)
        all = std::min(all + std::min(count, kMaxHint), kMaxHint); // both terms <= 2^32
    d.poolPointsHint = all + 4;
    d.streamPointsHint = n(EventKind::Alloc) + n(EventKind::Free) + 4;
    d.pending.reservePoints(n(EventKind::Free) + n(EventKind::StreamWaitEvent) +
                            n(EventKind::StreamSynchronize) + n(EventKind::EventSynchronize) +
                            n(EventKind::ContextSynchronize) + 4);
    d.streamAllocsHint = n(EventKind::Alloc);
    d.reservedBig = true;
    for (PoolTimeline& p : tl.pools) d.reservePool(p);
    for (StreamTimeline& s : tl.streams) d.reserveStream(s);
}

void TimelineBuilder::add(const Event& e) { d_->add(e); }

void TimelineBuilder::warmStart(uint64_t pool, int16_t device, int64_t ts, uint64_t reserved,
                                uint64_t used, bool capLater) {
    Impl& d = *d_;
    Event s;
    s.kind = EventKind::Sample;
    s.tsNs = ts;
    s.pool = pool;
    s.device = device;
    s.reserved = reserved;
    s.used = used; // no high watermarks: the replay takes the values, nothing is capped
    const replay::Fact& f = d.replay.apply(s);
    if (f.newPool || f.newStream) d.mirrorEntities();
    if (f.pool >= d.tl.pools.size()) return;
    d.watermarks(d.tl.pools[f.pool], ts, reserved, used);
    if (!capLater) {
        if (d.highs.size() <= f.pool) d.highs.resize(f.pool + 1);
        d.highs[f.pool].from = d.tl.pools[f.pool].used.size();
    }
}

void TimelineBuilder::capBySampleAfter(const Event& sample) {
    Impl& d = *d_;
    const uint32_t pi = d.replay.poolIndex(sample.pool);
    const SampleFields h = SampleFields::of(sample);
    if (pi >= d.tl.pools.size() || (h.reservedHigh == 0 && h.usedHigh == 0)) return;
    if (d.highs.size() <= pi) d.highs.resize(pi + 1);
    d.tl.pools[pi].used.capFrom(d.highs[pi].from, h.usedHigh);
}

void TimelineBuilder::addAllocatedBefore(const Event& alloc) {
    Impl& d = *d_;
    const size_t before = d.tl.allocations.size();
    d.add(alloc);
    d.tl.eventCount--;
    if (d.tl.allocations.size() != before + 1) return;
    Allocation& a = d.tl.allocations.back();
    a.beforeLoaded = true;
    a.allocSeq = 0;
    if (PoolTimeline* p = d.poolOf(a.pool)) {
        p->allocCount--;
        p->bytesAllocated -= a.size;
    }
    if (StreamTimeline* st = d.streamOf(a.allocStream)) {
        st->allocCount--;
        st->bytesAllocated -= a.size;
    }
}

namespace {
// What was built so far, as a part of a trace spanning [t0, t1) with totalEvents events.
void markPartial(Timeline& tl, bool anyTime, int64_t t0, int64_t t1, uint64_t totalEvents) {
    tl.partial = true;
    tl.loadedUntilNs = tl.t1;
    tl.totalEvents = std::max(totalEvents, tl.eventCount);
    tl.loadedFromNs = tl.t0;
    if (t1 <= t0) return; // the whole range is not known: keep what was seen
    if (anyTime) {
        tl.t0 = std::min(tl.t0, t0);
        tl.t1 = std::max(tl.t1, t1);
    } else {
        tl.t0 = t0;
        tl.t1 = t1;
    }
    tl.loadedFromNs = tl.t0; // loaded from the trace's beginning
}
} // namespace

std::shared_ptr<const Timeline> TimelineBuilder::partialSnapshot(int64_t t0, int64_t t1,
                                                                 uint64_t totalEvents) const {
    auto copy = std::make_shared<Timeline>(d_->tl);
    d_->syncFromReplay(*copy);
    copy->pendingFrees = d_->pending.result();
    copy->hazards = d_->hazards.result();
    copy->fragmentation = d_->fragmentation.result();
    detail::finishTimeline(*copy);
    markPartial(*copy, d_->anyTime, t0, t1, totalEvents);
    return copy;
}

std::shared_ptr<const Timeline> TimelineBuilder::finishPartial(int64_t t0, int64_t t1,
                                                               uint64_t totalEvents) {
    const bool anyTime = d_->anyTime;
    auto out = std::const_pointer_cast<Timeline>(finish());
    markPartial(*out, anyTime, t0, t1, totalEvents);
    return out;
}

std::shared_ptr<const Timeline> TimelineBuilder::snapshot() const {
    auto copy = std::make_shared<Timeline>(d_->tl);
    d_->syncFromReplay(*copy);
    copy->pendingFrees = d_->pending.result();
    copy->hazards = d_->hazards.result();
    copy->fragmentation = d_->fragmentation.result();
    detail::finishTimeline(*copy);
    return copy;
}

std::shared_ptr<const Timeline> TimelineBuilder::finish() {
    d_->syncFromReplay(d_->tl);
    d_->tl.pendingFrees = d_->pending.take();
    d_->tl.hazards = d_->hazards.take();
    d_->tl.fragmentation = d_->fragmentation.take();
    auto out = std::make_shared<Timeline>(std::move(d_->tl));
    const bool shrink = !d_->reservedBig;
    d_ = std::make_unique<Impl>();
    detail::finishTimeline(*out, shrink);
    return out;
}

} // namespace poolscope
