// A replay's state copied, compared, and carried over a piece of a trace replayed without it
// (issue #15: a trace split in time). afterPiece() is the state at the next piece's start from
// the state at this one's and what a replay of the piece alone noted (PieceLog, ReplayImpl.h).
#include <algorithm>
#include <climits>
#include <optional>
#include <tuple>

#include "ReplayImpl.h"

namespace poolscope::replay {

namespace {

bool sameInfo(const PoolInfo& a, const PoolInfo& b) {
    return std::tie(a.handle, a.device, a.kind, a.handleTypes, a.locationType, a.locationId,
                    a.maxSize, a.createdTsNs) ==
           std::tie(b.handle, b.device, b.kind, b.handleTypes, b.locationType, b.locationId,
                    b.maxSize, b.createdTsNs);
}

bool sameInfo(const StreamInfo& a, const StreamInfo& b) {
    return std::tie(a.handle, a.device, a.priority, a.flags, a.priorityKnown) ==
           std::tie(b.handle, b.device, b.priority, b.flags, b.priorityKnown);
}

bool sameBlock(const Block& a, const Block& b) {
    return std::tie(a.ptr, a.bytes, a.allocSeq, a.allocTsNs, a.pool, a.stream, a.tid, a.imported) ==
           std::tie(b.ptr, b.bytes, b.allocSeq, b.allocTsNs, b.pool, b.stream, b.tid, b.imported);
}

bool sameMem(const MemBlock& a, const MemBlock& b) {
    return std::tie(a.ptr, a.bytes, a.allocSeq, a.allocTsNs, a.kind, a.api, a.device, a.flags) ==
           std::tie(b.ptr, b.bytes, b.allocSeq, b.allocTsNs, b.kind, b.api, b.device, b.flags);
}

bool samePool(const PoolState& a, const PoolState& b) {
    if (!sameInfo(a.info, b.info)) return false;
    if (std::tie(a.reserved, a.used, a.watermarksKnown, a.readTsNs, a.rederive, a.liveBytes,
                 a.liveCount) != std::tie(b.reserved, b.used, b.watermarksKnown, b.readTsNs,
                                          b.rederive, b.liveBytes, b.liveCount))
        return false;
    for (int k = 0; k < 4; ++k)
        if (a.knobs[k].known != b.knobs[k].known || a.knobs[k].value != b.knobs[k].value)
            return false;
    return true;
}

bool sameStream(const StreamState& a, const StreamState& b) {
    return sameInfo(a.info, b.info) &&
           std::tie(a.liveBytes, a.liveCount, a.freedBytes, a.clearedBytes) ==
               std::tie(b.liveBytes, b.liveCount, b.freedBytes, b.clearedBytes);
}

bool sameOutside(const OutsideState& a, const OutsideState& b) {
    return std::tie(a.device, a.liveBytes, a.liveCount, a.peakBytes, a.peakTsNs, a.managedLiveBytes,
                    a.managedPeakBytes, a.allocs, a.failedAllocs, a.frees, a.syncFrees,
                    a.syncCallNs) ==
           std::tie(b.device, b.liveBytes, b.liveCount, b.peakBytes, b.peakTsNs, b.managedLiveBytes,
                    b.managedPeakBytes, b.allocs, b.failedAllocs, b.frees, b.syncFrees,
                    b.syncCallNs);
}

bool samePinned(const PinnedState& a, const PinnedState& b) {
    return std::tie(a.allocatedBytes, a.registeredBytes, a.allocatedPeak, a.registeredPeak,
                    a.totalPeak, a.totalPeakTsNs, a.allocs, a.frees, a.registers, a.unregisters,
                    a.failed) ==
           std::tie(b.allocatedBytes, b.registeredBytes, b.allocatedPeak, b.registeredPeak,
                    b.totalPeak, b.totalPeakTsNs, b.allocs, b.frees, b.registers, b.unregisters,
                    b.failed);
}

// Two maps with the same keys and, key by key, values `same` holds equal.
template <class Map, class Same>
bool sameMap(const Map& a, const Map& b, Same same) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a) {
        auto it = b.find(k);
        if (it == b.end() || !same(v, it->second)) return false;
    }
    return true;
}

template <class V, class Same>
bool sameList(const std::vector<V>& a, const std::vector<V>& b, Same same) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (!same(a[i], b[i])) return false;
    return true;
}

} // namespace

