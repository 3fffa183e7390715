// Timeline reconstruction. One pass over the events in seq order; state per event is a few
// integer updates on vectors of PODs (see FlatPtrMap.h for why the live set is not a std map).
#include "poolscope/Timeline.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "FlatPtrMap.h"
#include "poolscope/TraceReader.h"

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

const StreamTimeline* Timeline::stream(uint64_t handle) const {
    for (const StreamTimeline& s : streams)
        if (s.info.handle == handle) return &s;
    return nullptr;
}

struct TimelineBuilder::Impl {
    Timeline tl; // pools and streams in order of first sight until finalize() sorts a copy
    std::unordered_map<uint64_t, uint32_t> poolIdx;
    std::unordered_map<uint64_t, uint32_t> streamIdx;
    std::vector<uint64_t> poolLive;   // live bytes per pool (allocations seen here)
    std::vector<uint64_t> streamLive; // live bytes per allocating stream
    detail::FlatPtrMap live;          // ptr -> index into tl.allocations
    struct Record {
        uint64_t stream;
        int64_t tsNs;
    };
    std::unordered_map<uint64_t, Record> lastRecord; // CUevent -> its latest cudaEventRecord
    bool anyTime = false;

    // Pool and stream lookups happen on almost every event (~6% of a 10M-event build when they
    // all hashed). Processes have a handful of each, so the first kFast are found by a linear
    // compare over a small array (device already known); the map holds them all.
    static constexpr size_t kFast = 8;
    struct Fast {
        uint64_t handle;
        uint32_t idx;
    };
    std::vector<Fast> fastPools, fastStreams;

    static int find(const std::vector<Fast>& fast, uint64_t handle) {
        for (size_t i = 0; i < fast.size(); ++i)
            if (fast[i].handle == handle) return static_cast<int>(fast[i].idx);
        return -1;
    }

    uint32_t poolAt(uint64_t handle, int16_t device) {
        if (int i = find(fastPools, handle); i >= 0) return static_cast<uint32_t>(i);
        const uint32_t idx = poolSlow(handle, device);
        if (fastPools.size() < kFast && tl.pools[idx].info.device >= 0)
            fastPools.push_back({handle, idx});
        return idx;
    }

    uint32_t streamAt(uint64_t handle, int16_t device) {
        if (int i = find(fastStreams, handle); i >= 0) return static_cast<uint32_t>(i);
        const uint32_t idx = streamSlow(handle, device);
        if (fastStreams.size() < kFast && tl.streams[idx].info.device >= 0)
            fastStreams.push_back({handle, idx});
        return idx;
    }

    uint32_t poolSlow(uint64_t handle, int16_t device) {
        auto [it, inserted] = poolIdx.try_emplace(handle, static_cast<uint32_t>(tl.pools.size()));
        if (inserted) {
            PoolTimeline p;
            p.info.handle = handle;
            p.info.device = device;
            tl.pools.push_back(std::move(p));
            poolLive.push_back(0);
        } else if (tl.pools[it->second].info.device < 0 && device >= 0) {
            tl.pools[it->second].info.device = device; // first seen in a sample, which has none
        }
        return it->second;
    }

    uint32_t streamSlow(uint64_t handle, int16_t device) {
        auto [it, inserted] =
            streamIdx.try_emplace(handle, static_cast<uint32_t>(tl.streams.size()));
        if (inserted) {
            StreamTimeline s;
            s.info.handle = handle;
            s.info.device = device;
            tl.streams.push_back(std::move(s));
            streamLive.push_back(0);
        } else if (tl.streams[it->second].info.device < 0 && device >= 0) {
            tl.streams[it->second].info.device = device;
        }
        return it->second;
    }

    void marker(const Event& e, uint64_t stream, uint64_t pool) {
        tl.markers.push_back(Marker{e.tsNs, e.seq, e.kind, stream, pool, e.size});
    }

    void watermarks(PoolTimeline& p, int64_t ts, uint64_t reserved, uint64_t used) {
        p.reserved.push(ts, reserved);
        p.used.push(ts, used);
        if (reserved > p.peakReserved) {
            p.peakReserved = reserved;
            p.peakReservedTsNs = ts;
        }
        if (used > p.peakUsed) {
            p.peakUsed = used;
            p.peakUsedTsNs = ts;
        }
    }

    void reservedOnly(PoolTimeline& p, int64_t ts, uint64_t reserved) {
        p.reserved.push(ts, reserved);
        if (reserved > p.peakReserved) {
            p.peakReserved = reserved;
            p.peakReservedTsNs = ts;
        }
    }

