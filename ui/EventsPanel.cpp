#include "EventsPanel.h"

#include <algorithm>

#include "poolscope/Units.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QScrollBar>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

namespace poolscope::ui {

namespace {
struct KindGroup {
    const char* name;
    std::vector<EventKind> kinds;
};
const std::vector<KindGroup>& kindGroups() {
    static const std::vector<KindGroup> g = {
        {"Allocations", {EventKind::Alloc}},
        {"Frees", {EventKind::Free}},
        {"Synchronizations",
         {EventKind::StreamSynchronize, EventKind::EventSynchronize,
          EventKind::ContextSynchronize}},
        {"Event record / stream wait", {EventKind::EventRecord, EventKind::StreamWaitEvent}},
        {"Releases and trims", {EventKind::ImplicitRelease, EventKind::PoolTrimTo}},
        {"Attribute and knob changes", {EventKind::PoolSetAttribute, EventKind::KnobChange}},
        {"Pool and stream lifetime",
         {EventKind::PoolCreate, EventKind::PoolDestroy, EventKind::DeviceSetMempool,
          EventKind::StreamCreate, EventKind::StreamDestroy, EventKind::PoolSetAccess}},
        {"IPC export / import",
         {EventKind::PoolExport, EventKind::PoolImport, EventKind::PointerExport,
          EventKind::PointerImport}},
        {"Peer copies between devices", {EventKind::PeerCopy}},
    };
    return g;
}
} // namespace

EventsPanel::EventsPanel(QWidget* parent) : QWidget(parent) {
    model_ = new EventTableModel(this);
    view_ = new QTableView(this);
    view_->setModel(model_);
    view_->setSelectionBehavior(QAbstractItemView::SelectRows);
    view_->setSelectionMode(QAbstractItemView::SingleSelection);
    view_->setAlternatingRowColors(true);
    view_->verticalHeader()->hide();
    view_->verticalHeader()->setDefaultSectionSize(view_->fontMetrics().height() + 4);
    view_->horizontalHeader()->setStretchLastSection(true);
    view_->setWordWrap(false);
    // Fixed widths: ResizeToContents would measure every row of a 200k-row model.
    const int cw = view_->fontMetrics().horizontalAdvance(QLatin1Char('0'));
    const int widths[] = {9, 10, 16, 10, 16, 10, 15, 8, 8};
    for (int i = 0; i < 9; ++i)
        view_->setColumnWidth(i, widths[i] * cw + 12);
    autoSeqWidth_ = view_->columnWidth(EventTableModel::Seq);
    // Size right after the kind: with the Pools & streams dock beside it, the table shows about
    // five columns before it scrolls sideways, and an allocation's size matters more than the
    // names of its stream and pool (which the timeline's lanes also give).
    QHeaderView* h = view_->horizontalHeader();
    h->moveSection(h->visualIndex(EventTableModel::Size), h->visualIndex(EventTableModel::Stream));
    // Click a header to sort (the model permutes row indices; see EventTableModel). Starts in
    // query order (time) with no indicator; a third click on a header goes back to it.
    view_->horizontalHeader()->setSortIndicatorClearable(true);
    view_->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
    view_->setSortingEnabled(true);
    view_->horizontalHeader()->setToolTip(
        tr("Click a column header to sort by it; click again to reverse, a third time for time "
           "order."));

    kindButton_ = new QToolButton(this);
    kindButton_->setText(tr("Kinds"));
    kindButton_->setPopupMode(QToolButton::InstantPopup);
    kindMenu_ = new QMenu(kindButton_);
    for (const KindGroup& g : kindGroups()) {
        QAction* a = kindMenu_->addAction(tr(g.name));
        a->setCheckable(true);
        a->setChecked(true);
        connect(a, &QAction::toggled, this, &EventsPanel::scheduleQuery);
    }
    kindMenu_->addSeparator();
    QAction* failed = kindMenu_->addAction(tr("Failed calls only"));
    failed->setCheckable(true);
    failed->setObjectName("failedOnly");
    connect(failed, &QAction::toggled, this, &EventsPanel::scheduleQuery);
    kindButton_->setMenu(kindMenu_);

    streamBox_ = new QComboBox(this);
    poolBox_ = new QComboBox(this);
    minSize_ = new QLineEdit(this);
    maxSize_ = new QLineEdit(this);
    minSize_->setPlaceholderText(tr("min size, e.g. 1MiB"));
    maxSize_->setPlaceholderText(tr("max size"));
    // Wide enough for the placeholder text: a cut hint ("min siz…") does not tell the format.
    for (QLineEdit* e : {minSize_, maxSize_})
        e->setMinimumWidth(e->fontMetrics().horizontalAdvance(e->placeholderText()) + 16);
    minSize_->setMaximumWidth(std::max(130, minSize_->minimumWidth()));
    maxSize_->setMaximumWidth(std::max(110, maxSize_->minimumWidth()));
    follow_ = new QCheckBox(tr("Only the visible time range"), this);
    follow_->setChecked(true);
    follow_->setToolTip(tr("Show only events inside the timeline's visible range; zoom the "
                           "timeline to narrow the time range."));
    status_ = new QLabel(this);

    // Two rows, what to list, then the range and the count: in one row the bar was 760 px at
    // least, and the Pools & streams dock beside the table was left too narrow for its columns.
    auto* bar = new QHBoxLayout;
    bar->setContentsMargins(0, 0, 0, 0);
    bar->addWidget(kindButton_);
    bar->addWidget(new QLabel(tr("Stream:"), this));
    bar->addWidget(streamBox_);
    bar->addWidget(new QLabel(tr("Pool:"), this));
    bar->addWidget(poolBox_);
    bar->addWidget(new QLabel(tr("Size:"), this));
    bar->addWidget(minSize_);
    bar->addWidget(maxSize_);
    bar->addStretch(1);
    auto* bar2 = new QHBoxLayout;
    bar2->setContentsMargins(0, 0, 0, 0);
    bar2->addWidget(follow_);
    bar2->addStretch(1);
    bar2->addWidget(status_);
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(2, 2, 2, 2);
    lay->setSpacing(2);
    lay->addLayout(bar);
    lay->addLayout(bar2);
    lay->addWidget(view_);

    debounce_.setSingleShot(true);
    debounce_.setInterval(150);
    connect(&debounce_, &QTimer::timeout, this, &EventsPanel::runQuery);
    connect(streamBox_, &QComboBox::currentIndexChanged, this, &EventsPanel::scheduleQuery);
    connect(poolBox_, &QComboBox::currentIndexChanged, this, &EventsPanel::scheduleQuery);
    connect(minSize_, &QLineEdit::editingFinished, this, &EventsPanel::scheduleQuery);
    connect(maxSize_, &QLineEdit::editingFinished, this, &EventsPanel::scheduleQuery);
    connect(follow_, &QCheckBox::toggled, this, &EventsPanel::scheduleQuery);
    connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& cur) {
                if (const Event* e = model_->eventAt(cur.row())) emit eventSelected(*e);
            });
    // After a sort, keep the selected event in view (the view itself does not scroll).
    connect(view_->horizontalHeader(), &QHeaderView::sortIndicatorChanged, this, [this] {
        if (view_->currentIndex().isValid())
            view_->scrollTo(view_->currentIndex(), QAbstractItemView::PositionAtCenter);
    });
    connect(view_, &QTableView::doubleClicked, this, [this](const QModelIndex& idx) {
        if (const Event* e = model_->eventAt(idx.row())) emit eventActivated(*e);
    });
}

