// The entries of a Perfetto export, shared by the Timeline-based and the streaming export
// (PerfettoCommon.h). docs/INTEROP.md says what each is.
#include "PerfettoCommon.h"

#include <algorithm>
#include <set>

#include "poolscope/EventFields.h"
#include "poolscope/Units.h"
#include "poolscope/analysis/CallSites.h"
#include "poolscope/interop/ProcessTree.h"

namespace poolscope::interop::detail {

namespace {

std::string attrValueText(uint16_t attr, uint64_t v) {
    if (attr == static_cast<uint16_t>(PoolAttr::ReleaseThreshold) ||
        attr >= static_cast<uint16_t>(PoolAttr::ReservedMemCurrent))
        return v == UINT64_MAX ? std::string("max") : formatBytes(v);
    if (attr < 1000) return v ? "on" : "off";
    return formatBytes(v);
}

} // namespace

std::string ProcessBase::head(const char* ph, const std::string& name, const char* cat, uint32_t tid) const {
    std::string out;
    appendHead(out, ph, name, cat, tid);
    return out;
}

void ProcessBase::appendHead(std::string& out, const char* ph, const std::string& name, const char* cat,
                             uint32_t tid) const {
    out += "\"ph\":\"";
    out += ph;
    out += "\",\"name\":";
    appendJsonString(out, name);
    out += ",\"cat\":\"";
    out += cat;
    out += "\",\"pid\":";
    appendNumber(out, pid_);
    out += ",\"tid\":";
    appendNumber(out, tid);
}

std::string ProcessBase::ts(int64_t ns) const { return micros(nsBetween(base_, ns)); }

void ProcessBase::metaName(const char* what, uint32_t tid, const std::string& name) {
    w_.event("\"ph\":\"M\",\"name\":\"" + std::string(what) + "\",\"pid\":" + std::to_string(pid_) +
             ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":" + quoted(name) + "}");
}

Track& ProcessBase::track(const std::string& name) {
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

int64_t ProcessBase::ordered(Track& t, int64_t ns) {
    if (ns < t.lastNs) {
        ++st_.clampedTimestamps;
        ns = t.lastNs;
    }
    t.lastNs = ns;
    return ns;
}

void ProcessBase::processName(const ProcessInfo& process, const std::string& label) {
    std::string cmd = process.commandLine;
    if (auto sp = cmd.find(' '); sp != std::string::npos) cmd.resize(sp);
    if (auto sl = cmd.rfind('/'); sl != std::string::npos) cmd = cmd.substr(sl + 1);
    std::string name = cmd.empty() ? label : cmd;
    if (!label.empty() && name != label) name += " (" + label + ")";
    metaName("process_name", 0, name);
    ++st_.processes;
}

void ProcessBase::counterPoint(const std::string& name, uint32_t tid, int64_t t, uint64_t v) {
    std::string& e = entry_;
    e.clear();
    appendHead(e, "C", name, "memory", tid);
    e += ",\"ts\":";
    appendMicros(e, nsBetween(base_, t));
    e += ",\"args\":{\"bytes\":";
    appendNumber(e, v);
    e += '}';
    w_.event(e);
    ++st_.counterPoints;
}

std::string ProcessBase::allocName(const Allocation& a, const StackTables& stacks) const {
    std::string n = formatBytes(a.size);
    if (a.site) n += " " + analysis::siteText(stacks, a.site, 1);
    return n;
}

void ProcessBase::allocationSlice(const Allocation& a, const StackTables& stacks, uint32_t tid,
                                  int64_t start, int64_t end) {
    // The args object as nlohmann::json dumps it: keys in sorted order.
    std::string& e = entry_;
    e.clear();
    appendHead(e, "X", allocName(a, stacks), "allocation", tid);
    e += ",\"ts\":";
    appendMicros(e, nsBetween(base_, start));
    e += ",\"dur\":";
    appendMicros(e, nsBetween(start, end));
    e += ",\"args\":{\"alloc_seq\":";
    appendNumber(e, a.allocSeq);
    if (a.beforeLoaded) e += ",\"allocated_before_range\":true";
    e += ",\"api\":";
    appendJsonString(e, allocApiName(static_cast<AllocApi>(a.api)));
    e += ",\"bytes\":";
    appendNumber(e, a.size);
    if (a.site) {
        e += ",\"call_site\":";
        appendJsonString(e, analysis::siteText(stacks, a.site, 8));
    }
    if (!a.live()) {
        e += ",\"free_seq\":";
        appendNumber(e, a.freeSeq);
        if (a.freeStream != a.allocStream) {
            e += ",\"freed_on\":";
            appendJsonString(e, names_.streamWithHandle(a.freeStream));
        }
    } else {
        e += liveKey_;
    }
    e += ",\"pool\":";
    appendJsonString(e, names_.poolWithHandle(a.pool));
    e += ",\"ptr\":";
    appendJsonString(e, hex(a.ptr));
    if (a.site) {
        e += ",\"site\":";
        appendNumber(e, a.site);
    }
    e += ",\"thread\":";
    appendNumber(e, a.tid);
    e += "}";
    w_.event(e);
    ++st_.allocationSlices;
}

void ProcessBase::recordSlice(uint32_t tid, int64_t ns, uint64_t flow, const WaitEdge& e) {
    w_.event(head("X", "event record " + hex(e.event), "call", tid) + ",\"ts\":" + ts(ns) +
             ",\"dur\":0,\"bind_id\":" + std::to_string(flow) +
             ",\"flow_out\":true,\"args\":{\"event\":" + quoted(hex(e.event)) + "}");
    ++st_.callSlices;
}

void ProcessBase::waitSlice(uint32_t tid, int64_t ns, uint64_t flow, const WaitEdge& e) {
    w_.event(head("X", "wait for event " + hex(e.event), "call", tid) + ",\"ts\":" + ts(ns) +
             ",\"dur\":0,\"bind_id\":" + std::to_string(flow) +
             ",\"flow_in\":true,\"args\":{\"event\":" + quoted(hex(e.event)) +
             ",\"recorded_on\":" + quoted(names_.streamWithHandle(e.fromStream)) + "}");
    ++st_.callSlices;
}

void ProcessBase::failedInstant(uint32_t tid, int64_t ns, const FailedAllocation& f) {
    w_.event(head("i", "failed allocation " + formatBytes(f.size), "failure_or_sync", tid) +
             ",\"ts\":" + ts(ns) + ",\"s\":\"t\",\"args\":" +
             dumpJson(nlohmann::json{{"bytes", f.size},
                                     {"result", formatCuResult(f.result)},
                                     {"pool", names_.poolWithHandle(f.pool)},
                                     {"seq", f.seq}}));
    ++st_.instants;
}

void ProcessBase::syncInstant(uint32_t tid, int64_t ns, uint64_t seq) {
    w_.event(head("i", "stream synchronize", "failure_or_sync", tid) + ",\"ts\":" + ts(ns) +
             ",\"s\":\"t\",\"args\":{\"seq\":" + std::to_string(seq) + "}");
    ++st_.instants;
}

void ProcessBase::peerCopyInstant(uint32_t tid, int64_t ns, const Marker& m) {
    w_.event(head("i", "peer copy " + describeMarkerValues(m.kind, m.attr, m.value), "call", tid) +
             ",\"ts\":" + ts(ns) + ",\"s\":\"t\",\"args\":{\"bytes\":" + std::to_string(m.value) +
             ",\"seq\":" + std::to_string(m.seq) + "}");
    ++st_.instants;
}

void ProcessBase::processInstant(const Marker& m) {
    const char* name = m.kind == EventKind::EventSynchronize ? "event synchronize" : "context synchronize";
    w_.event(head("i", name, "sync", pid_) + ",\"ts\":" + ts(m.tsNs) + ",\"s\":\"p\",\"args\":{\"seq\":" +
             std::to_string(m.seq) + "}");
    ++st_.instants;
}

bool ProcessBase::isPoolMarker(EventKind k) {
    switch (k) {
    case EventKind::ImplicitRelease:
    case EventKind::PoolTrimTo:
    case EventKind::KnobChange:
    case EventKind::PoolSetAttribute:
    case EventKind::PoolCreate:
    case EventKind::PoolDestroy:
    case EventKind::PoolSetAccess:
    case EventKind::DeviceSetMempool: return true;
    default: return false;
    }
}

std::string ProcessBase::markerName(const Marker& m) const {
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
    case EventKind::PoolSetAccess: return "access: " + describeMarkerValues(m.kind, m.attr, m.value);
    default: return std::string(eventKindName(m.kind));
    }
}

void ProcessBase::poolMarker(Track& t, const Marker& m) {
    nlohmann::json args = {{"kind", std::string(eventKindName(m.kind))}, {"seq", m.seq}, {"value", m.value}};
    if (m.kind == EventKind::KnobChange || m.kind == EventKind::PoolSetAttribute)
        args["attribute"] = std::string(poolAttrName(m.attr));
    w_.event(head("i", markerName(m), "pool", t.tid) + ",\"ts\":" + ts(ordered(t, m.tsNs)) +
             ",\"s\":\"t\",\"args\":" + dumpJson(args));
    ++st_.instants;
}

// The ends of links to other processes carry flows (one id per export event: every import of
// it flows from it).
void ProcessBase::ipc(const std::vector<Event>& events) {
    std::map<uint64_t, std::vector<const Event*>> perPool;
    for (const Event& e : events) perPool[e.pool].push_back(&e);
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
            w_.event(head("X", name, "ipc", t.tid) + ",\"ts\":" + ts(ordered(t, e->tsNs)) + ",\"dur\":0" + flow +
                     ",\"args\":{\"seq\":" + std::to_string(e->seq) + ",\"kind\":\"" +
                     std::string(eventKindName(e->kind)) + "\"}");
            ++st_.ipcSlices;
        }
    }
}

