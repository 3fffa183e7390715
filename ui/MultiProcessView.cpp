#include "MultiProcessView.h"

#include "TimelineWidget.h"
#include "poolscope/Units.h"
#include "poolscope/view/LaneLayout.h"

#include <QEvent>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QTextDocument>
#include <QToolButton>
#include <QTreeView>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>

namespace poolscope::ui {

namespace {
QString qs(const std::string& s) {
    return QString::fromStdString(s);
}
// The links' colour: apart from the bars' size scale and the markers' orange and purple.
const QColor kLinkColour(214, 40, 160);
} // namespace

// The lines from an export to its imports, over the groups (mouse events pass through).
class LinkOverlay : public QWidget {
public:
    LinkOverlay(MultiProcessView* view, QWidget* parent) : QWidget(parent), view_(view) {
        setAttribute(Qt::WA_TransparentForMouseEvents);
        setAttribute(Qt::WA_NoSystemBackground);
    }

protected:
    void paintEvent(QPaintEvent*) override {
        QPainter p(this);
        p.setRenderHint(QPainter::Antialiasing);
        const auto& links = view_->set_.links;
        for (size_t i = 0; i < links.size(); ++i) {
            const auto line = view_->linkLine(i);
            if (!line) continue;
            const QPointF a = mapFrom(view_, line->first), b = mapFrom(view_, line->second);
            const interop::IpcLink& l = links[i];
            const auto& lit = view_->highlighted_;
            const bool strong = std::find(lit.begin(), lit.end(),
                                          std::pair(int(l.exporter), l.exportPool)) != lit.end() ||
                                std::find(lit.begin(), lit.end(),
                                          std::pair(int(l.importer), l.importPool)) != lit.end();
            QColor c = kLinkColour;
            c.setAlpha(strong || lit.empty() ? 230 : 110);
            QPen pen(c, strong ? 3.0 : 2.0,
                     l.kind == interop::IpcLink::Kind::Pool ? Qt::SolidLine : Qt::DashLine);
            p.setPen(pen);
            p.setBrush(Qt::NoBrush);
            QPainterPath path(a);
            const double midY = (a.y() + b.y()) / 2;
            path.cubicTo(QPointF(a.x(), midY), QPointF(b.x(), midY), b);
            p.drawPath(path);
            p.setBrush(c);
            p.drawEllipse(a, 3.5, 3.5);
            // An arrowhead into the import, along the curve's last direction (vertical).
            const double dir = b.y() >= a.y() ? -1 : 1;
            QPolygonF head;
            head << b << QPointF(b.x() - 5, b.y() + dir * 9) << QPointF(b.x() + 5, b.y() + dir * 9);
            p.drawPolygon(head);
        }
        // One label per pair of pools, at the last import: "⇄ pool + block 0x302000000".
        std::map<std::tuple<size_t, uint64_t, size_t, uint64_t>, std::vector<size_t>> pairs;
        for (size_t i = 0; i < links.size(); ++i)
            pairs[{links[i].exporter, links[i].exportPool, links[i].importer, links[i].importPool}]
                .push_back(i);
        for (const auto& [key, ids] : pairs) {
            size_t last = ids.front();
            bool pool = false;
            QStringList blocks;
            for (size_t i : ids) {
                if (links[i].importTsNs > links[last].importTsNs) last = i;
                if (links[i].kind == interop::IpcLink::Kind::Pool)
                    pool = true;
                else
                    blocks << hexHandle(links[i].ptr);
            }
            const auto line = view_->linkLine(last);
            if (!line) continue;
            const QPointF a = mapFrom(view_, line->first), b = mapFrom(view_, line->second);
            QStringList parts;
            if (pool) parts << QStringLiteral("pool");
            if (blocks.size() == 1)
                parts << QStringLiteral("block %1").arg(blocks.first());
            else if (!blocks.isEmpty())
                parts << QStringLiteral("%1 blocks").arg(blocks.size());
            const QString label =
                QStringLiteral("\u21c4 %1 imported").arg(parts.join(QStringLiteral(" + ")));
            const double dir = b.y() >= a.y() ? -1 : 1;
            const QRectF box = p.fontMetrics().boundingRect(label).adjusted(-4, -1, 4, 1);
            QRectF at = box.translated(b.x() + 8 - box.left(), b.y() + dir * 14 - box.center().y());
            if (at.right() > width() - 2) at.moveRight(b.x() - 8);
            p.setPen(Qt::NoPen);
            p.setBrush(QColor(255, 255, 255, 215));
            p.drawRoundedRect(at, 3, 3);
            p.setPen(kLinkColour.darker(130));
            p.drawText(at, Qt::AlignCenter, label);
        }
    }

private:
    MultiProcessView* view_;
};

MultiProcessView::MultiProcessView(QWidget* parent) : QWidget(parent) {
    loader_ = new MultiTraceLoader(this);
    auto* top = new QVBoxLayout(this);
    top->setContentsMargins(0, 0, 0, 0);
    top->setSpacing(0);
    auto* bar = new QWidget(this);
    auto* bl = new QHBoxLayout(bar);
    bl->setContentsMargins(8, 4, 8, 4);
    alignLabel_ = new QLabel(bar);
    alignLabel_->setObjectName("alignmentLabel");
    alignLabel_->setWordWrap(true);
    alignLabel_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* fit = new QPushButton(tr("Fit All"), bar);
    connect(fit, &QPushButton::clicked, this, &MultiProcessView::fitAll);
    bl->addWidget(alignLabel_, 1);
    bl->addWidget(fit, 0, Qt::AlignTop);
    top->addWidget(bar);
    problemLabel_ = new QLabel(this);
    problemLabel_->setObjectName("problemLabel");
    problemLabel_->setWordWrap(true);
    problemLabel_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    problemLabel_->setContentsMargins(8, 4, 8, 4);
    problemLabel_->setStyleSheet(QStringLiteral("background: #fff3cd; color: #664d03;"));
    problemLabel_->hide();
    top->addWidget(problemLabel_);

    scroll_ = new QScrollArea(this);
    scroll_->setWidgetResizable(true);
    scroll_->setFrameShape(QFrame::NoFrame);
    scroll_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    container_ = new QWidget(scroll_);
    sectionsLayout_ = new QVBoxLayout(container_);
    sectionsLayout_->setContentsMargins(0, 0, 0, 0);
    sectionsLayout_->setSpacing(2);
    sectionsLayout_->addStretch(1);
    scroll_->setWidget(container_);
    container_->installEventFilter(this);
    scroll_->viewport()->installEventFilter(this);
    overlay_ = new LinkOverlay(this, container_);
    top->addWidget(scroll_, 1);

    treeModel_ = new ProcessTreeModel(this);
    tree_ = new QTreeView(this);
    tree_->setObjectName("processTree");
    tree_->setModel(treeModel_);
    tree_->setUniformRowHeights(true);
    tree_->setAlternatingRowColors(true);
    tree_->header()->setStretchLastSection(true);
    tree_->hide(); // the main window puts it in a dock
    connect(treeModel_, &QAbstractItemModel::modelReset, this, &MultiProcessView::fitTreeColumns);
    connect(tree_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& cur) {
                const auto t = treeModel_->targetFor(cur.siblingAtColumn(0));
                if (t.process < 0) return;
                setActiveProcess(t.process);
                scroll_->ensureWidgetVisible(sections_[size_t(t.process)].frame, 0, 0);
                if (t.kind == ProcessTreeModel::NodeKind::Process) return;
                const Selection s{t.kind == ProcessTreeModel::NodeKind::Pool ? Selection::Pool
                                                                             : Selection::Stream,
                                  0,
                                  t.handle,
                                  {}};
                sections_[size_t(t.process)].timeline->setSelection(s);
                highlightFor(t.process, s);
                emit selectionChanged(t.process, s);
            });

