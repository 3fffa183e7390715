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
// Synthetic tracks use tids from 1,000,000,000 up (a million per process): above any Linux
// thread id (pid_max is at most 2^22), below 2^31 (Perfetto reads pid/tid as 32-bit).

#include "poolscope/interop/Export.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "poolscope/EventFields.h"
#include "poolscope/EventText.h"
#include "poolscope/JsonText.h"
#include "poolscope/Units.h"
#include "poolscope/analysis/CallSites.h"
#include "poolscope/interop/ProcessTree.h"
#include "poolscope/view/EntityNames.h"

namespace poolscope::interop {

namespace {

constexpr uint32_t kFirstSyntheticTid = 1'000'000'000;
constexpr uint32_t kTidsPerProcess = 1'000'000;
constexpr size_t kMaxProcesses = 1000; // 1e9 + 1000 x 1e6 stays below 2^31

std::string quoted(const std::string& s) { return dumpJson(nlohmann::json(s)); }

// Microseconds with three decimals, from integer nanoseconds: no rounding through a double.
std::string micros(int64_t ns) {
    char buf[40];
    const bool neg = ns < 0;
    const uint64_t a = neg ? uint64_t(0) - uint64_t(ns) : uint64_t(ns);
    std::snprintf(buf, sizeof buf, "%s%" PRIu64 ".%03" PRIu64, neg ? "-" : "", a / 1000, a % 1000);
    return buf;
}

std::string hex(uint64_t v) { return view::EntityNames::hexHandle(v); }

std::string attrValueText(uint16_t attr, uint64_t v) {
    if (attr == static_cast<uint16_t>(PoolAttr::ReleaseThreshold) ||
        attr >= static_cast<uint16_t>(PoolAttr::ReservedMemCurrent))
        return v == UINT64_MAX ? std::string("max") : formatBytes(v);
    if (attr < 1000) return v ? "on" : "off";
    return formatBytes(v);
}

class Writer {
public:
    explicit Writer(std::FILE* f) : f_(f) { buf_.reserve(1 << 20); }
    // One traceEvents entry (the object's text without braces).
    void event(const std::string& body) {
        buf_ += first_ ? "\n{" : ",\n{";
        first_ = false;
        buf_ += body;
        buf_ += '}';
        ++events_;
        if (buf_.size() > (1u << 20)) flush();
    }
    void raw(const std::string& s) {
        buf_ += s;
        if (buf_.size() > (1u << 20)) flush();
    }
    void flush() {
        if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size()) failed_ = true;
        buf_.clear();
    }
    bool failed() const { return failed_ || std::ferror(f_); }
    uint64_t events() const { return events_; }

private:
    std::FILE* f_;
    std::string buf_;
    bool first_ = true;
    bool failed_ = false;
    uint64_t events_ = 0;
};

struct Track {
    uint32_t tid = 0;
    int64_t lastNs = INT64_MIN;
};

class ProcessExport {
public:
    // IPC flow ends of this input: (event seq) -> (flow id, true for the export end).
    using IpcEnds = std::map<uint64_t, std::vector<std::pair<uint64_t, bool>>>;

    ProcessExport(Writer& w, PerfettoStats& st, const ExportInput& in, uint32_t pid, int64_t base,
                  uint64_t flowBase, IpcEnds ipcEnds, uint32_t tidBase)
        : w_(w), st_(st), in_(in), tl_(*in.timeline), pid_(pid), base_(base), flowBase_(flowBase),
          names_(view::EntityNames::fromTimeline(tl_)), ipcEnds_(std::move(ipcEnds)),
          tidBase_(tidBase), nextTid_(tidBase) {}

    void run() {
        processName();
        counters();
        allocations();
        calls();
        poolEvents();
        ipc();
        nvtx();
    }

private:
    std::string head(const char* ph, const std::string& name, const char* cat, uint32_t tid) {
        return "\"ph\":\"" + std::string(ph) + "\",\"name\":" + quoted(name) + ",\"cat\":\"" + cat +
               "\",\"pid\":" + std::to_string(pid_) + ",\"tid\":" + std::to_string(tid);
    }
    std::string ts(int64_t ns) const { return micros(nsBetween(base_, ns)); }

