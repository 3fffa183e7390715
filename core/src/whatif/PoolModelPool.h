#pragma once
// PoolModel's state per pool (internal to core): PoolModel.cpp runs the model on it,
// ModelPieces.cpp cuts a tape in pieces and joins their states.

#include <cstdint>
#include <utility>
#include <vector>

#include "poolscope/whatif/PoolModel.h"

#include "ModelRules.h"

namespace poolscope::whatif {

// A piece's records of a new latest time kept per pool (Pool::recMaxima): records out of order
// across a cut (threads' clocks) are a few at a piece's start.
inline constexpr size_t kKeptRecordMaxima = 4096;

struct PoolModel::Pool {
    bool init = false;
    bool hasOverride = false;
    Settings s;
    // The recorded knobs and size limit as the Knob ops told them (the replay's, when following).
    replay::Knob knobs[4];
    uint64_t maxSize = 0;
    uint64_t reserved = 0;
    uint64_t live = 0;
    uint64_t free = 0;
    uint64_t pendTotal = 0;
    std::vector<detail::Pending> pend; // per replay stream
    detail::IdleArea idleArea;
    // recorded side
    uint64_t recReserved = 0;
    uint64_t recUsed = 0;
    uint64_t recHighSinceRelease = 0;
    bool recTimed = false;
    int64_t recFirstTs = 0;
    int64_t recLastTs = 0;
    unsigned __int128 recIdleArea = 0;
    PoolPrediction out;
    // The idle bytes at the first accounting (a piece's guess hands them to the model it
    // joins: ModelPieces.cpp).
    uint64_t firstIdle = 0;
    // A piece's guess (ModelPieces.cpp): the reserved bytes set, as (time, bytes), where a
    // series is kept; and at a checkpoint, how many of them and of out.growthAllocs there were.
    std::vector<std::pair<int64_t, uint64_t>> seriesLog;
    size_t loggedAt = 0, growthsAt = 0;
    // A piece's recording (PoolModel::recordPiece, joined by joinRecording): the recorded
    // reserved and used bytes it started from; the ops its first sight of the pool wrote and the
    // knobs it then read; whether no release or trim has told the most held since the last one
    // yet, and where the first release left that open, what it left and the most held before it.
    uint64_t seedReserved = 0, seedUsed = 0;
    size_t initOp = 0, initOps = 0;
    replay::Knob initKnobs[4];
    uint64_t initMaxSize = 0;
    bool recHighOpen = false, firstRelease = false;
    uint64_t firstReleaseLeft = 0, firstReleaseHigh = 0;
    // The piece's first records of a new latest time (its first record's time and idle bytes,
    // then each later time, the idle bytes held up to it and the area so far): the model it
    // joins takes the area from the first one past its own latest time on.
    struct RecordMax {
        int64_t ts;
        uint64_t idle;
        unsigned __int128 areaAfter;
    };
    std::vector<RecordMax> recMaxima;

    uint64_t idle() const { return reserved > live ? reserved - live : 0; }
    uint64_t recIdle() const { return recReserved > recUsed ? recReserved - recUsed : 0; }
    bool policy(const std::optional<bool>& o, PoolAttr a) const {
        return o ? *o : detail::recordedPolicy(knobs, a);
    }
    uint64_t threshold() const {
        return s.releaseThreshold ? *s.releaseThreshold : detail::recordedThreshold(knobs);
    }
    detail::Pending& pendOf(uint32_t stream) {
        if (stream >= pend.size()) [[unlikely]]
            pend.resize(size_t(stream) + 1);
        return pend[stream];
    }
};

} // namespace poolscope::whatif