    connect(loader_, &MultiTraceLoader::started, this, &MultiProcessView::loadStarted);
    connect(loader_, &MultiTraceLoader::finished, this, &MultiProcessView::onLoaded);
}

MultiProcessView::~MultiProcessView() = default;

void MultiProcessView::fitTreeColumns() {
    tree_->expandAll();
    for (int c = 0; c < ProcessTreeModel::ColumnCount; ++c)
        tree_->resizeColumnToContents(c);
    // Names as wide as they are in bold (a highlighted pool's row is), at their depth.
    QFont bold = tree_->font();
    bold.setBold(true);
    const QFontMetrics fm(bold);
    int widest = 0;
    std::function<void(const QModelIndex&, int)> walk = [&](const QModelIndex& parent, int depth) {
        for (int r = 0; r < treeModel_->rowCount(parent); ++r) {
            const QModelIndex i = treeModel_->index(r, 0, parent);
            widest = std::max(widest, fm.horizontalAdvance(i.data().toString()) +
                                          tree_->indentation() * (depth + 1));
            walk(i, depth + 1);
        }
    };
    walk({}, 0);
    tree_->setColumnWidth(ProcessTreeModel::Name,
                          std::max(tree_->columnWidth(ProcessTreeModel::Name), widest + 16));
}

