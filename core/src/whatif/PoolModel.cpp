// The what-if pool model (the rules are in PoolModel.h and docs/WHATIF.md). Per event a few
// integer updates on the pool's counters; the per-stream pending bytes are a plain vector per
// pool, indexed like the replay's streams (processes have a handful of each).
#include "poolscope/whatif/PoolModel.h"

#include <algorithm>
#include <limits>

#include "poolscope/EventFields.h"

#include "ModelRules.h"
#include "PoolModelPool.h"
#include "RoundUp.h"

namespace poolscope::whatif {

namespace {

using detail::roundUp;
using detail::take;
using detail::Pending;
using detail::kAnyTime;
using detail::span;

} // namespace

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
                        EventKind::PoolSetAttribute, EventKind::ImplicitRelease,
                        EventKind::PoolCreate, EventKind::PoolDestroy, EventKind::Sample,
                        EventKind::DeviceFree})
        m |= 1u << static_cast<unsigned>(k);
    return m;
}

// ---- Following a replay: facts into ops ----

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
    if (!pools_[i].init) [[unlikely]] {
        const PoolInfo& info = r.pools()[i].info;
        Op op;
        op.kind = Op::Kind::Init;
        op.pool = i;
        op.value = info.handle;
        op.aux = static_cast<uint32_t>(info.device);
        const size_t at = tape_ ? tape_->ops.size() : 0;
        toTape(op);
        init(i, info.handle, info.device);
        syncKnobs(i, r);
        if (recordingPiece_) seedPool(i, at);
    }
    Pool& p = pools_[i];
    if (p.pend.size() < r.streams().size()) p.pend.resize(r.streams().size());
    return p;
}

// The recorded knobs move with the replay (a pool's creation, cudaMemPoolSetAttribute, a knob
// change made from PoolScope; the size limit when a pool is declared later): the model keeps
// its own copy, and a tape the changes, in order.
void PoolModel::syncKnobs(uint32_t i, const replay::Replay& r) {
    if (i >= pools_.size() || !pools_[i].init) return;
    Pool& p = pools_[i];
    const replay::PoolState& ps = r.pools()[i];
    for (uint8_t k = 0; k < 4; ++k) {
        const replay::Knob& now = ps.knobs[k];
        if (now.known == p.knobs[k].known && now.value == p.knobs[k].value) [[likely]]
            continue;
        p.knobs[k] = now;
        Op op;
        op.kind = Op::Kind::Knob;
        op.pool = i;
        op.attr = k;
        op.value = now.value;
        op.flag = now.known;
        toTape(op);
    }
    if (ps.info.maxSize != p.maxSize) [[unlikely]] {
        p.maxSize = ps.info.maxSize;
        Op op;
        op.kind = Op::Kind::Knob;
        op.pool = i;
        op.attr = kKnobMaxSize;
        op.value = p.maxSize;
        op.flag = 1;
        toTape(op);
    }
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
        if (delta == 0) return;
        Op op;
        op.ts = f.event->tsNs;
        op.stream = s;
        op.value = delta;
        if (kind == EventKind::StreamWaitEvent) {
            if (f.stream == replay::kNone) return;
            op.kind = Op::Kind::Wait;
            op.aux = f.stream;
            toTape(op);
            if (!recordOnly_) waitMove(op);
        } else if (kind == EventKind::EventSynchronize) {
            op.kind = Op::Kind::EventCleared;
            toTape(op);
            if (!recordOnly_) eventCleared(op);
        }
        // Stream and context synchronizes: release() empties the whole stream.
    };
    if (f.clearedStream != replay::kNone) {
        one(f.clearedStream);
        return;
    }
    for (uint32_t s = 0; s < r.streams().size(); ++s) one(s);
}

