#include "LaneNames.h"

#include "poolscope/EventFields.h"

namespace poolscope::detail {

void LaneNameKeeper::add(const replay::Replay& replay, const Event& e, const replay::Fact& f) {
    if (f.pool != replay::kNone && f.pool >= reserved_.size()) {
        allocated_.resize(replay.pools().size());
        reserved_.resize(replay.pools().size());
    }
    if (e.kind == EventKind::Sample) {
        if (e.reserved != 0 || SampleFields::of(e).reservedHigh != 0) reserved_[f.pool] = 1;
        return;
    }
    if ((f.watermarks || f.reservedOnly) && replay.pools()[f.pool].reserved != 0) reserved_[f.pool] = 1;
    if (e.kind == EventKind::Alloc) {
        failures(e, f);
        if (f.failedAlloc || f.pool >= allocated_.size()) return;
        allocated_[f.pool] = 1;
        if (const std::pair<uint64_t, uint64_t> key{e.pool, e.stream}; key != lastPair_) {
            pairs_.insert(key);
            lastPair_ = key;
        }
    } else if (e.kind == EventKind::StreamWaitEvent && f.edge) {
        edgeStreams_.insert({replay.streams()[f.edgeFrom].info.handle, e.stream});
    }
}

void LaneNameKeeper::failures(const Event& e, const replay::Fact& f) {
    if (auto it = pending_.find(e.tid); it != pending_.end()) {
        const auto [seq, stream] = it->second;
        pending_.erase(it);
        auto& sf = streamFailed_.try_emplace(stream, 1).first->second;
        if (f.retry && f.retriedSeq == seq)
            sf.retract(seq);
        else
            sf.settle(seq);
    }
    if (!f.failedAlloc) return;
    const FailedAllocation fa{e.tsNs, e.seq, AllocFields::of(e).bytes, e.stream, e.pool, e.result};
    const bool pending = e.result == replay::kInvalidContext;
    if (pending) pending_[e.tid] = {e.seq, f.stream};
    streamFailed_.try_emplace(f.stream, 1).first->second.add(fa, pending);
}

view::EntityNames LaneNameKeeper::names(const replay::Replay& replay,
                                        const std::vector<DeviceInfo>& devices) const {
    std::vector<std::pair<uint64_t, uint64_t>> poolCounts(replay.pools().size());
    for (size_t i = 0; i < poolCounts.size() && i < reserved_.size(); ++i)
        poolCounts[i] = {allocated_[i], reserved_[i]};
    return laneNames(replay, entityOrder(replay), devices, poolCounts, pairs_, edgeStreams_, streamFailed_);
}

} // namespace poolscope::detail