void ProcessBase::nvtx(const std::vector<NvtxRange>& ranges, const std::vector<ThreadInfo>& threads,
                       int64_t endOfTrace) {
    if (ranges.empty()) return;
    std::map<uint32_t, std::vector<const NvtxRange*>> pushPop;
    uint64_t asyncId = flowBase_;
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
    for (const ThreadInfo& t : threads) threadNames[t.tid] = t.name;
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
                w_.event(head("E", open.back().second->name, "nvtx", tid) + ",\"ts\":" + ts(open.back().first));
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

Status writeDocument(const std::vector<InputHead>& inputs, int64_t base, std::FILE* out, PerfettoStats& st,
                     const std::function<Result<uint64_t>(size_t i, Writer&, uint32_t pid, uint64_t flowBase,
                                                          IpcEnds ends, uint32_t tidBase)>& run) {
    Writer w(out);
    w.raw("{\"traceEvents\":[");
    std::set<uint32_t> pids;
    uint64_t flowBase = 0;
    // Links across processes: flow ids from 2^40 up, one per export event that has imports.
    std::vector<ProcessEvents> pe;
    for (const InputHead& in : inputs) pe.push_back({*in.process, *in.ipc});
    const std::vector<IpcLink> links = inputs.size() > 1 ? findIpcLinks(pe) : std::vector<IpcLink>{};
    std::vector<IpcEnds> ends(inputs.size());
    std::map<std::pair<size_t, uint64_t>, uint64_t> exportId;
    for (const IpcLink& l : links) {
        auto [it, fresh] = exportId.emplace(std::make_pair(l.exporter, l.exportSeq),
                                            (uint64_t{1} << 40) + exportId.size());
        if (fresh) ends[l.exporter][l.exportSeq].push_back({it->second, true});
        ends[l.importer][l.importSeq].push_back({it->second, false});
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
        const InputHead& in = inputs[i];
        // Perfetto reads pids as 32-bit; two inputs with one pid (traces from two hosts, or a
        // reused pid) become two processes all the same.
        uint32_t pid = in.process->pid > 0 && in.process->pid < INT32_MAX ? uint32_t(in.process->pid) : 1;
        while (pids.count(pid)) ++pid;
        pids.insert(pid);
        // Synthetic tids differ between processes too (a million per process), so no viewer
        // has to tell apart two processes' tracks by pid alone.
        auto ids = run(i, w, pid, flowBase, std::move(ends[i]),
                       kFirstSyntheticTid + kTidsPerProcess * static_cast<uint32_t>(i));
        if (!ids) return ids.error();
        // Flow and async ids stay distinct across processes.
        flowBase += *ids;
    }
    st.events = w.events();
    nlohmann::json meta = {{"exporter", std::string("poolscope ") + POOLSCOPE_VERSION},
                           {"time_base_ns", base},
                           {"clamped_timestamps", st.clampedTimestamps},
                           {"clamped_nvtx_ranges", st.clampedRanges}};
    // Only a streamed export can meet it, and only on a trace whose clocks disagree by more
    // than its horizon: said so the difference from the Timeline's export is not silent.
    if (st.outOfOrderEvents) meta["out_of_order_events"] = st.outOfOrderEvents;
    nlohmann::json files = nlohmann::json::array();
    for (const InputHead& in : inputs) files.push_back(in.label);
    meta["traces"] = files;
    w.raw("\n],\"displayTimeUnit\":\"ns\",\"poolscope\":" + dumpJson(meta) + "}\n");
    w.flush();
    if (w.failed()) return Error{ErrorCode::WriteFailed, "could not write the exported trace"};
    return {};
}

} // namespace poolscope::interop::detail
