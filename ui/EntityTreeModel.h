#pragma once
// Pools & streams tree: device > pools, device > streams, with each entity's statistics from the
// Timeline; a device's row holds its pools' totals (Timeline::deviceTotals). Thin: the rows are built in resetData; data() reads one precomputed value.

#include "Selection.h"
#include "TraceSnapshot.h"

#include <QAbstractItemModel>
#include <memory>
#include <vector>

namespace poolscope::ui {

class EntityTreeModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column {
        Name,
        PeakReserved,
        PeakUsed,
        Allocated,
        Allocations,
        LiveAtEnd,
        // The replay cursor's instant: a pool's reserved and used bytes, a stream's live bytes
        // (two short columns: one "reserved X · used Y" cell was cut in the dock).
        ReservedAtCursor,
        UsedAtCursor,
        ColumnCount
    };
    enum Role { LaneRole = Qt::UserRole + 1, HandleRole };

    using QAbstractItemModel::QAbstractItemModel;

    void resetData(const TraceSnapshot& s);
    // Streams with no allocation (nor a failed one): listed only when asked for.
    void setShowIdleStreams(bool show);
    // Fills the "At cursor" column (INT64_MIN clears it). Cheap: one step lookup per entity.
    void setCursorTime(int64_t t);
    Selection selectionFor(const QModelIndex& index) const;
    QModelIndex indexFor(Selection::Kind kind, uint64_t handle) const;

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
        Selection::Kind kind = Selection::None; // None = device / group
        uint64_t handle = 0;
        int lane = -1;
        int device = -1; // device and totals rows: the device
        bool totals = false; // the device's pools together
        QString cells[ColumnCount];
        QString tooltip;
    };
    std::vector<Node> nodes_;
    std::vector<int> roots_;
    TraceSnapshot snap_;
    bool showIdleStreams_ = false;
};

} // namespace poolscope::ui
