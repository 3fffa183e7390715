// The range of a racing pool's peak reserved (the bounds and why they hold: RaceRange.h).
#include "poolscope/whatif/RaceRange.h"

#include <algorithm>
#include <limits>

#include "poolscope/Timeline.h"

#include "RoundUp.h"

namespace poolscope::whatif {

namespace {

using detail::roundUp;

uint64_t addSat(uint64_t a, uint64_t b) {
    return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max()
                                                        : a + b;
}

uint64_t absDiff(int64_t a, int64_t b) {
    return a > b ? static_cast<uint64_t>(a) - static_cast<uint64_t>(b)
                 : static_cast<uint64_t>(b) - static_cast<uint64_t>(a);
}

} // namespace

RaceBounds::RaceBounds(uint64_t growthGranule, uint64_t blockAlign)
    : granule_(std::max<uint64_t>(growthGranule, 1)), align_(std::max<uint64_t>(blockAlign, 1)) {}

uint32_t RaceBounds::kindMask() {
    uint32_t m = 0;
    for (EventKind k : {EventKind::Alloc, EventKind::Free, EventKind::DeviceFree,
                        EventKind::StreamSynchronize, EventKind::ContextSynchronize})
        m |= 1u << static_cast<unsigned>(k);
    return m;
}

void RaceBounds::Demand::noteHigh() {
    high = std::max(high, addSat(addSat(live, handedOver), pendTotal));
    highAsRecorded = std::max(highAsRecorded, addSat(live, pendTotal));
}

RaceBounds::Demand& RaceBounds::demand(uint32_t pool, uint32_t tid) {
    for (const Recent& c : recent_)
        if (c.d && c.pool == pool && c.tid == tid) return *c.d;
    if (pool >= pools_.size()) {
        pools_.resize(size_t(pool) + 1);
        for (Recent& c : recent_) c = Recent{};
    }
    Demand& d = pools_[pool].byThread[tid];
    recent_[nextRecent_] = Recent{pool, tid, &d};
    nextRecent_ = (nextRecent_ + 1) % kRecent;
    return d;
}

uint64_t* RaceBounds::Demand::pendingOf(uint32_t stream) {
    if (lastPending && stream == lastStream) [[likely]]
        return lastPending;
    auto it = pending.find(stream);
    if (it == pending.end()) return nullptr;
    lastStream = stream;
    return lastPending = &it->second;
}

uint64_t& RaceBounds::Demand::pendingAt(uint32_t stream) {
    if (lastPending && stream == lastStream) [[likely]]
        return *lastPending;
    lastStream = stream;
    lastPending = &pending[stream];
    return *lastPending;
}

void RaceBounds::onFact(const replay::Fact& f, const replay::Replay& r) {
    const Event& e = *f.event;
    if (f.allocated) {
        const replay::Block& b = f.block;
        if (b.ptr == 0 || b.bytes == 0 || f.stream == replay::kNone || b.pool == replay::kNone)
            return;
        Demand& d = demand(b.pool, e.tid);
        PoolRace& p = pools_[b.pool];
        p.any = true;
        p.largestBlock = std::max(p.largestBlock, b.bytes);
        // The details pane's notion of a race: another thread's allocation from the pool
        // within the window (either side: the threads' clocks interleave in seq order).
        if ((p.hasLast && p.lastTid != e.tid && absDiff(p.lastTs, e.tsNs) <= Timeline::kRaceWindowNs) ||
            (p.hasOther && p.otherTid != e.tid && absDiff(p.otherTs, e.tsNs) <= Timeline::kRaceWindowNs))
            p.racingAllocs++;
        if (p.hasLast && p.lastTid != e.tid) {
            p.otherTid = p.lastTid;
            p.otherTs = p.lastTs;
            p.hasOther = true;
        }
        p.lastTid = e.tid;
        p.lastTs = e.tsNs;
        p.hasLast = true;
        // Same-stream reuse of what this thread itself freed on the stream, else new demand.
        if (uint64_t* v = d.pendingOf(f.stream)) {
            const uint64_t t = std::min(*v, roundUp(b.bytes, align_));
            *v -= t;
            d.pendTotal -= std::min(d.pendTotal, t);
        }
        d.live = addSat(d.live, roundUp(b.bytes, align_));
        d.allocs++;
        d.noteHigh();
        return;
    }
    if (f.freed) {
        const replay::Block& b = f.block;
        if (b.imported || b.pool == replay::kNone || b.bytes == 0) return;
        const uint64_t bytes = roundUp(b.bytes, align_);
        Demand& owner = demand(b.pool, b.tid);
        owner.live -= std::min(owner.live, bytes);
        if (b.tid != e.tid) {
            // The allocating thread may run on for any part of its calls before this free.
            owner.handedOver = addSat(owner.handedOver, bytes);
            pools_[b.pool].crossThreadFrees++;
        }
        // A cudaFree of a pool block, or a free with no stream: reusable by anyone at once.
        if (e.kind == EventKind::DeviceFree || f.stream == replay::kNone) return;
        Demand& d = demand(b.pool, e.tid);
        uint64_t& v = d.pendingAt(f.stream);
        v = addSat(v, bytes);
        d.pendTotal = addSat(d.pendTotal, bytes);
        d.noteHigh();
        return;
    }
    // A synchronize clears for certain only what the synchronizing thread itself freed before
    // it (other threads' frees may come after it in another interleaving).
    if (e.kind == EventKind::StreamSynchronize || e.kind == EventKind::ContextSynchronize) {
        const bool all = e.kind == EventKind::ContextSynchronize;
        if (!all && f.stream == replay::kNone) return;
        for (uint32_t i = 0; i < pools_.size(); ++i) {
            PoolRace& p = pools_[i];
            // A device's synchronize settles only its own pools' frees.
            const int device = i < r.pools().size() ? r.pools()[i].info.device : -1;
            if (all && e.device >= 0 && device >= 0 && device != e.device) continue;
            auto it = p.byThread.find(e.tid);
            if (it == p.byThread.end()) continue;
            Demand& d = it->second;
            if (all) {
                d.pending.clear();
                d.lastPending = nullptr;
                d.pendTotal = 0;
            } else if (auto s = d.pending.find(f.stream); s != d.pending.end()) {
                d.pendTotal -= std::min(d.pendTotal, s->second);
                if (d.lastPending == &s->second) d.lastPending = nullptr;
                d.pending.erase(s);
            }
        }
    }
}

std::vector<RaceRange> RaceBounds::result(const replay::Replay& r) const {
    std::vector<RaceRange> out;
    for (uint32_t i = 0; i < pools_.size() && i < r.pools().size(); ++i) {
        const PoolRace& p = pools_[i];
        if (!p.any) continue;
        RaceRange x;
        x.handle = r.pools()[i].info.handle;
        x.device = r.pools()[i].info.device;
        x.racingAllocs = p.racingAllocs;
        x.crossThreadFrees = p.crossThreadFrees;
        x.largestBlock = p.largestBlock;
        uint64_t asRecorded = 0;
        for (const auto& [tid, d] : p.byThread) {
            x.demandSum = addSat(x.demandSum, d.high);
            asRecorded = addSat(asRecorded, d.highAsRecorded);
            if (d.allocs > 0) x.threads++;
        }
        x.low = std::max(granule_, roundUp(roundUp(p.largestBlock, align_), granule_));
        x.high = std::max(x.low, roundUp(x.demandSum, granule_));
        x.highHandoversAsRecorded = std::max(x.low, roundUp(asRecorded, granule_));
        out.push_back(x);
    }
    return out;
}

} // namespace poolscope::whatif
