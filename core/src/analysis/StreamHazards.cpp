// Stream-order hazards (see the header). What orders one stream's work before another's is kept
// as vector clocks over seq numbers: per stream, the point up to which each other stream's work
// is ordered before anything it enqueues from now on (through event waits, followed through
// the waited-on stream's own knowledge at its record), and per stream the point up to which the
// host has seen its work finish (synchronizes). The replay's Fact says whether a cross-stream
// free was ordered by a direct wait; the clocks add the transitive and host orderings, which
// the replay does not track.
#include "poolscope/analysis/StreamHazards.h"

#include <algorithm>
#include <deque>
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

// A wait (by `waiter`) or a synchronize (kNone) on a CUevent's record from before a piece.
struct RecRef {
    uint64_t event;
    uint32_t waiter;
    bool operator==(const RecRef&) const = default;
};

// A clock as a piece knows it (StreamHazardsAnalysis::startPiece): its own orderings, and by
// reference those the state before the piece gave it: streams' clocks then, and records then.
// Outside a piece the references stay empty.
struct SymClock {
    Clock own;
    std::vector<uint32_t> clocks;
    std::vector<RecRef> records;

    void refClock(uint32_t s) {
        if (std::find(clocks.begin(), clocks.end(), s) == clocks.end()) clocks.push_back(s);
    }
    void refRecord(RecRef r) {
        if (std::find(records.begin(), records.end(), r) == records.end()) records.push_back(r);
    }
    void refsOf(const SymClock& o) {
        for (uint32_t s : o.clocks) refClock(s);
        for (const RecRef& r : o.records) refRecord(r);
    }
};

// The legacy default stream (handle 0, or CU_STREAM_LEGACY) waits for all earlier work of
// blocking streams, and they for its; a stream is blocking unless created non-blocking
// (cudaStreamNonBlocking = 1), which is known only for streams whose creation was seen.
bool legacy(const StreamInfo& s) { return s.handle <= 1; }
bool blocking(const StreamInfo& s) { return (s.flags & 1u) == 0; }
bool legacyOrdered(const StreamInfo& a, const StreamInfo& b) {
    return (legacy(a) && blocking(b)) || (legacy(b) && blocking(a));
}

} // namespace

namespace {

// What a piece knew of the orderings before stream b when it allocated addresses it had not met
// (shared by the allocs on b until an ordering changes): b's clock and the host's references,
// and the streams the piece itself had ordered before b by then.
struct Snapshot {
    std::shared_ptr<const SymClock> clockB, host;
    std::vector<uint32_t> orderedHere;
};

// A question a piece leaves to the state before it: is stream a's work before seq x (the
// alloc of a block from before the piece) ordered before what stream b enqueues at the free?
struct Open {
    StreamHazard h; // the hazard, should the state before not order them
    uint32_t a = replay::kNone, b = replay::kNone;
    uint64_t x = 0;
    int deviceA = -1;
    std::shared_ptr<const SymClock> clockB, host; // b's clock and the host's references then
};

// An address a piece allocated before it met it otherwise (within the reuse window of its
// start): the state before may hold a free of it. Compact: a long piece has many.
struct Miss {
    uint64_t ptr, seq, bytes, pool;
    int64_t tsNs;
    uint32_t b, tag, snapshot;
    int8_t opportunistic;
};

} // namespace

struct StreamHazardsAnalysis::State {
    std::vector<SymClock> clocks; // by replay stream index
    // Each clock as a record last copied it, shared by the records made since (null: the clock
    // changed since, or is empty).
    std::vector<std::shared_ptr<const SymClock>> shared;
    std::vector<uint64_t> host; // by replay stream index: work before this seq has finished
    // Context synchronizes: the latest on any device (for streams whose device is not known),
    // on all devices at once (device -1), and per device.
    uint64_t ctxAny = 0, ctxAll = 0;
    std::vector<uint64_t> ctxDevice;
    struct Record {
        uint32_t stream = replay::kNone;
        uint64_t seq = 0;
        std::shared_ptr<const SymClock> clock; // the recording stream's clock then (null: empty)
    };
    std::unordered_map<uint64_t, Record> records; // CUevent -> its latest record
    struct Freed {
        uint64_t seq;
        int64_t tsNs;
        uint32_t stream;
        uint32_t tag;
    };
    detail::FlatPtrMap<Freed> freed; // address -> the free that last released it
    // The frees in seq order, while none has aged yet: the first that outlives the window
    // unallocated sets freedForgotten (at the first event after, as a read in pieces sees it).
    std::deque<std::pair<uint64_t, uint64_t>> frees; // (seq, address)
    uint64_t lastSeq = 0; // the newest event met

