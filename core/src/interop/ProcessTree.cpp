// Process trees and IPC links across traces (interop/ProcessTree.h says how links are inferred).

#include "poolscope/interop/ProcessTree.h"

#include "poolscope/EventFields.h"
#include "poolscope/TraceReader.h"
#include "poolscope/Units.h"

#include <algorithm>
#include <functional>
#include <map>

namespace poolscope::interop {

std::string basisName(IpcLink::Basis b) {
    return b == IpcLink::Basis::PointerValue ? "same device address" : "same handle type, export before import";
}

std::vector<ProcessNode> processTree(const std::vector<ProcessEvents>& in) {
    std::map<int64_t, size_t> byPid;
    for (size_t i = 0; i < in.size(); ++i)
        if (!byPid.count(in[i].process.pid)) byPid[in[i].process.pid] = i;
    std::vector<size_t> parent(in.size(), SIZE_MAX);
    for (size_t i = 0; i < in.size(); ++i) {
        const int64_t pp = in[i].process.parentPid;
        if (auto it = byPid.find(pp); pp && it != byPid.end() && it->second != i) parent[i] = it->second;
    }
    std::vector<ProcessNode> out;
    std::vector<bool> placed(in.size(), false);
    std::function<void(size_t, int)> visit = [&](size_t i, int depth) {
        if (placed[i]) return;
        placed[i] = true;
        out.push_back({i, depth, parent[i]});
        std::vector<size_t> kids;
        for (size_t k = 0; k < in.size(); ++k)
            if (parent[k] == i) kids.push_back(k);
        std::sort(kids.begin(), kids.end(), [&](size_t a, size_t b) { return in[a].process.pid < in[b].process.pid; });
        for (size_t k : kids) visit(k, depth + 1);
    };
    std::vector<size_t> roots;
    for (size_t i = 0; i < in.size(); ++i)
        if (parent[i] == SIZE_MAX) roots.push_back(i);
    std::sort(roots.begin(), roots.end(), [&](size_t a, size_t b) { return in[a].process.pid < in[b].process.pid; });
    for (size_t r : roots) visit(r, 0);
    for (size_t i = 0; i < in.size(); ++i) visit(i, 0); // a cycle of parent pids (reused pids)
    return out;
}

std::vector<IpcLink> findIpcLinks(const std::vector<ProcessEvents>& in) {
    std::vector<IpcLink> links;
    // Pointer links, by address.
    struct Export {
        size_t input;
        const Event* e;
    };
    std::multimap<uint64_t, Export> ptrExports;
    for (size_t i = 0; i < in.size(); ++i)
        for (const Event& e : in[i].ipc)
            if (e.kind == EventKind::PointerExport) ptrExports.insert({SharedPointerFields::of(e).ptr, {i, &e}});
    std::map<std::pair<size_t, uint64_t>, std::pair<size_t, uint64_t>> poolOf; // (importer, pool) -> (exporter, pool)
    for (size_t i = 0; i < in.size(); ++i)
        for (const Event& e : in[i].ipc) {
            if (e.kind != EventKind::PointerImport) continue;
            const uint64_t ptr = SharedPointerFields::of(e).ptr;
            const Export* best = nullptr;
            auto [lo, hi] = ptrExports.equal_range(ptr);
            for (auto it = lo; it != hi; ++it)
                if (it->second.input != i && it->second.e->tsNs <= e.tsNs &&
                    (!best || it->second.e->tsNs > best->e->tsNs))
                    best = &it->second;
            if (!best) continue;
            IpcLink l;
            l.kind = IpcLink::Kind::Pointer;
            l.basis = IpcLink::Basis::PointerValue;
            l.exporter = best->input;
            l.importer = i;
            l.exportPool = best->e->pool;
            l.importPool = e.pool;
            l.ptr = ptr;
            l.exportTsNs = best->e->tsNs;
            l.importTsNs = e.tsNs;
            l.exportSeq = best->e->seq;
            l.importSeq = e.seq;
            links.push_back(l);
            poolOf[{i, e.pool}] = {best->input, best->e->pool};
        }
    // Pool links: the import's pool is the one a pointer link already tied it to, else the
    // latest earlier export of the same handle type in the parent (or any other input).
    std::map<int64_t, size_t> byPid;
    for (size_t i = 0; i < in.size(); ++i) byPid.emplace(in[i].process.pid, i);
    for (size_t i = 0; i < in.size(); ++i)
        for (const Event& imp : in[i].ipc) {
            if (imp.kind != EventKind::PoolImport) continue;
            const uint32_t type = PoolCreateFields::of(imp).handleTypes;
            auto tied = poolOf.find({i, imp.pool});
            const Event* best = nullptr;
            size_t bestInput = 0;
            IpcLink::Basis basis = IpcLink::Basis::HandleType;
            const auto parentIt = byPid.find(in[i].process.parentPid);
            const bool hasParent = in[i].process.parentPid && parentIt != byPid.end() && parentIt->second != i;
            for (size_t j = 0; j < in.size(); ++j) {
                if (j == i) continue;
                if (tied == poolOf.end() && hasParent && j != parentIt->second) continue;
                for (const Event& ex : in[j].ipc) {
                    if (ex.kind != EventKind::PoolExport || ex.tsNs > imp.tsNs) continue;
                    if (tied != poolOf.end()) {
                        if (j != tied->second.first || ex.pool != tied->second.second) continue;
                    } else if (PoolExportFields::of(ex).handleType != type) {
                        continue;
                    }
                    if (!best || ex.tsNs > best->tsNs) {
                        best = &ex;
                        bestInput = j;
                    }
                }
            }
            if (tied != poolOf.end()) basis = IpcLink::Basis::PointerValue;
            if (!best) continue;
            IpcLink l;
            l.kind = IpcLink::Kind::Pool;
            l.basis = basis;
            l.exporter = bestInput;
            l.importer = i;
            l.exportPool = best->pool;
            l.importPool = imp.pool;
            l.exportTsNs = best->tsNs;
            l.importTsNs = imp.tsNs;
            l.exportSeq = best->seq;
            l.importSeq = imp.seq;
            links.push_back(l);
        }
    std::stable_sort(links.begin(), links.end(),
                     [](const IpcLink& a, const IpcLink& b) { return a.importTsNs < b.importTsNs; });
    return links;
}

Result<std::vector<Event>> readIpcEvents(const TraceReader& reader) {
    std::vector<Event> out;
    auto isIpc = [](EventKind k) {
        return k == EventKind::PoolExport || k == EventKind::PoolImport ||
               k == EventKind::PointerExport || k == EventKind::PointerImport;
    };
    bool any = false;
    if (auto sum = reader.summary())
        for (const auto& [kind, n] : sum->countsByKind)
            any = any || (isIpc(kind) && n);
    else
        any = true; // no summary to go by: look
    if (!any) return out;
    Status st = reader.forEachEvent([&](const Event& e) {
        if (isIpc(e.kind)) out.push_back(e);
        return true;
    });
    if (!st) return st.error();
    return out;
}

std::string processTitle(const ProcessInfo& p) {
    std::string cmd = p.commandLine;
    const size_t sp = cmd.find(' ');
    std::string prog = cmd.substr(0, sp);
    if (const size_t slash = prog.rfind('/'); slash != std::string::npos)
        prog = prog.substr(slash + 1);
    // "python3 train.py": the script says more than the interpreter.
    if (prog.rfind("python", 0) == 0 && sp != std::string::npos) {
        std::string rest = cmd.substr(sp + 1);
        while (rest.rfind('-', 0) == 0) { // "python3 -u train.py"
            const size_t next = rest.find(' ');
            if (next == std::string::npos) break;
            rest = rest.substr(next + 1);
        }
        std::string script = rest.substr(0, rest.find(' '));
        if (const size_t slash = script.rfind('/'); slash != std::string::npos)
            script = script.substr(slash + 1);
        if (!script.empty() && script[0] != '-') prog += " " + script;
    }
    if (prog.empty()) prog = "process";
    return prog + " (pid " + std::to_string(p.pid) + ")";
}

TimeAlignment alignProcesses(const std::vector<AlignInput>& in) {
    TimeAlignment a;
    a.offsetNs.assign(in.size(), 0);
    if (in.empty()) return a;
    bool oneHost = !in[0].process.host.empty();
    bool allWall = true;
    for (const AlignInput& i : in) {
        oneHost = oneHost && i.process.host == in[0].process.host;
        allWall = allWall && i.process.startTimeUnixNs > 0 && i.process.startTimeMonoNs > 0;
    }
    // Unix minus monotonic at each collector's start: the same number for every process of one
    // host up to the time between the two clock reads (and NTP slewing between the starts).
    auto wallMinusMono = [](const ProcessInfo& p) { return p.startTimeUnixNs - p.startTimeMonoNs; };
    if (oneHost) {
        a.basis = TimeAlignment::Basis::Monotonic;
        if (allWall) {
            int64_t lo = INT64_MAX, hi = INT64_MIN;
            for (const AlignInput& i : in) {
                lo = std::min(lo, wallMinusMono(i.process));
                hi = std::max(hi, wallMinusMono(i.process));
            }
            a.wallClockSpreadNs = hi - lo;
        }
    } else if (allWall) {
        a.basis = TimeAlignment::Basis::WallClock;
        const int64_t base = wallMinusMono(in[0].process);
        for (size_t i = 0; i < in.size(); ++i)
            a.offsetNs[i] = wallMinusMono(in[i].process) - base;
    } else {
        a.basis = TimeAlignment::Basis::FirstEvent;
        for (size_t i = 0; i < in.size(); ++i)
            a.offsetNs[i] = in[0].t0 - in[i].t0;
    }
    a.begin = INT64_MAX;
    a.end = INT64_MIN;
    size_t first = 0;
    for (size_t i = 0; i < in.size(); ++i) {
        if (in[i].t0 + a.offsetNs[i] < a.begin) {
            a.begin = in[i].t0 + a.offsetNs[i];
            first = i;
        }
        a.end = std::max(a.end, in[i].t1 + a.offsetNs[i]);
    }
    if (allWall) {
        const ProcessInfo& p = in[first].process;
        a.beginUnixNs = in[first].t0 - p.startTimeMonoNs + p.startTimeUnixNs;
    }
    switch (a.basis) {
    case TimeAlignment::Basis::Monotonic:
        a.description = "Aligned on the monotonic clock of host '" + in[0].process.host +
                        "', which every trace's events use";
        if (a.wallClockSpreadNs >= 0)
            a.description +=
                " (the wall-clock starts agree within " + formatDuration(a.wallClockSpreadNs) + ")";
        break;
    case TimeAlignment::Basis::WallClock:
        a.description =
            "Aligned by wall-clock start (traces from different hosts: as exact as their "
            "clocks agreed)";
        break;
    case TimeAlignment::Basis::FirstEvent: {
        std::string who;
        for (const AlignInput& i : in)
            if (i.process.startTimeUnixNs <= 0 || i.process.startTimeMonoNs <= 0) {
                who = processTitle(i.process);
                break;
            }
        a.description = "Aligned by first event: " + who +
                        " records no wall-clock start, so the "
                        "traces' clocks cannot be related";
        break;
    }
    }
    return a;
}

} // namespace poolscope::interop
