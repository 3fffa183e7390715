#pragma once
// The Processes tree of the window's lanes per process: each process (children under their
// parent), its pools and its streams; under a pool another process imported, a link row for the
// importing process's pool ("⇄ pool #1 (imported) · ipc (pid 527)"). Rows are built in
// resetData; data() reads precomputed cells. Highlighted pools (a selected pool and the pools
// linked to it) are drawn bold on a tinted row.

#include "ProcessSet.h"
#include "Selection.h"

#include <QAbstractItemModel>
#include <utility>
#include <vector>

namespace poolscope::ui {

class ProcessTreeModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column { Name, PeakReserved, PeakUsed, Allocations, Shared, ColumnCount };
    enum Role { ProcessRole = Qt::UserRole + 1, HandleRole, IsLinkRole, HighlightedRole };
    enum class NodeKind { Process, Pool, Stream, Link };

    using QAbstractItemModel::QAbstractItemModel;

    void resetData(const ProcessSet* set); // the set must outlive the model's use of it

    // What a row stands for: a process, one of its pools or streams; a link row stands for the
    // importing process's pool (process = the importer).
    struct Target {
        int process = -1;
        NodeKind kind = NodeKind::Process;
        uint64_t handle = 0;
        bool link = false;
    };
    Target targetFor(const QModelIndex& index) const;
    // The row of a process (kind Process) or of one of its pools / streams (not link rows).
    QModelIndex indexFor(int process, NodeKind kind, uint64_t handle = 0) const;
    // The link rows that stand for (process, pool).
    QModelIndexList linkRowsFor(int process, uint64_t pool) const;
    void setHighlightedPools(const std::vector<std::pair<int, uint64_t>>& pools);

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    struct Node {
        int parent = -1; // node index, -1 for top level
        int rowInParent = 0;
        std::vector<int> children;
        Target target;
        QString cells[ColumnCount];
        QString tooltip;
    };
    int add(int parent, Node n);
    QModelIndex indexOfNode(int node) const;

    std::vector<Node> nodes_;
    std::vector<int> roots_;
    std::vector<std::pair<int, uint64_t>> highlighted_;
};

} // namespace poolscope::ui
