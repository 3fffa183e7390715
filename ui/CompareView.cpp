#include "CompareView.h"

#include "DiffTableModel.h"
#include "WatermarkPlot.h"
#include "poolscope/Units.h"
#include "poolscope/interop/ProcessTree.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QTreeView>
#include <QVBoxLayout>
#include <algorithm>

namespace poolscope::ui {

namespace {
QString qs(const std::string& s) {
    return QString::fromStdString(s);
}

QString describe(const TraceSnapshot& s) {
    const Timeline& tl = *s.timeline;
    const QString head = QStringLiteral("%1 · %2 · ").arg(s.title, qs(interop::processTitle(s.process)));
    const QString span = qs(formatDuration(nsBetween(tl.t0, tl.t1)));
    // A run larger than the window holds is plotted from its beginning; the table below still
    // compares all of it (TraceLoadOptions::report).
    if (tl.partial && tl.totalEvents > tl.eventCount)
        return head + CompareView::tr("%1 events over %2; the first %3 plotted (as many as the "
                                      "window holds), all of them compared in the table")
                          .arg(qs(formatCount(tl.totalEvents)), span, qs(formatCount(tl.eventCount)));
    return head + CompareView::tr("%1 events over %2").arg(qs(formatCount(tl.eventCount)), span);
}
} // namespace

CompareView::CompareView(QWidget* parent) : QWidget(parent) {
    loader_ = new MultiTraceLoader(this);
    auto* top = new QVBoxLayout(this);
    top->setContentsMargins(0, 0, 0, 0);
    top->setSpacing(0);

    auto* bar = new QWidget(this);
    auto* bl = new QHBoxLayout(bar);
    bl->setContentsMargins(8, 4, 8, 4);
    header_ = new QLabel(bar);
    header_->setObjectName("compareHeader");
    header_->setWordWrap(true);
    header_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    bl->addWidget(header_, 1);
    bl->addWidget(new QLabel(tr("Line up:"), bar));
    align_ = new QComboBox(bar);
    align_->setObjectName("alignChoice");
    align_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    align_->setToolTip(
        tr("Where the two runs' time axes meet: their first events, or the first start of an NVTX "
           "range both recorded"));
    bl->addWidget(align_);
    unchanged_ = new QCheckBox(tr("Show unchanged"), bar);
    unchanged_->setToolTip(
        tr("List every metric, not only those that differ (poolscope diff --all)"));
    bl->addWidget(unchanged_);
    auto* fit = new QPushButton(tr("Fit All"), bar);
    bl->addWidget(fit);
    auto* close = new QPushButton(tr("Close Comparison"), bar);
    close->setObjectName("closeComparison");
    bl->addWidget(close);
    top->addWidget(bar);
    alignNote_ = new QLabel(this);
    alignNote_->setObjectName("alignNote");
    alignNote_->setContentsMargins(8, 0, 8, 4);
    alignNote_->setWordWrap(true);
    top->addWidget(alignNote_);

    splitter_ = new QSplitter(Qt::Vertical, this);
    auto plotBox = [&](QLabel*& title, WatermarkPlot*& plot, const char* name) {
        auto* w = new QWidget(splitter_);
        auto* l = new QVBoxLayout(w);
        l->setContentsMargins(0, 0, 0, 0);
        l->setSpacing(0);
        title = new QLabel(w);
        title->setObjectName(name);
        title->setContentsMargins(8, 2, 8, 0);
        title->setTextFormat(Qt::RichText);
        title->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
        plot = new WatermarkPlot(w);
        plot->setHorizontalMargins(80, 14);
        l->addWidget(title);
        l->addWidget(plot, 1);
        splitter_->addWidget(w);
    };
    plotBox(titleA_, plotA_, "plotTitleA");
    plotBox(titleB_, plotB_, "plotTitleB");
    model_ = new DiffTableModel(this);
    table_ = new QTreeView(splitter_);
    table_->setObjectName("diffTable");
    table_->setModel(model_);
    table_->setUniformRowHeights(true);
    table_->setAlternatingRowColors(true);
    // The metric's name takes the spare width; values and deltas sit side by side.
    table_->header()->setStretchLastSection(false);
    table_->header()->setSectionResizeMode(DiffTableModel::Name, QHeaderView::Stretch);
    splitter_->addWidget(table_);
    splitter_->setStretchFactor(0, 3);
    splitter_->setStretchFactor(1, 3);
    splitter_->setStretchFactor(2, 4);
    top->addWidget(splitter_, 1);

    connect(model_, &QAbstractItemModel::modelReset, this, [this] {
        table_->expandAll();
        const int minimum =
            table_->fontMetrics().horizontalAdvance(QStringLiteral("+12.9 GiB (+311.6 %)")) + 24;
        for (int c = DiffTableModel::A; c < DiffTableModel::ColumnCount; ++c) {
            table_->resizeColumnToContents(c);
            table_->setColumnWidth(c, std::clamp(table_->columnWidth(c), minimum, 360));
        }
    });
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& cur) {
                const QModelIndex row = cur.siblingAtColumn(0);
                auto k = model_->kindOf(row);
                QModelIndex entity = row;
                if (k == DiffTableModel::RowKind::Metric) {
                    entity = row.parent();
                    k = model_->kindOf(entity);
                }
                const bool pool = k == DiffTableModel::RowKind::Pool;
                plotA_->setHighlightedPool(
                    pool ? entity.data(DiffTableModel::HandleARole).toULongLong() : 0);
                plotB_->setHighlightedPool(
                    pool ? entity.data(DiffTableModel::HandleBRole).toULongLong() : 0);
            });
    connect(unchanged_, &QCheckBox::toggled, model_, &DiffTableModel::setShowUnchanged);
    connect(align_, qOverload<int>(&QComboBox::activated), this, [this] { applyAlignment(); });
    connect(fit, &QPushButton::clicked, this, &CompareView::fitAll);
    connect(close, &QPushButton::clicked, this, &CompareView::closeRequested);
    auto follow = [this](WatermarkPlot* from) {
        return [this, from](qint64 t0, qint64 t1) {
            if (applying_) return;
            setViewRange(t0 - from->origin(), t1 - from->origin());
        };
    };
    connect(plotA_, &WatermarkPlot::viewRangeRequested, this, follow(plotA_));
    connect(plotB_, &WatermarkPlot::viewRangeRequested, this, follow(plotB_));
    connect(loader_, &MultiTraceLoader::finished, this,
            [this](const QStringList& paths, const std::vector<TraceLoadResult>& r) {
                QStringList problems;
                for (size_t i = 0; i < r.size(); ++i)
                    if (!r[i].cancelled && !r[i].error.isEmpty())
                        problems << tr("Could not open %1 (%2): %3")
                                        .arg(QFileInfo(paths[int(i)]).fileName(), paths[int(i)],
                                             r[i].error);
                if (r.size() != 2 || !problems.isEmpty() || r[0].cancelled || r[1].cancelled) {
                    if (!problems.isEmpty()) emit loadFailed(problems);
                    return;
                }
                setTraces(r[0], r[1]);
                emit loaded();
            });
}

