// Several release thresholds through the pool model at once (LaneModel.h). Every rule is
// PoolModel's (PoolModel.cpp, docs/WHATIF.md), applied once to a trunk for what every lane of it
// shares and once per lane for what a threshold changes.
#include "LaneModel.h"

#include <algorithm>
#include <limits>

#include "RoundUp.h"

namespace poolscope::whatif {

namespace {

using detail::kAnyTime;
using detail::Pending;
using detail::roundUp;
using detail::span;
using detail::take;

uint64_t idleOf(uint64_t reserved, uint64_t live) { return reserved > live ? reserved - live : 0; }

} // namespace

bool LaneModel::Pool::policy(PoolAttr a) const { return detail::recordedPolicy(knobs, a); }

LaneModel::LaneModel(std::vector<std::optional<uint64_t>> thresholds, Calibration c)
    : thresholds_(std::move(thresholds)), cal_(c) {
    if (cal_.growthGranule == 0) cal_.growthGranule = 1;
    if (cal_.blockAlign == 0) cal_.blockAlign = 1;
}

uint64_t LaneModel::threshold(const Pool& p, size_t k) const {
    return thresholds_[k] ? *thresholds_[k] : detail::recordedThreshold(p.knobs);
}

// Which lanes follow pool i, from the mutes feed() was given: a lane once off stays off, and
// leaves its trunk's lanes (its figures are not read any more).
void LaneModel::muteFrom(uint32_t i) {
    Pool& p = pools_[i];
    for (size_t k = 0; k < p.lanes.size(); ++k) {
        const std::vector<uint8_t>* m = k < mutes_->size() ? (*mutes_)[k] : nullptr;
        if (!m || (i < m->size() && (*m)[i])) p.lanes[k].on = false;
    }
    p.on = 0;
    for (Trunk& t : p.trunks) {
        std::erase_if(t.active, [&](uint32_t k) { return !p.lanes[k].on; });
        p.on += t.active.size();
    }
    std::erase_if(p.trunks, [](const Trunk& t) { return t.active.empty(); });
}

void LaneModel::init(uint32_t i, uint64_t handle, int device) {
    if (i >= pools_.size()) pools_.resize(size_t(i) + 1);
    Pool& p = pools_[i];
    p.handle = handle;
    p.device = device;
    if (!p.init) {
        p.init = true;
        p.lanes.assign(thresholds_.size(), Lane{});
        p.trunks.assign(1, Trunk{});
        for (uint32_t k = 0; k < thresholds_.size(); ++k) p.trunks[0].active.push_back(k);
        muteFrom(i);
    }
}

[[gnu::always_inline]] inline LaneModel::Pool& LaneModel::at(uint32_t i) {
    if (i >= pools_.size() || !pools_[i].init) [[unlikely]]
        init(i, 0, -1);
    return pools_[i];
}

void LaneModel::feed(const Op* first, const Op* last, const uint64_t* seq, size_t nSeq,
                     const std::vector<uint64_t>& handles,
                     const std::vector<const std::vector<uint8_t>*>& mutes) {
    mutes_ = &mutes;
    for (uint32_t i = 0; i < pools_.size(); ++i)
        if (pools_[i].init) muteFrom(i);
    // A pool no lane follows: its own ops are passed over, as PoolModel::feed passes over a
    // muted pool's (a pool not seen yet follows the mutes as they are now).
    auto followed = [&](uint32_t i) {
        if (i < pools_.size() && pools_[i].init) [[likely]]
            return pools_[i].on != 0;
        for (const std::vector<uint8_t>* m : mutes)
            if (m && !(i < m->size() && (*m)[i])) return true;
        return false;
    };
    size_t allocs = 0;
    const size_t nStreams = handles.size();
    for (const Op* it = first; it != last; ++it) {
        const Op& op = *it;
        uint64_t s = 0, handle = 0;
        if (op.kind == Op::Kind::Alloc) {
            s = allocs < nSeq ? seq[allocs] : 0;
            ++allocs;
            handle = op.stream < nStreams ? handles[op.stream] : 0;
        }
        if (!detail::everyPools(op.kind) && !followed(op.pool)) continue;
        apply(op, s, handle);
    }
    mutes_ = nullptr;
}

void LaneModel::apply(const Op& op, uint64_t seq, uint64_t streamHandle) {
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
    case Op::Kind::Drop: drop(op); break;
    case Op::Kind::Wait: waitMove(op); break;
    case Op::Kind::EventCleared: eventCleared(op); break;
    case Op::Kind::StreamSync:
    case Op::Kind::EventSync:
    case Op::Kind::ContextSync: release(op); break;
    case Op::Kind::Trim: trim(op); break;
    case Op::Kind::Reset: reset(op); break;
    }
}

