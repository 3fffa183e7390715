// The Perfetto export streamed over the replay (issue #15): TimelineBuilder::Impl::add's
// bookkeeping (core/src/Timeline.cpp) for what the export shows, each entry written once final.
// The rules it must reproduce, and how it keeps memory bounded by what is live:
// - counters are the Timeline's series: Series::push merges and overwrites the newest point,
//   and a sample's driver high watermark lowers the `used` points since the pool's previous
//   such sample. Points go through detail::StepTail (the streaming report's), which holds the
//   newest ones until the frontier, a horizon behind the newest timestamp, has passed them,
//   and caps them ahead with the next high watermark (samples are read before the events);
// - allocation rows: the Timeline-based export packs a stream's allocations greedily in
//   alloc-time order (stable in seq order); here they wait in a heap until the frontier passes
//   their start, then take the lowest row whose slice has ended. A slice is written once it has
//   both its row and its end (live ones at the end, with the trace's end);
// - flow ids follow the wait edges in wait-time order (the Timeline's stable sort), so the
//   edges wait in a heap too;
// - a failed allocation the runtime retries leaves the Timeline's `failed` (Fact::retry): it is
//   written once its thread allocates again without retrying it, or once the frontier is past
//   its retry window; a stream's calls (records, waits, failures, synchronizes) are written in
//   time order, as the Timeline-based export sorts them, that window behind the frontier;
// - track ids follow the Timeline-based export's first uses, which depend on the whole trace
//   (rows per stream, which streams and pools have entries): a first pass finds them, and the
//   few records a wait names long after them (written at the record in the second pass);
// - names (EntityNames) depend on the whole trace too: the first pass keeps what the streaming
//   report's pass keeps for them (ReportReducer), so that no third read is needed.
// An event more than the horizon out of time order is counted (PerfettoStats::outOfOrderEvents).
#include <algorithm>
#include <deque>
#include <limits>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include "../ChunkPipe.h"
#include "../MostlySorted.h"
#include "../analysis/LaneNames.h"
#include "../analysis/ReportReducer.h"
#include "../analysis/StepTail.h"
#include "../replay/TraceEntities.h"
#include "PerfettoCommon.h"
#include "poolscope/EventFields.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/replay/Replay.h"

namespace poolscope::interop {

namespace {

using namespace detail;
using poolscope::detail::MostlySorted;
using poolscope::detail::StepTail;

// What the first pass finds.
struct Plan {
    bool anyTime = false;
    int64_t t0 = 0, t1 = 0;
    uint64_t edges = 0;
    std::vector<std::string> tracks; // in the Timeline-based export's order of first use
    // Records first waited on after the calls merge had passed their time, with their flow ids:
    // the second pass writes them at the record itself, so that their track stays in time order.
    // Only records waited on more than the horizon later are here.
    std::map<std::tuple<uint64_t, uint64_t, int64_t>, uint64_t> lateRecords;
    view::EntityNames names; // found when the input had none
};

const view::EntityNames kNoNames; // the first pass names nothing until its end


class StreamExport : public ProcessBase {
public:
    // Horizon and held-items bound as the streaming report's (ReportReducer).
    static constexpr int64_t kHorizonNs = 1'000'000'000;
    static constexpr size_t kMaxHeld = size_t{1} << 18;

    // plan: the first pass's result when writing; nullptr for the first pass itself.
    StreamExport(Writer& w, PerfettoStats& st, const StreamInput& in, const view::EntityNames& names,
                 uint32_t pid, int64_t base, uint64_t flowBase, IpcEnds ends, uint32_t tidBase,
                 const Plan* plan)
        : ProcessBase(w, st, pid, base, flowBase, names, std::move(ends), tidBase), in_(in),
          plan_(plan), write_(plan != nullptr), findNames_(!plan && !in.names) {}

