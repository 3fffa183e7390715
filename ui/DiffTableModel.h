#pragma once
// The compare mode's table: what `poolscope diff` prints (interop::diffTraces), as a tree.
// Totals, Pools and Streams (each matched entity, then its metrics), Call sites. Values in human
// units, B - A signed and coloured (higher in B red, lower green, a changed setting amber); only
// what differs unless showUnchanged. Cell texts are core's (interop::diffValueText /
// diffDeltaText), so the table and the CLI never disagree.

#include "poolscope/interop/Diff.h"

#include <QAbstractItemModel>
#include <memory>
#include <vector>

namespace poolscope::ui {

class DiffTableModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column { Name, A, B, Delta, ColumnCount };
    enum class RowKind { Group, Pool, Stream, Metric, Site, Note };
    enum Role { KindRole = Qt::UserRole + 1, DirectionRole, HandleARole, HandleBRole };

    using QAbstractItemModel::QAbstractItemModel;

    void setDiff(std::shared_ptr<const interop::TraceDiff> d);
    const interop::TraceDiff* diff() const { return diff_.get(); }
    void setShowUnchanged(bool show);
    bool showUnchanged() const { return showUnchanged_; }

    RowKind kindOf(const QModelIndex& index) const;

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    struct Node {
        int parent = -1;
        int rowInParent = 0;
        std::vector<int> children;
        RowKind kind = RowKind::Group;
        QString cells[ColumnCount];
        QString tooltip;
        int direction = 0;                 // +1 higher in B, -1 lower, 0 same; 2: a setting changed
        uint64_t handleA = 0, handleB = 0; // Pool / Stream rows
    };
    void rebuild();
    int add(int parent, Node n);
    void addEntities(const char* title, const std::vector<interop::DiffEntity>& list, RowKind kind);
    void addValues(int parent, const std::vector<interop::DiffValue>& values);

    std::shared_ptr<const interop::TraceDiff> diff_;
    bool showUnchanged_ = false;
    std::vector<Node> nodes_;
    std::vector<int> roots_;
};

} // namespace poolscope::ui