EventsPanel::~EventsPanel() {
    for (auto& j : jobs_)
        j->cancel = true;
    for (auto& j : jobs_)
        j->future.waitForFinished();
}

void EventsPanel::setSource(const TraceSnapshot& s, EventProvider provider) {
    live_ = false;
    snap_ = s;
    provider_ = std::move(provider);
    visible0_ = INT64_MIN;
    visible1_ = INT64_MAX;
    rebuildFilterChoices();
    model_->resetData({}, s.timeline ? s.timeline->t0 : 0, s.layout);
    scheduleQuery();
}

void EventsPanel::updateSource(const TraceSnapshot& s, EventProvider provider) {
    // The filter boxes are rebuilt only when streams or pools came or went: rebuilding them ten
    // times a second would close a box the user has open.
    auto entities = [](const TraceSnapshot& t) {
        std::vector<uint64_t> v;
        if (!t.valid()) return v;
        for (const StreamTimeline& st : t.timeline->streams) v.push_back(st.info.handle);
        v.push_back(0); // between the two lists
        for (const PoolTimeline& pt : t.timeline->pools) {
            v.push_back(pt.info.handle);
            v.push_back(uint64_t(pt.info.kind)); // part of its name
        }
        return v;
    };
    const bool sameEntities = live_ && entities(snap_) == entities(s);
    live_ = true;
    snap_ = s;
    provider_ = std::move(provider);
    if (!sameEntities) rebuildFilterChoices(); // new streams and pools; the user's choice stays
    // A throttle, not a debounce: restarting the timer at every refresh (10 a second) would
    // never let it fire.
    if (!debounce_.isActive()) debounce_.start();
}