    Status run(Plan* out);

private:
    struct Pool {
        StepTail reserved, used;
        bool any = false;
        std::string reservedName, usedName;
        uint32_t tid = 0;
    };
    struct Rec {
        Allocation a;
        uint64_t order = 0; // of its alloc among the allocations (ties in start time)
        uint32_t lane = 0;
        uint32_t row = 0;
        bool placed = false, ended = false;
        bool live = false;  // live at the end: its slice ends at the trace's end
        bool inUse = false; // its slot in recs_ holds it
    };
    // An allocation waiting for its row, by (start, order).
    struct Waiting {
        int64_t start;
        uint64_t order;
        uint32_t rec;
        bool operator>(const Waiting& o) const { return start != o.start ? start > o.start : order > o.order; }
    };
    // A replay tag's allocation: its slot in recs_ and its order (the slot may hold a later one).
    struct TagRec {
        uint32_t rec;
        uint64_t order;
    };
    struct Lane { // a stream
        StepTail live;
        bool anyLive = false, calls = false;
        std::string liveName;
        uint32_t liveTid = 0;
        // Allocations not placed yet, earliest first.
        MostlySorted<Waiting> waiting;
        // Rows whose slice has ended, by (end, row); a row whose allocation has not ended is
        // in openRows instead. Both heaps hand out the least first, as sets would.
        MostlySorted<std::pair<int64_t, uint32_t>> busy;
        std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>> freeRows;
        std::unordered_map<uint32_t, uint32_t> openRows; // row -> its allocation (recs_ slot), not ended yet
        uint32_t rows = 0;
        std::vector<uint32_t> rowTid;
        int64_t lastPlaced = INT64_MIN;
    };
    struct HeldEdge {
        int64_t waitTs;
        uint64_t order;
        WaitEdge e;
        bool operator>(const HeldEdge& o) const {
            return waitTs != o.waitTs ? waitTs > o.waitTs : order > o.order;
        }
    };

    // A track the first pass named (a trace read differently the second time: none, flagged).
    uint32_t tidOf(const std::string& name) {
        auto it = tracks_.find(name);
        if (it != tracks_.end()) return it->second.tid;
        tooManyTracks_ = true;
        return 0;
    }
    void mirror();
    void poolSeries(uint32_t pool);
    void push(StepTail& s, int64_t ts, uint64_t v) { late_ = !s.push(ts, v, done_) || late_; }
    void watermarks(uint32_t pool, int64_t ts, uint64_t reserved, uint64_t used, bool reservedOnly);
    void driverHighs(uint32_t pool, const Event& e);
    void add(const Event& e);
    void alloc(const Event& e, const replay::Fact& f, uint32_t tag);
    void failures(const Event& e, const replay::Fact& f);
    void failed(const FailedAllocation& f);
    void close(const replay::Block& b, int64_t ts, uint64_t seq, uint64_t freeStream, uint32_t site);
    void orphan(const Event& e);
    void marker(const Event& e);
    void place(Lane& lane, uint32_t rec);
    uint32_t newRec();
    void dropRec(uint32_t rec) {
        recs_[rec].inUse = false;
        freeRecs_.push_back(rec);
    }
    void slice(Rec& r, int64_t end);
    void releaseEdge(const WaitEdge& e);
    // A stream's calls track is written in time order (the Timeline-based export sorts it by
    // time, then seq), a retry window behind the frontier: a failure may still be retracted
    // until then (Replay: a retry comes within kRetryWindowNs).
    enum class CallType : uint8_t { Record, Wait, Failed, Sync, PeerCopy };
    struct Call {
        int64_t ns;
        uint64_t seq;   // records 0, waits 1 (their order in the Timeline-based export)
        uint64_t order; // ties: the order they were found in
        CallType type;
        uint64_t stream; // the track's
        uint64_t flow;
        WaitEdge edge;
        FailedAllocation failed;
        Marker marker;
        bool operator>(const Call& o) const {
            if (ns != o.ns) return ns > o.ns;
            if (seq != o.seq) return seq > o.seq;
            return order > o.order;
        }
    };
    void call(Call c);
    void writeCall(const Call& c);
    void advance(bool all);
    void finish();
    std::string callsOf(uint64_t stream) const { return names_.stream(stream) + " · calls"; }

