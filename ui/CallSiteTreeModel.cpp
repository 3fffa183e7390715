#include "CallSiteTreeModel.h"

#include "poolscope/Units.h"

#include <QBrush>
#include <QColor>

namespace poolscope::ui {

namespace {
QString qb(uint64_t v) {
    return QString::fromStdString(formatBytes(v));
}
} // namespace

void CallSiteTreeModel::setTree(std::shared_ptr<const analysis::SiteTree> tree) {
    beginResetModel();
    tree_ = std::move(tree);
    rowInParent_.assign(tree_ ? tree_->nodes.size() : 0, 0);
    if (tree_)
        for (const analysis::SiteNode& n : tree_->nodes)
            for (size_t r = 0; r < n.children.size(); ++r) rowInParent_[n.children[r]] = int(r);
    endResetModel();
}

uint32_t CallSiteTreeModel::nodeOf(const QModelIndex& index) const {
    return index.isValid() ? uint32_t(index.internalId()) : 0;
}

QModelIndex CallSiteTreeModel::indexOfNode(uint32_t node, int column) const {
    if (!tree_ || node == 0 || node >= tree_->nodes.size()) return {};
    return createIndex(rowInParent_[node], column, quintptr(node));
}

QModelIndex CallSiteTreeModel::index(int row, int column, const QModelIndex& parent) const {
    if (!tree_ || row < 0 || column < 0 || column >= ColumnCount) return {};
    const uint32_t p = nodeOf(parent);
    if (p >= tree_->nodes.size()) return {};
    const auto& ch = tree_->nodes[p].children;
    if (size_t(row) >= ch.size()) return {};
    return createIndex(row, column, quintptr(ch[size_t(row)]));
}

QModelIndex CallSiteTreeModel::parent(const QModelIndex& child) const {
    if (!tree_ || !child.isValid()) return {};
    const uint32_t n = nodeOf(child);
    if (n >= tree_->nodes.size()) return {};
    return indexOfNode(tree_->nodes[n].parent);
}

int CallSiteTreeModel::rowCount(const QModelIndex& parent) const {
    if (!tree_ || (parent.isValid() && parent.column() != 0)) return 0;
    const uint32_t p = nodeOf(parent);
    return p < tree_->nodes.size() ? int(tree_->nodes[p].children.size()) : 0;
}

int CallSiteTreeModel::columnCount(const QModelIndex&) const {
    return ColumnCount;
}

QVariant CallSiteTreeModel::data(const QModelIndex& index, int role) const {
    if (!tree_ || !index.isValid()) return {};
    const uint32_t id = nodeOf(index);
    if (id >= tree_->nodes.size()) return {};
    const analysis::SiteNode& n = tree_->nodes[id];
    const int c = index.column();
    switch (role) {
    case Qt::DisplayRole:
        switch (c) {
        case Frame: return QString::fromStdString(n.frame);
        case PeakLive: return qb(n.peakLive);
        case Allocated: return qb(n.bytesAllocated);
        case Count: return QStringLiteral("%L1").arg(n.count);
        case LiveAtEnd:
            return n.liveAtEndCount ? QStringLiteral("%1 in %L2").arg(qb(n.liveAtEndBytes))
                                          .arg(n.liveAtEndCount)
                                    : QStringLiteral("–");
        }
        break;
    case SortRole:
        switch (c) {
        case Frame: return QString::fromStdString(n.frame);
        case PeakLive: return qulonglong(n.peakLive);
        case Allocated: return qulonglong(n.bytesAllocated);
        case Count: return qulonglong(n.count);
        case LiveAtEnd: return qulonglong(n.liveAtEndBytes);
        }
        break;
    case NodeRole: return uint(id);
    case Qt::TextAlignmentRole:
        if (c != Frame) return QVariant(Qt::AlignRight | Qt::AlignVCenter);
        break;
    case Qt::ForegroundRole:
        if (c == Frame && n.kind == analysis::StackFrame::Kind::None) return QBrush(Qt::gray);
        if (c == LiveAtEnd && n.liveAtEndCount) return QBrush(QColor(200, 40, 40));
        break;
    case Qt::ToolTipRole: {
        const QString kind = n.kind == analysis::StackFrame::Kind::Python   ? tr("Python frame")
                             : n.kind == analysis::StackFrame::Kind::Native ? tr("native frame")
                                                                           : QString();
        QString tip = QStringLiteral("<b>%1</b>").arg(QString::fromStdString(n.frame).toHtmlEscaped());
        if (!kind.isEmpty()) tip += QStringLiteral(" <i>(%1)</i>").arg(kind);
        tip += tr("<br>peak live %1 · allocated %2 in %L3 allocations")
                   .arg(qb(n.peakLive), qb(n.bytesAllocated))
                   .arg(n.count);
        if (n.liveAtEndCount)
            tip += tr("<br>still live at the end: %1 in %L2").arg(qb(n.liveAtEndBytes)).arg(n.liveAtEndCount);
        tip += tr("<br>%n call site(s)", "", int(n.sites.size()));
        return tip;
    }
    default: break;
    }
    return {};
}

QVariant CallSiteTreeModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal) return {};
    if (role == Qt::DisplayRole) {
        switch (section) {
        case Frame: return tr("Call site");
        case PeakLive: return tr("Peak live");
        case Allocated: return tr("Allocated");
        case Count: return tr("Count");
        case LiveAtEnd: return tr("Live at end");
        }
    }
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case PeakLive: return tr("The most bytes these allocations held at one instant");
        case Allocated: return tr("Bytes allocated in total (every allocation counted once)");
        case Count: return tr("Allocations");
        case LiveAtEnd: return tr("Bytes still allocated when the trace ended");
        }
    }
    if (role == Qt::TextAlignmentRole && section != Frame)
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

} // namespace poolscope::ui
