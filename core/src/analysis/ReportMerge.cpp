// The streaming report's time merge (ReportReducer.h) and its end: the figures the Timeline-based
// report reads from finished series (analysis/Report.cpp maxIdle, meanIdle, valueAt; Timeline.cpp
// finalize's sumOf; CallSites.cpp topSitesAtPeaks) computed from the points in time order.
#include "ReportReducer.h"

#include "PieceRead.h"

#include <algorithm>

#include "poolscope/view/EntityNames.h"

namespace poolscope::detail {

uint32_t ReportReducer::deviceIndex(int device) {
    for (uint32_t i = 0; i < devices_.size(); ++i)
        if (devices_[i].device == device) return i;
    devices_.push_back(Device{});
    devices_.back().device = device;
    return static_cast<uint32_t>(devices_.size() - 1);
}

// The device its points are summed under: the pool's device when the first of them was applied.
// Until a point above 0 went in, the pool may still move to the device it learns later (nothing
// of it is in the sums); after that a move is counted as out of order in finish().
ReportReducer::Device& ReportReducer::poolDevice(uint32_t pool, const Batch& b) {
    MergePool& p = merge_[pool];
    const int now = b.poolDevice[pool];
    if (p.device == replay::kNone || (!p.seen && p.deviceOrdinal != now)) {
        p.deviceOrdinal = now;
        p.device = deviceIndex(now);
    }
    Device& d = devices_[p.device];
    if (!d.touched) touchedDevices_.push_back(p.device);
    d.touched = true;
    return d;
}

void ReportReducer::advance() { handOver(false); }

// The batch holds sorted runs (a series' points, the steps): merged pairwise, O(n log runs).
// Which series goes first at one instant does not matter, every figure is taken once it is
// complete.
void ReportReducer::mergeRuns(Batch& b) {
    auto before = [](const Entry& x, const Entry& y) { return x.t < y.t; };
    std::vector<size_t>& runs = b.runs;
    while (runs.size() > 2) {
        size_t n = 1;
        for (size_t i = 0; i + 2 < runs.size(); i += 2) {
            std::inplace_merge(b.entries.begin() + static_cast<ptrdiff_t>(runs[i]),
                               b.entries.begin() + static_cast<ptrdiff_t>(runs[i + 1]),
                               b.entries.begin() + static_cast<ptrdiff_t>(runs[i + 2]), before);
            runs[n++] = runs[i + 2];
        }
        if (runs.size() % 2 == 0) runs[n++] = runs.back();
        runs.resize(n);
    }
}

void ReportReducer::flush(int64_t frontier, bool all, const Commands& c) {
    Batch b = merger_.spare();
    std::vector<Entry>& entries = b.entries;
    entries.clear();
    b.runs.assign(1, 0);
    b.questions.clear();
    auto endRun = [&] {
        if (entries.size() != b.runs.back()) b.runs.push_back(entries.size());
    };
    size_t held = 0;
    // A series' points before the frontier as one sorted run, written in place (sized by
    // dueBefore, cut to what was handed out): no call per point.
    auto emitRun = [&](StepTail& s, uint32_t i, Kind kind) {
        const size_t at = entries.size();
        entries.resize(at + s.dueBefore(frontier, all));
        Entry* out = entries.data() + at;
        s.emitBefore(frontier, all, [&](int64_t t, uint64_t v) { *out++ = Entry{t, v, i, 0, kind, 0}; });
        entries.resize(static_cast<size_t>(out - entries.data()));
        endRun();
    };
    auto keepActive = [&](std::vector<uint32_t>& list, auto&& emit) {
        size_t n = 0;
        for (uint32_t i : list)
            if (emit(i)) list[n++] = i;
        list.resize(n);
    };
    keepActive(activePools_, [&](uint32_t i) {
        SeriesPool& p = sPools_[i];
        emitRun(p.reserved, i, Kind::Reserved);
        emitRun(p.used, i, Kind::Used);
        size_t left = p.reserved.buffered() + p.used.buffered();
        for (int k = 0; k < 4; ++k) {
            p.knobs[k].emitBefore(frontier, all, [&](int64_t, uint64_t v) {
                p.knobZero[k] = p.knobZero[k] || v == 0;
            });
            left += p.knobs[k].buffered();
        }
        held += left;
        return p.active = left != 0;
    });
    keepActive(activeStreams_, [&](uint32_t i) {
        SeriesLive& s = sStreams_[i];
        emitRun(s.live, i, Kind::StreamLive);
        held += s.live.buffered();
        return s.active = s.live.buffered() != 0;
    });
    keepActive(activeOutside_, [&](uint32_t i) {
        SeriesLive& o = sOutside_[i];
        emitRun(o.live, i, Kind::OutsideLive);
        held += o.live.buffered();
        return o.active = o.live.buffered() != 0;
    });
    while (!steps_.empty() && (all || steps_.top().t < frontier)) {
        entries.push_back(steps_.top());
        steps_.pop();
    }
    endRun();
    // The questions due, with the pools' peaks as they are now (a flush on one thread answered
    // them here, between the same events).
    while (!questions_.empty() && (all || questions_.top().t < frontier)) {
        const Question q = questions_.top();
        questions_.pop();
        if (q.peak && q.version != sPools_[q.idx].peakVersion) continue; // a later peak replaced it
        b.questions.push_back(q);
    }
    if (!entries.empty() || !b.questions.empty()) {
        b.poolDevice = c.poolDevice;
        b.outsideDevice = c.outsideDevice;
        b.streams = c.streams;
        b.frontier = frontier;
        b.all = all;
        merger_.give(std::move(b));
    } else {
        merger_.recycle(std::move(b));
    }
    if (!all) done_ = std::max(done_, frontier);
    // Hold at most kMaxHeld points: a denser trace gets a shorter horizon, while it lasts.
    held += steps_.size() + questions_.size();
    if (held > kMaxHeld) horizon_ = std::max<int64_t>(horizon_ / 2, 1'000'000);
    else if (held < kMaxHeld / 4) horizon_ = std::min(horizon_ * 2, kHorizonNs);
}

// The merge's thread finishes what it was handed and ends.
void ReportReducer::merged() { merger_.stop(false); }

void ReportReducer::run(Batch& b) {
    if (merge_.size() < b.poolDevice.size()) merge_.resize(b.poolDevice.size());
    if (streamCur_.size() < b.streams) streamCur_.resize(b.streams, 0);
    mergeRuns(b);
    const std::vector<Entry>& batch = b.entries;
    size_t next = 0; // question
    for (size_t i = 0; i < batch.size();) {
        const int64_t t = batch[i].t;
        answer(b, next, t, false);
        for (; i < batch.size() && batch[i].t == t; ++i) apply(batch[i], b);
        settleTouched(t);
    }
    answer(b, next, b.frontier, b.all);
}

void ReportReducer::apply(const Entry& e, const Batch& b) {
    auto touchPool = [&](MergePool& p) {
        if (!p.idleTouched && !p.stepTouched) touchedPools_.push_back(e.idx);
    };
    switch (e.kind) {
    case Kind::Reserved: {
        MergePool& p = merge_[e.idx];
        Device& d = poolDevice(e.idx, b);
        d.pools = d.pools - p.curReserved + e.v; // wraps as sumOf does
        p.curReserved = e.v;
        p.seen = p.seen || e.v != 0;
        touchPool(p);
        p.idleTouched = true;
        break;
    }
    case Kind::Used: {
        MergePool& p = merge_[e.idx];
        Device& d = poolDevice(e.idx, b);
        d.used = d.used - p.curUsed + e.v;
        p.curUsed = e.v;
        p.seen = p.seen || e.v != 0;
        if (e.t <= 0) p.usedAtZero = e.v;
        touchPool(p);
        p.idleTouched = true;
        break;
    }
    case Kind::StreamLive: {
        uint64_t& cur = streamCur_[e.idx];
        streamsHolding_ += (cur == 0) - (e.v == 0);
        cur = e.v;
        break;
    }
    case Kind::OutsideLive: {
        const uint32_t di = deviceIndex(b.outsideDevice[e.idx]);
        Device& d = devices_[di];
        d.outside = e.v;
        if (!d.touched) touchedDevices_.push_back(di);
        d.touched = true;
        break;
    }
    case Kind::Step: {
        MergePool& p = merge_[e.idx];
        p.stepLive += static_cast<int64_t>(e.v);
        p.ledger.add(e.site, static_cast<int64_t>(e.v), e.count);
        touchPool(p);
        p.stepTouched = true;
        break;
    }
    }
}

// The instant t is complete: the walks of Report.cpp's maxIdle and meanIdle, topSitesAtPeaks'
// sweep for the most live bytes, and finalize's device sums take their step here.
void ReportReducer::settleTouched(int64_t t) {
    for (uint32_t i : touchedPools_) {
        MergePool& p = merge_[i];
        if (p.idleTouched) {
            const uint64_t g = p.curReserved > p.curUsed ? p.curReserved - p.curUsed : 0;
            if (g > p.maxIdle) {
                p.maxIdle = g;
                p.maxIdleTsNs = t;
            }
            // In long double, as Report.cpp's meanIdle: times near INT64_MIN (a damaged trace)
            // must not overflow int64_t.
            if (p.started)
                p.area += static_cast<long double>(p.gap) *
                          (static_cast<long double>(t) - static_cast<long double>(p.prev));
            else p.first = t;
            p.started = true;
            p.prev = t;
            p.gap = g;
            p.idleTouched = false;
        }
        if (p.stepTouched) {
            if (p.stepLive > p.stepBest) {
                p.stepBest = p.stepLive;
                p.stepAt = t;
                p.ledger.snapshot(1);
            }
            p.stepTouched = false;
        }
    }
    touchedPools_.clear();
    for (uint32_t i : touchedDevices_) {
        Device& d = devices_[i];
        if (d.pools > d.poolsPeak) {
            d.poolsPeak = d.pools;
            d.poolsPeakTsNs = t;
        }
        if (d.used > d.usedPeak) {
            d.usedPeak = d.used;
            d.usedPeakTsNs = t;
        }
        const uint64_t with = d.pools + d.outside;
        if (with > d.withPoolsPeak) {
            d.withPoolsPeak = with;
            d.withPoolsPeakTsNs = t;
        }
        d.touched = false;
    }
    touchedDevices_.clear();
}

// The batch's questions about instants before upTo (all of them with `all`): Series::valueAt
// there.
void ReportReducer::answer(const Batch& b, size_t& next, int64_t upTo, bool all) {
    while (next < b.questions.size() && (all || b.questions[next].t < upTo)) {
        const Question q = b.questions[next++];
        if (!q.peak) {
            deviceSyncsDuringPoolWork_ += streamsHolding_ > 0;
            continue;
        }
        MergePool& p = merge_[q.idx];
        p.usedAtPeak = p.curUsed;
        if (sites_) p.ledger.snapshot(0);
    }
}

// A settable attribute's series at the end, as the Timeline has it: its points, else the value
// the replay knows without any change in the trace (read by the collector when it first saw the
// pool, or a created pool's default), which the Timeline puts at the pool's start.
ReportReducer::KnobEnd ReportReducer::knobAtEnd(uint32_t pool, PoolAttr a) const {
    const StepTail& s = sPools_[pool].knobs[replay::PoolState::knobIndex(a)];
    if (!s.empty()) return KnobEnd{s.size(), s.back()};
    const replay::Knob& k = replay_.pools()[pool].knob(a);
    return k.known ? KnobEnd{1, k.value} : KnobEnd{0, 0};
}

void ReportReducer::finish(Report& r, std::vector<analysis::PoolSites>* sites, size_t n) {
    handOver(true);
    series_.stop(false); // its last flush handed to the merge
    merged();
    if (merge_.size() < pools_.size()) merge_.resize(pools_.size());
    if (sPools_.size() < pools_.size()) sPools_.resize(pools_.size());
    r.t0 = t0_;
    r.t1 = t1_;
    r.eventCount = eventCount_;
    r.sampleCount = sampleCount_;
    r.unmatchedFrees = unmatchedFrees_;
    r.reusedWithoutFree = replay_.reusedWithoutFree();
    r.waitEdges = waitEdges_;
    r.syncCount = syncCount_;
    r.implicitReleases = implicitReleases_;
    r.trims = trims_;
    r.devices = deviceInfo_;

    // Live at the end: the replay's live blocks, and the blocks pointer imports took over.
    std::vector<Held> poolHeld(pools_.size()), streamHeld(streams_.size());
    std::vector<Allocation> top = orphanTop_; // then every live one: bounded by the live set
    r.leakCount = orphanCount_;
    r.leakBytes = orphanBytes_;
    for (const auto& [i, h] : orphanPools_) poolHeld[i] = h;
    for (const auto& [i, h] : orphanStreams_) streamHeld[i] = h;
    replay_.forEachLive([&](const replay::Block& b) {
        if (b.imported) return;
        const Allocation a = allocationOf(b);
        r.leakCount++;
        r.leakBytes += a.size;
        poolHeld[b.pool].bytes += a.size;
        poolHeld[b.pool].count++;
        streamHeld[b.stream].bytes += a.size;
        streamHeld[b.stream].count++;
        top.push_back(a);
    });
    topLeaks(top);
    r.topLeaks = std::move(top);

    const Fragmentation& frag = analysesDone_ ? analysesDone_->fragmentation.result() : fragmentation_.result();
    const EntityOrder order = entityOrder(replay_);
    for (uint32_t i : order.pools) {
        const Pool& p = pools_[i];
        const SeriesPool& sp = sPools_[i];
        const MergePool& m = merge_[i];
        PoolReport pr;
        pr.info = replay_.pools()[i].info;
        // Its bytes were summed under the device known then; the Timeline sums them under the
        // last one (device totals, and the device's memory outside the pools with them).
        if (m.seen && m.deviceOrdinal != pr.info.device) lateEvents_++;
        pr.hasWatermarks = !sp.reserved.empty() || !sp.used.empty();
        pr.peakReserved = sp.peakReserved;
        pr.peakReservedTsNs = sp.peakReservedTsNs;
        pr.usedAtPeakReserved = sp.peakVersion ? m.usedAtPeak : m.usedAtZero;
        pr.idleAtPeak =
            pr.peakReserved > pr.usedAtPeakReserved ? pr.peakReserved - pr.usedAtPeakReserved : 0;
        pr.maxIdle = m.maxIdle;
        pr.maxIdleTsNs = m.maxIdleTsNs;
        pr.peakUsed = sp.peakUsed;
        pr.peakUsedTsNs = sp.peakUsedTsNs;
        pr.peakLive = p.peakLive;
        pr.bytesAllocated = p.bytesAllocated;
        pr.allocCount = p.allocCount;
        pr.freeCount = p.freeCount;
        pr.failedCount = p.failedCount;
        pr.liveAtEndBytes = poolHeld[i].bytes;
        pr.liveAtEndCount = poolHeld[i].count;
        pr.finalReserved = sp.reserved.empty() ? 0 : sp.reserved.back();
        pr.finalUsed = sp.used.empty() ? 0 : sp.used.back();
        const KnobEnd th = knobAtEnd(i, PoolAttr::ReleaseThreshold);
        pr.thresholdKnown = th.points != 0;
        pr.releaseThreshold = th.value;
        pr.thresholdChanges = th.points;
        auto policy = [&](PoolAttr a) -> int8_t {
            const KnobEnd k = knobAtEnd(i, a);
            return k.points == 0 ? -1 : k.value != 0;
        };
        pr.reuseFollowEventDependencies = policy(PoolAttr::ReuseFollowEventDependencies);
        pr.reuseAllowOpportunistic = policy(PoolAttr::ReuseAllowOpportunistic);
        pr.reuseAllowInternalDependencies = policy(PoolAttr::ReuseAllowInternalDependencies);
        if (!sp.reserved.empty())
            pr.meanIdle = m.prev <= m.first
                              ? m.gap
                              : static_cast<uint64_t>(m.area / (static_cast<long double>(m.prev) -
                                                                static_cast<long double>(m.first)));
        if (const Fragmentation::Pool* f = frag.pool(pr.info.handle)) {
            pr.growths = f->growths;
            pr.growthsWhileIdle = f->growthsWhileIdle;
            pr.fragmentedGrowths = f->fragmentedGrowths;
            pr.failuresWhileIdle = f->failuresWhileIdle;
            pr.fragmentedFailures = f->fragmentedFailures;
        }
        pr.access = p.access;
        r.pools.push_back(std::move(pr));
    }
    // Each device's pools together (Timeline's deviceTotals): the pools are in device order.
    for (const PoolReport& pr : r.pools) {
        if (pr.info.device < 0) continue;
        if (r.deviceTotals.empty() || r.deviceTotals.back().device != pr.info.device) {
            DeviceTotals t;
            t.device = pr.info.device;
            for (const Device& d : devices_)
                if (d.device == t.device) {
                    t.peakReserved = d.poolsPeak;
                    t.peakReservedTsNs = d.poolsPeakTsNs;
                    t.peakUsed = d.usedPeak;
                    t.peakUsedTsNs = d.usedPeakTsNs;
                }
            r.deviceTotals.push_back(t);
        }
        DeviceTotals& t = r.deviceTotals.back();
        t.addPoolCounts(pr);
        t.finalReserved += pr.finalReserved;
        t.finalUsed += pr.finalUsed;
    }
    for (const auto& [dirs, c] : peerCopies_) r.peerCopies.push_back(c);
    r.peerAccessGrants = accessGrants_;
    const PendingFrees& pending = analysesDone_ ? analysesDone_->pending.result() : pending_.result();
    for (uint32_t i : order.streams) {
        const Stream& s = streams_[i];
        StreamReport sr;
        sr.info = replay_.streams()[i].info;
        sr.allocCount = s.allocCount;
        sr.bytesAllocated = s.bytesAllocated;
        sr.freeCount = s.freeCount;
        sr.failedCount = s.failedCount;
        sr.peakLive = s.peakLive;
        sr.peakLiveTsNs = s.peakLiveTsNs;
        sr.liveAtEndBytes = streamHeld[i].bytes;
        sr.liveAtEndCount = streamHeld[i].count;
        if (const PendingFrees::Stream* pf = pending.stream(sr.info.handle)) {
            sr.peakPendingFree = pf->peak;
            sr.peakPendingFreeTsNs = pf->peakTsNs;
        }
        sr.crossStreamFrees = s.crossStreamFrees;
        r.streams.push_back(std::move(sr));
    }

    r.failedCount = failedTotal_;
    r.failed = firstFailed_.first();
    const StreamHazards& hz = analysesDone_ ? analysesDone_->hazards.result() : hazards_.result();
    r.unorderedFrees = hz.unorderedFrees;
    r.unorderedReuses = hz.unorderedReuses;
    r.hazardsTruncated = hz.truncated;
    r.freedForgotten = hz.freedForgotten;
    r.hazards.assign(hz.hazards.begin(), hz.hazards.begin() + static_cast<ptrdiff_t>(
                                                                   std::min(hz.hazards.size(), topN_)));
    for (const PoolGrowth& g : frag.events)
        if (r.fragmented.size() < topN_ && g.fragmented()) r.fragmented.push_back(g);

    std::vector<uint32_t> outsideOrder(outside_.size());
    for (uint32_t i = 0; i < outsideOrder.size(); ++i) outsideOrder[i] = i;
    std::sort(outsideOrder.begin(), outsideOrder.end(),
              [&](uint32_t a, uint32_t b) { return outside_[a].device < outside_[b].device; });
    for (uint32_t i : outsideOrder) {
        const Outside& o = outside_[i];
        OutsideReport orr;
        orr.device = o.device;
        orr.peakBytes = o.peakBytes;
        orr.peakTsNs = o.peakTsNs;
        orr.liveAtEndBytes = i < replay_.outside().size() ? replay_.outside()[i].liveBytes : 0;
        orr.managedPeakBytes = o.managedPeakBytes;
        orr.allocCount = o.allocCount;
        orr.freeCount = o.freeCount;
        orr.failedCount = o.failedCount;
        orr.syncFrees = o.syncFrees;
        orr.syncCallNs = o.syncCallNs;
        for (const Device& d : devices_)
            if (d.device == o.device) {
                orr.poolsPeakReserved = d.poolsPeak;
                orr.combinedPeak = d.withPoolsPeak;
                orr.combinedPeakTsNs = d.withPoolsPeakTsNs;
            }
        r.deviceSyncs += o.syncFrees;
        r.outside.push_back(orr);
    }
    r.deviceSyncsDuringPoolWork = deviceSyncsDuringPoolWork_;
    PinnedReport& pr = r.pinned;
    pr.allocatedPeak = pinned_.allocatedPeak;
    pr.registeredPeak = pinned_.registeredPeak;
    pr.totalPeak = pinned_.totalPeak;
    pr.totalPeakTsNs = pinned_.totalPeakTsNs;
    pr.allocatedAtEnd = replay_.pinned().allocatedBytes;
    pr.registeredAtEnd = replay_.pinned().registeredBytes;
    pr.allocCount = pinned_.allocCount;
    pr.freeCount = pinned_.freeCount;
    pr.registerCount = pinned_.registerCount;
    pr.unregisterCount = pinned_.unregisterCount;
    pr.failedCount = pinned_.failedCount;
    std::copy(std::begin(pinned_.allocatedByFlags), std::end(pinned_.allocatedByFlags),
              pr.allocatedByFlags);
    std::copy(std::begin(pinned_.allocsByFlags), std::end(pinned_.allocsByFlags), pr.allocsByFlags);
    r.unmatchedMemReleases = unmatchedMemReleases_;
    r.outOfOrderEvents = lateEvents_;

    std::vector<std::pair<uint64_t, uint64_t>> poolCounts(pools_.size());
    for (size_t i = 0; i < pools_.size(); ++i) poolCounts[i] = {pools_[i].allocCount, sPools_[i].peakReserved};
    r.names = laneNames(replay_, order, deviceInfo_, poolCounts, pairs_, edgeStreams_, streamFailed_);

    if (!sites) return;
    for (const PoolReport& rp : r.pools) {
        const uint32_t i = replay_.poolIndex(rp.info.handle);
        const Pool& p = pools_[i];
        const MergePool& m = merge_[i];
        analysis::PoolSites ps;
        ps.pool = rp.info.handle;
        const bool reservedPeak = rp.hasWatermarks && rp.peakReserved > 0;
        if (!reservedPeak && p.withPointer == 0) continue;
        int slot = 0;
        if (reservedPeak) {
            ps.atTsNs = rp.peakReservedTsNs;
            ps.reserved = rp.peakReserved;
        } else {
            ps.atPeakReserved = false;
            ps.atTsNs = m.stepAt;
            slot = 1;
        }
        if (m.ledger.taken(slot)) ps.top = m.ledger.sites(slot, ps.liveBytes, ps.liveCount);
        std::sort(ps.top.begin(), ps.top.end(), [](const analysis::SiteBytes& a, const analysis::SiteBytes& b) {
            return a.bytes != b.bytes ? a.bytes > b.bytes : a.site < b.site;
        });
        if (ps.top.size() > n) ps.top.resize(n);
        sites->push_back(std::move(ps));
    }
}

EntityOrder entityOrder(const replay::Replay& replay) {
    auto byDevHandle = [](const auto& a, const auto& b) {
        return a.device != b.device ? a.device < b.device : a.handle < b.handle;
    };
    EntityOrder o;
    o.pools.resize(replay.pools().size());
    o.streams.resize(replay.streams().size());
    for (uint32_t i = 0; i < o.pools.size(); ++i) o.pools[i] = i;
    for (uint32_t i = 0; i < o.streams.size(); ++i) o.streams[i] = i;
    std::sort(o.pools.begin(), o.pools.end(), [&](uint32_t a, uint32_t b) {
        return byDevHandle(replay.pools()[a].info, replay.pools()[b].info);
    });
    std::sort(o.streams.begin(), o.streams.end(), [&](uint32_t a, uint32_t b) {
        return byDevHandle(replay.streams()[a].info, replay.streams()[b].info);
    });
    return o;
}

view::EntityNames laneNames(const replay::Replay& replay, const EntityOrder& order,
                            const std::vector<DeviceInfo>& devices,
                            const std::vector<std::pair<uint64_t, uint64_t>>& poolCounts,
                            const std::set<std::pair<uint64_t, uint64_t>>& pairs,
                            const std::set<std::pair<uint64_t, uint64_t>>& edgeStreams,
                            const std::unordered_map<uint32_t, FirstFailures>& streamFailed) {
    Timeline lanes;
    lanes.devices = devices;
    for (uint32_t i : order.pools) {
        PoolTimeline pt;
        pt.info = replay.pools()[i].info;
        pt.allocCount = poolCounts[i].first;
        pt.peakReserved = poolCounts[i].second;
        lanes.pools.push_back(std::move(pt));
    }
    for (uint32_t i : order.streams) {
        StreamTimeline st;
        st.info = replay.streams()[i].info;
        lanes.streams.push_back(std::move(st));
    }
    for (const auto& [pool, stream] : pairs) {
        Allocation a;
        a.pool = pool;
        a.allocStream = stream;
        lanes.allocations.push_back(a);
    }
    for (const auto& [from, to] : edgeStreams) {
        WaitEdge w;
        w.fromStream = from;
        w.toStream = to;
        lanes.edges.push_back(w);
    }
    for (const auto& [stream, ff] : streamFailed)
        for (const FailedAllocation& f : ff.first()) lanes.failed.push_back(f);
    return view::EntityNames::fromTimeline(lanes);
}

} // namespace poolscope::detail
