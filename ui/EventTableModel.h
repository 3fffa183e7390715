#pragma once
// Thin table model over an immutable vector of poolscope::Event (the result of an event query).
// data() only formats one field of one event; the filtering happened in the query job.
// Sorting permutes an index vector (4 bytes a row), never the 96-byte events: 200k rows sort in
// a few ms, and a new query result is shown in the current sort order.

#include "LaneLayout.h"
#include "poolscope/Event.h"

#include <QAbstractTableModel>
#include <memory>
#include <vector>

namespace poolscope::ui {

class EventTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Seq, Time, Kind, Stream, Pool, Size, Pointer, Result, Thread, Info, ColumnCount };
    enum Role { EventSeqRole = Qt::UserRole + 1, EventTimeRole };

    using QAbstractTableModel::QAbstractTableModel;

    // traceT0: times are shown relative to it. layout: names pools and streams as the timeline
    // does.
    void resetData(std::shared_ptr<const std::vector<Event>> events, int64_t traceT0,
                   std::shared_ptr<const LaneLayout> layout);
    const Event* eventAt(int row) const; // in the current (sorted) row order
    int rowOfSeq(uint64_t seq) const;    // -1 when not loaded
    int sortColumn() const { return sortColumn_; }
    Qt::SortOrder sortOrder() const { return sortOrder_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;
    // column -1 restores query order (time). Ties keep query order in both directions.
    void sort(int column, Qt::SortOrder order = Qt::AscendingOrder) override;

    static QString describe(const Event& e); // the Info column: what this kind's values mean

private:
    void buildOrder(); // order_ from sortColumn_/sortOrder_ (no signals)
    const Event& at(size_t row) const { return (*events_)[order_.empty() ? row : order_[row]]; }

    std::shared_ptr<const std::vector<Event>> events_ = std::make_shared<std::vector<Event>>();
    std::shared_ptr<const LaneLayout> layout_;
    int64_t t0_ = 0;
    std::vector<uint32_t> order_; // row -> index into events_; empty: identity
    int sortColumn_ = -1;
    Qt::SortOrder sortOrder_ = Qt::AscendingOrder;
};

} // namespace poolscope::ui
