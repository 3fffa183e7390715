#pragma once
// The one allocator replay. It consumes events in sequence order and keeps what the stream-ordered
// allocator's state was after each: per pool (reserved and used as last read, live blocks seen in
// this trace, the release threshold and the three reuse policies) and per stream (live bytes,
// frees still pending on it), the live blocks themselves, and the last record of each CUevent.
// Each event comes back as a Fact: what it meant against the state before it (the block a free
// released, on which stream it was allocated, the wait that ordered it, the knob value a change
// replaced...). The collector's writer, the timeline builder (and through it the report and the
// window) and every analysis read the allocator's semantics from here and nowhere else.
//
// Pools and streams get dense indices in order of first sight, so consumers keep their own
// per-entity data in plain vectors indexed the same way.

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "poolscope/Entities.h"
#include "poolscope/Event.h"

namespace poolscope::replay {

inline constexpr uint32_t kNone = ~uint32_t{0};
// How soon after a thread's CUDA_ERROR_INVALID_CONTEXT (201) the same request must succeed on the
// same thread to be the runtime's own retry (Fact::retry).
inline constexpr int64_t kRetryWindowNs = 100'000'000;
inline constexpr int32_t kInvalidContext = 201; // CUDA_ERROR_INVALID_CONTEXT

// A block handed out by an alloc (or mapped by a pointer import) and not yet freed.
struct Block {
    uint64_t ptr = 0;
    uint64_t bytes = 0;
    uint64_t allocSeq = 0;
    int64_t allocTsNs = 0;
    uint32_t pool = kNone;   // index into Replay::pools()
    uint32_t stream = kNone; // index into Replay::streams() (the allocating stream)
    uint32_t tag = 0;        // the consumer's own number for it (e.g. its Allocation index)
    uint32_t tid = 0;
    bool imported = false;   // a PointerImport mapping: its size is not known
};

// Memory handed out outside the pools (issue #18): a cudaMalloc-style device allocation
// (DeviceAlloc) or pinned host memory (HostAlloc, HostRegister), not yet released.
struct MemBlock {
    uint64_t ptr = 0;
    uint64_t bytes = 0;
    uint64_t allocSeq = 0;
    int64_t allocTsNs = 0;
    EventKind kind = EventKind::DeviceAlloc; // DeviceAlloc, HostAlloc or HostRegister
    uint8_t api = 0;                         // DeviceAllocApi or HostAllocApi
    int16_t device = -1;
    uint32_t flags = 0;                      // HostAlloc / HostRegister flags
    uint32_t tag = 0;                        // the consumer's own number for it
};

// Device memory outside any pool on one device. Managed memory is kept apart: it migrates and
// need not be resident on the device.
struct OutsideState {
    int device = -1;            // -1: calls whose device was not known
    uint64_t liveBytes = 0;     // cuMemAlloc / cuMemAllocPitch, not yet freed
    uint64_t liveCount = 0;
    uint64_t peakBytes = 0;
    int64_t peakTsNs = 0;
    uint64_t managedLiveBytes = 0;
    uint64_t managedPeakBytes = 0;
    uint64_t allocs = 0;        // successful DeviceAllocs (managed included)
    uint64_t failedAllocs = 0;
    uint64_t frees = 0;         // DeviceFrees that released a block of this device
    // DeviceFrees that synchronized the device (a cudaFree of memory outside the pools), and the
    // time those calls took where the collector measured it.
    uint64_t syncFrees = 0;
    uint64_t syncCallNs = 0;
};

// Pinned (page-locked) host memory of the process.
struct PinnedState {
    uint64_t allocatedBytes = 0;  // cuMemHostAlloc / cuMemAllocHost, live
    uint64_t registeredBytes = 0; // cuMemHostRegister, live
    uint64_t allocatedPeak = 0;
    uint64_t registeredPeak = 0;
    uint64_t totalPeak = 0;       // of allocated + registered together
    int64_t totalPeakTsNs = 0;
    uint64_t allocs = 0, frees = 0, registers = 0, unregisters = 0, failed = 0;
    uint64_t totalBytes() const { return allocatedBytes + registeredBytes; }
};

// A settable pool attribute's value as far as the trace tells it.
struct Knob {
    uint64_t value = 0;
    bool known = false;
};

struct PoolState {
    PoolInfo info;
    // As last read from the driver (or derived from a read by the collector, kUsedDerived).
    uint64_t reserved = 0;
    uint64_t used = 0;
    bool watermarksKnown = false;
    // Time of the newest driver reading behind reserved/used (kHasWatermarks events and samples;
    // each is read at or after its event's time). An implicit release reported with an earlier
    // time was read before it, so it says nothing newer about this pool (see apply()).
    int64_t readTsNs = INT64_MIN;
    // Traces recorded before the collector dropped such a release's watermarks: its writer
    // derived the used of the allocs and frees after it from the release's stale value. Until
    // the next value read from the driver, those are derived again here from the right base.
    bool rederive = false;
    // Blocks of this pool allocated in this trace and not yet freed.
    uint64_t liveBytes = 0;
    uint64_t liveCount = 0;
    // ReleaseThreshold, ReuseFollowEventDependencies, ReuseAllowOpportunistic,
    // ReuseAllowInternalDependencies (see knob()).
    Knob knobs[4];
    const Knob& knob(PoolAttr a) const { return knobs[knobIndex(a)]; }
    static int knobIndex(PoolAttr a); // -1 for attributes that are not settable knobs
};

struct StreamState {
    StreamInfo info;
    uint64_t liveBytes = 0; // allocated on this stream, not yet freed (wherever freed)
    uint64_t liveCount = 0;
    // Bytes freed on this stream, in stream order, that no other stream may reuse yet: not
    // covered by a synchronize of this stream (stream, event or context synchronize) nor by
    // another stream's wait on an event recorded here after the free. Opportunistic reuse
    // depends on the GPU's progress, which the trace does not show, so this is the most other
    // streams could be kept from.
    uint64_t pendingFreeBytes() const { return freedBytes - clearedBytes; }
    uint64_t freedBytes = 0;   // running total of frees on this stream
    uint64_t clearedBytes = 0; // of those, made available to other streams
};

// What one event meant. Only the members its kind sets are meaningful: the flags are reset at
// every event, the values beside them are written only with their flag (a Fact is rebuilt ten
// million times on a large trace, so nothing else is cleared).
struct Fact {
    const Event* event = nullptr;
    uint32_t pool = kNone;   // the event's pool index (kNone: the event names none)
    uint32_t stream = kNone; // the event's stream index (kNone: the event names none)

