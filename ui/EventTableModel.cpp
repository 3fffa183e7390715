#include "EventTableModel.h"

#include "TimeTicker.h"
#include "poolscope/EventText.h"
#include "poolscope/Units.h"

#include <QCollator>
#include <QColor>
#include <algorithm>
#include <unordered_map>

namespace poolscope::ui {

namespace {
QString qs(const std::string& s) {
    return QString::fromStdString(s);
}
QString qs(std::string_view s) {
    return QString::fromUtf8(s.data(), qsizetype(s.size()));
}

bool streamShown(const Event& e) {
    return e.kind == EventKind::Alloc || e.kind == EventKind::Free ||
           e.kind == EventKind::EventRecord || e.kind == EventKind::StreamWaitEvent ||
           e.kind == EventKind::StreamSynchronize || e.kind == EventKind::StreamCreate ||
           e.kind == EventKind::StreamDestroy || e.kind == EventKind::PeerCopy;
}
bool sizeShown(const Event& e) {
    return e.kind == EventKind::Alloc || (e.kind == EventKind::Free && e.has(kSizeKnown)) ||
           e.kind == EventKind::PeerCopy; // the bytes copied
}
} // namespace

void EventTableModel::resetData(std::shared_ptr<const std::vector<Event>> events, int64_t traceT0,
                                std::shared_ptr<const LaneLayout> layout) {
    beginResetModel();
    paged_ = false;
    pages_.clear();
    requested_.clear();
    total_ = base_ = 0;
    events_ = events ? std::move(events) : std::make_shared<std::vector<Event>>();
    t0_ = traceT0;
    layout_ = std::move(layout);
    buildOrder(); // a new query result keeps the user's sort
    endResetModel();
}

void EventTableModel::resetPaged(uint64_t total, size_t pageRows, size_t maxPages, int windowRows,
                                 int64_t traceT0, std::shared_ptr<const LaneLayout> layout) {
    beginResetModel();
    paged_ = true;
    events_ = std::make_shared<std::vector<Event>>();
    order_.clear();
    sortColumn_ = -1; // a paged result is in seq order: EventsPanel turns sorting off
    pages_.clear();
    requested_.clear();
    total_ = total;
    base_ = 0;
    pageRows_ = std::max<size_t>(pageRows, 1);
    maxPages_ = std::max<size_t>(maxPages, 1);
    windowRows_ = std::max(windowRows, 1);
    t0_ = traceT0;
    layout_ = std::move(layout);
    endResetModel();
}

void EventTableModel::setBase(uint64_t base) {
    if (!paged_ || base == base_) return;
    base_ = base;
    if (rowCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
}

void EventTableModel::setWindowRows(int rows) {
    rows = std::max(rows, 1);
    if (!paged_ || rows == windowRows_) return;
    const int before = rowCount();
    windowRows_ = rows;
    const int after = rowCount();
    if (after > before) {
        beginInsertRows({}, before, after - 1);
        endInsertRows();
    } else if (after < before) {
        beginRemoveRows({}, after, before - 1);
        endRemoveRows();
    }
}

void EventTableModel::setPage(uint64_t page, std::shared_ptr<const std::vector<Event>> rows) {
    if (!paged_ || !rows || page * pageRows_ >= total_) return;
    requested_.erase(page);
    pages_[page] = Page{std::move(rows), ++tick_};
    while (pages_.size() > maxPages_) {
        auto oldest = pages_.begin();
        for (auto it = pages_.begin(); it != pages_.end(); ++it)
            if (it->second.used < oldest->second.used) oldest = it;
        pages_.erase(oldest);
    }
    // Only the rows of the window that lie in this page change.
    const uint64_t first = page * pageRows_, last = first + pageRows_; // [first, last)
    const uint64_t w0 = base_, w1 = base_ + uint64_t(rowCount());
    if (last <= w0 || first >= w1) return;
    const int r0 = int(std::max(first, w0) - base_), r1 = int(std::min(last, w1) - base_) - 1;
    emit dataChanged(index(r0, 0), index(r1, ColumnCount - 1));
}

const Event* EventTableModel::eventAtAbsolute(uint64_t row) const {
    if (!paged_) return row < events_->size() ? &at(size_t(row)) : nullptr;
    if (row >= total_) return nullptr;
    auto it = pages_.find(row / pageRows_);
    if (it == pages_.end()) return nullptr;
    const size_t i = size_t(row % pageRows_);
    if (i >= it->second.rows->size()) return nullptr;
    it->second.used = ++tick_;
    return &(*it->second.rows)[i];
}

int64_t EventTableModel::absoluteRowOfSeq(uint64_t seq) const {
    if (!paged_) return rowOfSeq(seq);
    for (const auto& [p, page] : pages_) {
        const auto& v = *page.rows;
        auto it = std::lower_bound(v.begin(), v.end(), seq,
                                   [](const Event& e, uint64_t s) { return e.seq < s; });
        if (it != v.end() && it->seq == seq) return int64_t(p * pageRows_ + size_t(it - v.begin()));
    }
    return -1;
}

const Event* EventTableModel::eventAt(int row) const {
    if (paged_) return row < 0 ? nullptr : eventAtAbsolute(base_ + uint64_t(row));
    if (row < 0 || size_t(row) >= events_->size()) return nullptr;
    return &at(size_t(row));
}

int EventTableModel::rowOfSeq(uint64_t seq) const {
    if (paged_) {
        const int64_t r = absoluteRowOfSeq(seq);
        if (r < 0 || uint64_t(r) < base_ || uint64_t(r) - base_ >= uint64_t(rowCount())) return -1;
        return int(uint64_t(r) - base_);
    }
    const auto& v = *events_;
    auto it = std::lower_bound(v.begin(), v.end(), seq,
                               [](const Event& e, uint64_t s) { return e.seq < s; });
    size_t i = v.size();
    if (it != v.end() && it->seq == seq)
        i = size_t(it - v.begin());
    else {
        // Chunked queries are in time order, which can differ from seq order across threads.
        auto lin = std::find_if(v.begin(), v.end(), [&](const Event& e) { return e.seq == seq; });
        i = size_t(lin - v.begin());
    }
    if (i >= v.size()) return -1;
    if (order_.empty()) return int(i);
    auto r = std::find(order_.begin(), order_.end(), uint32_t(i));
    return r == order_.end() ? -1 : int(r - order_.begin());
}

void EventTableModel::sort(int column, Qt::SortOrder order) {
    // Sorting the pages held would present a part as the whole: EventsPanel turns it off.
    if (paged_) return;
    if (column == sortColumn_ && order == sortOrder_) return;
    emit layoutAboutToBeChanged({}, QAbstractItemModel::VerticalSortHint);
    // Persistent indexes (the view's current row, selection) follow their event.
    const QModelIndexList before = persistentIndexList();
    std::vector<uint32_t> eventOf;
    eventOf.reserve(size_t(before.size()));
    for (const QModelIndex& i : before)
        eventOf.push_back(order_.empty() ? uint32_t(i.row()) : order_[size_t(i.row())]);
    sortColumn_ = column;
    sortOrder_ = order;
    buildOrder();
    QModelIndexList after;
    after.reserve(before.size());
    std::vector<uint32_t> rowOf;
    if (!before.isEmpty()) {
        rowOf.resize(events_->size());
        for (size_t r = 0; r < events_->size(); ++r)
            rowOf[order_.empty() ? r : order_[r]] = uint32_t(r);
    }
    for (qsizetype k = 0; k < before.size(); ++k)
        after.push_back(index(int(rowOf[eventOf[size_t(k)]]), before[k].column()));
    changePersistentIndexList(before, after);
    emit layoutChanged({}, QAbstractItemModel::VerticalSortHint);
}

void EventTableModel::buildOrder() {
    order_.clear();
    const auto& v = *events_;
    if (sortColumn_ < 0 || sortColumn_ >= ColumnCount || v.empty()) return;
    // Names are ranked once per distinct value (a few hundred streams at most), numerically
    // ("stream #2" before "stream #10"), so the sort itself compares integers only.
    QCollator coll;
    coll.setNumericMode(true);
    auto rankNames = [&](auto handleOf, auto nameOf) {
        std::unordered_map<uint64_t, uint64_t> rank;
        std::vector<std::pair<QString, uint64_t>> names;
        for (const Event& e : v) {
            const uint64_t h = handleOf(e);
            if (rank.emplace(h, 0).second) names.emplace_back(nameOf(h), h);
        }
        std::sort(names.begin(), names.end(),
                  [&](const auto& a, const auto& b) { return coll.compare(a.first, b.first) < 0; });
        for (size_t i = 0; i < names.size(); ++i)
            rank[names[i].second] = i + 1;
        return rank;
    };
    uint64_t kindRank[256] = {};
    {
        std::vector<std::pair<QString, int>> k;
        for (int i = 0; i < kEventKindCount; ++i)
            k.emplace_back(qs(eventKindName(EventKind(i))), i);
        std::sort(k.begin(), k.end());
        for (size_t i = 0; i < k.size(); ++i)
            kindRank[k[i].second] = i;
    }
    struct Key {
        uint64_t a, b;
        uint32_t i;
    };
    std::vector<Key> keys(v.size());
    auto fill = [&](auto f) {
        for (size_t i = 0; i < v.size(); ++i) {
            keys[i] = f(v[i]);
            keys[i].i = uint32_t(i);
        }
    };
    auto sgn = [](int64_t x) { return uint64_t(x) ^ (uint64_t(1) << 63); }; // order-preserving
    switch (Column(sortColumn_)) {
    case Seq:
        fill([](const Event& e) { return Key{e.seq, 0, 0}; });
        break;
    case Time:
        fill([&](const Event& e) { return Key{sgn(e.tsNs), e.seq, 0}; });
        break;
    case Kind:
        fill([&](const Event& e) { return Key{kindRank[uint8_t(e.kind)], 0, 0}; });
        break;
    case Stream: {
        auto name = [&](uint64_t h) { return layout_ ? layout_->streamName(h) : hexHandle(h); };
        auto r = rankNames([](const Event& e) { return e.stream; }, name);
        // Rows whose stream is not shown (not a stream-bound kind) sort first, like empty text.
        fill([&](const Event& e) { return Key{streamShown(e) ? r[e.stream] : 0, 0, 0}; });
        break;
    }
    case Pool: {
        auto name = [&](uint64_t h) { return layout_ ? layout_->poolName(h) : hexHandle(h); };
        auto r = rankNames([](const Event& e) { return e.pool; }, name);
        fill([&](const Event& e) { return Key{e.pool ? r[e.pool] : 0, 0, 0}; });
        break;
    }
    case Size:
        fill([](const Event& e) {
            return Key{sizeShown(e) ? 1u : 0u, sizeShown(e) ? e.size : 0, 0};
        });
        break;
    case Pointer:
        fill([](const Event& e) { return Key{e.ptr, 0, 0}; });
        break;
    case Result:
        fill([&](const Event& e) { return Key{sgn(e.result), 0, 0}; });
        break;
    case Thread:
        fill([](const Event& e) { return Key{e.tid, 0, 0}; });
        break;
    case Info:
        // Grouped by what the text says (kind, then attribute, then the value it reports)
        // rather than by formatting 200k strings.
        fill([&](const Event& e) {
            return Key{(kindRank[uint8_t(e.kind)] << 32) | (uint64_t(e.attr) << 8) |
                           (e.failed() ? 1u : 0u),
                       e.size, 0};
        });
        break;
    case ColumnCount:
        return;
    }
    auto less = [](const Key& x, const Key& y) { return x.a != y.a ? x.a < y.a : x.b < y.b; };
    if (sortOrder_ == Qt::AscendingOrder)
        std::stable_sort(keys.begin(), keys.end(), less);
    else
        std::stable_sort(keys.begin(), keys.end(),
                         [&](const Key& x, const Key& y) { return less(y, x); });
    order_.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i)
        order_[i] = keys[i].i;
}

int EventTableModel::rowCount(const QModelIndex& parent) const {
    if (parent.isValid()) return 0;
    // The same count wherever the window is (at the end its last rows show nothing).
    if (paged_) return int(std::min<uint64_t>(total_, uint64_t(windowRows_)));
    return int(events_->size());
}

int EventTableModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QString EventTableModel::describe(const Event& e) {
    return qs(describeEvent(e));
}

QVariant EventTableModel::data(const QModelIndex& index, int role) const {
    const Event* e = index.isValid() ? eventAt(index.row()) : nullptr;
    if (!e && paged_ && index.isValid() && base_ + uint64_t(index.row()) < total_) {
        // Not fetched yet: a placeholder, and its page is asked for (once until it comes).
        const uint64_t page = (base_ + uint64_t(index.row())) / pageRows_;
        if (requested_.insert(page).second)
            emit const_cast<EventTableModel*>(this)->pageWanted(page);
        if (role == Qt::ForegroundRole) return QColor(150, 150, 150);
        if (role != Qt::DisplayRole) return {};
        if (index.column() == Seq) return QStringLiteral("…");
        if (index.column() == Info) return tr("loading…");
        return {};
    }
    if (!e) return {};
    if (role == EventSeqRole) return QVariant::fromValue<qulonglong>(e->seq);
    if (role == EventTimeRole) return QVariant::fromValue<qlonglong>(e->tsNs);
    if (role == Qt::TextAlignmentRole) {
        const int c = index.column();
        if (c == Seq || c == Time || c == Size) return int(Qt::AlignRight | Qt::AlignVCenter);
        return {};
    }
    if (role == Qt::ForegroundRole && e->failed()) return QColor(220, 30, 30);
    if (role != Qt::DisplayRole && role != Qt::ToolTipRole) return {};
    switch (Column(index.column())) {
    case Seq:
        return QString::number(e->seq);
    case Time:
        return timeTickLabel(e->tsNs - t0_, 1000, e->tsNs - t0_); // µs resolution
    case Kind:
        return qs(eventKindName(e->kind));
    case Stream:
        if (!streamShown(*e)) return {};
        return layout_ ? layout_->streamName(e->stream) : hexHandle(e->stream);
    case Pool:
        if (!e->pool) return {};
        return layout_ ? layout_->poolName(e->pool) : hexHandle(e->pool);
    case Size:
        if (!sizeShown(*e)) return {};
        return role == Qt::ToolTipRole ? QStringLiteral("%1 bytes").arg(e->size)
                                       : qs(formatBytes(e->size));
    case Pointer:
        return e->ptr ? hexHandle(e->ptr) : QString();
    case Result:
        return e->result ? QString::fromStdString(formatCuResult(int(e->result))) : QString();
    case Thread:
        return e->tid ? QString::number(e->tid) : QString();
    case Info:
        return describe(*e);
    case ColumnCount:
        break;
    }
    return {};
}

QVariant EventTableModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* kNames[] = {
        "Seq",      "Time",   "Kind",   "Stream", "Pool", "Size", "Pointer / event",
        "CUresult", "Thread", "Details"};
    if (section < 0 || section >= ColumnCount) return {};
    return tr(kNames[section]);
}

} // namespace poolscope::ui