    const StreamInput& in_;
    const Plan* plan_;
    bool write_;
    // What the names depend on (first pass, when the input has none).
    bool findNames_;
    std::vector<DeviceInfo> devices_;
    poolscope::detail::LaneNameKeeper nameKeeper_;
    replay::Replay replay_;
    std::vector<Pool> pools_;
    std::vector<Lane> lanes_;
    std::unordered_map<uint64_t, std::vector<uint64_t>> highCaps_; // pool -> coming UsedMemHighs
    std::unordered_map<uint64_t, size_t> highNext_;
    // Allocations not written yet, in slots reused once written.
    std::vector<Rec> recs_;
    std::vector<uint32_t> freeRecs_;
    uint64_t nextOrder_ = 0;
    std::vector<TagRec> slots_; // replay tag -> its allocation
    std::vector<uint32_t> freeSlots_;
    std::unordered_map<uint32_t, FailedAllocation> pendingByTid_;
    MostlySorted<HeldEdge> edges_;
    uint64_t edgeOrder_ = 0;
    // Record flows by (stream, event): the latest few record times and their flow ids.
    std::map<std::pair<uint64_t, uint64_t>, std::deque<std::pair<int64_t, uint64_t>>> recordFlow_;
    uint64_t flows_ = 0;
    std::set<uint64_t> callStreams_, markerPools_;
    // Calls held for their turn: the heap holds their keys, the calls wait in slots (a call is
    // ~180 bytes: the heap's moves stay small).
    struct CallKey {
        int64_t ns;
        uint64_t seq, order;
        uint32_t slot;
        bool operator>(const CallKey& o) const {
            if (ns != o.ns) return ns > o.ns;
            if (seq != o.seq) return seq > o.seq;
            return order > o.order;
        }
    };
    MostlySorted<CallKey> calls_;
    std::vector<Call> callSlots_;
    std::vector<uint32_t> freeCallSlots_;
    uint64_t callOrder_ = 0;
    int64_t callsDone_ = INT64_MIN;
    std::map<std::tuple<uint64_t, uint64_t, int64_t>, uint64_t> lateRecords_; // the plan's (second pass)
    std::map<std::tuple<uint64_t, uint64_t, int64_t>, uint64_t> lateFound_;   // the first pass's
    bool anyTime_ = false;
    int64_t t0_ = 0, t1_ = 0, newest_ = INT64_MIN;
    uint64_t edgeCount_ = 0;
    int64_t horizon_ = kHorizonNs;
    int64_t done_ = INT64_MIN;
    bool late_ = false;
    uint64_t lateEvents_ = 0;
};

void StreamExport::mirror() {
    while (pools_.size() < replay_.pools().size()) {
        pools_.emplace_back();
        poolSeries(static_cast<uint32_t>(pools_.size() - 1));
    }
    while (lanes_.size() < replay_.streams().size()) lanes_.emplace_back();
}

// The cap the next high watermark of the pool will put on its `used` points.
void StreamExport::poolSeries(uint32_t pool) {
    auto it = highCaps_.find(replay_.pools()[pool].info.handle);
    std::optional<uint64_t> cap;
    if (it != highCaps_.end()) {
        const size_t next = highNext_[it->first];
        if (next < it->second.size()) cap = it->second[next];
    }
    pools_[pool].used.setCapAhead(cap);
}

void StreamExport::watermarks(uint32_t pool, int64_t ts, uint64_t reserved, uint64_t used, bool reservedOnly) {
    Pool& p = pools_[pool];
    p.any = true;
    push(p.reserved, ts, reserved);
    if (!reservedOnly) push(p.used, ts, used);
}

void StreamExport::driverHighs(uint32_t pool, const Event& e) {
    const SampleFields h = SampleFields::of(e);
    if (h.reservedHigh == 0 && h.usedHigh == 0) return;
    ++highNext_[replay_.pools()[pool].info.handle];
    uint64_t peak = 0;
    int64_t peakTs = 0;
    pools_[pool].used.capSinceHigh(h.usedHigh, peak, peakTs);
    poolSeries(pool); // the next sample's cap, for the points from here on
}

void StreamExport::failed(const FailedAllocation& f) {
    Call c{f.tsNs, f.seq, 0, CallType::Failed, f.stream, 0, {}, f, {}};
    call(c);
}

// A thread's failure with 201 may turn out the runtime's own retry until that thread
// allocates again (TimelineBuilder::Impl::retried; ReportReducer::failures).
void StreamExport::failures(const Event& e, const replay::Fact& f) {
    if (auto it = pendingByTid_.find(e.tid); it != pendingByTid_.end()) {
        const FailedAllocation pf = it->second;
        pendingByTid_.erase(it);
        if (!(f.retry && f.retriedSeq == pf.seq)) failed(pf);
    } else if (f.retry) {
        late_ = true; // a retry of a failure written already: it came beyond the horizon
    }
    if (!f.failedAlloc) return;
    const FailedAllocation fa{e.tsNs, e.seq, AllocFields::of(e).bytes, e.stream, e.pool, e.result};
    if (e.result == replay::kInvalidContext)
        pendingByTid_[e.tid] = fa;
    else
        failed(fa);
}

void StreamExport::alloc(const Event& e, const replay::Fact& f, uint32_t tag) {
    failures(e, f);
    if (f.failedAlloc) return;
    const replay::Block& b = f.block;
    const uint32_t id = newRec();
    Rec& r = recs_[id];
    r.order = nextOrder_++;
    r.a.ptr = b.ptr;
    r.a.size = b.bytes;
    r.a.pool = e.pool;
    r.a.allocStream = e.stream;
    r.a.allocTsNs = e.tsNs;
    r.a.allocSeq = e.seq;
    r.a.tid = e.tid;
    r.a.device = e.device;
    r.a.api = static_cast<uint8_t>(AllocFields::of(e).api);
    r.a.site = e.site;
    r.lane = f.stream;
    if (b.ptr == 0) { // a zero-byte request: nothing to free later
        r.a.freeTsNs = e.tsNs;
        r.ended = true;
    } else {
        if (tag == slots_.size())
            slots_.push_back({id, r.order});
        else
            slots_[tag] = {id, r.order}, freeSlots_.pop_back();
    }
    Lane& lane = lanes_[f.stream];
    lane.waiting.push({e.tsNs, r.order, id});
    if (e.tsNs < done_) late_ = true;
    // An imported mapping the pointer replaces has no allocation record (like its free).
    if (f.replacedLive && !f.closed.imported) close(f.closed, e.tsNs, 0, 0, 0);
    if (b.ptr == 0) return;
    lane.anyLive = true;
    push(lane.live, e.tsNs, replay_.streams()[f.stream].liveBytes);
}

void StreamExport::close(const replay::Block& b, int64_t ts, uint64_t seq, uint64_t freeStream, uint32_t site) {
    if (b.tag >= slots_.size() || b.stream >= lanes_.size()) return; // no allocation of ours
    const TagRec t = slots_[b.tag];
    freeSlots_.push_back(b.tag);
    Lane& lane = lanes_[b.stream];
    lane.anyLive = true;
    if (!recs_[t.rec].inUse || recs_[t.rec].order != t.order) return;
    Rec& r = recs_[t.rec];
    r.a.freeTsNs = std::max(ts, r.a.allocTsNs);
    r.a.freeSeq = seq;
    r.a.freeStream = freeStream;
    r.a.freeSite = site;
    r.ended = true;
    push(lane.live, r.a.freeTsNs, replay_.streams()[b.stream].liveBytes);
    if (!r.placed) return;
    // A row is free again at the end of its slice; an allocation placed since, which started
    // at or after that end, would have taken it.
    if (r.a.freeTsNs <= lane.lastPlaced) late_ = true;
    lane.busy.push({r.a.freeTsNs, r.row});
    lane.openRows.erase(r.row);
    slice(r, r.a.freeTsNs);
    dropRec(t.rec);
}

// A pointer import that replaces a live block of this trace: the replay drops the block, the
// Timeline never ends its allocation, so it stays live to the end.
void StreamExport::orphan(const Event& e) {
    const uint64_t ptr = SharedPointerFields::of(e).ptr;
    if (e.failed() || ptr == 0) return;
    const replay::Block* b = replay_.liveBlock(ptr);
    if (!b || b->imported) return;
    freeSlots_.push_back(b->tag);
}

void StreamExport::marker(const Event& e) {
    Marker m{e.tsNs, e.seq, e.kind, 0, 0, e.pool, 0};
    switch (e.kind) {
    case EventKind::PoolCreate: m.value = PoolCreateFields::of(e).maxSize; break;
    case EventKind::PoolSetAttribute:
        m.attr = static_cast<uint16_t>(AttributeFields::of(e).attr);
        m.value = AttributeFields::of(e).value;
        break;
    case EventKind::KnobChange:
        m.attr = KnobFields::of(e).target;
        m.value = KnobFields::of(e).value;
        break;
    case EventKind::PoolTrimTo: m.value = TrimFields::of(e).minBytesToKeep; break;
    case EventKind::ImplicitRelease: m.value = ReleaseFields::of(e).reservedAfter; break;
    case EventKind::PoolSetAccess:
        m.attr = static_cast<uint16_t>(SetAccessFields::of(e).accessFlags);
        m.value = SetAccessFields::of(e).locationType <= 1 && e.device >= 0
                      ? static_cast<uint64_t>(e.device) + 1 : 0;
        break;
    default: break;
    }
    markerPools_.insert(e.pool);
    if (write_) poolMarker(track(names_.pool(e.pool) + " · events"), m);
}

void StreamExport::add(const Event& e) {
    if (!anyTime_) {
        t0_ = t1_ = e.tsNs;
        anyTime_ = true;
    } else {
        t0_ = std::min(t0_, e.tsNs);
        t1_ = std::max(t1_, e.tsNs);
    }
    newest_ = std::max(newest_, e.tsNs);
    late_ = false;
    if (e.kind == EventKind::PointerImport) [[unlikely]]
        orphan(e);
    const uint32_t tag = freeSlots_.empty() ? static_cast<uint32_t>(slots_.size()) : freeSlots_.back();
    const replay::Fact& f = replay_.apply(e, tag);
    if (f.newPool || f.newStream) [[unlikely]]
        mirror();
    if (findNames_) nameKeeper_.add(replay_, e, f);
    if (e.kind == EventKind::Sample) {
        watermarks(f.pool, e.tsNs, e.reserved, e.used, false);
        driverHighs(f.pool, e);
        lateEvents_ += late_;
        return;
    }
    if (f.watermarks) {
        const replay::PoolState& ps = replay_.pools()[f.pool];
        watermarks(f.pool, e.tsNs, ps.reserved, ps.used, false);
    } else if (f.reservedOnly) {
        watermarks(f.pool, e.tsNs, replay_.pools()[f.pool].reserved, 0, true);
    }
    switch (e.kind) {
    case EventKind::Alloc: alloc(e, f, tag); break;
    case EventKind::Free:
        if (f.freed && !f.block.imported && !f.unmatchedFree) close(f.block, e.tsNs, e.seq, e.stream, e.site);
        break;
    case EventKind::DeviceFree:
        if (f.freed && !f.block.imported) close(f.block, e.tsNs, e.seq, 0, e.site); // cudaFree of a pool block
        break;
    case EventKind::StreamWaitEvent:
        if (f.edge) {
            edgeCount_++;
            const WaitEdge w{CuEventFields::of(e).event, replay_.streams()[f.edgeFrom].info.handle, e.stream,
                             f.edgeRecordTsNs, e.tsNs};
            if (e.tsNs < done_) late_ = true;
            edges_.push(HeldEdge{e.tsNs, edgeOrder_++, w});
        }
        break;
    case EventKind::EventRecord:
        if (!lateRecords_.empty() && f.stream != replay::kNone) {
            WaitEdge w;
            w.event = CuEventFields::of(e).event;
            w.fromStream = replay_.streams()[f.stream].info.handle;
            w.recordTsNs = e.tsNs;
            if (auto it = lateRecords_.find({w.fromStream, w.event, e.tsNs}); it != lateRecords_.end())
                call(Call{e.tsNs, 0, 0, CallType::Record, w.fromStream, it->second, w, {}, {}});
        }
        break;
    case EventKind::StreamSynchronize:
        call(Call{e.tsNs, e.seq, 0, CallType::Sync, e.stream, 0, {}, {}, {}});
        break;
    case EventKind::PeerCopy:
        call(Call{e.tsNs, e.seq, 0, CallType::PeerCopy, e.stream, 0, {}, {},
                  Marker{e.tsNs, e.seq, e.kind, e.attr, e.stream, 0, PeerCopyFields::of(e).bytes}});
        break;
    case EventKind::EventSynchronize:
    case EventKind::ContextSynchronize:
        if (write_) processInstant(Marker{e.tsNs, e.seq, e.kind, 0, 0, 0, 0});
        break;
    default:
        if (isPoolMarker(e.kind)) marker(e);
        break;
    }
    lateEvents_ += late_;
}

void StreamExport::slice(Rec& r, int64_t end) {
    if (!write_) return;
    Lane& lane = lanes_[r.lane];
    allocationSlice(r.a, in_.stacks, lane.rowTid[r.row], r.a.allocTsNs, std::max(end, r.a.allocTsNs));
}

// The Timeline-based export's greedy packing, for the next allocation in start order.
uint32_t StreamExport::newRec() {
    uint32_t i;
    if (!freeRecs_.empty()) {
        i = freeRecs_.back();
        freeRecs_.pop_back();
        recs_[i] = Rec{};
    } else {
        i = static_cast<uint32_t>(recs_.size());
        recs_.emplace_back();
    }
    recs_[i].inUse = true;
    return i;
}

void StreamExport::place(Lane& lane, uint32_t id) {
    Rec& r = recs_[id];
    const int64_t start = r.a.allocTsNs;
    while (!lane.busy.empty() && lane.busy.top().first <= start) {
        lane.freeRows.push(lane.busy.top().second);
        lane.busy.pop();
    }
    if (!lane.freeRows.empty()) {
        r.row = lane.freeRows.top();
        lane.freeRows.pop();
    } else {
        r.row = lane.rows++;
        if (write_) {
            const std::string sname = names_.stream(replay_.streams()[r.lane].info.handle);
            lane.rowTid.push_back(
                tidOf(sname + " · allocations" + (r.row ? " (row " + std::to_string(r.row + 1) + ")" : "")));
            ++st_.allocationRows;
        }
    }
    r.placed = true;
    lane.lastPlaced = std::max(lane.lastPlaced, start);
    if (!r.ended) {
        lane.openRows[r.row] = id;
        return;
    }
    const int64_t end = std::max(r.live ? t1_ : r.a.freeTsNs, start);
    lane.busy.push({end, r.row});
    slice(r, end);
    dropRec(id);
}

void StreamExport::releaseEdge(const WaitEdge& e) {
    auto& recent = recordFlow_[{e.fromStream, e.event}];
    uint64_t flow = 0;
    for (const auto& [ts, id] : recent)
        if (ts == e.recordTsNs) flow = id;
    if (!flow) {
        flow = flowBase_ + ++flows_;
        // Waits name the event's latest record: a few older ones cover waits reordered by time.
        recent.push_back({e.recordTsNs, flow});
        if (recent.size() > 4) recent.pop_front();
        const auto key = std::make_tuple(e.fromStream, e.event, e.recordTsNs);
        if (!write_ && e.recordTsNs < callsDone_) {
            lateFound_.emplace(key, flow);
            callStreams_.insert(e.fromStream);
        } else if (!lateRecords_.count(key)) {
            call(Call{e.recordTsNs, 0, 0, CallType::Record, e.fromStream, flow, e, {}, {}});
        }
    }
    call(Call{e.waitTsNs, 1, 0, CallType::Wait, e.toStream, flow, e, {}, {}});
}

void StreamExport::call(Call c) {
    callStreams_.insert(c.stream);
    if (c.ns < callsDone_) late_ = true;
    c.order = callOrder_++;
    uint32_t slot;
    if (!freeCallSlots_.empty()) {
        slot = freeCallSlots_.back();
        freeCallSlots_.pop_back();
        callSlots_[slot] = std::move(c);
    } else {
        slot = static_cast<uint32_t>(callSlots_.size());
        callSlots_.push_back(std::move(c));
    }
    const Call& held = callSlots_[slot];
    calls_.push(CallKey{held.ns, held.seq, held.order, slot});
}

void StreamExport::writeCall(const Call& c) {
    if (!write_) return;
    const uint32_t tid = tidOf(callsOf(c.stream));
    switch (c.type) {
    case CallType::Record: recordSlice(tid, c.ns, c.flow, c.edge); break;
    case CallType::Wait:
        waitSlice(tid, c.ns, c.flow, c.edge);
        ++st_.flows;
        break;
    case CallType::Failed: failedInstant(tid, c.ns, c.failed); break;
    case CallType::Sync: syncInstant(tid, c.ns, c.seq); break;
    case CallType::PeerCopy: peerCopyInstant(tid, c.ns, c.marker); break;
    }
}

// Hands out what the frontier has passed (everything when all).
void StreamExport::advance(bool all) {
    const int64_t frontier = all ? INT64_MAX : std::max(done_, newest_ - horizon_);
    size_t held = edges_.size();
    for (uint32_t i = 0; i < pools_.size(); ++i) {
        Pool& p = pools_[i];
        if (!p.any) continue;
        if (write_ && p.reservedName.empty()) {
            const std::string name = names_.pool(replay_.pools()[i].info.handle);
            p.reservedName = name + " reserved";
            p.usedName = name + " used";
            p.tid = tidOf(name + " · events");
        }
        p.reserved.emitBefore(frontier, all, [&](int64_t t, uint64_t v) {
            if (write_) counterPoint(p.reservedName, p.tid, t, v);
        });
        p.used.emitBefore(frontier, all, [&](int64_t t, uint64_t v) {
            if (write_) counterPoint(p.usedName, p.tid, t, v);
        });
        held += p.reserved.buffered() + p.used.buffered();
    }
    for (uint32_t i = 0; i < lanes_.size(); ++i) {
        Lane& lane = lanes_[i];
        if (write_ && lane.anyLive && lane.liveName.empty()) {
            const std::string name = names_.stream(replay_.streams()[i].info.handle);
            lane.liveName = name + " live bytes";
            lane.liveTid = tidOf(name + " · calls");
        }
        lane.live.emitBefore(frontier, all, [&](int64_t t, uint64_t v) {
            if (write_) counterPoint(lane.liveName, lane.liveTid, t, v);
        });
        while (!lane.waiting.empty() && (all || lane.waiting.top().start < frontier)) {
            const uint32_t id = lane.waiting.top().rec;
            lane.waiting.pop();
            place(lane, id);
        }
        held += lane.live.buffered() + lane.waiting.size();
    }
    while (!edges_.empty() && (all || edges_.top().waitTs < frontier)) {
        releaseEdge(edges_.top().e);
        edges_.pop();
    }
    // Failures no retry can reach any more: their thread's next allocation is later than the
    // frontier, past the retry window.
    for (auto it = pendingByTid_.begin(); it != pendingByTid_.end();) {
        if (all || it->second.tsNs + replay::kRetryWindowNs < frontier) {
            const FailedAllocation f = it->second;
            it = pendingByTid_.erase(it);
            failed(f);
        } else {
            ++it;
        }
    }
    const int64_t callsFrontier = all ? INT64_MAX : std::max(callsDone_, frontier - replay::kRetryWindowNs);
    while (!calls_.empty() && (all || calls_.top().ns < callsFrontier)) {
        const uint32_t slot = calls_.top().slot;
        calls_.pop();
        writeCall(callSlots_[slot]);
        freeCallSlots_.push_back(slot);
    }
    callsDone_ = callsFrontier;
    done_ = frontier;
    // A trace dense in time holds too much for a second: the horizon halves, down to 1 ms.
    if (held > kMaxHeld && horizon_ > 1'000'000) horizon_ /= 2;
}

void StreamExport::finish() {
    // Allocations live at the end last to the trace's end, as rows and as slices.
    for (Rec& r : recs_)
        if (r.inUse && !r.ended) r.ended = r.live = true;
    for (Lane& lane : lanes_) {
        for (const auto& [row, id] : lane.openRows) {
            Rec& r = recs_[id];
            const int64_t end = std::max(t1_, r.a.allocTsNs);
            lane.busy.push({end, row});
            slice(r, end);
            dropRec(id);
        }
        lane.openRows.clear();
    }
    advance(true);
}

// The tracks in the Timeline-based export's order of first use: pools' counters (pools by
// device and handle), streams' live bytes, each stream's allocation rows, then the calls tracks
// and the pool events tracks not named yet (by handle). The IPC tracks come last, in ipc().
std::vector<std::string> trackOrder(const replay::Replay& replay, const std::vector<bool>& poolAny,
                                    const std::vector<bool>& liveAny, const std::vector<uint32_t>& rows,
                                    const std::set<uint64_t>& callStreams, const std::set<uint64_t>& markerPools,
                                    const view::EntityNames& names) {
    const poolscope::detail::EntityOrder order = poolscope::detail::entityOrder(replay);
    const std::vector<uint32_t>& pools = order.pools;
    const std::vector<uint32_t>& streams = order.streams;
    std::vector<std::string> out;
    std::set<std::string> seen;
    auto use = [&](const std::string& n) {
        if (seen.insert(n).second) out.push_back(n);
    };
    for (uint32_t i : pools)
        if (poolAny[i]) use(names.pool(replay.pools()[i].info.handle) + " · events");
    for (uint32_t i : streams)
        if (liveAny[i]) use(names.stream(replay.streams()[i].info.handle) + " · calls");
    for (uint32_t i : streams) {
        const std::string sname = names.stream(replay.streams()[i].info.handle);
        for (uint32_t row = 0; row < rows[i]; ++row)
            use(sname + " · allocations" + (row ? " (row " + std::to_string(row + 1) + ")" : ""));
    }
    for (uint64_t h : callStreams) use(names.stream(h) + " · calls");
    for (uint64_t h : markerPools) use(names.pool(h) + " · events");
    return out;
}

Status StreamExport::run(Plan* out) {
    const TraceReader& reader = *in_.reader;
    auto devices = poolscope::detail::declareTraceEntities(reader, replay_, true);
    if (!devices) return devices.error();
    if (findNames_) devices_ = std::move(*devices);
    // Samples are few (periodic) and read whole, as buildTimeline does: merged in by time, and
    // their high watermarks known ahead.
    auto samples = reader.samples(0, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    if (!samples) return samples.error();
    const std::vector<Event>& ss = *samples;
    for (const Event& s : ss) {
        Event e = s;
        e.kind = EventKind::Sample; // every row is applied as a sample, whatever its kind says
        const SampleFields h = SampleFields::of(e);
        if (h.reservedHigh != 0 || h.usedHigh != 0) highCaps_[e.pool].push_back(h.usedHigh);
    }
    mirror();
    for (uint32_t i = 0; i < pools_.size(); ++i) poolSeries(i);

    if (write_) {
        processName(in_.process, in_.label);
        for (const std::string& name : plan_->tracks) track(name);
        t1_ = plan_->t1; // live slices are written before the end is reached again
        lateRecords_ = plan_->lateRecords;
    }
    auto addSample = [&](Event s) {
        s.kind = EventKind::Sample;
        add(s);
    };
    size_t si = 0;
    auto consume = [&](const std::vector<Event>& chunk) {
        for (const Event& e : chunk) {
            while (si < ss.size() && ss[si].tsNs <= e.tsNs) addSample(ss[si++]);
            add(e);
        }
        advance(false);
        return true;
    };
    const Status st = poolscope::detail::forEachChunk(reader, BuildOptions::defaultReadAhead(), consume);
    if (!st) return st.error();
    while (si < ss.size()) addSample(ss[si++]);
    if (write_) t1_ = std::max(t1_, plan_->t1);
    finish();
    if (write_) {
        ipc(in_.ipc);
        nvtx(in_.stacks.ranges, in_.threads, t1_);
        st_.outOfOrderEvents += lateEvents_;
        return {};
    }
    out->anyTime = anyTime_;
    out->t0 = t0_;
    out->t1 = t1_;
    out->edges = edgeCount_;
    out->lateRecords = std::move(lateFound_);
    std::vector<bool> poolAny, liveAny;
    std::vector<uint32_t> rows;
    for (const Pool& p : pools_) poolAny.push_back(p.any);
    for (const Lane& l : lanes_) liveAny.push_back(l.anyLive), rows.push_back(l.rows);
    if (findNames_) out->names = nameKeeper_.names(replay_, devices_);
    out->tracks = trackOrder(replay_, poolAny, liveAny, rows, callStreams_, markerPools_,
                             in_.names ? *in_.names : out->names);
    return {};
}

} // namespace

Status writePerfettoJsonStreaming(const std::vector<StreamInput>& inputs, std::FILE* out, PerfettoStats* stats) {
    PerfettoStats local;
    PerfettoStats& st = stats ? *stats : local;
    st = {};
    if (Status s = checkInputCount(inputs.size()); !s) return s;
    // The first pass over every input: the time base is the earliest of all.
    std::vector<Plan> plans(inputs.size());
    int64_t base = INT64_MAX;
    std::vector<InputHead> heads;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const StreamInput& in = inputs[i];
        if (!in.reader) return Error{ErrorCode::InvalidArgument, "export: an input has no trace"};
        Writer none(nullptr);
        PerfettoStats unused;
        StreamExport first(none, unused, in, kNoNames, 0, 0, 0, {}, 0, nullptr);
        if (Status s = first.run(&plans[i]); !s) return s;
        if (plans[i].anyTime) base = std::min(base, plans[i].t0);
        for (const NvtxRange& r : in.stacks.ranges) base = std::min(base, r.startNs);
        heads.push_back({in.label, &in.process, &in.ipc});
    }
    if (base == INT64_MAX) base = 0;
    return writeDocument(heads, base, out, st,
                         [&](size_t i, Writer& w, uint32_t pid, uint64_t flowBase, IpcEnds ends,
                             uint32_t tidBase) -> Result<uint64_t> {
                             const StreamInput& in = inputs[i];
                             StreamExport second(w, st, in, in.names ? *in.names : plans[i].names, pid, base,
                                                 flowBase, std::move(ends), tidBase, &plans[i]);
                             if (Status s = second.run(nullptr); !s) return s.error();
                             if (second.tooManyTracks_) return tooManyTracks(in.label);
                             return uint64_t(plans[i].edges + in.stacks.ranges.size() + 1);
                         });
}

} // namespace poolscope::interop
