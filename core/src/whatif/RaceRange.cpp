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

bool RaceBounds::inputOf(const replay::Fact& f, RaceInput& in) {
    const Event& e = *f.event;
    in.ts = e.tsNs;
    in.tid = e.tid;
    if (f.allocated) {
        const replay::Block& b = f.block;
        if (b.ptr == 0 || b.bytes == 0 || f.stream == replay::kNone || b.pool == replay::kNone)
            return false;
        in.kind = RaceInput::Kind::Alloc;
        in.bytes = b.bytes;
        in.pool = b.pool;
        in.stream = f.stream;
        return true;
    }
    if (f.freed) {
        const replay::Block& b = f.block;
        if (b.imported || b.pool == replay::kNone || b.bytes == 0) return false;
        in.kind = RaceInput::Kind::Free;
        in.bytes = b.bytes;
        in.pool = b.pool;
        in.ownerTid = b.tid;
        // A cudaFree of a pool block, or a free with no stream: reusable by anyone at once.
        in.stream = e.kind == EventKind::DeviceFree ? replay::kNone : f.stream;
        return true;
    }
    if (e.kind == EventKind::StreamSynchronize || e.kind == EventKind::ContextSynchronize) {
        const bool all = e.kind == EventKind::ContextSynchronize;
        if (!all && f.stream == replay::kNone) return false;
        in.kind = all ? RaceInput::Kind::ContextSync : RaceInput::Kind::StreamSync;
        in.stream = f.stream;
        in.device = e.device;
        return true;
    }
    return false;
}

void RaceBounds::onFact(const replay::Fact& f, const replay::Replay& r) {
    RaceInput in;
    if (!inputOf(f, in)) return;
    take(in, [&r](uint32_t i) { return i < r.pools().size() ? r.pools()[i].info.device : -1; });
}

void RaceRecord::onFact(const replay::Fact& f, const replay::Replay& r) {
    RaceInput in;
    if (!RaceBounds::inputOf(f, in)) return;
    if (in.kind == RaceInput::Kind::ContextSync) {
        in.bytes = taken.devices.size();
        in.pool = static_cast<uint32_t>(r.pools().size());
        for (const replay::PoolState& p : r.pools())
            taken.devices.push_back(static_cast<int16_t>(p.info.device));
    }
    taken.inputs.push_back(in);
}

void RaceBounds::follow(const RaceInputs& taken) {
    for (const RaceInput& in : taken.inputs)
        take(in, [&](uint32_t i) -> int { return i < in.pool ? taken.devices[in.bytes + i] : -1; });
}

template <class DeviceOf> void RaceBounds::take(const RaceInput& in, DeviceOf deviceOf) {
    switch (in.kind) {
    case RaceInput::Kind::Alloc: {
        Demand& d = demand(in.pool, in.tid);
        PoolRace& p = pools_[in.pool];
        p.any = true;
        p.largestBlock = std::max(p.largestBlock, in.bytes);
        // The details pane's notion of a race: another thread's allocation from the pool
        // within the window (either side: the threads' clocks interleave in seq order).
        if ((p.hasLast && p.lastTid != in.tid && absDiff(p.lastTs, in.ts) <= Timeline::kRaceWindowNs) ||
            (p.hasOther && p.otherTid != in.tid && absDiff(p.otherTs, in.ts) <= Timeline::kRaceWindowNs))
            p.racingAllocs++;
        if (p.hasLast && p.lastTid != in.tid) {
            p.otherTid = p.lastTid;
            p.otherTs = p.lastTs;
            p.hasOther = true;
        }
        p.lastTid = in.tid;
        p.lastTs = in.ts;
        p.hasLast = true;
        // Same-stream reuse of what this thread itself freed on the stream, else new demand.
        if (uint64_t* v = d.pendingOf(in.stream)) {
            const uint64_t t = std::min(*v, roundUp(in.bytes, align_));
            *v -= t;
            d.pendTotal -= std::min(d.pendTotal, t);
        }
        d.live = addSat(d.live, roundUp(in.bytes, align_));
        d.allocs++;
        d.noteHigh();
        return;
    }
    case RaceInput::Kind::Free: {
        const uint64_t bytes = roundUp(in.bytes, align_);
        Demand& owner = demand(in.pool, in.ownerTid);
        owner.live -= std::min(owner.live, bytes);
        if (in.ownerTid != in.tid) {
            // The allocating thread may run on for any part of its calls before this free.
            owner.handedOver = addSat(owner.handedOver, bytes);
            pools_[in.pool].crossThreadFrees++;
        }
        if (in.stream == replay::kNone) return;
        Demand& d = demand(in.pool, in.tid);
        uint64_t& v = d.pendingAt(in.stream);
        v = addSat(v, bytes);
        d.pendTotal = addSat(d.pendTotal, bytes);
        d.noteHigh();
        return;
    }
    case RaceInput::Kind::StreamSync:
    case RaceInput::Kind::ContextSync: {
        // A synchronize clears for certain only what the synchronizing thread itself freed
        // before it (other threads' frees may come after it in another interleaving).
        const bool all = in.kind == RaceInput::Kind::ContextSync;
        for (uint32_t i = 0; i < pools_.size(); ++i) {
            PoolRace& p = pools_[i];
            // A device's synchronize settles only its own pools' frees.
            if (all) {
                const int device = deviceOf(i);
                if (in.device >= 0 && device >= 0 && device != in.device) continue;
            }
            auto it = p.byThread.find(in.tid);
            if (it == p.byThread.end()) continue;
            Demand& d = it->second;
            if (all) {
                d.pending.clear();
                d.lastPending = nullptr;
                d.pendTotal = 0;
            } else if (auto s = d.pending.find(in.stream); s != d.pending.end()) {
                d.pendTotal -= std::min(d.pendTotal, s->second);
                if (d.lastPending == &s->second) d.lastPending = nullptr;
                d.pending.erase(s);
            }
        }
        return;
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