    void metaName(const char* what, uint32_t tid, const std::string& name) {
        w_.event("\"ph\":\"M\",\"name\":\"" + std::string(what) + "\",\"pid\":" +
                 std::to_string(pid_) + ",\"tid\":" + std::to_string(tid) +
                 ",\"args\":{\"name\":" + quoted(name) + "}");
    }

    Track& track(const std::string& name) {
        auto it = tracks_.find(name);
        if (it != tracks_.end()) return it->second;
        Track t;
        if (nextTid_ - tidBase_ >= kTidsPerProcess) {
            // A million tracks (a stream with that many allocations live at once): the JSON
            // cannot hold them apart; the export fails rather than mixing tracks.
            tooManyTracks_ = true;
            static Track spare;
            return spare;
        }
        t.tid = nextTid_++;
        metaName("thread_name", t.tid, name);
        // Chrome's viewer orders threads by this; Perfetto's UI orders by activity (it ignores
        // sort indices by design), so it is only a hint.
        w_.event("\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + std::to_string(pid_) +
                 ",\"tid\":" + std::to_string(t.tid) + ",\"args\":{\"sort_index\":" +
                 std::to_string(t.tid - tidBase_) + "}");
        ++st_.tracks;
        return tracks_.emplace(name, t).first->second;
    }

    // A track's marks must not go back in time: threads' clocks interleave slightly in seq
    // order (the same rule Series::push applies to the plotted series).
    int64_t ordered(Track& t, int64_t ns) {
        if (ns < t.lastNs) {
            ++st_.clampedTimestamps;
            ns = t.lastNs;
        }
        t.lastNs = ns;
        return ns;
    }

    void processName() {
        std::string cmd = in_.process.commandLine;
        if (auto sp = cmd.find(' '); sp != std::string::npos) cmd.resize(sp);
        if (auto sl = cmd.rfind('/'); sl != std::string::npos) cmd = cmd.substr(sl + 1);
        std::string name = cmd.empty() ? in_.label : cmd;
        if (!in_.label.empty() && name != in_.label) name += " (" + in_.label + ")";
        metaName("process_name", 0, name);
        ++st_.processes;
    }

    void counter(const std::string& name, const Series& s, uint32_t tid) {
        for (size_t i = 0; i < s.size(); ++i) {
            w_.event(head("C", name, "memory", tid) + ",\"ts\":" + ts(s.t[i]) +
                     ",\"args\":{\"bytes\":" + std::to_string(s.v[i]) + "}");
            ++st_.counterPoints;
        }
    }

    void counters() {
        for (const PoolTimeline& p : tl_.pools) {
            if (p.reserved.empty() && p.used.empty()) continue;
            const std::string name = names_.pool(p.info.handle);
            const uint32_t tid = track(name + " · events").tid;
            counter(name + " reserved", p.reserved, tid);
            counter(name + " used", p.used, tid);
        }
        for (const StreamTimeline& s : tl_.streams) {
            if (s.liveBytes.empty()) continue;
            counter(names_.stream(s.info.handle) + " live bytes", s.liveBytes,
                    track(names_.stream(s.info.handle) + " · calls").tid);
        }
    }

    std::string allocName(const Allocation& a) const {
        std::string n = formatBytes(a.size);
        if (a.site) n += " " + analysis::siteText(in_.stacks, a.site, 1);
        return n;
    }

