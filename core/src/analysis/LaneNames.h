#pragma once
// What the lanes' names depend on (laneNames, ReportReducer.h), kept event by event as the
// streaming report keeps it: which pools allocated or reserved, the (pool, stream) pairs that
// allocated, the streams that wait edges join, and each stream's first failure. For the passes
// that replay a trace only for its names (traceNames) or beside other work (the Perfetto
// export's first pass). Internal to core.

#include <cstdint>
#include <set>
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
    // Each event, and each sample (kind Sample), once the replay has applied it, in the order
    // buildTimeline feeds its builder.
    void add(const replay::Replay& replay, const Event& e, const replay::Fact& f);
    view::EntityNames names(const replay::Replay& replay, const std::vector<DeviceInfo>& devices) const;

private:
    // A thread's failure with 201 may turn out the runtime's own retry until that thread
    // allocates again (ReportReducer::failures): its retraction follows that allocation.
    void failures(const Event& e, const replay::Fact& f);

    std::vector<uint8_t> allocated_, reserved_; // by replay pool index: a lane even if unused
    std::set<std::pair<uint64_t, uint64_t>> pairs_; // (pool, stream) handles that allocated
    std::pair<uint64_t, uint64_t> lastPair_{~uint64_t{0}, ~uint64_t{0}};
    std::set<std::pair<uint64_t, uint64_t>> edgeStreams_;
    std::unordered_map<uint32_t, FirstFailures> streamFailed_;         // replay stream index
    std::unordered_map<uint32_t, std::pair<uint64_t, uint32_t>> pending_; // tid -> (seq, stream)
};

} // namespace poolscope::detail
