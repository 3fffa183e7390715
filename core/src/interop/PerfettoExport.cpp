// Chrome / Perfetto JSON trace events from a Timeline (docs/INTEROP.md says what each part is
// and which facts of the format it relies on).
//
// Layout per input trace (one process, pid = the recorded pid):
//   per stream   "stream #N · calls": event records and waits as zero-length slices joined by
//                flows (v2: bind_id + flow_out / flow_in), stream synchronizes and failed
//                allocations as instants;
//                "stream #N · allocations" (+ rows 2, 3...): one X slice per allocation, from
//                its alloc to its free (or the trace's end while live). Perfetto requires the
//                slices of one track to nest; allocations overlap without nesting, so each
//                stream gets as many rows as it ever had live allocations at once, packed
//                greedily by start time, with no two slices of a row overlapping;
//                counter "stream #N live bytes";
//   per pool     counters "pool #N (kind) reserved" and "... used" (the Timeline's series:
//                exact at events, plus samples), and "pool #N (kind) · events": implicit
//                releases, trims, knob and attribute changes, create/destroy as instants;
//   per thread   NVTX push/pop ranges as B/E on the thread's own tid; start/end ranges as
//                async b/e.
// `merge` writes this one; `export` streams (PerfettoStream.cpp) and is tested against it.

#include "poolscope/interop/Export.h"

#include <algorithm>
#include <deque>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>

#include "PerfettoCommon.h"

namespace poolscope::interop {

namespace {

using namespace detail;

class ProcessExport : public ProcessBase {
public:
    ProcessExport(Writer& w, PerfettoStats& st, const ExportInput& in, const view::EntityNames& names,
                  uint32_t pid, int64_t base, uint64_t flowBase, IpcEnds ipcEnds, uint32_t tidBase)
        : ProcessBase(w, st, pid, base, flowBase, names, std::move(ipcEnds), tidBase), in_(in),
          tl_(*in.timeline), from_(in.clipFromNs), to_(in.clipUntilNs) {
        if (clipped() && to_ < tl_.t1) liveKey_ = ",\"live_after_range\":true";
    }

    void run() {
        processName(in_.process, in_.label);
        counters();
        allocations();
        calls();
        poolEvents();
        if (!clipped()) {
            ipc(in_.ipc);
            nvtx(in_.stacks.ranges, in_.threads, tl_.t1);
            return;
        }
        std::vector<Event> ipcInside;
        for (const Event& e : in_.ipc)
            if (inside(e.tsNs)) ipcInside.push_back(e);
        ipc(ipcInside);
        // Ranges that overlap, cut to the clip; those still open there end at its end.
        std::vector<NvtxRange> ranges;
        for (const NvtxRange& r : in_.stacks.ranges) {
            const int64_t end = r.endNs ? std::max(r.endNs, r.startNs) : INT64_MAX;
            if (r.startNs > to_ || end < from_) continue;
            NvtxRange c = r;
            c.startNs = std::max(r.startNs, from_);
            c.endNs = end > to_ ? 0 : end;
            ranges.push_back(std::move(c));
        }
        nvtx(ranges, in_.threads, to_);
    }

private:
    bool clipped() const { return from_ != INT64_MIN || to_ != INT64_MAX; }
    bool inside(int64_t t) const { return t >= from_ && t <= to_; }

    void counter(const std::string& name, const Series& s, uint32_t tid) {
        size_t i = 0;
        if (clipped()) {
            // The value in force at the clip's start, unless a point lies there.
            while (i < s.size() && s.t[i] < from_) ++i;
            if (i > 0 && (i == s.size() || s.t[i] != from_)) counterPoint(name, tid, from_, s.v[i - 1]);
        }
        for (; i < s.size() && s.t[i] <= to_; ++i) counterPoint(name, tid, s.t[i], s.v[i]);
    }

    void counters() {
        for (const PoolTimeline& p : tl_.pools) {
            if (p.reserved.empty() && p.used.empty()) continue;
            const std::string name = names_.pool(p.info.handle);
            const uint32_t tid = track(name + " · events").tid;
            counter(name + " reserved", p.reserved, tid);
            counter(name + " used", p.used, tid);
        }
        // A range's timeline counts on a stream only the blocks it holds, not those allocated
        // before the range and still live: those counters would be low by an unknown amount.
        if (tl_.isRange()) return;
        for (const StreamTimeline& s : tl_.streams) {
            if (s.liveBytes.empty()) continue;
            counter(names_.stream(s.info.handle) + " live bytes", s.liveBytes,
                    track(names_.stream(s.info.handle) + " · calls").tid);
        }
    }