    void allocations() {
        for (const StreamTimeline& s : tl_.streams) {
            const std::string sname = names_.stream(s.info.handle);
            // Rows become free when their slice ends; the lowest free row is taken, so that
            // most allocations land on the first rows.
            using Busy = std::pair<int64_t, uint32_t>; // (end, row)
            std::priority_queue<Busy, std::vector<Busy>, std::greater<Busy>> busy;
            std::set<uint32_t> freeRows;
            std::vector<uint32_t> rowTid;
            // StreamTimeline::allocations is by alloc time; ties and clock skew are sorted here.
            std::vector<uint32_t> order = s.allocations;
            std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
                return tl_.allocations[x].allocTsNs < tl_.allocations[y].allocTsNs;
            });
            for (uint32_t ai : order) {
                const Allocation& a = tl_.allocations[ai];
                const int64_t start = a.allocTsNs;
                int64_t end = a.live() ? std::max(tl_.t1, start) : a.freeTsNs;
                if (end < start) end = start; // a free stamped before its alloc (clock skew)
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
                nlohmann::json args = {{"bytes", a.size},
                                       {"ptr", hex(a.ptr)},
                                       {"pool", names_.poolWithHandle(a.pool)},
                                       {"alloc_seq", a.allocSeq},
                                       {"thread", a.tid},
                                       {"api", std::string(allocApiName(static_cast<AllocApi>(a.api)))}};
                if (a.live())
                    args["live_at_end"] = true;
                else
                    args["free_seq"] = a.freeSeq;
                if (!a.live() && a.freeStream != a.allocStream)
                    args["freed_on"] = names_.streamWithHandle(a.freeStream);
                if (a.site) {
                    args["call_site"] = analysis::siteText(in_.stacks, a.site, 8);
                    args["site"] = a.site;
                }
                w_.event(head("X", allocName(a), "allocation", rowTid[row]) + ",\"ts\":" +
                         ts(start) + ",\"dur\":" + micros(nsBetween(start, end)) +
                         ",\"args\":" + dumpJson(args));
                ++st_.allocationSlices;
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
            perStream[tl_.failed[i].stream].push_back(
                {tl_.failed[i].tsNs, tl_.failed[i].seq, 0, uint32_t(i), CallType::Failed});
        for (size_t i = 0; i < tl_.markers.size(); ++i) {
            const Marker& m = tl_.markers[i];
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
                const std::string at = ",\"ts\":" + ts(ordered(t, c.ns));
                switch (c.type) {
                case CallType::Record: {
                    const WaitEdge& e = tl_.edges[c.index];
                    w_.event(head("X", "event record " + hex(e.event), "call", t.tid) + at +
                             ",\"dur\":0,\"bind_id\":" + std::to_string(c.flow) +
                             ",\"flow_out\":true,\"args\":{\"event\":" + quoted(hex(e.event)) + "}");
                    ++st_.callSlices;
                    break;
                }
                case CallType::Wait: {
                    const WaitEdge& e = tl_.edges[c.index];
                    w_.event(head("X", "wait for event " + hex(e.event), "call", t.tid) + at +
                             ",\"dur\":0,\"bind_id\":" + std::to_string(c.flow) +
                             ",\"flow_in\":true,\"args\":{\"event\":" + quoted(hex(e.event)) +
                             ",\"recorded_on\":" + quoted(names_.streamWithHandle(e.fromStream)) + "}");
                    ++st_.callSlices;
                    break;
                }
                case CallType::Failed: {
                    const FailedAllocation& f = tl_.failed[c.index];
                    w_.event(head("i", "failed allocation " + formatBytes(f.size), "failure_or_sync", t.tid) + at +
                             ",\"s\":\"t\",\"args\":" +
                             dumpJson(nlohmann::json{{"bytes", f.size},
                                                     {"result", formatCuResult(f.result)},
                                                     {"pool", names_.poolWithHandle(f.pool)},
                                                     {"seq", f.seq}}));
                    ++st_.instants;
                    break;
                }
                case CallType::Sync:
                    w_.event(head("i", "stream synchronize", "failure_or_sync", t.tid) + at +
                             ",\"s\":\"t\",\"args\":{\"seq\":" + std::to_string(c.seq) + "}");
                    ++st_.instants;
                    break;
                case CallType::PeerCopy: {
                    const Marker& m = tl_.markers[c.index];
                    w_.event(head("i", "peer copy " + describeMarkerValues(m.kind, m.attr, m.value),
                                  "call", t.tid) +
                             at + ",\"s\":\"t\",\"args\":{\"bytes\":" + std::to_string(m.value) +
                             ",\"seq\":" + std::to_string(c.seq) + "}");
                    ++st_.instants;
                    break;
                }
                }
            }
        }
    }

