#include "EventsPanel.h"

#include <algorithm>

#include "TimeTicker.h"
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
    defaultTimeWidth_ = autoTimeWidth_ = view_->columnWidth(EventTableModel::Time);
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
    scroll_ = new QScrollBar(Qt::Vertical, this);
    scroll_->setObjectName("pageScrollBar");
    scroll_->hide();
    auto* table = new QHBoxLayout;
    table->setContentsMargins(0, 0, 0, 0);
    table->setSpacing(0);
    table->addWidget(view_, 1);
    table->addWidget(scroll_);
    lay->addLayout(table, 1);
    // The user moved the bar (setBase moves it silently).
    connect(scroll_, &QScrollBar::valueChanged, this, [this](int v) {
        const uint64_t units = uint64_t(std::max(v, 0));
        model_->setBase(v >= scroll_->maximum() ? maxBase() : std::min(units * scrollScale_, maxBase()));
        reselect();
    });
    connect(model_, &EventTableModel::pageWanted, this,
            [this](quint64 p) {
                wanted_.insert(p);
                pumpPages();
            },
            Qt::QueuedConnection); // asked from data(), while the view paints
    view_->installEventFilter(this);
    view_->viewport()->installEventFilter(this);

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
                if (model_->paged())
                    currentAbs_ = cur.isValid() ? int64_t(model_->base()) + cur.row() : -1;
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

void EventsPanel::setPaging(size_t rowCap, size_t pageRows, size_t maxPages) {
    rowCap_ = std::max<size_t>(rowCap, 1);
    pageRows_ = std::max<size_t>(pageRows, 1);
    maxPages_ = std::max<size_t>(maxPages, 1);
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
    setPagedUi(false);
    shownProvider_.reset();
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


// A query's answer: every match (held), or the count and the first rows (paged).
struct EventsPanel::Answer {
    bool paged = false;
    bool final = true; // false: the whole result follows, in a second answer
    uint64_t total = 0;
    std::vector<Event> rows;
    QString error, note, noteDetail;
    EventFilter filter; // what was asked, of whom: page fetches ask the same
    EventProvider provider;
};

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
    const size_t rowCap = rowCap_, pageRows = pageRows_, seed = pageRows_ * maxPages_;
    const bool live = live_;
    job->future = QtConcurrent::run([this, job, f, provider = provider_, rowCap, pageRows, seed,
                                     live] {
        const std::atomic<bool>& cancel = job->cancel;
        auto post = [&](std::shared_ptr<Answer> a) {
            if (cancel) return;
            a->filter = f;
            a->provider = provider;
            QMetaObject::invokeMethod(
                this, [this, g = job->generation, a] { apply(g, a); }, Qt::QueuedConnection);
        };
        auto held = [](EventQueryResult&& r) {
            auto a = std::make_shared<Answer>();
            a->total = r.events.size();
            a->rows = std::move(r.events);
            a->error = r.error;
            a->note = r.note;
            a->noteDetail = r.noteDetail;
            return a;
        };
        auto paged = [](uint64_t total, EventQueryResult&& first, bool final) {
            auto a = std::make_shared<Answer>();
            a->paged = true;
            a->final = final;
            a->total = total;
            a->rows = std::move(first.events);
            a->error = first.error;
            return a;
        };
        // A live session's buffer is bounded (LiveEventLog): all of it, as it holds it.
        if (live) return post(held(provider->page(f, 0, SIZE_MAX, cancel)));
        if (provider->countsCheaply(f)) {
            // Counted without reading the matches: only the rows on screen are read (a rare
            // kind spread over a 100 M-event trace: its count and first page in well under the
            // time its every row takes).
            EventCountResult c = provider->count(f, cancel);
            if (cancel) return;
            if (!c.error.isEmpty()) {
                auto a = std::make_shared<Answer>();
                a->error = c.error;
                return post(a);
            }
            if (c.total <= pageRows) return post(held(provider->page(f, 0, pageRows, cancel)));
            EventQueryResult first = provider->page(f, 0, pageRows, cancel);
            if (c.total > rowCap || !first.error.isEmpty())
                return post(paged(c.total, std::move(first), true));
            // Few enough to hold whole (and sort): the first page now, the rest after it.
            std::vector<Event> head = first.events;
            post(paged(c.total, std::move(first), false));
            EventQueryResult rest = provider->page(f, head.size(), rowCap - head.size(), cancel);
            rest.events.insert(rest.events.begin(), head.begin(), head.end());
            return post(held(std::move(rest)));
        }
        // Counting reads the matches: the first rowCap rows first (today's whole answer when
        // there are no more), then the count.
        EventQueryResult r = provider->page(f, 0, rowCap, cancel);
        if (!r.truncated || !r.error.isEmpty()) return post(held(std::move(r)));
        EventCountResult c = provider->count(f, cancel);
        if (cancel) return;
        if (r.events.size() > seed) r.events.resize(seed);
        auto a = paged(c.total, std::move(r), true);
        a->error = c.error;
        post(a);
    });
}

