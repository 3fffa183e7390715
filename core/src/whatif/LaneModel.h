#pragma once
// Several release thresholds through the pool model at once (internal to core): the advisor's
// candidate questions, each otherwise a PoolModel stepping every op of the trace.
//
// A threshold changes only what a pool reserves: the blocks handed out and the frees pending
// on each stream are the same under every threshold, as long as no allocation takes another
// stream's pending frees (opportunistic reuse, or waiting on them at the pool's size limit) or
// fails at that limit, which happens only where the pool's free bytes fall short. So the lanes
// (one per threshold) of a pool share one "trunk" (live bytes, the pending frees), kept once,
// and each keeps only its reserved and free bytes and its figures. A lane about to take from the
// pending frees, or to meet the size limit, is split off first: it gets a copy of the trunk and
// goes on alone, as a PoolModel would, and rejoins the others where a synchronize leaves both
// trunks without pending frees and with the same live bytes. Each lane's answers are those of
// PoolModel(Settings{releaseThreshold}) fed the same ops (WhatIfLanesTest holds them to it).

#include <cstdint>
#include <optional>
#include <vector>

#include "poolscope/whatif/PoolModel.h"

#include "ModelRules.h"

namespace poolscope::whatif {

class LaneModel {
public:
    // Lane k: every pool's release threshold thresholds[k] (nullopt: the recorded one); the
    // reuse policies and the size limit as recorded.
    explicit LaneModel(std::vector<std::optional<uint64_t>> thresholds, Calibration c = {});
    size_t lanes() const { return thresholds_.size(); }

    // As PoolModel::feed, with a mute per lane (by pool index, as PoolModel::feed takes it;
    // null: the lane is done). A lane muted for a pool stops following it: its answers for the
    // pool are not to be read any more (a mute is never lifted).
    void feed(const Op* first, const Op* last, const uint64_t* seq, size_t nSeq,
              const std::vector<uint64_t>& handles,
              const std::vector<const std::vector<uint8_t>*>& mutes);
    // As PoolModel::releasesOf and PoolModel::collect, for lane k.
    uint64_t releasesOf(size_t k, uint32_t pool) const;
    std::vector<PoolPrediction> collect(size_t k, const Tape& tape) const;
    // As PoolModel::peakReservedSoFar for lane k, and PoolModel::policyOffSoFar.
    uint64_t peakReservedSoFar(size_t k) const;
    bool policyOffSoFar(PoolAttr a) const;
    // Lanes split off a shared trunk so far (the bench's and the tests').
    uint64_t splits() const { return splits_; }

private:
    // One lane's view of one pool: what an op touches first, in one cache line.
    struct alignas(64) Lane {
        detail::IdleArea idle;
        uint64_t reserved = 0;
        uint64_t free = 0;
        uint64_t maxIdle = 0;
        uint64_t peakLive = 0;
        bool on = true;     // follows the pool
        PoolPrediction out; // the rest of its figures (maxIdle and peakLive above)
    };
    struct Trunk {
        uint64_t live = 0;
        uint64_t pendTotal = 0;
        std::vector<detail::Pending> pend; // per replay stream
        std::vector<uint32_t> active;      // the lanes sharing it that follow the pool (one or more:
                                           // a trunk none follows is dropped)
        detail::Pending& pendOf(uint32_t stream) {
            if (stream >= pend.size()) [[unlikely]]
                pend.resize(size_t(stream) + 1);
            return pend[stream];
        }
    };
    struct Pool {
        bool init = false;
        bool touched = false;
        uint64_t handle = 0;
        int device = -1;
        replay::Knob knobs[4];
        uint64_t maxSize = 0;
        std::vector<Lane> lanes; // by lane
        std::vector<Trunk> trunks;
        size_t on = 0; // lanes following it
        bool policy(PoolAttr a) const;
    };

    Pool& at(uint32_t i);
    void init(uint32_t i, uint64_t handle, int device);
    void muteFrom(uint32_t i);
    uint64_t threshold(const Pool& p, size_t k) const;
    void apply(const Op& op, uint64_t seq, uint64_t streamHandle);
    void alloc(const Op& op, uint64_t seq, uint64_t streamHandle);
    void allocAlone(Pool& p, Trunk& t, Lane& l, const Op& op, uint64_t bytes, uint64_t need,
                    uint64_t seq, uint64_t streamHandle);
    void split(Pool& p, size_t ti, uint32_t k);
    void rejoin(Pool& p);
    void grow(Lane& l, const Op& op, uint64_t need, uint64_t seq, uint64_t streamHandle);
    void freeBlock(const Op& op);
    void waitMove(const Op& op);
    void eventCleared(const Op& op);
    void release(const Op& op);
    void trim(const Op& op);
    void reset(const Op& op);
    void drop(const Op& op);
    static void account(Lane& l, uint64_t live, int64_t ts);
    static void setReserved(Lane& l, uint64_t v, int64_t ts);

    std::vector<std::optional<uint64_t>> thresholds_;
    Calibration cal_;
    std::vector<Pool> pools_;
    const std::vector<const std::vector<uint8_t>*>* mutes_ = nullptr; // during feed()
    uint64_t splits_ = 0;
};

} // namespace poolscope::whatif
