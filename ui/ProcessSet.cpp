#include "ProcessSet.h"

#include <QDateTime>
#include <algorithm>
#include <map>
#include <set>

namespace poolscope::ui {

ProcessSet ProcessSet::build(const std::vector<TraceLoadResult>& loaded) {
    ProcessSet set;
    std::vector<const TraceLoadResult*> ok;
    for (const TraceLoadResult& r : loaded)
        if (r.error.isEmpty() && !r.cancelled && r.snap.valid()) ok.push_back(&r);
    if (ok.empty()) return set;

    std::vector<interop::ProcessEvents> pe;
    for (const TraceLoadResult* r : ok)
        pe.push_back({r->snap.process, r->ipc});
    const std::vector<interop::ProcessNode> tree = interop::processTree(pe);
    std::vector<int> entryOf(ok.size(), -1);
    for (const interop::ProcessNode& n : tree) {
        entryOf[n.input] = int(set.entries.size());
        ProcessEntry e;
        e.snap = ok[n.input]->snap;
        e.ipc = ok[n.input]->ipc;
        e.title = QString::fromStdString(interop::processTitle(e.snap.process));
        e.depth = n.depth;
        set.entries.push_back(std::move(e));
    }
    for (const interop::ProcessNode& n : tree)
        if (n.parent != SIZE_MAX) set.entries[size_t(entryOf[n.input])].parent = entryOf[n.parent];

    for (interop::IpcLink l : interop::findIpcLinks(pe)) {
        l.exporter = size_t(entryOf[l.exporter]);
        l.importer = size_t(entryOf[l.importer]);
        set.links.push_back(l);
    }

    std::vector<interop::AlignInput> align;
    for (const ProcessEntry& e : set.entries)
        align.push_back({e.snap.process, e.snap.timeline->t0, e.snap.timeline->t1});
    set.alignment = interop::alignProcesses(align);
    for (size_t i = 0; i < set.entries.size(); ++i)
        set.entries[i].offsetNs = set.alignment.offsetNs[i];

    // Mark the linked pools' lanes: "pool #1 (explicit) ⇄ pid 527" (or "⇄ 3 processes").
    std::map<std::pair<int, uint64_t>, std::set<int64_t>> peers;
    for (const interop::IpcLink& l : set.links) {
        peers[{int(l.exporter), l.exportPool}].insert(set.entries[l.importer].snap.process.pid);
        peers[{int(l.importer), l.importPool}].insert(set.entries[l.exporter].snap.process.pid);
    }
    for (size_t i = 0; i < set.entries.size(); ++i) {
        TraceSnapshot& s = set.entries[i].snap;
        std::shared_ptr<LaneLayout> layout;
        for (const auto& [key, pids] : peers) {
            if (key.first != int(i)) continue;
            if (!layout) layout = std::make_shared<LaneLayout>(*s.layout);
            for (Lane& lane : layout->lanes)
                if (lane.kind == LaneKind::Pool && lane.pool == key.second)
                    lane.title += pids.size() == 1
                                      ? " \u21c4 pid " + std::to_string(*pids.begin())
                                      : " \u21c4 " + std::to_string(pids.size()) + " processes";
        }
        if (layout) s.layout = std::move(layout);
    }
    return set;
}

std::vector<std::pair<int, uint64_t>> ProcessSet::linkedPools(int entry, uint64_t pool) const {
    std::vector<std::pair<int, uint64_t>> out;
    auto add = [&](int e, uint64_t p) {
        if (std::find(out.begin(), out.end(), std::pair(e, p)) == out.end()) out.emplace_back(e, p);
    };
    for (const interop::IpcLink& l : links) {
        if (int(l.exporter) == entry && l.exportPool == pool) add(int(l.importer), l.importPool);
        if (int(l.importer) == entry && l.importPool == pool) add(int(l.exporter), l.exportPool);
    }
    return out;
}

QString ProcessSet::alignmentText() const {
    if (entries.empty()) return {};
    QString s = QString::fromStdString(alignment.description) + QStringLiteral(".");
    int first = 0;
    for (size_t i = 0; i < entries.size(); ++i)
        if (entries[i].snap.timeline->t0 + entries[i].offsetNs <
            entries[size_t(first)].snap.timeline->t0 + entries[size_t(first)].offsetNs)
            first = int(i);
    s += QStringLiteral(" Time 0 is the first event of %1").arg(entries[size_t(first)].title);
    if (alignment.beginUnixNs > 0) {
        const QDateTime at =
            QDateTime::fromMSecsSinceEpoch(alignment.beginUnixNs / 1000000, Qt::UTC);
        s += QStringLiteral(", %1 UTC").arg(at.toString(QStringLiteral("yyyy-MM-dd hh:mm:ss.zzz")));
    }
    return s + QStringLiteral(".");
}

} // namespace poolscope::ui