    // The allocations drawn on each stream's rows: the timeline's and, for a range with
    // liveAtStart, its allocations from before it told by their alloc, and the blocks it never
    // sees freed, over all of it.
    void allocations() {
        std::unordered_map<uint64_t, const Allocation*> atStart; // ptr -> live before the range
        for (const Allocation& a : in_.liveAtStart) atStart.emplace(a.ptr, &a);
        std::deque<Allocation> told;                              // beforeLoaded, with their alloc
        std::map<uint64_t, std::vector<const Allocation*>> lists; // stream handle -> allocations
        std::vector<uint64_t> streams;                            // the timeline's order, then others
        for (const StreamTimeline& s : tl_.streams) {
            streams.push_back(s.info.handle);
            std::vector<const Allocation*>& list = lists[s.info.handle];
            for (uint32_t ai : s.allocations) {
                const Allocation& a = tl_.allocations[ai];
                auto it = a.beforeLoaded ? atStart.find(a.ptr) : atStart.end();
                if (it == atStart.end()) {
                    list.push_back(&a);
                    continue;
                }
                Allocation t = *it->second;
                t.freeTsNs = a.freeTsNs;
                t.freeSeq = a.freeSeq;
                t.freeStream = a.freeStream;
                t.freeSite = a.freeSite;
                told.push_back(t);
                list.push_back(&told.back());
                atStart.erase(it);
            }
        }
        // A pointer the range hands out again while such a block holds it lost its free (the
        // replay ends the block there, Fact::replacedLive): its slice ends there too.
        std::unordered_map<uint64_t, int64_t> reusedAt;
        if (!atStart.empty())
            for (const Allocation& a : tl_.allocations)
                if (!a.beforeLoaded && atStart.count(a.ptr)) {
                    auto [it, fresh] = reusedAt.emplace(a.ptr, a.allocTsNs);
                    if (!fresh) it->second = std::min(it->second, a.allocTsNs);
                }
        for (const Allocation& a : in_.liveAtStart) {
            if (!atStart.count(a.ptr)) continue; // (a live set holds a pointer once)
            const Allocation* drawn = &a;
            if (auto r = reusedAt.find(a.ptr); r != reusedAt.end()) {
                told.push_back(a);
                told.back().freeTsNs = r->second;
                told.back().freeStream = a.allocStream; // no free was recorded: none elsewhere
                drawn = &told.back();
            }
            if (!lists.count(a.allocStream)) streams.push_back(a.allocStream);
            lists[a.allocStream].push_back(drawn);
        }
        for (uint64_t stream : streams) {
            std::vector<const Allocation*>& order = lists[stream];
            if (order.empty()) continue;
            const std::string sname = names_.stream(stream);
            // Rows become free when their slice ends; the lowest free row is taken, so that
            // most allocations land on the first rows.
            using Busy = std::pair<int64_t, uint32_t>; // (end, row)
            std::priority_queue<Busy, std::vector<Busy>, std::greater<Busy>> busy;
            std::set<uint32_t> freeRows;
            std::vector<uint32_t> rowTid;
            // StreamTimeline::allocations is by alloc time; ties and clock skew are sorted here.
            std::stable_sort(order.begin(), order.end(), [&](const Allocation* x, const Allocation* y) {
                return x->allocTsNs < y->allocTsNs;
            });
            for (const Allocation* ap : order) {
                const Allocation& a = *ap;
                int64_t start = a.allocTsNs;
                int64_t end = a.live() ? std::max(tl_.t1, start) : a.freeTsNs;
                if (end < start) end = start; // a free stamped before its alloc (clock skew)
                if (clipped()) {
                    if (start > to_ || end < from_) continue;
                    start = std::max(start, from_);
                    end = std::min(end, to_);
                }
                while (!busy.empty() && busy.top().first <= start) {
                    freeRows.insert(busy.top().second);
                    busy.pop();
                }
                uint32_t row;
                if (!freeRows.empty()) {
                    row = *freeRows.begin();
                    freeRows.erase(freeRows.begin());
                } else {
                    row = static_cast<uint32_t>(rowTid.size());
                    rowTid.push_back(track(sname + " · allocations" +
                                           (row ? " (row " + std::to_string(row + 1) + ")" : ""))
                                         .tid);
                    ++st_.allocationRows;
                }
                busy.push({end, row});
                allocationSlice(a, in_.stacks, rowTid[row], start, end);
            }
        }
    }

    // A stream's calls track: records, waits, synchronizes and failed allocations, written in
    // time order. Kept as small records (what to write is built when it is written): a trace
    // has as many of them as event waits.
    enum class CallType : uint8_t { Record, Wait, Failed, Sync, PeerCopy };
    struct Call {
        int64_t ns = 0;
        uint64_t seq = 0;  // tie-break; records before waits at one instant
        uint64_t flow = 0; // records and waits: the flow id
        uint32_t index = 0; // into Timeline::edges, ::failed or ::markers
        CallType type = CallType::Sync;
    };