void CompareView::open(const QString& a, const QString& b) {
    TraceLoadOptions o;
    o.report = true;
    loader_->load({a, b}, o);
}

void CompareView::setTraces(const TraceLoadResult& a, const TraceLoadResult& b) {
    a_ = a;
    b_ = b;
    auto d = std::make_shared<interop::TraceDiff>(
        interop::diffTraces({a_.report.get(), a_.snap.timeline.get(), a_.snap.stacks.get(), a_.diffFacts.get()},
                            {b_.report.get(), b_.snap.timeline.get(), b_.snap.stacks.get(), b_.diffFacts.get()}));
    model_->setDiff(d);
    header_->setText(tr("Comparing <b>A</b> %1 with <b>B</b> %2. Differences are B \u2212 A.")
                         .arg(a_.snap.title.toHtmlEscaped(), b_.snap.title.toHtmlEscaped()));
    titleA_->setText(tr("<b>A</b> · %1").arg(describe(a_.snap).toHtmlEscaped()));
    titleB_->setText(tr("<b>B</b> · %1").arg(describe(b_.snap).toHtmlEscaped()));
    titleA_->setToolTip(a_.snap.path);
    titleB_->setToolTip(b_.snap.path);
    plotA_->setSnapshot(a_.snap);
    plotB_->setSnapshot(b_.snap);
    align_->clear();
    align_->addItem(tr("by start"), QVariant());
    for (const std::string& name :
         interop::commonNvtxRanges(a_.snap.stacks.get(), b_.snap.stacks.get()))
        align_->addItem(tr("by NVTX range \u201c%1\u201d").arg(qs(name)), qs(name));
    // The first common range when there is one (a training step lines up with itself).
    align_->setCurrentIndex(align_->count() > 1 ? 1 : 0);
    align_->setEnabled(align_->count() > 1);
    applyAlignment();
}

