// Process trees and IPC links across traces (interop/ProcessTree.h says how links are inferred).

#include "poolscope/interop/ProcessTree.h"

#include <algorithm>
#include <functional>
#include <map>

#include "poolscope/EventFields.h"

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

} // namespace poolscope::interop