[[gnu::always_inline]] inline void LaneModel::account(Lane& l, uint64_t live, int64_t ts) {
    l.idle.to(ts, idleOf(l.reserved, live));
}

void LaneModel::setReserved(Lane& l, uint64_t v, int64_t ts) {
    l.reserved = v;
    if (v > l.out.peakReserved) {
        l.out.peakReserved = v;
        l.out.peakReservedTsNs = ts;
    }
}

void LaneModel::grow(Lane& l, const Op& op, uint64_t need, uint64_t seq, uint64_t streamHandle) {
    const uint64_t g = roundUp(need, cal_.growthGranule);
    l.free += g - need;
    l.out.growths++;
    l.out.grownBytes += g;
    if (l.out.growthAllocs.size() < kKeptGrowths)
        l.out.growthAllocs.push_back(Growth{seq, op.ts, streamHandle, op.value, g});
    setReserved(l, l.reserved + g, op.ts);
}

// PoolModel::alloc for a lane alone on its trunk, from after the take of its own stream's
// pending frees (`need` is what is left of `bytes`).
void LaneModel::allocAlone(Pool& p, Trunk& t, Lane& l, const Op& op, uint64_t bytes,
                           uint64_t need, uint64_t seq, uint64_t streamHandle) {
    if (need) take(l.free, need);
    if (need && p.policy(PoolAttr::ReuseAllowOpportunistic)) {
        const int64_t cutoff = detail::opportunisticCutoff(op.ts, cal_.opportunisticLagNs);
        for (size_t j = 0; need && j < t.pend.size(); ++j)
            t.pendTotal -= t.pend[j].takeOldest(need, cutoff);
    }
    if (need) {
        const uint64_t grown = roundUp(need, cal_.growthGranule);
        const uint64_t maxSize = p.maxSize;
        if (maxSize != 0 && l.reserved + grown > maxSize) {
            if (p.policy(PoolAttr::ReuseAllowInternalDependencies))
                for (size_t j = 0; need && j < t.pend.size(); ++j)
                    t.pendTotal -= t.pend[j].takeOldest(need, kAnyTime);
            if (need && l.reserved + roundUp(need, cal_.growthGranule) > maxSize) {
                l.free += bytes - need;
                l.out.failedAllocs++;
                return;
            }
        }
        if (need) grow(l, op, need, seq, streamHandle);
    }
    t.live += bytes;
    l.peakLive = std::max(l.peakLive, t.live);
    l.maxIdle = std::max(l.maxIdle, idleOf(l.reserved, t.live));
}

void LaneModel::alloc(const Op& op, uint64_t seq, uint64_t streamHandle) {
    if (op.stream == replay::kNone) [[unlikely]]
        return;
    Pool& p = at(op.pool);
    p.touched = true;
    const int64_t ts = op.ts;
    const uint64_t bytes = roundUp(op.value, cal_.blockAlign);
    const size_t trunks = p.trunks.size(); // those split off below have had this op
    for (size_t ti = 0; ti < trunks; ++ti) {
        Trunk* t = &p.trunks[ti];
        uint64_t need = bytes;
        t->pendTotal -= t->pendOf(op.stream).takeNewest(need);
        // One lane following it: that lane's alone already (the others' figures are not read
        // any more).
        if (t->active.size() == 1) {
            Lane& l = p.lanes[t->active[0]];
            account(l, t->live, ts);
            allocAlone(p, *t, l, op, bytes, need, seq, streamHandle);
            continue;
        }
        // Where a lane's free bytes fall short, it takes other streams' pending frees or meets
        // the size limit if there are any to take or one to meet: then it goes on alone.
        const uint64_t live = t->live, after = live + bytes;
        int older = -1; // whether opportunistic reuse has frees to take, once asked
        for (size_t j = 0; j < t->active.size();) {
            const uint32_t k = t->active[j];
            Lane& l = p.lanes[k];
            account(l, live, ts);
            if (need <= l.free) [[likely]] {
                l.free -= need;
            } else {
                const uint64_t rest = need - l.free;
                if (older < 0) {
                    older = 0;
                    if (p.policy(PoolAttr::ReuseAllowOpportunistic)) {
                        const int64_t cutoff =
                            detail::opportunisticCutoff(ts, cal_.opportunisticLagNs);
                        for (const Pending& q : t->pend)
                            if (q.takesAny(cutoff)) older = 1;
                    }
                }
                const uint64_t maxSize = p.maxSize;
                if (older == 1 ||
                    (maxSize != 0 && l.reserved + roundUp(rest, cal_.growthGranule) > maxSize)) {
                    split(p, ti, k);
                    t = &p.trunks[ti];
                    allocAlone(p, p.trunks.back(), l, op, bytes, need, seq, streamHandle);
                    continue; // (k left `active`: j is the next lane's)
                }
                l.free = 0;
                grow(l, op, rest, seq, streamHandle);
            }
            l.peakLive = std::max(l.peakLive, after);
            l.maxIdle = std::max(l.maxIdle, idleOf(l.reserved, after));
            ++j;
        }
        t->live = after;
    }
}

