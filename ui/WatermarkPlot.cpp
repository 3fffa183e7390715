#include "WatermarkPlot.h"

#include "ColorScheme.h"
#include "StepGraph.h"
#include "TimeTicker.h"
#include "poolscope/Units.h"
#include "poolscope/view/NvtxRows.h"

#include <QAction>
#include <QLabel>
#include <QPainter>
#include <QMenu>
#include <QToolTip>
#include <QTextDocument>
#include <QSizePolicy>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

namespace poolscope::ui {

namespace {
// The trim / release triangle, rendered once and stamped: QCustomPlot's own shape is a polygon
// through Qt's rasterizer per marker, ~10 % of a zoomed-out replot (perf).
QCPScatterStyle releaseMarkerStyle(const QColor& col) {
    constexpr int kSize = 8;
    QPixmap pm(kSize + 3, kSize + 3);
    pm.fill(Qt::transparent);
    {
        QCPPainter pp(&pm);
        pp.setAntialiasing(false);
        const QCPScatterStyle shape(QCPScatterStyle::ssTriangleInverted, col, col, kSize);
        shape.applyTo(&pp, QPen(col));
        shape.drawShape(&pp, pm.width() / 2.0, pm.height() / 2.0);
    }
    return QCPScatterStyle(pm);
}
} // namespace

WatermarkPlot::WatermarkPlot(QWidget* parent) : QWidget(parent) {
    plot_ = new QCustomPlot(this);
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    lay->addWidget(plot_);
    setMinimumHeight(140);
    ticker_.reset(new TimeTicker);
    plot_->xAxis->setTicker(ticker_);
    plot_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new BytesTicker));
    plot_->yAxis->setLabel(tr("pool memory"));
    plot_->axisRect()->setAutoMargins(QCP::msTop | QCP::msBottom);
    plot_->axisRect()->setMargins(QMargins(left_, 6, right_, 24));
    plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    // Series are already reduced to ~2 points per pixel; antialiasing them buys nothing visible
    // and costs most of the replot time at fit-all.
    plot_->setNotAntialiasedElements(QCP::aeAll);
    // One drawPolyline per graph: with 1-px solid pens Qt's cosmetic stroker takes the whole
    // line at once, faster than QCustomPlot's segment-by-segment "fast polylines".
    plot_->setPlottingHint(QCP::phFastPolylines, false);
    plot_->axisRect()->setRangeDrag(Qt::Horizontal);
    plot_->axisRect()->setRangeZoom(Qt::Horizontal);
    // The legend is a label above the plot, not QCustomPlot's: its legend measured and drew
    // its text on every replot, ~1/4 of a fit-all replot, for content that changes only with
    // the trace or the palette.
    plot_->legend->setVisible(false);
    // ...so graphs never enter it. QCustomPlot finds a graph's legend item by a linear scan and
    // re-lays the legend out on each removal: adding and clearing the five graphs of each of
    // 1,000 pools took 62 s when a trace closed (issue #12).
    plot_->setAutoAddPlottableToLegend(false);
    legend_ = new QLabel(this);
    QFont lf = font();
    lf.setPointSizeF(lf.pointSizeF() * 0.85);
    legend_->setFont(lf);
    legend_->setWordWrap(true);
    legend_->setTextFormat(Qt::RichText);
    legend_->setContentsMargins(left_, 2, right_, 0);
    legend_->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Maximum);
    lay->insertWidget(0, legend_, 0);
    lay->setStretchFactor(plot_, 1);
    // One paint buffer instead of two (the overlay layer holds nothing here).
    if (QCPLayer* overlay = plot_->layer(QStringLiteral("overlay")))
        overlay->setMode(QCPLayer::lmLogical);
    cursorLine_ = new QCPItemStraightLine(plot_);
    cursorLine_->setVisible(false);
    emptyNote_ = new QCPItemText(plot_);
    emptyNote_->position->setType(QCPItemPosition::ptAxisRectRatio);
    emptyNote_->position->setCoords(0.5, 0.5);
    emptyNote_->setPositionAlignment(Qt::AlignCenter);
    setEmptyNote(tr("No trace open: File > Open, or drop a .poolscope file here."));
    connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
            [this](const QCPRange& r) {
                if (applyingRange_ || !snap_.valid()) return;
                const int64_t t0 = origin();
                emit viewRangeRequested(t0 + int64_t(r.lower), t0 + int64_t(r.upper));
            });
    // A click without a drag places the replay cursor; a drag pans (QCustomPlot's own).
    connect(plot_, &QCustomPlot::mousePress, this,
            [this](QMouseEvent* e) { pressPos_ = e->pos(); });
    connect(plot_, &QCustomPlot::mouseRelease, this, [this](QMouseEvent* e) {
        if (e->button() != Qt::LeftButton) return; // the right button opens the menu
        if (!snap_.valid() || (e->pos() - pressPos_).manhattanLength() > 3) return;
        if (!plot_->axisRect()->rect().contains(e->pos())) return;
        emit cursorRequested(origin() + int64_t(plot_->xAxis->pixelToCoord(e->position().x())));
    });
    // The split by NVTX range: its bands on a layer under the lines, so that the used line
    // they add up to stays on top.
    plot_->addLayer(QStringLiteral("split"), plot_->layer(QStringLiteral("main")),
                    QCustomPlot::limBelow);
    splitLayer_ = plot_->layer(QStringLiteral("split"));
    splitAction_ = new QAction(tr("Split Used Bytes by NVTX &Range"), this);
    splitAction_->setCheckable(true);
    splitAction_->setEnabled(false);
    splitAction_->setToolTip(tr("Stack the used bytes of the selected pool (else the pool with "
                                "the highest used peak) by the innermost NVTX range open on the "
                                "allocating thread when each live allocation was made"));
    connect(splitAction_, &QAction::toggled, this, &WatermarkPlot::setSplitByRange);
    plot_->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(plot_, &QWidget::customContextMenuRequested, this, [this](const QPoint& at) {
        QMenu menu(this);
        menu.addAction(splitAction_);
        menu.exec(plot_->mapToGlobal(at));
    });
    plot_->setMouseTracking(true);
    connect(plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
        if (!shownSplit_) return;
        const QString tip = splitToolTip(e->pos());
        if (tip.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(e->globalPosition().toPoint(), tip, plot_);
    });
    applyTheme();
}