    // Ends allocation idx at (ts, seq) on freeStream and updates the live byte counts.
    void close(uint32_t idx, int64_t ts, uint64_t seq, uint64_t freeStream) {
        Allocation& a = tl.allocations[idx];
        a.freeTsNs = std::max(ts, a.allocTsNs);
        a.freeSeq = seq;
        a.freeStream = freeStream;
        const uint32_t pi = poolAt(a.pool, a.device); // exists: created by the alloc
        tl.pools[pi].freeCount++;
        poolLive[pi] -= a.size;
        const uint32_t si = streamAt(a.allocStream, a.device);
        streamLive[si] -= a.size;
        tl.streams[si].liveBytes.push(a.freeTsNs, streamLive[si]);
    }

    void alloc(const Event& e) {
        const uint32_t si = streamAt(e.stream, e.device);
        const uint32_t pi = poolAt(e.pool, e.device);
        StreamTimeline& s = tl.streams[si];
        PoolTimeline& p = tl.pools[pi];
        if (e.failed()) {
            tl.failed.push_back(FailedAllocation{e.tsNs, e.seq, e.size, e.stream, e.pool, e.result});
            marker(e, e.stream, e.pool);
            s.failedCount++;
            p.failedCount++;
            return;
        }
        Allocation a;
        a.ptr = e.ptr;
        a.size = e.size;
        a.pool = e.pool;
        a.allocStream = e.stream;
        a.allocTsNs = e.tsNs;
        a.allocSeq = e.seq;
        a.tid = e.tid;
        a.device = e.device;
        a.api = e.variant;
        const auto idx = static_cast<uint32_t>(tl.allocations.size());
        if (e.ptr == 0) a.freeTsNs = e.tsNs; // a zero-byte request: nothing to free later
        tl.allocations.push_back(a);
        if (e.ptr != 0) {
            if (uint32_t old = live.take(e.ptr); old != UINT32_MAX) {
                tl.reusedWithoutFree++;
                close(old, e.tsNs, 0, 0);
            }
            live.put(e.ptr, idx);
        }
        s.allocations.push_back(idx);
        s.allocCount++;
        s.bytesAllocated += e.size;
        p.allocCount++;
        p.bytesAllocated += e.size;
        if (e.ptr == 0) return;
        streamLive[si] += e.size;
        s.liveBytes.push(e.tsNs, streamLive[si]);
        if (streamLive[si] > s.peakLive) {
            s.peakLive = streamLive[si];
            s.peakLiveTsNs = e.tsNs;
        }
        poolLive[pi] += e.size;
        if (poolLive[pi] > p.peakLive) {
            p.peakLive = poolLive[pi];
            p.peakLiveTsNs = e.tsNs;
        }
    }

    void free(const Event& e) {
        // cudaFreeAsync(nullptr) is a legal no-op, and a failed free released nothing.
        if (e.ptr == 0 || e.failed()) return;
        const uint32_t fsi = streamAt(e.stream, e.device);
        const uint32_t idx = live.take(e.ptr);
        if (idx == UINT32_MAX) {
            tl.unmatchedFrees++;
            return;
        }
        tl.streams[fsi].freeCount++;
        close(idx, e.tsNs, e.seq, e.stream);
    }

    // A change of a settable attribute (threshold or reuse policy), by the app or by a knob.
    void attribute(PoolTimeline& p, const Event& e) {
        Series* s = p.attributeSeries(static_cast<PoolAttr>(e.attr));
        if (!s) return;
        // Knowing the old value tells us what held before the change, since the trace start.
        if (s->empty() && e.has(kHasOldValue) && e.tsNs > tl.t0) s->push(tl.t0, e.aux);
        s->push(e.tsNs, e.size);
    }