    // Sets `forgotten` once a free still held is older than the window at `now`.
    void age(uint64_t now, bool& forgotten) {
        while (!frees.empty() && frees.front().first + StreamHazards::kReuseWindow < now) {
            const auto [seq, ptr] = frees.front();
            frees.pop_front();
            const Freed* f = freed.find(ptr);
            if (f && f->seq == seq) {
                forgotten = true;
                frees.clear();
                return;
            }
        }
    }
    // Bounded: the frees older than the window go (what is checked does not change).
    void sweep(uint64_t now, bool& forgotten) {
        std::vector<uint64_t> old;
        freed.forEachEntry([&](uint64_t ptr, const Freed& f) {
            if (f.seq + StreamHazards::kReuseWindow < now) old.push_back(ptr);
        });
        if (old.empty()) return;
        forgotten = true;
        frees.clear(); // what they were kept for is known now
        if (old.size() * 2 < freed.size()) {
            Freed gone{};
            for (uint64_t ptr : old) freed.take(ptr, gone);
            return;
        }
        keepRecent(now, freed.size() - old.size()); // most of it
    }
    // The `recent` frees within the window at `now` into a map of their size, the rest gone.
    void keepRecent(uint64_t now, size_t recent) {
        detail::FlatPtrMap<Freed> kept;
        kept.reserve(recent);
        freed.forEachEntry([&](uint64_t ptr, const Freed& f) {
            if (f.seq + StreamHazards::kReuseWindow >= now) kept.put(ptr, f);
        });
        freed = std::move(kept);
    }

    // A piece's (startPiece): the host's references to the state before, the questions left
    // open. A free from before the piece is checked only within the reuse window of it, so
    // only there does the piece note the addresses it met (the seq of the first event on each)
    // and keep the allocs of those it had not met.
    bool piece = false;
    uint64_t firstSeq = 0;
    SymClock hostRefs;
    std::shared_ptr<const SymClock> hostShared;
    detail::FlatPtrMap<uint64_t> met;
    std::vector<Open> open;
    std::vector<Miss> misses;
    std::vector<Snapshot> snapshots;
    std::vector<uint32_t> snapshotOf; // by stream: its snapshot while valid, else kNone
    bool inexact = false;

    bool inWindow(uint64_t seq) const { return seq < firstSeq + StreamHazards::kReuseWindow; }
    // An ordering changed: the snapshots taken so far hold no more.
    void orderingChanged() {
        if (piece) std::fill(snapshotOf.begin(), snapshotOf.end(), replay::kNone);
    }