void PoolModel::recorded(const replay::Fact& f, const replay::Replay& r) {
    Pool& p = pool(f.pool, r);
    const int64_t ts = f.event->tsNs;
    if (!keepRecorded_) {
        // Only where the recorded watermarks end: the predicted mean idle is averaged over the
        // same window as with the recorded figures (finalPrediction), or it would differ.
        if (!p.recTimed) p.recFirstTs = p.recLastTs = ts;
        p.recTimed = true;
        p.recLastTs = std::max(p.recLastTs, ts);
        return;
    }
    const replay::PoolState& ps = r.pools()[f.pool];
    if (p.recTimed && ts > p.recLastTs) {
        const uint64_t idle = p.recIdle();
        p.recIdleArea += static_cast<unsigned __int128>(span(p.recLastTs, ts)) * idle;
        p.recLastTs = ts;
        if (recordingPiece_ && p.recMaxima.size() < kKeptRecordMaxima) [[unlikely]]
            p.recMaxima.push_back({ts, idle, p.recIdleArea});
    } else if (!p.recTimed) {
        p.recTimed = true;
        p.recFirstTs = p.recLastTs = ts;
        if (recordingPiece_) p.recMaxima.push_back({ts, p.recIdle(), 0});
    }
    const EventKind kind = f.event->kind;
    // The driver's release record reaches the trace after the synchronize; a sample may have
    // read the lower value first. A release counts when it leaves less than the most the pool
    // held since the previous release or trim.
    if (kind == EventKind::ImplicitRelease || kind == EventKind::PoolTrimTo) {
        if (p.recHighOpen) [[unlikely]] {
            // A piece's first: whether it counts depends on the most held before the piece.
            p.recHighOpen = false;
            if (kind == EventKind::ImplicitRelease) {
                p.firstRelease = true;
                p.firstReleaseLeft = ps.reserved;
                p.firstReleaseHigh = p.recHighSinceRelease;
            }
        } else if (kind == EventKind::ImplicitRelease && ps.reserved < p.recHighSinceRelease) {
            p.out.recordedReleases++;
        }
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
        if (f.pool != replay::kNone) recorded(f, r);
        return;
    }
    Op op;
    op.ts = e.tsNs;
    if (f.allocated) {
        const replay::Block& b = f.block;
        if (b.ptr != 0 && b.bytes != 0) {
            // The knobs change only at the facts that sync them; the size limit may also be
            // declared between events.
            if (pool(f.pool, r).maxSize != r.pools()[f.pool].info.maxSize) [[unlikely]]
                syncKnobs(f.pool, r);
            op.kind = Op::Kind::Alloc;
            op.pool = f.pool;
            op.stream = f.stream;
            op.value = b.bytes;
            if (tape_) [[unlikely]] {
                tape_->ops.push_back(op);
                tape_->allocSeq.push_back(e.seq);
            }
            if (recordOnly_) [[unlikely]]
                pools_[f.pool].out.touched |= op.stream != replay::kNone; // as alloc() would
            else
                alloc(op, e.seq, f.stream < r.streams().size() ? r.streams()[f.stream].info.handle : 0);
        }
    } else if (f.freed) {
        const replay::Block& b = f.block;
        if (!b.imported && b.pool != replay::kNone) {
            pool(b.pool, r);
            op.kind = Op::Kind::Free;
            op.pool = b.pool;
            op.stream = f.stream;
            op.value = b.bytes;
            op.flag = e.kind == EventKind::DeviceFree;
            toTape(op);
            if (recordOnly_) [[unlikely]]
                pools_[b.pool].out.touched = true;
            else
                freeBlock(op);
        }
    }
    if (f.replacedLive && f.closed.pool != replay::kNone && !f.closed.imported) {
        // The pointer came back without its free recorded: the older block is gone.
        pool(f.closed.pool, r);
        Op d;
        d.ts = e.tsNs;
        d.kind = Op::Kind::Drop;
        d.pool = f.closed.pool;
        d.value = f.closed.bytes;
        toTape(d);
        if (!recordOnly_) apply(d, 0, 0);
    }
    if (f.pendingCleared) cleared(f, r);
    switch (e.kind) {
    case EventKind::StreamSynchronize:
    case EventKind::EventSynchronize:
    case EventKind::ContextSynchronize: {
        int device = e.device;
        op.stream = replay::kNone;
        if (e.kind == EventKind::StreamSynchronize) {
            op.kind = Op::Kind::StreamSync;
            if (f.stream != replay::kNone) {
                device = r.streams()[f.stream].info.device;
                op.stream = f.stream;
            }
        } else {
            op.kind = e.kind == EventKind::EventSynchronize ? Op::Kind::EventSync
                                                            : Op::Kind::ContextSync;
        }
        op.aux = static_cast<uint32_t>(device);
        toTape(op);
        if (!recordOnly_) release(op);
        break;
    }
    case EventKind::PoolTrimTo:
    case EventKind::KnobChange: {
        if (f.pool == replay::kNone || e.failed()) break;
        if (e.kind == EventKind::KnobChange) {
            syncKnobs(f.pool, r);
            const KnobFields k = KnobFields::of(e);
            if (k.isAttribute() || k.action() != KnobAction::TrimTo) break;
            op.value = k.requested;
        } else {
            op.value = TrimFields::of(e).minBytesToKeep;
        }
        pool(f.pool, r);
        op.kind = Op::Kind::Trim;
        op.pool = f.pool;
        toTape(op);
        if (!recordOnly_) trim(op);
        break;
    }
    case EventKind::PoolSetAttribute:
        if (f.pool != replay::kNone) syncKnobs(f.pool, r);
        break;
    case EventKind::PoolCreate:
    case EventKind::PoolDestroy:
        if (f.pool != replay::kNone) {
            pool(f.pool, r);
            syncKnobs(f.pool, r);
            op.kind = Op::Kind::Reset;
            op.pool = f.pool;
            toTape(op);
            if (!recordOnly_) apply(op, 0, 0);
        }
        break;
    default: break;
    }
    if ((f.watermarks || f.reservedOnly) && f.pool != replay::kNone) recorded(f, r);
    if (e.tsNs > lastTs_) lastTs_ = e.tsNs;
}