    void add(const Event& e) {
        if (!anyTime) {
            tl.t0 = tl.t1 = e.tsNs;
            anyTime = true;
        } else {
            tl.t0 = std::min(tl.t0, e.tsNs);
            tl.t1 = std::max(tl.t1, e.tsNs);
        }
        if (e.kind == EventKind::Sample) {
            tl.sampleCount++;
            watermarks(tl.pools[poolAt(e.pool, e.device)], e.tsNs, e.reserved, e.used);
            return;
        }
        tl.eventCount++;
        if (e.has(kHasWatermarks) && e.pool != 0)
            watermarks(tl.pools[poolAt(e.pool, e.device)], e.tsNs, e.reserved, e.used);

        switch (e.kind) {
        case EventKind::Alloc: alloc(e); break;
        case EventKind::Free: free(e); break;
        case EventKind::PoolCreate: {
            PoolTimeline& p = tl.pools[poolAt(e.pool, e.device)];
            if (p.info.kind == PoolKind::Unknown) p.info.kind = static_cast<PoolKind>(e.variant);
            if (p.info.maxSize == 0) p.info.maxSize = e.size;
            if (p.info.handleTypes == 0) p.info.handleTypes = static_cast<uint32_t>(e.aux);
            if (p.info.createdTsNs == 0) p.info.createdTsNs = e.tsNs;
            if (p.info.device < 0) p.info.device = e.device;
            // A new pool holds nothing and starts with the driver's default threshold, 0.
            if (!e.has(kHasWatermarks)) watermarks(p, e.tsNs, 0, 0);
            if (p.releaseThreshold.empty()) p.releaseThreshold.push(e.tsNs, 0);
            for (Series* s : {&p.reuseFollowEventDependencies, &p.reuseAllowOpportunistic,
                              &p.reuseAllowInternalDependencies})
                if (s->empty()) s->push(e.tsNs, 1);
            marker(e, 0, e.pool);
            break;
        }
        case EventKind::PoolDestroy: {
            PoolTimeline& p = tl.pools[poolAt(e.pool, e.device)];
            if (!e.has(kHasWatermarks)) watermarks(p, e.tsNs, 0, 0);
            marker(e, 0, e.pool);
            break;
        }
        case EventKind::PoolSetAttribute:
        case EventKind::KnobChange: {
            PoolTimeline& p = tl.pools[poolAt(e.pool, e.device)];
            attribute(p, e);
            marker(e, 0, e.pool);
            break;
        }
        case EventKind::DeviceSetMempool:
            poolAt(e.pool, e.device);
            marker(e, 0, e.pool);
            break;
        case EventKind::PoolTrimTo:
            poolAt(e.pool, e.device);
            marker(e, 0, e.pool);
            break;
        case EventKind::ImplicitRelease: {
            // size is the pool's size after the release (CUPTI's TRIMMED record): its reserved.
            PoolTimeline& p = tl.pools[poolAt(e.pool, e.device)];
            if (!e.has(kHasWatermarks)) reservedOnly(p, e.tsNs, e.size);
            marker(e, 0, e.pool);
            break;
        }
        case EventKind::EventRecord:
            streamAt(e.stream, e.device);
            lastRecord[e.ptr] = Record{e.stream, e.tsNs};
            break;
        case EventKind::StreamWaitEvent: {
            streamAt(e.stream, e.device);
            auto it = lastRecord.find(e.ptr);
            if (it != lastRecord.end() && it->second.stream != e.stream)
                tl.edges.push_back(
                    WaitEdge{e.ptr, it->second.stream, e.stream, it->second.tsNs, e.tsNs});
            break;
        }
        case EventKind::StreamSynchronize:
            streamAt(e.stream, e.device);
            marker(e, e.stream, 0);
            break;
        case EventKind::EventSynchronize:
        case EventKind::ContextSynchronize: marker(e, 0, 0); break;
        case EventKind::StreamCreate: {
            StreamTimeline& s = tl.streams[streamAt(e.stream, e.device)];
            s.info.flags = static_cast<uint32_t>(e.aux);
            s.info.priority = static_cast<int>(e.variant) - 128;
            s.info.priorityKnown = true;
            break;
        }
        case EventKind::StreamDestroy: streamAt(e.stream, e.device); break;
        case EventKind::PoolExport:
        case EventKind::PoolImport:
        case EventKind::PointerExport:
        case EventKind::PointerImport:
        case EventKind::PoolSetAccess:
            if (e.pool != 0) poolAt(e.pool, e.device);
            break;
        case EventKind::Sample: break; // handled above
        }
    }
};