    bool newPool = false;    // the pool was first seen at this event
    bool newStream = false;
    bool watermarks = false; // the event (or sample) carried reserved/used
    // An event (not a sample) with watermarks, when the pool's reserved/used were known before
    // it: reservedBefore/usedBefore (what an alloc found, against what it left)
    bool watermarksBefore = false;
    // ImplicitRelease without watermarks: only the pool's reserved bytes are known (the
    // release's size after); `watermarks` stays false
    bool reservedOnly = false;
    // Alloc
    bool allocated = false;    // a block was handed out: `block` (ptr 0 for a zero-byte request)
    bool failedAlloc = false;  // the call failed (result != 0): nothing handed out
    bool replacedLive = false; // the pointer was still live (its free was not recorded):
                               // `closed` is that older block, ended here
    // A successful alloc that was the CUDA runtime retrying the thread's previous alloc, which
    // failed with 201 (no context bound to the thread yet) for the same size within
    // kRetryWindowNs: the program never saw that failure. retriedSeq is the failed one's seq.
    bool retry = false;
    // Free
    bool freed = false;         // a live block was released: `block` is it
    bool unmatchedFree = false; // no live block had this pointer (allocated before recording,
                                // by cudaMalloc, or its alloc event was dropped)
    bool crossStream = false;   // freed on another stream than it was allocated on
    // For a cross-stream free: the free's stream waited on an event recorded on the allocating
    // stream before the free (the ordering the API asks for): orderRecordTsNs/orderWaitTsNs.
    bool orderedByWait = false;
    // PoolSetAttribute, or KnobChange on an attribute: knobAttr, knobBefore
    bool knobChanged = false;
    // StreamWaitEvent on an event last recorded on another stream: edgeFrom, edgeRecordTsNs
    bool edge = false;
    // Frees on some streams became available to others (synchronize, event wait):
    // clearedStream
    bool pendingCleared = false;
    // Beyond the pools (issue #18). memAllocated: a DeviceAlloc, HostAlloc or HostRegister
    // handed out `mem`; memReleased: `mem` was released (DeviceFree, HostFree, HostUnregister,
    // or a cudaFreeAsync of a cudaMalloc pointer); memUnmatched: a release that named no live
    // block of its kind. A DeviceFree of a pool block sets `freed` like a Free instead.
    bool memAllocated = false;
    bool memReleased = false;
    bool memUnmatched = false;
    // PointerImport: the pointer was a live block, `closed`, which the mapping replaced
    bool importReplaced = false;
    // A DeviceFree that synchronized its device (everything but a pool block, which the driver
    // frees without a synchronization): outside is its device's index in outside().
    bool deviceSync = false;
    uint32_t outside = kNone; // index into Replay::outside() of the event's device
    MemBlock mem;

