// Timeline reconstruction. One pass over the events in seq order; state per event is a few
// integer updates on vectors of PODs (see FlatPtrMap.h for why the live set is not a std map).
#include "poolscope/TimelineBuilder.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "FlatPtrMap.h"
#include "HugeReserve.h"
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

    // The last hit of each list answers first: an alloc's free, watermarks and stream usually
    // repeat the previous event's pool. Only entries of the fast lists are cached.
    Fast lastPool{~uint64_t{0}, 0}, lastStream{~uint64_t{0}, 0};

    static int find(const std::vector<Fast>& fast, uint64_t handle) {
        for (size_t i = 0; i < fast.size(); ++i)
            if (fast[i].handle == handle) return static_cast<int>(fast[i].idx);
        return -1;
    }

    uint32_t poolAt(uint64_t handle, int16_t device) {
        if (handle == lastPool.handle) return lastPool.idx;
        return poolMiss(handle, device);
    }

    uint32_t streamAt(uint64_t handle, int16_t device) {
        if (handle == lastStream.handle) return lastStream.idx;
        return streamMiss(handle, device);
    }

    // Out of line so that the hit above inlines into the per-event code.
    [[gnu::noinline]] uint32_t poolMiss(uint64_t handle, int16_t device) {
        if (int i = find(fastPools, handle); i >= 0) {
            lastPool = {handle, static_cast<uint32_t>(i)};
            return static_cast<uint32_t>(i);
        }
        const uint32_t idx = poolSlow(handle, device);
        if (fastPools.size() < kFast && tl.pools[idx].info.device >= 0)
            fastPools.push_back({handle, idx});
        return idx;
    }

    [[gnu::noinline]] uint32_t streamMiss(uint64_t handle, int16_t device) {
        if (int i = find(fastStreams, handle); i >= 0) {
            lastStream = {handle, static_cast<uint32_t>(i)};
            return static_cast<uint32_t>(i);
        }
        const uint32_t idx = streamSlow(handle, device);
        if (fastStreams.size() < kFast && tl.streams[idx].info.device >= 0)
            fastStreams.push_back({handle, idx});
        return idx;
    }

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

    uint32_t poolSlow(uint64_t handle, int16_t device) {
        auto [it, inserted] = poolIdx.try_emplace(handle, static_cast<uint32_t>(tl.pools.size()));
        if (inserted) {
            PoolTimeline p;
            p.info.handle = handle;
            p.info.device = device;
            reservePool(p);
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
            reserveStream(s);
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

    // What the live set keeps per pointer: the allocation's index and the indices of its pool
    // and allocating stream (so a free needs no lookup; kNoIdx: too many to pack, look it up).
    static constexpr uint32_t kNoIdx = 0xFFFF;
    static uint64_t liveRef(uint32_t idx, uint32_t pi, uint32_t si) {
        return idx | uint64_t{std::min(pi, kNoIdx)} << 32 | uint64_t{std::min(si, kNoIdx)} << 48;
    }

    // Ends the allocation of a live-set entry at (ts, seq) on freeStream and updates the live
    // byte counts.
    void close(uint64_t ref, int64_t ts, uint64_t seq, uint64_t freeStream) {
        Allocation& a = tl.allocations[static_cast<uint32_t>(ref)];
        a.freeTsNs = std::max(ts, a.allocTsNs);
        a.freeSeq = seq;
        a.freeStream = freeStream;
        uint32_t pi = static_cast<uint32_t>(ref >> 32) & 0xFFFF;
        if (pi == kNoIdx) pi = poolAt(a.pool, a.device); // exists: created by the alloc
        tl.pools[pi].freeCount++;
        poolLive[pi] -= a.size;
        uint32_t si = static_cast<uint32_t>(ref >> 48);
        if (si == kNoIdx) si = streamAt(a.allocStream, a.device);
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
            if (uint64_t old = live.take(e.ptr); old != detail::FlatPtrMap::kAbsent) {
                tl.reusedWithoutFree++;
                close(old, e.tsNs, 0, 0);
            }
            live.put(e.ptr, liveRef(idx, pi, si));
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
        const uint64_t ref = live.take(e.ptr);
        if (ref == detail::FlatPtrMap::kAbsent) {
            tl.unmatchedFrees++;
            return;
        }
        tl.streams[fsi].freeCount++;
        close(ref, e.tsNs, e.seq, e.stream);
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

// Totals that only make sense at the end, and the documented orderings. shrink: give growth
// slack back (not for vectors reserved for an upper bound: their unused part was never
// touched, costs no memory, and shrinking would copy everything once more).
void finalize(Timeline& tl, bool shrink = true) {
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
        if (shrink) {
            p.reserved.shrinkToFit();
            p.used.shrinkToFit();
        }
        p.releaseThreshold.shrinkToFit();
        p.reuseFollowEventDependencies.shrinkToFit();
        p.reuseAllowOpportunistic.shrinkToFit();
        p.reuseAllowInternalDependencies.shrinkToFit();
    }
    if (shrink) {
        for (StreamTimeline& s : tl.streams) {
            s.liveBytes.shrinkToFit();
            s.allocations.shrink_to_fit();
        }
        tl.allocations.shrink_to_fit();
    }
    auto byDevHandle = [](const auto& a, const auto& b) {
        return a.info.device != b.info.device ? a.info.device < b.info.device
                                              : a.info.handle < b.info.handle;
    };
    std::sort(tl.pools.begin(), tl.pools.end(), byDevHandle);
    std::sort(tl.streams.begin(), tl.streams.end(), byDevHandle);
    // Edges arrive in wait order, so nearly always sorted already (a stable sort of millions
    // of them allocated and merged for nothing).
    auto byWait = [](const WaitEdge& a, const WaitEdge& b) { return a.waitTsNs < b.waitTsNs; };
    if (!std::is_sorted(tl.edges.begin(), tl.edges.end(), byWait))
        std::stable_sort(tl.edges.begin(), tl.edges.end(), byWait);
    tl.partial = false;
    tl.loadedUntilNs = tl.t1;
    tl.totalEvents = tl.eventCount;
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
    d_->lastPool = d_->lastStream = {~uint64_t{0}, 0};
}

void TimelineBuilder::reserve(uint64_t allocs, uint64_t events) {
    d_->tl.allocations.reserve(allocs);
    (void)events; // series sizes depend on the workload; growing them is cheap enough
}

void TimelineBuilder::reserve(const std::map<EventKind, uint64_t>& countsByKind) {
    auto n = [&](EventKind k) {
        auto it = countsByKind.find(k);
        return it == countsByKind.end() ? uint64_t{0} : it->second;
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
    for (const auto& [kind, count] : countsByKind) all += count;
    d.poolPointsHint = all + 4;
    d.streamPointsHint = n(EventKind::Alloc) + n(EventKind::Free) + 4;
    d.streamAllocsHint = n(EventKind::Alloc);
    d.reservedBig = true;
    for (PoolTimeline& p : tl.pools) d.reservePool(p);
    for (StreamTimeline& s : tl.streams) d.reserveStream(s);
}

void TimelineBuilder::add(const Event& e) { d_->add(e); }

std::shared_ptr<const Timeline> TimelineBuilder::partialSnapshot(int64_t t0, int64_t t1,
                                                                 uint64_t totalEvents) const {
    auto copy = std::make_shared<Timeline>(d_->tl);
    finalize(*copy);
    copy->partial = true;
    copy->loadedUntilNs = copy->t1;
    copy->totalEvents = std::max(totalEvents, copy->eventCount);
    if (t1 <= t0) return copy; // the whole range is not known: keep what was seen
    if (d_->anyTime) {
        copy->t0 = std::min(copy->t0, t0);
        copy->t1 = std::max(copy->t1, t1);
    } else {
        copy->t0 = t0;
        copy->t1 = t1;
    }
    return copy;
}

std::shared_ptr<const Timeline> TimelineBuilder::snapshot() const {
    auto copy = std::make_shared<Timeline>(d_->tl);
    finalize(*copy);
    return copy;
}

std::shared_ptr<const Timeline> TimelineBuilder::finish() {
    auto out = std::make_shared<Timeline>(std::move(d_->tl));
    const bool shrink = !d_->reservedBig;
    d_ = std::make_unique<Impl>();
    finalize(*out, shrink);
    return out;
}

namespace {

// Reads and decodes chunks on a second thread while the caller's thread builds: SQLite's page
// reads plus decoding are about as much work as the builder's, and the two need not wait for
// each other. At most kDepth decoded chunks (~400 KB each) are in flight; buffers circulate
// between the threads by swapping vectors, so events are decoded once and never copied.
class ChunkPipe {
public:
    explicit ChunkPipe(const TraceReader& reader) : thread_([this, &reader] { run(reader); }) {}
    ~ChunkPipe() {
        {
            std::lock_guard lk(m_);
            stop_ = true;
        }
        notFull_.notify_all();
        thread_.join();
    }
    ChunkPipe(const ChunkPipe&) = delete;
    ChunkPipe& operator=(const ChunkPipe&) = delete;

    // Swaps the next chunk into `chunk` (whose old buffer goes back to the reader); false at the
    // end, when status() says whether the reader finished or failed.
    bool next(std::vector<Event>& chunk) {
        std::unique_lock lk(m_);
        notEmpty_.wait(lk, [&] { return !full_.empty() || done_; });
        if (full_.empty()) return false;
        spare_.push_back(std::move(chunk));
        chunk = std::move(full_.front());
        full_.pop_front();
        lk.unlock();
        notFull_.notify_one();
        return true;
    }
    Status status() {
        std::lock_guard lk(m_);
        return status_;
    }

private:
    static constexpr size_t kDepth = 4;

    void run(const TraceReader& reader) {
        Status st = reader.forEachChunk([&](std::vector<Event>& chunk) {
            std::unique_lock lk(m_);
            notFull_.wait(lk, [&] { return stop_ || full_.size() < kDepth; });
            if (stop_) return false;
            full_.push_back(std::move(chunk));
            chunk.clear(); // moved-from: make it a valid empty vector either way
            if (!spare_.empty()) {
                chunk = std::move(spare_.back());
                spare_.pop_back();
            }
            lk.unlock();
            notEmpty_.notify_one();
            return true;
        });
        {
            std::lock_guard lk(m_);
            status_ = std::move(st);
            done_ = true;
        }
        notEmpty_.notify_one();
    }

    std::mutex m_;
    std::condition_variable notEmpty_, notFull_;
    std::deque<std::vector<Event>> full_;
    std::vector<std::vector<Event>> spare_;
    bool stop_ = false, done_ = false;
    Status status_;
    std::thread thread_; // last: starts after the members above exist
};

} // namespace

bool BuildOptions::defaultReadAhead() {
    return std::thread::hardware_concurrency() >= 4;
}

Result<std::shared_ptr<const Timeline>> buildTimeline(const TraceReader& reader,
                                                      const BuildOptions& options) {
    TimelineBuilder b;
    auto devices = reader.devices();
    if (!devices) return devices.error();
    auto pools = reader.pools();
    if (!pools) return pools.error();
    auto streams = reader.streams();
    if (!streams) return streams.error();
    b.setEntities(std::move(devices.value()), std::move(pools.value()),
                  std::move(streams.value()));
    // The whole trace's time range (for partial timelines), per-kind counts (capacity) and
    // event count (progress); the chunks' own count when the summary cannot be read.
    TraceSummary summary;
    uint64_t total = 0;
    if (auto s = reader.summary(); s) {
        summary = std::move(*s);
        total = summary.eventCount;
    }
    if (total == 0) total = reader.chunkedEventCount();

    // Samples live in their own table; they are few (periodic), so read them whole and merge
    // them into the event stream by time: each goes in before the first event not earlier.
    auto samples = reader.samples(0, std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max());
    if (!samples) return samples.error();
    const std::vector<Event>& ss = samples.value();
    auto counts = summary.countsByKind;
    counts[EventKind::Sample] += ss.size();
    b.reserve(counts);
    size_t si = 0;
    int64_t nextSample = ss.empty() ? std::numeric_limits<int64_t>::max() : ss[0].tsNs;

    uint64_t done = 0;
    bool partialDue = static_cast<bool>(options.onPartial);
    // The partial timeline's clock starts with the first events: the time spent opening and
    // reading samples before them would otherwise leave it next to empty.
    std::chrono::steady_clock::time_point started{};
    auto cancelled = [&] { return options.cancel && options.cancel->load(std::memory_order_relaxed); };
    // One chunk into the builder, then progress, the partial timeline when due, and cancel.
    auto consume = [&](const std::vector<Event>& chunk) {
        if (done == 0) started = std::chrono::steady_clock::now();
        for (const Event& e : chunk) {
            if (e.tsNs >= nextSample) [[unlikely]] {
                while (si < ss.size() && ss[si].tsNs <= e.tsNs) addSample(b, ss[si++]);
                nextSample = si < ss.size() ? ss[si].tsNs : std::numeric_limits<int64_t>::max();
            }
            b.add(e);
        }
        done += chunk.size();
        if (options.progress) options.progress(done, total);
        if (partialDue && done < total &&
            ((options.partialAfterEvents && done >= options.partialAfterEvents) ||
             std::chrono::steady_clock::now() - started >= options.partialAfter)) {
            partialDue = false;
            options.onPartial(b.partialSnapshot(summary.firstTsNs, summary.lastTsNs, total));
        }
        return !cancelled();
    };

    Status st;
    if (options.readAhead) {
        ChunkPipe pipe(reader);
        std::vector<Event> chunk;
        bool stopped = false;
        while (pipe.next(chunk))
            if (!consume(chunk)) {
                stopped = true;
                break;
            }
        if (!stopped) st = pipe.status();
    } else {
        st = reader.forEachChunk(consume);
    }
    if (cancelled()) return Error{ErrorCode::Cancelled, "reading the trace was cancelled"};
    if (!st) return st.error();
    while (si < ss.size()) addSample(b, ss[si++]);
    return b.finish();
}

Result<std::shared_ptr<const Timeline>>
buildTimeline(const TraceReader& reader, const std::function<void(uint64_t, uint64_t)>& progress,
              const std::atomic<bool>* cancel) {
    BuildOptions options;
    options.progress = progress;
    options.cancel = cancel;
    return buildTimeline(reader, options);
}

} // namespace poolscope