namespace {

// Totals that only make sense at the end, and the documented orderings.
void finalize(Timeline& tl) {
    std::unordered_map<uint64_t, PoolTimeline*> pools;
    std::unordered_map<uint64_t, StreamTimeline*> streams;
    for (PoolTimeline& p : tl.pools) {
        p.liveAtEndBytes = p.liveAtEndCount = 0;
        pools[p.info.handle] = &p;
    }
    for (StreamTimeline& s : tl.streams) {
        s.liveAtEndBytes = s.liveAtEndCount = 0;
        streams[s.info.handle] = &s;
    }
    tl.leaks.clear();
    for (size_t i = 0; i < tl.allocations.size(); ++i) {
        const Allocation& a = tl.allocations[i];
        if (!a.live()) continue;
        tl.leaks.push_back(static_cast<uint32_t>(i));
        PoolTimeline* p = pools.at(a.pool);
        p->liveAtEndBytes += a.size;
        p->liveAtEndCount++;
        StreamTimeline* s = streams.at(a.allocStream);
        s->liveAtEndBytes += a.size;
        s->liveAtEndCount++;
    }
    // Growth slack of the big vectors is a third of their size on average: give it back.
    for (PoolTimeline& p : tl.pools) {
        p.reserved.shrinkToFit();
        p.used.shrinkToFit();
        p.releaseThreshold.shrinkToFit();
        p.reuseFollowEventDependencies.shrinkToFit();
        p.reuseAllowOpportunistic.shrinkToFit();
        p.reuseAllowInternalDependencies.shrinkToFit();
    }
    for (StreamTimeline& s : tl.streams) {
        s.liveBytes.shrinkToFit();
        s.allocations.shrink_to_fit();
    }
    tl.allocations.shrink_to_fit();
    auto byDevHandle = [](const auto& a, const auto& b) {
        return a.info.device != b.info.device ? a.info.device < b.info.device
                                              : a.info.handle < b.info.handle;
    };
    std::sort(tl.pools.begin(), tl.pools.end(), byDevHandle);
    std::sort(tl.streams.begin(), tl.streams.end(), byDevHandle);
    std::stable_sort(tl.edges.begin(), tl.edges.end(),
                     [](const WaitEdge& a, const WaitEdge& b) { return a.waitTsNs < b.waitTsNs; });
}

void addSample(TimelineBuilder& b, Event s) {
    s.kind = EventKind::Sample; // whatever the reader filled in, these rows are samples
    b.add(s);
}

} // namespace

TimelineBuilder::TimelineBuilder() : d_(std::make_unique<Impl>()) {}
TimelineBuilder::~TimelineBuilder() = default;

void TimelineBuilder::setEntities(std::vector<DeviceInfo> devices, std::vector<PoolInfo> pools,
                                  std::vector<StreamInfo> streams) {
    d_->tl.devices = std::move(devices);
    for (PoolInfo& info : pools) {
        const uint32_t i = d_->poolAt(info.handle, static_cast<int16_t>(info.device));
        d_->tl.pools[i].info = std::move(info);
    }
    for (StreamInfo& info : streams) {
        const uint32_t i = d_->streamAt(info.handle, static_cast<int16_t>(info.device));
        d_->tl.streams[i].info = std::move(info);
    }
    // The fast lookup lists only hold entities whose device is known; the infos just replaced
    // may have none, so let them refill from events.
    d_->fastPools.clear();
    d_->fastStreams.clear();
}

void TimelineBuilder::reserve(uint64_t allocs, uint64_t events) {
    d_->tl.allocations.reserve(allocs);
    (void)events; // series sizes depend on the workload; growing them is cheap enough
}

void TimelineBuilder::add(const Event& e) { d_->add(e); }

std::shared_ptr<const Timeline> TimelineBuilder::snapshot() const {
    auto copy = std::make_shared<Timeline>(d_->tl);
    finalize(*copy);
    return copy;
}

std::shared_ptr<const Timeline> TimelineBuilder::finish() {
    auto out = std::make_shared<Timeline>(std::move(d_->tl));
    d_ = std::make_unique<Impl>();
    finalize(*out);
    return out;
}

Result<std::shared_ptr<const Timeline>>
buildTimeline(const TraceReader& reader, const std::function<void(uint64_t, uint64_t)>& progress,
              const std::atomic<bool>* cancel) {
    TimelineBuilder b;
    auto devices = reader.devices();
    if (!devices) return devices.error();
    auto pools = reader.pools();
    if (!pools) return pools.error();
    auto streams = reader.streams();
    if (!streams) return streams.error();
    b.setEntities(std::move(devices.value()), std::move(pools.value()),
                  std::move(streams.value()));
    if (auto summary = reader.summary(); summary) {
        auto it = summary->countsByKind.find(EventKind::Alloc);
        b.reserve(it == summary->countsByKind.end() ? 0 : it->second, summary->eventCount);
    }

    // Samples live in their own table; they are few (periodic), so read them whole and merge
    // them into the event stream by time.
    auto samples = reader.samples(0, std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max());
    if (!samples) return samples.error();
    const std::vector<Event>& ss = samples.value();
    size_t si = 0;
    bool cancelled = false;
    Status st = reader.forEachEvent(
        [&](const Event& e) {
            if (cancel && cancel->load(std::memory_order_relaxed)) {
                cancelled = true;
                return false;
            }
            while (si < ss.size() && ss[si].tsNs <= e.tsNs) addSample(b, ss[si++]);
            b.add(e);
            return true;
        },
        progress);
    if (cancelled) return Error{ErrorCode::Cancelled, "reading the trace was cancelled"};
    if (!st) return st.error();
    while (si < ss.size()) addSample(b, ss[si++]);
    return b.finish();
}

} // namespace poolscope
