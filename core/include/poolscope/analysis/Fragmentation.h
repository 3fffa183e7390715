#pragma once
// Fragmentation: the allocations that grew a pool, or failed, set against the idle bytes the
// pool held just before them (reserved - used as last read). A pool that grows for a request
// while at least the request's size sits idle could not use those bytes: no free block large
// enough (fragmentation), or they were frees on other streams not yet reusable by this one
// (pending frees, analysis/PendingFrees.h). The second is told apart by the other streams'
// pending-free bytes then: a growth whose idle bytes exceed its size even without them is the
// fragmentation signature. Idle bytes over time are reserved - used of the pool's series
// (Timeline's PoolTimeline; the report gives their maximum and time-weighted mean).
// An analysis on the allocator replay (replay/Replay.h): subscribe it, feed the replay, read
// the result.

#include <cstdint>
#include <vector>

#include "poolscope/replay/Replay.h"

namespace poolscope {

struct PoolGrowth {
    uint64_t seq = 0;
    int64_t tsNs = 0;
    uint64_t pool = 0;   // handle
    uint64_t stream = 0; // handle
    uint64_t bytes = 0;  // the request
    uint64_t idleBefore = 0; // the pool's reserved - used just before the call
    // Frees on other streams (all pools) no synchronize or wait had made reusable by this one:
    // an upper bound of the idle bytes this stream could not have been given.
    uint64_t pendingElsewhere = 0;
    uint64_t grewBy = 0; // reserved after - before (0 for a failure)
    uint32_t allocation = replay::kNone; // Timeline::allocations index (kNone: failed)
    bool failed = false;
    int32_t result = 0; // a failure's CUresult
    // At least the request's size was idle.
    bool whileIdle() const { return idleBefore >= bytes; }
    // ... and remained so without the other streams' pending frees: fragmentation.
    bool fragmented() const {
        return idleBefore >= pendingElsewhere && idleBefore - pendingElsewhere >= bytes;
    }
};

struct Fragmentation {
    struct Pool {
        uint64_t handle = 0;
        uint64_t growths = 0, growthsWhileIdle = 0, fragmentedGrowths = 0;
        uint64_t failures = 0, failuresWhileIdle = 0, fragmentedFailures = 0;
        uint64_t grownBytes = 0;
    };
    std::vector<Pool> pools;        // pools with a growth or failure, by first one
    std::vector<PoolGrowth> events; // growths and failures by seq; the first kMaxKept
    static constexpr size_t kMaxKept = 100'000;
    const Pool* pool(uint64_t handle) const;
    // The growth or failure made by the alloc with this seq (nullptr if none, or not kept).
    const PoolGrowth* at(uint64_t seq) const;
};

class FragmentationAnalysis final : public replay::Observer {
public:
    static uint32_t kindMask(); // allocs
    void onFact(const replay::Fact& f, const replay::Replay& r) override;
    // Keeps, of the first kMaxKept growths and failures, only the first n with the
    // fragmentation signature (what the report lists); the per-pool counts stay complete.
    void keepFragmentedOnly(size_t n) {
        fragmentedOnly_ = true;
        maxFragmented_ = n;
    }
    const Fragmentation& result() const { return out_; }
    Fragmentation take() { return std::move(out_); }
    // A trace split in time (issue #15): this analysis, through the pieces before `later`, takes
    // in the next piece's, replayed from the true state at its start (this one is fed no more
    // events). The counts add up; the growths kept are those a single read would have kept.
    void absorb(FragmentationAnalysis&& later);

private:
    std::vector<int32_t> slot_; // replay pool index -> index into out_.pools, -1 if none
    bool fragmentedOnly_ = false;
    size_t maxFragmented_ = 0;
    uint64_t seen_ = 0; // growths and failures met
    std::vector<uint64_t> seenAt_; // keepFragmentedOnly: seen_ when each kept one was met
    Fragmentation out_;
};

} // namespace poolscope
