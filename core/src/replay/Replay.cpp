// The allocator replay. One pass in seq order; per event a few integer updates on vectors of
// PODs (see FlatPtrMap.h for why the live set is not a std map).
#include "poolscope/replay/Replay.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "FlatPtrMap.h"
#include "ReplayImpl.h"
#include "poolscope/EventFields.h"

namespace poolscope::replay {

int PoolState::knobIndex(PoolAttr a) {
    switch (a) {
    case PoolAttr::ReleaseThreshold: return 0;
    case PoolAttr::ReuseFollowEventDependencies: return 1;
    case PoolAttr::ReuseAllowOpportunistic: return 2;
    case PoolAttr::ReuseAllowInternalDependencies: return 3;
    default: return -1;
    }
}

Replay::Replay() : d_(std::make_unique<Impl>()) {}
Replay::~Replay() = default;
Replay::Replay(Replay&&) noexcept = default;
Replay& Replay::operator=(Replay&&) noexcept = default;

const Replay::Fast* Replay::findFast(const std::vector<Fast>& fast, uint64_t handle) {
    for (const Fast& f : fast)
        if (f.handle == handle) return &f;
    return nullptr;
}

// The lookup behind poolAt/streamAt once the last-used handle missed: the small array of the
// first kFast entities, then the hash map; a handle never seen gets the next index. One body for
// pools and streams (State is PoolState or StreamState, both with an `info` holding handle and
// device; Index the Impl's map from handle to index).
template <class State, class Index>
uint32_t Replay::lookupSlow(std::vector<State>& states, std::vector<Fast>& fast, Index& index,
                            uint64_t& lastHandle,
                            uint32_t& lastIdx, uint64_t handle, int16_t device, bool& isNew) {
    uint32_t i;
    if (const Fast* f = findFast(fast, handle)) {
        isNew = false;
        i = f->idx;
    } else {
        auto [it, inserted] = index.try_emplace(handle, static_cast<uint32_t>(states.size()));
        isNew = inserted;
        i = it->second;
        if (inserted) {
            State st;
            st.info.handle = handle;
            st.info.device = device;
            states.push_back(std::move(st));
            if (fast.size() < kFast) fast.push_back({handle, i});
        }
    }
    // First seen in a sample (pools), which names no device: learnt from a later event.
    if (!isNew && device >= 0 && states[i].info.device < 0) states[i].info.device = device;
    lastHandle = handle;
    lastIdx = i;
    return i;
}

uint32_t Replay::poolSlow(uint64_t handle, int16_t device, bool& isNew) {
    return lookupSlow(pools_, fastPools_, d_->poolIdx, lastPoolHandle_, lastPoolIdx_, handle,
                      device, isNew);
}

uint32_t Replay::streamSlow(uint64_t handle, int16_t device, bool& isNew) {
    return lookupSlow(streams_, fastStreams_, d_->streamIdx, lastStreamHandle_, lastStreamIdx_,
                      handle, device, isNew);
}

uint32_t Replay::declarePool(const PoolInfo& info) {
    bool isNew = false;
    const uint32_t i = poolAt(info.handle, static_cast<int16_t>(info.device), isNew);
    PoolInfo& p = pools_[i].info;
    if (isNew || p.kind == PoolKind::Unknown) {
        const int device = p.device;
        p = info;
        if (p.device < 0) p.device = device;
    }
    return i;
}

bool Replay::declareKnob(uint64_t pool, PoolAttr attr, uint64_t value) {
    const uint32_t i = poolIndex(pool);
    const int k = PoolState::knobIndex(attr);
    if (i == kNone || k < 0) return false;
    Knob& knob = pools_[i].knobs[k];
    if (!knob.known) knob = Knob{attr == PoolAttr::ReleaseThreshold ? value : uint64_t(value != 0), true};
    return true;
}

uint32_t Replay::declareStream(const StreamInfo& info) {
    bool isNew = false;
    const uint32_t i = streamAt(info.handle, static_cast<int16_t>(info.device), isNew);
    StreamInfo& s = streams_[i].info;
    const int device = s.device;
    s = info;
    if (s.device < 0) s.device = device;
    return i;
}

uint32_t Replay::poolIndex(uint64_t handle) const {
    auto it = d_->poolIdx.find(handle);
    return it == d_->poolIdx.end() ? kNone : it->second;
}

uint32_t Replay::streamIndex(uint64_t handle) const {
    auto it = d_->streamIdx.find(handle);
    return it == d_->streamIdx.end() ? kNone : it->second;
}

const Block* Replay::liveBlock(uint64_t ptr) const {
    if (ptr == 0 || follow_) return nullptr;
    return d_->live.find(ptr);
}

size_t Replay::liveBlockCount() const { return follow_ ? slotsLive_ : d_->live.size(); }

void Replay::forEachLive(const std::function<void(const Block&)>& f) const {
    if (follow_) {
        for (size_t i = 0; i < slots_.size(); ++i)
            if (slotLive_[i]) f(slots_[i]);
        return;
    }
    d_->live.forEach(f);
}

const MemBlock* Replay::liveMem(uint64_t ptr, bool host) const {
    const auto& m = host ? d_->hostMem : d_->deviceMem;
    auto it = m.find(ptr);
    return it == m.end() ? nullptr : &it->second;
}

void Replay::forEachLiveMem(const std::function<void(const MemBlock&)>& f) const {
    for (const auto& [ptr, m] : d_->deviceMem) f(m);
    for (const auto& [ptr, m] : d_->hostMem) f(m);
}

uint32_t Replay::outsideAt(int16_t device) {
    for (uint32_t i = 0; i < outside_.size(); ++i)
        if (outside_[i].device == device) return i;
    OutsideState o;
    o.device = device;
    outside_.push_back(o);
    return static_cast<uint32_t>(outside_.size() - 1);
}

// A block of memory outside the pools just taken out of the live set leaves the totals.
void Replay::releaseMem(const MemBlock& m) {
    switch (m.kind) {
    case EventKind::DeviceAlloc: {
        OutsideState& o = outside_[outsideAt(m.device)];
        if (m.api == static_cast<uint8_t>(DeviceAllocApi::Managed)) {
            o.managedLiveBytes -= m.bytes;
        } else {
            o.liveBytes -= m.bytes;
            o.liveCount--;
        }
        break;
    }
    case EventKind::HostAlloc: pinned_.allocatedBytes -= m.bytes; break;
    case EventKind::HostRegister: pinned_.registeredBytes -= m.bytes; break;
    default: break;
    }
}

void Replay::memAlloc(const Event& e, uint32_t tag) {
    const bool device = e.kind == EventKind::DeviceAlloc;
    if (device) fact_.outside = outsideAt(e.device);
    if (e.failed()) {
        if (device)
            outside_[fact_.outside].failedAllocs++;
        else
            pinned_.failed++;
        return;
    }
    MemBlock m;
    if (device) {
        const DeviceAllocFields a = DeviceAllocFields::of(e);
        m.ptr = a.ptr;
        m.bytes = a.bytes;
        m.api = static_cast<uint8_t>(a.api);
    } else {
        const PinnedFields p = PinnedFields::of(e);
        m.ptr = p.ptr;
        m.bytes = p.bytes;
        m.flags = p.flags;
        m.api = e.kind == EventKind::HostAlloc ? static_cast<uint8_t>(p.api) : 0;
    }
    m.allocSeq = e.seq;
    m.allocTsNs = e.tsNs;
    m.kind = e.kind;
    m.device = e.device;
    m.tag = tag;
    switch (e.kind) {
    case EventKind::DeviceAlloc: outside_[fact_.outside].allocs++; break;
    case EventKind::HostAlloc: pinned_.allocs++; break;
    default: pinned_.registers++; break;
    }
    if (m.ptr == 0) return; // a zero-byte request: nothing handed out
    if (piece_) [[unlikely]]
        piece_->memTouch(m.ptr, !device, true, e.kind);
    auto& live = device ? d_->deviceMem : d_->hostMem;
    if (auto it = live.find(m.ptr); it != live.end()) {
        // Its release was not recorded (dropped, or made by a call not traced).
        releaseMem(it->second);
        live.erase(it);
    }
    live.emplace(m.ptr, m);
    fact_.memAllocated = true;
    fact_.mem = m;
    if (device) {
        OutsideState& o = outside_[fact_.outside];
        if (m.api == static_cast<uint8_t>(DeviceAllocApi::Managed)) {
            o.managedLiveBytes += m.bytes;
            o.managedPeakBytes = std::max(o.managedPeakBytes, o.managedLiveBytes);
        } else {
            o.liveBytes += m.bytes;
            o.liveCount++;
            if (o.liveBytes > o.peakBytes) {
                o.peakBytes = o.liveBytes;
                o.peakTsNs = e.tsNs;
            }
        }
        return;
    }
    PinnedState& p = pinned_;
    if (e.kind == EventKind::HostAlloc) {
        p.allocatedBytes += m.bytes;
        p.allocatedPeak = std::max(p.allocatedPeak, p.allocatedBytes);
    } else {
        p.registeredBytes += m.bytes;
        p.registeredPeak = std::max(p.registeredPeak, p.registeredBytes);
    }
    if (p.totalBytes() > p.totalPeak) {
        p.totalPeak = p.totalBytes();
        p.totalPeakTsNs = e.tsNs;
    }
}

void Replay::memRelease(const Event& e) {
    const uint64_t ptr = e.ptr;
    if (e.failed() || ptr == 0) return; // a failed call released nothing; free(NULL) is a no-op
    if (piece_ && e.kind == EventKind::DeviceFree) [[unlikely]]
        pieceTouch(ptr, e, kNone, 2);
    if (e.kind == EventKind::DeviceFree) {
        if (liveTake(ptr, fact_.block)) {
            // A stream-ordered block freed with cudaFree: the driver takes it back at once,
            // without a synchronization (the program vouches its work on it is done).
            release(fact_.block);
            fact_.freed = true;
            if (fact_.block.pool != kNone) fact_.pool = fact_.block.pool;
            return;
        }
        if (e.pool != 0 && !d_->deviceMem.count(ptr)) { // a pool block whose alloc is not in the trace
            unmatchedFrees_++;
            fact_.unmatchedFree = true;
            return;
        }
        fact_.outside = outsideAt(e.device);
        OutsideState& o = outside_[fact_.outside];
        o.syncFrees++;
        o.syncCallNs += ReleaseMemFields::of(e).callNs;
        fact_.deviceSync = true;
    } else {
        pinned_.frees += e.kind == EventKind::HostFree;
        pinned_.unregisters += e.kind == EventKind::HostUnregister;
    }
    const bool host = e.kind != EventKind::DeviceFree;
    auto& live = host ? d_->hostMem : d_->deviceMem;
    auto it = live.find(ptr);
    const EventKind want = e.kind == EventKind::DeviceFree ? EventKind::DeviceAlloc
                           : e.kind == EventKind::HostFree ? EventKind::HostAlloc
                                                           : EventKind::HostRegister;
    if (piece_) [[unlikely]]
        piece_->memTouch(ptr, host, false, want);
    if (it == live.end() || it->second.kind != want) {
        fact_.memUnmatched = true;
        return;
    }
    fact_.mem = it->second;
    live.erase(it);
    releaseMem(fact_.mem);
    fact_.memReleased = true;
    if (!host) {
        // The block's own device (a cudaFree may run with another device current).
        OutsideState& owner = outside_[outsideAt(fact_.mem.device)];
        owner.frees++;
    }
}

void Replay::subscribe(Observer* o, uint32_t kindMask) {
    d_->observers.push_back({o, kindMask});
    anyObserver_ = true;
}

void Replay::unsubscribe(Observer* o) {
    auto& v = d_->observers;
    v.erase(std::remove_if(v.begin(), v.end(), [&](const Impl::Sub& s) { return s.o == o; }),
            v.end());
    anyObserver_ = !v.empty();
}

void Replay::notify() {
    const uint32_t bit = 1u << static_cast<unsigned>(fact_.event->kind);
    for (const Impl::Sub& s : d_->observers)
        if (s.mask & bit) s.o->onFact(fact_, *this);
}

// A block just taken out of the live set leaves the live totals.
void Replay::release(const Block& b) {
    if (b.imported) return;
    PoolState& p = pools_[b.pool];
    p.liveBytes -= b.bytes;
    p.liveCount--;
    StreamState& s = streams_[b.stream];
    s.liveBytes -= b.bytes;
    s.liveCount--;
}

void Replay::clearPending(uint32_t stream, uint64_t upTo) {
    if (piece_) [[unlikely]]
        piece_->cleared(stream, upTo);
    StreamState& s = streams_[stream];
    if (upTo > s.clearedBytes) {
        pendingFreeBytes_ -= upTo - s.clearedBytes;
        s.clearedBytes = upTo;
        fact_.clearedStream = fact_.pendingCleared ? kNone : stream;
        fact_.pendingCleared = true;
    }
}

// The thread's previous alloc failed with 201 and this one, the same size, succeeded soon after:
// that was the runtime binding a context and retrying, not a failure the program saw. Any
// next alloc of the thread settles it either way.
void Replay::resolveRetry(const Event& e) {
    auto it = d_->maybeRetry.find(e.tid);
    if (it == d_->maybeRetry.end()) return;
    const Impl::MaybeRetry m = it->second;
    d_->maybeRetry.erase(it);
    if (e.failed() || AllocFields::of(e).bytes != m.bytes || e.tsNs - m.tsNs > kRetryWindowNs)
        return;
    fact_.retry = true;
    fact_.retriedSeq = m.seq;
}

void Replay::alloc(const Event& e, uint32_t tag) {
    bool ns = false, np = false;
    const uint32_t si = streamAt(e.stream, e.device, ns);
    const uint32_t pi = poolAt(e.pool, e.device, np);
    fact_.stream = si;
    fact_.pool = pi;
    fact_.newStream = ns;
    fact_.newPool = fact_.newPool || np;
    if (piece_) [[unlikely]]
        piece_->tid(e.tid);
    if (!d_->maybeRetry.empty()) [[unlikely]]
        resolveRetry(e);
    if (e.failed()) {
        fact_.failedAlloc = true;
        if (e.result == kInvalidContext)
            d_->maybeRetry[e.tid] = Impl::MaybeRetry{e.seq, AllocFields::of(e).bytes, e.tsNs};
        return;
    }
    const AllocFields a = AllocFields::of(e);
    Block& b = fact_.block;
    b.ptr = a.ptr;
    b.bytes = a.bytes;
    b.allocSeq = e.seq;
    b.allocTsNs = e.tsNs;
    b.pool = pi;
    b.stream = si;
    b.tag = tag;
    b.tid = e.tid;
    b.imported = false; // fact_.block may hold an imported mapping a free released before
    fact_.allocated = true;
    if (a.ptr == 0) return; // a zero-byte request: nothing to free later
    if (piece_) [[unlikely]]
        pieceTouch(a.ptr, e, si, 0);
    if (liveTake(a.ptr, fact_.closed)) {
        reusedWithoutFree_++;
        fact_.replacedLive = true;
        release(fact_.closed);
    }
    livePut(a.ptr, b);
    PoolState& p = pools_[pi];
    p.liveBytes += a.bytes;
    p.liveCount++;
    StreamState& s = streams_[si];
    s.liveBytes += a.bytes;
    s.liveCount++;
}

void Replay::free(const Event& e) {
    const FreeFields f = FreeFields::of(e);
    // cudaFreeAsync(nullptr) is a legal no-op, and a failed free released nothing.
    if (f.ptr == 0 || e.failed()) return;
    bool ns = false;
    const uint32_t si = streamAt(e.stream, e.device, ns);
    fact_.stream = si;
    fact_.newStream = ns;
    const bool firstHere = piece_ && pieceTouch(f.ptr, e, si, 1);
    if (!liveTake(f.ptr, fact_.block)) {
        if (!d_->deviceMem.empty()) [[unlikely]] {
            // cudaFreeAsync may free cudaMalloc memory (the guide allows it).
            auto it = d_->deviceMem.find(f.ptr);
            if (it != d_->deviceMem.end()) {
                if (piece_) [[unlikely]]
                    piece_->memTouch(f.ptr, false, false, EventKind::DeviceAlloc);
                fact_.mem = it->second;
                d_->deviceMem.erase(it);
                releaseMem(fact_.mem);
                outside_[outsideAt(fact_.mem.device)].frees++;
                fact_.memReleased = true;
                return;
            }
        }
        if (piece_) [[unlikely]] {
            if (firstHere)
                piece_->firsts.back().unmatched = true;
            else if (f.bytes)
                piece_->doubleFree = true;
            if (f.bytes) {
                // A block from before the piece, most likely: its free counted as its event
                // says, so that this piece's clears and records are its start's plus a constant.
                streams_[si].freedBytes += *f.bytes;
                pendingFreeBytes_ += *f.bytes;
            }
        }
        unmatchedFrees_++;
        fact_.unmatchedFree = true;
        return;
    }
    release(fact_.block);
    const Block& b = fact_.block;
    fact_.freed = true;
    // An imported block may name no pool (its import event did not); the event's own pool, whose
    // watermarks this free may carry, then stays the fact's.
    if (b.pool != kNone) fact_.pool = b.pool;
    if (b.imported) return;
    streams_[si].freedBytes += b.bytes;
    pendingFreeBytes_ += b.bytes;
    if (b.stream != si) {
        fact_.crossStream = true;
        auto it = d_->lastWait.find(Impl::pairKey(si, b.stream));
        // The wait orders this free after work on the allocating stream only if that stream
        // recorded the event after the block was handed out.
        if (it != d_->lastWait.end() && it->second.recordTsNs >= b.allocTsNs) {
            fact_.orderedByWait = true;
            fact_.orderRecordTsNs = it->second.recordTsNs;
            fact_.orderWaitTsNs = it->second.waitTsNs;
        }
    }
}

bool Replay::liveTake(uint64_t ptr, Block& out) {
    if (follow_) [[unlikely]]
        return tapeTake(out);
    const bool found = d_->live.take(ptr, out);
    if (leadOut_) [[unlikely]]
        leadTake(found ? &out : nullptr);
    return found;
}

void Replay::livePut(uint64_t ptr, Block& b) {
    if (follow_) [[unlikely]] {
        tapePut(b);
        return;
    }
    if (leadOut_) [[unlikely]]
        leadPut(b);
    d_->live.put(ptr, b);
}

void Replay::prefetch(const Event& e) const {
    if (follow_) return;
    if ((e.kind == EventKind::Alloc || e.kind == EventKind::Free) && e.ptr != 0)
        d_->live.prefetch(e.ptr);
}

const Fact& Replay::apply(const Event& e, uint32_t tag) {
    fact_.reset(&e);
    bool isNew = false;
    if (e.kind == EventKind::Sample) {
        const uint32_t pi = poolAt(e.pool, e.device, isNew);
        PoolState& p = pools_[pi];
        p.reserved = e.reserved;
        p.used = e.used;
        p.watermarksKnown = true;
        p.readTsNs = std::max(p.readTsNs, e.tsNs);
        fact_.pool = pi;
        fact_.newPool = isNew;
        fact_.watermarks = true;
        if (piece_) [[unlikely]]
            piece_->reading(pi);
        if (anyObserver_) notify();
        return fact_;
    }
    eventCount_++;
    // PoolSetAccess's device is the device given access, not the pool's.
    const int16_t poolDevice = e.kind == EventKind::PoolSetAccess ? int16_t{-1} : e.device;
    // An implicit release comes from CUPTI's activity records, late: when the collector could
    // not put it at its own place in seq order, events after its time, whose readings are newer
    // and already include the release, come before it. Its reserved/used (read at the release)
    // would then set the pool back to a past state, and every used derived from it after would
    // be off until the next reading (GPT-2: used 1.69 GB low). Traces already recorded carry such
    // releases with their watermarks, so the rule is here rather than only in the collector.
    bool staleRelease = false;
    if (e.kind == EventKind::ImplicitRelease && e.pool != 0) {
        const uint32_t pi = poolIndex(e.pool);
        staleRelease = pi != kNone && e.tsNs < pools_[pi].readTsNs;
        if (staleRelease && e.has(kHasWatermarks)) {
            pools_[pi].rederive = true;
            if (piece_) [[unlikely]]
                piece_->reading(pi);
        }
        // Stale or not against the piece's start, which this replay does not have.
        if (piece_ && !staleRelease && pi != kNone) [[unlikely]]
            piece_->release(pi, e.tsNs);
    }
    if (e.has(kHasWatermarks) && e.pool != 0 && !staleRelease) {
        const uint32_t pi = poolAt(e.pool, poolDevice, isNew);
        PoolState& p = pools_[pi];
        fact_.watermarksBefore = p.watermarksKnown;
        fact_.reservedBefore = p.reserved;
        fact_.usedBefore = p.used;
        uint64_t used = e.used;
        if (!e.has(kUsedDerived)) {
            p.rederive = false;
        } else if (p.rederive && p.watermarksKnown) {
            // The collector's own rule (complete()), applied to this replay's base.
            if (e.kind == EventKind::Alloc)
                used = p.used + AllocFields::of(e).bytes;
            else if (e.has(kSizeKnown) && p.used >= e.size)
                used = p.used - e.size;
        }
        p.reserved = e.reserved;
        p.used = used;
        p.watermarksKnown = true;
        p.readTsNs = std::max(p.readTsNs, e.tsNs);
        fact_.pool = pi;
        fact_.newPool = isNew;
        fact_.watermarks = true;
        if (piece_) [[unlikely]]
            piece_->reading(pi);
    }
    auto pool = [&]() -> PoolState& {
        if (fact_.pool == kNone) {
            fact_.pool = poolAt(e.pool, poolDevice, isNew);
            fact_.newPool = isNew;
        }
        return pools_[fact_.pool];
    };
    auto stream = [&]() -> StreamState& {
        if (fact_.stream == kNone) {
            fact_.stream = streamAt(e.stream, e.device, isNew);
            fact_.newStream = isNew;
        }
        return streams_[fact_.stream];
    };

    switch (e.kind) {
    case EventKind::Alloc: alloc(e, tag); break;
    case EventKind::Free: free(e); break;
    case EventKind::PoolCreate:
    case EventKind::PoolImport: {
        PoolState& p = pool();
        const PoolCreateFields c = PoolCreateFields::of(e);
        if (p.info.kind == PoolKind::Unknown) p.info.kind = c.kind;
        if (p.info.handleTypes == 0) p.info.handleTypes = c.handleTypes;
        if (p.info.createdTsNs == 0) p.info.createdTsNs = e.tsNs;
        if (e.kind == EventKind::PoolImport) break;
        if (p.info.maxSize == 0) p.info.maxSize = c.maxSize;
        if (p.info.locationType == 0) {
            p.info.locationType = c.locationType;
            p.info.locationId = e.device;
        }
        // A new pool holds nothing and starts with the driver's defaults: threshold 0, every
        // reuse policy on.
        if (!fact_.watermarks) {
            p.reserved = p.used = 0;
            p.watermarksKnown = true;
            fact_.watermarks = true;
            if (piece_) [[unlikely]]
                piece_->reading(fact_.pool);
        }
        for (int i = 0; i < 4; ++i)
            if (!p.knobs[i].known) {
                p.knobs[i] = Knob{i == 0 ? 0u : 1u, true};
                if (piece_) [[unlikely]]
                    piece_->knobDefaults.emplace_back(fact_.pool, i);
            }
        break;
    }
    case EventKind::PoolDestroy: {
        PoolState& p = pool();
        if (!fact_.watermarks) {
            p.reserved = p.used = 0;
            p.watermarksKnown = true;
            fact_.watermarks = true;
            if (piece_) [[unlikely]]
                piece_->reading(fact_.pool);
        }
        break;
    }
    case EventKind::PoolSetAttribute:
    case EventKind::KnobChange: {
        PoolState& p = pool();
        PoolAttr attr;
        uint64_t value;
        std::optional<uint64_t> old;
        if (e.kind == EventKind::PoolSetAttribute) {
            const AttributeFields a = AttributeFields::of(e);
            attr = a.attr;
            value = a.value;
            old = a.old;
        } else {
            const KnobFields k = KnobFields::of(e);
            if (!k.isAttribute()) break;
            attr = k.attr();
            value = k.value;
            old = k.old;
        }
        const int ki = PoolState::knobIndex(attr);
        if (ki < 0 || e.failed()) break;
        Knob& knob = p.knobs[ki];
        fact_.knobChanged = true;
        fact_.knobAttr = attr;
        fact_.knobBefore = knob.known ? knob : old ? Knob{*old, true} : Knob{};
        knob = Knob{value, true};
        if (piece_) [[unlikely]]
            piece_->knobsSet.emplace_back(fact_.pool, ki);
        break;
    }
    case EventKind::DeviceSetMempool:
    case EventKind::PoolTrimTo: pool(); break;
    case EventKind::ImplicitRelease: {
        PoolState& p = pool();
        if (!fact_.watermarks && !staleRelease) {
            p.reserved = ReleaseFields::of(e).reservedAfter;
            fact_.reservedOnly = true;
            if (piece_) [[unlikely]]
                piece_->reading(fact_.pool, /*used=*/false);
        }
        break;
    }
    case EventKind::EventRecord: {
        StreamState& s = stream();
        d_->lastRecord[CuEventFields::of(e).event] =
            Impl::Record{fact_.stream, e.tsNs, s.freedBytes};
        break;
    }
    case EventKind::StreamWaitEvent: {
        stream();
        auto it = d_->lastRecord.find(CuEventFields::of(e).event);
        if (piece_ && it == d_->lastRecord.end()) [[unlikely]]
            piece_->openRefs.push_back({CuEventFields::of(e).event, fact_.stream, e.seq, e.tsNs});
        if (it == d_->lastRecord.end() || it->second.stream == fact_.stream) break;
        const Impl::Record& r = it->second;
        fact_.edge = true;
        fact_.edgeFrom = r.stream;
        fact_.edgeRecordTsNs = r.tsNs;
        d_->lastWait[Impl::pairKey(fact_.stream, r.stream)] = Impl::Wait{r.tsNs, e.tsNs};
        if (piece_) [[unlikely]]
            piece_->waitSeq[Impl::pairKey(fact_.stream, r.stream)] = e.seq;
        clearPending(r.stream, r.freedAtRecord);
        break;
    }
    case EventKind::StreamSynchronize: {
        StreamState& s = stream();
        clearPending(fact_.stream, s.freedBytes);
        break;
    }
    case EventKind::EventSynchronize: {
        auto it = d_->lastRecord.find(CuEventFields::of(e).event);
        if (it != d_->lastRecord.end()) clearPending(it->second.stream, it->second.freedAtRecord);
        else if (piece_) [[unlikely]]
            piece_->openRefs.push_back({CuEventFields::of(e).event, kNone, e.seq, e.tsNs});
        break;
    }
    case EventKind::ContextSynchronize:
        if (piece_) [[unlikely]] {
            auto [it, added] = piece_->contextClearsFrom.try_emplace(e.device, streams_.size());
            if (!added) it->second = std::min(it->second, streams_.size());
        }
        for (uint32_t i = 0; i < streams_.size(); ++i) {
            const int dev = streams_[i].info.device;
            if (e.device < 0 || dev < 0 || dev == e.device) clearPending(i, streams_[i].freedBytes);
        }
        break;
    case EventKind::StreamCreate: {
        StreamState& s = stream();
        const StreamCreateFields c = StreamCreateFields::of(e);
        s.info.flags = c.flags;
        s.info.priority = c.priority;
        s.info.priorityKnown = true;
        break;
    }
    case EventKind::StreamDestroy: stream(); break;
    case EventKind::PointerImport: {
        if (e.pool != 0) pool();
        const uint64_t ptr = SharedPointerFields::of(e).ptr;
        if (e.failed() || ptr == 0) break;
        Block b;
        b.ptr = ptr;
        b.allocSeq = e.seq;
        b.allocTsNs = e.tsNs;
        b.pool = fact_.pool;
        b.tid = e.tid;
        b.imported = true;
        if (piece_) [[unlikely]]
            pieceTouch(ptr, e, kNone, 3);
        if (liveTake(ptr, fact_.closed)) {
            release(fact_.closed);
            fact_.importReplaced = true;
        }
        livePut(ptr, b);
        break;
    }
    case EventKind::PoolExport:
    case EventKind::PointerExport:
    case EventKind::PoolSetAccess:
        if (e.pool != 0) pool();
        break;
    case EventKind::PeerCopy: stream(); break;
    case EventKind::Sample: break; // handled above
    case EventKind::DeviceAlloc:
    case EventKind::HostAlloc:
    case EventKind::HostRegister: memAlloc(e, tag); break;
    case EventKind::DeviceFree:
    case EventKind::HostFree:
    case EventKind::HostUnregister: memRelease(e); break;
    }
    if (anyObserver_) notify();
    return fact_;
}

const Fact& Replay::complete(Event& e) {
    const bool isFree = e.kind == EventKind::Free || e.kind == EventKind::DeviceFree;
    if (e.kind == EventKind::DeviceFree && e.pool != 0 && !liveBlock(e.ptr) &&
        liveMem(e.ptr, false)) [[unlikely]] {
        // cudaMalloc memory, whatever the pointer lookup at the call said: no pool of it.
        e.pool = 0;
        e.flags &= static_cast<uint8_t>(~(kHasWatermarks | kUsedDerived));
    }
    if (isFree && e.ptr != 0) {
        if (const Block* b = liveBlock(e.ptr)) {
            const PoolState* p = b->pool == kNone ? nullptr : &pools_[b->pool];
            if (p && p->info.handle != 0) e.pool = p->info.handle;
            if (!b->imported) {
                if (e.kind == EventKind::Free)
                    FreeFields{e.ptr, b->bytes}.into(e);
                else
                    e.size = b->bytes, e.flags |= kSizeKnown;
            }
            // A free whose pool the collector could not ask at the call (another thread's
            // pointer the driver would not name yet): its pool is the block's, so its used is
            // derived like any other and reserved is the pool's (a free never changes it).
            if (p && !b->imported && e.result == 0 && p->watermarksKnown &&
                !(e.flags & (kHasWatermarks | kUsedDerived))) {
                e.flags |= kUsedDerived | kHasWatermarks;
                e.reserved = p->reserved;
            }
        }
    }
    if (e.ptr != 0 && !e.has(kSizeKnown) &&
        (e.kind == EventKind::DeviceFree || e.kind == EventKind::HostFree ||
         e.kind == EventKind::HostUnregister || e.kind == EventKind::Free)) {
        // (A Free here: cudaFreeAsync of cudaMalloc memory.)
        const bool host = e.kind == EventKind::HostFree || e.kind == EventKind::HostUnregister;
        if (const MemBlock* m = liveMem(e.ptr, host)) {
            e.size = m->bytes;
            e.flags |= kSizeKnown;
        }
    }
    if (e.flags & kUsedDerived) {
        const uint32_t pi = poolIndex(e.pool);
        const uint64_t base = pi == kNone ? 0 : pools_[pi].used;
        if (e.kind == EventKind::Alloc) {
            e.used = base + AllocFields::of(e).bytes;
        } else if (isFree && e.has(kSizeKnown) && e.pool != 0 &&
                   base >= e.size) {
            e.used = base - e.size;
        } else {
            // Its alloc was never recorded (dropped): no exact value to give.
            e.flags &= static_cast<uint8_t>(~(kUsedDerived | kHasWatermarks));
            e.used = 0;
        }
    }
    return apply(e);
}

} // namespace poolscope::replay