Replay Replay::clone() const {
    Replay r;
    r.pools_ = pools_;
    r.streams_ = streams_;
    r.devices_ = devices_;
    r.outside_ = outside_;
    r.pinned_ = pinned_;
    r.fastPools_ = fastPools_;
    r.fastStreams_ = fastStreams_;
    r.lastPoolHandle_ = lastPoolHandle_;
    r.lastPoolIdx_ = lastPoolIdx_;
    r.lastStreamHandle_ = lastStreamHandle_;
    r.lastStreamIdx_ = lastStreamIdx_;
    r.eventCount_ = eventCount_;
    r.unmatchedFrees_ = unmatchedFrees_;
    r.reusedWithoutFree_ = reusedWithoutFree_;
    r.pendingFreeBytes_ = pendingFreeBytes_;
    Impl& d = *r.d_;
    d.poolIdx = d_->poolIdx;
    d.streamIdx = d_->streamIdx;
    d.lastRecord = d_->lastRecord;
    d.lastWait = d_->lastWait;
    d.maybeRetry = d_->maybeRetry;
    d.deviceMem = d_->deviceMem;
    d.hostMem = d_->hostMem;
    if (follow_) {
        d.live.reserve(liveBlockCount());
        forEachLive([&](const Block& b) { d.live.put(b.ptr, b); });
    } else
        d.live = d_->live;
    return r;
}

bool Replay::sameState(const Replay& o) const {
    if (!sameList(pools_, o.pools_, samePool) || !sameList(streams_, o.streams_, sameStream) ||
        !sameList(outside_, o.outside_, sameOutside) || !samePinned(pinned_, o.pinned_))
        return false;
    if (std::tie(eventCount_, unmatchedFrees_, reusedWithoutFree_, pendingFreeBytes_) !=
        std::tie(o.eventCount_, o.unmatchedFrees_, o.reusedWithoutFree_, o.pendingFreeBytes_))
        return false;
    const Impl &a = *d_, &b = *o.d_;
    auto sameRecord = [](const Impl::Record& x, const Impl::Record& y) {
        return std::tie(x.stream, x.tsNs, x.freedAtRecord) == std::tie(y.stream, y.tsNs, y.freedAtRecord);
    };
    auto sameWait = [](const Impl::Wait& x, const Impl::Wait& y) {
        return x.recordTsNs == y.recordTsNs && x.waitTsNs == y.waitTsNs;
    };
    auto sameRetry = [](const Impl::MaybeRetry& x, const Impl::MaybeRetry& y) {
        return std::tie(x.seq, x.bytes, x.tsNs) == std::tie(y.seq, y.bytes, y.tsNs);
    };
    if (!sameMap(a.lastRecord, b.lastRecord, sameRecord) || !sameMap(a.lastWait, b.lastWait, sameWait) ||
        !sameMap(a.maybeRetry, b.maybeRetry, sameRetry) || !sameMap(a.deviceMem, b.deviceMem, sameMem) ||
        !sameMap(a.hostMem, b.hostMem, sameMem))
        return false;
    if (liveBlockCount() != o.liveBlockCount()) return false;
    // A follower keeps its blocks by slot: look them up by pointer in a map of its own.
    const Replay* plainA = follow_ ? nullptr : this;
    const Replay* plainB = o.follow_ ? nullptr : &o;
    std::optional<Replay> copy;
    if (!plainA && !plainB) {
        copy.emplace(o.clone());
        plainB = &*copy;
    }
    const Replay& looked = plainB ? *plainB : *plainA;
    const Replay& walked = plainB ? *this : o;
    bool same = true;
    walked.forEachLive([&](const Block& blk) {
        if (!same) return;
        const Block* other = looked.d_->live.find(blk.ptr);
        same = other && sameBlock(blk, *other);
    });
    return same;
}

void Replay::startPiece() {
    piece_ = std::make_unique<PieceLog>();
    piece_->declaredPools = pools_.size();
    piece_->declaredStreams = streams_.size();
}

bool Replay::pieceTouch(uint64_t ptr, const Event& e, uint32_t stream, int how) {
    const bool sized = e.has(kSizeKnown);
    return piece_->touch({ptr, sized ? e.size : 0, stream, static_cast<PieceLog::Touch>(how), sized, false});
}

