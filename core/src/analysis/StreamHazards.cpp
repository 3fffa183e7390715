// Stream-order hazards (see the header). What orders one stream's work before another's is kept
// as vector clocks over seq numbers: per stream, the point up to which each other stream's work
// is ordered before anything it enqueues from now on (through event waits, followed through
// the waited-on stream's own knowledge at its record), and per stream the point up to which the
// host has seen its work finish (synchronizes). The replay's Fact says whether a cross-stream
// free was ordered by a direct wait; the clocks add the transitive and host orderings, which
// the replay does not track.
#include "poolscope/analysis/StreamHazards.h"

#include <algorithm>
#include <unordered_map>

#include "../replay/FlatPtrMap.h"
#include "poolscope/EventFields.h"

namespace poolscope {

namespace {

// Stream `stream`'s work enqueued up to (before) seq `seq`.
struct Dep {
    uint32_t stream;
    uint64_t seq;
};
// A stream's clock: the streams it waited on, directly or not. Programs have few such
// relations; a trace with thousands of streams in wait chains would make clocks (and their
// copies at every record) as large as the stream count, so a clock keeps at most kMaxClock
// entries and forgets the oldest ordering beyond that (StreamHazards::truncated says so).
using Clock = std::vector<Dep>;
constexpr size_t kMaxClock = 16;

// false when an ordering had to be forgotten.
bool raise(Clock& c, uint32_t stream, uint64_t seq) {
    for (Dep& d : c)
        if (d.stream == stream) {
            d.seq = std::max(d.seq, seq);
            return true;
        }
    if (c.size() < kMaxClock) {
        c.push_back({stream, seq});
        return true;
    }
    auto oldest = std::min_element(c.begin(), c.end(),
                                   [](const Dep& a, const Dep& b) { return a.seq < b.seq; });
    if (oldest->seq < seq) *oldest = {stream, seq};
    return false;
}

uint64_t get(const Clock& c, uint32_t stream) {
    for (const Dep& d : c)
        if (d.stream == stream) return d.seq;
    return 0;
}

// The legacy default stream (handle 0, or CU_STREAM_LEGACY) waits for all earlier work of
// blocking streams, and they for its; a stream is blocking unless created non-blocking
// (cudaStreamNonBlocking = 1), which is known only for streams whose creation was seen.
bool legacy(const replay::StreamState& s) { return s.info.handle <= 1; }
bool blocking(const replay::StreamState& s) { return (s.info.flags & 1u) == 0; }

} // namespace

struct StreamHazardsAnalysis::State {
    std::vector<Clock> clocks; // by replay stream index
    // Each clock as a record last copied it, shared by the records made since (null: the clock
    // changed since, or is empty).
    std::vector<std::shared_ptr<const Clock>> shared;
    std::vector<uint64_t> host; // by replay stream index: work before this seq has finished
    // Context synchronizes: the latest on any device (for streams whose device is not known),
    // on all devices at once (device -1), and per device.
    uint64_t ctxAny = 0, ctxAll = 0;
    std::vector<uint64_t> ctxDevice;
    struct Record {
        uint32_t stream = replay::kNone;
        uint64_t seq = 0;
        std::shared_ptr<const Clock> clock; // the recording stream's clock then (null: empty)
    };
    std::unordered_map<uint64_t, Record> records; // CUevent -> its latest record
    struct Freed {
        uint64_t seq;
        int64_t tsNs;
        uint32_t stream;
        uint32_t tag;
    };
    detail::FlatPtrMap<Freed> freed; // address -> the free that last released it

    void grow(size_t streams) {
        if (clocks.size() < streams) {
            clocks.resize(streams);
            shared.resize(streams);
            host.resize(streams, 0);
        }
    }

    uint64_t ctxCovering(int device) const {
        if (device < 0) return ctxAny;
        const auto d = static_cast<size_t>(device);
        return std::max(ctxAll, d < ctxDevice.size() ? ctxDevice[d] : 0);
    }

    // Is stream a's work enqueued before seq `after` ordered before what stream b enqueues now?
    bool ordered(uint32_t a, uint64_t after, uint32_t b, const replay::Replay& r) const {
        if (a == b) return true;
        const replay::StreamState& sa = r.streams()[a];
        if (host[a] > after || get(clocks[b], a) > after || ctxCovering(sa.info.device) > after)
            return true;
        const replay::StreamState& sb = r.streams()[b];
        return (legacy(sa) && blocking(sb)) || (legacy(sb) && blocking(sa));
    }

