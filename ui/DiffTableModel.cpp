#include "DiffTableModel.h"

#include "poolscope/Units.h"

#include <QBrush>
#include <QColor>
#include <QFont>
#include <algorithm>

namespace poolscope::ui {

namespace {
QString qs(const std::string& s) {
    return QString::fromStdString(s);
}
bool anyChange(const interop::DiffEntity& e) {
    return !(e.inA && e.inB) ||
           std::any_of(e.values.begin(), e.values.end(),
                       [](const interop::DiffValue& v) { return v.changed(); });
}
} // namespace

void DiffTableModel::setDiff(std::shared_ptr<const interop::TraceDiff> d) {
    diff_ = std::move(d);
    rebuild();
}

void DiffTableModel::setShowUnchanged(bool show) {
    if (show == showUnchanged_) return;
    showUnchanged_ = show;
    rebuild();
}

int DiffTableModel::add(int parent, Node n) {
    n.parent = parent;
    const int idx = int(nodes_.size());
    std::vector<int>& list = parent < 0 ? roots_ : nodes_[size_t(parent)].children;
    n.rowInParent = int(list.size());
    list.push_back(idx);
    nodes_.push_back(std::move(n));
    return idx;
}

void DiffTableModel::addValues(int parent, const std::vector<interop::DiffValue>& values) {
    for (const interop::DiffValue& v : values) {
        if (!showUnchanged_ && !v.changed()) continue;
        Node n;
        n.kind = RowKind::Metric;
        n.cells[Name] = qs(v.metric);
        n.cells[A] = qs(interop::diffValueText(v, true));
        n.cells[B] = qs(interop::diffValueText(v, false));
        n.cells[Delta] = qs(interop::diffDeltaText(v));
        n.direction = v.unit == interop::DiffValue::Unit::Text ? (v.changed() ? 2 : 0)
                                                               : interop::diffDirection(v);
        add(parent, n);
    }
}

void DiffTableModel::addEntities(const char* title, const std::vector<interop::DiffEntity>& list,
                                 RowKind kind) {
    Node g;
    g.kind = RowKind::Group;
    size_t both = 0, onlyA = 0, onlyB = 0, same = 0;
    for (const auto& e : list) {
        both += e.inA && e.inB;
        onlyA += e.inA && !e.inB;
        onlyB += !e.inA && e.inB;
        same += !anyChange(e);
    }
    g.cells[Name] = tr(title);
    QStringList parts;
    parts << tr("%1 in both").arg(both);
    if (onlyA) parts << tr("%1 only in A").arg(onlyA);
    if (onlyB) parts << tr("%1 only in B").arg(onlyB);
    if (same && !showUnchanged_) parts << tr("%1 with no difference not listed").arg(same);
    g.cells[Delta] = parts.join(QStringLiteral(", "));
    g.tooltip = kind == RowKind::Pool
                    ? tr("Pools are matched by device, kind and creation order (handles change "
                         "between runs)")
                    : tr("Streams are matched by the runtime's special handles, else by device "
                         "and order of first use");
    const int group = add(-1, g);
    for (const interop::DiffEntity& e : list) {
        if (!showUnchanged_ && !anyChange(e)) continue;
        Node n;
        n.kind = kind;
        n.handleA = e.handleA;
        n.handleB = e.handleB;
        n.cells[Name] = qs(e.key);
        n.cells[A] = e.inA ? qs(e.nameA) : tr("—");
        n.cells[B] = e.inB ? qs(e.nameB) : tr("—");
        n.cells[Delta] = e.inA && e.inB ? QString() : e.inA ? tr("only in A") : tr("only in B");
        n.direction = e.inA && e.inB ? 0 : e.inA ? -1 : 1;
        n.tooltip = tr("matched as \"%1\"").arg(qs(e.key));
        const int row = add(group, n);
        addValues(row, e.values);
    }
}

void DiffTableModel::rebuild() {
    beginResetModel();
    nodes_.clear();
    roots_.clear();
    if (diff_) {
        Node totals;
        totals.kind = RowKind::Group;
        totals.cells[Name] = tr("Totals");
        const int t = add(-1, totals);
        addValues(t, diff_->totals);
        if (nodes_[size_t(t)].children.empty())
            nodes_[size_t(t)].cells[Delta] = tr("no difference");
        addEntities("Pools", diff_->pools, RowKind::Pool);
        addEntities("Streams", diff_->streams, RowKind::Stream);
        Node sites;
        sites.kind = RowKind::Group;
        sites.cells[Name] = tr("Call sites (bytes allocated over the run)");
        const int s = add(-1, sites);
        if (!diff_->sitesCompared) {
            Node note;
            note.kind = RowKind::Note;
            note.cells[Name] = tr("not compared: %1").arg(qs(diff_->sitesNote));
            add(s, note);
        }
        size_t sameSites = 0;
        for (const interop::SiteDiff& sd : diff_->sites) {
            if (!showUnchanged_ && sd.bytesA == sd.bytesB && sd.countA == sd.countB) {
                ++sameSites;
                continue;
            }
            interop::DiffValue v;
            v.unit = interop::DiffValue::Unit::Bytes;
            v.a = sd.bytesA;
            v.b = sd.bytesB;
            Node n;
            n.kind = RowKind::Site;
            n.cells[Name] = qs(sd.site);
            n.cells[A] = qs(interop::diffValueText(v, true));
            n.cells[B] = qs(interop::diffValueText(v, false));
            n.cells[Delta] = qs(interop::diffDeltaText(v));
            n.direction = interop::diffDirection(v);
            n.tooltip = tr("%1\n%2 allocations in A, %3 in B")
                            .arg(qs(sd.site))
                            .arg(sd.countA)
                            .arg(sd.countB);
            add(s, n);
        }
        if (sameSites)
            nodes_[size_t(s)].cells[Delta] = tr("%1 with no difference not listed").arg(sameSites);
    }
    endResetModel();
}

DiffTableModel::RowKind DiffTableModel::kindOf(const QModelIndex& idx) const {
    return idx.isValid() ? nodes_[size_t(idx.internalId())].kind : RowKind::Group;
}

QModelIndex DiffTableModel::index(int row, int column, const QModelIndex& parent) const {
    if (row < 0 || column < 0 || column >= ColumnCount) return {};
    if (parent.isValid() && parent.column() != 0) return {};
    const std::vector<int>& list =
        parent.isValid() ? nodes_[size_t(parent.internalId())].children : roots_;
    if (size_t(row) >= list.size()) return {};
    return createIndex(row, column, quintptr(list[size_t(row)]));
}

QModelIndex DiffTableModel::parent(const QModelIndex& child) const {
    if (!child.isValid()) return {};
    const int p = nodes_[size_t(child.internalId())].parent;
    return p < 0 ? QModelIndex() : createIndex(nodes_[size_t(p)].rowInParent, 0, quintptr(p));
}

int DiffTableModel::rowCount(const QModelIndex& parent) const {
    if (!parent.isValid()) return int(roots_.size());
    if (parent.column() != 0) return 0;
    return int(nodes_[size_t(parent.internalId())].children.size());
}

int DiffTableModel::columnCount(const QModelIndex&) const {
    return ColumnCount;
}

QVariant DiffTableModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid()) return {};
    const Node& n = nodes_[size_t(idx.internalId())];
    switch (role) {
    case Qt::DisplayRole:
        return n.cells[idx.column()];
    case Qt::ToolTipRole:
        return n.tooltip.isEmpty() ? QVariant() : QVariant(n.tooltip);
    case Qt::ForegroundRole:
        if (idx.column() != Delta || n.kind == RowKind::Group) return {};
        if (n.direction == 1) return QBrush(QColor(198, 40, 40));  // higher in B
        if (n.direction == -1) return QBrush(QColor(46, 125, 50)); // lower in B
        if (n.direction == 2) return QBrush(QColor(178, 106, 0));  // a setting changed
        return {};
    case Qt::FontRole:
        if (n.kind == RowKind::Group || n.kind == RowKind::Pool || n.kind == RowKind::Stream ||
            n.kind == RowKind::Note) {
            QFont f;
            f.setBold(n.kind == RowKind::Group);
            f.setItalic(n.kind == RowKind::Note);
            return f;
        }
        return {};
    case Qt::TextAlignmentRole:
        if (n.kind == RowKind::Metric || n.kind == RowKind::Site)
            return idx.column() == Name ? QVariant()
                                        : QVariant(int(Qt::AlignRight | Qt::AlignVCenter));
        return {};
    case KindRole:
        return int(n.kind);
    case DirectionRole:
        return n.direction;
    case HandleARole:
        return QVariant::fromValue<qulonglong>(n.handleA);
    case HandleBRole:
        return QVariant::fromValue<qulonglong>(n.handleB);
    default:
        return {};
    }
}

QVariant DiffTableModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
    static const char* kNames[] = {"Metric", "A", "B", "B \u2212 A"};
    static const char* kTips[] = {
        "What is compared: totals, then each pool and stream matched across the runs",
        "The first trace (the baseline)", "The second trace",
        "Difference, with the change in percent of A: red where B is higher, green "
        "where it is lower, amber where a setting changed"};
    if (role == Qt::DisplayRole) return tr(kNames[section]);
    if (role == Qt::ToolTipRole) return tr(kTips[section]);
    return {};
}

} // namespace poolscope::ui
