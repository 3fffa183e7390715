#pragma once
// What if, for a pool that several host threads allocate from at once: the order in which the
// driver sees their calls is not in the trace (Timeline::racingThreads, the details pane's
// "used: not known"), and the peak reserved depends on it. `threads` (tests/workloads) peaked at
// 32, 64, 64, 64, 96 and 96 MiB in six runs whose settings cannot matter. So for such a pool the
// model's figure (the recorded interleaving) comes with a range that holds every interleaving of
// the same threads' calls:
//
//   low  = the largest block rounded up to the growth granule (and at least one granule): every
//          order reserves that much. A floor, not the least some order reaches (not computed):
//          the threads' calls may also run one after another, holding little at a time.
//   high = every thread's own demand at its highest, all at the same moment, rounded up to the
//          granule. A thread's demand is what the model's pool must hold for it, computed from
//          its own calls alone: its live blocks (each rounded up to Calibration::blockAlign), and
//          the bytes it freed on each stream that only its own later allocations on that stream
//          reuse (same-stream reuse; no opportunistic reuse, no event-dependency hand-over, no
//          other thread's synchronize: each of those only lets the driver reuse more). A block
//          another thread frees stays in its allocating thread's demand to the end (the
//          hand-over may come at any point of the allocating thread's calls), and is also
//          counted where it is freed. The model grows only when its free bytes are used up, so
//          its reserved is at most the pool's demand rounded up to the granule; every
//          interleaving's demand is at most the sum of the threads' own highest demands.
//
// Both bounds follow the model's (byte) rules, and hold whatever the settings (a release only
// lowers reserved); fragmentation, which the model does not see, can make the driver reserve
// more than either figure (docs/WHATIF.md). One exception in the model itself: it moves a
// stream wait's frees to the waiting stream, so the stream that freed them cannot reuse them
// (the driver lets both): with such waits its figure may pass `high`. clampTo() keeps every
// range around the figure it is printed with.

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "poolscope/replay/Replay.h"

namespace poolscope::whatif {

struct RaceRange {
    uint64_t handle = 0;
    int device = -1;
    uint32_t threads = 0;       // threads that allocated from the pool
    uint64_t racingAllocs = 0;  // allocations within Timeline::kRaceWindowNs of another
                                // thread's allocation from the pool
    uint64_t crossThreadFrees = 0; // blocks freed by another thread than allocated them
    uint64_t largestBlock = 0;
    uint64_t demandSum = 0;     // the threads' own highest demands, summed (bytes, unrounded)
    uint64_t low = 0;           // peak reserved bounds (before clampTo())
    uint64_t high = 0;
    // `high` for the interleavings that keep each cross-thread free where it fell among the
    // allocating thread's calls in this trace (a block handed over is out of that thread's
    // demand from there): what the program's own hand-over order gives, when it is fixed.
    uint64_t highHandoversAsRecorded = 0;
    bool racing() const { return threads >= 2 && racingAllocs > 0; }
    // The range around one prediction of the same pool: it always holds the predicted figure.
    void clampTo(uint64_t predictedPeak) {
        if (low > predictedPeak) low = predictedPeak;
        if (high < predictedPeak) high = predictedPeak;
        if (highHandoversAsRecorded < predictedPeak) highHandoversAsRecorded = predictedPeak;
    }
};

// What the ranges take of one fact and its replay: RaceBounds follows these, from its own
// onFact or, on another thread than the replay's, from a RaceRecord's.
struct RaceInput {
    enum class Kind : uint8_t { Alloc, Free, StreamSync, ContextSync };
    int64_t ts = 0;
    // Alloc, Free: the block's bytes. ContextSync: where the pools' devices at that moment start
    // in the record's `devices`.
    uint64_t bytes = 0;
    uint32_t pool = replay::kNone; // ContextSync: how many pools' devices
    uint32_t stream = replay::kNone; // Free: kNone where no stream orders its reuse
    uint32_t tid = 0;
    uint32_t ownerTid = 0; // Free: the allocating thread
    int16_t device = -1;   // the synchronize's
    Kind kind = Kind::Alloc;
};

struct RaceInputs {
    std::vector<RaceInput> inputs;
    std::vector<int16_t> devices; // each context synchronize's pools' devices
};

// A replay's facts as RaceInputs, for a RaceBounds that follows them on another thread: the
// ranges were a quarter of the models' replay thread, the read's busiest.
class RaceRecord final : public replay::Observer {
public:
    void onFact(const replay::Fact& f, const replay::Replay& r) override;
    RaceInputs taken;
};

// Follows a replay (alone or beside PoolModels) and gives, per pool that allocated, its range.
class RaceBounds final : public replay::Observer {
public:
    explicit RaceBounds(uint64_t growthGranule = uint64_t{32} << 20, uint64_t blockAlign = 512);
    static uint32_t kindMask();
    void onFact(const replay::Fact& f, const replay::Replay& r) override;
    // What a RaceRecord took down, in order.
    void follow(const RaceInputs& taken);
    // In replay pool order, pools that allocated only.
    std::vector<RaceRange> result(const replay::Replay& r) const;

    // The input a fact gives, if any; a ContextSync's pools' devices are left to the caller.
    static bool inputOf(const replay::Fact& f, RaceInput& in);

private:
    // `deviceOf(i)`: pool i's device at a context synchronize (-1 where not known).
    template <class DeviceOf> void take(const RaceInput& in, DeviceOf deviceOf);
    struct Demand {
        uint64_t live = 0;
        uint64_t handedOver = 0; // own blocks another thread freed: still counted
        std::unordered_map<uint32_t, uint64_t> pending; // by stream
        // The entry of the stream last looked up (a thread keeps to a stream or two): nodes
        // stay put until erased, and every erase forgets it.
        uint32_t lastStream = 0;
        uint64_t* lastPending = nullptr;
        uint64_t* pendingOf(uint32_t stream); // nullptr when absent
        uint64_t& pendingAt(uint32_t stream); // inserted when absent
        uint64_t pendTotal = 0;
        uint64_t high = 0;
        uint64_t highAsRecorded = 0; // the same, without the handed-over blocks
        uint64_t allocs = 0;
        void noteHigh(); // after live or pending grew
    };
    struct PoolRace {
        bool any = false;
        uint64_t racingAllocs = 0, crossThreadFrees = 0, largestBlock = 0;
        // The latest allocation, and the latest one by another thread than it.
        uint32_t lastTid = 0, otherTid = 0;
        int64_t lastTs = 0, otherTs = 0;
        bool hasLast = false, hasOther = false;
        std::unordered_map<uint32_t, Demand> byThread;
    };
    Demand& demand(uint32_t pool, uint32_t tid);
    uint64_t granule_, align_;
    std::vector<PoolRace> pools_;
    // The (pool, thread) pairs last looked up (a free looks up the allocating thread's and its
    // own, and a few threads race): nodes stay put, and the list is emptied when pools_ moves.
    struct Recent {
        uint32_t pool = 0, tid = 0;
        Demand* d = nullptr;
    };
    static constexpr unsigned kRecent = 8;
    Recent recent_[kRecent];
    unsigned nextRecent_ = 0;
};

} // namespace poolscope::whatif