void MultiProcessView::open(const QStringList& paths) {
    TraceLoadOptions o;
    o.ipc = true;
    loader_->load(paths, o);
}

void MultiProcessView::cancel() {
    loader_->cancel();
}

bool MultiProcessView::busy() const {
    return loader_->busy();
}

void MultiProcessView::onLoaded(const QStringList& paths,
                                const std::vector<TraceLoadResult>& results) {
    QStringList problems;
    for (size_t i = 0; i < results.size(); ++i) {
        const QString name = QFileInfo(paths[int(i)]).fileName();
        if (results[i].cancelled) continue;
        if (!results[i].error.isEmpty())
            problems << tr("Could not open %1 (%2): %3").arg(name, paths[int(i)], results[i].error);
        else if (!results[i].snap.damage.isEmpty())
            problems << tr("%1 is damaged; showing what is intact (%2).")
                            .arg(name, results[i].snap.damage.join(QStringLiteral("; ")));
    }
    const bool any = std::any_of(results.begin(), results.end(), [](const TraceLoadResult& r) {
        return r.error.isEmpty() && !r.cancelled && r.snap.valid();
    });
    if (any) {
        setTraces(results, problems);
        emit loaded();
    }
    if (!problems.isEmpty()) emit loadFailed(problems, !any);
}

void MultiProcessView::clear() {
    for (Section& s : sections_)
        delete s.frame;
    sections_.clear();
    highlighted_.clear();
    active_ = -1;
    treeModel_->resetData(nullptr);
    set_ = {};
}

void MultiProcessView::setTraces(const std::vector<TraceLoadResult>& results,
                                 const QStringList& problems) {
    clear();
    set_ = ProcessSet::build(results);
    treeModel_->resetData(&set_);
    problemLabel_->setText(problems.join(QLatin1Char('\n')));
    problemLabel_->setVisible(!problems.isEmpty());
    if (set_.empty()) {
        alignLabel_->setText(tr("No trace could be opened."));
        return;
    }
    const size_t n = set_.entries.size(), k = set_.links.size();
    alignLabel_->setText(
        (n == 1 ? tr("1 process") : tr("%1 processes").arg(n)) +
        (k == 0   ? tr(", nothing shared between them. ")
         : k == 1 ? tr(", 1 link between them (a pool or block one exported, another imported). ")
                  : tr(", %1 links between them (pools or blocks one exported, another imported). ")
                        .arg(k)) +
        set_.alignmentText());
    buildSections();
    fitAll();
    // The first view: where the allocators of all processes were busy, as for one trace.
    int64_t a = INT64_MAX, b = INT64_MIN;
    for (size_t i = 0; i < set_.entries.size(); ++i) {
        const view::TimeSpan act = view::allocatorActivity(*set_.entries[i].snap.timeline);
        if (act.empty()) continue;
        a = std::min(a, set_.toShared(int(i), act.begin));
        b = std::max(b, set_.toShared(int(i), act.end));
    }
    const int64_t whole = std::max<int64_t>(1, set_.alignment.end - set_.alignment.begin);
    if (a < b && b - a < whole * 8 / 10) {
        const int64_t m = std::max<int64_t>((b - a) / 30, 25);
        setViewRange(a - m, b + m);
    }
    // The docks follow the active process: the first that allocated anything, not a launcher
    // with nothing to show.
    int first = 0;
    for (size_t i = 0; i < set_.entries.size(); ++i)
        if (set_.entries[i].snap.timeline->eventCount != 0) {
            first = int(i);
            break;
        }
    setActiveProcess(first);
}