void EventsPanel::clear() {
    setSource({}, {});
}

void EventsPanel::rebuildFilterChoices() {
    const QSignalBlocker b1(streamBox_), b2(poolBox_);
    // A new snapshot of the same trace (the whole timeline after a partial one, a live refresh)
    // keeps the stream and pool the user picked, when they still exist.
    const QVariant keepStream = streamBox_->currentData(), keepPool = poolBox_->currentData();
    streamBox_->clear();
    poolBox_->clear();
    streamBox_->addItem(tr("all"));
    poolBox_->addItem(tr("all"));
    if (!snap_.valid()) return;
    for (const StreamTimeline& st : snap_.timeline->streams)
        streamBox_->addItem(snap_.layout->streamName(st.info.handle),
                            QVariant::fromValue<qulonglong>(st.info.handle));
    for (const PoolTimeline& pt : snap_.timeline->pools)
        poolBox_->addItem(snap_.layout->poolName(pt.info.handle),
                          QVariant::fromValue<qulonglong>(pt.info.handle));
    if (keepStream.isValid()) streamBox_->setCurrentIndex(std::max(0, streamBox_->findData(keepStream)));
    if (keepPool.isValid()) poolBox_->setCurrentIndex(std::max(0, poolBox_->findData(keepPool)));
}

void EventsPanel::setVisibleRange(int64_t t0, int64_t t1) {
    visible0_ = t0;
    visible1_ = t1;
    if (follow_->isChecked()) scheduleQuery();
}

EventFilter EventsPanel::filter() const {
    EventFilter f;
    uint32_t mask = 0;
    const auto actions = kindMenu_->actions();
    const auto& groups = kindGroups();
    for (size_t i = 0; i < groups.size() && i < size_t(actions.size()); ++i)
        if (actions[qsizetype(i)]->isChecked())
            for (EventKind k : groups[i].kinds)
                mask |= EventFilter::bit(k);
    f.kindMask = mask;
    for (QAction* a : actions)
        if (a->objectName() == "failedOnly") f.failedOnly = a->isChecked();
    if (streamBox_->currentIndex() > 0) f.stream = streamBox_->currentData().toULongLong();
    if (poolBox_->currentIndex() > 0) f.pool = poolBox_->currentData().toULongLong();
    uint64_t v = 0;
    if (!minSize_->text().trimmed().isEmpty() && parseBytes(minSize_->text().toStdString(), v))
        f.minSize = v;
    if (!maxSize_->text().trimmed().isEmpty() && parseBytes(maxSize_->text().toStdString(), v))
        f.maxSize = v;
    if (follow_->isChecked()) {
        f.t0 = visible0_;
        f.t1 = visible1_;
        // A view that reaches the trace's end shows its last event (the range is half-open),
        // and in a live run the events arriving after it too.
        if (snap_.valid() && visible1_ >= snap_.timeline->t1) f.t1 = INT64_MAX;
    }
    return f;
}

