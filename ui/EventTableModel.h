#pragma once
// Thin table model over an immutable vector of poolscope::Event (the result of an event query).
// data() only formats one field of one event; the filtering happened in the query job.
// Sorting permutes an index vector (4 bytes a row), never the 96-byte events: 200k rows sort in
// a few ms, and a new query result is shown in the current sort order.
// Paged (issue #15, more matches than the table holds): only fetched pages of rows are held, a
// bounded number, and the model shows a window of rows from base() on, which EventsPanel moves
// with its own scroll bar: a view of 100 M rows would cost its (hidden) vertical QHeaderView 8
// bytes a row. Rows not fetched show placeholders and ask for their page (pageWanted).

#include "LaneLayout.h"
#include "poolscope/Event.h"

#include <QAbstractTableModel>
#include <memory>
#include <unordered_map>
#include <unordered_set>
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
    int rowOfSeq(uint64_t seq) const;    // -1 when not loaded (or outside the paged window)

    void resetPaged(uint64_t total, size_t pageRows, size_t maxPages, int windowRows,
                    int64_t traceT0, std::shared_ptr<const LaneLayout> layout);
    bool paged() const { return paged_; }
    uint64_t totalRows() const { return paged_ ? total_ : events_->size(); } // every match
    uint64_t base() const { return base_; } // the first row shown (0 unless paged)
    void setBase(uint64_t base);            // paged: moves the window (dataChanged)
    void setWindowRows(int rows);           // paged: rows shown at once
    size_t pageRows() const { return pageRows_; }
    void setPage(uint64_t page, std::shared_ptr<const std::vector<Event>> rows);
    bool hasPage(uint64_t page) const { return pages_.count(page) != 0; }
    size_t pagesHeld() const { return pages_.size(); }
    void forgetRequest(uint64_t page) { requested_.erase(page); }
    const Event* eventAtAbsolute(uint64_t row) const; // paged: null when its page is not held
    int64_t absoluteRowOfSeq(uint64_t seq) const;     // in the pages held; -1 if not there
    int sortColumn() const { return sortColumn_; }
    Qt::SortOrder sortOrder() const { return sortOrder_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;
    // column -1 restores query order (time). Ties keep query order in both directions.
    void sort(int column, Qt::SortOrder order = Qt::AscendingOrder) override;

    static QString describe(const Event& e); // the Info column: what this kind's values mean

signals:
    void pageWanted(quint64 page);

private:
    void buildOrder(); // order_ from sortColumn_/sortOrder_ (no signals)
    const Event& at(size_t row) const { return (*events_)[order_.empty() ? row : order_[row]]; }

    std::shared_ptr<const std::vector<Event>> events_ = std::make_shared<std::vector<Event>>();
    std::shared_ptr<const LaneLayout> layout_;
    int64_t t0_ = 0;
    std::vector<uint32_t> order_; // row -> index into events_; empty: identity
    int sortColumn_ = -1;
    Qt::SortOrder sortOrder_ = Qt::AscendingOrder;

    struct Page {
        std::shared_ptr<const std::vector<Event>> rows;
        mutable uint64_t used = 0; // tick of its last use: the least recent goes first
    };
    bool paged_ = false;
    uint64_t total_ = 0, base_ = 0;
    int windowRows_ = 0;
    size_t pageRows_ = 1, maxPages_ = 1;
    std::unordered_map<uint64_t, Page> pages_;
    mutable std::unordered_set<uint64_t> requested_;
    mutable uint64_t tick_ = 0;
};

} // namespace poolscope::ui