// Lane k of trunk ti goes on alone, on a copy of the trunk as it is.
void LaneModel::split(Pool& p, size_t ti, uint32_t k) {
    Trunk alone;
    {
        Trunk& t = p.trunks[ti];
        alone.live = t.live;
        alone.pendTotal = t.pendTotal;
        alone.pend = t.pend;
        alone.active = {k};
        std::erase(t.active, k);
    }
    p.trunks.push_back(std::move(alone));
    ++splits_;
}

void LaneModel::freeBlock(const Op& op) {
    Pool& p = at(op.pool);
    p.touched = true;
    const bool anyStream = op.flag || op.stream == replay::kNone;
    for (Trunk& t : p.trunks) {
        // A block the model could not place frees nothing (as PoolModel::freeBlock).
        const uint64_t live = t.live;
        const uint64_t bytes = std::min(roundUp(op.value, cal_.blockAlign), live);
        const uint64_t after = live - bytes;
        for (uint32_t k : t.active) {
            Lane& l = p.lanes[k];
            account(l, live, op.ts);
            if (anyStream) l.free += bytes;
            l.maxIdle = std::max(l.maxIdle, idleOf(l.reserved, after));
        }
        t.live = after;
        if (!anyStream) {
            t.pendOf(op.stream).push(op.ts, bytes);
            t.pendTotal += bytes;
        }
    }
}

void LaneModel::drop(const Op& op) {
    Pool& p = at(op.pool);
    for (Trunk& t : p.trunks) {
        const uint64_t bytes = std::min(roundUp(op.value, cal_.blockAlign), t.live);
        t.live -= bytes;
        for (uint32_t k : t.active) p.lanes[k].free += bytes;
    }
}

void LaneModel::waitMove(const Op& op) {
    const uint32_t s = op.stream, to = op.aux;
    for (Pool& p : pools_) {
        if (!p.init || s == to || !p.policy(PoolAttr::ReuseFollowEventDependencies)) continue;
        for (Trunk& t : p.trunks) {
            if (s >= t.pend.size() || t.pend[s].bytes == 0) continue;
            Pending& dst = t.pendOf(to); // may reallocate pend: index s again below
            uint64_t want = op.value;
            t.pend[s].takeOldest(want, kAnyTime, &dst);
        }
    }
}

void LaneModel::eventCleared(const Op& op) {
    const uint32_t s = op.stream;
    for (Pool& p : pools_) {
        if (!p.init) continue;
        for (Trunk& t : p.trunks) {
            if (s >= t.pend.size() || t.pend[s].bytes == 0) continue;
            uint64_t want = op.value;
            const uint64_t m = t.pend[s].takeOldest(want, kAnyTime);
            t.pendTotal -= m;
            for (uint32_t k : t.active) p.lanes[k].free += m;
        }
    }
}

void LaneModel::release(const Op& op) {
    const int device = static_cast<int>(op.aux);
    const uint64_t g = cal_.growthGranule;
    for (Pool& p : pools_) {
        if (!p.init) continue;
        const bool onDevice = !(device >= 0 && p.device >= 0 && p.device != device);
        for (Trunk& t : p.trunks) {
                if (op.kind == Op::Kind::StreamSync && op.stream != replay::kNone &&
                op.stream < t.pend.size()) {
                const uint64_t m = t.pend[op.stream].clear();
                t.pendTotal -= m;
                for (uint32_t k : t.active) p.lanes[k].free += m;
            }
            if (!onDevice) continue;
            if (op.kind == Op::Kind::ContextSync) {
                uint64_t m = 0;
                for (Pending& q : t.pend) m += q.clear();
                t.pendTotal = 0;
                for (uint32_t k : t.active) p.lanes[k].free += m;
            }
            const uint64_t floor = roundUp(t.live + t.pendTotal, g);
            for (uint32_t k : t.active) {
                Lane& l = p.lanes[k];
                const uint64_t threshold = this->threshold(p, k);
                const uint64_t target = std::max(floor, threshold - threshold % g);
                if (l.reserved <= target) continue;
                account(l, t.live, op.ts);
                l.out.releases++;
                l.out.releasedBytes += l.reserved - target;
                setReserved(l, target, op.ts);
                l.free = target - t.live - t.pendTotal;
            }
        }
        if (p.trunks.size() > 1) rejoin(p);
    }
}