void CompareView::applyAlignment() {
    if (!a_.snap.valid() || !b_.snap.valid()) return;
    const QVariant v = align_->currentData();
    alignment_ = interop::alignRuns(
        *a_.snap.timeline, a_.snap.stacks.get(), *b_.snap.timeline, b_.snap.stacks.get(),
        v.isValid() ? std::optional<std::string>(v.toString().toStdString()) : std::nullopt);
    QString note = qs(alignment_.description) + QStringLiteral(".");
    if (align_->count() == 1) {
        const bool ra = a_.snap.stacks && !a_.snap.stacks->ranges.empty();
        const bool rb = b_.snap.stacks && !b_.snap.stacks->ranges.empty();
        note += !ra && !rb   ? tr(" Neither run recorded NVTX ranges.")
                : !ra || !rb ? tr(" Only %1 recorded NVTX ranges.")
                                   .arg(ra ? QStringLiteral("A") : QStringLiteral("B"))
                             : tr(" The runs share no NVTX range name.");
    }
    alignNote_->setText(note);
    plotA_->setTimeOrigin(alignment_.originA);
    plotB_->setTimeOrigin(alignment_.originB);
    fitAll();
}

void CompareView::fitAll() {
    if (!a_.snap.valid() || !b_.snap.valid()) return;
    const Timeline& ta = *a_.snap.timeline;
    const Timeline& tb = *b_.snap.timeline;
    const int64_t lo = std::min(ta.t0 - alignment_.originA, tb.t0 - alignment_.originB);
    const int64_t hi = std::max({ta.t1 - alignment_.originA, tb.t1 - alignment_.originB, lo + 50});
    const int64_t m = (hi - lo) / 100;
    setViewRange(lo - m, hi + m);
}

void CompareView::setViewRange(int64_t x0, int64_t x1) {
    if (!a_.snap.valid() || !b_.snap.valid()) return;
    x0_ = x0;
    x1_ = std::max(x1, x0 + 1);
    applying_ = true;
    plotA_->setViewRange(alignment_.originA + x0_, alignment_.originA + x1_);
    plotB_->setViewRange(alignment_.originB + x0_, alignment_.originB + x1_);
    applying_ = false;
    syncYScale();
}

void CompareView::syncYScale() {
    // One byte scale: the same height means the same bytes in both plots.
    const uint64_t y = std::max(plotA_->dataYMax(), plotB_->dataYMax());
    plotA_->setYFloor(y);
    plotB_->setYFloor(y);
}

void CompareView::showEvent(QShowEvent* e) {
    QWidget::showEvent(e);
    if (sized_) return;
    sized_ = true;
    // The table gets the most: it is what is read; the plots show where.
    const int h = std::max(300, splitter_->height());
    splitter_->setSizes({h * 3 / 10, h * 3 / 10, h * 4 / 10});
}

QString CompareView::headerText() const {
    return header_->text();
}

} // namespace poolscope::ui
