#pragma once
// What the pool model's rules are made of, shared by PoolModel.cpp and LaneModel.cpp (which runs
// the same rules for several release thresholds at once): the pending frees, the recorded
// knobs' meaning, the idle area over time and the arithmetic on times and sizes.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "poolscope/whatif/PoolModel.h"

namespace poolscope::whatif::detail {

inline uint64_t take(uint64_t& from, uint64_t& need) {
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
    // Whether takeOldest(need > 0, cutoff) would change anything.
    bool takesAny(int64_t cutoff) const { return head < q.size() && q[head].ts <= cutoff; }
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
inline uint64_t span(int64_t earlier, int64_t later) {
    return later > earlier ? static_cast<uint64_t>(later) - static_cast<uint64_t>(earlier) : 0;
}

// A reuse policy as the recorded knobs tell it: on unless recorded off.
inline bool recordedPolicy(const replay::Knob (&knobs)[4], PoolAttr a) {
    const replay::Knob& k = knobs[replay::PoolState::knobIndex(a)];
    return !k.known || k.value != 0;
}
// The release threshold the recorded knobs tell (0, the driver's default, where none).
inline uint64_t recordedThreshold(const replay::Knob (&knobs)[4]) {
    return knobs[0].known ? knobs[0].value : 0;
}

// The frees another stream made that opportunistic reuse may take at `ts`: those made `lag`
// earlier or before (without signed overflow: a damaged trace may hold times at both ends).
inline int64_t opportunisticCutoff(int64_t ts, int64_t lag) {
    lag = std::max<int64_t>(lag, 0);
    return ts < std::numeric_limits<int64_t>::min() + lag ? std::numeric_limits<int64_t>::min()
                                                          : ts - lag;
}

// Ops every pool's state follows (a muted pool's included), as against a pool's own.
inline bool everyPools(Op::Kind k) {
    switch (k) {
    case Op::Kind::Wait:
    case Op::Kind::EventCleared:
    case Op::Kind::StreamSync:
    case Op::Kind::EventSync:
    case Op::Kind::ContextSync: return true;
    default: return false;
    }
}

// Reserved minus live over time, in byte-nanoseconds: from the first change on, each span to a
// later change at the idle bytes held through it (a change at an earlier time, a record out of
// order, adds nothing).
struct IdleArea {
    unsigned __int128 area = 0; // exact, and cheap (no x87 maths)
    int64_t lastTs = 0;
    int64_t firstTs = 0;
    bool timed = false;
    void to(int64_t ts, uint64_t idle) {
        if (!timed) {
            timed = true;
            firstTs = lastTs = ts;
            return;
        }
        if (ts > lastTs) {
            area += static_cast<unsigned __int128>(span(lastTs, ts)) * idle;
            lastTs = ts;
        }
    }
    // The mean to `end` (where it is past the first change), the idle bytes held to the end.
    std::optional<uint64_t> meanTo(int64_t end, uint64_t idle) const {
        if (!timed || end <= firstTs) return std::nullopt;
        const unsigned __int128 a = area + static_cast<unsigned __int128>(span(lastTs, end)) * idle;
        return static_cast<uint64_t>(a / span(firstTs, end));
    }
};

// A prediction's recorded side and identity, which are the recording's (`rec`).
inline void takeRecordedSide(PoolPrediction& o, const PoolPrediction& rec) {
    o.handle = rec.handle;
    o.device = rec.device;
    o.recordedKnown = rec.recordedKnown;
    o.recordedPeakReserved = rec.recordedPeakReserved;
    o.recordedReleases = rec.recordedReleases;
    o.recordedGrowths = rec.recordedGrowths;
    o.recordedMaxIdle = rec.recordedMaxIdle;
    o.recordedMeanIdle = rec.recordedMeanIdle;
    o.recordedFinalReserved = rec.recordedFinalReserved;
}

} // namespace poolscope::whatif::detail
