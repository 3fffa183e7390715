#pragma once
// What the lanes' names depend on (laneNames, ReportReducer.h), kept event by event as the
// streaming report keeps it: which pools allocated or reserved, the (pool, stream) pairs that
// allocated, the streams that wait edges join, and each stream's first failure. For the passes
// that replay a trace only for its names (traceNames) or beside other work (the Perfetto
// export's first pass). Internal to core.

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ReportReducer.h"
#include "poolscope/Entities.h"
#include "poolscope/replay/Replay.h"
#include "poolscope/view/EntityNames.h"

namespace poolscope::detail {

class LaneNameKeeper {
public:
    // For a replay fed only what NamesFilter keeps: its frees find no block (their allocations
    // were kept without a pointer), so the pool they mark as reserved is theirs rather than
    // their block's. Their marks are held apart. Where each pool they mark is marked by some
    // other event too (exactWithoutFreeMarks), the marks without them are the whole replay's:
    // a pool's reserved bytes then became nonzero only at events that mark it. Otherwise the
    // pass replays every event.
    void setFiltered(bool on) { filtered_ = on; }
    bool exactWithoutFreeMarks() const;

    // Each event, and each sample (kind Sample), once the replay has applied it, in the order
    // buildTimeline feeds its builder.
    void add(const replay::Replay& replay, const Event& e, const replay::Fact& f);
    view::EntityNames names(const replay::Replay& replay, const std::vector<DeviceInfo>& devices) const;
    // TraceNames::madeFrom.
    std::string describe(const replay::Replay& replay) const;

private:
    // A thread's failure with 201 may turn out the runtime's own retry until that thread
    // allocates again (ReportReducer::failures): its retraction follows that allocation.
    void failures(const Event& e, const replay::Fact& f);

    bool filtered_ = false;
    std::vector<uint8_t> allocated_, reserved_; // by replay pool index: a lane even if unused
    std::vector<uint8_t> freeReserved_;         // filtered: marked by a Free or DeviceFree
    std::set<std::pair<uint64_t, uint64_t>> pairs_; // (pool, stream) handles that allocated
    std::pair<uint64_t, uint64_t> lastPair_{~uint64_t{0}, ~uint64_t{0}};
    std::set<std::pair<uint64_t, uint64_t>> edgeStreams_;
    std::unordered_map<uint32_t, FirstFailures> streamFailed_;         // replay stream index
    std::unordered_map<uint32_t, std::pair<uint64_t, uint32_t>> pending_; // tid -> (seq, stream)
};

// The events of one chunk the names depend on, for a names pass that replays only those (a
// replay of every event, on one thread, bounds the pass on a long trace). Run on the decoding
// threads, a chunk at a time and knowing nothing of other chunks,
// it keeps every event but allocations, frees and stream synchronizations (the bulk of a
// trace), and of those the ones whose facts LaneNameKeeper reads or whose replay state a later
// event's fact depends on:
// - each failed allocation, each thread's first allocation in the chunk and its first after a
//   failure (a failure with 201 is settled or retracted by the thread's next allocation);
// - the first successful allocation of each (pool, stream) pair;
// - the first event naming a pool or a stream (handle), and its first naming it with a device;
// - per pool, the first event with watermarks whose reserved bytes are not 0, and the latest-
//   read one (greatest time) before each implicit release of the pool and at the chunk's end:
//   a release read before the pool's newest reading is ignored, so the newest reading must be
//   there.
// Kept allocations lose their pointer: the replay then holds no live set for them, and their
// frees, mostly dropped, find nothing to free (what that changes, the names do not read, but
// for the pool a free marks as reserved: LaneNameKeeper::setFiltered).
//
// Samples are merged in by the replay as SampleMerge merges them, before the first event
// whose time reaches theirs: which depends on the greatest time among the events before, kept
// or not. So each kept event comes with the greatest time of the chunk's events up to it.
struct NamesChunk {
    std::vector<Event> kept;
    std::vector<int64_t> upTo;   // per kept event: the chunk's greatest event time up to it
    int64_t minTs = 0, maxTs = 0; // over all of the chunk's events
    uint64_t events = 0;         // in the chunk (0: none, or a damaged chunk skipped)
    bool empty() const { return events == 0; }
    void clear() {
        kept.clear();
        upTo.clear();
        events = 0;
    }
};

class NamesFilter {
public:
    void reduce(const std::vector<Event>& chunk, NamesChunk& out);

private:
    struct Handle {
        uint64_t handle;
        bool withDevice;
    };
    struct PoolMarks {
        uint64_t pool;
        bool reservedSeen;
        int64_t newestTs;  // greatest time among the chunk's droppable readings so far
        size_t newest;     // its index in the chunk, kNone when kept already
    };
    struct Thread {
        uint32_t tid;
        bool lastFailed;
    };
    static constexpr size_t kNone = ~size_t{0};
    // A handle's first sight (or first with a device): true when the event must be kept.
    // `last`: where the previous search found its handle (most events name the same ones).
    static bool sight(std::vector<Handle>& seen, size_t& last, uint64_t handle, int device);
    PoolMarks& marks(uint64_t pool);
    void flush(PoolMarks& m);

    std::vector<uint8_t> keep_;
    std::vector<Handle> pools_, streams_;
    std::vector<PoolMarks> marks_;
    std::vector<Thread> threads_;
    std::vector<std::pair<uint64_t, uint64_t>> pairs_;
    size_t lastPool_ = 0, lastStream_ = 0, lastMarks_ = 0, lastThread_ = 0, lastPair_ = 0;
};

} // namespace poolscope::detail
