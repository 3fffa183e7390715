#pragma once
// Pending-free bytes per stream over time: bytes freed in stream order on a stream that other
// streams cannot reuse yet (no synchronize and no event wait has made them visible). A stream
// whose pending bytes stay high keeps the pool reserving new memory for every other stream's
// allocations: the classic "reserved grows while used is flat" of a producer/consumer pair.
// An analysis on the allocator replay (replay/Replay.h): subscribe it, feed the replay, read
// the result.

#include <cstdint>
#include <vector>

#include "poolscope/Series.h"
#include "poolscope/replay/Replay.h"

namespace poolscope {

struct PendingFrees {
    struct Stream {
        uint64_t handle = 0;
        Series bytes; // pending-free bytes, a step at every free and every clearing
        uint64_t peak = 0;
        int64_t peakTsNs = 0;
    };
    std::vector<Stream> streams; // streams that ever had a pending free, by first free
    const Stream* stream(uint64_t handle) const;
};

class PendingFreesAnalysis final : public replay::Observer {
public:
    // The event kinds that can change a stream's pending bytes.
    static uint32_t kindMask();
    // An upper bound on one stream's points (its frees plus the clearings), for a builder that
    // knows the trace's counts: the first few series get room for it at once (address space
    // only; see Series::reserve).
    void reservePoints(uint64_t n) { pointsHint_ = n; }
    // Without the series only the peaks are kept (the streaming report: memory per stream).
    void keepSeries(bool keep) { keepSeries_ = keep; }
    void onFact(const replay::Fact& f, const replay::Replay& r) override;
    const PendingFrees& result() const { return out_; }
    PendingFrees take() { return std::move(out_); }
    // A trace split in time (issue #15): this analysis, through the pieces before `later`, takes
    // in the next piece's, replayed from the true state at its start (this one is fed no
    // more events). Each stream's peak is the
    // higher one (the earlier where equal), the series go on, the streams keep their first order.
    void absorb(PendingFreesAnalysis&& later);

private:
    void note(uint32_t stream, const replay::Replay& r, int64_t ts);
    std::vector<int32_t> slot_; // replay stream index -> index into out_.streams, -1 if none
    uint64_t pointsHint_ = 0;
    bool keepSeries_ = true;
    PendingFrees out_;
};

} // namespace poolscope
