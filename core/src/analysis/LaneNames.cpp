#include "LaneNames.h"

#include <algorithm>
#include <map>

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
    if ((f.watermarks || f.reservedOnly) && replay.pools()[f.pool].reserved != 0) {
        if (filtered_ && (e.kind == EventKind::Free || e.kind == EventKind::DeviceFree)) {
            freeReserved_.resize(reserved_.size());
            freeReserved_[f.pool] = 1;
        } else {
            reserved_[f.pool] = 1;
        }
    }
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

std::string LaneNameKeeper::describe(const replay::Replay& replay) const {
    auto hex = [](uint64_t v) { return view::EntityNames::hexHandle(v); };
    std::set<uint64_t> allocating, reserved;
    for (size_t i = 0; i < reserved_.size(); ++i) {
        if (allocated_[i]) allocating.insert(replay.pools()[i].info.handle);
        if (reserved_[i]) reserved.insert(replay.pools()[i].info.handle);
    }
    std::string out = "allocating pools:";
    for (uint64_t h : allocating) out += " " + hex(h);
    out += "\nreserved pools:";
    for (uint64_t h : reserved) out += " " + hex(h);
    out += "\npairs:";
    for (const auto& [pool, stream] : pairs_) out += " " + hex(pool) + "/" + hex(stream);
    out += "\nwaits:";
    for (const auto& [from, to] : edgeStreams_) out += " " + hex(from) + ">" + hex(to);
    std::map<uint64_t, std::string> failures;
    for (const auto& [stream, ff] : streamFailed_)
        for (const FailedAllocation& f : ff.first())
            failures[replay.streams()[stream].info.handle] += " " + std::to_string(f.seq);
    out += "\nfirst failures:";
    for (const auto& [stream, seqs] : failures) out += " " + hex(stream) + ":" + seqs;
    return out + "\n";
}

bool LaneNameKeeper::exactWithoutFreeMarks() const {
    for (size_t i = 0; i < freeReserved_.size(); ++i)
        if (freeReserved_[i] && !reserved_[i]) return false;
    return true;
}

view::EntityNames LaneNameKeeper::names(const replay::Replay& replay,
                                        const std::vector<DeviceInfo>& devices) const {
    std::vector<std::pair<uint64_t, uint64_t>> poolCounts(replay.pools().size());
    for (size_t i = 0; i < poolCounts.size() && i < reserved_.size(); ++i)
        poolCounts[i] = {allocated_[i], reserved_[i]};
    return laneNames(replay, entityOrder(replay), devices, poolCounts, pairs_, edgeStreams_, streamFailed_);
}

} // namespace poolscope::detail

namespace poolscope::detail {

namespace {
// Distinct handles, threads and pairs a chunk is filtered with at most: past them (a hostile or
// unusual chunk) the chunk is kept whole, so that the linear searches stay short.
constexpr size_t kMaxDistinct = 64;

bool droppable(EventKind k) {
    return k == EventKind::Alloc || k == EventKind::Free || k == EventKind::StreamSynchronize;
}
} // namespace

namespace {
// The index of the element `is` holds for, starting at `last` (then updated); v.size() if none.
template <class T, class Is> size_t findFrom(const std::vector<T>& v, size_t& last, Is&& is) {
    if (last < v.size() && is(v[last])) return last;
    for (size_t i = 0; i < v.size(); ++i)
        if (is(v[i])) return last = i;
    return v.size();
}
} // namespace

bool NamesFilter::sight(std::vector<Handle>& seen, size_t& last, uint64_t handle, int device) {
    const size_t i = findFrom(seen, last, [&](const Handle& h) { return h.handle == handle; });
    if (i == seen.size()) {
        seen.push_back({handle, device >= 0});
        last = i;
        return true;
    }
    if (seen[i].withDevice || device < 0) return false;
    seen[i].withDevice = true;
    return true;
}

NamesFilter::PoolMarks& NamesFilter::marks(uint64_t pool) {
    const size_t i = findFrom(marks_, lastMarks_, [&](const PoolMarks& m) { return m.pool == pool; });
    if (i < marks_.size()) return marks_[i];
    marks_.push_back({pool, false, INT64_MIN, kNone});
    lastMarks_ = i;
    return marks_.back();
}

void NamesFilter::flush(PoolMarks& m) {
    if (m.newest != kNone) keep_[m.newest] = 1;
    m.newest = kNone;
}

void NamesFilter::reduce(const std::vector<Event>& chunk, NamesChunk& out) {
    out.clear();
    out.events = chunk.size();
    if (chunk.empty()) return;
    keep_.assign(chunk.size(), 0);
    pools_.clear();
    streams_.clear();
    marks_.clear();
    threads_.clear();
    pairs_.clear();
    bool whole = false;
    for (size_t i = 0; i < chunk.size() && !whole; ++i) {
        const Event& e = chunk[i];
        bool k = false;
        switch (e.kind) {
        case EventKind::Alloc: {
            const bool failed = e.failed();
            const size_t t = findFrom(threads_, lastThread_, [&](const Thread& x) { return x.tid == e.tid; });
            if (t == threads_.size()) {
                threads_.push_back({e.tid, failed});
                lastThread_ = t;
                k = true;
            } else {
                k = threads_[t].lastFailed || failed;
                threads_[t].lastFailed = failed;
            }
            if (!failed) {
                const std::pair<uint64_t, uint64_t> pair{e.pool, e.stream};
                if (findFrom(pairs_, lastPair_, [&](const auto& x) { return x == pair; }) == pairs_.size()) {
                    lastPair_ = pairs_.size();
                    pairs_.push_back(pair);
                    k = true;
                }
            }
            k = sight(pools_, lastPool_, e.pool, e.device) || k;
            k = sight(streams_, lastStream_, e.stream, e.device) || k;
            break;
        }
        case EventKind::Free:
        case EventKind::StreamSynchronize: k = sight(streams_, lastStream_, e.stream, e.device); break;
        case EventKind::ImplicitRelease:
            if (e.pool != 0) flush(marks(e.pool));
            k = true;
            break;
        default: k = true; break;
        }
        if (droppable(e.kind) && e.has(kHasWatermarks) && e.pool != 0) {
            k = sight(pools_, lastPool_, e.pool, e.device) || k;
            PoolMarks& m = marks(e.pool);
            if (!m.reservedSeen && e.reserved != 0) {
                m.reservedSeen = true;
                k = true;
            }
            if (e.tsNs > m.newestTs) {
                m.newestTs = e.tsNs;
                m.newest = k ? kNone : i;
            }
        }
        if (k) keep_[i] = 1;
        whole = pools_.size() + streams_.size() + threads_.size() + pairs_.size() + marks_.size() > kMaxDistinct;
    }
    if (whole)
        std::fill(keep_.begin(), keep_.end(), uint8_t{1});
    else
        for (PoolMarks& m : marks_) flush(m);
    int64_t upTo = INT64_MIN;
    out.minTs = chunk.front().tsNs;
    out.kept.reserve(whole ? chunk.size() : chunk.size() / 4);
    out.upTo.reserve(out.kept.capacity());
    for (size_t i = 0; i < chunk.size(); ++i) {
        const Event& e = chunk[i];
        upTo = std::max(upTo, e.tsNs);
        out.minTs = std::min(out.minTs, e.tsNs);
        if (!keep_[i]) continue;
        out.kept.push_back(e);
        if (e.kind == EventKind::Alloc) out.kept.back().ptr = 0;
        out.upTo.push_back(upTo);
    }
    out.maxTs = upTo;
}

} // namespace poolscope::detail
