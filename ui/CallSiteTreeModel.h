#pragma once
// The Call sites tree (issue #13): analysis::SiteTree (core, where it is built and tested) as a
// Qt item model. The root's children are the top-level rows; each row is one frame, with the
// bytes of the allocations whose stacks pass through it.

#include "poolscope/analysis/SiteTree.h"

#include <QAbstractItemModel>
#include <memory>
#include <vector>

namespace poolscope::ui {

class CallSiteTreeModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column { Frame, PeakLive, Allocated, Count, LiveAtEnd, ColumnCount };
    enum Role { NodeRole = Qt::UserRole + 1, SortRole };

    using QAbstractItemModel::QAbstractItemModel;

    void setTree(std::shared_ptr<const analysis::SiteTree> tree);
    const analysis::SiteTree* tree() const { return tree_.get(); }
    // The tree node of an index (0, the root, for an invalid index).
    uint32_t nodeOf(const QModelIndex& index) const;
    QModelIndex indexOfNode(uint32_t node, int column = Frame) const;

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    std::shared_ptr<const analysis::SiteTree> tree_;
    std::vector<int> rowInParent_; // per node
};

} // namespace poolscope::ui