void MultiProcessView::buildSections() {
    const int64_t begin = set_.alignment.begin, end = set_.alignment.end;
    for (size_t i = 0; i < set_.entries.size(); ++i) {
        const ProcessEntry& e = set_.entries[i];
        Section s;
        s.frame = new QWidget(container_);
        auto* fl = new QVBoxLayout(s.frame);
        fl->setContentsMargins(0, 0, 0, 0);
        fl->setSpacing(0);
        s.header = new QWidget(s.frame);
        s.header->setObjectName(QStringLiteral("processHeader%1").arg(i));
        s.header->setAutoFillBackground(true);
        s.header->installEventFilter(this);
        auto* hl = new QHBoxLayout(s.header);
        hl->setContentsMargins(6 + 18 * e.depth, 2, 8, 2);
        s.toggle = new QToolButton(s.header);
        s.toggle->setAutoRaise(true);
        s.toggle->setArrowType(Qt::DownArrow);
        s.toggle->setToolTip(tr("Collapse or expand this process's lanes"));
        connect(s.toggle, &QToolButton::clicked, this,
                [this, i] { setGroupCollapsed(int(i), !sections_[i].collapsed); });
        s.title = new QLabel(s.header);
        s.title->setTextFormat(Qt::RichText);
        const Timeline& tl = *e.snap.timeline;
        QStringList detail;
        if (e.parent >= 0) detail << tr("child of pid %1").arg(e.snap.process.parentPid);
        detail << e.snap.title
               << tr("%1 events over %2")
                      .arg(qs(formatCount(tl.eventCount)), qs(formatDuration(nsBetween(tl.t0, tl.t1))))
               << tr("starts at +%1").arg(qs(formatDuration(set_.toShared(int(i), tl.t0) - begin)));
        s.title->setText(
            QStringLiteral("<b>%1</b> &nbsp;·&nbsp; %2")
                .arg(e.title.toHtmlEscaped(), detail.join(QStringLiteral(" · ")).toHtmlEscaped()));
        s.title->setToolTip(
            QStringLiteral("%1\n%2").arg(qs(e.snap.process.commandLine), e.snap.path));
        s.title->setMinimumWidth(0);
        s.title->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
        hl->addWidget(s.toggle);
        hl->addWidget(s.title, 1);
        fl->addWidget(s.header);
        s.timeline = new TimelineWidget(s.frame);
        s.timeline->setObjectName(QStringLiteral("processTimeline%1").arg(i));
        s.timeline->installEventFilter(this);
        // Its own clock: the shared axis' origin and extent, moved by this trace's offset.
        s.timeline->setTimeFrame(set_.fromShared(int(i), begin), set_.fromShared(int(i), begin),
                                 set_.fromShared(int(i), end),
                                 tr("time since the first event of all"));
        s.timeline->setSnapshot(e.snap);
        fl->addWidget(s.timeline);
        sectionsLayout_->insertWidget(int(i), s.frame);
        connect(s.timeline, &TimelineWidget::viewRangeChanged, this,
                [this, i](qint64 a, qint64 b) { syncFrom(int(i), a, b); });
        connect(s.timeline, &TimelineWidget::selectionChanged, this,
                [this, i](const Selection& sel) { onTimelineSelection(int(i), sel); });
        connect(s.timeline, &TimelineWidget::cursorRequested, this,
                [this, i](qint64 t) { setCursorTime(set_.toShared(int(i), t)); });
        connect(s.timeline, &TimelineWidget::lanesScrolled, overlay_,
                qOverload<>(&QWidget::update));
        connect(s.timeline, &TimelineWidget::lanesCollapsedChanged, this,
                &MultiProcessView::relayoutSections);
        // A process that never used the allocator (torchrun's launcher, a DataLoader worker)
        // would take a group's height to say so: it starts collapsed, its header says why.
        if (tl.eventCount == 0) {
            s.collapsed = true;
            s.toggle->setArrowType(Qt::RightArrow);
            s.title->setText(s.title->text() + tr(" · <i>nothing allocated: collapsed</i>"));
        }
        sections_.push_back(s);
    }
    overlay_->raise();
    relayoutSections();
}

void MultiProcessView::relayoutSections() {
    if (sections_.empty()) return;
    const int avail = scroll_->viewport()->height() - int(sections_.size()) * 2;
    int headers = 0, want = 0;
    std::vector<int> wants;
    for (const Section& s : sections_) {
        headers += s.header->sizeHint().height();
        const int w = s.collapsed
                          ? 0
                          : std::max(s.timeline->minimumHeight(), s.timeline->contentHeight() + 4);
        wants.push_back(w);
        want += w;
    }
    const int room = std::max(0, avail - headers);
    for (size_t i = 0; i < sections_.size(); ++i) {
        Section& s = sections_[i];
        s.timeline->setVisible(!s.collapsed);
        if (s.collapsed) continue;
        int h = wants[i];
        if (want <= room && want > 0)
            h += (room - want) * wants[i] / want; // fill the page, in proportion
        else
            h = std::clamp(h, s.timeline->minimumHeight(),
                           std::max(s.timeline->minimumHeight(), room * 6 / 10));
        s.timeline->setFixedHeight(h);
    }
    overlay_->update();
}