    int64_t orderRecordTsNs = 0;
    int64_t orderWaitTsNs = 0;
    PoolAttr knobAttr = PoolAttr::ReleaseThreshold;
    Knob knobBefore;           // the value in force before, as the trace knew it
    uint32_t edgeFrom = kNone; // stream index the event was recorded on
    int64_t edgeRecordTsNs = 0;
    uint32_t clearedStream = kNone; // the one stream cleared; kNone with several
    uint64_t retriedSeq = 0;
    uint64_t reservedBefore = 0;
    uint64_t usedBefore = 0;
    Block block;
    Block closed;

    void reset(const Event* e) {
        event = e;
        pool = stream = kNone;
        newPool = newStream = watermarks = watermarksBefore = reservedOnly = false;
        allocated = failedAlloc = replacedLive = retry = false;
        freed = unmatchedFree = crossStream = orderedByWait = false;
        knobChanged = edge = pendingCleared = false;
        memAllocated = memReleased = memUnmatched = deviceSync = importReplaced = false;
        outside = kNone;
    }
};

class Observer;
struct PieceLog;

// The slots of the live set kept once (replay::LiveLead, Replay::leadLive): a number no live
// block holds, the most recently given back first, else the next new one. Every leader hands
// them out alike, and a follower holds the record to that (Replay::tapePut).
class LiveSlots {
public:
    uint32_t hand() {
        if (free_.empty()) return next_++;
        const uint32_t s = free_.back();
        free_.pop_back();
        return s;
    }
    void giveBack(uint32_t slot) { free_.push_back(slot); }

private:
    std::vector<uint32_t> free_;
    uint32_t next_ = 0;
};

class Replay {
public:
    Replay();
    ~Replay();
    Replay(const Replay&) = delete;
    Replay& operator=(const Replay&) = delete;
    Replay(Replay&&) noexcept;
    Replay& operator=(Replay&&) noexcept;

    // Entities known before the events (a trace's tables, the collector's cold paths). A pool or
    // stream declared again updates the fields the later record knows and keeps its index.
    uint32_t declarePool(const PoolInfo& info);
    uint32_t declareStream(const StreamInfo& info);
    void setDevices(std::vector<DeviceInfo> devices) { devices_ = std::move(devices); }
    // A settable attribute's value as the driver reported it before the events that follow (a
    // trace's pool_initial_attributes, a live target's pool listing): known from here on unless an
    // event already set it. False for a pool not declared or seen, or a non-settable attr.
    bool declareKnob(uint64_t pool, PoolAttr attr, uint64_t value);

    // Applies one event (Sample included), in seq order. The fact refers to `e` and stays
    // valid until the next call. tag is stored with a block the event hands out.
    const Fact& apply(const Event& e, uint32_t tag = 0);
    // A hint, for callers holding events ahead (a chunk): `e` will be applied soon, so the live
    // set's slot for its pointer can start loading now. Changes nothing.
    void prefetch(const Event& e) const;

    // The collector's writer: fills in what the hot path could not know, then applies. A Free
    // gets its pool and size from the block it releases (kSizeKnown); an Alloc or Free marked
    // kUsedDerived gets `used` from the last value read plus or minus the sizes since, in seq
    // order (an exact value: the driver moves the pool's used bytes by exactly the requested
    // size), or loses its watermarks when no exact value can be given.
    const Fact& complete(Event& e);

    // Following a live set kept on another thread (issue #15, core/src/replay/LiveLead.h): the
    // live set's lookups are most of a replay's time on a long trace, and a trace read by several
    // replays on several threads paid for them in each. A LiveLead keeps only which slot (a
    // number no live block holds, reused once its block has left) each live pointer has, and
    // writes down, for each operation the events make on the live set, the slot it put or took
    // (or that a take found nothing). A following replay takes each operation's outcome from that
    // record instead of looking the pointer up, and keeps its blocks in a table by slot; each
    // block's tag is its slot. The facts and the state are those of a replay of its own but for
    // the tags, and forEachLive() and liveBlockCount() answer from the table; liveBlock() knows
    // nothing (nullptr).
    static constexpr uint32_t kNoSlot = ~uint32_t{0}; // a take that found no live block
    // The outcomes of the next operations (the events of one chunk), held by the caller until
    // they are taken. Makes this replay a follower for good (before its first event).
    void followLive(const uint32_t* ops, size_t n);
    bool following() const { return follow_; }
    // The same record made by this replay, which keeps its own live set and looks every pointer
    // up anyway: each block it hands out gets a slot as its tag (the caller's tag unused), and
    // each operation's slot is appended to `*out`, which the caller takes chunk by chunk. For
    // good, before the first event.
    void leadLive(std::vector<uint32_t>* out) { leadOut_ = out; }
    // The blocks' tags are their slots (following or leading), not the caller's.
    bool slotTags() const { return follow_ || leadOut_ != nullptr; }
    // Of the last followLive's outcomes, those not taken yet (0 once the chunk's events are in),
    // and how many operations found none left or an outcome that cannot be (each taken as a
    // miss): either means the record was not of these events.
    size_t liveOpsLeft() const { return static_cast<size_t>(followEnd_ - followNext_); }
    uint64_t liveOpsMissing() const { return followMissing_; }

