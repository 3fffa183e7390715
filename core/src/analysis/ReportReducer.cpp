// The streaming report's pass: each event as TimelineBuilder::Impl::add (core/src/Timeline.cpp)
// takes it, keeping the Report's figures; the series go through the time merge below instead of
// into vectors. Keep the two in step: ReportStreamTest compares them on every sample.
#include "ReportReducer.h"

#include <algorithm>

#include "poolscope/EventFields.h"

namespace poolscope::detail {

// ---- FirstFailures

void FirstFailures::add(const FailedAllocation& f, bool pending) {
    // Past the n-th settled failure nothing can reach the first n: earlier ones only leave by
    // retraction, which settled ones never do, and later failures come after.
    if (settled_ >= n_) return;
    kept_[f.seq] = Rec{f, pending};
    settled_ += !pending;
}

void FirstFailures::settle(uint64_t seq) {
    auto it = kept_.find(seq);
    if (it == kept_.end() || !it->second.pending) return;
    it->second.pending = false;
    ++settled_;
    // Drop what now lies after the n-th settled failure.
    while (!kept_.empty() && (settled_ > n_ || (settled_ == n_ && std::prev(kept_.end())->second.pending))) {
        auto last = std::prev(kept_.end());
        settled_ -= !last->second.pending;
        kept_.erase(last);
    }
}

void FirstFailures::retract(uint64_t seq) {
    auto it = kept_.find(seq);
    if (it != kept_.end() && it->second.pending) kept_.erase(it);
}

std::vector<FailedAllocation> FirstFailures::first() const {
    std::vector<FailedAllocation> out;
    for (auto it = kept_.begin(); it != kept_.end() && out.size() < n_; ++it)
        out.push_back(it->second.f);
    return out;
}

// ---- the pass

ReportReducer::ReportReducer(size_t topN, bool sites) : topN_(topN), sites_(sites), firstFailed_(topN) {
    pending_.keepSeries(false);
    hazards_.setMaxKept(topN);
    fragmentation_.keepFragmentedOnly(topN);
    replay_.subscribe(&pending_, PendingFreesAnalysis::kindMask());
    replay_.subscribe(&hazards_, StreamHazardsAnalysis::kindMask());
    replay_.subscribe(&fragmentation_, FragmentationAnalysis::kindMask());
}

void ReportReducer::setMergeThread(bool on) {
    if (!on) return;
    merger_.start();
    series_.start();
}

std::vector<ReportReducer::Lent> ReportReducer::lendAnalyses() {
    std::vector<Lent> out = {{&pending_, PendingFreesAnalysis::kindMask(), false},
                             {&hazards_, StreamHazardsAnalysis::kindMask(), true},
                             {&fragmentation_, FragmentationAnalysis::kindMask(), false}};
    for (const Lent& l : out) replay_.unsubscribe(l.observer);
    return out;
}

void ReportReducer::useAnalyses(std::shared_ptr<const PieceAnalyses> done) { analysesDone_ = std::move(done); }

void ReportReducer::setEntities(std::vector<DeviceInfo> devices, const std::vector<PoolInfo>& pools,
                                const std::vector<StreamInfo>& streams) {
    deviceInfo_ = devices;
    replay_.setDevices(std::move(devices));
    for (const PoolInfo& info : pools) replay_.declarePool(info);
    for (const StreamInfo& info : streams) replay_.declareStream(info);
    mirror();
}

void ReportReducer::expectSamples(const std::vector<Event>& samples) {
    for (const Event& s : samples) {
        // Every row is applied as a sample (buildTimeline's addSample), whatever its kind says.
        Event e = s;
        e.kind = EventKind::Sample;
        const SampleFields h = SampleFields::of(e);
        if (h.reservedHigh != 0 || h.usedHigh != 0) highCaps_[e.pool].push_back(h.usedHigh);
    }
    // (The pools known so far get their caps when the series' side applies their NewPool.)
}

void ReportReducer::mirror() {
    while (pools_.size() < replay_.pools().size()) {
        const auto i = static_cast<uint32_t>(pools_.size());
        pools_.emplace_back();
        cmd(Op::NewPool, 0, replay_.pools()[i].info.handle, i);
    }
    while (streams_.size() < replay_.streams().size()) streams_.emplace_back();
}

void ReportReducer::reservedPoint(uint32_t pool, int64_t ts, uint64_t reserved) {
    Pool& p = pools_[pool];
    if (p.reservedKnown && p.lastReserved == reserved) return;
    p.reservedKnown = true;
    p.lastReserved = reserved;
    cmd(Op::Reserved, ts, reserved, pool);
}

void ReportReducer::watermarks(uint32_t pool, int64_t ts, uint64_t reserved, uint64_t used) {
    reservedPoint(pool, ts, reserved);
    Pool& p = pools_[pool];
    if (p.usedKnown && p.lastUsed == used) return;
    p.usedKnown = true;
    p.lastUsed = used;
    cmd(Op::Used, ts, used, pool);
}

void ReportReducer::driverHighs(uint32_t pool, const Event& e) {
    const SampleFields h = SampleFields::of(e);
    if (h.reservedHigh == 0 && h.usedHigh == 0) return;
    pools_[pool].usedKnown = false; // the used points may be capped below what was handed over
    cmd(Op::HighUsed, e.tsNs, h.usedHigh, pool);
    cmd(Op::HighReserved, e.tsNs, h.reservedHigh, pool);
}

void ReportReducer::knobPoint(uint32_t pool, int k, int64_t ts, uint64_t v) {
    pools_[pool].knobPushed[k] = true;
    cmd(Op::Knob, ts, v, pool, static_cast<uint32_t>(k));
}

void ReportReducer::step(int64_t t, uint32_t pool, uint32_t site, int64_t bytes, int8_t count) {
    if (sites_) cmd(Op::Step, t, static_cast<uint64_t>(bytes), pool, site, count);
}

void ReportReducer::handOver(bool last) {
    Commands& c = cmds_;
    c.poolDevice.resize(pools_.size());
    for (size_t i = 0; i < pools_.size(); ++i) c.poolDevice[i] = replay_.pools()[i].info.device;
    c.outsideDevice.resize(outside_.size());
    for (size_t i = 0; i < outside_.size(); ++i) c.outsideDevice[i] = outside_[i].device;
    c.streams = streams_.size();
    c.t1 = t1_;
    c.anyTime = anyTime_;
    c.last = last;
    Commands next = series_.spare();
    next.cmds.clear();
    series_.give(std::move(c));
    cmds_ = std::move(next);
    event_ = 0;
}

Allocation ReportReducer::allocationOf(const replay::Block& b) const {
    Allocation a;
    const Slot& s = slots_[b.tag];
    a.ptr = b.ptr;
    a.size = b.bytes;
    a.pool = replay_.pools()[b.pool].info.handle;
    a.allocStream = replay_.streams()[b.stream].info.handle;
    a.allocTsNs = b.allocTsNs;
    a.allocSeq = b.allocSeq;
    a.tid = b.tid;
    a.device = s.device;
    a.api = s.api;
    a.site = s.site;
    return a;
}

void ReportReducer::close(const replay::Block& b, int64_t ts, uint64_t seq, uint64_t freeStream) {
    const int64_t freeTs = std::max(ts, b.allocTsNs);
    pools_[b.pool].freeCount++;
    Stream& s = streams_[b.stream];
    cmd(Op::StreamLive, freeTs, replay_.streams()[b.stream].liveBytes, b.stream);
    if (seq != 0 && freeStream != replay_.streams()[b.stream].info.handle) s.crossStreamFrees++;
    step(freeTs, b.pool, slots_[b.tag].site, -static_cast<int64_t>(b.bytes), -1);
    if (!replay_.slotTags()) freeSlots_.push_back(b.tag);
}

// Mirrors Replay's retry bookkeeping: a thread's failure with 201 may turn out the runtime's own
// retry until that thread allocates again (TimelineBuilder::Impl::retried).
void ReportReducer::failures(const Event& e, const replay::Fact& f) {
    auto it = pendingByTid_.find(e.tid);
    if (it != pendingByTid_.end()) {
        const PendingFailure pf = it->second;
        pendingByTid_.erase(it);
        FirstFailures& sf = streamFailed_.try_emplace(pf.stream, 1).first->second;
        if (f.retry && f.retriedSeq == pf.seq) {
            firstFailed_.retract(pf.seq);
            sf.retract(pf.seq);
            failedTotal_--;
            streams_[pf.stream].failedCount--;
            pools_[pf.pool].failedCount--;
        } else {
            firstFailed_.settle(pf.seq);
            sf.settle(pf.seq);
        }
    }
    if (!f.failedAlloc) return;
    const FailedAllocation fa{e.tsNs, e.seq, AllocFields::of(e).bytes, e.stream, e.pool, e.result};
    const bool pending = e.result == replay::kInvalidContext;
    if (pending) pendingByTid_[e.tid] = PendingFailure{e.seq, f.stream, f.pool};
    failedTotal_++;
    firstFailed_.add(fa, pending);
    streamFailed_.try_emplace(f.stream, 1).first->second.add(fa, pending);
}

void ReportReducer::alloc(const Event& e, const replay::Fact& f, uint32_t tag) {
    Stream& s = streams_[f.stream];
    Pool& p = pools_[f.pool];
    failures(e, f);
    if (f.failedAlloc) {
        s.failedCount++;
        p.failedCount++;
        return;
    }
    const replay::Block& b = f.block;
    // A stream keeps to a pool or two, and streams take turns: each remembers its last.
    if (streamLastPool_.size() <= f.stream) streamLastPool_.resize(size_t(f.stream) + 1, replay::kNone);
    if (streamLastPool_[f.stream] != f.pool) {
        pairs_.insert({e.pool, e.stream});
        streamLastPool_[f.stream] = f.pool;
    }
    if (b.ptr != 0) {
        // The slot the tag named is now this block's.
        if (replay_.slotTags()) {
            tag = b.tag;
            if (tag >= slots_.size()) slots_.resize(size_t{tag} + 1);
        } else if (tag == slots_.size()) {
            slots_.emplace_back();
        } else {
            freeSlots_.pop_back();
        }
        slots_[tag] = Slot{e.site, e.device, static_cast<uint8_t>(AllocFields::of(e).api)};
    }
    // An imported mapping the pointer replaces has no allocation record (like its free).
    if (f.replacedLive && !f.closed.imported) close(f.closed, e.tsNs, 0, 0);
    s.allocCount++;
    s.bytesAllocated += b.bytes;
    p.allocCount++;
    p.bytesAllocated += b.bytes;
    if (b.ptr == 0) return;
    p.withPointer++;
    step(e.tsNs, f.pool, e.site, static_cast<int64_t>(b.bytes), 1);
    const uint64_t streamLive = replay_.streams()[f.stream].liveBytes;
    cmd(Op::StreamLive, e.tsNs, streamLive, f.stream);
    if (streamLive > s.peakLive) {
        s.peakLive = streamLive;
        s.peakLiveTsNs = e.tsNs;
    }
    const uint64_t poolLive = replay_.pools()[f.pool].liveBytes;
    if (poolLive > p.peakLive) {
        p.peakLive = poolLive;
        p.peakLiveTsNs = e.tsNs;
    }
}

void ReportReducer::knob(uint32_t pool, const Event& e, const replay::Fact& f) {
    const int k = replay::PoolState::knobIndex(f.knobAttr);
    if (k < 0) return;
    if (!pools_[pool].knobPushed[k] && f.knobBefore.known && e.tsNs > t0_)
        knobPoint(pool, k, t0_, f.knobBefore.value);
    knobPoint(pool, k, e.tsNs, replay_.pools()[pool].knob(f.knobAttr).value);
}

// A pointer import that replaced a live block of this trace (`b`): the replay dropped the block,
// the Timeline never ends its allocation, so it stays live to the end (a leak in the report).
void ReportReducer::orphan(const replay::Block& b) {
    if (b.imported) return;
    const Allocation a = allocationOf(b);
    orphanCount_++;
    orphanBytes_ += a.size;
    orphanTop_.push_back(a);
    if (orphanTop_.size() >= 2 * topN_ + 16) topLeaks(orphanTop_);
    orphanPools_[b.pool].bytes += a.size;
    orphanPools_[b.pool].count++;
    orphanStreams_[b.stream].bytes += a.size;
    orphanStreams_[b.stream].count++;
    if (!replay_.slotTags()) freeSlots_.push_back(b.tag);
}

// The leak order: largest first, then the earlier allocation.
void ReportReducer::topLeaks(std::vector<Allocation>& leaks) const {
    auto before = [](const Allocation& x, const Allocation& y) {
        return x.size != y.size ? x.size > y.size : x.allocSeq < y.allocSeq;
    };
    const size_t n = std::min(topN_, leaks.size());
    std::partial_sort(leaks.begin(), leaks.begin() + static_cast<ptrdiff_t>(n), leaks.end(), before);
    leaks.resize(n);
}

void ReportReducer::add(const Event& e) {
    if (!anyTime_) {
        t0_ = t1_ = e.tsNs;
        anyTime_ = true;
    } else {
        t0_ = std::min(t0_, e.tsNs);
        t1_ = std::max(t1_, e.tsNs);
    }
    ++event_;
    // The block this event may hand out gets the next free slot (following or keeping a live set
    // for others: the slot it holds there, Replay::followLive, Replay::leadLive).
    const uint32_t tag = freeSlots_.empty() ? static_cast<uint32_t>(slots_.size()) : freeSlots_.back();
    const replay::Fact& f = replay_.apply(e, tag);
    if (f.importReplaced) [[unlikely]]
        orphan(f.closed);
    if (f.newPool || f.newStream) [[unlikely]]
        mirror();
    if (e.kind == EventKind::Sample) {
        sampleCount_++;
        watermarks(f.pool, e.tsNs, e.reserved, e.used);
        driverHighs(f.pool, e);
        return;
    }
    eventCount_++;
    if (diffFacts_) [[unlikely]]
        diffFacts_->see(e, f, replay_);
    if (f.watermarks) {
        const replay::PoolState& ps = replay_.pools()[f.pool];
        watermarks(f.pool, e.tsNs, ps.reserved, ps.used);
    } else if (f.reservedOnly) {
        reservedPoint(f.pool, e.tsNs, replay_.pools()[f.pool].reserved);
    }
    switch (e.kind) {
    case EventKind::Alloc: alloc(e, f, tag); break;
    case EventKind::Free:
        if (f.unmatchedFree || (f.freed && f.block.imported)) {
            unmatchedFrees_++;
        } else if (f.freed) {
            streams_[f.stream].freeCount++;
            close(f.block, e.tsNs, e.seq, e.stream);
        }
        break;
    case EventKind::PoolCreate: {
        Pool& p = pools_[f.pool];
        const replay::PoolState& ps = replay_.pools()[f.pool];
        for (PoolAttr a : {PoolAttr::ReleaseThreshold, PoolAttr::ReuseFollowEventDependencies,
                           PoolAttr::ReuseAllowOpportunistic,
                           PoolAttr::ReuseAllowInternalDependencies})
            if (const int k = replay::PoolState::knobIndex(a); !p.knobPushed[k])
                knobPoint(f.pool, k, e.tsNs, ps.knob(a).value);
        break;
    }
    case EventKind::PoolSetAttribute:
    case EventKind::KnobChange:
        if (f.knobChanged) knob(f.pool, e, f);
        break;
    case EventKind::PoolTrimTo: trims_++; break;
    case EventKind::ImplicitRelease: implicitReleases_++; break;
    case EventKind::PoolSetAccess:
        accessGrants_++;
        if (!e.failed() && f.pool != replay::kNone) applyPoolAccess(pools_[f.pool].access, e);
        break;
    case EventKind::PeerCopy: {
        const PeerCopyFields c = PeerCopyFields::of(e);
        auto [it, added] = peerCopies_.try_emplace({c.srcDevice, c.dstDevice});
        if (added) it->second.srcDevice = c.srcDevice, it->second.dstDevice = c.dstDevice;
        it->second.add(e);
        break;
    }
    case EventKind::StreamWaitEvent:
        if (f.edge) {
            waitEdges_++;
            edgeStreams_.insert({replay_.streams()[f.edgeFrom].info.handle, e.stream});
        }
        break;
    case EventKind::StreamSynchronize:
    case EventKind::EventSynchronize:
    case EventKind::ContextSynchronize: syncCount_++; break;
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

ReportReducer::Outside& ReportReducer::outsideAt(uint32_t idx) {
    // The builder's order: the replay's, entries created up to the one named.
    while (outside_.size() < replay_.outside().size()) {
        outside_.emplace_back();
        outside_.back().device = replay_.outside()[outside_.size() - 1].device;
    }
    return outside_[idx];
}

void ReportReducer::memSeries(const Event& e, const replay::MemBlock& m) {
    if (m.kind == EventKind::DeviceAlloc) {
        uint32_t idx = 0;
        for (; idx < replay_.outside().size(); ++idx)
            if (replay_.outside()[idx].device == m.device) break;
        if (idx == replay_.outside().size()) return;
        const replay::OutsideState& os = replay_.outside()[idx];
        Outside& o = outsideAt(idx);
        if (m.api == static_cast<uint8_t>(DeviceAllocApi::Managed)) {
            o.managedPeakBytes = os.managedPeakBytes;
        } else {
            cmd(Op::OutsideLive, e.tsNs, os.liveBytes, idx);
            if (os.peakBytes > o.peakBytes) {
                o.peakBytes = os.peakBytes;
                o.peakTsNs = os.peakTsNs;
            }
        }
        return;
    }
    const replay::PinnedState& ps = replay_.pinned();
    pinned_.allocatedPeak = ps.allocatedPeak;
    pinned_.registeredPeak = ps.registeredPeak;
    if (ps.totalPeak > pinned_.totalPeak) {
        pinned_.totalPeak = ps.totalPeak;
        pinned_.totalPeakTsNs = ps.totalPeakTsNs;
    }
}

void ReportReducer::memReleased(const Event& e, const replay::MemBlock& m) {
    memSeries(e, m);
    if (m.kind != EventKind::DeviceAlloc) return;
    for (uint32_t i = 0; i < replay_.outside().size(); ++i)
        if (replay_.outside()[i].device == m.device) outsideAt(i).freeCount++;
}

void ReportReducer::beyondPool(const Event& e, const replay::Fact& f) {
    switch (e.kind) {
    case EventKind::DeviceAlloc: {
        Outside& o = outsideAt(f.outside);
        if (e.failed()) {
            o.failedCount++;
            return;
        }
        o.allocCount++;
        break;
    }
    case EventKind::HostAlloc:
    case EventKind::HostRegister:
        if (!pinned_.countPin(e)) return;
        break;
    case EventKind::DeviceFree:
        if (f.freed && f.block.imported) { // an imported mapping: no allocation record
            unmatchedFrees_++;
            return;
        }
        if (f.freed) { // a pool block freed with cudaFree
            close(f.block, e.tsNs, e.seq, 0);
            return;
        }
        if (f.unmatchedFree) unmatchedFrees_++;
        if (f.deviceSync) {
            Outside& o = outsideAt(f.outside);
            const uint64_t callNs = ReleaseMemFields::of(e).callNs;
            o.syncFrees++;
            o.syncCallNs += callNs;
            cmd(Op::Ask, e.tsNs, 0, 0);
        }
        break;
    case EventKind::HostFree:
        if (f.memReleased) pinned_.freeCount++;
        break;
    case EventKind::HostUnregister:
        if (f.memReleased) pinned_.unregisterCount++;
        break;
    default: break;
    }
    if (f.memUnmatched) unmatchedMemReleases_++;
    if (f.memAllocated) memSeries(e, f.mem);
    if (f.memReleased) memReleased(e, f.mem);
}

bool ReportReducer::anyPolicyOff() const {
    for (uint32_t i = 0; i < sPools_.size(); ++i)
        for (PoolAttr a : {PoolAttr::ReuseFollowEventDependencies, PoolAttr::ReuseAllowOpportunistic,
                           PoolAttr::ReuseAllowInternalDependencies}) {
            const SeriesPool& p = sPools_[i];
            const int k = replay::PoolState::knobIndex(a);
            if (p.knobZero[k]) return true;
            // Off from the start without any change: the value the Timeline puts there.
            if (p.knobs[k].empty() && knobAtEnd(i, a).points && knobAtEnd(i, a).value == 0)
                return true;
            bool zero = false;
            p.knobs[k].forEachBuffered([&](int64_t, uint64_t v) { zero = zero || v == 0; });
            if (zero) return true;
        }
    return false;
}

} // namespace poolscope::detail
