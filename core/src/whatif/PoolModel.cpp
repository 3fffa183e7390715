// The what-if pool model (the rules are in PoolModel.h and docs/WHATIF.md). Per event a few
// integer updates on the pool's counters; the per-stream pending bytes are a plain vector per
// pool, indexed like the replay's streams (processes have a handful of each).
#include "poolscope/whatif/PoolModel.h"

#include <algorithm>
#include <limits>

#include "poolscope/EventFields.h"

namespace poolscope::whatif {

namespace {

uint64_t roundUp(uint64_t v, uint64_t step) {
    if (step == 0) return v;
    const uint64_t r = v % step;
    if (r == 0) return v;
    const uint64_t add = step - r;
    return v > std::numeric_limits<uint64_t>::max() - add ? std::numeric_limits<uint64_t>::max()
                                                          : v + add;
}

uint64_t take(uint64_t& from, uint64_t& need) {
    const uint64_t t = std::min(from, need);
    from -= t;
    need -= t;
    return t;
}

// Bytes freed on one stream and not yet reusable by every stream, with when they were freed
// (opportunistic reuse only takes frees older than Calibration::opportunisticLagNs).
struct Pending {
    struct Chunk {
        int64_t ts;
        uint64_t bytes;
    };
    // By free time, oldest first from `head` (transfers from waits may interleave). A vector
    // with a moving head, not a std::deque: this is touched at nearly every alloc and free.
    std::vector<Chunk> q;
    size_t head = 0;
    uint64_t bytes = 0;

    void push(int64_t ts, uint64_t b) {
        if (q.size() > head && q.back().ts >= ts) {
            q.back().bytes += b;
        } else {
            q.push_back({ts, b});
        }
        bytes += b;
    }
    // Same-stream reuse: the most recent frees first (what is still warm in the pool's lists).
    uint64_t takeNewest(uint64_t& need) {
        uint64_t got = 0;
        while (need && q.size() > head) {
            Chunk& c = q.back();
            const uint64_t t = std::min(c.bytes, need);
            c.bytes -= t;
            need -= t;
            got += t;
            if (c.bytes == 0) q.pop_back();
        }
        if (q.size() == head) q.clear(), head = 0;
        bytes -= got;
        return got;
    }
    // The oldest frees, freed at or before `cutoff`, up to `need` (moved to `to` when given).
    uint64_t takeOldest(uint64_t& need, int64_t cutoff, Pending* to = nullptr) {
        uint64_t got = 0;
        while (need && head < q.size() && q[head].ts <= cutoff) {
            Chunk& c = q[head];
            const uint64_t t = std::min(c.bytes, need);
            if (to) to->push(c.ts, t);
            c.bytes -= t;
            need -= t;
            got += t;
            if (c.bytes == 0) ++head;
        }
        if (head == q.size()) {
            q.clear();
            head = 0;
        } else if (head > 64 && head * 2 > q.size()) {
            q.erase(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(head));
            head = 0;
        }
        bytes -= got;
        return got;
    }
    uint64_t clear() {
        const uint64_t b = bytes;
        q.clear();
        head = 0;
        bytes = 0;
        return b;
    }
};

constexpr int64_t kAnyTime = std::numeric_limits<int64_t>::max();

// later - earlier for later >= earlier, without signed overflow (a damaged trace may hold times
// at both ends of int64).
uint64_t span(int64_t earlier, int64_t later) {
    return later > earlier ? static_cast<uint64_t>(later) - static_cast<uint64_t>(earlier) : 0;
}

} // namespace

struct PoolModel::Pool {
    bool init = false;
    bool hasOverride = false;
    Settings s;
    uint64_t reserved = 0;
    uint64_t live = 0;
    uint64_t free = 0;
    uint64_t pendTotal = 0;
    std::vector<Pending> pend; // per replay stream
    bool timed = false;
    int64_t firstTs = 0;
    int64_t lastTs = 0;
    unsigned __int128 idleArea = 0; // byte-nanoseconds: exact, and cheap (no x87 maths)
    // recorded side
    uint64_t recReserved = 0;
    uint64_t recUsed = 0;
    uint64_t recHighSinceRelease = 0;
    bool recTimed = false;
    int64_t recFirstTs = 0;
    int64_t recLastTs = 0;
    unsigned __int128 recIdleArea = 0;
    PoolPrediction out;