// ---- The model proper ----

void PoolModel::init(uint32_t i, uint64_t handle, int device) {
    if (i >= pools_.size()) pools_.resize(size_t(i) + 1);
    Pool& p = pools_[i];
    p.init = true;
    p.out.handle = handle;
    p.out.device = device;
    if (auto it = perPool_.find(handle); it != perPool_.end()) {
        p.s = it->second;
        p.hasOverride = true;
    } else {
        p.s = all_;
        p.hasOverride = all_.any();
    }
}

[[gnu::always_inline]] inline PoolModel::Pool& PoolModel::at(uint32_t i) {
    // A tape always names a pool in an Init first; anything else gets the defaults.
    if (i >= pools_.size() || !pools_[i].init) [[unlikely]]
        init(i, 0, -1);
    return pools_[i];
}

void PoolModel::apply(const Op& op, uint64_t seq, uint64_t streamHandle) {
    switch (op.kind) {
    case Op::Kind::Init: init(op.pool, op.value, static_cast<int>(op.aux)); break;
    case Op::Kind::Knob: {
        Pool& p = at(op.pool);
        if (op.attr < 4) p.knobs[op.attr] = replay::Knob{op.value, op.flag != 0};
        else p.maxSize = op.value;
        break;
    }
    case Op::Kind::Alloc: alloc(op, seq, streamHandle); break;
    case Op::Kind::Free: freeBlock(op); break;
    case Op::Kind::Drop: {
        Pool& p = at(op.pool);
        const uint64_t bytes = std::min(roundUp(op.value, cal_.blockAlign), p.live);
        p.live -= bytes;
        p.free += bytes;
        break;
    }
    case Op::Kind::Wait: waitMove(op); break;
    case Op::Kind::EventCleared: eventCleared(op); break;
    case Op::Kind::StreamSync:
    case Op::Kind::EventSync:
    case Op::Kind::ContextSync: release(op); break;
    case Op::Kind::Trim: trim(op); break;
    case Op::Kind::Reset: {
        Pool& p = at(op.pool);
        account(p, op.ts);
        p.live = p.free = p.pendTotal = 0;
        for (Pending& q : p.pend) q.clear();
        if (p.reserved != 0) setReserved(p, 0, op.ts);
        break;
    }
    }
}