TimelineWidget* MultiProcessView::timeline(int i) const {
    return i >= 0 && size_t(i) < sections_.size() ? sections_[size_t(i)].timeline : nullptr;
}

QString MultiProcessView::groupTitle(int i) const {
    if (i < 0 || size_t(i) >= sections_.size()) return {};
    QTextDocument doc;
    doc.setHtml(sections_[size_t(i)].title->text());
    return doc.toPlainText();
}

QWidget* MultiProcessView::groupHeader(int i) const {
    return i >= 0 && size_t(i) < sections_.size() ? sections_[size_t(i)].header : nullptr;
}

bool MultiProcessView::groupCollapsed(int i) const {
    return i >= 0 && size_t(i) < sections_.size() && sections_[size_t(i)].collapsed;
}

void MultiProcessView::setGroupCollapsed(int i, bool collapsed) {
    if (i < 0 || size_t(i) >= sections_.size()) return;
    Section& s = sections_[size_t(i)];
    s.collapsed = collapsed;
    s.toggle->setArrowType(collapsed ? Qt::RightArrow : Qt::DownArrow);
    relayoutSections();
}

QString MultiProcessView::alignmentText() const {
    return alignLabel_->text();
}

QString MultiProcessView::problemsText() const {
    return problemLabel_->isVisible() ? problemLabel_->text() : QString();
}

void MultiProcessView::setActiveProcess(int i) {
    if (i < 0 || size_t(i) >= sections_.size() || i == active_) return;
    active_ = i;
    for (size_t j = 0; j < sections_.size(); ++j)
        if (int(j) != i) sections_[j].timeline->setSelection({});
    updateHeaders();
    emit activeProcessChanged(i);
}

void MultiProcessView::updateHeaders() {
    for (size_t j = 0; j < sections_.size(); ++j) {
        QPalette pal = sections_[j].header->palette();
        const QPalette base = palette();
        QColor bg = base.color(QPalette::AlternateBase);
        if (int(j) == active_) {
            bg = base.color(QPalette::Highlight);
            bg.setAlpha(60);
        }
        pal.setColor(QPalette::Window, bg);
        sections_[j].header->setPalette(pal);
    }
}

void MultiProcessView::setSelection(const Selection& s) {
    if (active_ < 0) return;
    sections_[size_t(active_)].timeline->setSelection(s);
    highlightFor(active_, s);
}

void MultiProcessView::selectPool(int process, uint64_t pool) {
    if (process < 0 || size_t(process) >= sections_.size()) return;
    setActiveProcess(process);
    const Selection s{Selection::Pool, 0, pool, {}};
    sections_[size_t(process)].timeline->setSelection(s);
    highlightFor(process, s);
    emit selectionChanged(process, s);
}

void MultiProcessView::onTimelineSelection(int i, const Selection& s) {
    setActiveProcess(i);
    highlightFor(i, s);
    emit selectionChanged(i, s);
}

void MultiProcessView::highlightFor(int i, const Selection& s) {
    highlighted_.clear();
    for (Section& sec : sections_)
        sec.timeline->setHighlightedLane(-1);
    const LaneLayout& layout = *set_.entries[size_t(i)].snap.layout;
    QModelIndex row;
    if (s.kind == Selection::Pool) {
        highlighted_.emplace_back(i, s.handle);
        for (const auto& lp : set_.linkedPools(i, s.handle))
            highlighted_.push_back(lp);
        for (const auto& [p, pool] : highlighted_) {
            const int lane = set_.entries[size_t(p)].snap.layout->laneOfPool(pool);
            sections_[size_t(p)].timeline->setHighlightedLane(lane);
            if (lane >= 0) sections_[size_t(p)].timeline->scrollToLane(lane);
        }
        row = treeModel_->indexFor(i, ProcessTreeModel::NodeKind::Pool, s.handle);
    } else if (s.kind == Selection::Stream) {
        const int lane = layout.laneOfStream(s.handle);
        sections_[size_t(i)].timeline->setHighlightedLane(lane);
        if (lane >= 0) sections_[size_t(i)].timeline->scrollToLane(lane);
        row = treeModel_->indexFor(i, ProcessTreeModel::NodeKind::Stream, s.handle);
    }
    treeModel_->setHighlightedPools(highlighted_);
    if (row.isValid() && tree_->currentIndex().siblingAtColumn(0) != row) {
        // A link row already standing for this pool stays current.
        const auto cur = treeModel_->targetFor(tree_->currentIndex().siblingAtColumn(0));
        if (!(cur.link && cur.process == i && cur.handle == s.handle)) {
            const QSignalBlocker b(tree_->selectionModel());
            tree_->setCurrentIndex(row);
            tree_->viewport()->update(); // it repaints on the signals just blocked
        }
    }
    overlay_->update();
}