// Memory outside the pools over the piece (r: the start's state, carried): the start's blocks
// less those the piece released or allocated over, plus the piece's own; the counts added, the
// live totals counted again, the peaks the start's or its live bytes plus the piece's peak.
// False where that peak cannot be told (the piece both ended some of the start's memory and
// allocated its own). `released`: the start's blocks the piece's frees released (more are added).
bool Replay::carryOutside(Replay& r, std::vector<MemBlock>& released) const {
    const PieceLog& log = *piece_;
    Impl& d = *r.d_;
    bool startEnded = !released.empty();
    for (const PieceLog::MemTouched& t : log.memFirsts) {
        auto& set = t.host ? d.hostMem : d.deviceMem;
        auto it = set.find(t.ptr);
        if (it == set.end()) continue;
        if (!t.put && it->second.kind != t.want) continue; // unmatched there too
        if (!t.put) released.push_back(it->second);
        set.erase(it);
        startEnded = true;
    }
    bool allocatedHere = pinned_.allocs + pinned_.registers > 0;
    for (const OutsideState& o : outside_) allocatedHere |= o.allocs > 0;
    const bool ok = !startEnded || !allocatedHere;
    for (const auto& [ptr, m] : d_->deviceMem) d.deviceMem[ptr] = m;
    for (const auto& [ptr, m] : d_->hostMem) d.hostMem[ptr] = m;

    // Per device, in order of first sight: the start's, then the piece's new ones.
    auto entry = [&](int device) -> OutsideState& { return r.outside_[r.outsideAt(int16_t(device))]; };
    for (const OutsideState& lo : outside_) {
        OutsideState& o = entry(lo.device);
        const uint64_t live = o.liveBytes, managed = o.managedLiveBytes;
        if (live + lo.peakBytes > o.peakBytes) {
            o.peakBytes = live + lo.peakBytes;
            o.peakTsNs = lo.peakTsNs;
        }
        o.managedPeakBytes = std::max(o.managedPeakBytes, managed + lo.managedPeakBytes);
        o.allocs += lo.allocs;
        o.failedAllocs += lo.failedAllocs;
        o.frees += lo.frees;
        o.syncFrees += lo.syncFrees;
        o.syncCallNs += lo.syncCallNs;
    }
    for (const MemBlock& m : released)
        if (m.kind == EventKind::DeviceAlloc) entry(m.device).frees++;
    for (OutsideState& o : r.outside_) o.liveBytes = o.liveCount = o.managedLiveBytes = 0;
    for (const auto& [ptr, m] : d.deviceMem) {
        OutsideState& o = entry(m.device);
        if (m.api == static_cast<uint8_t>(DeviceAllocApi::Managed)) {
            o.managedLiveBytes += m.bytes;
        } else {
            o.liveBytes += m.bytes;
            o.liveCount++;
        }
    }
    PinnedState& p = r.pinned_;
    const PinnedState& lp = pinned_;
    p.allocatedPeak = std::max(p.allocatedPeak, p.allocatedBytes + lp.allocatedPeak);
    p.registeredPeak = std::max(p.registeredPeak, p.registeredBytes + lp.registeredPeak);
    if (p.totalBytes() + lp.totalPeak > p.totalPeak) {
        p.totalPeak = p.totalBytes() + lp.totalPeak;
        p.totalPeakTsNs = lp.totalPeakTsNs;
    }
    p.allocs += lp.allocs;
    p.frees += lp.frees;
    p.registers += lp.registers;
    p.unregisters += lp.unregisters;
    p.failed += lp.failed;
    p.allocatedBytes = p.registeredBytes = 0;
    for (const auto& [ptr, m] : d.hostMem)
        (m.kind == EventKind::HostAlloc ? p.allocatedBytes : p.registeredBytes) += m.bytes;
    return ok;
}