    void processInstant(const Marker& m) {
        const char* name = m.kind == EventKind::EventSynchronize ? "event synchronize"
                                                                 : "context synchronize";
        w_.event(head("i", name, "sync", pid_) + ",\"ts\":" + ts(m.tsNs) +
                 ",\"s\":\"p\",\"args\":{\"seq\":" + std::to_string(m.seq) + "}");
        ++st_.instants;
    }

    std::string markerName(const Marker& m) const {
        switch (m.kind) {
        case EventKind::ImplicitRelease: return "implicit release to " + formatBytes(m.value);
        case EventKind::PoolTrimTo: return "trim to " + formatBytes(m.value);
        case EventKind::KnobChange:
            if (m.attr == static_cast<uint16_t>(KnobAction::TrimTo))
                return "knob: trim (reserved after " + formatBytes(m.value) + ")";
            if (m.attr == static_cast<uint16_t>(KnobAction::ResetHighWatermarks))
                return "knob: reset high watermarks";
            return "knob: " + std::string(poolAttrName(m.attr)) + " = " + attrValueText(m.attr, m.value);
        case EventKind::PoolSetAttribute:
            if (m.attr == static_cast<uint16_t>(PoolAttr::ReservedMemHigh) ||
                m.attr == static_cast<uint16_t>(PoolAttr::UsedMemHigh))
                return "reset " + std::string(poolAttrName(m.attr));
            return std::string(poolAttrName(m.attr)) + " = " + attrValueText(m.attr, m.value);
        case EventKind::PoolCreate:
            return m.value ? "pool create (max " + formatBytes(m.value) + ")" : "pool create";
        case EventKind::PoolDestroy: return "pool destroy";
        case EventKind::DeviceSetMempool: return "made the device's current pool";
        case EventKind::PoolSetAccess:
            return "access: " + describeMarkerValues(m.kind, m.attr, m.value);
        default: return std::string(eventKindName(m.kind));
        }
    }

    void poolEvents() {
        std::map<uint64_t, std::vector<const Marker*>> perPool;
        for (const Marker& m : tl_.markers)
            switch (m.kind) {
            case EventKind::ImplicitRelease:
            case EventKind::PoolTrimTo:
            case EventKind::KnobChange:
            case EventKind::PoolSetAttribute:
            case EventKind::PoolCreate:
            case EventKind::PoolDestroy:
            case EventKind::PoolSetAccess:
            case EventKind::DeviceSetMempool: perPool[m.pool].push_back(&m); break;
            default: break;
            }
        for (auto& [pool, list] : perPool) {
            Track& t = track(names_.pool(pool) + " · events");
            for (const Marker* m : list) {
                nlohmann::json args = {{"kind", std::string(eventKindName(m->kind))},
                                       {"seq", m->seq},
                                       {"value", m->value}};
                if (m->kind == EventKind::KnobChange || m->kind == EventKind::PoolSetAttribute)
                    args["attribute"] = std::string(poolAttrName(m->attr));
                w_.event(head("i", markerName(*m), "pool", t.tid) + ",\"ts\":" +
                         ts(ordered(t, m->tsNs)) + ",\"s\":\"t\",\"args\":" + dumpJson(args));
                ++st_.instants;
            }
        }
    }