    uint64_t idle() const { return reserved > live ? reserved - live : 0; }
    uint64_t recIdle() const { return recReserved > recUsed ? recReserved - recUsed : 0; }
};

PoolModel::PoolModel(Settings all, Calibration c) : all_(all), cal_(c) {
    if (cal_.growthGranule == 0) cal_.growthGranule = 1;
    if (cal_.blockAlign == 0) cal_.blockAlign = 1;
}

PoolModel::~PoolModel() = default;

void PoolModel::setPoolSettings(uint64_t handle, Settings s) { perPool_[handle] = s; }

uint32_t PoolModel::kindMask() {
    uint32_t m = 0;
    for (EventKind k : {EventKind::Alloc, EventKind::Free, EventKind::StreamWaitEvent,
                        EventKind::StreamSynchronize, EventKind::EventSynchronize,
                        EventKind::ContextSynchronize, EventKind::PoolTrimTo, EventKind::KnobChange,
                        EventKind::ImplicitRelease, EventKind::PoolCreate, EventKind::PoolDestroy,
                        EventKind::Sample, EventKind::DeviceFree})
        m |= 1u << static_cast<unsigned>(k);
    return m;
}

[[gnu::always_inline]] inline PoolModel::Pool& PoolModel::pool(uint32_t i, const replay::Replay& r) {
    if (i < pools_.size()) [[likely]] {
        Pool& p = pools_[i];
        if (p.init && p.pend.size() >= r.streams().size()) [[likely]]
            return p;
    }
    return poolSlow(i, r);
}

PoolModel::Pool& PoolModel::poolSlow(uint32_t i, const replay::Replay& r) {
    if (i >= pools_.size()) pools_.resize(r.pools().size());
    Pool& p = pools_[i];
    if (!p.init) [[unlikely]] {
        p.init = true;
        const PoolInfo& info = r.pools()[i].info;
        p.out.handle = info.handle;
        p.out.device = info.device;
        if (auto it = perPool_.find(info.handle); it != perPool_.end()) {
            p.s = it->second;
            p.hasOverride = true;
        } else {
            p.s = all_;
            p.hasOverride = all_.any();
        }
    }
    if (p.pend.size() < r.streams().size()) p.pend.resize(r.streams().size());
    return p;
}

[[gnu::always_inline]] inline void PoolModel::account(Pool& p, int64_t ts) {
    if (!p.timed) {
        p.timed = true;
        p.firstTs = p.lastTs = ts;
        return;
    }
    if (ts > p.lastTs) {
        p.idleArea += static_cast<unsigned __int128>(span(p.lastTs, ts)) * p.idle();
        p.lastTs = ts;
    }
}

void PoolModel::setReserved(Pool& p, uint64_t v, int64_t ts) {
    p.reserved = v;
    if (v > p.out.peakReserved) {
        p.out.peakReserved = v;
        p.out.peakReservedTsNs = ts;
    }
    if (keepSeries_) p.out.reserved.push(ts, v);
}

void PoolModel::alloc(const replay::Fact& f, const replay::Replay& r) {
    const replay::Block& b = f.block;
    if (b.ptr == 0 || b.bytes == 0) return;
    Pool& p = pool(f.pool, r);
    const int64_t ts = f.event->tsNs;
    account(p, ts);
    p.out.touched = true;
    const replay::PoolState& ps = r.pools()[f.pool];
    auto policy = [&](const std::optional<bool>& o, PoolAttr a) {
        if (o) return *o;
        const replay::Knob& k = ps.knob(a);
        return !k.known || k.value != 0;
    };
    const uint64_t bytes = roundUp(b.bytes, cal_.blockAlign);
    uint64_t need = bytes;
    p.pendTotal -= p.pend[f.stream].takeNewest(need);
    if (need) take(p.free, need);
    if (need && policy(p.s.allowOpportunistic, PoolAttr::ReuseAllowOpportunistic)) {
        const int64_t lag = std::max<int64_t>(cal_.opportunisticLagNs, 0);
        const int64_t cutoff = ts < std::numeric_limits<int64_t>::min() + lag
                                   ? std::numeric_limits<int64_t>::min()
                                   : ts - lag;
        for (size_t j = 0; need && j < p.pend.size(); ++j)
            p.pendTotal -= p.pend[j].takeOldest(need, cutoff);
    }
    if (need) {
        uint64_t grow = roundUp(need, cal_.growthGranule);
        const uint64_t maxSize = ps.info.maxSize;
        if (maxSize != 0 && p.reserved + grow > maxSize) {
            // Over the pool's limit: the driver may wait on another stream's frees instead.
            if (policy(p.s.allowInternalDependencies, PoolAttr::ReuseAllowInternalDependencies))
                for (size_t j = 0; need && j < p.pend.size(); ++j)
                    p.pendTotal -= p.pend[j].takeOldest(need, kAnyTime);
            grow = roundUp(need, cal_.growthGranule);
            if (need && p.reserved + grow > maxSize) {
                // The allocation fails: what it had taken goes back as reusable memory.
                p.free += bytes - need;
                p.out.failedAllocs++;
                return;
            }
        }
        if (need) {
            p.free += grow - need;
            p.out.growths++;
            p.out.grownBytes += grow;
            if (p.out.growthAllocs.size() < kKeptGrowths)
                p.out.growthAllocs.push_back(
                    Growth{f.event->seq, ts, r.streams()[f.stream].info.handle, b.bytes, grow});
            setReserved(p, p.reserved + grow, ts);
        }
    }
    p.live += bytes;
    p.out.peakLive = std::max(p.out.peakLive, p.live);
    p.out.maxIdle = std::max(p.out.maxIdle, p.idle());
}

void PoolModel::freeBlock(const replay::Fact& f, const replay::Replay& r) {
    const replay::Block& b = f.block;
    if (b.imported || b.pool == replay::kNone) return;
    Pool& p = pool(b.pool, r);
    account(p, f.event->tsNs);
    p.out.touched = true;
    // A block the model could not place (over the pool's limit) frees nothing.
    const uint64_t bytes = std::min(roundUp(b.bytes, cal_.blockAlign), p.live);
    p.live -= bytes;
    if (f.event->kind == EventKind::DeviceFree) {
        // A pool block freed with cudaFree: the driver takes it back at once, for any stream
        // (no stream order to wait for).
        p.free += bytes;
        p.out.maxIdle = std::max(p.out.maxIdle, p.idle());
        return;
    }
    p.pend[f.stream].push(f.event->tsNs, bytes);
    p.pendTotal += bytes;
    p.out.maxIdle = std::max(p.out.maxIdle, p.idle());
}

// Frees of some streams became visible: a wait hands them to the waiting stream (event
// dependencies), a synchronize to every stream.
void PoolModel::cleared(const replay::Fact& f, const replay::Replay& r) {
    if (seenCleared_.size() < r.streams().size()) seenCleared_.resize(r.streams().size(), 0);
    const EventKind kind = f.event->kind;
    auto one = [&](uint32_t s) {
        const uint64_t now = r.streams()[s].clearedBytes;
        const uint64_t delta = now > seenCleared_[s] ? now - seenCleared_[s] : 0;
        seenCleared_[s] = std::max(seenCleared_[s], now);
        for (uint32_t pi = 0; pi < pools_.size(); ++pi) {
            Pool& p = pools_[pi];
            if (!p.init || s >= p.pend.size() || p.pend[s].bytes == 0) continue;
            // The waiting stream may be seen for the first time at this wait.
            if (p.pend.size() < r.streams().size()) p.pend.resize(r.streams().size());
            if (kind == EventKind::StreamWaitEvent) {
                const replay::PoolState& ps = r.pools()[pi];
                const replay::Knob& k = ps.knob(PoolAttr::ReuseFollowEventDependencies);
                const bool follow = p.s.followEventDependencies
                                        ? *p.s.followEventDependencies
                                        : (!k.known || k.value != 0);
                if (!follow || f.stream == replay::kNone) continue;
                uint64_t want = delta;
                p.pend[s].takeOldest(want, kAnyTime, &p.pend[f.stream]);
            } else if (kind == EventKind::EventSynchronize) {
                uint64_t want = delta;
                const uint64_t m = p.pend[s].takeOldest(want, kAnyTime);
                p.pendTotal -= m;
                p.free += m;
            }
            // Stream and context synchronizes: release() empties the whole stream.
        }
    };
    if (f.clearedStream != replay::kNone) {
        one(f.clearedStream);
        return;
    }
    for (uint32_t s = 0; s < r.streams().size(); ++s) one(s);
}

void PoolModel::release(const replay::Fact& f, const replay::Replay& r) {
    const Event& e = *f.event;
    int device = e.device;
    if (e.kind == EventKind::StreamSynchronize && f.stream != replay::kNone)
        device = r.streams()[f.stream].info.device;
    // The synchronized streams are idle: everything freed on them or handed to them by a wait
    // is complete.
    if (e.kind == EventKind::StreamSynchronize && f.stream != replay::kNone) {
        for (Pool& p : pools_) {
            if (!p.init || f.stream >= p.pend.size()) continue;
            const uint64_t m = p.pend[f.stream].clear();
            p.free += m;
            p.pendTotal -= m;
        }
    }
    if (e.kind == EventKind::ContextSynchronize) {
        for (Pool& p : pools_) {
            if (!p.init || (device >= 0 && p.out.device >= 0 && p.out.device != device)) continue;
            for (Pending& q : p.pend) p.free += q.clear();
            p.pendTotal = 0;
        }
    }
    for (uint32_t pi = 0; pi < pools_.size(); ++pi) {
        Pool& p = pools_[pi];
        if (!p.init || (device >= 0 && p.out.device >= 0 && p.out.device != device)) continue;
        const replay::Knob& k = r.pools()[pi].knob(PoolAttr::ReleaseThreshold);
        const uint64_t threshold = p.s.releaseThreshold ? *p.s.releaseThreshold : k.known ? k.value : 0;
        const uint64_t floor = roundUp(p.live + p.pendTotal, cal_.growthGranule);
        // The driver keeps whole granules up to the threshold (measured: 48 MiB kept 32 MiB).
        const uint64_t keep = threshold - threshold % cal_.growthGranule;
        const uint64_t target = std::max(floor, keep);
        if (p.reserved <= target) continue;
        account(p, e.tsNs);
        p.out.releases++;
        p.out.releasedBytes += p.reserved - target;
        setReserved(p, target, e.tsNs);
        p.free = target - p.live - p.pendTotal;
    }
}

void PoolModel::trim(uint32_t pi, uint64_t keep, const replay::Fact& f, const replay::Replay& r) {
    Pool& p = pool(pi, r);
    const uint64_t floor = roundUp(p.live + p.pendTotal, cal_.growthGranule);
    // A trim keeps at least `keep`, in whole granules (measured: 100 MiB kept 128 MiB).
    const uint64_t target = std::max(floor, roundUp(keep, cal_.growthGranule));
    if (p.reserved <= target) return;
    account(p, f.event->tsNs);
    p.out.trims++;
    setReserved(p, target, f.event->tsNs);
    p.free = target - p.live - p.pendTotal;
}

void PoolModel::recorded(const replay::Fact& f, const replay::Replay& r) {
    Pool& p = pool(f.pool, r);
    const replay::PoolState& ps = r.pools()[f.pool];
    const int64_t ts = f.event->tsNs;
    if (p.recTimed && ts > p.recLastTs) {
        p.recIdleArea += static_cast<unsigned __int128>(span(p.recLastTs, ts)) * p.recIdle();
        p.recLastTs = ts;
    } else if (!p.recTimed) {
        p.recTimed = true;
        p.recFirstTs = p.recLastTs = ts;
    }
    const EventKind kind = f.event->kind;
    // The driver's release record reaches the trace after the synchronize; a sample may have
    // read the lower value first. A release counts when it leaves less than the most the pool
    // held since the previous release or trim.
    if (kind == EventKind::ImplicitRelease || kind == EventKind::PoolTrimTo) {
        if (kind == EventKind::ImplicitRelease && ps.reserved < p.recHighSinceRelease)
            p.out.recordedReleases++;
        p.recHighSinceRelease = ps.reserved;
    } else {
        p.recHighSinceRelease = std::max(p.recHighSinceRelease, ps.reserved);
    }
    if (kind == EventKind::Alloc && ps.reserved > p.recReserved) p.out.recordedGrowths++;
    p.recReserved = ps.reserved;
    if (f.watermarks) p.recUsed = ps.used;
    p.out.recordedKnown = true;
    p.out.recordedPeakReserved = std::max(p.out.recordedPeakReserved, ps.reserved);
    p.out.recordedMaxIdle = std::max(p.out.recordedMaxIdle, p.recIdle());
}

void PoolModel::onFact(const replay::Fact& f, const replay::Replay& r) {
    const Event& e = *f.event;
    if (e.kind == EventKind::Sample) {
        // Samples only carry the recorded watermarks (read between events).
        if (f.pool != replay::kNone && keepRecorded_) recorded(f, r);
        return;
    }
    if (f.allocated) alloc(f, r);
    else if (f.freed) freeBlock(f, r);
    if (f.replacedLive && f.closed.pool != replay::kNone && !f.closed.imported) {
        // The pointer came back without its free recorded: the older block is gone.
        Pool& p = pool(f.closed.pool, r);
        const uint64_t bytes = std::min(roundUp(f.closed.bytes, cal_.blockAlign), p.live);
        p.live -= bytes;
        p.free += bytes;
    }
    if (f.pendingCleared) cleared(f, r);
    switch (e.kind) {
    case EventKind::StreamSynchronize:
    case EventKind::EventSynchronize:
    case EventKind::ContextSynchronize: release(f, r); break;
    case EventKind::PoolTrimTo:
        if (f.pool != replay::kNone && !e.failed()) trim(f.pool, TrimFields::of(e).minBytesToKeep, f, r);
        break;
    case EventKind::KnobChange: {
        const KnobFields k = KnobFields::of(e);
        if (!k.isAttribute() && k.action() == KnobAction::TrimTo && f.pool != replay::kNone &&
            !e.failed())
            trim(f.pool, k.requested, f, r);
        break;
    }
    case EventKind::PoolCreate:
    case EventKind::PoolDestroy:
        if (f.pool != replay::kNone) {
            Pool& p = pool(f.pool, r);
            account(p, e.tsNs);
            p.live = p.free = p.pendTotal = 0;
            for (Pending& q : p.pend) q.clear();
            if (p.reserved != 0) setReserved(p, 0, e.tsNs);
        }
        break;
    default: break;
    }
    if ((f.watermarks || f.reservedOnly) && f.pool != replay::kNone && keepRecorded_) recorded(f, r);
    if (e.tsNs > lastTs_) lastTs_ = e.tsNs;
}

std::vector<PoolPrediction> PoolModel::result(const replay::Replay& r) const {
    std::vector<PoolPrediction> out;
    for (uint32_t i = 0; i < pools_.size(); ++i) {
        const Pool& p = pools_[i];
        if (!p.init || (!p.out.touched && !p.out.recordedKnown)) continue;
        PoolPrediction o = p.out;
        if (i < r.pools().size()) {
            const replay::PoolState& ps = r.pools()[i];
            o.device = ps.info.device;
            const replay::Knob& t = ps.knob(PoolAttr::ReleaseThreshold);
            o.releaseThreshold = p.s.releaseThreshold ? *p.s.releaseThreshold : t.known ? t.value : 0;
            auto policy = [&](const std::optional<bool>& ov, PoolAttr a) {
                if (ov) return *ov;
                const replay::Knob& k = ps.knob(a);
                return !k.known || k.value != 0;
            };
            o.followEventDependencies = policy(p.s.followEventDependencies, PoolAttr::ReuseFollowEventDependencies);
            o.allowOpportunistic = policy(p.s.allowOpportunistic, PoolAttr::ReuseAllowOpportunistic);
            o.allowInternalDependencies = policy(p.s.allowInternalDependencies, PoolAttr::ReuseAllowInternalDependencies);
        }
        o.finalReserved = p.reserved;
        o.recordedFinalReserved = p.recReserved;
        const int64_t end = std::max(lastTs_, p.lastTs);
        if (p.timed && end > p.firstTs) {
            const unsigned __int128 area =
                p.idleArea + static_cast<unsigned __int128>(span(p.lastTs, end)) * p.idle();
            o.meanIdle = static_cast<uint64_t>(area / span(p.firstTs, end));
        }
        if (p.recTimed && end > p.recFirstTs) {
            const unsigned __int128 area =
                p.recIdleArea +
                static_cast<unsigned __int128>(span(p.recLastTs, end)) * p.recIdle();
            o.recordedMeanIdle = static_cast<uint64_t>(area / span(p.recFirstTs, end));
        }
        out.push_back(std::move(o));
    }
    return out;
}

} // namespace poolscope::whatif
