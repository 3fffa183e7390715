// TimelinePainter, part 2: the text and interaction around the lanes: the label column, the
// ruler, the legend, hit testing and tooltips. The lanes' contents (bars, pool charts, markers,
// wait arrows, selection) and the lane geometry are in TimelinePainter.cpp.
#include "DetailsPane.h"
#include "TimeTicker.h"
#include "TimelinePainter.h"
#include "poolscope/EventText.h"
#include "poolscope/Units.h"

#include <algorithm>
#include <cmath>

namespace poolscope::ui {

namespace {
// Must equal kStreamPad in TimelinePainter.cpp (a stream lane's padding above its first row):
// hitTest() maps a y back to the row that paintRows() drew there.
constexpr int kStreamPad = 3;

QString qs(const std::string& s) {
    return QString::fromStdString(s);
}
} // namespace

void TimelinePainter::paintLabels(QPainter& p, int64_t cursor, int highlighted) {
    // Lane titles and, in replay, the state at the cursor.
    const Timeline& tl = *s_.timeline;
    const LaneLayout& layout = *s_.layout;
    p.save();
    p.setClipRect(0, g_.lanesTop(), g_.labelW, g_.lanesBottom() - g_.lanesTop());
    p.fillRect(0, g_.lanesTop(), g_.labelW, g_.lanesBottom() - g_.lanesTop(), c_.headerBg());
    QFont base = p.font();
    QFont bold = base;
    bold.setBold(true);
    QFont small = base;
    small.setPointSizeF(base.pointSizeF() * 0.85);
    for (size_t i = 0; i < layout.lanes.size(); ++i) {
        const int y = g_.laneY(i), h = g_.laneH[i];
        if (h <= 0 || y + h < g_.lanesTop() || y > g_.lanesBottom()) continue;
        const Lane& l = layout.lanes[i];
        const int indent = TimelineGeometry::labelIndent(l);
        if (int(i) == highlighted) p.fillRect(0, y, g_.labelW, h, QColor(60, 130, 210, 60));
        p.setPen(c_.grid());
        p.drawLine(0, y + h - 1, g_.labelW, y + h - 1);
        if (l.kind == LaneKind::Pool && l.poolIndex >= 0) {
            p.fillRect(4, y + 4, 4, h - 8, c_.poolColor(l.poolSlot));
        }
        if (l.kind == LaneKind::Outside) p.fillRect(4, y + 4, 4, h - 8, c_.outsideColor());
        if (l.kind == LaneKind::Host) p.fillRect(4, y + 4, 4, h - 8, c_.pinnedColor());
        const bool isCollapsed = g_.collapsed(i);
        const QRect tri = g_.disclosureRect(layout, i);
        if (!tri.isEmpty()) {
            // Disclosure triangle: pointing right when collapsed, down when expanded.
            const QPointF c = QRectF(tri).center();
            QPolygonF t;
            if (isCollapsed)
                t << c + QPointF(-2.5, -4.5) << c + QPointF(3.5, 0) << c + QPointF(-2.5, 4.5);
            else
                t << c + QPointF(-4.5, -2.5) << c + QPointF(4.5, -2.5) << c + QPointF(0, 3.5);
            p.setRenderHint(QPainter::Antialiasing, true);
            p.setPen(Qt::NoPen);
            p.setBrush(c_.dimText());
            p.drawPolygon(t);
            p.setBrush(Qt::NoBrush);
            p.setRenderHint(QPainter::Antialiasing, false);
        }
        if (int(i) == focusLane) {
            // Keyboard focus for collapsing (Ctrl+Up/Down, Enter).
            p.setPen(QPen(c_.selection(), 1, Qt::DotLine));
            p.drawRect(1, y + 1, g_.labelW - 3, h - 3);
        }
        QString sub = qs(l.subtitle);
        if (isCollapsed && l.kind != LaneKind::Stream) {
            int n = 0;
            for (size_t j = i + 1; j < layout.lanes.size() && g_.shownAs[j] == int(i); ++j)
                ++n;
            sub = QStringLiteral("%1 lane(s) collapsed").arg(n);
            if (l.kind == LaneKind::Pool && !l.subtitle.empty()) sub = qs(l.subtitle) + " · " + sub;
        } else if (isCollapsed) {
            sub = QStringLiteral("collapsed · %1 rows").arg(l.rowCount);
        }
        if (cursor != INT64_MIN) {
            // Replay: the state at the cursor instead of the static subtitle.
            if (l.kind == LaneKind::Pool && l.poolIndex >= 0) {
                const PoolTimeline& pt = tl.pools[size_t(l.poolIndex)];
                sub = QStringLiteral("reserved %1 · used %2")
                          .arg(qs(formatBytes(pt.reserved.valueAt(cursor))),
                               qs(formatBytes(pt.used.valueAt(cursor))));
            } else if (l.kind == LaneKind::Outside && l.outsideIndex >= 0) {
                const OutsideTimeline& o = tl.outside[size_t(l.outsideIndex)];
                sub = QStringLiteral("outside %1 · with pools %2")
                          .arg(qs(formatBytes(o.liveBytes.valueAt(cursor))),
                               qs(formatBytes(o.withPools.valueAt(cursor))));
            } else if (l.kind == LaneKind::Host) {
                sub = QStringLiteral("pinned %1 · registered %2")
                          .arg(qs(formatBytes(tl.pinned.total.valueAt(cursor))),
                               qs(formatBytes(tl.pinned.registered.valueAt(cursor))));
            } else if (l.kind == LaneKind::Stream && l.streamIndex >= 0) {
                sub = QStringLiteral("live %1").arg(
                    qs(formatBytes(tl.streams[size_t(l.streamIndex)].liveBytes.valueAt(cursor))));
            }
        }
        const int w = g_.labelW - indent - 4;
        if (h >= 28 || l.kind == LaneKind::Pool) {
            // Title on the disclosure triangle's line (the top 20 px), the subtitle right under
            // it: in a tall lane (a stream with many rows) the title centred in the upper half
            // left the triangle's line looking like an empty header.
            const int titleH = std::min(h / 2, 20);
            p.setFont(l.kind == LaneKind::Stream ? base : bold);
            p.setPen(c_.text());
            p.drawText(QRect(indent, y + 1, w, titleH), Qt::AlignLeft | Qt::AlignVCenter,
                       p.fontMetrics().elidedText(qs(l.title), Qt::ElideRight, w));
            p.setFont(small);
            p.setPen(c_.dimText());
            const int subH = std::min(h - titleH - 2, p.fontMetrics().height() + 4);
            p.drawText(QRect(indent, y + 1 + titleH, w, subH), Qt::AlignLeft | Qt::AlignVCenter,
                       p.fontMetrics().elidedText(sub, Qt::ElideRight, w));
        } else {
            p.setFont(l.kind == LaneKind::Stream ? base : bold);
            p.setPen(c_.text());
            QString t = qs(l.title);
            if (!sub.isEmpty()) {
                // One line: drop the subtitle's trailing parts ("· peak 48.0 MiB") before
                // letting the text be cut.
                QString shortSub = sub;
                while (p.fontMetrics().horizontalAdvance(t + QStringLiteral("  ") + shortSub) > w &&
                       shortSub.lastIndexOf(QStringLiteral(" · ")) > 0)
                    shortSub.truncate(shortSub.lastIndexOf(QStringLiteral(" · ")));
                t += QStringLiteral("  ") + shortSub;
            }
            p.drawText(QRect(indent, y, w, h), Qt::AlignLeft | Qt::AlignVCenter,
                       p.fontMetrics().elidedText(t, Qt::ElideRight, w));
        }
    }
    p.setFont(base);
    p.setPen(c_.grid());
    p.drawLine(g_.labelW - 1, g_.lanesTop(), g_.labelW - 1, g_.lanesBottom());
    p.restore();
}

void TimelinePainter::paintRuler(QPainter& p, int64_t cursor) {
    const Timeline& tl = *s_.timeline;
    p.fillRect(0, 0, g_.width, g_.rulerH, c_.headerBg());
    p.setPen(c_.dimText());
    p.drawText(QRect(6, 0, g_.labelW - 8, g_.rulerH), Qt::AlignLeft | Qt::AlignVCenter,
               g_.originLabel.isEmpty() ? QStringLiteral("time since first event")
                                        : g_.originLabel);
    // Within +-2^61 ns, as the view is (TimelineWidget.cpp): a damaged trace can start at
    // INT64_MIN, and v0 - origin must not overflow.
    const int64_t origin = std::clamp(g_.originOr(tl.t0), -(int64_t{1} << 61), int64_t{1} << 61);
    if (tl.eventCount == 0 && tl.sampleCount == 0) {
        // An empty trace has no time axis: a "0 ns ... 50 ns" ruler would invent one.
        p.drawText(QRect(g_.labelW + 8, 0, g_.plotW() - 8, g_.rulerH), Qt::AlignLeft | Qt::AlignVCenter,
                   QStringLiteral("no events: the program never used the stream-ordered "
                                  "allocator while it was recorded"));
        p.fillRect(0, g_.rulerH - 1, g_.width, 1, c_.grid());
        return;
    }
    const int64_t step = niceTimeStep(g_.v1 - g_.v0, std::max(2, g_.plotW() / 110));
    const int64_t scale = std::max(std::llabs(g_.v0 - origin), std::llabs(g_.v1 - origin));
    int64_t rel = ((g_.v0 - origin) / step) * step;
    p.save();
    p.setClipRect(g_.labelW, 0, g_.width - g_.labelW, g_.rulerH);
    // Tick marks are drawn together after the labels (a label starts right of its own tick,
    // so the result is the same): one drawLines instead of a pen change and a line per tick.
    std::vector<QLineF> ticks;
    p.setPen(c_.text());
    for (; origin + rel <= g_.v1; rel += step) {
        const double x = g_.xOf(origin + rel);
        if (x < g_.labelW - 1) continue;
        ticks.emplace_back(QPointF(x, g_.rulerH - 6), QPointF(x, g_.rulerH));
        const QString label = timeTickLabel(rel, step, scale);
        // A label that would run past the right edge is left out, not cut ("22 m").
        if (x + 3 + p.fontMetrics().horizontalAdvance(label) > g_.width - g_.rightPad) continue;
        if (textCache) {
            // Laid-out text reused across frames (shaping the tick labels was ~1/5 of a frame).
            auto it = textCache->find(label);
            if (it == textCache->end()) {
                if (textCache->size() > 512) textCache->clear();
                it = textCache->insert(label, QStaticText(label));
                it->prepare(QTransform(), p.font());
            }
            const double ty = (g_.rulerH - 2 - p.fontMetrics().height()) / 2.0;
            p.drawStaticText(QPointF(x + 3, ty), *it);
        } else {
            p.drawText(QRectF(x + 3, 0, 110, g_.rulerH - 2), Qt::AlignLeft | Qt::AlignVCenter,
                       label);
        }
    }
    p.setPen(c_.dimText());
    p.drawLines(ticks.data(), int(ticks.size()));
    if (cursor != INT64_MIN) {
        const double x = g_.xOf(cursor);
        const QString label =
            timeTickLabel(cursor - origin, std::max<int64_t>(1, step / 100), scale);
        const int w = p.fontMetrics().horizontalAdvance(label) + 10;
        // Whole, even when the cursor is near either edge of the ruler.
        const double left =
            std::clamp(x - w / 2.0, double(g_.labelW), std::max(double(g_.labelW),
                                                                double(g_.width - g_.rightPad - w)));
        QRectF box(left, 2, w, g_.rulerH - 4);
        p.fillRect(box, c_.cursor());
        p.setPen(Qt::white);
        p.drawText(box, Qt::AlignCenter, label);
    }
    p.restore();
    // The same pixels as a one-pixel line, but a line this long goes through Qt's cosmetic
    // stroker as one span per pixel, which Qt 6 hands to its GUI thread pool in batches (a
    // thread start and a semaphore per frame, ~0.3 ms of the painting thread's CPU).
    p.fillRect(0, g_.rulerH - 1, g_.width, 1, c_.grid());
}

namespace {
// The legend's entries: the width of the sample drawn before each text, and the text.
struct LegendEntry {
    int sampleW;
    const char* text;
};
// The drop entry only for a trace where the collector lost events, the cudaFree one only for a
// trace with cudaFree's device-wide syncs (empty text: not shown).
std::array<LegendEntry, 13> legendEntries(BarColoring coloring, bool drops, bool syncs) {
    return {{{coloring == BarColoring::BySize ? 44 : 20,
              coloring == BarColoring::BySize ? "allocation, alloc→free (256 B → 16 GiB)"
                                              : "allocation, alloc→free (colour = pool)"},
             {18, "pool reserved / used"},
             {16, "still live at end"},
             {6, "synchronize"},
             {14, "implicit release"},
             {14, "trim"},
             {14, "attribute set"},
             {14, "knob (PoolScope)"},
             {14, "failed alloc"},
             {18, "event record → stream wait"},
             {10, "other (pool create, export, import…)"},
             {16, drops ? "events lost (collector)" : ""},
             {16, syncs ? "cudaFree: the device waits (call time shaded)" : ""}}};
}
constexpr int kLegendRowH = 18;
constexpr int kLegendGap = 14;
} // namespace

// Entries wrap onto more rows rather than being cut at the right edge.
int TimelinePainter::legendHeight(int width, const QFontMetrics& fm, BarColoring coloring,
                                  bool drops, bool syncs) {
    int x = 8, rows = 1;
    for (const LegendEntry& e : legendEntries(coloring, drops, syncs)) {
        if (!*e.text) continue;
        const int w = e.sampleW + fm.horizontalAdvance(QString::fromUtf8(e.text));
        if (x > 8 && x + w > width - 8) {
            ++rows;
            x = 8;
        }
        x += w + kLegendGap;
    }
    return rows * kLegendRowH + 2;
}

void TimelinePainter::paintLegend(QPainter& p) {
    const int y = g_.lanesBottom();
    p.fillRect(0, y, g_.width, g_.legendH, c_.headerBg());
    p.setRenderHint(QPainter::Antialiasing, true);
    int x = 8;
    int cy = y + 1 + kLegendRowH / 2;
    const auto entries = legendEntries(coloring_, !s_.timeline->dropGaps.empty(),
                                       !s_.timeline->deviceSyncs.empty());
    for (size_t i = 0; i < entries.size(); ++i) {
        const LegendEntry& e = entries[i];
        if (!*e.text) continue;
        const QString t = QString::fromUtf8(e.text);
        const int w = e.sampleW + p.fontMetrics().horizontalAdvance(t);
        if (x > 8 && x + w > g_.width - 8) {
            x = 8;
            cy += kLegendRowH;
        }
        // The sample: the lanes' own colours and marker glyphs.
        switch (i) {
        case 0:
            if (coloring_ == BarColoring::BySize) {
                for (int k = 0; k < 5; ++k)
                    p.fillRect(x + k * 8, cy - 4, 8, 8, c_.sizeColor(uint64_t(1) << (8 + k * 6)));
            } else {
                p.fillRect(x, cy - 4, 16, 8, c_.poolColor(0));
            }
            break;
        case 1: {
            QColor r = c_.poolColor(0);
            r.setAlpha(60);
            p.fillRect(x, cy - 6, 14, 12, r);
            p.fillRect(x, cy + 1, 14, 5, c_.usedColor(0));
            break;
        }
        case 2:
            p.fillRect(x, cy - 4, 12, 8, c_.sizeColor(1 << 20));
            p.fillRect(x + 9, cy - 4, 3, 8, c_.liveMark());
            break;
        case 3:
            p.setPen(QPen(c_.syncColor(), 2));
            p.drawLine(x, cy - 5, x, cy + 5);
            break;
        case 4:
        case 5:
        case 6:
        case 7: {
            const QImage& img = markerGlyph(int(i) - 4);
            p.drawImage(x + 5 - img.width() / 2, cy - img.height() / 2, img);
            break;
        }
        case 8:
            p.setPen(QPen(c_.failColor(), 2));
            p.drawLine(x + 1, cy - 4, x + 9, cy + 4);
            p.drawLine(x + 1, cy + 4, x + 9, cy - 4);
            break;
        case 9:
            p.setPen(QPen(c_.edgeColor(), 1));
            p.drawLine(x, cy, x + 14, cy);
            break;
        case 10: // paintMarkers' "others"
            p.fillRect(x, cy - 3, 6, 6, c_.dimText());
            break;
        case 11: // paintContent's drop-gap band
            p.fillRect(QRect(x, cy - 6, 12, 12), QColor(220, 30, 30, 60));
            p.fillRect(QRect(x, cy - 6, 12, 12), QBrush(QColor(220, 30, 30, 160), Qt::BDiagPattern));
            break;
        case 12: { // paintDeviceSyncs: the call's time, then the line
            QColor band = c_.deviceSyncColor();
            band.setAlpha(c_.dark() ? 70 : 45);
            p.fillRect(QRect(x, cy - 6, 8, 12), band);
            p.fillRect(QRect(x + 8, cy - 6, 2, 12), c_.deviceSyncColor());
            break;
        }
        default: break;
        }
        x += e.sampleW;
        p.setPen(c_.text());
        p.drawText(QPoint(x, cy + p.fontMetrics().ascent() / 2 - 1), t);
        x += p.fontMetrics().horizontalAdvance(t) + kLegendGap;
    }
    p.setRenderHint(QPainter::Antialiasing, false);
    p.setBrush(Qt::NoBrush);
}

TimelineHit TimelinePainter::hitTest(QPoint pos) const {
    TimelineHit hit;
    const Timeline& tl = *s_.timeline;
    const LaneLayout& layout = *s_.layout;
    if (nvtx && s_.stacks && pos.y() >= g_.rulerH && pos.y() < g_.lanesTop() &&
        pos.x() >= g_.labelW && g_.nvtxRowH > 0) {
        const int row = (pos.y() - g_.rulerH - 1) / g_.nvtxRowH;
        if (row >= 0 && row < g_.nvtxRows) {
            // A pixel either side, so a range narrower than a pixel can still be pointed at.
            hit.nvtxRange = nvtx->rangeAt(*s_.stacks, size_t(row), g_.tOf(pos.x()));
            for (int dx : {-1, 1})
                if (hit.nvtxRange < 0)
                    hit.nvtxRange = nvtx->rangeAt(*s_.stacks, size_t(row), g_.tOf(pos.x() + dx));
        }
        return hit;
    }
    if (pos.y() < g_.lanesTop() || pos.y() >= g_.lanesBottom()) return hit;
    for (size_t i = 0; i < layout.lanes.size(); ++i) {
        const int y = g_.laneY(i);
        if (pos.y() >= y && pos.y() < y + g_.laneH[i]) {
            hit.lane = int(i);
            break;
        }
    }
    if (hit.lane < 0) return hit;
    const Lane& l = layout.lanes[size_t(hit.lane)];
    if (pos.x() < g_.labelW) {
        // The disclosure triangle, or anywhere on a device header (it selects nothing).
        hit.toggle =
            g_.disclosureRect(layout, size_t(hit.lane)).adjusted(-3, -2, 3, 2).contains(pos) ||
            l.kind == LaneKind::Device;
        if (l.kind == LaneKind::Pool) hit.sel = {Selection::Pool, 0, l.pool, {}};
        if (l.kind == LaneKind::Stream) hit.sel = {Selection::Stream, 0, l.stream, {}};
        return hit;
    }
    const int64_t ta = g_.tOf(pos.x() - 5), tb = g_.tOf(pos.x() + 5);
    const int64_t tc = g_.tOf(pos.x());
    for (size_t i = 0; i < tl.dropGaps.size(); ++i) {
        const DropGap& gap = tl.dropGaps[i];
        if (gap.tsNs <= g_.tOf(pos.x() + 3) &&
            gap.tsNs + std::max<int64_t>(gap.durationNs, 0) >= g_.tOf(pos.x() - 3)) {
            hit.dropGap = int(i);
            break;
        }
    }
    hit.t = tc;
    if (l.kind == LaneKind::Stream || l.kind == LaneKind::Outside) {
        // A cudaFree's line (or its shaded call time) across the device's lanes.
        const int64_t ra = g_.tOf(pos.x() - 3), rb = g_.tOf(pos.x() + 3);
        auto it = std::partition_point(tl.deviceSyncs.begin(), tl.deviceSyncs.end(),
                                       [&](const DeviceSync& d) { return d.tsNs < ra; });
        for (; it != tl.deviceSyncs.end() && it->tsNs - it->callNs <= rb; ++it)
            if (it->device == l.device) {
                hit.deviceSync = int(it - tl.deviceSyncs.begin());
                break;
            }
    }
    // Markers and failures first: they sit on top.
    int64_t best = INT64_MAX;
    auto mt = std::partition_point(l.markers.begin(), l.markers.end(),
                                   [&](uint32_t i) { return tl.markers[i].tsNs < ta; });
    for (; mt != l.markers.end() && tl.markers[*mt].tsNs <= tb; ++mt) {
        const int64_t d = std::llabs(tl.markers[*mt].tsNs - tc);
        if (d < best) {
            best = d;
            hit.sel = {Selection::Marker, *mt, 0, {}};
        }
    }
    auto ft = std::partition_point(l.failed.begin(), l.failed.end(),
                                   [&](uint32_t i) { return tl.failed[i].tsNs < ta; });
    for (; ft != l.failed.end() && tl.failed[*ft].tsNs <= tb; ++ft) {
        const int64_t d = std::llabs(tl.failed[*ft].tsNs - tc);
        if (d <= best) {
            best = d;
            hit.sel = {Selection::Failed, *ft, 0, {}};
        }
    }
    if (hit.sel.kind != Selection::None) return hit;
    if (l.kind == LaneKind::Stream && l.rowCount > 0) {
        const int64_t t0 = g_.tOf(pos.x() - 2), t1 = g_.tOf(pos.x() + 2);
        auto find = [&](int r) {
            const auto& row = layout.rows[size_t(l.firstRow + r)];
            auto it = std::partition_point(
                row.begin(), row.end(), [&](uint32_t i) { return endOf(tl.allocations[i]) <= t0; });
            if (it != row.end() && tl.allocations[*it].allocTsNs <= t1) {
                hit.sel = {Selection::Allocation, *it, 0, {}};
                return true;
            }
            return false;
        };
        if (g_.collapsed(size_t(hit.lane))) {
            // The summary row: the top-most row with a block under the pointer.
            for (int r = 0; r < l.rowCount; ++r)
                if (find(r)) return hit;
        } else {
            const int pitch = TimelineGeometry::rowPitch(l, g_.laneH[size_t(hit.lane)]);
            const int r = (pos.y() - g_.laneY(size_t(hit.lane)) - kStreamPad) / pitch;
            if (r >= 0 && r < l.rowCount && find(r)) return hit;
        }
    }
    if (l.kind == LaneKind::Pool) hit.sel = {Selection::Pool, 0, l.pool, {}};
    return hit;
}

QString TimelinePainter::tooltip(const TimelineHit& h) const {
    const Timeline& tl = *s_.timeline;
    const LaneLayout& layout = *s_.layout;
    auto rel = [&](int64_t t) { return qs(formatDuration(t - g_.originOr(tl.t0))); };
    if (h.nvtxRange >= 0 && s_.stacks && size_t(h.nvtxRange) < s_.stacks->ranges.size()) {
        const NvtxRange& r = s_.stacks->ranges[size_t(h.nvtxRange)];
        QString s = QStringLiteral("<b>%1</b> (NVTX %2 range, thread %3, depth %4)<br>from %5")
                        .arg(QString::fromStdString(r.name).toHtmlEscaped(),
                             r.kind == NvtxRangeKind::PushPop ? QStringLiteral("push/pop")
                                                              : QStringLiteral("start/end"))
                        .arg(r.tid)
                        .arg(r.depth)
                        .arg(rel(r.startNs));
        s += r.endNs ? QStringLiteral(" to %1 (%2)").arg(rel(r.endNs), qs(formatDuration(r.endNs - r.startNs)))
                     : QStringLiteral(", still open when the recording ended");
        return s;
    }
    const bool onLaneOnly = h.sel.kind == Selection::None || h.sel.kind == Selection::Pool ||
                            h.sel.kind == Selection::Stream;
    if (onLaneOnly && h.dropGap >= 0 && size_t(h.dropGap) < tl.dropGaps.size()) {
        const DropGap& gap = tl.dropGaps[size_t(h.dropGap)];
        return QStringLiteral("<b>%1 events lost</b> at %2 (over %3) on thread %4<br>the "
                              "collector's ring was full: counts and bytes near here are "
                              "incomplete")
            .arg(qs(formatCount(gap.count)), rel(gap.tsNs), qs(formatDuration(gap.durationNs)))
            .arg(gap.tid);
    }
    if (onLaneOnly && h.deviceSync >= 0 && size_t(h.deviceSync) < tl.deviceSyncs.size()) {
        const DeviceSync& d = tl.deviceSyncs[size_t(h.deviceSync)];
        QString s = QStringLiteral("<b>cudaFree</b> at %1 of %2<br>a free outside the pools: the "
                                   "whole device waits for every stream")
                        .arg(rel(d.tsNs),
                             d.bytes ? qs(formatBytes(d.bytes)) : QStringLiteral("memory allocated before recording"));
        if (d.callNs > 0)
            s += QStringLiteral("<br>the call took %1").arg(qs(formatDuration(d.callNs)));
        return s;
    }
    if (h.sel.kind == Selection::None && h.lane >= 0) {
        const Lane& l = layout.lanes[size_t(h.lane)];
        if (l.kind == LaneKind::Outside && l.outsideIndex >= 0) {
            const OutsideTimeline& o = tl.outside[size_t(l.outsideIndex)];
            return QStringLiteral("<b>GPU %1: memory outside the pools</b> at %2<br>cudaMalloc: %3"
                                  "<br>with the pools' reserved: %4<br>peaks: cudaMalloc %5, "
                                  "pools' reserved %6, both %7")
                .arg(l.device)
                .arg(rel(h.t), qs(formatBytes(o.liveBytes.valueAt(h.t))),
                     qs(formatBytes(o.withPools.valueAt(h.t))), qs(formatBytes(o.peakBytes)),
                     qs(formatBytes(o.poolsReservedPeak)), qs(formatBytes(o.withPoolsPeak)));
        }
        if (l.kind == LaneKind::Host) {
            const PinnedTimeline& pt = tl.pinned;
            return QStringLiteral("<b>pinned host memory</b> at %1<br>allocated (cudaHostAlloc, "
                                  "cudaMallocHost): %2<br>registered (cudaHostRegister): %3<br>"
                                  "peaks: allocated %4, registered %5, both %6")
                .arg(rel(h.t), qs(formatBytes(pt.allocated.valueAt(h.t))),
                     qs(formatBytes(pt.registered.valueAt(h.t))), qs(formatBytes(pt.allocatedPeak)),
                     qs(formatBytes(pt.registeredPeak)), qs(formatBytes(pt.totalPeak)));
        }
    }
    switch (h.sel.kind) {
    case Selection::Allocation: {
        const Allocation& a = tl.allocations[h.sel.index];
        QString s = QStringLiteral("<b>%1</b> at %2<br>%3 on %4<br>allocated at %5")
                        .arg(qs(formatBytes(a.size)), hexHandle(a.ptr), layout.poolName(a.pool),
                             layout.streamName(a.allocStream), rel(a.allocTsNs));
        if (a.live())
            s += QStringLiteral("<br><span style='color:#e02020'>never freed (live at end)</span>");
        else
            s += QStringLiteral("<br>freed at %1 on %2 (lived %3)")
                     .arg(rel(a.freeTsNs), layout.streamName(a.freeStream),
                          qs(formatDuration(a.freeTsNs - a.allocTsNs)));
        return s;
    }
    case Selection::Marker: {
        const Marker& m = tl.markers[h.sel.index];
        QString s = QStringLiteral("<b>%1</b> at %2")
                        .arg(QString::fromUtf8(eventKindName(m.kind).data()), rel(m.tsNs));
        if (m.kind == EventKind::ImplicitRelease)
            s += QStringLiteral("<br>pool size after release: %1").arg(qs(formatBytes(m.value)));
        else if (m.kind == EventKind::PoolTrimTo)
            s += QStringLiteral("<br>trim to keep at least %1").arg(qs(formatBytes(m.value)));
        else if (m.kind == EventKind::PoolSetAttribute || m.kind == EventKind::KnobChange) {
            const QString change = DetailsPane::attributeChange(tl, m); // names a reuse policy
            s += change.isEmpty()
                     ? QStringLiteral("<br>new value: %1").arg(qs(formatBytes(m.value)))
                     : QStringLiteral("<br>%1").arg(change.toHtmlEscaped());
        }
        if (const std::string v = describeMarkerValues(m.kind, m.attr, m.value); !v.empty())
            s += QStringLiteral("<br>%1").arg(qs(v).toHtmlEscaped());
        if (m.pool) s += QStringLiteral("<br>%1").arg(layout.poolName(m.pool));
        if (m.kind == EventKind::StreamSynchronize || m.kind == EventKind::PeerCopy)
            s += QStringLiteral("<br>%1").arg(layout.streamName(m.stream));
        return s;
    }
    case Selection::Failed: {
        const FailedAllocation& f = tl.failed[h.sel.index];
        return QStringLiteral("<b>failed allocation</b> of %1 at %2<br>CUresult %3 on %4")
            .arg(qs(formatBytes(f.size)), rel(f.tsNs))
            .arg(f.result)
            .arg(layout.streamName(f.stream));
    }
    case Selection::Pool:
    case Selection::Stream:
        if (h.lane >= 0) {
            const Lane& l = layout.lanes[size_t(h.lane)];
            return QStringLiteral("<b>%1</b><br>%2").arg(qs(l.title), qs(l.subtitle));
        }
        return {};
    default:
        return {};
    }
}

} // namespace poolscope::ui