// Lanes split off rejoin where a synchronize left their trunk and another with no pending frees
// and the same live bytes: the same trunk again. (Trunks alike with frees still pending are
// left apart: comparing their queues at every synchronize cost more than it saved.)
void LaneModel::rejoin(Pool& p) {
    auto drained = [](const Trunk& t) {
        if (t.pendTotal != 0) return false;
        for (const Pending& q : t.pend)
            if (q.head != q.q.size()) return false;
        return true;
    };
    std::vector<uint8_t> empty(p.trunks.size());
    for (size_t i = 0; i < p.trunks.size(); ++i) empty[i] = drained(p.trunks[i]);
    for (size_t a = 0; a + 1 < p.trunks.size(); ++a) {
        if (!empty[a]) continue;
        for (size_t b = p.trunks.size(); b-- > a + 1;) {
            Trunk &x = p.trunks[a], &y = p.trunks[b];
            if (!empty[b] || x.live != y.live) continue;
            x.active.insert(x.active.end(), y.active.begin(), y.active.end());
            p.trunks.erase(p.trunks.begin() + static_cast<std::ptrdiff_t>(b));
            empty.erase(empty.begin() + static_cast<std::ptrdiff_t>(b));
        }
    }
}

void LaneModel::trim(const Op& op) {
    Pool& p = at(op.pool);
    const uint64_t g = cal_.growthGranule;
    for (Trunk& t : p.trunks) {
        const uint64_t floor = roundUp(t.live + t.pendTotal, g);
        const uint64_t target = std::max(floor, roundUp(op.value, g));
        for (uint32_t k : t.active) {
            Lane& l = p.lanes[k];
            if (l.reserved <= target) continue;
            account(l, t.live, op.ts);
            l.out.trims++;
            setReserved(l, target, op.ts);
            l.free = target - t.live - t.pendTotal;
        }
    }
}

void LaneModel::reset(const Op& op) {
    Pool& p = at(op.pool);
    for (Trunk& t : p.trunks) {
        for (uint32_t k : t.active) {
            Lane& l = p.lanes[k];
            account(l, t.live, op.ts);
            l.free = 0;
            if (l.reserved != 0) setReserved(l, 0, op.ts);
        }
        t.live = t.pendTotal = 0;
        for (Pending& q : t.pend) q.clear();
    }
}

uint64_t LaneModel::releasesOf(size_t k, uint32_t pool) const {
    if (pool >= pools_.size() || k >= pools_[pool].lanes.size()) return 0;
    return pools_[pool].lanes[k].out.releases;
}

uint64_t LaneModel::peakReservedSoFar(size_t k) const {
    uint64_t top = 0;
    for (const Pool& p : pools_)
        if (k < p.lanes.size()) top = std::max(top, p.lanes[k].out.peakReserved);
    return top;
}

bool LaneModel::policyOffSoFar(PoolAttr a) const {
    for (const Pool& p : pools_)
        if (p.init && !p.policy(a)) return true;
    return false;
}

std::vector<PoolPrediction> LaneModel::collect(size_t k, const Tape& tape) const {
    const int64_t last = std::max<int64_t>(0, tape.lastTs);
    std::vector<PoolPrediction> out;
    for (size_t j = 0; j < tape.recorded.size() && j < tape.poolIndex.size(); ++j) {
        const uint32_t i = tape.poolIndex[j];
        const PoolPrediction& rec = tape.recorded[j];
        PoolPrediction o;
        if (i < pools_.size() && pools_[i].init && k < pools_[i].lanes.size()) {
            const Pool& p = pools_[i];
            const Lane& l = p.lanes[k];
            uint64_t live = 0;
            for (const Trunk& t : p.trunks)
                if (std::find(t.active.begin(), t.active.end(), k) != t.active.end()) live = t.live;
            o = l.out;
            o.touched = p.touched;
            o.maxIdle = l.maxIdle;
            o.peakLive = l.peakLive;
            o.finalReserved = l.reserved;
            // PoolModel::collect's window: to the tape's end, the recorded side's, or the pool's
            // last change, whichever is last.
            int64_t end = std::max(last, j < tape.recordedEnd.size()
                                             ? tape.recordedEnd[j]
                                             : std::numeric_limits<int64_t>::min());
            end = std::max({end, l.idle.lastTs, int64_t{0}});
            if (const auto mean = l.idle.meanTo(end, idleOf(l.reserved, live))) o.meanIdle = *mean;
        }
        detail::takeRecordedSide(o, rec);
        o.releaseThreshold = thresholds_[k].value_or(rec.releaseThreshold);
        o.followEventDependencies = rec.followEventDependencies;
        o.allowOpportunistic = rec.allowOpportunistic;
        o.allowInternalDependencies = rec.allowInternalDependencies;
        out.push_back(std::move(o));
    }
    return out;
}

} // namespace poolscope::whatif
