// TimelinePainter, part 1: the lanes' contents: bars, collapsed summaries, pool charts, markers,
// wait arrows, selection. The lane geometry is in TimelineGeometry.cpp; the label column, ruler,
// legend, hit testing and tooltips in TimelinePainterChrome.cpp.
#include "TimelinePainter.h"

#include "DetailsPane.h"
#include "TimeTicker.h"
#include "poolscope/Units.h"
#include "poolscope/view/ColumnMax.h"

#include <QCoreApplication>
#include <QPainterPath>
#include <climits>
#include <algorithm>
#include <climits>
#include <cmath>

namespace poolscope::ui {

namespace {
constexpr int kStreamPad = TimelineGeometry::kStreamPad;
constexpr int kSummaryH = TimelineGeometry::kSummaryH;
constexpr int64_t kRunSegment = 32;

int64_t floorDiv(int64_t a, int64_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// Clamp far-off coordinates before handing them to QPainter (it misbehaves near INT_MAX).
double clampX(double x, const TimelineGeometry& g) {
    return std::clamp(x, double(g.labelW - 4), double(g.width + 4));
}
} // namespace

int64_t TimelinePainter::endOf(const Allocation& a) const {
    return a.live() ? std::max(s_.timeline->t1, a.allocTsNs) : a.freeTsNs;
}

QColor TimelinePainter::barColor(const Allocation& a) const {
    if (coloring_ == BarColoring::ByPool) {
        const int lane = s_.layout->laneOfPool(a.pool);
        return c_.poolColor(lane >= 0 ? s_.layout->lanes[size_t(lane)].poolSlot : 0);
    }
    return c_.sizeColor(a.size);
}

void TimelinePainter::paint(QPainter& p, const Selection& sel, int64_t cursor, int highlighted,
                            const QRect& rubberBand) {
    p.fillRect(0, 0, g_.width, g_.height, c_.background());
    paintContent(p);
    paintOverlay(p, sel, cursor, highlighted, rubberBand);
}

void TimelinePainter::paintContent(QPainter& p) {
    const Timeline& tl = *s_.timeline;
    const LaneLayout& layout = *s_.layout;
    const int x0 = std::max(g_.labelW, g_.clipX0), x1 = std::min(g_.width, g_.clipX1);
    if (x1 <= x0) return;
    p.save();
    p.setClipRect(x0, g_.lanesTop(), x1 - x0, g_.lanesBottom() - g_.lanesTop());
    p.fillRect(x0, g_.lanesTop(), x1 - x0, g_.lanesBottom() - g_.lanesTop(), c_.background());
    // Grid lines at the ruler's ticks.
    {
        const int64_t step = niceTimeStep(g_.v1 - g_.v0, std::max(2, g_.plotW() / 110));
        const int64_t from = g_.tOf(x0 - 1);
        // Anchored at the trace's start, kept within +-2^61 ns as the view is (a damaged trace
        // can start at INT64_MIN; from - t0 must not overflow).
        const int64_t t0 = std::clamp(tl.t0, -(int64_t{1} << 61), int64_t{1} << 61);
        int64_t first = ((from - t0) / step) * step + t0;
        p.setPen(c_.grid());
        for (int64_t t = first; t <= g_.tOf(x1 + 1); t += step) {
            const double x = g_.xOf(t);
            if (x >= g_.labelW) p.drawLine(QPointF(x, g_.lanesTop()), QPointF(x, g_.lanesBottom()));
        }
    }
    for (size_t i = 0; i < layout.lanes.size(); ++i) {
        const int y = g_.laneY(i);
        const int h = g_.laneH[i];
        if (h <= 0 || y + h < g_.lanesTop() || y > g_.lanesBottom()) continue;
        const Lane& l = layout.lanes[i];
        QRect band(x0, y, x1 - x0, h);
        if (l.kind == LaneKind::Device)
            p.fillRect(band, c_.headerBg());
        else if (i % 2)
            p.fillRect(band, QColor(c_.grid().red(), c_.grid().green(), c_.grid().blue(), 10));
        p.setPen(c_.grid());
        p.drawLine(x0, y + h - 1, x1, y + h - 1);
        if (l.kind == LaneKind::Stream) {
            if (g_.collapsed(i))
                paintSummary(p, i);
            else
                paintRows(p, i);
        }
        if (l.kind == LaneKind::Pool) paintPoolChart(p, i);
        if (l.kind == LaneKind::Outside) paintOutsideChart(p, i);
        if (l.kind == LaneKind::Host) paintHostChart(p, i);
        paintMarkers(p, i);
    }
    paintDeviceSyncs(p, x0, x1);
    // Where the collector lost events: a hatched red band across every lane (at least 3 px wide,
    // so a gap of microseconds still shows at any zoom). Counts near it are incomplete.
    for (const DropGap& gap : tl.dropGaps) {
        const double xa = g_.xOf(gap.tsNs);
        const double xb = std::max(g_.xOf(gap.tsNs + std::max<int64_t>(gap.durationNs, 0)), xa + 3);
        if (xb < x0 || xa > x1) continue;
        const QRectF r(xa, g_.lanesTop(), xb - xa, g_.lanesBottom() - g_.lanesTop());
        p.fillRect(r, QColor(220, 30, 30, c_.dark() ? 70 : 45));
        p.fillRect(r, QBrush(QColor(220, 30, 30, 140), Qt::BDiagPattern));
    }
    // The trace's extent: shade what lies outside it.
    {
        QColor out = c_.dark() ? QColor(0, 0, 0, 90) : QColor(0, 0, 0, 22);
        const double xa = g_.xOf(tl.t0), xb = g_.xOf(tl.t1);
        if (xa > g_.labelW)
            p.fillRect(
                QRectF(g_.labelW, g_.lanesTop(), xa - g_.labelW, g_.lanesBottom() - g_.lanesTop()),
                out);
        if (xb < g_.width)
            p.fillRect(QRectF(xb, g_.lanesTop(), g_.width - xb, g_.lanesBottom() - g_.lanesTop()),
                       out);
    }
    p.restore();
}

void TimelinePainter::paintOverlay(QPainter& p, const Selection& sel, int64_t cursor,
                                   int highlighted, const QRect& rubberBand, bool withText) {
    p.save();
    p.setClipRect(0, g_.lanesTop(), g_.width, g_.lanesBottom() - g_.lanesTop());
    if (highlighted >= 0 && size_t(highlighted) < g_.laneH.size() &&
        g_.laneH[size_t(highlighted)] > 0)
        p.fillRect(QRect(g_.labelW, g_.laneY(size_t(highlighted)), g_.width - g_.labelW,
                         g_.laneH[size_t(highlighted)]),
                   QColor(60, 130, 210, 40));
    paintHighlightedAllocations(p);
    paintEdges(p);
    paintSelection(p, sel);
    if (cursor != INT64_MIN) {
        const double x = g_.xOf(cursor);
        if (x >= g_.labelW && x <= g_.width) {
            p.setPen(QPen(c_.cursor(), 2));
            p.drawLine(QPointF(x, g_.lanesTop()), QPointF(x, g_.lanesBottom()));
        }
    }
    if (!rubberBand.isNull()) {
        p.setPen(QPen(QColor(60, 130, 210), 1));
        p.setBrush(QColor(60, 130, 210, 50));
        p.drawRect(rubberBand);
        p.setBrush(Qt::NoBrush);
    }
    p.restore();

    if (withText) paintLabels(p, cursor, highlighted);
    paintNvtx(p);
    paintRuler(p, cursor);
    if (withText) paintLegend(p);
}

void TimelinePainter::paintRows(QPainter& p, size_t laneIdx, int mergedY, int mergedH) {
    const Timeline& tl = *s_.timeline;
    const LaneLayout& layout = *s_.layout;
    const Lane& l = layout.lanes[laneIdx];
    const int y0 = mergedY >= 0 ? mergedY : g_.laneY(laneIdx) + kStreamPad;
    // mergedY: every row drawn on top of each other in one row (a collapsed lane).
    const int pitch = mergedY >= 0 ? 0 : TimelineGeometry::rowPitch(l, g_.laneH[laneIdx]);
    const int barH = mergedY >= 0 ? mergedH : std::max(1, pitch - (pitch > 3 ? 1 : 0));
    // Only what reaches into the columns being painted (the whole view, or a panned strip).
    // Merged runs of sub-pixel blocks break every kRunSegment columns, counted from the trace
    // start, so a run (and its colour, its first block's) is the same in a panned strip as in
    // a full repaint: the strip starts scanning at a segment boundary left of it.
    const int64_t t0 = std::clamp(tl.t0, -(int64_t{1} << 61), int64_t{1} << 61); // as the view
    const int64_t phase = std::llround(double(g_.v0 - t0) * g_.plotW() / double(g_.v1 - g_.v0));
    auto segment = [&](double px) { return floorDiv(int64_t(px) + phase, kRunSegment); };
    const int64_t scanFrom = segment(g_.clipX0 - 4) * kRunSegment - phase;
    // Not clamped to the view: the columns under the scroll bar and the strips of a pan must
    // hold exactly what a full repaint puts there.
    const int64_t v0 = g_.tOf(double(scanFrom)), v1 = g_.tOf(g_.clipX1 + 4);
    for (int r = 0; r < l.rowCount; ++r) {
        const std::vector<uint32_t>& row = layout.rows[size_t(l.firstRow + r)];
        const int y = y0 + r * pitch;
        if (y > g_.lanesBottom() || y + barH < g_.lanesTop()) continue;
        const std::vector<int64_t>& ends = layout.rowEnds[size_t(l.firstRow + r)];
        const std::vector<int64_t>& starts = layout.rowStarts[size_t(l.firstRow + r)];
        size_t k = size_t(std::upper_bound(ends.begin(), ends.end(), v0) - ends.begin());
        double runX0 = -1, runX1 = -1;
        QColor runColor;
        auto flush = [&] {
            if (runX0 < 0) return;
            p.fillRect(QRectF(runX0, y, std::max(1.0, runX1 - runX0), barH), runColor);
            ++stats.mergedRuns;
            runX0 = runX1 = -1;
        };
        while (k < row.size()) {
            // Times come from the row's own arrays; the allocation record (elsewhere in memory)
            // is only read when something is drawn from it.
            if (starts[k] >= v1) break;
            const double rx0 = g_.xOf(starts[k]), rx1 = g_.xOf(ends[k]);
            const double x0 = clampX(rx0, g_), x1 = clampX(rx1, g_);
            if (rx1 - rx0 < 1.5) {
                // Sub-pixel (decided on the true width: clamping at the view's edge would make
                // a pan's strip and a full repaint disagree): fold into the current run, then
                // skip every allocation of this row that ends inside this pixel column (they
                // cannot add anything visible).
                const double px = std::floor(rx0);
                if (runX0 >= 0 && px <= runX1 + 0.5 && segment(px) == segment(runX0))
                    runX1 = std::max(runX1, px + 1);
                else {
                    flush();
                    runX0 = px;
                    runX1 = px + 1;
                    runColor = barColor(tl.allocations[row[k]]).darker(110);
                }
                const size_t next = gallopPast(ends, k + 1, g_.tOf(px + 1));
                // Each skip lands on memory no earlier step touched, and waits for it (most of a
                // zoomed-out frame's rows). The skips of a row are about as long as each other:
                // ask now for what the step after next will read.
                const size_t ahead = next + 2 * (next - k);
                if (ahead + 8 < ends.size()) {
                    __builtin_prefetch(ends.data() + ahead - 4);
                    __builtin_prefetch(ends.data() + ahead + 4);
                    __builtin_prefetch(starts.data() + ahead - 4);
                    __builtin_prefetch(starts.data() + ahead + 4);
                }
                k = next;
                continue;
            }
            flush();
            const Allocation& a = tl.allocations[row[k]];
            // A one-pixel gap at the end keeps back-to-back blocks of a row apart.
            p.fillRect(QRectF(x0, y, x1 - x0 > 4 ? x1 - x0 - 1 : x1 - x0, barH), barColor(a));
            ++stats.bars;
            if (a.live()) {
                // Still live at the end of the trace: a red cap at the right end.
                p.fillRect(QRectF(x1 - 3, y, 3, barH), c_.liveMark());
            }
            ++k;
        }
        flush();
    }
}

void TimelinePainter::paintArea(QPainter& p, const Series& s, const std::vector<int64_t>& blockT,
                                int top, int bottom, double scale, QColor fill, QColor line) {
    const Timeline& tl = *s_.timeline;
    if (s.empty()) return;
    // Area charts at pixel resolution: each pixel column shows the highest value it covers,
    // drawn as merged column rectangles. Filling a polygon of thousands of zig-zag vertices
    // instead costs ~100x more on a noisy series. Only the columns being painted are computed.
    const int c0 = std::max(0, g_.clipX0 - g_.labelW);
    const int c1 = std::min(g_.width - g_.labelW, g_.clipX1 - g_.labelW);
    if (c1 <= c0) return;
    // Each column's maximum (core/view/ColumnMax): the painter only turns them into pixels.
    std::vector<int64_t> e(size_t(c1 - c0) + 1);
    for (int c = c0; c <= c1; ++c)
        e[size_t(c - c0)] = g_.tOf(g_.labelW + c);
    std::vector<double> colMax;
    view::columnMaxima(s, blockT, e, std::max(tl.t1, s.t.back()), blockScanMinPoints, colMax);
    std::vector<QRect> fills, tops;
    const int W = c1 - c0;
    int c = 0;
    // Each column's top in pixels; runs of equal tops merge into one rectangle.
    auto yOf = [&](int col) {
        return int(
            std::lround(bottom - (bottom - top) * std::min(1.0, colMax[size_t(col)] / scale)));
    };
    std::vector<QLine> columns; // one-column runs: a vertical line is one call, not h spans
    while (c < W) {
        if (colMax[size_t(c)] < 0) {
            ++c;
            continue;
        }
        const int y = yOf(c);
        int e = c + 1;
        while (e < W && colMax[size_t(e)] >= 0 && yOf(e) == y)
            ++e;
        const int x = g_.labelW + c0 + c;
        if (e - c == 1 && bottom - y > 1)
            columns.emplace_back(x, y, x, bottom - 1);
        else
            fills.emplace_back(x, y, e - c, bottom - y);
        if (line.isValid()) tops.emplace_back(x, y, e - c, 1);
        c = e;
    }
    // Integer rectangles: Qt fills them span by span; fractional ones (or drawRects with a
    // brush) go through its general rasterizer, which made these charts ~10x slower.
    for (const QRect& r : fills)
        p.fillRect(r, fill);
    if (!columns.empty()) {
        p.setPen(QPen(fill, 0));
        p.drawLines(columns.data(), int(columns.size()));
    }
    for (const QRect& r : tops)
        p.fillRect(r, line);
}

void TimelinePainter::paintPoolChart(QPainter& p, size_t laneIdx) {
    const Lane& l = s_.layout->lanes[laneIdx];
    if (l.poolIndex < 0) return;
    const PoolTimeline& pt = s_.timeline->pools[size_t(l.poolIndex)];
    const int top = g_.laneY(laneIdx) + 4, bottom = g_.laneY(laneIdx) + g_.laneH[laneIdx] - 3;
    const double scale = double(std::max<uint64_t>(1, pt.peakReserved));
    // Reserved: a pale area with its top edge; used: a solid area inside it. The gap between
    // them is memory the pool holds but the program is not using.
    QColor res = c_.reservedColor(l.poolSlot);
    res.setAlpha(c_.dark() ? 60 : 50);
    const auto& bt = s_.layout->poolBlockT[size_t(l.poolIndex)];
    paintArea(p, pt.reserved, bt.reserved, top, bottom, scale, res, c_.reservedColor(l.poolSlot));
    QColor used = c_.usedColor(l.poolSlot);
    used.setAlpha(120);
    paintArea(p, pt.used, bt.used, top, bottom, scale, used, QColor());
}

void TimelinePainter::paintOutsideChart(QPainter& p, size_t laneIdx) {
    const Lane& l = s_.layout->lanes[laneIdx];
    if (l.outsideIndex < 0) return;
    const OutsideTimeline& o = s_.timeline->outside[size_t(l.outsideIndex)];
    const int top = g_.laneY(laneIdx) + 4, bottom = g_.laneY(laneIdx) + g_.laneH[laneIdx] - 3;
    // One scale for both: the pale area is what the device held in all (this memory plus the
    // pools' reserved bytes), the solid one the memory outside the pools, so the gap between
    // them is the pools' share.
    const double scale = double(std::max<uint64_t>({1, o.withPoolsPeak, o.peakBytes}));
    const std::vector<int64_t> noBlocks;
    QColor all = c_.outsideColor();
    all.setAlpha(c_.dark() ? 50 : 40);
    paintArea(p, o.withPools, noBlocks, top, bottom, scale, all, c_.outsideColor().lighter(130));
    QColor mine = c_.outsideColor();
    mine.setAlpha(150);
    paintArea(p, o.liveBytes, noBlocks, top, bottom, scale, mine, c_.outsideColor());
}

void TimelinePainter::paintHostChart(QPainter& p, size_t laneIdx) {
    const PinnedTimeline& pt = s_.timeline->pinned;
    const int top = g_.laneY(laneIdx) + 4, bottom = g_.laneY(laneIdx) + g_.laneH[laneIdx] - 3;
    const double scale = double(std::max<uint64_t>(1, pt.totalPeak));
    const std::vector<int64_t> noBlocks;
    // Total pinned (allocated + registered) pale, allocated solid: the gap is registered memory.
    QColor total = c_.pinnedColor();
    total.setAlpha(c_.dark() ? 60 : 50);
    paintArea(p, pt.total, noBlocks, top, bottom, scale, total, c_.pinnedColor());
    QColor alloc = c_.pinnedColor();
    alloc.setAlpha(140);
    paintArea(p, pt.allocated, noBlocks, top, bottom, scale, alloc, QColor());
}

void TimelinePainter::paintDeviceSyncs(QPainter& p, int x0, int x1) {
    // A cudaFree of memory outside the pools waits for the whole device: a line across every
    // stream lane of its device (and its outside-the-pools lane) at the call's return, with the
    // call's duration shaded before it (how long the program stood still).
    const Timeline& tl = *s_.timeline;
    if (tl.deviceSyncs.empty()) return;
    const LaneLayout& layout = *s_.layout;
    const int64_t ta = g_.tOf(x0 - 2), tb = g_.tOf(x1 + 2);
    auto it = std::partition_point(tl.deviceSyncs.begin(), tl.deviceSyncs.end(),
                                   [&](const DeviceSync& d) { return d.tsNs < ta; });
    const QColor line = c_.deviceSyncColor();
    QColor band = line;
    band.setAlpha(c_.dark() ? 70 : 45);
    int lastX = INT_MIN;
    for (; it != tl.deviceSyncs.end(); ++it) {
        const DeviceSync& d = *it;
        if (d.tsNs - d.callNs > tb) break;
        const int x = int(std::lround(clampX(g_.xOf(d.tsNs), g_)));
        const double xs = clampX(g_.xOf(d.tsNs - d.callNs), g_);
        const bool sameColumn = x == lastX && x - xs < 1;
        lastX = x;
        if (sameColumn) continue; // thousands of cudaFrees in one pixel column: one line
        for (size_t i = 0; i < layout.lanes.size(); ++i) {
            const Lane& l = layout.lanes[i];
            const int h = g_.laneH[i];
            if (h <= 0) continue;
            if (l.device != d.device || (l.kind != LaneKind::Stream && l.kind != LaneKind::Outside))
                continue;
            const int y = g_.laneY(i);
            if (x - xs >= 1) p.fillRect(QRectF(xs, y, x - xs, h - 1), band);
            p.fillRect(x, y, 2, h - 1, line);
        }
    }
}

void TimelinePainter::paintSummary(QPainter& p, size_t laneIdx) {
    // A collapsed stream lane: one row. When the stream allocates from this pool only, its
    // live bytes as a filled profile (scaled to the stream's peak); otherwise (the stream's
    // live bytes span several lanes) the lane's rows merged into one row of bars.
    const Lane& l = s_.layout->lanes[laneIdx];
    const Timeline& tl = *s_.timeline;
    bool own = l.streamIndex >= 0;
    for (size_t i = 0; own && i < s_.layout->lanes.size(); ++i)
        if (i != laneIdx && s_.layout->lanes[i].kind == LaneKind::Stream &&
            s_.layout->lanes[i].stream == l.stream && s_.layout->lanes[i].rowCount > 0)
            own = false;
    const int top = g_.laneY(laneIdx) + kStreamPad;
    if (own) {
        const StreamTimeline& st = tl.streams[size_t(l.streamIndex)];
        QColor fill = c_.sizeColor(st.peakLive ? st.peakLive : 1);
        fill.setAlpha(150);
        paintArea(p, st.liveBytes, s_.layout->streamBlockT[size_t(l.streamIndex)], top,
                  top + kSummaryH, double(std::max<uint64_t>(1, st.peakLive)),
                  fill, fill.darker(140));
        return;
    }
    paintRows(p, laneIdx, top, kSummaryH);
}

const QImage& TimelinePainter::markerGlyph(int which) {
    QImage& img = glyphs_[size_t(which)];
    if (!img.isNull()) return img;
    // 0/1: release/trim triangle (11x9, tip down), 2/3: attribute/knob diamond (13x13).
    const bool tri = which < 2;
    img = QImage(tri ? 11 : 13, tri ? 9 : 13, QImage::Format_ARGB32_Premultiplied);
    img.fill(Qt::transparent);
    QPainter g(&img);
    g.setRenderHint(QPainter::Antialiasing, true);
    const QColor c = which == 0   ? c_.releaseColor()
                     : which == 1 ? c_.trimColor()
                     : which == 2 ? c_.attributeColor()
                                  : c_.knobColor();
    QPolygonF poly;
    if (tri) {
        poly << QPointF(0.5, 0) << QPointF(10.5, 0) << QPointF(5.5, 8);
        g.setPen(Qt::NoPen);
    } else {
        poly << QPointF(6.5, 0.5) << QPointF(12.5, 6.5) << QPointF(6.5, 12.5) << QPointF(0.5, 6.5);
        g.setPen(QPen(c_.background(), 1));
    }
    g.setBrush(c);
    g.drawPolygon(poly);
    return img;
}

void TimelinePainter::paintMarkers(QPainter& p, size_t laneIdx) {
    const Timeline& tl = *s_.timeline;
    const Lane& l = s_.layout->lanes[laneIdx];
    const int top = g_.laneY(laneIdx), h = g_.laneH[laneIdx];
    auto tsBefore = [&](int64_t t) {
        return [&, t](uint32_t i) { return tl.markers[i].tsNs < t; };
    };
    // Glyphs reach ~7 px from their time: include those just outside the painted columns.
    const int64_t ta = g_.tOf(std::max(g_.clipX0, g_.labelW) - 8);
    const int64_t tb = g_.tOf(std::min(g_.clipX1, g_.width) + 8);
    auto it = std::partition_point(l.markers.begin(), l.markers.end(), tsBefore(ta));
    // Lines stay aliased and solid (dashed or antialiased lines go through Qt's stroker, which
    // cost more than the rest of a fit-all frame). Everything is batched per colour, and the
    // antialiased shapes are stamped from small pre-rendered images (an antialiased polygon
    // per marker cost ~8 ms of a fit-all frame on 10M events).
    std::vector<QLine> syncLines, relLines, trimLines;
    std::vector<QRect> syncTicks, others;
    std::vector<QPoint> relAt, trimAt, attrAt, knobAt;
    while (it != l.markers.end()) {
        const Marker& m = tl.markers[*it];
        if (m.tsNs >= tb) break;
        const double x = g_.xOf(m.tsNs);
        const int xi = int(std::floor(x));
        ++stats.markers;
        switch (m.kind) {
        case EventKind::StreamSynchronize:
        case EventKind::ContextSynchronize:
        case EventKind::EventSynchronize:
            syncLines.emplace_back(xi, top + 1, xi, top + h - 2);
            syncTicks.emplace_back(xi - 2, top + 1, 4, 3);
            break;
        case EventKind::ImplicitRelease:
            relLines.emplace_back(xi, top + 2, xi, top + h - 2);
            relAt.emplace_back(xi - 5, top + 2);
            break;
        case EventKind::PoolTrimTo:
            trimLines.emplace_back(xi, top + 2, xi, top + h - 2);
            trimAt.emplace_back(xi - 5, top + 2);
            break;
        case EventKind::PoolSetAttribute:
            attrAt.emplace_back(xi - 6, top + h / 2 - 6);
            break;
        case EventKind::KnobChange:
            knobAt.emplace_back(xi - 6, top + h / 2 - 6);
            break;
        default:
            others.emplace_back(xi - 3, top + h / 2 - 3, 6, 6);
            break;
        }
        // Anything else inside this pixel column would be drawn over this one: skip it.
        it = std::partition_point(it + 1, l.markers.end(), tsBefore(g_.tOf(xi + 1)));
    }
    auto lines = [&](const std::vector<QLine>& v, QColor c) {
        if (v.empty()) return;
        p.setPen(QPen(c, 0));
        p.drawLines(v.data(), int(v.size()));
    };
    QColor relFaint = c_.releaseColor(), trimFaint = c_.trimColor();
    relFaint.setAlpha(140);
    trimFaint.setAlpha(140);
    lines(syncLines, c_.syncColor());
    lines(relLines, relFaint);
    lines(trimLines, trimFaint);
    for (const QRect& r : syncTicks)
        p.fillRect(r, c_.syncColor());
    for (const QRect& r : others)
        p.fillRect(r, c_.dimText());
    auto stamp = [&](const std::vector<QPoint>& at, int glyph) {
        if (at.empty()) return;
        const QImage& img = markerGlyph(glyph);
        for (const QPoint& q : at)
            p.drawImage(q, img);
    };
    stamp(relAt, 0);
    stamp(trimAt, 1);
    stamp(attrAt, 2);
    stamp(knobAt, 3);
    // Failed allocations: a red cross over the lane.
    auto fBefore = [&](int64_t t) { return [&, t](uint32_t i) { return tl.failed[i].tsNs < t; }; };
    auto f = std::partition_point(l.failed.begin(), l.failed.end(), fBefore(ta));
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(c_.failColor(), 2));
    while (f != l.failed.end()) {
        const FailedAllocation& fa = tl.failed[*f];
        if (fa.tsNs >= tb) break;
        const double x = g_.xOf(fa.tsNs), cy = top + h / 2.0;
        p.drawLine(QPointF(x - 5, cy - 5), QPointF(x + 5, cy + 5));
        p.drawLine(QPointF(x - 5, cy + 5), QPointF(x + 5, cy - 5));
        ++stats.markers;
        f = std::partition_point(f + 1, l.failed.end(), fBefore(g_.tOf(std::floor(x) + 1)));
    }
    p.setRenderHint(QPainter::Antialiasing, false);
}

void TimelinePainter::paintEdges(QPainter& p) {
    const Timeline& tl = *s_.timeline;
    const LaneLayout& layout = *s_.layout;
    const auto& edges = tl.edges;
    auto waitBefore = [&](int64_t t) {
        return [&, t](const WaitEdge& e) { return e.waitTsNs < t; };
    };
    auto it = std::partition_point(edges.begin(), edges.end(), waitBefore(g_.v0));
    // Edges are sorted by wait time; an edge recorded inside the view but waited on after it
    // is found by looking a little past the right edge.
    const int64_t past = g_.v1 + (g_.v1 - g_.v0) / 4;
    std::vector<QLineF> lines;
    while (it != edges.end() && it->waitTsNs < past) {
        const WaitEdge& e = *it;
        int a = layout.laneOfStream(e.fromStream), b = layout.laneOfStream(e.toStream);
        // A lane inside a collapsed group: the arrow ends at the group's header.
        if (a >= 0) a = g_.shownAs[size_t(a)];
        if (b >= 0) b = g_.shownAs[size_t(b)];
        const double xw = g_.xOf(e.waitTsNs);
        if (a >= 0 && b >= 0 && a != b && e.recordTsNs < g_.v1) {
            // From the recording lane's edge to the waiting lane's edge: arrows never cover
            // the bars of the lanes they connect.
            const bool down = b > a;
            const double ya = g_.laneY(size_t(a)) + (down ? g_.laneH[size_t(a)] - 1 : 1);
            const double yb = g_.laneY(size_t(b)) + (down ? 1 : g_.laneH[size_t(b)] - 1);
            lines.emplace_back(clampX(g_.xOf(e.recordTsNs), g_), ya, clampX(xw, g_), yb);
        }
        // Gallop forward to the first edge waited on in the next pixel column.
        const int64_t tNext = g_.tOf(std::floor(xw) + 1);
        auto lo = it + 1;
        size_t step = 1;
        while (lo != edges.end() && size_t(edges.end() - lo) > step &&
               (lo + ptrdiff_t(step))->waitTsNs < tNext) {
            lo += ptrdiff_t(step);
            step *= 2;
        }
        const auto hi = size_t(edges.end() - lo) > step ? lo + ptrdiff_t(step) + 1 : edges.end();
        it = std::partition_point(lo, hi, waitBefore(tNext));
    }
    stats.edges += lines.size();
    if (lines.empty()) return;
    const bool dense = lines.size() > size_t(g_.plotW() / 6);
    QColor c = c_.edgeColor();
    if (dense) c.setAlpha(60);
    p.setRenderHint(QPainter::Antialiasing, !dense);
    p.setPen(QPen(c, 1));
    p.drawLines(lines.data(), int(lines.size()));
    if (!dense) {
        p.setBrush(c);
        p.setPen(Qt::NoPen);
        for (const QLineF& ln : lines) {
            // Arrowhead at the waiting stream's end.
            const double ang = std::atan2(ln.dy(), ln.dx());
            const QPointF tip = ln.p2();
            QPolygonF head;
            head << tip << tip - QPointF(std::cos(ang - 0.45) * 8, std::sin(ang - 0.45) * 8)
                 << tip - QPointF(std::cos(ang + 0.45) * 8, std::sin(ang + 0.45) * 8);
            p.drawPolygon(head);
        }
    }
    p.setRenderHint(QPainter::Antialiasing, false);
}

bool TimelinePainter::barRowOf(uint32_t index, int& y, int& h) const {
    const int row = s_.layout->rowOfAlloc[index];
    if (row < 0) return false;
    size_t lane = size_t(s_.layout->laneOfRow[size_t(row)]);
    const Lane& l = s_.layout->lanes[lane];
    h = TimelineGeometry::rowPitch(l, g_.laneH[lane]);
    y = g_.laneY(lane) + kStreamPad + (row - l.firstRow) * h;
    if (g_.collapsed(lane)) {
        h = kSummaryH;
        y = g_.laneY(lane) + kStreamPad;
    } else if (g_.hidden(lane)) {
        lane = size_t(g_.shownAs[lane]);
        h = g_.laneH[lane] - 4;
        y = g_.laneY(lane) + 2;
    }
    return true;
}

void TimelinePainter::paintHighlightedAllocations(QPainter& p) {
    if (!highlightedAllocations || highlightedAllocations->empty()) return;
    const Timeline& tl = *s_.timeline;
    // The chosen call site's blocks in one colour over the bars: filled and outlined, at least
    // 2 px wide so a short-lived one still shows. One rectangle per row and pixel column.
    const QColor fill(220, 0, 150, 150), edge(220, 0, 150);
    std::vector<std::pair<int, int>> lastOfRow; // (y, last x drawn) for sub-pixel blocks
    p.setPen(QPen(edge, 1));
    p.setBrush(fill);
    for (uint32_t i : *highlightedAllocations) {
        if (i >= tl.allocations.size()) continue;
        const Allocation& a = tl.allocations[i];
        const double rx0 = g_.xOf(a.allocTsNs), rx1 = g_.xOf(endOf(a));
        if (rx1 < g_.labelW || rx0 > g_.width) continue;
        int y = 0, h = 0;
        if (!barRowOf(i, y, h)) continue;
        if (y + h < g_.lanesTop() || y > g_.lanesBottom()) continue;
        double x0 = clampX(rx0, g_), x1 = clampX(rx1, g_);
        if (x1 - x0 < 2) {
            const int px = int(std::floor(x0));
            auto it = std::find_if(lastOfRow.begin(), lastOfRow.end(),
                                   [&](const auto& e) { return e.first == y; });
            if (it != lastOfRow.end() && it->second == px) continue;
            if (it == lastOfRow.end())
                lastOfRow.push_back({y, px});
            else
                it->second = px;
            x0 = px - 0.5;
            x1 = px + 1.5;
        }
        p.drawRect(QRectF(x0, y, x1 - x0 - 1, std::max(1, h - 2)));
    }
    p.setBrush(Qt::NoBrush);
}

void TimelinePainter::paintNvtx(QPainter& p) {
    if (!nvtx || g_.nvtxRows == 0 || !s_.stacks) return;
    const StackTables& st = *s_.stacks;
    const int top = g_.rulerH;
    p.save();
    p.fillRect(0, top, g_.width, g_.nvtxH, c_.headerBg());
    const QFont normal = p.font();
    QFont small = normal;
    small.setPointSizeF(std::max(6.0, normal.pointSizeF() * 0.85));
    p.setFont(small);
    const QFontMetrics fm(small);
    // The label column: "NVTX · thread N" on each thread's first row.
    p.setClipRect(0, top, g_.labelW, g_.nvtxH);
    p.setPen(c_.text());
    for (int r = 0; r < g_.nvtxRows; ++r) {
        const auto& row = nvtx->rows[size_t(r)];
        if (r > 0 && nvtx->rows[size_t(r - 1)].tid == row.tid) continue;
        QString label = QCoreApplication::translate("TimelinePainter", "NVTX · thread %1").arg(row.tid);
        if (r == g_.nvtxRows - 1 && nvtx->rows.size() > size_t(g_.nvtxRows))
            label += QCoreApplication::translate("TimelinePainter", " (+%1 rows not shown)").arg(nvtx->rows.size() - size_t(g_.nvtxRows));
        p.drawText(QRect(8, top + r * g_.nvtxRowH, g_.labelW - 12, std::max(g_.nvtxRowH, fm.height())),
                   Qt::AlignLeft | Qt::AlignVCenter, fm.elidedText(label, Qt::ElideRight, g_.labelW - 12));
    }
    // The ranges: one box each, coloured by name, named where the box is wide enough; boxes
    // narrower than a pixel fold into the column they start in.
    p.setClipRect(g_.labelW, top, g_.width - g_.labelW, g_.nvtxH);
    const int64_t v0 = g_.tOf(g_.labelW - 2), v1 = g_.tOf(g_.width + 2);
    for (int r = 0; r < g_.nvtxRows; ++r) {
        const auto& row = nvtx->rows[size_t(r)];
        const int y = top + 1 + r * g_.nvtxRowH;
        const int h = std::max(2, g_.nvtxRowH - 1);
        int lastPx = INT_MIN;
        for (size_t k = view::NvtxRows::firstReaching(row, v0); k < row.ranges.size(); ++k) {
            const NvtxRange& rg = st.ranges[row.ranges[k]];
            if (rg.startNs >= v1) break;
            const int64_t end = nvtx->endOf(rg);
            if (end < v0) continue;
            const double x0 = clampX(g_.xOf(rg.startNs), g_), x1 = clampX(g_.xOf(end), g_);
            if (x1 - x0 < 1 && int(x0) == lastPx) continue;
            lastPx = int(x0);
            const QColor fill = c_.nvtxColor(nvtx->colorSlot(rg.name));
            const QRectF box(x0, y, std::max(1.0, x1 - x0 - 1), h);
            p.fillRect(box, fill);
            p.setPen(fill.darker(140));
            p.drawRect(box.adjusted(0, 0, -0.5, -0.5));
            if (box.width() > 24 && h >= fm.height() - 4) {
                p.setPen(c_.dark() ? Qt::white : Qt::black);
                // Keep the name on screen when the box starts left of the view.
                const QRectF textBox =
                    box.intersected(QRectF(g_.labelW, y, g_.plotW(), h)).adjusted(3, 0, -2, 0);
                p.drawText(textBox, Qt::AlignLeft | Qt::AlignVCenter,
                           fm.elidedText(QString::fromStdString(rg.name), Qt::ElideRight,
                                         int(textBox.width())));
            }
        }
    }
    p.setClipping(false);
    p.fillRect(0, top + g_.nvtxH - 1, g_.width, 1, c_.grid());
    p.setFont(normal);
    p.restore();
}

void TimelinePainter::paintSelection(QPainter& p, const Selection& sel) {
    const Timeline& tl = *s_.timeline;
    if (sel.kind != Selection::Allocation || sel.index >= tl.allocations.size()) return;
    const Allocation& a = tl.allocations[sel.index];
    const int row = s_.layout->rowOfAlloc[sel.index];
    if (row < 0) return;
    size_t lane = size_t(s_.layout->laneOfRow[size_t(row)]);
    const Lane& l = s_.layout->lanes[lane];
    int pitch = TimelineGeometry::rowPitch(l, g_.laneH[lane]);
    int y = g_.laneY(lane) + kStreamPad + (row - l.firstRow) * pitch;
    if (g_.collapsed(lane)) {
        pitch = kSummaryH;
        y = g_.laneY(lane) + kStreamPad;
    } else if (g_.hidden(lane)) {
        // Inside a collapsed group: outline it across the group header.
        lane = size_t(g_.shownAs[lane]);
        pitch = g_.laneH[lane] - 4;
        y = g_.laneY(lane) + 2;
    }
    double x0 = clampX(g_.xOf(a.allocTsNs), g_), x1 = clampX(g_.xOf(endOf(a)), g_);
    if (x1 - x0 < 3) {
        const double mid = (x0 + x1) / 2;
        x0 = mid - 1.5;
        x1 = mid + 1.5;
    }
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(c_.selection(), 2));
    p.drawRect(QRectF(x0 - 1, y - 1, x1 - x0 + 2, std::max(2, pitch) + 1));
}

} // namespace poolscope::ui
