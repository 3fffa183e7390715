#include "EventTableModel.h"

#include "TimeTicker.h"
#include "poolscope/Units.h"

#include <QColor>
#include <algorithm>

namespace poolscope::ui {

namespace {
QString qs(const std::string& s) {
    return QString::fromStdString(s);
}
QString qs(std::string_view s) {
    return QString::fromUtf8(s.data(), qsizetype(s.size()));
}

bool isBoolAttr(uint16_t a) {
    return a == uint16_t(PoolAttr::ReuseFollowEventDependencies) ||
           a == uint16_t(PoolAttr::ReuseAllowOpportunistic) ||
           a == uint16_t(PoolAttr::ReuseAllowInternalDependencies);
}
QString attrValue(uint16_t a, uint64_t v) {
    if (isBoolAttr(a)) return v ? QStringLiteral("on") : QStringLiteral("off");
    return qs(formatBytes(v));
}
} // namespace

void EventTableModel::resetData(std::shared_ptr<const std::vector<Event>> events, int64_t traceT0,
                                std::shared_ptr<const LaneLayout> layout) {
    beginResetModel();
    events_ = events ? std::move(events) : std::make_shared<std::vector<Event>>();
    t0_ = traceT0;
    layout_ = std::move(layout);
    endResetModel();
}

const Event* EventTableModel::eventAt(int row) const {
    if (row < 0 || size_t(row) >= events_->size()) return nullptr;
    return &(*events_)[size_t(row)];
}

int EventTableModel::rowOfSeq(uint64_t seq) const {
    const auto& v = *events_;
    auto it = std::lower_bound(v.begin(), v.end(), seq,
                               [](const Event& e, uint64_t s) { return e.seq < s; });
    if (it != v.end() && it->seq == seq) return int(it - v.begin());
    // Chunked queries are in time order, which can differ from seq order across threads.
    auto lin = std::find_if(v.begin(), v.end(), [&](const Event& e) { return e.seq == seq; });
    return lin == v.end() ? -1 : int(lin - v.begin());
}

int EventTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : int(events_->size());
}

int EventTableModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QString EventTableModel::describe(const Event& e) {
    switch (e.kind) {
    case EventKind::Alloc:
        return e.failed() ? QStringLiteral("FAILED (CUresult %1)").arg(e.result)
                          : qs(allocApiName(AllocApi(e.variant)));
    case EventKind::PoolSetAttribute:
    case EventKind::KnobChange: {
        QString s = qs(poolAttrName(e.attr)) + QStringLiteral(": ");
        if (e.has(kHasOldValue)) s += attrValue(e.attr, e.aux) + QStringLiteral(" → ");
        s += attrValue(e.attr, e.size);
        if (e.kind == EventKind::KnobChange) s += QStringLiteral(" (set by PoolScope)");
        return s;
    }
    case EventKind::PoolTrimTo:
        return QStringLiteral("keep at least %1").arg(qs(formatBytes(e.size)));
    case EventKind::ImplicitRelease:
        return QStringLiteral("pool size after release %1").arg(qs(formatBytes(e.size)));
    case EventKind::PoolCreate:
        return QStringLiteral("%1 pool, max size %2")
            .arg(qs(poolKindName(PoolKind(e.variant))),
                 e.size ? qs(formatBytes(e.size)) : QStringLiteral("unlimited"));
    case EventKind::EventRecord:
    case EventKind::StreamWaitEvent:
    case EventKind::EventSynchronize:
        return QStringLiteral("event %1").arg(hexHandle(e.ptr));
    case EventKind::DeviceSetMempool:
        return QStringLiteral("device %1 current pool").arg(e.device);
    case EventKind::Sample:
        return QStringLiteral("reserved high %1, used high %2")
            .arg(qs(formatBytes(e.size)), qs(formatBytes(e.aux)));
    default:
        return {};
    }
}

QVariant EventTableModel::data(const QModelIndex& index, int role) const {
    const Event* e = index.isValid() ? eventAt(index.row()) : nullptr;
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
    const bool hasSize = e->kind == EventKind::Alloc || e->kind == EventKind::Free;
    switch (Column(index.column())) {
    case Seq:
        return QString::number(e->seq);
    case Time:
        return timeTickLabel(e->tsNs - t0_, 1000, e->tsNs - t0_); // µs resolution
    case Kind:
        return qs(eventKindName(e->kind));
    case Stream: {
        const bool streamKind =
            e->kind == EventKind::Alloc || e->kind == EventKind::Free ||
            e->kind == EventKind::EventRecord || e->kind == EventKind::StreamWaitEvent ||
            e->kind == EventKind::StreamSynchronize || e->kind == EventKind::StreamCreate ||
            e->kind == EventKind::StreamDestroy;
        if (!streamKind) return {};
        return layout_ ? layout_->streamName(e->stream) : hexHandle(e->stream);
    }
    case Pool:
        if (!e->pool) return {};
        return layout_ ? layout_->poolName(e->pool) : hexHandle(e->pool);
    case Size:
        if (!hasSize || (e->kind == EventKind::Free && !e->has(kSizeKnown))) return {};
        return role == Qt::ToolTipRole ? QStringLiteral("%1 bytes").arg(e->size)
                                       : qs(formatBytes(e->size));
    case Pointer:
        return e->ptr ? hexHandle(e->ptr) : QString();
    case Result:
        return e->result ? QString::number(e->result) : QString();
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