[[gnu::always_inline]] inline void PoolModel::account(Pool& p, int64_t ts) {
    if (!p.idleArea.timed) [[unlikely]]
        p.firstIdle = p.idle();
    p.idleArea.to(ts, p.idle());
}

void PoolModel::setReserved(Pool& p, uint64_t v, int64_t ts) {
    p.reserved = v;
    if (v > p.out.peakReserved) {
        p.out.peakReserved = v;
        p.out.peakReservedTsNs = ts;
    }
    if (keepSeries_) [[unlikely]] {
        if (logSeries_) p.seriesLog.emplace_back(ts, v);
        else p.out.reserved.push(ts, v);
    }
}

void PoolModel::alloc(const Op& op, uint64_t seq, uint64_t streamHandle) {
    if (op.stream == replay::kNone) [[unlikely]]
        return;
    Pool& p = at(op.pool);
    const int64_t ts = op.ts;
    account(p, ts);
    p.out.touched = true;
    const uint64_t bytes = roundUp(op.value, cal_.blockAlign);
    uint64_t need = bytes;
    p.pendTotal -= p.pendOf(op.stream).takeNewest(need);
    if (need) take(p.free, need);
    if (need && p.policy(p.s.allowOpportunistic, PoolAttr::ReuseAllowOpportunistic)) {
        const int64_t cutoff = detail::opportunisticCutoff(ts, cal_.opportunisticLagNs);
        for (size_t j = 0; need && j < p.pend.size(); ++j)
            p.pendTotal -= p.pend[j].takeOldest(need, cutoff);
    }
    if (need) {
        uint64_t grow = roundUp(need, cal_.growthGranule);
        const uint64_t maxSize = p.maxSize;
        if (maxSize != 0 && p.reserved + grow > maxSize) {
            // Over the pool's limit: the driver may wait on another stream's frees instead.
            if (p.policy(p.s.allowInternalDependencies, PoolAttr::ReuseAllowInternalDependencies))
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
                p.out.growthAllocs.push_back(Growth{seq, ts, streamHandle, op.value, grow});
            setReserved(p, p.reserved + grow, ts);
        }
    }
    p.live += bytes;
    p.out.peakLive = std::max(p.out.peakLive, p.live);
    p.out.maxIdle = std::max(p.out.maxIdle, p.idle());
}

void PoolModel::freeBlock(const Op& op) {
    Pool& p = at(op.pool);
    account(p, op.ts);
    p.out.touched = true;
    // A block the model could not place (over the pool's limit) frees nothing.
    const uint64_t bytes = std::min(roundUp(op.value, cal_.blockAlign), p.live);
    p.live -= bytes;
    if (op.flag || op.stream == replay::kNone) {
        // A pool block freed with cudaFree: the driver takes it back at once, for any stream
        // (no stream order to wait for).
        p.free += bytes;
        p.out.maxIdle = std::max(p.out.maxIdle, p.idle());
        return;
    }
    p.pendOf(op.stream).push(op.ts, bytes);
    p.pendTotal += bytes;
    p.out.maxIdle = std::max(p.out.maxIdle, p.idle());
}

// With event dependencies, the waiting stream may reuse what the recorded stream freed before
// the event (other streams still may not).
void PoolModel::waitMove(const Op& op) {
    const uint32_t s = op.stream, to = op.aux;
    for (Pool& p : pools_) {
        if (!p.init || s == to || s >= p.pend.size() || p.pend[s].bytes == 0) continue;
        if (!p.policy(p.s.followEventDependencies, PoolAttr::ReuseFollowEventDependencies))
            continue;
        Pending& dst = p.pendOf(to); // may reallocate pend: index s again below
        uint64_t want = op.value;
        p.pend[s].takeOldest(want, kAnyTime, &dst);
    }
}