std::pair<int64_t, int64_t> MultiProcessView::viewRange() const {
    if (sections_.empty()) return {0, 0};
    const TimelineWidget* t = sections_[0].timeline;
    return {set_.toShared(0, t->viewStart()), set_.toShared(0, t->viewEnd())};
}

void MultiProcessView::setViewRange(int64_t a, int64_t b) {
    if (sections_.empty()) return;
    sections_[0].timeline->setViewRange(set_.fromShared(0, a), set_.fromShared(0, b));
    // The first group clamps the range to the shared extent; the others follow in syncFrom.
}

void MultiProcessView::syncFrom(int i, int64_t a, int64_t b) {
    if (syncing_) return;
    syncing_ = true;
    const int64_t sa = set_.toShared(i, a), sb = set_.toShared(i, b);
    for (size_t j = 0; j < sections_.size(); ++j)
        if (int(j) != i)
            sections_[j].timeline->setViewRange(set_.fromShared(int(j), sa),
                                                set_.fromShared(int(j), sb));
    syncing_ = false;
    overlay_->update();
}

void MultiProcessView::fitAll() {
    if (sections_.empty()) return;
    const int64_t a = set_.alignment.begin, b = std::max(set_.alignment.end, a + 50);
    const int64_t m = (b - a) / 100;
    setViewRange(a - m, b + m);
}

void MultiProcessView::setCursorTime(int64_t t) {
    cursor_ = t;
    for (size_t j = 0; j < sections_.size(); ++j)
        sections_[j].timeline->setCursorTime(t == INT64_MIN ? t : set_.fromShared(int(j), t));
}

std::optional<std::pair<QPointF, QPointF>> MultiProcessView::linkLine(size_t k) const {
    if (k >= set_.links.size()) return std::nullopt;
    const interop::IpcLink& l = set_.links[k];
    auto at = [&](size_t process, uint64_t pool, int64_t t) -> std::optional<QPointF> {
        if (process >= sections_.size() || sections_[process].collapsed) return std::nullopt;
        const TimelineWidget* tw = sections_[process].timeline;
        int lane = set_.entries[process].snap.layout->laneOfPool(pool);
        if (lane < 0) return std::nullopt;
        while (lane > 0 && tw->laneHeight(lane) <= 0)
            --lane; // inside a collapsed group: its header
        const double lanesTop = tw->lanesTop(), lanesBottom = tw->height() - tw->legendHeight();
        const double y =
            std::clamp(tw->laneTop(lane) + tw->laneHeight(lane) / 2.0, lanesTop, lanesBottom);
        const double left = tw->labelWidth(), right = tw->width() - tw->rightPad();
        const int64_t v0 = tw->viewStart(), v1 = std::max(tw->viewEnd(), v0 + 1);
        const double x =
            std::clamp(left + double(t - v0) * (right - left) / double(v1 - v0), left, right);
        return tw->mapTo(this, QPointF(x, y));
    };
    const auto a = at(l.exporter, l.exportPool, l.exportTsNs),
               b = at(l.importer, l.importPool, l.importTsNs);
    if (!a || !b) return std::nullopt;
    return std::pair(*a, *b);
}

void MultiProcessView::resizeEvent(QResizeEvent* e) {
    QWidget::resizeEvent(e);
    relayoutSections();
}

bool MultiProcessView::eventFilter(QObject* watched, QEvent* event) {
    if (watched == container_ && event->type() == QEvent::Resize) {
        overlay_->setGeometry(container_->rect());
        overlay_->raise();
    } else if (watched == scroll_->viewport() && event->type() == QEvent::Resize) {
        relayoutSections();
    } else if (event->type() == QEvent::MouseButtonPress) {
        for (size_t i = 0; i < sections_.size(); ++i)
            if (watched == sections_[i].header || watched == sections_[i].timeline)
                setActiveProcess(int(i));
    } else if (event->type() == QEvent::Resize || event->type() == QEvent::Move) {
        overlay_->update();
    }
    return QWidget::eventFilter(watched, event);
}

} // namespace poolscope::ui