void EventsPanel::scheduleQuery() {
    debounce_.start();
}

void EventsPanel::runQuery() {
    if (running_) running_->cancel = true;
    std::erase_if(jobs_, [](const std::shared_ptr<Job>& j) { return j->future.isFinished(); });
    if (!provider_ || !snap_.valid()) {
        running_.reset();
        status_->clear();
        return;
    }
    auto job = std::make_shared<Job>();
    job->generation = ++generation_;
    running_ = job;
    jobs_.push_back(job);
    if (!live_) status_->setText(tr("querying…")); // a live refresh keeps the last count
    const EventFilter f = filter();
    job->future = QtConcurrent::run([this, job, f, provider = provider_] {
        auto result = std::make_shared<EventQueryResult>(provider(f, kRowCap, job->cancel));
        if (job->cancel) return;
        QMetaObject::invokeMethod(
            this,
            [this, g = job->generation, result] {
                if (!running_ || running_->generation != g) return; // stale
                running_.reset();
                const uint64_t selSeq = [&]() -> uint64_t {
                    const Event* e = model_->eventAt(view_->currentIndex().row());
                    return e ? e->seq : ~0ull;
                }();
                auto events = std::make_shared<const std::vector<Event>>(std::move(result->events));
                // A live table follows the newest events while it is scrolled to its end (or
                // has not been scrolled), and otherwise keeps its top row where it was.
                QScrollBar* bar = view_->verticalScrollBar();
                const bool atEnd = bar->value() >= bar->maximum();
                const Event* top = model_->eventAt(view_->rowAt(0));
                const uint64_t topSeq = top ? top->seq : ~0ull;
                model_->resetData(events, snap_.timeline->t0, snap_.layout);
                if (selSeq != ~0ull) {
                    const int r = model_->rowOfSeq(selSeq);
                    if (r >= 0) {
                        const QSignalBlocker b(view_->selectionModel());
                        view_->selectRow(r);
                    }
                }
                fitSeqColumn(*events);
                if (live_ && atEnd)
                    view_->scrollToBottom();
                else if (live_ && topSeq != ~0ull)
                    if (const int r = model_->rowOfSeq(topSeq); r >= 0)
                        view_->scrollTo(model_->index(r, 0), QAbstractItemView::PositionAtTop);
                QString text = result->error.isEmpty() ? tr("%L1 events").arg(events->size())
                                                       : tr("error: %1").arg(result->error);
                if (result->truncated && result->note.isEmpty())
                    text = tr("first %L1 matching events; zoom in or filter to see the rest")
                               .arg(events->size());
                if (!result->note.isEmpty() && result->error.isEmpty())
                    text += QLatin1Char(' ') + result->note;
                status_->setText(text);
                status_->setToolTip(result->noteDetail);
                emit queryFinished(int(events->size()));
            },
            Qt::QueuedConnection);
    });
}

void EventsPanel::fitSeqColumn(const std::vector<Event>& events) {
    // As wide as the largest sequence number listed (9 digits' width left 4 unused on most
    // traces, which the table beside the Pools & streams dock cannot spare); never over a
    // width the user dragged.
    if (view_->columnWidth(EventTableModel::Seq) != autoSeqWidth_) return;
    uint64_t top = 0;
    for (const Event& e : events) top = std::max(top, e.seq);
    const int digits = std::max(3, int(QString::number(top).size()));
    const int cw = view_->fontMetrics().horizontalAdvance(QLatin1Char('0'));
    const int w = std::max(view_->horizontalHeader()->sectionSizeHint(EventTableModel::Seq),
                           digits * cw + 16);
    view_->setColumnWidth(EventTableModel::Seq, w);
    autoSeqWidth_ = view_->columnWidth(EventTableModel::Seq);
}

void EventsPanel::selectSeq(uint64_t seq) {
    const int r = model_->rowOfSeq(seq);
    if (r < 0) return;
    const QSignalBlocker b(view_->selectionModel());
    view_->selectRow(r);
    view_->scrollTo(model_->index(r, 0), QAbstractItemView::PositionAtCenter);
}

} // namespace poolscope::ui