void PoolModel::eventCleared(const Op& op) {
    const uint32_t s = op.stream;
    for (Pool& p : pools_) {
        if (!p.init || s >= p.pend.size() || p.pend[s].bytes == 0) continue;
        uint64_t want = op.value;
        const uint64_t m = p.pend[s].takeOldest(want, kAnyTime);
        p.pendTotal -= m;
        p.free += m;
    }
}

void PoolModel::release(const Op& op) {
    const int device = static_cast<int>(op.aux);
    // The synchronized streams are idle: everything freed on them or handed to them by a wait
    // is complete.
    if (op.kind == Op::Kind::StreamSync && op.stream != replay::kNone) {
        for (Pool& p : pools_) {
            if (!p.init || op.stream >= p.pend.size()) continue;
            const uint64_t m = p.pend[op.stream].clear();
            p.free += m;
            p.pendTotal -= m;
        }
    }
    if (op.kind == Op::Kind::ContextSync) {
        for (Pool& p : pools_) {
            if (!p.init || (device >= 0 && p.out.device >= 0 && p.out.device != device)) continue;
            for (Pending& q : p.pend) p.free += q.clear();
            p.pendTotal = 0;
        }
    }
    for (Pool& p : pools_) {
        if (!p.init || (device >= 0 && p.out.device >= 0 && p.out.device != device)) continue;
        const uint64_t threshold = p.threshold();
        const uint64_t floor = roundUp(p.live + p.pendTotal, cal_.growthGranule);
        // The driver keeps whole granules up to the threshold (measured: 48 MiB kept 32 MiB).
        const uint64_t keep = threshold - threshold % cal_.growthGranule;
        const uint64_t target = std::max(floor, keep);
        if (p.reserved <= target) continue;
        account(p, op.ts);
        p.out.releases++;
        p.out.releasedBytes += p.reserved - target;
        setReserved(p, target, op.ts);
        p.free = target - p.live - p.pendTotal;
    }
}

void PoolModel::trim(const Op& op) {
    Pool& p = at(op.pool);
    const uint64_t floor = roundUp(p.live + p.pendTotal, cal_.growthGranule);
    // A trim keeps at least `keep`, in whole granules (measured: 100 MiB kept 128 MiB).
    const uint64_t target = std::max(floor, roundUp(op.value, cal_.growthGranule));
    if (p.reserved <= target) return;
    account(p, op.ts);
    p.out.trims++;
    setReserved(p, target, op.ts);
    p.free = target - p.live - p.pendTotal;
}

// ---- Results ----

PoolPrediction PoolModel::finalPrediction(uint32_t i, int64_t end) const {
    const Pool& p = pools_[i];
    PoolPrediction o = p.out;
    o.finalReserved = p.reserved;
    o.recordedFinalReserved = p.recReserved;
    // Both sides over the same window, to the last thing known about the pool: samples may
    // read the watermarks after the last event (gpt2's run ends 0.9 s before its trace), and
    // a recorded mean over a longer span than its divisor exceeded the largest idle.
    end = std::max({end, p.idleArea.lastTs, p.recLastTs});
    if (const auto mean = p.idleArea.meanTo(end, p.idle())) o.meanIdle = *mean;
    if (p.recTimed && end > p.recFirstTs) {
        const unsigned __int128 area =
            p.recIdleArea + static_cast<unsigned __int128>(span(p.recLastTs, end)) * p.recIdle();
        o.recordedMeanIdle = static_cast<uint64_t>(area / span(p.recFirstTs, end));
    }
    return o;
}