    // Analyses follow the replay: each is called after every applied event whose kind is in
    // its mask (bit 1 << EventKind). Not owned; must outlive the replay or be removed.
    void subscribe(Observer* o, uint32_t kindMask = ~0u);
    void unsubscribe(Observer* o);

    const std::vector<PoolState>& pools() const { return pools_; }
    const std::vector<StreamState>& streams() const { return streams_; }
    const std::vector<DeviceInfo>& devices() const { return devices_; }
    // Device memory outside the pools, one entry per device in order of first sight.
    const std::vector<OutsideState>& outside() const { return outside_; }
    const PinnedState& pinned() const { return pinned_; }
    const MemBlock* liveMem(uint64_t ptr, bool host) const; // nullptr when not live
    void forEachLiveMem(const std::function<void(const MemBlock&)>& f) const;
    uint32_t poolIndex(uint64_t handle) const;   // kNone when never seen
    uint32_t streamIndex(uint64_t handle) const;
    const Block* liveBlock(uint64_t ptr) const;  // nullptr when not live
    size_t liveBlockCount() const;
    // Calls f for every live block (order unspecified).
    void forEachLive(const std::function<void(const Block&)>& f) const;

    // For a trace split in time (issue #15): a replay in this one's state, to go on from where
    // this one is, without its observers and neither following nor leading a live set (a
    // follower's blocks go into the copy's own live set, their tags kept).
    Replay clone() const;
    // Whether the same events from here would give the same facts and state: the entities, the
    // live blocks by pointer (their tags aside), the records, waits and retries pending, the
    // memory outside the pools and the counts. A piece of a trace replayed from a guessed start
    // is right once its replay is in the same state as the one that replayed what came before.
    bool sameState(const Replay& o) const;
    // A piece of a trace replayed without the state at its start (issue #15: the pieces'
    // starts found at once, on as many threads): call before the piece's first event, on a
    // replay given the entities and knobs declared for the whole trace. The replay then notes
    // what the state it lacks would have changed (the pointers it met first, the clears, the
    // CUevents recorded before the piece, the threads, knobs and pools it touched), and counts a
    // free of a block from before the piece by the size its event gives.
    void startPiece();
    // The state after `start` and then this piece (which this replay, in piece mode, replayed):
    // the next piece's start. `exact` false where the piece held what this does not carry
    // (entities numbered otherwise, a pool block from before the piece freed with cudaFree, a
    // size that did not match its block, memory outside the pools from before the piece released
    // or allocated over where the piece allocated its own, ...): the state is then only a guess,
    // as it also is wherever `start` was. Either way a consumer checks it with sameState against
    // a replay of the piece from `start`.
    Replay afterPiece(const Replay& start, bool* exact = nullptr) const;

    uint64_t eventCount() const { return eventCount_; } // samples excluded
    uint64_t unmatchedFrees() const { return unmatchedFrees_; }
    uint64_t reusedWithoutFree() const { return reusedWithoutFree_; }
    // The sum of every stream's pendingFreeBytes().
    uint64_t pendingFreeBytes() const { return pendingFreeBytes_; }

private:
    struct Impl;
    uint32_t poolAt(uint64_t handle, int16_t device, bool& isNew);
    uint32_t streamAt(uint64_t handle, int16_t device, bool& isNew);
    [[gnu::noinline]] uint32_t poolSlow(uint64_t handle, int16_t device, bool& isNew);
    [[gnu::noinline]] uint32_t streamSlow(uint64_t handle, int16_t device, bool& isNew);
    struct Fast;
    template <class State, class Index>
    static uint32_t lookupSlow(std::vector<State>& states, std::vector<Fast>& fast, Index& index,
                               uint64_t& lastHandle, uint32_t& lastIdx, uint64_t handle,
                               int16_t device, bool& isNew);
    void alloc(const Event& e, uint32_t tag);
    [[gnu::noinline]] void resolveRetry(const Event& e);
    void free(const Event& e);
    void release(const Block& b);
    uint32_t outsideAt(int16_t device);
    void memAlloc(const Event& e, uint32_t tag);
    void memRelease(const Event& e);
    void releaseMem(const MemBlock& m);
    void clearPending(uint32_t stream, uint64_t upTo);
    void notify();
    bool liveTake(uint64_t ptr, Block& out);
    void livePut(uint64_t ptr, Block& b);
    [[gnu::noinline]] bool tapeTake(Block& out);
    [[gnu::noinline]] void tapePut(Block& b);
    [[gnu::noinline]] void leadTake(const Block* found);
    [[gnu::noinline]] void leadPut(Block& b);