void WatermarkPlot::setHorizontalMargins(int left, int right) {
    left_ = left;
    right_ = right;
    plot_->axisRect()->setMargins(QMargins(left_, 6, right_, 24));
    legend_->setContentsMargins(left_, 2, right_, 0);
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void WatermarkPlot::setSnapshot(const TraceSnapshot& s) {
    snap_ = s;
    ++generation_;
    views_.clear();
    splits_.clear();
    rebuildGraphs();
    if (s.valid()) setViewRange(s.timeline->t0, s.timeline->t1);
}

void WatermarkPlot::setEmptyNote(const QString& text) {
    const bool empty = !text.isEmpty();
    for (QCPAxis* ax : {plot_->xAxis, plot_->yAxis}) {
        ax->setTicks(!empty);
        ax->setTickLabels(!empty);
    }
    plot_->yAxis->setLabel(empty ? QString() : tr("pool memory"));
    plot_->xAxis->grid()->setVisible(!empty);
    plot_->yAxis->grid()->setVisible(!empty);
    emptyNote_->setText(text);
    emptyNote_->setColor(palette().color(QPalette::PlaceholderText));
    emptyNote_->setVisible(empty);
}

void WatermarkPlot::rebuildGraphs() {
    plot_->clearGraphs();
    graphs_.clear();
    siteGraph_ = nullptr; // cleared with the others; a new document drops the highlight
    site_.reset();
    predictedGraph_ = nullptr; // the What-if panel's curve stays until the panel drops it
    bandGraphs_.clear();
    shownSplit_.reset();
    if (!snap_.valid()) {
        splitAction_->setEnabled(false);
        setEmptyNote(tr("No trace open: File > Open, or drop a .poolscope file here."));
        legend_->clear();
        plot_->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    views_.clear(); // one entry per graph set
    ColorScheme c(palette());
    // In lane order (pool #1 first), the legend's order too.
    std::vector<std::pair<int, size_t>> order; // lane, pool index
    for (size_t i = 0; i < snap_.timeline->pools.size(); ++i) {
        const int lane = snap_.layout->laneOfPool(snap_.timeline->pools[i].info.handle);
        if (lane >= 0) order.emplace_back(lane, i); // no lane: e.g. an empty unknown pool
    }
    std::sort(order.begin(), order.end());
    for (const auto& [lane, i] : order) {
        const PoolTimeline& p = snap_.timeline->pools[i];
        PoolGraphs g;
        g.pool = p.info.handle;
        const QString name = snap_.layout->poolName(p.info.handle);
        const int ci = snap_.layout->lanes[size_t(lane)].poolSlot; // the timeline's colours
        g.used = new StepGraph(plot_->xAxis, plot_->yAxis);
        g.used->setName(tr("%1 used").arg(name));
        g.used->setLineStyle(QCPGraph::lsStepLeft);
        QColor uc = c.usedColor(ci);
        // Solid one-pixel pens: StepGraph fills these step lines column by column (Qt's
        // cosmetic rasterizer, used for a dimmed one, was most of a fit-all replot); wider or
        // dashed ones go through the stroker, which made a fit-all replot ~2x slower.
        g.used->setPen(QPen(uc, 1));
        // No fill under "used": filling under a noisy step line costs more than the rest of
        // the replot together.
        g.reserved = new StepGraph(plot_->xAxis, plot_->yAxis);
        g.reserved->setName(tr("%1 reserved").arg(name));
        g.reserved->setLineStyle(QCPGraph::lsStepLeft);
        g.reserved->setPen(QPen(c.reservedColor(ci), 1));
        g.high = plot_->addGraph();
        g.high->setName(tr("%1 reserved high watermark").arg(name));
        g.high->setLineStyle(QCPGraph::lsStepLeft);
        g.high->setPen(QPen(c.reservedColor(ci), 1, Qt::DotLine));
        g.threshold = plot_->addGraph();
        g.threshold->setName(tr("%1 release threshold").arg(name));
        g.threshold->setLineStyle(QCPGraph::lsStepLeft);
        g.threshold->setPen(QPen(c.reservedColor(ci).darker(130), 1, Qt::DashDotLine));
        g.events = plot_->addGraph();
        g.events->setName(tr("implicit release"));
        g.events->setLineStyle(QCPGraph::lsNone);
        g.events->setScatterStyle(releaseMarkerStyle(c.releaseColor()));
        g.trims = plot_->addGraph();
        g.trims->setName(tr("trim"));
        g.trims->setLineStyle(QCPGraph::lsNone);
        g.trims->setScatterStyle(releaseMarkerStyle(c.trimColor()));
        graphs_.push_back(g);
    }
    uint64_t peak = 0;
    for (const PoolTimeline& p : snap_.timeline->pools)
        peak = std::max(peak, p.peakReserved);
    setEmptyNote(graphs_.empty() || peak == 0
                     ? (snap_.timeline->eventCount == 0
                            ? tr("This trace holds no events: the program never used the "
                                 "stream-ordered allocator while it was recorded.")
                            : tr("No pool memory was reserved in this trace (no "
                                 "cudaMallocAsync / cudaMallocFromPoolAsync succeeded)."))
                     : QString());
    // The legend: a line sample in each graph's colour, then its name.
    QStringList items;
    // Non-breaking spaces inside an entry: the label wraps between entries, never inside one
    // ("pool #3 / (explicit) reserved").
    auto item = [&](QColor col, const QString& glyph, const QString& name) {
        items << QStringLiteral("<span style='color:%1'>%2</span>&nbsp;%3")
                     .arg(col.name(), glyph,
                          name.toHtmlEscaped().replace(QLatin1Char(' '), QStringLiteral("&nbsp;")));
    };
    for (size_t i = 0; i < graphs_.size(); ++i) {
        const PoolGraphs& g = graphs_[i];
        item(g.used->pen().color(), QStringLiteral("━━"), g.used->name());
        item(g.reserved->pen().color(), QStringLiteral("━━"), g.reserved->name());
        item(g.threshold->pen().color(), QStringLiteral("─·─"), g.threshold->name());
    }
    if (!graphs_.empty()) {
        item(c.releaseColor(), QStringLiteral("▼"), tr("implicit release"));
        item(c.trimColor(), QStringLiteral("▼"), tr("trim"));
        item(graphs_.front().high->pen().color(), QStringLiteral("┈┈"),
             tr("reserved high watermark (dotted, in the pool's colour)"));
    }
    legendBase_ = items.join(QStringLiteral(" &nbsp;&nbsp; "));
    bandGraphs_.clear(); // cleared with the others
    rebuildSplitGraphs();
    ensurePredictedGraph();
    updateLegend();
}

void WatermarkPlot::ensurePredictedGraph() {
    if (!predicted_ || predictedGraph_ || !snap_.valid()) return;
    if (!snap_.timeline->pool(predictedPool_)) return;
    predictedGraph_ = plot_->addGraph();
    predictedGraph_->setLineStyle(QCPGraph::lsStepLeft);
    // Dashed and in the text's colour: a model's answer over the pools' own colours, told
    // apart from every recorded line (a step line of a few hundred points: the stroker's
    // cost for a dashed pen does not matter here).
    ColorScheme c(palette());
    predictedGraph_->setPen(QPen(c.text(), 2, Qt::DashLine));
    predictedGraph_->setName(predictedLabel_);
}

void WatermarkPlot::setPredictedSeries(uint64_t pool, std::shared_ptr<const Series> s,
                                       const QString& label) {
    predicted_ = std::move(s);
    predictedPool_ = pool;
    predictedLabel_ = label;
    if (!predicted_ && predictedGraph_) {
        plot_->removeGraph(predictedGraph_);
        predictedGraph_ = nullptr;
    }
    ensurePredictedGraph();
    if (predictedGraph_) predictedGraph_->setName(label);
    updateLegend();
    refreshData();
}

QString WatermarkPlot::legendText() const {
    QTextDocument doc;
    doc.setHtml(legend_->text());
    return doc.toPlainText();
}

void WatermarkPlot::updateLegend() {
    QString text = legendBase_;
    if (siteGraph_ && site_) {
        QString name = tr("live in %1").arg(siteLabel_).toHtmlEscaped();
        text += QStringLiteral(" &nbsp;&nbsp; <span style='color:%1'>━━</span>&nbsp;%2")
                    .arg(siteGraph_->pen().color().name(), name);
    }
    if (predictedGraph_ && predicted_)
        text += QStringLiteral(" &nbsp;&nbsp; <span style='color:%1'>╍╍</span>&nbsp;%2")
                    .arg(predictedGraph_->pen().color().name(),
                         predictedLabel_.toHtmlEscaped().replace(QLatin1Char(' '),
                                                                 QStringLiteral("&nbsp;")));
    if (shownSplit_) text += splitLegend_;
    legend_->setText(text);
    legend_->setVisible(!graphs_.empty());
}

void WatermarkPlot::setHighlightedSeries(std::shared_ptr<const Series> s, const QString& label) {
    site_ = std::move(s);
    siteLabel_ = label;
    if (site_ && !siteGraph_ && snap_.valid()) {
        siteGraph_ = plot_->addGraph(); // a wide translucent line: QCPGraph's own drawing
        siteGraph_->setLineStyle(QCPGraph::lsStepLeft);
        const QColor c(220, 0, 150);
        siteGraph_->setPen(QPen(c, 2));
        QColor fill = c;
        fill.setAlpha(45);
        siteGraph_->setBrush(fill);
    }
    if (siteGraph_) {
        siteGraph_->setName(tr("live in %1").arg(label));
        siteGraph_->setVisible(bool(site_));
        if (!site_) siteGraph_->data()->clear();
    }
    updateLegend();
    refreshData();
}

void WatermarkPlot::setTimeOrigin(int64_t t) {
    if (t == origin_) return;
    origin_ = t;
    ++generation_; // the fed points' keys are times since the origin
    views_.clear();
    refreshData();
    setCursorTime(cursor_);
}

int64_t WatermarkPlot::origin() const {
    return origin_ != INT64_MIN || !snap_.valid() ? origin_ : snap_.timeline->t0;
}

void WatermarkPlot::setViewRange(int64_t t0, int64_t t1) {
    // Within +-2^61 ns, as the timeline's view (TimelineWidget.cpp): a damaged trace can date
    // something at INT64_MIN, and v1_ - v0_ must not overflow.
    constexpr int64_t kLimit = int64_t{1} << 61;
    t0 = std::clamp(t0, -kLimit, kLimit);
    t1 = std::clamp(t1, -kLimit, kLimit);
    v0_ = t0;
    v1_ = std::max(t1, t0 + 1);
    refreshData();
}

int WatermarkPlot::graphPointCount() const {
    int n = 0;
    for (int i = 0; i < plot_->graphCount(); ++i)
        n += plot_->graph(i)->data()->size();
    return n;
}

void WatermarkPlot::refreshData() {
    if (!snap_.valid()) return;
    const Timeline& tl = *snap_.timeline;
    const double base = double(origin());
    ticker_->pixelWidth = plot_->axisRect()->width();
    const ViewKey key{generation_, std::max(v0_, tl.t0), std::min(v1_, tl.t1), v1_ - v0_,
                      size_t(std::max(16, plot_->axisRect()->width() * 2))};
    // Every view inside the trace's extent at one zoom level queries the same ranges (the
    // whole-trace view does, wherever its margins are): reuse the fed points.
    auto hit = std::find_if(views_.begin(), views_.end(),
                            [&](const std::shared_ptr<ViewData>& d) { return d->key == key; });
    std::shared_ptr<ViewData> data;
    if (hit != views_.end()) {
        data = *hit;
    } else {
        data = computeView(key);
        views_.insert(views_.begin(), data);
        if (views_.size() > 3) views_.pop_back();
    }
    for (size_t i = 0; i < graphs_.size() && i < data->pools.size(); ++i) {
        const PoolGraphs& g = graphs_[i];
        const auto& d = data->pools[i];
        g.reserved->setData(d.reserved);
        g.used->setData(d.used);
        g.high->setData(d.high);
        g.threshold->setData(d.threshold);
        g.events->setData(d.events);
        g.trims->setData(d.trims);
        const bool dim = highlighted_ && highlighted_ != g.pool;
        for (QCPGraph* gr : {g.reserved, g.used, g.high, g.threshold}) {
            QPen pen = gr->pen();
            QColor col = pen.color();
            col.setAlpha(dim ? 70 : 255);
            pen.setColor(col);
            gr->setPen(pen);
        }
    }
    if (siteGraph_ && site_) {
        // Not cached with the pools' points: one series, fed for the view when it changes.
        auto c = QSharedPointer<QCPGraphDataContainer>::create();
        if (!site_->empty() && key.b > key.a) {
            const std::vector<Point> pts = downsample(*site_, key.a, key.b, key.maxPts);
            QVector<QCPGraphData> v;
            v.reserve(qsizetype(pts.size() + 1));
            for (const Point& p : pts) v.push_back({double(p.t) - base, double(p.v)});
            if (!pts.empty()) v.push_back({double(key.b) - base, v.back().value});
            c->set(v, true);
        }
        siteGraph_->setData(c);
    }
    feedSplit(key.a, key.b, key.maxPts);
    uint64_t ymax = data->ymax;
    if (predictedGraph_ && predicted_) {
        // Fed for the view when it changes, like the call site's series; it may rise above
        // every recorded line (a higher threshold keeps more), so the axis makes room.
        auto c = QSharedPointer<QCPGraphDataContainer>::create();
        if (!predicted_->empty() && key.b > key.a) {
            const std::vector<Point> pts = downsample(*predicted_, key.a, key.b, key.maxPts);
            QVector<QCPGraphData> v;
            v.reserve(qsizetype(pts.size() + 1));
            for (const Point& p : pts) {
                v.push_back({double(p.t) - base, double(p.v)});
                ymax = std::max(ymax, p.v);
            }
            if (!pts.empty()) v.push_back({double(key.b) - base, v.back().value});
            c->set(v, true);
        }
        predictedGraph_->setData(c);
    }
    if (hasOverview()) {
        // The part not loaded yet is drawn from the summaries: the axis makes room for it.
        const int64_t from = std::max(key.a, tl.loadedUntilNs);
        const int64_t until = std::min(key.b, tl.loadedFromNs);
        std::vector<view::OverviewColumn> whole;
        for (const PoolGraphs& g : graphs_) {
            if (key.b > from && snap_.overview->query(g.pool, from, key.b, 1, true, whole) &&
                whole.front().any)
                ymax = std::max(ymax, whole.front().reservedMax);
            if (until > key.a && snap_.overview->query(g.pool, key.a, until, 1, true, whole) &&
                whole.front().any)
                ymax = std::max(ymax, whole.front().reservedMax);
        }
    }
    applyingRange_ = true;
    plot_->xAxis->setRange(double(v0_) - base, double(v1_) - base);
    applyingRange_ = false;
    dataYMax_ = ymax;
    plot_->yAxis->setRange(0, double(std::max(ymax, yFloor_)) * 1.08);
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

bool WatermarkPlot::hasOverview() const {
    return snap_.valid() && snap_.timeline->partial && snap_.overview &&
           snap_.overview->available();
}

void WatermarkPlot::paintOverview(QPainter& p, const QRectF& band) const {
    if (!hasOverview()) return;
    const QRect area = plot_->axisRect()->rect();
    const int x0 = std::max(int(std::ceil(band.left())), area.left());
    const int x1 = std::min(int(std::floor(band.right())), area.right());
    if (x1 <= x0) return;
    const double base = double(origin());
    int64_t t0 = int64_t(plot_->xAxis->pixelToCoord(x0) + base);
    int64_t t1 = int64_t(plot_->xAxis->pixelToCoord(x1) + base);
    // The band after the loaded part, or (a range timeline) the one before it.
    if (t0 + (t1 - t0) / 2 < snap_.timeline->loadedFromNs)
        t1 = std::min(t1, snap_.timeline->loadedFromNs);
    else
        t0 = std::max(t0, snap_.timeline->loadedUntilNs);
    if (t1 <= t0) return;
    const size_t columns = size_t(x1 - x0);
    const double top = area.top(), bottom = area.bottom();
    auto y = [&](uint64_t v) {
        return std::clamp(plot_->yAxis->coordToPixel(double(v)), top, bottom);
    };
    std::vector<view::OverviewColumn> cols;
    QVector<QLineF> reserved, used;
    p.setRenderHint(QPainter::Antialiasing, false);
    // Reserved as a light band from its least to its greatest value, used over it as a darker
    // one: an envelope, not a line, so it does not pass for the loaded part's exact steps.
    for (const PoolGraphs& g : graphs_) {
        if (!snap_.overview->query(g.pool, t0, t1, columns, true, cols)) continue;
        reserved.clear();
        used.clear();
        for (size_t i = 0; i < columns; ++i) {
            const view::OverviewColumn& c = cols[i];
            if (!c.any) continue;
            const double x = x0 + double(i) + 0.5;
            reserved.push_back(QLineF(x, y(c.reservedMin) + 0.5, x, y(c.reservedMax) - 0.5));
            used.push_back(QLineF(x, y(c.usedMin) + 0.5, x, y(c.usedMax) - 0.5));
        }
        const bool dim = highlighted_ && highlighted_ != g.pool;
        QColor rc = g.reserved->pen().color(), uc = g.used->pen().color();
        rc.setAlpha(dim ? 40 : 120);
        uc.setAlpha(dim ? 60 : 200);
        p.setPen(QPen(rc, 1));
        p.drawLines(reserved);
        p.setPen(QPen(uc, 1));
        p.drawLines(used);
    }
}

void WatermarkPlot::setYFloor(uint64_t bytes) {
    if (bytes == yFloor_) return;
    yFloor_ = bytes;
    if (!snap_.valid()) return;
    plot_->yAxis->setRange(0, double(std::max(dataYMax_, yFloor_)) * 1.08);
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

std::shared_ptr<WatermarkPlot::ViewData> WatermarkPlot::computeView(const ViewKey& key) const {
    const Timeline& tl = *snap_.timeline;
    const double base = double(origin());
    auto data = std::make_shared<ViewData>();
    data->key = key;
    uint64_t ymax = 1;
    const int64_t a = key.a, end = key.b;
    auto feed = [&](const Series& s, bool clampHuge, uint64_t hugeAbove) {
        auto c = QSharedPointer<QCPGraphDataContainer>::create();
        if (s.empty() || end <= a) return c;
        const std::vector<Point> pts = downsample(s, a, end, key.maxPts);
        QVector<QCPGraphData> v;
        v.reserve(qsizetype(pts.size() + 1));
        for (const Point& p : pts)
            // A threshold at UINT64_MAX ("never release") has no place on a byte axis.
            v.push_back({double(p.t) - base, clampHuge && p.v > hugeAbove ? qQNaN() : double(p.v)});
        if (!pts.empty()) v.push_back({double(end) - base, v.back().value}); // to the view's end
        c->set(v, true);
        return c;
    };
    // The y range: the highest point fed (downsample keeps every bucket's maximum, and the
    // value in force at the start), not a second scan of the series.
    auto maxOf = [](const QCPGraphDataContainer& c) {
        double m = 0;
        for (auto it = c.constBegin(); it != c.constEnd(); ++it)
            if (!qIsNaN(it->value)) m = std::max(m, it->value);
        return uint64_t(m);
    };
    for (const PoolGraphs& g : graphs_) {
        ViewData::Pool d;
        const PoolTimeline* p = tl.pool(g.pool);
        if (!p) {
            for (auto* c : {&d.reserved, &d.used, &d.high, &d.threshold, &d.events, &d.trims})
                *c = QSharedPointer<QCPGraphDataContainer>::create();
            data->pools.push_back(d);
            continue;
        }
        d.reserved = feed(p->reserved, false, 0);
        d.used = feed(p->used, false, 0);
        ymax = std::max({ymax, maxOf(*d.reserved), maxOf(*d.used)});
        // High watermark: the running maximum of reserved, starting from its value before a.
        {
            d.high = QSharedPointer<QCPGraphDataContainer>::create();
            QVector<QCPGraphData> v;
            double running = a > tl.t0 ? double(seriesMax(p->reserved, tl.t0, a)) : 0.0;
            // Only the steps where the maximum rises: a dotted pen is drawn segment by segment.
            for (auto it = d.reserved->constBegin(); it != d.reserved->constEnd(); ++it) {
                if (!v.isEmpty() && it->value <= running) continue;
                running = std::max(running, it->value);
                v.push_back({it->key, running});
            }
            if (!v.isEmpty() && !d.reserved->isEmpty())
                v.push_back({(d.reserved->constEnd() - 1)->key, running});
            d.high->set(v, true);
        }
        d.threshold = feed(p->releaseThreshold, true, uint64_t(1) << 50);
        // Trims and implicit releases of this pool in range: the pool size after them. One
        // marker per pixel column at most: thousands of overlapping triangles cost more to draw
        // than all the lines.
        d.events = QSharedPointer<QCPGraphDataContainer>::create();
        d.trims = QSharedPointer<QCPGraphDataContainer>::create();
        QVector<QCPGraphData> mk, trims;
        auto it = std::partition_point(tl.markers.begin(), tl.markers.end(),
                                       [&](const Marker& m) { return m.tsNs < a; });
        const double pxPerNs = double(key.maxPts / 2) / double(std::max<int64_t>(1, key.span));
        int64_t lastPx = INT64_MIN;
        for (; it != tl.markers.end() && it->tsNs < std::max(end, a + 1); ++it) {
            if (it->pool != g.pool) continue;
            if (it->kind != EventKind::ImplicitRelease && it->kind != EventKind::PoolTrimTo)
                continue;
            const int64_t px = int64_t(double(it->tsNs - a) * pxPerNs);
            if (px == lastPx) continue;
            lastPx = px;
            (it->kind == EventKind::PoolTrimTo ? trims : mk)
                .push_back({double(it->tsNs) - base, double(p->reserved.valueAt(it->tsNs))});
        }
        d.events->set(mk, true);
        d.trims->set(trims, true);
        data->pools.push_back(d);
    }
    data->ymax = ymax;
    return data;
}

void WatermarkPlot::setCursorTime(int64_t t) {
    cursor_ = t;
    if (!snap_.valid() || t == INT64_MIN) {
        cursorLine_->setVisible(false);
    } else {
        const double x = double(t - origin());
        cursorLine_->point1->setCoords(x, 0);
        cursorLine_->point2->setCoords(x, 1);
        cursorLine_->setVisible(true);
    }
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void WatermarkPlot::setHighlightedPool(uint64_t pool) {
    highlighted_ = pool;
    if (splitOn_ && snap_.valid() && (!shownSplit_ || shownSplit_->pool != splitPoolNow())) {
        rebuildSplitGraphs();
        updateLegend();
    }
    refreshData();
}

void WatermarkPlot::applyTheme() {
    ColorScheme c(palette());
    const QColor fg = c.text(), grid = c.grid();
    plot_->setBackground(c.background());
    plot_->axisRect()->setBackground(c.background());
    for (QCPAxis* ax : {plot_->xAxis, plot_->yAxis}) {
        ax->setBasePen(QPen(fg));
        ax->setTickPen(QPen(fg));
        ax->setSubTickPen(QPen(fg));
        ax->setTickLabelColor(fg);
        ax->setLabelColor(fg);
        ax->grid()->setPen(QPen(grid));
    }
    cursorLine_->setPen(QPen(c.cursor(), 2));
    rebuildGraphs();
    refreshData();
}

void WatermarkPlot::changeEvent(QEvent* e) {
    if (e->type() == QEvent::PaletteChange) applyTheme();
    QWidget::changeEvent(e);
}

} // namespace poolscope::ui