std::vector<PoolPrediction> PoolModel::result(const replay::Replay& r) const {
    std::vector<PoolPrediction> out;
    for (uint32_t i = 0; i < pools_.size(); ++i) {
        const Pool& p = pools_[i];
        if (!p.init || (!p.out.touched && !p.out.recordedKnown)) continue;
        PoolPrediction o = finalPrediction(i, lastTs_);
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
        out.push_back(std::move(o));
    }
    return out;
}

void PoolModel::finishTape(Tape& tape, const replay::Replay& r) const {
    tape.streamHandles.clear();
    for (const replay::StreamState& s : r.streams()) tape.streamHandles.push_back(s.info.handle);
    tape.recorded = result(r);
    tape.poolIndex.clear();
    tape.recordedEnd.clear();
    for (uint32_t i = 0; i < pools_.size(); ++i) {
        const Pool& p = pools_[i];
        if (!p.init || (!p.out.touched && !p.out.recordedKnown)) continue;
        tape.poolIndex.push_back(i);
        tape.recordedEnd.push_back(p.recTimed ? p.recLastTs : std::numeric_limits<int64_t>::min());
    }
    tape.lastTs = lastTs_;
}

std::vector<PoolPrediction> PoolModel::run(const Tape& tape, std::optional<uint64_t> onlyPool) {
    const uint32_t only = onlyIndex(tape, onlyPool);
    if (onlyPool && only == replay::kNone) return {};
    size_t allocs = 0;
    step(tape, 0, tape.ops.size(), allocs, only);
    return collect(tape, only);
}

uint32_t PoolModel::onlyIndex(const Tape& tape, std::optional<uint64_t> onlyPool) {
    uint32_t only = replay::kNone;
    if (onlyPool)
        for (size_t k = 0; k < tape.recorded.size() && k < tape.poolIndex.size(); ++k)
            if (tape.recorded[k].handle == *onlyPool) only = tape.poolIndex[k];
    return only;
}

void PoolModel::step(const Tape& tape, size_t from, size_t to, size_t& allocs, uint32_t only) {
    const size_t nSeq = tape.allocSeq.size(), nStreams = tape.streamHandles.size();
    for (size_t i = from; i < to; ++i) {
        const Op& op = tape.ops[i];
        uint64_t seq = 0, handle = 0;
        if (op.kind == Op::Kind::Alloc) {
            seq = allocs < nSeq ? tape.allocSeq[allocs] : 0;
            ++allocs;
            handle = op.stream < nStreams ? tape.streamHandles[op.stream] : 0;
        }
        if (only != replay::kNone && op.pool != only && !detail::everyPools(op.kind)) continue;
        apply(op, seq, handle);
    }
}

void PoolModel::feed(const Op* first, const Op* last, const uint64_t* seq, size_t nSeq,
                     const std::vector<uint64_t>& handles, const std::vector<uint8_t>& mute) {
    size_t allocs = 0;
    const size_t nStreams = handles.size(), nMute = mute.size();
    for (const Op* it = first; it != last; ++it) {
        const Op& op = *it;
        uint64_t s = 0, handle = 0;
        if (op.kind == Op::Kind::Alloc) {
            s = allocs < nSeq ? seq[allocs] : 0;
            ++allocs;
            handle = op.stream < nStreams ? handles[op.stream] : 0;
        }
        if (op.pool < nMute && mute[op.pool] && !detail::everyPools(op.kind)) continue;
        apply(op, s, handle);
    }
}

uint64_t PoolModel::releasesOf(uint32_t i) const {
    return i < pools_.size() ? pools_[i].out.releases : 0;
}

bool PoolModel::policyOffSoFar(PoolAttr a) const {
    for (const Pool& p : pools_)
        if (p.init && !p.policy(std::nullopt, a)) return true;
    return false;
}

uint64_t PoolModel::peakReservedSoFar() const {
    uint64_t top = 0;
    for (const Pool& p : pools_) top = std::max(top, p.out.peakReserved);
    return top;
}

std::unique_ptr<PoolModel> PoolModel::clone() const {
    std::unique_ptr<PoolModel> m(new PoolModel(*this));
    m->tape_ = nullptr;
    return m;
}