    // Exports and imports of pools and blocks, on an IPC track per pool; the ends of links to
    // other processes carry flows (one id per export event: every import of it flows from it).
    void ipc() {
        std::map<uint64_t, std::vector<const Event*>> perPool;
        for (const Event& e : in_.ipc) perPool[e.pool].push_back(&e);
        for (auto& [pool, list] : perPool) {
            Track& t = track(names_.pool(pool) + " · IPC");
            for (const Event* e : list) {
                std::string name;
                switch (e->kind) {
                case EventKind::PoolExport: name = "pool export"; break;
                case EventKind::PoolImport: name = "pool import"; break;
                case EventKind::PointerExport: name = "pointer export " + hex(e->ptr); break;
                case EventKind::PointerImport: name = "pointer import " + hex(e->ptr); break;
                default: continue;
                }
                std::string flow;
                if (auto it = ipcEnds_.find(e->seq); it != ipcEnds_.end() && !it->second.empty()) {
                    // A slice binds one flow id; an import is the end of one link.
                    const auto& [id, isExport] = it->second.front();
                    flow = ",\"bind_id\":" + std::to_string(id) + (isExport ? ",\"flow_out\":true" : ",\"flow_in\":true");
                    if (!isExport) ++st_.ipcLinks;
                }
                w_.event(head("X", name, "ipc", t.tid) + ",\"ts\":" + ts(ordered(t, e->tsNs)) + ",\"dur\":0" +
                         flow + ",\"args\":{\"seq\":" + std::to_string(e->seq) + ",\"kind\":\"" +
                         std::string(eventKindName(e->kind)) + "\"}");
                ++st_.ipcSlices;
            }
        }
    }

    void nvtx() {
        const std::vector<NvtxRange>& ranges = in_.stacks.ranges;
        if (ranges.empty()) return;
        std::map<uint32_t, std::vector<const NvtxRange*>> pushPop;
        uint64_t asyncId = flowBase_;
        const int64_t endOfTrace = tl_.t1;
        for (const NvtxRange& r : ranges) {
            if (r.kind == NvtxRangeKind::PushPop) {
                pushPop[r.tid].push_back(&r);
                continue;
            }
            const int64_t end = r.endNs ? std::max(r.endNs, r.startNs) : std::max(endOfTrace, r.startNs);
            const std::string id = std::to_string(++asyncId);
            w_.event(head("b", r.name, "nvtx", r.tid) + ",\"ts\":" + ts(r.startNs) + ",\"id\":" + id +
                     ",\"args\":{\"thread\":" + std::to_string(r.tid) + "}");
            w_.event(head("e", r.name, "nvtx", r.tid) + ",\"ts\":" + ts(end) + ",\"id\":" + id +
                     (r.endNs ? "" : ",\"args\":{\"open_at_end\":true}"));
            ++st_.nvtxRanges;
        }
        std::unordered_map<uint32_t, std::string> threadNames;
        for (const ThreadInfo& t : in_.threads) threadNames[t.tid] = t.name;
        for (auto& [tid, list] : pushPop) {
            std::string tname = "thread " + std::to_string(tid);
            if (auto it = threadNames.find(tid); it != threadNames.end() && !it->second.empty())
                tname += " (" + it->second + ")";
            metaName("thread_name", tid, tname + " · NVTX");
            ++st_.tracks;
            std::stable_sort(list.begin(), list.end(), [](const NvtxRange* a, const NvtxRange* b) {
                return a->startNs != b->startNs ? a->startNs < b->startNs : a->depth < b->depth;
            });
            // Push/pop ranges nest on their thread; the stack keeps that true for a damaged
            // table too (an end past its parent's is cut to the parent's end, and counted).
            std::vector<std::pair<int64_t, const NvtxRange*>> open;
            auto closeUntil = [&](int64_t ns) {
                while (!open.empty() && open.back().first <= ns) {
                    w_.event(head("E", open.back().second->name, "nvtx", tid) + ",\"ts\":" +
                             ts(open.back().first));
                    open.pop_back();
                }
            };
            for (const NvtxRange* r : list) {
                closeUntil(r->startNs);
                int64_t end = r->endNs ? std::max(r->endNs, r->startNs) : std::max(endOfTrace, r->startNs);
                if (!open.empty() && end > open.back().first) {
                    end = open.back().first;
                    ++st_.clampedRanges;
                }
                w_.event(head("B", r->name, "nvtx", tid) + ",\"ts\":" + ts(r->startNs) +
                         (r->endNs ? "" : ",\"args\":{\"open_at_end\":true}"));
                open.push_back({end, r});
                ++st_.nvtxRanges;
            }
            closeUntil(INT64_MAX);
        }
    }