    void finished(uint32_t stream, uint64_t seq) { host[stream] = std::max(host[stream], seq); }
    // The host saw `stream`'s work up to seq finish: and with it what that work had waited for.
    void finished(uint32_t stream, uint64_t seq, const Clock* c) {
        finished(stream, seq);
        if (c)
            for (const Dep& d : *c) finished(d.stream, d.seq);
    }
};

StreamHazardsAnalysis::StreamHazardsAnalysis() : d_(std::make_unique<State>()) {}
StreamHazardsAnalysis::~StreamHazardsAnalysis() = default;

uint32_t StreamHazardsAnalysis::kindMask() {
    uint32_t m = 0;
    for (EventKind k : {EventKind::Alloc, EventKind::Free, EventKind::EventRecord,
                        EventKind::StreamWaitEvent, EventKind::StreamSynchronize,
                        EventKind::EventSynchronize, EventKind::ContextSynchronize})
        m |= 1u << static_cast<unsigned>(k);
    return m;
}

void StreamHazardsAnalysis::onFact(const replay::Fact& f, const replay::Replay& r) {
    State& d = *d_;
    const Event& e = *f.event;
    d.grow(r.streams().size());
    auto keep = [&](const StreamHazard& h) {
        if (out_.hazards.size() < maxKept_) out_.hazards.push_back(h);
    };
    switch (e.kind) {
    case EventKind::Alloc: {
        if (!f.allocated || f.block.ptr == 0) break;
        State::Freed fr{};
        if (!d.freed.take(f.block.ptr, fr)) break;
        if (d.ordered(fr.stream, fr.seq, f.stream, r)) break;
        out_.unorderedReuses++;
        StreamHazard h;
        h.kind = StreamHazard::Kind::UnorderedReuse;
        h.first = {fr.seq, fr.tsNs, r.streams()[fr.stream].info.handle, fr.tag};
        h.second = {e.seq, e.tsNs, r.streams()[f.stream].info.handle, f.block.tag};
        h.ptr = f.block.ptr;
        h.bytes = f.block.bytes;
        h.pool = r.pools()[f.pool].info.handle;
        const replay::Knob& k = r.pools()[f.pool].knob(PoolAttr::ReuseAllowOpportunistic);
        h.opportunistic = k.known ? static_cast<int8_t>(k.value != 0) : int8_t{-1};
        keep(h);
        break;
    }
    case EventKind::Free: {
        if (!f.freed || f.block.imported) break;
        const replay::Block& b = f.block;
        if (f.crossStream && !f.orderedByWait && !d.ordered(b.stream, b.allocSeq, f.stream, r)) {
            out_.unorderedFrees++;
            StreamHazard h;
            h.kind = StreamHazard::Kind::UnorderedFree;
            h.first = {b.allocSeq, b.allocTsNs, r.streams()[b.stream].info.handle, b.tag};
            h.second = {e.seq, e.tsNs, r.streams()[f.stream].info.handle, b.tag};
            h.ptr = b.ptr;
            h.bytes = b.bytes;
            h.pool = r.pools()[b.pool].info.handle;
            keep(h);
        }
        // Bounded: a trace that frees ever new addresses would otherwise grow the map (and its
        // cache misses) with every free.
        if (d.freed.size() >= StreamHazards::kMaxFreedAddresses) [[unlikely]] {
            d.freed = detail::FlatPtrMap<State::Freed>{};
            out_.freedForgotten = true;
        }
        d.freed.put(b.ptr, State::Freed{e.seq, e.tsNs, f.stream, b.tag});
        break;
    }
    case EventKind::EventRecord: {
        State::Record& rec = d.records[CuEventFields::of(e).event];
        rec.stream = f.stream;
        rec.seq = e.seq;
        const Clock& c = d.clocks[f.stream];
        std::shared_ptr<const Clock>& snap = d.shared[f.stream];
        if (!snap && !c.empty()) snap = std::make_shared<const Clock>(c);
        rec.clock = snap;
        break;
    }
    case EventKind::StreamWaitEvent: {
        auto it = d.records.find(CuEventFields::of(e).event);
        if (it == d.records.end() || it->second.stream == f.stream) break;
        const State::Record& rec = it->second;
        Clock& c = d.clocks[f.stream];
        bool kept = raise(c, rec.stream, rec.seq);
        if (rec.clock)
            for (const Dep& dep : *rec.clock)
                if (dep.stream != f.stream) kept = raise(c, dep.stream, dep.seq) && kept;
        out_.truncated = out_.truncated || !kept;
        d.shared[f.stream].reset();
        break;
    }
    case EventKind::StreamSynchronize:
        d.finished(f.stream, e.seq, &d.clocks[f.stream]);
        break;
    case EventKind::EventSynchronize: {
        auto it = d.records.find(CuEventFields::of(e).event);
        if (it != d.records.end())
            d.finished(it->second.stream, it->second.seq, it->second.clock.get());
        break;
    }
    case EventKind::ContextSynchronize:
        // Every stream of the device (of all devices for -1), as the replay's clearing does;
        // kept per device rather than written into every stream's entry.
        d.ctxAny = std::max(d.ctxAny, e.seq);
        if (e.device < 0) {
            d.ctxAll = std::max(d.ctxAll, e.seq);
        } else {
            const auto dev = static_cast<size_t>(e.device);
            if (d.ctxDevice.size() <= dev) d.ctxDevice.resize(dev + 1, 0);
            d.ctxDevice[dev] = std::max(d.ctxDevice[dev], e.seq);
        }
        break;
    default: break;
    }
}

} // namespace poolscope