    std::vector<PoolState> pools_;
    std::vector<StreamState> streams_;
    std::vector<DeviceInfo> devices_;
    std::vector<OutsideState> outside_;
    PinnedState pinned_;
    std::unique_ptr<Impl> d_; // lookups, live set, event records, observers
    // Pool and stream lookups happen at nearly every event. Processes have a handful of each,
    // so the first kFast are found by a compare over a small array before the hash map.
    static constexpr size_t kFast = 8;
    struct Fast {
        uint64_t handle;
        uint32_t idx;
    };
    std::vector<Fast> fastPools_, fastStreams_;
    static const Fast* findFast(const std::vector<Fast>& fast, uint64_t handle);
    Fact fact_;
    uint64_t lastPoolHandle_ = ~uint64_t{0};
    uint32_t lastPoolIdx_ = 0;
    uint64_t lastStreamHandle_ = ~uint64_t{0};
    uint32_t lastStreamIdx_ = 0;
    uint64_t eventCount_ = 0;
    uint64_t unmatchedFrees_ = 0;
    uint64_t reusedWithoutFree_ = 0;
    uint64_t pendingFreeBytes_ = 0;
    bool anyObserver_ = false;
    // followLive: the blocks by slot, and whether each is live.
    bool follow_ = false;
    std::vector<Block> slots_;
    std::vector<uint8_t> slotLive_;
    size_t slotsLive_ = 0;
    const uint32_t* followNext_ = nullptr;
    const uint32_t* followEnd_ = nullptr;
    uint64_t followMissing_ = 0;
    // leadLive: the record, and the slots.
    std::vector<uint32_t>* leadOut_ = nullptr;
    LiveSlots leadSlots_;
    std::unique_ptr<PieceLog> piece_; // startPiece
    bool pieceTouch(uint64_t ptr, const Event& e, uint32_t stream, int how); // first here?
    bool carryOutside(Replay& r, std::vector<MemBlock>& released) const;
};

// An analysis driven by the replay: sees each applied event's fact with the state after it.
class Observer {
public:
    virtual ~Observer() = default;
    virtual void onFact(const Fact& f, const Replay& r) = 0;
};

inline uint32_t Replay::poolAt(uint64_t handle, int16_t device, bool& isNew) {
    // (The cache starts at handle ~0, a value a trace may hold too: it counts once set.)
    if (handle == lastPoolHandle_ && !pools_.empty()) [[likely]] {
        isNew = false;
        if (device >= 0 && pools_[lastPoolIdx_].info.device < 0)
            pools_[lastPoolIdx_].info.device = device;
        return lastPoolIdx_;
    }
    // The first kFast pools here, inline (streams alternate at nearly every event).
    for (const Fast& f : fastPools_)
        if (f.handle == handle) {
            isNew = false;
            if (device >= 0 && pools_[f.idx].info.device < 0) pools_[f.idx].info.device = device;
            lastPoolHandle_ = handle;
            lastPoolIdx_ = f.idx;
            return f.idx;
        }
    return poolSlow(handle, device, isNew);
}

inline uint32_t Replay::streamAt(uint64_t handle, int16_t device, bool& isNew) {
    if (handle == lastStreamHandle_ && !streams_.empty()) [[likely]] {
        isNew = false;
        if (device >= 0 && streams_[lastStreamIdx_].info.device < 0)
            streams_[lastStreamIdx_].info.device = device;
        return lastStreamIdx_;
    }
    for (const Fast& f : fastStreams_)
        if (f.handle == handle) {
            isNew = false;
            if (device >= 0 && streams_[f.idx].info.device < 0) streams_[f.idx].info.device = device;
            lastStreamHandle_ = handle;
            lastStreamIdx_ = f.idx;
            return f.idx;
        }
    return streamSlow(handle, device, isNew);
}

} // namespace poolscope::replay