    void grow(size_t streams) {
        if (clocks.size() < streams) {
            const size_t from = clocks.size();
            clocks.resize(streams);
            shared.resize(streams);
            host.resize(streams, 0);
            if (piece) {
                for (size_t s = from; s < streams; ++s) clocks[s].clocks.push_back(static_cast<uint32_t>(s));
                snapshotOf.resize(streams, replay::kNone);
            }
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
        const StreamInfo& sa = r.streams()[a].info;
        if (host[a] > after || get(clocks[b].own, a) > after || ctxCovering(sa.device) > after)
            return true;
        return legacyOrdered(sa, r.streams()[b].info);
    }

    void finished(uint32_t stream, uint64_t seq) {
        if (seq > host[stream]) {
            host[stream] = seq;
            orderingChanged();
        }
    }
    // The host saw `stream`'s work up to seq finish: and with it what that work had waited for.
    void finished(uint32_t stream, uint64_t seq, const SymClock* c) {
        finished(stream, seq);
        if (!c) return;
        for (const Dep& d : c->own) finished(d.stream, d.seq);
        if (!c->clocks.empty() || !c->records.empty()) {
            hostRefs.refsOf(*c);
            hostShared.reset();
            orderingChanged();
        }
    }

    std::shared_ptr<const SymClock> clockOf(uint32_t s) {
        if (!shared[s]) shared[s] = std::make_shared<const SymClock>(clocks[s]);
        return shared[s];
    }
    std::shared_ptr<const SymClock> hostOf() {
        if (!hostShared) hostShared = std::make_shared<const SymClock>(hostRefs);
        return hostShared;
    }

    // (After the pieces, on the state before one.) What a record from this state adds for
    // stream a, where `r` refers to it.
    uint64_t recordFor(const RecRef& r, uint32_t a) const {
        auto it = records.find(r.event);
        if (it == records.end() || it->second.stream == r.waiter) return 0;
        uint64_t v = it->second.stream == a ? it->second.seq : 0;
        if (it->second.clock) v = std::max(v, get(it->second.clock->own, a));
        return v;
    }
    // The most this state gives stream a through the references of `c`.
    uint64_t refsFor(const SymClock& c, uint32_t a) const {
        uint64_t v = 0;
        for (uint32_t s : c.clocks)
            if (s < clocks.size()) v = std::max(v, get(clocks[s].own, a));
        for (const RecRef& r : c.records) v = std::max(v, recordFor(r, a));
        return v;
    }
    // `c` with its references taken from this state: false past kMaxClock streams (the whole
    // read would have forgotten some).
    bool resolve(const SymClock& c, uint32_t self, Clock& out) const {
        out = c.own;
        auto join = [&](uint32_t s, uint64_t seq) {
            if (s == self || seq == 0) return true;
            for (Dep& d : out)
                if (d.stream == s) {
                    d.seq = std::max(d.seq, seq);
                    return true;
                }
            out.push_back({s, seq});
            return out.size() <= kMaxClock;
        };
        bool ok = true;
        for (uint32_t s : c.clocks)
            if (s < clocks.size())
                for (const Dep& d : clocks[s].own) ok = join(d.stream, d.seq) && ok;
        for (const RecRef& r : c.records) {
            auto it = records.find(r.event);
            if (it == records.end() || it->second.stream == r.waiter) continue;
            ok = join(it->second.stream, it->second.seq) && ok;
            if (it->second.clock)
                for (const Dep& d : it->second.clock->own) ok = join(d.stream, d.seq) && ok;
        }
        return ok;
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

void StreamHazardsAnalysis::startPiece(uint64_t firstSeq) {
    d_->piece = true;
    d_->firstSeq = firstSeq;
    for (size_t s = 0; s < d_->clocks.size(); ++s) d_->clocks[s].refClock(static_cast<uint32_t>(s));
}

void StreamHazardsAnalysis::endPiece() {
    State& d = *d_;
    std::deque<std::pair<uint64_t, uint64_t>>().swap(d.frees);
    // A free older than the window at the piece's last event has aged there already (age()
    // set the flag then); the map keeps the rest, at their size.
    size_t recent = 0;
    d.freed.forEachEntry([&](uint64_t, const State::Freed& f) {
        recent += f.seq + StreamHazards::kReuseWindow >= d.lastSeq;
    });
    if (recent < d.freed.size()) out_.freedForgotten = true;
    d.keepRecent(d.lastSeq, recent);
    d.misses.shrink_to_fit();
    d.open.shrink_to_fit();
}

void StreamHazardsAnalysis::onFact(const replay::Fact& f, const replay::Replay& r) {
    State& d = *d_;
    const Event& e = *f.event;
    d.grow(r.streams().size());
    d.lastSeq = e.seq;
    if (!out_.freedForgotten) d.age(e.seq, out_.freedForgotten);
    auto keep = [&](const StreamHazard& h) {
        if (out_.hazards.size() < maxKept_) out_.hazards.push_back(h);
    };
    switch (e.kind) {
    case EventKind::Alloc: {
        if (!f.allocated || f.block.ptr == 0) break;
        State::Freed fr{};
        // A free older than the window is not checked (StreamHazards::freedForgotten).
        const bool hit = d.freed.take(f.block.ptr, fr) && fr.seq + StreamHazards::kReuseWindow >= e.seq;
        auto opportunistic = [&] {
            const replay::Knob& k = r.pools()[f.pool].knob(PoolAttr::ReuseAllowOpportunistic);
            return k.known ? static_cast<int8_t>(k.value != 0) : int8_t{-1};
        };
        if (d.piece) {
            bool first = false;
            if (d.inWindow(e.seq) && !d.met.find(f.block.ptr)) {
                first = true;
                d.met.put(f.block.ptr, e.seq);
            }
            if (!hit) {
                // Met here first, in the window: the state before may hold its free.
                if (!first) break;
                uint32_t& snap = d.snapshotOf[f.stream];
                if (snap == replay::kNone) {
                    Snapshot sn{d.clockOf(f.stream), d.hostOf(), {}};
                    const uint64_t before = d.firstSeq ? d.firstSeq - 1 : 0;
                    for (uint32_t a = 0; a < d.clocks.size(); ++a)
                        if (d.ordered(a, before, f.stream, r)) sn.orderedHere.push_back(a);
                    snap = static_cast<uint32_t>(d.snapshots.size());
                    d.snapshots.push_back(std::move(sn));
                }
                d.misses.push_back(Miss{f.block.ptr, e.seq, f.block.bytes, r.pools()[f.pool].info.handle, e.tsNs,
                                        f.stream, f.block.tag, snap, opportunistic()});
                break;
            }
        } else if (!hit) {
            break;
        }
        if (d.ordered(fr.stream, fr.seq, f.stream, r)) break;
        out_.unorderedReuses++;
        StreamHazard h;
        h.kind = StreamHazard::Kind::UnorderedReuse;
        h.first = {fr.seq, fr.tsNs, r.streams()[fr.stream].info.handle, fr.tag};
        h.second = {e.seq, e.tsNs, r.streams()[f.stream].info.handle, f.block.tag};
        h.ptr = f.block.ptr;
        h.bytes = f.block.bytes;
        h.pool = r.pools()[f.pool].info.handle;
        h.opportunistic = opportunistic();
        keep(h);
        break;
    }
    case EventKind::Free: {
        if (!f.freed || f.block.imported) break;
        const replay::Block& b = f.block;
        if (f.crossStream && !f.orderedByWait && !d.ordered(b.stream, b.allocSeq, f.stream, r)) {
            StreamHazard h;
            h.kind = StreamHazard::Kind::UnorderedFree;
            h.first = {b.allocSeq, b.allocTsNs, r.streams()[b.stream].info.handle, b.tag};
            h.second = {e.seq, e.tsNs, r.streams()[f.stream].info.handle, b.tag};
            h.ptr = b.ptr;
            h.bytes = b.bytes;
            h.pool = r.pools()[b.pool].info.handle;
            if (d.piece && b.allocSeq < d.firstSeq) {
                // What the state before ordered after the alloc is not known here.
                Open q;
                q.h = h;
                q.a = b.stream;
                q.b = f.stream;
                q.x = b.allocSeq;
                q.deviceA = r.streams()[b.stream].info.device;
                q.clockB = d.clockOf(f.stream);
                q.host = d.hostOf();
                d.open.push_back(std::move(q));
            } else {
                out_.unorderedFrees++;
                keep(h);
            }
        }
        // Bounded: a trace that frees ever new addresses would otherwise grow the map (and its
        // cache misses) with every free.
        if (d.freed.size() >= StreamHazards::kMaxFreedAddresses) [[unlikely]]
            d.sweep(e.seq, out_.freedForgotten);
        d.freed.put(b.ptr, State::Freed{e.seq, e.tsNs, f.stream, b.tag});
        if (!out_.freedForgotten) d.frees.emplace_back(e.seq, b.ptr);
        if (d.piece && d.inWindow(e.seq) && !d.met.find(b.ptr)) d.met.put(b.ptr, e.seq);
        break;
    }
    case EventKind::EventRecord: {
        State::Record& rec = d.records[CuEventFields::of(e).event];
        rec.stream = f.stream;
        rec.seq = e.seq;
        const SymClock& c = d.clocks[f.stream];
        if (c.own.empty() && c.clocks.empty() && c.records.empty())
            rec.clock.reset();
        else
            rec.clock = d.clockOf(f.stream);
        break;
    }
    case EventKind::StreamWaitEvent: {
        const uint64_t ev = CuEventFields::of(e).event;
        auto it = d.records.find(ev);
        if (it == d.records.end()) {
            // A record before the piece, if any: the state before says which.
            if (d.piece) {
                d.clocks[f.stream].refRecord({ev, f.stream});
                d.shared[f.stream].reset();
                d.orderingChanged();
            }
            break;
        }
        if (it->second.stream == f.stream) break;
        const State::Record& rec = it->second;
        SymClock& c = d.clocks[f.stream];
        bool kept = raise(c.own, rec.stream, rec.seq);
        if (rec.clock) {
            for (const Dep& dep : rec.clock->own)
                if (dep.stream != f.stream) kept = raise(c.own, dep.stream, dep.seq) && kept;
            c.refsOf(*rec.clock);
        }
        out_.truncated = out_.truncated || !kept;
        d.shared[f.stream].reset();
        d.orderingChanged();
        break;
    }
    case EventKind::StreamSynchronize:
        d.finished(f.stream, e.seq, &d.clocks[f.stream]);
        break;
    case EventKind::EventSynchronize: {
        const uint64_t ev = CuEventFields::of(e).event;
        auto it = d.records.find(ev);
        if (it != d.records.end()) {
            d.finished(it->second.stream, it->second.seq, it->second.clock.get());
        } else if (d.piece) {
            d.hostRefs.refRecord({ev, replay::kNone});
            d.hostShared.reset();
            d.orderingChanged();
        }
        break;
    }
    case EventKind::ContextSynchronize:
        // Every stream of the device (of all devices for -1), as the replay's clearing does;
        // kept per device rather than written into every stream's entry.
        d.ctxAny = std::max(d.ctxAny, e.seq);
        d.orderingChanged();
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

bool StreamHazardsAnalysis::absorb(StreamHazardsAnalysis&& piece, const std::vector<StreamInfo>& start,
                                   const std::vector<StreamInfo>& end) {
    State& s = *d_; // the state before the piece, exact
    State& p = *piece.d_;
    bool exact = p.piece && !s.piece && !s.inexact && !out_.truncated && !piece.out_.truncated;
    // A stream's device or kind learned within the piece: the questions asked there saw another.
    for (size_t i = 0; i < start.size() && i < end.size(); ++i) {
        const StreamInfo &a = start[i], &b = end[i];
        exact = exact && a.device == b.device && a.flags == b.flags && a.handle == b.handle;
    }
    s.grow(std::max(end.size(), p.clocks.size()));
    p.grow(s.clocks.size());

    // Is a's work before x ordered before b's (at the open question's time), by what the state
    // before gave the piece?
    auto orderedBefore = [&](const SymClock* clockB, const SymClock* host, uint32_t a, uint64_t x, int deviceA) {
        if (s.host[a] > x || s.ctxCovering(deviceA) > x) return true;
        return (clockB && s.refsFor(*clockB, a) > x) || (host && s.refsFor(*host, a) > x);
    };
    std::vector<StreamHazard> resolved;
    uint64_t frees = 0, reuses = 0;
    bool forgotten = piece.out_.freedForgotten;
    for (const Open& q : p.open) {
        if (orderedBefore(q.clockB.get(), q.host.get(), q.a, q.x, q.deviceA)) continue;
        ++frees;
        resolved.push_back(q.h);
    }
    for (const Miss& m : p.misses) {
        const State::Freed* fr = s.freed.find(m.ptr);
        if (!fr || fr->seq + StreamHazards::kReuseWindow < m.seq || fr->stream == m.b) continue;
        const Snapshot& sn = p.snapshots[m.snapshot];
        if (std::find(sn.orderedHere.begin(), sn.orderedHere.end(), fr->stream) != sn.orderedHere.end()) continue;
        const StreamInfo& a = end[fr->stream];
        if (orderedBefore(sn.clockB.get(), sn.host.get(), fr->stream, fr->seq, a.device)) continue;
        StreamHazard h;
        h.kind = StreamHazard::Kind::UnorderedReuse;
        h.first = {fr->seq, fr->tsNs, a.handle, fr->tag};
        h.second = {m.seq, m.tsNs, end[m.b].handle, m.tag};
        h.ptr = m.ptr;
        h.bytes = m.bytes;
        h.pool = m.pool;
        h.opportunistic = m.opportunistic;
        ++reuses;
        resolved.push_back(h);
    }
    // The two kinds, each in seq order, merged.
    std::inplace_merge(resolved.begin(), resolved.begin() + static_cast<std::ptrdiff_t>(resolved.size() - reuses),
                       resolved.end(), [](const StreamHazard& x, const StreamHazard& y) { return x.second.seq < y.second.seq; });

    // The hazards in seq order (the later event's), the first maxKept_ of them.
    auto later = [](const StreamHazard& a, const StreamHazard& b) { return a.second.seq < b.second.seq; };
    std::vector<StreamHazard> merged;
    std::merge(piece.out_.hazards.begin(), piece.out_.hazards.end(), resolved.begin(), resolved.end(),
               std::back_inserter(merged), later);
    for (const StreamHazard& h : merged) {
        if (out_.hazards.size() >= maxKept_) break;
        out_.hazards.push_back(h);
    }
    out_.unorderedFrees += piece.out_.unorderedFrees + frees;
    out_.unorderedReuses += piece.out_.unorderedReuses + reuses;
    out_.truncated = out_.truncated || piece.out_.truncated;

    // The state at the piece's end, from the state before it (read whole before any is written).
    std::vector<Clock> clocks(s.clocks.size());
    for (uint32_t b = 0; b < clocks.size(); ++b) exact = s.resolve(p.clocks[b], b, clocks[b]) && exact;
    std::vector<std::pair<uint64_t, State::Record>> records;
    records.reserve(p.records.size());
    for (const auto& [ev, rec] : p.records) {
        State::Record out{rec.stream, rec.seq, nullptr};
        if (rec.clock) {
            SymClock c;
            exact = s.resolve(*rec.clock, rec.stream, c.own) && exact;
            if (!c.own.empty()) out.clock = std::make_shared<const SymClock>(std::move(c));
        }
        records.emplace_back(ev, std::move(out));
    }
    std::vector<uint64_t> host = s.host;
    for (uint32_t a = 0; a < host.size(); ++a)
        host[a] = std::max({host[a], p.host[a], s.refsFor(p.hostRefs, a)});

    for (uint32_t b = 0; b < clocks.size(); ++b) {
        s.clocks[b].own = std::move(clocks[b]);
        s.shared[b].reset();
    }
    for (auto& [ev, rec] : records) s.records[ev] = std::move(rec);
    s.host = std::move(host);
    s.ctxAny = std::max(s.ctxAny, p.ctxAny);
    s.ctxAll = std::max(s.ctxAll, p.ctxAll);
    if (s.ctxDevice.size() < p.ctxDevice.size()) s.ctxDevice.resize(p.ctxDevice.size(), 0);
    for (size_t i = 0; i < p.ctxDevice.size(); ++i) s.ctxDevice[i] = std::max(s.ctxDevice[i], p.ctxDevice[i]);
    // A free from before the piece of an address the piece met in the window went there
    // (allocated, or freed again), aged first where it was older than the window then; the
    // others age within the piece, or go on; the piece's own frees come after.
    State::Freed gone{};
    p.met.forEachEntry([&](uint64_t ptr, uint64_t at) {
        if (s.freed.take(ptr, gone) && gone.seq + StreamHazards::kReuseWindow < at) forgotten = true;
    });
    if (p.lastSeq >= p.firstSeq + StreamHazards::kReuseWindow) {
        // A piece longer than the window: every free from before it is older than the window at
        // its end (what sweep() would find), and the piece's own frees are the whole map.
        if (s.freed.size() > 0) forgotten = true;
        s.freed = std::move(p.freed);
    } else {
        s.sweep(p.lastSeq, forgotten);
        s.freed.reserve(s.freed.size() + p.freed.size());
        p.freed.forEachEntry([&](uint64_t ptr, const State::Freed& fr) { s.freed.put(ptr, fr); });
    }
    out_.freedForgotten = out_.freedForgotten || forgotten;
    s.lastSeq = std::max(s.lastSeq, p.lastSeq);
    s.inexact = !exact;
    return exact;
}

} // namespace poolscope
