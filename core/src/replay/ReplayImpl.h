#pragma once
// The replay's state behind its pimpl (Replay.cpp, ReplayFollow.cpp, ReplayPiece.cpp share it).
// Internal to core.

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "FlatPtrMap.h"
#include "poolscope/replay/Replay.h"

namespace poolscope::replay {

struct Replay::Impl {
    std::unordered_map<uint64_t, uint32_t> poolIdx;
    std::unordered_map<uint64_t, uint32_t> streamIdx;
    detail::FlatPtrMap<Block> live;
    struct Record {
        uint32_t stream;
        int64_t tsNs;
        uint64_t freedAtRecord; // the stream's freedBytes when the event was recorded
    };
    std::unordered_map<uint64_t, Record> lastRecord; // CUevent -> its latest record
    struct Wait {
        int64_t recordTsNs;
        int64_t waitTsNs;
    };
    // (waiting stream, recording stream) -> the latest such wait
    std::unordered_map<uint64_t, Wait> lastWait;
    struct Sub {
        Observer* o;
        uint32_t mask;
    };
    std::vector<Sub> observers;
    // Per thread: its last alloc, when that failed with 201 and may yet turn out a retry.
    struct MaybeRetry {
        uint64_t seq, bytes;
        int64_t tsNs;
    };
    std::unordered_map<uint32_t, MaybeRetry> maybeRetry;
    // Memory outside the pools, live: device (DeviceAlloc) and host (HostAlloc, HostRegister)
    // addresses apart, so that a host pointer never closes a device block or the reverse.
    std::unordered_map<uint64_t, MemBlock> deviceMem, hostMem;

    static uint64_t pairKey(uint32_t to, uint32_t from) { return uint64_t{to} << 32 | from; }
};

// What a replay in piece mode (Replay::startPiece) notes of its piece for afterPiece(): what the
// state at the piece's start, which this replay did not have, would have changed.
struct PieceLog {
    enum class Touch : uint8_t { Alloc, Free, DeviceFree, Import };
    // Each pointer's first live-set operation in the piece (it met the start's live set), in
    // order: a free's size as the event gave it, where it did.
    struct Touched {
        uint64_t ptr;
        uint64_t size;
        uint32_t stream;
        Touch how;
        bool sized;
        bool unmatched; // a free that found no block here (set once known)
    };
    std::vector<Touched> firsts;
    detail::FlatPtrMap<uint8_t> seen; // the pointers met so far
    // A free that counted a size for a pointer already met here (a double free): that count is
    // this replay's alone.
    bool doubleFree = false;
    // Whether it was the pointer's first operation here (then noted).
    bool touch(const Touched& t) {
        if (seen.find(t.ptr)) return false;
        seen.put(t.ptr, 1);
        firsts.push_back(t);
        return true;
    }
    // Per stream: the largest byte count a clear named, in this replay's units (its own frees
    // and those of blocks from before the piece, by their events' sizes).
    std::vector<uint64_t> clearedUpTo;
    std::vector<uint8_t> clearSeen;
    // Context synchronizes, by their device (-1: all): the fewest streams this replay had met at
    // one. The streams from before the piece it had not met by then were cleared too.
    std::map<int, size_t> contextClearsFrom;
    // A synchronize of, or a wait on, a CUevent last recorded before the piece.
    struct OpenRef {
        uint64_t event;
        uint32_t waiting; // the waiting stream; kNone for an event synchronize
        uint64_t seq;
        int64_t tsNs;
    };
    std::vector<OpenRef> openRefs;
    std::unordered_map<uint64_t, uint64_t> waitSeq; // lastWait's key -> the seq of its wait
    std::vector<uint32_t> tids;                      // threads that called an alloc
    uint32_t lastTid = ~uint32_t{0};
    std::vector<std::pair<uint32_t, int>> knobsSet;     // (pool, knob) an event set
    std::vector<std::pair<uint32_t, int>> knobDefaults; // (pool, knob) a creation defaulted
    std::vector<uint8_t> readings;                      // per pool: reserved (and used) set
    // Each pointer's first operation here on memory outside the pools (device and host apart):
    // an alloc's (put) or a release's, which wanted a block of `want`'s kind.
    struct MemTouched {
        uint64_t ptr;
        bool host;
        bool put;
        EventKind want;
    };
    std::vector<MemTouched> memFirsts;
    detail::FlatPtrMap<uint8_t> memSeen[2]; // device, host
    void memTouch(uint64_t ptr, bool host, bool put, EventKind want) {
        if (memSeen[host].find(ptr)) return;
        memSeen[host].put(ptr, 1);
        memFirsts.push_back({ptr, host, put, want});
    }
    size_t declaredPools = 0, declaredStreams = 0;

    void cleared(uint32_t stream, uint64_t upTo) {
        if (stream >= clearSeen.size()) {
            clearSeen.resize(size_t(stream) + 1);
            clearedUpTo.resize(size_t(stream) + 1);
        }
        clearedUpTo[stream] = clearSeen[stream] ? std::max(clearedUpTo[stream], upTo) : upTo;
        clearSeen[stream] = 1;
    }
    static constexpr uint8_t kReadReserved = 1, kReadUsed = 2;
    void reading(uint32_t pool, bool used = true) {
        if (pool >= readings.size()) readings.resize(size_t(pool) + 1);
        readings[pool] |= used ? kReadReserved | kReadUsed : kReadReserved;
    }
    // Per pool: the earliest implicit release this replay applied (INT64_MAX: none); a reading
    // of the start's newer than it would have made it stale.
    std::vector<int64_t> releaseFirst;
    void release(uint32_t pool, int64_t ts) {
        if (pool >= releaseFirst.size()) releaseFirst.resize(size_t(pool) + 1, INT64_MAX);
        releaseFirst[pool] = std::min(releaseFirst[pool], ts);
    }
    void tid(uint32_t t) {
        if (t == lastTid) return;
        lastTid = t;
        if (std::find(tids.begin(), tids.end(), t) == tids.end()) tids.push_back(t);
    }
};

} // namespace poolscope::replay