    Writer& w_;
    PerfettoStats& st_;
    const ExportInput& in_;
    const Timeline& tl_;
    uint32_t pid_;
    int64_t base_;
    uint64_t flowBase_;
    view::EntityNames names_;
    IpcEnds ipcEnds_;
    std::map<std::string, Track> tracks_;
    uint32_t tidBase_;
    uint32_t nextTid_;

public:
    bool tooManyTracks_ = false;
};

} // namespace

Status writePerfettoJson(const std::vector<ExportInput>& inputs, std::FILE* out, PerfettoStats* stats) {
    PerfettoStats local;
    PerfettoStats& st = stats ? *stats : local;
    st = {};
    // One time base for all inputs: traces of one host share CLOCK_MONOTONIC, so processes
    // recorded together line up.
    if (inputs.size() > kMaxProcesses)
        return Error{ErrorCode::InvalidArgument, "export: at most " + std::to_string(kMaxProcesses) +
                                                     " traces in one JSON trace"};
    int64_t base = INT64_MAX;
    for (const ExportInput& in : inputs) {
        if (!in.timeline) return Error{ErrorCode::InvalidArgument, "export: an input has no timeline"};
        if (in.timeline->eventCount || in.timeline->sampleCount) base = std::min(base, in.timeline->t0);
        for (const NvtxRange& r : in.stacks.ranges) base = std::min(base, r.startNs);
    }
    if (base == INT64_MAX) base = 0;
    Writer w(out);
    w.raw("{\"traceEvents\":[");
    std::set<uint32_t> pids;
    uint64_t flowBase = 0;
    // Links across processes: flow ids from 2^40 up, one per export event that has imports.
    std::vector<ProcessEvents> pe;
    for (const ExportInput& in : inputs) pe.push_back({in.process, in.ipc});
    const std::vector<IpcLink> links = inputs.size() > 1 ? findIpcLinks(pe) : std::vector<IpcLink>{};
    std::vector<ProcessExport::IpcEnds> ends(inputs.size());
    std::map<std::pair<size_t, uint64_t>, uint64_t> exportId;
    for (const IpcLink& l : links) {
        auto [it, fresh] = exportId.emplace(std::make_pair(l.exporter, l.exportSeq),
                                            (uint64_t{1} << 40) + exportId.size());
        if (fresh) ends[l.exporter][l.exportSeq].push_back({it->second, true});
        ends[l.importer][l.importSeq].push_back({it->second, false});
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
        const ExportInput& in = inputs[i];
        // Perfetto reads pids as 32-bit; two inputs with one pid (traces from two hosts, or a
        // reused pid) become two processes all the same.
        uint32_t pid = in.process.pid > 0 && in.process.pid < INT32_MAX ? uint32_t(in.process.pid) : 1;
        while (pids.count(pid)) ++pid;
        pids.insert(pid);
        // Synthetic tids differ between processes too (a million per process), so no viewer
        // has to tell apart two processes' tracks by pid alone.
        ProcessExport proc(w, st, in, pid, base, flowBase, std::move(ends[i]),
                         kFirstSyntheticTid + kTidsPerProcess * static_cast<uint32_t>(i));
        proc.run();
        if (proc.tooManyTracks_)
            return Error{ErrorCode::InvalidArgument,
                         "export: '" + in.label + "' needs more than a million tracks (allocations "
                         "live at once on one stream); the JSON format cannot show it"};
        // Flow and async ids stay distinct across processes.
        flowBase += in.timeline->edges.size() + in.stacks.ranges.size() + 1;
    }
    st.events = w.events();
    nlohmann::json meta = {{"exporter", std::string("poolscope ") + POOLSCOPE_VERSION},
                           {"time_base_ns", base},
                           {"clamped_timestamps", st.clampedTimestamps},
                           {"clamped_nvtx_ranges", st.clampedRanges}};
    nlohmann::json files = nlohmann::json::array();
    for (const ExportInput& in : inputs) files.push_back(in.label);
    meta["traces"] = files;
    w.raw("\n],\"displayTimeUnit\":\"ns\",\"poolscope\":" + dumpJson(meta) + "}\n");
    w.flush();
    if (w.failed()) return Error{ErrorCode::WriteFailed, "could not write the exported trace"};
    return {};
}

} // namespace poolscope::interop
