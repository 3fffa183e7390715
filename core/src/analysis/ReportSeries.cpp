// The streaming report's series (ReportReducer.h): the points the reading side handed over as a
// chunk's commands, kept at their newest end (StepTail) as the Timeline builder's series would
// hold them, their peaks, and the instants the time merge is asked about. On the series' thread
// where there is one: a third of the reading thread's work was here.
#include "ReportReducer.h"

namespace poolscope::detail {

ReportReducer::SeriesPool& ReportReducer::seriesPool(uint32_t pool) {
    if (pool >= sPools_.size()) sPools_.resize(size_t{pool} + 1);
    return sPools_[pool];
}

ReportReducer::SeriesLive& ReportReducer::seriesLive(std::vector<SeriesLive>& v, uint32_t idx) {
    if (idx >= v.size()) v.resize(size_t{idx} + 1);
    return v[idx];
}

// The cap the next high watermark of the pool will put on its `used` points.
void ReportReducer::capAhead(uint32_t pool) {
    SeriesPool& p = sPools_[pool];
    auto it = highCaps_.find(p.handle);
    std::optional<uint64_t> cap;
    if (it != highCaps_.end()) {
        const size_t next = highNext_[it->first];
        if (next < it->second.size()) cap = it->second[next];
    }
    p.used.setCapAhead(cap);
}

void ReportReducer::push(StepTail& s, int64_t ts, uint64_t v, bool merged) {
    const bool inOrder = s.push(ts, v, merged ? done_ : INT64_MIN);
    late_ = late_ || !inOrder;
}

void ReportReducer::poolActive(uint32_t pool) {
    SeriesPool& p = sPools_[pool];
    if (!p.active) {
        p.active = true;
        activePools_.push_back(pool);
    }
}

void ReportReducer::liveActive(std::vector<SeriesLive>& v, std::vector<uint32_t>& active, uint32_t idx) {
    SeriesLive& s = v[idx];
    if (!s.active) {
        s.active = true;
        active.push_back(idx);
    }
}

// A new peak reserved (a point's, or a sample's high watermark): the instant the time merge is
// asked about.
void ReportReducer::raisePeakReserved(uint32_t pool, int64_t ts, uint64_t reserved) {
    SeriesPool& p = sPools_[pool];
    if (reserved <= p.peakReserved) return;
    p.peakReserved = reserved;
    p.peakReservedTsNs = ts;
    ++p.peakVersion;
    ask(ts, pool, true);
}

// A sample with high watermarks (driverHighs): the used points since the last one capped, the
// peak used as the Timeline's HighWindow has it.
void ReportReducer::seriesHighUsed(uint32_t pool, int64_t ts, uint64_t usedHigh) {
    SeriesPool& p = sPools_[pool];
    ++highNext_[p.handle];
    uint64_t peak = 0;
    int64_t peakTs = 0;
    p.used.capSinceHigh(usedHigh, peak, peakTs);
    capAhead(pool); // the next sample's cap, for the points from here on
    if (usedHigh > peak) peak = usedHigh, peakTs = ts;
    p.peakUsed = peak;
    p.peakUsedTsNs = peakTs;
    p.used.setHighPeak(peak, peakTs);
}

void ReportReducer::ask(int64_t t, uint32_t idx, bool peak) {
    if (t < done_) late_ = true; // answered as of now, in the next merge
    questions_.push(Question{t, idx, peak ? sPools_[idx].peakVersion : 0u, peak});
}

void ReportReducer::seriesRun(Commands& c) {
    bool anyLate = false;
    uint32_t lateEvent = 0;
    for (const Cmd& x : c.cmds) {
        late_ = false;
        switch (x.op) {
        case Op::NewPool:
            seriesPool(x.idx).handle = x.v;
            capAhead(x.idx);
            break;
        case Op::Reserved:
            push(sPools_[x.idx].reserved, x.t, x.v);
            poolActive(x.idx);
            raisePeakReserved(x.idx, x.t, x.v);
            break;
        case Op::Used: {
            SeriesPool& p = sPools_[x.idx];
            push(p.used, x.t, x.v);
            poolActive(x.idx);
            if (x.v > p.peakUsed) {
                p.peakUsed = x.v;
                p.peakUsedTsNs = x.t;
            }
            break;
        }
        case Op::HighUsed: seriesHighUsed(x.idx, x.t, x.v); break;
        case Op::HighReserved: raisePeakReserved(x.idx, x.t, x.v); break;
        case Op::StreamLive:
            push(seriesLive(sStreams_, x.idx).live, x.t, x.v);
            liveActive(sStreams_, activeStreams_, x.idx);
            break;
        case Op::OutsideLive:
            push(seriesLive(sOutside_, x.idx).live, x.t, x.v);
            liveActive(sOutside_, activeOutside_, x.idx);
            break;
        case Op::Knob:
            push(sPools_[x.idx].knobs[x.site], x.t, x.v, false);
            poolActive(x.idx);
            break;
        case Op::Step:
            if (x.t < done_) late_ = true;
            steps_.push(Entry{x.t, x.v, x.idx, x.site, Kind::Step, x.count});
            break;
        case Op::Ask: ask(x.t, x.idx, false); break;
        }
        // An event is counted once however many of its points came late.
        if (late_ && !(anyLate && lateEvent == x.event)) {
            lateEvents_++;
            lateEvent = x.event;
            anyLate = true;
        }
    }
    if (c.last) {
        flush(INT64_MAX, true, c);
    } else if (c.anyTime) {
        int64_t frontier;
        if (__builtin_sub_overflow(c.t1, horizon_, &frontier)) frontier = INT64_MIN;
        flush(frontier, false, c);
    }
}

} // namespace poolscope::detail