bool PoolModel::sameState(const PoolModel& o) const { return samePools(pools_, o.pools_); }

bool PoolModel::samePools(const std::vector<Pool>& x, const std::vector<Pool>& y) {
    auto pendingOf = [](const Pool& p, size_t s) {
        std::vector<Pending::Chunk> q;
        if (s < p.pend.size())
            for (size_t i = p.pend[s].head; i < p.pend[s].q.size(); ++i)
                if (p.pend[s].q[i].bytes) q.push_back(p.pend[s].q[i]);
        return q;
    };
    const size_t n = std::max(x.size(), y.size());
    for (size_t i = 0; i < n; ++i) {
        static const Pool none;
        const Pool& a = i < x.size() ? x[i] : none;
        const Pool& b = i < y.size() ? y[i] : none;
        if (a.init != b.init || a.maxSize != b.maxSize || a.reserved != b.reserved ||
            a.live != b.live || a.free != b.free || a.pendTotal != b.pendTotal)
            return false;
        for (int k = 0; k < 4; ++k)
            if (a.knobs[k].known != b.knobs[k].known || a.knobs[k].value != b.knobs[k].value)
                return false;
        for (size_t s = 0; s < std::max(a.pend.size(), b.pend.size()); ++s) {
            const auto qa = pendingOf(a, s), qb = pendingOf(b, s);
            if (qa.size() != qb.size()) return false;
            for (size_t j = 0; j < qa.size(); ++j)
                if (qa[j].ts != qb[j].ts || qa[j].bytes != qb[j].bytes) return false;
        }
    }
    return true;
}

void PoolModel::guessReserved(
    const std::function<uint64_t(uint32_t pool, uint64_t floor, uint64_t now)>& guess) {
    for (uint32_t i = 0; i < pools_.size(); ++i) {
        Pool& p = pools_[i];
        if (!p.init) continue;
        const uint64_t floor = roundUp(p.live + p.pendTotal, cal_.growthGranule);
        p.reserved = std::max(floor, roundUp(guess(i, floor, p.reserved), cal_.growthGranule));
        p.free = p.reserved - p.live - p.pendTotal;
    }
}

void PoolModel::forgetPending() {
    for (Pool& p : pools_) {
        for (Pending& q : p.pend) p.free += q.clear();
        p.pendTotal = 0;
    }
}

uint64_t PoolModel::reservedOf(uint32_t pool) const {
    return pool < pools_.size() ? pools_[pool].reserved : 0;
}

std::vector<PoolPrediction> PoolModel::collect(const Tape& tape, uint32_t only) {
    lastTs_ = std::max(lastTs_, tape.lastTs);
    std::vector<PoolPrediction> out;
    for (size_t k = 0; k < tape.recorded.size() && k < tape.poolIndex.size(); ++k) {
        const uint32_t i = tape.poolIndex[k];
        if (only != replay::kNone && i != only) continue;
        const PoolPrediction& rec = tape.recorded[k];
        PoolPrediction o;
        // The same averaging window as following the trace: to the recorded side's end too.
        const int64_t end = std::max(lastTs_, k < tape.recordedEnd.size()
                                                  ? tape.recordedEnd[k]
                                                  : std::numeric_limits<int64_t>::min());
        if (i < pools_.size() && pools_[i].init) o = finalPrediction(i, end);
        detail::takeRecordedSide(o, rec);
        const Settings s = i < pools_.size() ? pools_[i].s : Settings{};
        o.releaseThreshold = s.releaseThreshold.value_or(rec.releaseThreshold);
        o.followEventDependencies = s.followEventDependencies.value_or(rec.followEventDependencies);
        o.allowOpportunistic = s.allowOpportunistic.value_or(rec.allowOpportunistic);
        o.allowInternalDependencies =
            s.allowInternalDependencies.value_or(rec.allowInternalDependencies);
        out.push_back(std::move(o));
    }
    return out;
}

} // namespace poolscope::whatif
