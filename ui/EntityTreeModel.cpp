#include "EntityTreeModel.h"

#include "poolscope/EventText.h"
#include "poolscope/Units.h"

#include <set>

namespace poolscope::ui {

namespace {
QString qb(uint64_t v) {
    return QString::fromStdString(formatBytes(v));
}
} // namespace

void EntityTreeModel::resetData(const TraceSnapshot& s) {
    beginResetModel();
    snap_ = s;
    nodes_.clear();
    roots_.clear();
    if (s.valid()) {
        const Timeline& tl = *s.timeline;
        const LaneLayout& layout = *s.layout;
        auto add = [&](int parent, Node n) {
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
        };
        std::set<int> devices;
        for (const Lane& l : layout.lanes)
            if (l.kind == LaneKind::Device) devices.insert(l.device);
        for (size_t li = 0; li < layout.lanes.size(); ++li) {
            const Lane& l = layout.lanes[li];
            if (l.kind != LaneKind::Device) continue;
            Node d;
            // "GPU 0 · NVIDIA H100 80GB HBM3 · 79.2 GiB": the window spans it over the row.
            std::string name = l.title;
            for (const DeviceInfo& di : tl.devices)
                if (di.ordinal == l.device) {
                    if (!di.name.empty()) name += " · " + di.name;
                    if (di.totalMemory) name += " · " + formatBytes(di.totalMemory);
                }
            d.cells[Name] = QString::fromStdString(name);
            d.lane = int(li);
            d.device = l.device;
            const int dev = add(-1, d);
            // The device's pools together (peaks of their sum at one instant), where that says
            // more than the one pool's own row: several pools, or several devices to compare.
            const DeviceTotals* t = tl.totalsOf(l.device);
            if (t && (t->poolCount > 1 || tl.deviceTotals.size() > 1)) {
                Node n;
                n.device = l.device;
                n.totals = true;
                n.cells[Name] = tr("all pools together");
                n.cells[PeakReserved] = qb(t->peakReserved);
                n.cells[PeakUsed] = qb(t->peakUsed);
                n.cells[Allocated] = qb(t->bytesAllocated);
                n.cells[Allocations] = QString::number(t->allocCount);
                n.cells[LiveAtEnd] =
                    t->liveAtEndCount
                        ? QStringLiteral("%1 in %2").arg(qb(t->liveAtEndBytes)).arg(t->liveAtEndCount)
                        : QStringLiteral("none");
                n.tooltip = tr("The %1 pool(s) of %2 together: peak reserved and peak used are the "
                               "highest sums at one instant, not the sums of the pools' peaks")
                                .arg(t->poolCount)
                                .arg(QString::fromStdString(l.title));
                add(dev, n);
            }
            for (size_t pi = 0; pi < tl.pools.size(); ++pi) {
                const PoolTimeline& p = tl.pools[pi];
                if (p.info.device != l.device || layout.laneOfPool(p.info.handle) < 0) continue;
                Node n;
                n.kind = Selection::Pool;
                n.handle = p.info.handle;
                n.lane = layout.laneOfPool(p.info.handle);
                n.cells[Name] = layout.poolName(p.info.handle);
                n.cells[PeakReserved] = qb(p.peakReserved);
                n.cells[PeakUsed] = qb(p.peakUsed);
                n.cells[Allocated] = qb(p.bytesAllocated);
                n.cells[Allocations] = QString::number(p.allocCount);
                n.cells[LiveAtEnd] =
                    p.liveAtEndCount
                        ? QStringLiteral("%1 in %2").arg(qb(p.liveAtEndBytes)).arg(p.liveAtEndCount)
                        : QStringLiteral("none");
                n.tooltip = QStringLiteral("pool %1").arg(hexHandle(p.info.handle));
                const int poolNode = add(dev, n);
                // Pool access across devices (cudaMemPoolSetAccess): one row per location.
                for (const PoolAccess& a : p.access) {
                    Node x;
                    // Short ("GPU 1: read-write", as the details pane says it): a third level
                    // of indentation already widens the name column the dock has to fit.
                    x.cells[Name] = QString::fromStdString(
                        (a.locationType <= 1 ? deviceLabel(a.device)
                                             : "location type " + std::to_string(a.locationType)) +
                        ": " + (a.flags == 0 ? "none" : a.flags == 1 ? "read" : "read-write"));
                    x.tooltip = QString::fromStdString(
                        "cudaMemPoolSetAccess: " +
                        (a.locationType <= 1 ? deviceLabel(a.device) : std::string("that location")) +
                        " " + describeAccessFlags(a.flags) + ", since " +
                        formatDuration(a.tsNs - tl.t0) + " (the latest call for it)");
                    add(poolNode, x);
                }
            }
            for (const StreamTimeline& st : tl.streams) {
                if (st.info.device != l.device &&
                    !(st.info.device < 0 && l.device == *devices.begin()))
                    continue;
                if (!showIdleStreams_ && st.allocCount == 0 && st.freeCount == 0 &&
                    st.failedCount == 0)
                    continue;
                Node n;
                n.kind = Selection::Stream;
                n.handle = st.info.handle;
                n.lane = layout.laneOfStream(st.info.handle);
                n.cells[Name] = layout.streamName(st.info.handle);
                n.cells[PeakUsed] = qb(st.peakLive);
                n.cells[Allocated] = qb(st.bytesAllocated);
                n.cells[Allocations] = QString::number(st.allocCount);
                n.cells[LiveAtEnd] = st.liveAtEndCount ? QStringLiteral("%1 in %2")
                                                             .arg(qb(st.liveAtEndBytes))
                                                             .arg(st.liveAtEndCount)
                                                       : QStringLiteral("none");
                n.tooltip = QStringLiteral("stream %1").arg(hexHandle(st.info.handle));
                add(dev, n);
            }
        }
    }
    endResetModel();
}

void EntityTreeModel::setShowIdleStreams(bool show) {
    if (show == showIdleStreams_) return;
    showIdleStreams_ = show;
    if (snap_.valid()) resetData(TraceSnapshot(snap_));
}

void EntityTreeModel::setCursorTime(int64_t t) {
    if (!snap_.valid() || nodes_.empty()) return;
    const Timeline& tl = *snap_.timeline;
    for (Node& n : nodes_) {
        QString reserved, used;
        if (t != INT64_MIN) {
            if (n.totals) {
                uint64_t r = 0, u = 0;
                for (const PoolTimeline& p : tl.pools)
                    if (p.info.device == n.device) {
                        r += p.reserved.valueAt(t);
                        u += p.used.valueAt(t);
                    }
                reserved = qb(r);
                used = qb(u);
            } else if (n.kind == Selection::Pool) {
                if (const PoolTimeline* p = tl.pool(n.handle)) {
                    reserved = qb(p->reserved.valueAt(t));
                    used = qb(p->used.valueAt(t));
                }
            } else if (n.kind == Selection::Stream) {
                if (const StreamTimeline* s = tl.stream(n.handle))
                    used = qb(s->liveBytes.valueAt(t));
            }
        }
        n.cells[ReservedAtCursor] = reserved;
        n.cells[UsedAtCursor] = used;
    }
    // One dataChanged per parent: the columns' cells changed everywhere.
    if (!roots_.empty()) {
        emit dataChanged(index(0, ReservedAtCursor), index(int(roots_.size()) - 1, UsedAtCursor));
        for (size_t r = 0; r < roots_.size(); ++r) {
            const Node& root = nodes_[size_t(roots_[r])];
            if (root.children.empty()) continue;
            const QModelIndex parent = index(int(r), 0);
            emit dataChanged(index(0, ReservedAtCursor, parent),
                             index(int(root.children.size()) - 1, UsedAtCursor, parent));
        }
    }
}

Selection EntityTreeModel::selectionFor(const QModelIndex& idx) const {
    if (!idx.isValid()) return {};
    const Node& n = nodes_[size_t(idx.internalId())];
    if (n.kind == Selection::Pool || n.kind == Selection::Stream) return {n.kind, 0, n.handle, {}};
    return {};
}

QModelIndex EntityTreeModel::indexFor(Selection::Kind kind, uint64_t handle) const {
    for (size_t i = 0; i < nodes_.size(); ++i)
        if (nodes_[i].kind == kind && nodes_[i].handle == handle)
            return createIndex(nodes_[i].rowInParent, 0, quintptr(i));
    return {};
}

QModelIndex EntityTreeModel::index(int row, int column, const QModelIndex& parent) const {
    if (row < 0 || column < 0 || column >= ColumnCount) return {};
    const std::vector<int>& list =
        parent.isValid() ? nodes_[size_t(parent.internalId())].children : roots_;
    if (parent.isValid() && parent.column() != 0) return {};
    if (size_t(row) >= list.size()) return {};
    return createIndex(row, column, quintptr(list[size_t(row)]));
}

QModelIndex EntityTreeModel::parent(const QModelIndex& child) const {
    if (!child.isValid()) return {};
    const int p = nodes_[size_t(child.internalId())].parent;
    if (p < 0) return {};
    return createIndex(nodes_[size_t(p)].rowInParent, 0, quintptr(p));
}

int EntityTreeModel::rowCount(const QModelIndex& parent) const {
    if (!parent.isValid()) return int(roots_.size());
    if (parent.column() != 0) return 0;
    return int(nodes_[size_t(parent.internalId())].children.size());
}

int EntityTreeModel::columnCount(const QModelIndex&) const {
    return ColumnCount;
}

QVariant EntityTreeModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid()) return {};
    const Node& n = nodes_[size_t(idx.internalId())];
    switch (role) {
    case Qt::DisplayRole:
        return n.cells[idx.column()];
    case Qt::ToolTipRole:
        return n.tooltip.isEmpty() ? QVariant() : QVariant(n.tooltip);
    case LaneRole:
        return n.lane;
    case HandleRole:
        return QVariant::fromValue<qulonglong>(n.handle);
    case Qt::TextAlignmentRole:
        return idx.column() == Name ? QVariant() : QVariant(int(Qt::AlignRight | Qt::AlignVCenter));
    default:
        return {};
    }
}

QVariant EntityTreeModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal) return {};
    // Two-line headers: the values are short ("2.22 GiB"), and one-line headers made the
    // columns twice as wide as them (the dock shares the bottom with the events table).
    static const char* kNames[] = {"Pool / stream", "Peak\nreserved",    "Peak used\n/ live",
                                   "Allocated",     "Allocs",             "Live\nat end",
                                   "Reserved\nat cursor", "Used / live\nat cursor"};
    static const char* kTips[] = {
        "Device, its pools and its streams",
        "Highest reserved memory of the pool (memory taken from the device). Device: the "
        "highest sum of its pools' reserved memory at one instant",
        "Pool: highest used memory. Stream: highest bytes allocated on it and not yet freed. "
        "Device: the highest sum of its pools' used memory at one instant",
        "Total bytes allocated",
        "Number of successful allocations",
        "Bytes and blocks never freed by the end of the trace",
        "A pool's reserved memory at the replay cursor",
        "A pool's used memory, or a stream's live bytes, at the replay cursor"};
    if (section < 0 || section >= ColumnCount) return {};
    if (role == Qt::DisplayRole) return tr(kNames[section]);
    if (role == Qt::ToolTipRole) return tr(kTips[section]);
    return {};
}

} // namespace poolscope::ui
