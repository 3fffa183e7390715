// The watermark plot's used bytes split by NVTX range (right-click, "Split used bytes by NVTX
// range"): the selected pool's used area stacked per range, one band a range, and the tooltip
// that names the bands under the mouse.
#include "WatermarkPlot.h"

#include "ColorScheme.h"
#include "poolscope/Units.h"
#include "poolscope/view/NvtxRows.h"

#include <QAction>
#include <algorithm>
#include <qcustomplot.h>

namespace poolscope::ui {

void WatermarkPlot::setSplitByRange(bool on) {
    if (splitAction_->isChecked() != on) {
        const QSignalBlocker block(splitAction_);
        splitAction_->setChecked(on);
    }
    if (on == splitOn_) return;
    splitOn_ = on;
    rebuildSplitGraphs();
    updateLegend();
    refreshData();
}

uint64_t WatermarkPlot::splitPoolNow() const {
    if (!snap_.valid()) return 0;
    uint64_t best = 0, bestPeak = 0;
    for (const PoolGraphs& g : graphs_) {
        if (g.pool == highlighted_) return g.pool;
        const PoolTimeline* p = snap_.timeline->pool(g.pool);
        if (p && (best == 0 || p->peakUsed > bestPeak)) {
            best = g.pool;
            bestPeak = p->peakUsed;
        }
    }
    return best;
}

std::vector<QCPGraph*> WatermarkPlot::splitGraphs() const {
    std::vector<QCPGraph*> out;
    for (QCPGraph* g : bandGraphs_)
        if (g) out.push_back(g);
    return out;
}

namespace {
// Bands that are no range: greys (and a hatch for the bytes no allocation explains), so that
// the ranges' own colours, the band's above the lanes, stand out.
QBrush bandBrush(const ColorScheme& c, const analysis::RangeBand& b,
                 const std::unordered_map<std::string, uint32_t>& colorSlots) {
    using Kind = analysis::RangeBand::Kind;
    switch (b.kind) {
    case Kind::Range: {
        auto it = colorSlots.find(b.name);
        return c.nvtxColor(it == colorSlots.end() ? 0 : it->second);
    }
    case Kind::Other: return QColor::fromHsv(0, 0, c.dark() ? 115 : 195);
    case Kind::NoRange: return QColor::fromHsv(215, 30, c.dark() ? 95 : 226);
    case Kind::Unrecorded: return QBrush(c.dark() ? QColor(170, 170, 170) : QColor(120, 120, 120),
                                         Qt::BDiagPattern);
    }
    return QColor(Qt::gray);
}
} // namespace

void WatermarkPlot::rebuildSplitGraphs() {
    for (QCPGraph* g : bandGraphs_)
        if (g) plot_->removeGraph(g);
    bandGraphs_.clear();
    shownSplit_.reset();
    splitLegend_.clear();
    const bool ranges = snap_.valid() && snap_.stacks &&
                        (!snap_.stacks->ranges.empty() || !snap_.stacks->nvtxPaths.empty());
    splitAction_->setEnabled(ranges);
    if (!splitOn_ || !ranges) return;
    const uint64_t pool = splitPoolNow();
    if (!pool) return;
    if (splits_.empty()) nvtxSlots_ = view::NvtxRows::nameOrder(*snap_.stacks);
    std::shared_ptr<const analysis::UsedSplit>& cached = splits_[pool];
    if (!cached)
        cached = std::make_shared<const analysis::UsedSplit>(
            analysis::splitUsedByRange(*snap_.timeline, *snap_.stacks, pool));
    shownSplit_ = cached;
    const auto& bands = shownSplit_->bands;
    ColorScheme c(palette());
    bandGraphs_.assign(bands.size(), nullptr);
    // Topmost band first: each is filled from its top down to 0 and the bands under it paint
    // over the lower part (opaque fills, one polygon each, no channel fills to match).
    for (size_t k = bands.size(); k-- > 0;) {
        if (bands[k].peak == 0) continue;
        auto* g = new QCPGraph(plot_->xAxis, plot_->yAxis);
        g->setLayer(splitLayer_);
        g->setLineStyle(QCPGraph::lsStepLeft);
        const QBrush brush = bandBrush(c, bands[k], nvtxSlots_);
        g->setBrush(brush);
        g->setPen(QPen(brush.style() == Qt::SolidPattern
                           ? (c.dark() ? brush.color().lighter(135) : brush.color().darker(135))
                           : brush.color(),
                       1));
        g->setName(QString::fromStdString(bands[k].name));
        bandGraphs_[k] = g;
    }
    // The legend's second line: the bands from the bottom of the stack (the largest range) up.
    QStringList items;
    for (size_t k = 0; k < bands.size(); ++k) {
        if (!bandGraphs_[k]) continue;
        const QBrush b = bandGraphs_[k]->brush();
        items << QStringLiteral("<span style='color:%1'>%2</span>&nbsp;%3")
                     .arg(b.style() == Qt::SolidPattern ? b.color().darker(c.dark() ? 100 : 115).name()
                                                        : b.color().name(),
                          b.style() == Qt::SolidPattern ? QStringLiteral("■")
                                                        : QStringLiteral("▨"),
                          QString::fromStdString(bands[k].name)
                              .toHtmlEscaped()
                              .replace(QLatin1Char(' '), QStringLiteral("&nbsp;")));
    }
    splitLegend_ = QStringLiteral("<br>") +
                   tr("%1 used by NVTX range:")
                       .arg(snap_.layout->poolName(pool))
                       .toHtmlEscaped()
                       .replace(QLatin1Char(' '), QStringLiteral("&nbsp;")) +
                   QStringLiteral(" &nbsp;") + items.join(QStringLiteral(" &nbsp;&nbsp; "));
}

void WatermarkPlot::feedSplit(int64_t a, int64_t b, size_t maxPts) {
    if (!shownSplit_ || !snap_.valid()) return;
    const PoolTimeline* p = snap_.timeline->pool(shownSplit_->pool);
    std::vector<Point> pts;
    // The used line's own points: the stack's top is that line, column by column.
    if (p && !p->used.empty() && b > a) pts = downsample(p->used, a, b, maxPts);
    const auto tops = analysis::stackedTops(*shownSplit_, pts);
    const double base = double(origin());
    for (size_t k = 0; k < bandGraphs_.size(); ++k) {
        if (!bandGraphs_[k]) continue;
        auto c = QSharedPointer<QCPGraphDataContainer>::create();
        QVector<QCPGraphData> v;
        v.reserve(qsizetype(pts.size() + 1));
        for (size_t i = 0; i < pts.size(); ++i)
            v.push_back({double(pts[i].t) - base, double(tops[k][i])});
        if (!pts.empty()) v.push_back({double(b) - base, v.back().value}); // to the view's end
        c->set(v, true);
        bandGraphs_[k]->setData(c);
    }
}

QString WatermarkPlot::splitToolTip(const QPoint& pos) const {
    if (!shownSplit_ || !snap_.valid() || !plot_->axisRect()->rect().contains(pos)) return {};
    const Timeline& tl = *snap_.timeline;
    const PoolTimeline* p = tl.pool(shownSplit_->pool);
    if (!p) return {};
    const int64_t t = origin() + int64_t(plot_->xAxis->pixelToCoord(pos.x()));
    if (t < tl.t0 || t > tl.t1) return {};
    const uint64_t used = p->used.valueAt(t);
    std::vector<uint64_t> v;
    shownSplit_->at(t, used, v);
    const double y = plot_->yAxis->pixelToCoord(pos.y());
    const auto& bands = shownSplit_->bands;
    int under = -1;
    uint64_t cum = 0;
    for (size_t k = 0; k < v.size(); ++k) {
        if (v[k] && y >= double(cum) && y < double(cum + v[k])) under = int(k);
        cum += v[k];
    }
    auto name = [&](size_t k) { return QString::fromStdString(bands[k].name).toHtmlEscaped(); };
    auto bytes = [](uint64_t b) { return QString::fromStdString(formatBytes(b)); };
    QStringList lines;
    if (under >= 0)
        lines << QStringLiteral("<b>%1: %2</b>").arg(name(size_t(under)), bytes(v[size_t(under)]));
    lines << tr("%1 used %2 at %3")
                 .arg(snap_.layout->poolName(shownSplit_->pool).toHtmlEscaped(), bytes(used),
                      QString::fromStdString(formatDuration(nsBetween(origin(), t))));
    // Top of the stack first, as the bands lie on screen.
    for (size_t k = v.size(); k-- > 0;) {
        if (!v[k]) continue;
        const QString row = QStringLiteral("&nbsp;&nbsp;%1: %2").arg(name(k), bytes(v[k]));
        lines << (int(k) == under ? QStringLiteral("<b>%1</b>").arg(row) : row);
    }
    const uint64_t recorded = shownSplit_->recordedAt(t);
    if (recorded > used)
        lines << tr("<i>The recorded allocations hold %1 more than used here: the top of the "
                    "stack is cut to used.</i>")
                     .arg(bytes(recorded - used));
    return QStringLiteral("<html><div style='white-space:nowrap'>") +
           lines.join(QStringLiteral("<br>")) + QStringLiteral("</div></html>");
}

} // namespace poolscope::ui
