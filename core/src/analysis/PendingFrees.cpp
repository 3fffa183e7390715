#include "poolscope/analysis/PendingFrees.h"

#include <algorithm>

namespace poolscope {

const PendingFrees::Stream* PendingFrees::stream(uint64_t handle) const {
    for (const Stream& s : streams)
        if (s.handle == handle) return &s;
    return nullptr;
}

uint32_t PendingFreesAnalysis::kindMask() {
    uint32_t m = 0;
    for (EventKind k : {EventKind::Free, EventKind::StreamWaitEvent, EventKind::StreamSynchronize,
                        EventKind::EventSynchronize, EventKind::ContextSynchronize})
        m |= 1u << static_cast<unsigned>(k);
    return m;
}

void PendingFreesAnalysis::note(uint32_t stream, const replay::Replay& r, int64_t ts) {
    if (stream >= slot_.size()) slot_.resize(r.streams().size(), -1);
    const replay::StreamState& st = r.streams()[stream];
    int32_t& i = slot_[stream];
    if (i < 0) {
        if (st.freedBytes == 0) return; // never had a pending free: nothing to draw
        i = static_cast<int32_t>(out_.streams.size());
        out_.streams.push_back(PendingFrees::Stream{st.info.handle, {}, 0, 0});
        constexpr size_t kReservedStreams = 16;
        if (pointsHint_ && out_.streams.size() <= kReservedStreams)
            out_.streams.back().bytes.reserve(pointsHint_);
    }
    PendingFrees::Stream& s = out_.streams[static_cast<size_t>(i)];
    const uint64_t pending = st.pendingFreeBytes();
    if (keepSeries_) s.bytes.push(ts, pending);
    if (pending > s.peak) {
        s.peak = pending;
        s.peakTsNs = ts;
    }
}

void PendingFreesAnalysis::onFact(const replay::Fact& f, const replay::Replay& r) {
    const int64_t ts = f.event->tsNs;
    if (f.freed && !f.block.imported) note(f.stream, r, ts);
    if (!f.pendingCleared) return;
    if (f.clearedStream != replay::kNone) {
        note(f.clearedStream, r, ts);
        return;
    }
    // Several streams at once (a context synchronize): refresh every stream with a series;
    // the others had nothing pending.
    for (uint32_t si = 0; si < slot_.size(); ++si)
        if (slot_[si] >= 0) note(si, r, ts);
}

void PendingFreesAnalysis::absorb(PendingFreesAnalysis&& later) {
    for (PendingFrees::Stream& l : later.out_.streams) {
        auto it = std::find_if(out_.streams.begin(), out_.streams.end(),
                               [&](const PendingFrees::Stream& s) { return s.handle == l.handle; });
        if (it == out_.streams.end()) {
            out_.streams.push_back(std::move(l));
            continue;
        }
        if (l.peak > it->peak) {
            it->peak = l.peak;
            it->peakTsNs = l.peakTsNs;
        }
        for (size_t i = 0; i < l.bytes.size(); ++i) it->bytes.push(l.bytes.t[i], l.bytes.v[i]);
    }
}

} // namespace poolscope
