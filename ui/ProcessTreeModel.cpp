#include "ProcessTreeModel.h"

#include "poolscope/Units.h"

#include <QBrush>
#include <QColor>
#include <QFont>
#include <QPalette>
#include <algorithm>
#include <map>

namespace poolscope::ui {

namespace {
QString qs(const std::string& s) {
    return QString::fromStdString(s);
}
QString qb(uint64_t v) {
    return qs(formatBytes(v));
}
} // namespace

int ProcessTreeModel::add(int parent, Node n) {
    n.parent = parent;
    const int idx = int(nodes_.size());
    if (parent < 0) {
        n.rowInParent = int(roots_.size());
        roots_.push_back(idx);
    } else {
        n.rowInParent = int(nodes_[size_t(parent)].children.size());
        nodes_[size_t(parent)].children.push_back(idx);
    }
    nodes_.push_back(std::move(n));
    return idx;
}

void ProcessTreeModel::resetData(const ProcessSet* set) {
    beginResetModel();
    nodes_.clear();
    roots_.clear();
    highlighted_.clear();
    if (set) {
        std::vector<int> nodeOf(set->entries.size(), -1);
        for (size_t i = 0; i < set->entries.size(); ++i) {
            const ProcessEntry& e = set->entries[i];
            const Timeline& tl = *e.snap.timeline;
            Node p;
            p.target = {int(i), NodeKind::Process, 0, false};
            p.cells[Name] = e.title;
            uint64_t reserved = 0, used = 0;
            for (const PoolTimeline& pt : tl.pools) {
                reserved += pt.peakReserved;
                used += pt.peakUsed;
            }
            p.cells[PeakReserved] = qb(reserved);
            p.cells[PeakUsed] = qb(used);
            p.cells[Allocations] = QString::number(tl.allocations.size());
            p.cells[Shared] =
                e.parent >= 0 ? tr("child of pid %1").arg(e.snap.process.parentPid) : QString();
            p.tooltip = tr("%1\n%2\n%3 events over %4")
                            .arg(qs(e.snap.process.commandLine), e.snap.path,
                                 qs(formatCount(tl.eventCount)), qs(formatDuration(nsBetween(tl.t0, tl.t1))));
            nodeOf[i] = add(e.parent >= 0 ? nodeOf[size_t(e.parent)] : -1, p);
            // Its pools and streams, before the child processes (added to it later: the
            // entries are in tree order, parents first).
            const LaneLayout& layout = *e.snap.layout;
            for (const PoolTimeline& pt : tl.pools) {
                const uint64_t h = pt.info.handle;
                if (layout.laneOfPool(h) < 0) continue;
                Node n;
                n.target = {int(i), NodeKind::Pool, h, false};
                // The lane's title: the name, and "⇄ pid N" where the pool is shared.
                n.cells[Name] = qs(layout.lanes[size_t(layout.laneOfPool(h))].title);
                n.cells[PeakReserved] = qb(pt.peakReserved);
                n.cells[PeakUsed] = qb(pt.peakUsed);
                n.cells[Allocations] = QString::number(pt.allocCount);
                QStringList exportedTo, importedFrom;
                // Link rows: one per importing process's pool, whatever links tie them (the
                // pool itself, blocks of it).
                std::map<std::pair<int, uint64_t>, std::vector<const interop::IpcLink*>> importers;
                for (const interop::IpcLink& l : set->links) {
                    if (int(l.exporter) == int(i) && l.exportPool == h)
                        importers[{int(l.importer), l.importPool}].push_back(&l);
                    if (int(l.importer) == int(i) && l.importPool == h) {
                        const QString from =
                            tr("pid %1's %2")
                                .arg(set->entries[l.exporter].snap.process.pid)
                                .arg(set->entries[l.exporter].snap.layout->poolName(l.exportPool));
                        if (!importedFrom.contains(from)) importedFrom << from;
                    }
                }
                for (const auto& [key, ls] : importers)
                    exportedTo << tr("pid %1").arg(
                        set->entries[size_t(key.first)].snap.process.pid);
                if (!importedFrom.isEmpty())
                    n.cells[Shared] =
                        tr("\u21c4 imported from %1").arg(importedFrom.join(QStringLiteral(", ")));
                else if (!exportedTo.isEmpty())
                    n.cells[Shared] =
                        tr("\u21c4 exported to %1").arg(exportedTo.join(QStringLiteral(", ")));
                n.tooltip = tr("%1 on device %2 (%3)")
                                .arg(qs(layout.names.poolWithHandle(h)))
                                .arg(pt.info.device)
                                .arg(qs(std::string(poolKindName(pt.info.kind))));
                const int pool = add(nodeOf[i], n);
                for (const auto& [key, ls] : importers) {
                    const ProcessEntry& imp = set->entries[size_t(key.first)];
                    Node link;
                    link.target = {key.first, NodeKind::Pool, key.second, true};
                    link.cells[Name] = QStringLiteral("\u21c4 pid %1: %2")
                                           .arg(imp.snap.process.pid)
                                           .arg(imp.snap.layout->poolName(key.second));
                    int blocks = 0;
                    QStringList lines;
                    for (const interop::IpcLink* l : ls) {
                        const bool isPool = l->kind == interop::IpcLink::Kind::Pool;
                        blocks += !isPool;
                        lines << tr("%1 exported at +%2, imported %3 later (linked by %4)")
                                     .arg(isPool ? tr("pool")
                                                 : tr("block %1").arg(hexHandle(l->ptr)))
                                     .arg(qs(formatDuration(set->toShared(int(i), l->exportTsNs) -
                                                            set->alignment.begin)))
                                     .arg(qs(
                                         formatDuration(nsBetween(l->exportTsNs, l->importTsNs))))
                                     .arg(qs(interop::basisName(l->basis)));
                    }
                    const bool poolLink =
                        std::any_of(ls.begin(), ls.end(), [](const interop::IpcLink* l) {
                            return l->kind == interop::IpcLink::Kind::Pool;
                        });
                    link.cells[Shared] =
                        (poolLink ? tr("pool") : QString()) +
                        (blocks ? QStringLiteral("%1%2 block%3")
                                      .arg(poolLink ? QStringLiteral(" + ") : QString())
                                      .arg(blocks)
                                      .arg(blocks == 1 ? "" : "s")
                                : QString()) +
                        tr(" imported");
                    link.tooltip = tr("Imported by %1 (%2):\n").arg(imp.title, imp.snap.title) +
                                   lines.join(QLatin1Char('\n'));
                    add(pool, link);
                }
            }
            for (const StreamTimeline& st : tl.streams) {
                if (st.allocCount == 0 && st.freeCount == 0 && st.failedCount == 0) continue;
                Node n;
                n.target = {int(i), NodeKind::Stream, st.info.handle, false};
                n.cells[Name] = layout.streamName(st.info.handle);
                n.cells[PeakUsed] = qb(st.peakLive);
                n.cells[Allocations] = QString::number(st.allocCount);
                n.tooltip = qs(layout.names.streamWithHandle(st.info.handle));
                add(nodeOf[i], n);
            }
        }
    }
    endResetModel();
}

ProcessTreeModel::Target ProcessTreeModel::targetFor(const QModelIndex& idx) const {
    if (!idx.isValid()) return {};
    return nodes_[size_t(idx.internalId())].target;
}

QModelIndex ProcessTreeModel::indexOfNode(int node) const {
    return createIndex(nodes_[size_t(node)].rowInParent, 0, quintptr(node));
}

QModelIndex ProcessTreeModel::indexFor(int process, NodeKind kind, uint64_t handle) const {
    for (size_t i = 0; i < nodes_.size(); ++i) {
        const Target& t = nodes_[i].target;
        if (!t.link && t.process == process && t.kind == kind &&
            (kind == NodeKind::Process || t.handle == handle))
            return indexOfNode(int(i));
    }
    return {};
}

QModelIndexList ProcessTreeModel::linkRowsFor(int process, uint64_t pool) const {
    QModelIndexList out;
    for (size_t i = 0; i < nodes_.size(); ++i) {
        const Target& t = nodes_[i].target;
        if (t.link && t.process == process && t.handle == pool) out << indexOfNode(int(i));
    }
    return out;
}

void ProcessTreeModel::setHighlightedPools(const std::vector<std::pair<int, uint64_t>>& pools) {
    if (pools == highlighted_) return;
    highlighted_ = pools;
    // Which rows change is a small set, but the roles of every pool and link row may: one
    // dataChanged per parent.
    for (size_t i = 0; i < nodes_.size(); ++i) {
        if (nodes_[i].children.empty()) continue;
        const QModelIndex parent = indexOfNode(int(i));
        emit dataChanged(index(0, 0, parent),
                         index(int(nodes_[i].children.size()) - 1, ColumnCount - 1, parent));
    }
}

QModelIndex ProcessTreeModel::index(int row, int column, const QModelIndex& parent) const {
    if (row < 0 || column < 0 || column >= ColumnCount) return {};
    if (parent.isValid() && parent.column() != 0) return {};
    const std::vector<int>& list =
        parent.isValid() ? nodes_[size_t(parent.internalId())].children : roots_;
    if (size_t(row) >= list.size()) return {};
    return createIndex(row, column, quintptr(list[size_t(row)]));
}

QModelIndex ProcessTreeModel::parent(const QModelIndex& child) const {
    if (!child.isValid()) return {};
    const int p = nodes_[size_t(child.internalId())].parent;
    return p < 0 ? QModelIndex() : indexOfNode(p);
}

int ProcessTreeModel::rowCount(const QModelIndex& parent) const {
    if (!parent.isValid()) return int(roots_.size());
    if (parent.column() != 0) return 0;
    return int(nodes_[size_t(parent.internalId())].children.size());
}

int ProcessTreeModel::columnCount(const QModelIndex&) const {
    return ColumnCount;
}

QVariant ProcessTreeModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid()) return {};
    const Node& n = nodes_[size_t(idx.internalId())];
    const bool lit = n.target.kind == NodeKind::Pool &&
                     std::find(highlighted_.begin(), highlighted_.end(),
                               std::pair(n.target.process, n.target.handle)) != highlighted_.end();
    switch (role) {
    case Qt::DisplayRole:
        return n.cells[idx.column()];
    case Qt::ToolTipRole:
        return n.tooltip.isEmpty() ? QVariant() : QVariant(n.tooltip);
    case Qt::FontRole:
        if (n.target.kind == NodeKind::Process || lit) {
            QFont f;
            f.setBold(true);
            return f;
        }
        return {};
    case Qt::BackgroundRole:
        if (lit) return QBrush(QColor(255, 196, 0, 70)); // the timeline's highlighted lane tint
        return {};
    case ProcessRole:
        return n.target.process;
    case HandleRole:
        return QVariant::fromValue<qulonglong>(n.target.handle);
    case IsLinkRole:
        return n.target.link;
    case HighlightedRole:
        return lit;
    case Qt::TextAlignmentRole:
        return idx.column() == Name || idx.column() == Shared
                   ? QVariant()
                   : QVariant(int(Qt::AlignRight | Qt::AlignVCenter));
    default:
        return {};
    }
}

QVariant ProcessTreeModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
    static const char* kNames[] = {"Process / pool / stream", "Peak reserved", "Peak used / live",
                                   "Allocs", "Shared"};
    static const char* kTips[] = {
        "Processes (children under their parent), their pools and streams; under an exported pool, "
        "the pools other processes imported from it (\u21c4)",
        "Highest reserved memory (a process: the sum over its pools)",
        "Pool: highest used memory. Stream: highest bytes allocated on it and not yet freed",
        "Number of successful allocations",
        "Pools exported to or imported from another process, and how they were linked"};
    if (role == Qt::DisplayRole) return tr(kNames[section]);
    if (role == Qt::ToolTipRole) return tr(kTips[section]);
    return {};
}

} // namespace poolscope::ui
