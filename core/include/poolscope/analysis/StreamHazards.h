#pragma once
// Stream-order hazards: memory used on one stream and handed to another with nothing ordering
// the first stream's work before the second's.
//   - An unordered free: a block allocated on stream A and freed on stream B while no event
//     record on A (after the alloc) waited on by B, no synchronize covering A's work since the
//     alloc, and no implicit legacy-default-stream ordering puts A's work before the free. The
//     pool may hand the block out again while kernels on A still use it.
//   - An unordered reuse: an alloc on stream B that got the address a free on stream A released,
//     with nothing ordering that free before the alloc. Only the pool's reuse policies made it
//     possible: opportunistic reuse (the free had already executed on the GPU, a matter of
//     timing) or a dependency the driver inserted itself (ReuseAllowInternalDependencies).
// Orderings are followed transitively (A's record waited on by C, C's record waited on by B)
// and through host synchronizes (a stream, event or context synchronize; a synchronize of C
// also covers what C had waited for), up to 16 other streams per stream (`truncated` says when
// more were met). Reuse is matched by the block's start address (a block carved out of the
// middle of a larger freed one is not seen), among the frees of the last kReuseWindow events.
// An analysis on the allocator replay (replay/Replay.h): subscribe it, feed the replay, read
// the result.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "poolscope/replay/Replay.h"

namespace poolscope {

struct StreamHazard {
    enum class Kind : uint8_t { UnorderedFree, UnorderedReuse };
    Kind kind = Kind::UnorderedFree;
    // The earlier event, on `first.stream`: the alloc (UnorderedFree) or the free that released
    // the address (UnorderedReuse). The later one, on another stream: the free, or the alloc
    // that got the address.
    struct At {
        uint64_t seq = 0;
        int64_t tsNs = 0;
        uint64_t stream = 0; // handle
        // Index into Timeline::allocations (the replay block's tag): UnorderedFree: the same
        // allocation twice; UnorderedReuse: the block freed, then the block allocated.
        uint32_t allocation = replay::kNone;
    };
    At first, second;
    uint64_t ptr = 0;
    uint64_t bytes = 0; // the block's (UnorderedReuse: the new alloc's)
    uint64_t pool = 0;
    // UnorderedReuse: the pool's ReuseAllowOpportunistic when the alloc was made: 1 on, 0 off
    // (then only an internal dependency could have allowed it), -1 not known.
    int8_t opportunistic = -1;
};

struct StreamHazards {
    std::vector<StreamHazard> hazards; // by the later event's seq; the first kMaxKept
    uint64_t unorderedFrees = 0;       // every one found
    uint64_t unorderedReuses = 0;
    static constexpr size_t kMaxKept = 100'000;
    // A stream's orderings through more streams than the analysis follows at once (16) had to
    // be partly forgotten: some hazards found later may be false ones.
    bool truncated = false;
    // An address freed was not allocated again within kReuseWindow events (by seq) of its free
    // while the trace went on: a reuse of it after that is not checked. Pools hand the same
    // addresses out again within a step; a block left free that long, or a trace that keeps
    // freeing new addresses (a synthetic one), gets here. (A window in events, not a count of
    // addresses: what is checked then depends on the events alone, so a trace read in pieces
    // finds the same.)
    bool freedForgotten = false;
    static constexpr uint64_t kReuseWindow = uint64_t{1} << 18;
    // The freed addresses held at once, at most: past it those older than the window go.
    static constexpr size_t kMaxFreedAddresses = size_t{2} * kReuseWindow;
    uint64_t count() const { return unorderedFrees + unorderedReuses; }
};

class StreamHazardsAnalysis final : public replay::Observer {
public:
    StreamHazardsAnalysis();
    ~StreamHazardsAnalysis() override;
    StreamHazardsAnalysis(const StreamHazardsAnalysis&) = delete;
    StreamHazardsAnalysis& operator=(const StreamHazardsAnalysis&) = delete;
    // Allocs, frees, event records and waits, and the synchronizes.
    static uint32_t kindMask();
    void onFact(const replay::Fact& f, const replay::Replay& r) override;
    // Lists the first n hazards instead of the first kMaxKept (all are counted either way).
    void setMaxKept(size_t n) { maxKept_ = std::min(n, StreamHazards::kMaxKept); }
    const StreamHazards& result() const { return out_; }
    StreamHazards take() { return std::move(out_); }

    // A piece of a trace split in time (issue #15), before its first event (seq `firstSeq`),
    // the state before it not known: what that state could answer otherwise (a block from before
    // the piece freed on another stream, an address the piece allocates before it frees it) is
    // kept open, and what the piece's orderings take from it is kept by reference, until
    // absorb(). The piece's replay must start in the true state (the blocks' streams and seqs).
    void startPiece(uint64_t firstSeq);
    // After the piece's last event: what only its own events needed goes (the frees kept to see
    // them age, those older than the reuse window), so that a piece waiting to be taken in holds
    // only what absorb() reads.
    void endPiece();
    // This analysis, exact through the pieces before `piece`, takes in the next piece's: the
    // open questions answered from this state, the hazards merged in seq order, the state
    // carried to the piece's end. `start` and `end`: the replay's streams before and after the
    // piece (their handles and devices). False where the piece cannot be carried exactly (a clock
    // past its bound, the freed addresses' bound reached, a stream's device learned within the
    // piece): the results are then a guess, and a caller reads the trace whole instead.
    bool absorb(StreamHazardsAnalysis&& piece, const std::vector<StreamInfo>& start, const std::vector<StreamInfo>& end);

private:
    struct State;
    std::unique_ptr<State> d_;
    size_t maxKept_ = StreamHazards::kMaxKept;
    StreamHazards out_;
};

} // namespace poolscope