    void calls() {
        std::map<uint64_t, std::vector<Call>> perStream;
        // Edges: one record slice per (stream, event, record time), however many streams wait
        // on it; each wait slice ends a flow from it (v2 flows: a flow_in binds to the slice
        // it is written on and leaves the flow open for further waits).
        std::map<std::tuple<uint64_t, uint64_t, int64_t>, uint64_t> recordFlow;
        for (size_t i = 0; i < tl_.edges.size(); ++i) {
            const WaitEdge& e = tl_.edges[i];
            // A wait inside the clip keeps its record, wherever that lies: the flow has its start.
            if (!inside(e.waitTsNs)) continue;
            const auto key = std::make_tuple(e.fromStream, e.event, e.recordTsNs);
            auto it = recordFlow.find(key);
            if (it == recordFlow.end()) {
                it = recordFlow.emplace(key, flowBase_ + recordFlow.size() + 1).first;
                perStream[e.fromStream].push_back({e.recordTsNs, 0, it->second, uint32_t(i), CallType::Record});
            }
            perStream[e.toStream].push_back({e.waitTsNs, 1, it->second, uint32_t(i), CallType::Wait});
            ++st_.flows;
        }
        for (size_t i = 0; i < tl_.failed.size(); ++i)
            if (inside(tl_.failed[i].tsNs))
                perStream[tl_.failed[i].stream].push_back(
                    {tl_.failed[i].tsNs, tl_.failed[i].seq, 0, uint32_t(i), CallType::Failed});
        for (size_t i = 0; i < tl_.markers.size(); ++i) {
            const Marker& m = tl_.markers[i];
            if (!inside(m.tsNs)) continue;
            if (m.kind == EventKind::StreamSynchronize)
                perStream[m.stream].push_back({m.tsNs, m.seq, 0, uint32_t(i), CallType::Sync});
            else if (m.kind == EventKind::PeerCopy)
                perStream[m.stream].push_back({m.tsNs, m.seq, 0, uint32_t(i), CallType::PeerCopy});
            else if (m.kind == EventKind::EventSynchronize || m.kind == EventKind::ContextSynchronize)
                processInstant(m);
        }
        for (auto& [stream, list] : perStream) {
            std::stable_sort(list.begin(), list.end(), [](const Call& a, const Call& b) {
                return a.ns != b.ns ? a.ns < b.ns : a.seq < b.seq;
            });
            Track& t = track(names_.stream(stream) + " · calls");
            for (const Call& c : list) {
                const int64_t at = ordered(t, c.ns);
                switch (c.type) {
                case CallType::Record: recordSlice(t.tid, at, c.flow, tl_.edges[c.index]); break;
                case CallType::Wait: waitSlice(t.tid, at, c.flow, tl_.edges[c.index]); break;
                case CallType::Failed: failedInstant(t.tid, at, tl_.failed[c.index]); break;
                case CallType::Sync: syncInstant(t.tid, at, c.seq); break;
                case CallType::PeerCopy: peerCopyInstant(t.tid, at, tl_.markers[c.index]); break;
                }
            }
        }
    }

    void poolEvents() {
        std::map<uint64_t, std::vector<const Marker*>> perPool;
        for (const Marker& m : tl_.markers)
            if (isPoolMarker(m.kind) && inside(m.tsNs)) perPool[m.pool].push_back(&m);
        for (auto& [pool, list] : perPool) {
            Track& t = track(names_.pool(pool) + " · events");
            for (const Marker* m : list) poolMarker(t, *m);
        }
    }

    const ExportInput& in_;
    const Timeline& tl_;
    int64_t from_, to_;
};

} // namespace

Status writePerfettoJson(const std::vector<ExportInput>& inputs, std::FILE* out, PerfettoStats* stats) {
    PerfettoStats local;
    PerfettoStats& st = stats ? *stats : local;
    st = {};
    // One time base for all inputs: traces of one host share CLOCK_MONOTONIC, so processes
    // recorded together line up.
    if (Status s = checkInputCount(inputs.size()); !s) return s;
    int64_t base = INT64_MAX;
    std::vector<InputHead> heads;
    for (const ExportInput& in : inputs) {
        if (!in.timeline) return Error{ErrorCode::InvalidArgument, "export: an input has no timeline"};
        if (in.timeline->eventCount || in.timeline->sampleCount) base = std::min(base, in.timeline->t0);
        for (const NvtxRange& r : in.stacks.ranges) base = std::min(base, r.startNs);
        heads.push_back({in.label, &in.process, &in.ipc});
    }
    if (base == INT64_MAX) base = 0;
    return writeDocument(heads, base, out, st,
                         [&](size_t i, Writer& w, uint32_t pid, uint64_t flowBase, IpcEnds ends,
                             uint32_t tidBase) -> Result<uint64_t> {
                             const ExportInput& in = inputs[i];
                             const view::EntityNames names =
                                 in.names ? *in.names : view::EntityNames::fromTimeline(*in.timeline);
                             ProcessExport proc(w, st, in, names, pid, base, flowBase, std::move(ends), tidBase);
                             proc.run();
                             if (proc.tooManyTracks_) return tooManyTracks(in.label);
                             return uint64_t(in.timeline->edges.size() + in.stacks.ranges.size() + 1);
                         });
}

} // namespace poolscope::interop