Replay Replay::afterPiece(const Replay& start, bool* exact) const {
    Replay r = start.clone();
    if (!piece_) {
        if (exact) *exact = false;
        return r;
    }
    const PieceLog& log = *piece_;
    bool ok = true;
    // Entities the trace's tables did not declare get indices in order of first sight: the
    // start's, then this piece's new ones. This replay numbered them from the declared ones on,
    // so its own must be the start's in the same order, the rest new to the start.
    auto carryEntities = [&](auto& mine, auto& theirs, size_t declared, auto lookup) {
        for (size_t i = declared; i < mine.size(); ++i) {
            if (i < theirs.size()) {
                if (theirs[i].info.handle != mine[i].info.handle) ok = false;
                continue;
            }
            bool isNew = false;
            const uint32_t at = lookup(mine[i].info.handle, int16_t(mine[i].info.device), isNew);
            if (!isNew || at != i) ok = false;
            theirs[at].info = mine[i].info;
        }
    };
    carryEntities(pools_, r.pools_, log.declaredPools,
                  [&](uint64_t h, int16_t dev, bool& isNew) { return r.poolAt(h, dev, isNew); });
    carryEntities(streams_, r.streams_, log.declaredStreams,
                  [&](uint64_t h, int16_t dev, bool& isNew) { return r.streamAt(h, dev, isNew); });
    const size_t nPools = std::min(r.pools_.size(), pools_.size());
    const size_t nStreams = std::min(r.streams_.size(), streams_.size());
    Impl& d = *r.d_;
    using Touch = PieceLog::Touch;

    // Each pointer's first operation in the piece met the start's live set: that block ended
    // there, freed or replaced.
    if (log.doubleFree) ok = false;
    uint64_t matchedFrees = 0, replaced = 0;
    std::vector<MemBlock> memFreed; // the start's memory outside the pools released here
    for (const PieceLog::Touched& t : log.firsts) {
        Block b;
        if (!d.live.take(t.ptr, b)) {
            // cudaFreeAsync of the start's cudaMalloc memory, which this replay did not have.
            if (t.how == Touch::Free && !log.memSeen[0].find(t.ptr)) {
                if (auto it = d.deviceMem.find(t.ptr); it != d.deviceMem.end()) {
                    memFreed.push_back(it->second);
                    d.deviceMem.erase(it);
                    matchedFrees++;
                    if (t.sized) ok = false;
                    continue;
                }
            }
            // A free this replay counted by its size, of a block that was not there either.
            if (t.how == Touch::Free && t.sized) ok = false;
            continue;
        }
        switch (t.how) {
        case Touch::Alloc: replaced++; break;
        case Touch::Free:
            matchedFrees++;
            // Counted by the event's size here; by the block's (or not at all, imported) there.
            if (b.imported ? t.sized : (!t.sized || t.size != b.bytes)) ok = false;
            break;
        case Touch::DeviceFree: ok = false; break; // taken back without a free's accounting
        case Touch::Import: break;
        }
    }
    d.live.reserve(d.live.size() + liveBlockCount());
    forEachLive([&](const Block& b) { d.live.put(b.ptr, b); });
    for (PoolState& p : r.pools_) p.liveBytes = p.liveCount = 0;
    for (StreamState& s : r.streams_) s.liveBytes = s.liveCount = 0;
    d.live.forEach([&](const Block& b) {
        if (b.imported || b.pool >= r.pools_.size() || b.stream >= r.streams_.size()) return;
        r.pools_[b.pool].liveBytes += b.bytes;
        r.pools_[b.pool].liveCount++;
        r.streams_[b.stream].liveBytes += b.bytes;
        r.streams_[b.stream].liveCount++;
    });

    // Frees and clears: this piece's counts are the start's plus a constant per stream (its
    // frees of blocks from before it counted by their sizes).
    for (size_t s = 0; s < nStreams; ++s) {
        StreamState& rs = r.streams_[s];
        const StreamState& ls = streams_[s];
        const uint64_t base = s < start.streams_.size() ? start.streams_[s].freedBytes : 0;
        rs.freedBytes = base + ls.freedBytes;
        if (s < log.clearSeen.size() && log.clearSeen[s])
            rs.clearedBytes = std::max(rs.clearedBytes, base + log.clearedUpTo[s]);
        if (ls.info.priorityKnown) {
            rs.info.flags = ls.info.flags;
            rs.info.priority = ls.info.priority;
            rs.info.priorityKnown = true;
        }
        if (rs.info.device < 0) rs.info.device = ls.info.device;
    }
    // A context synchronize cleared the start's streams this replay had not met by then, up to
    // what they had freed before the piece.
    for (const auto& [device, from] : log.contextClearsFrom)
        for (size_t s = from; s < start.streams_.size(); ++s) {
            const int dev = start.streams_[s].info.device;
            if (device < 0 || dev < 0 || dev == device)
                r.streams_[s].clearedBytes = std::max(r.streams_[s].clearedBytes, start.streams_[s].freedBytes);
        }
    // Synchronizes of, and waits on, CUevents recorded before the piece, against the records
    // the start has (before this piece's own replace them).
    std::unordered_map<uint64_t, std::pair<uint64_t, Impl::Wait>> openWaits; // key -> (seq, wait)
    for (const PieceLog::OpenRef& o : log.openRefs) {
        auto it = d.lastRecord.find(o.event);
        if (it == d.lastRecord.end()) continue;
        const Impl::Record& rec = it->second;
        if (o.waiting != kNone && rec.stream == o.waiting) continue;
        if (rec.stream < r.streams_.size())
            r.streams_[rec.stream].clearedBytes = std::max(r.streams_[rec.stream].clearedBytes, rec.freedAtRecord);
        if (o.waiting != kNone) openWaits[Impl::pairKey(o.waiting, rec.stream)] = {o.seq, Impl::Wait{rec.tsNs, o.tsNs}};
    }
    for (const auto& [event, rec] : d_->lastRecord) {
        Impl::Record moved = rec;
        if (rec.stream < start.streams_.size()) moved.freedAtRecord += start.streams_[rec.stream].freedBytes;
        d.lastRecord[event] = moved;
    }
    for (const auto& [key, w] : openWaits) {
        auto local = log.waitSeq.find(key);
        if (local == log.waitSeq.end() || local->second < w.first) d.lastWait[key] = w.second;
    }
    for (const auto& [key, w] : d_->lastWait) {
        auto open = openWaits.find(key);
        auto local = log.waitSeq.find(key);
        if (open == openWaits.end() || (local != log.waitSeq.end() && local->second > open->second.first))
            d.lastWait[key] = w;
    }
    r.pendingFreeBytes_ = 0;
    for (const StreamState& s : r.streams_) r.pendingFreeBytes_ += s.freedBytes - s.clearedBytes;

    // The threads that allocated in the piece: their retry pending, if any, is the piece's.
    for (uint32_t tid : log.tids) {
        d.maybeRetry.erase(tid);
        if (auto it = d_->maybeRetry.find(tid); it != d_->maybeRetry.end()) d.maybeRetry.emplace(tid, it->second);
    }

    for (size_t i = 0; i < nPools; ++i) {
        PoolState& rp = r.pools_[i];
        const PoolState& lp = pools_[i];
        // An old trace's used bytes derived again from the start's: not carried.
        if (rp.rederive) ok = false;
        rp.rederive = lp.rederive;
        if (i < log.releaseFirst.size() && log.releaseFirst[i] < rp.readTsNs) ok = false;
        const uint8_t read = i < log.readings.size() ? log.readings[i] : 0;
        if (read & PieceLog::kReadReserved) rp.reserved = lp.reserved;
        if (read & PieceLog::kReadUsed) rp.used = lp.used;
        rp.watermarksKnown = rp.watermarksKnown || lp.watermarksKnown;
        rp.readTsNs = std::max(rp.readTsNs, lp.readTsNs);
        PoolInfo& ri = rp.info;
        const PoolInfo& li = lp.info;
        if (ri.kind == PoolKind::Unknown) ri.kind = li.kind;
        if (ri.handleTypes == 0) ri.handleTypes = li.handleTypes;
        if (ri.createdTsNs == 0) ri.createdTsNs = li.createdTsNs;
        if (ri.maxSize == 0) ri.maxSize = li.maxSize;
        if (ri.locationType == 0) {
            ri.locationType = li.locationType;
            ri.locationId = li.locationId;
        }
        if (ri.device < 0) ri.device = li.device;
    }
    for (const auto& [pool, k] : log.knobDefaults)
        if (pool < nPools && (pool >= start.pools_.size() || !start.pools_[pool].knobs[k].known))
            r.pools_[pool].knobs[k] = pools_[pool].knobs[k];
    for (const auto& [pool, k] : log.knobsSet)
        if (pool < nPools) r.pools_[pool].knobs[k] = pools_[pool].knobs[k];

    if (!carryOutside(r, memFreed)) ok = false;

    r.eventCount_ = start.eventCount_ + eventCount_;
    r.unmatchedFrees_ = start.unmatchedFrees_ + unmatchedFrees_ - std::min(matchedFrees, unmatchedFrees_);
    r.reusedWithoutFree_ = start.reusedWithoutFree_ + reusedWithoutFree_ + replaced;
    if (exact) *exact = ok;
    return r;
}

} // namespace poolscope::replay