void EventsPanel::apply(quint64 g, const std::shared_ptr<Answer>& a) {
    if (!running_ || running_->generation != g) return; // stale
    if (a->final) running_.reset();
    // Page fetches and searches of the rows shown until now are stale.
    for (auto* j : {&pageJob_, &locateJob_})
        if (*j) {
            (*j)->cancel = true;
            j->reset();
        }
    wanted_.clear();
    shownGeneration_ = g;
    shownFilter_ = a->filter;
    shownProvider_ = a->provider;
    const int64_t t0 = snap_.timeline->t0;
    // The selected event and the top row stay when the same rows come back (a live refresh,
    // a paged answer replaced by the whole one).
    const bool wasPaged = model_->paged();
    const Event* sel = model_->eventAt(view_->currentIndex().row());
    const uint64_t selSeq = sel ? sel->seq : ~0ull;
    QScrollBar* bar = view_->verticalScrollBar();
    const bool atEnd = bar->value() >= bar->maximum();
    const Event* top = model_->eventAt(view_->rowAt(0));
    const uint64_t topSeq = top ? top->seq : ~0ull;
    QString text;
    if (!a->paged) {
        auto events = std::make_shared<const std::vector<Event>>(std::move(a->rows));
        setPagedUi(false);
        model_->resetData(events, t0, snap_.layout);
        if (selSeq != ~0ull)
            if (const int r = model_->rowOfSeq(selSeq); r >= 0) {
                const QSignalBlocker b(view_->selectionModel());
                view_->selectRow(r);
            }
        uint64_t topOf = 0;
        for (const Event& e : *events) topOf = std::max(topOf, e.seq);
        fitNumberColumns(topOf);
        if (live_ && atEnd)
            view_->scrollToBottom();
        else if ((live_ || wasPaged) && topSeq != ~0ull)
            if (const int r = model_->rowOfSeq(topSeq); r >= 0)
                view_->scrollTo(model_->index(r, 0), QAbstractItemView::PositionAtTop);
        text = tr("%L1 events").arg(events->size());
    } else {
        currentAbs_ = -1;
        model_->resetPaged(a->total, pageRows_, maxPages_, 1, t0, snap_.layout);
        setPagedUi(true);
        // The rows that came with the answer, as pages.
        const size_t n = a->rows.size();
        for (size_t p = 0; p * pageRows_ < n; ++p) {
            const size_t b = p * pageRows_, e = std::min(n, b + pageRows_);
            if (e - b < pageRows_ && e < a->total) break; // a partial page would look complete
            model_->setPage(p, std::make_shared<const std::vector<Event>>(a->rows.begin() + long(b),
                                                                          a->rows.begin() + long(e)));
        }
        updateWindow();
        setBase(0);
        fitNumberColumns(std::max({snap_.timeline->totalEvents, snap_.timeline->eventCount,
                               n ? a->rows.back().seq : 0}));
        text = tr("%L1 events").arg(a->total);
        if (a->total > rowCap_)
            text += QLatin1Char(' ') + tr("(sorting needs at most %L1; filter or zoom in)").arg(rowCap_);
        else
            text += QLatin1Char(' ') + tr("(reading the rest…)");
    }
    if (!a->error.isEmpty()) text = tr("error: %1").arg(a->error);
    if (!a->note.isEmpty() && a->error.isEmpty()) text += QLatin1Char(' ') + a->note;
    status_->setText(text);
    status_->setToolTip(a->noteDetail);
    emit rowsShown(a->total, a->paged, a->final);
    if (a->final) emit queryFinished(int(std::min<uint64_t>(a->total, INT_MAX)));
}

void EventsPanel::fitNumberColumns(uint64_t top) {
    // Each as wide as its widest text, and never over a width the user dragged. Seq: the largest
    // sequence number listed (9 digits' width left 4 unused on most traces, which the table
    // beside the Pools & streams dock cannot spare).
    const int cw = view_->fontMetrics().horizontalAdvance(QLatin1Char('0'));
    if (view_->columnWidth(EventTableModel::Seq) == autoSeqWidth_) {
        const int digits = std::max(3, int(QString::number(top).size()));
        const int w = std::max(view_->horizontalHeader()->sectionSizeHint(EventTableModel::Seq),
                               digits * cw + 16);
        view_->setColumnWidth(EventTableModel::Seq, w);
        autoSeqWidth_ = view_->columnWidth(EventTableModel::Seq);
    }
    // Time: the trace's last instant at the column's microseconds ("1621.110965 s" past 1000 s:
    // an hour's trace read "1621.11096..." in the default width).
    if (snap_.valid() && view_->columnWidth(EventTableModel::Time) == autoTimeWidth_) {
        const int64_t span = snap_.timeline->t1 > snap_.timeline->t0 ? snap_.timeline->t1 - snap_.timeline->t0 : 0;
        const int text = view_->fontMetrics().horizontalAdvance(timeTickLabel(span, 1000, span));
        view_->setColumnWidth(EventTableModel::Time, std::max(defaultTimeWidth_, text + 16));
        autoTimeWidth_ = view_->columnWidth(EventTableModel::Time);
    }
}

} // namespace poolscope::ui
