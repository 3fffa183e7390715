#pragma once
// Paints the timeline and answers hit tests. Stateless between frames: built per paint from the
// snapshot and the geometry. Work per frame is bounded by pixels, not by events: every list is
// range-searched, and anything narrower than a pixel is merged with its neighbours.

#include "ColorScheme.h"
#include "Selection.h"
#include "TraceSnapshot.h"
#include "poolscope/view/NvtxRows.h"

#include <QHash>
#include <QFontMetrics>
#include <QImage>
#include <QPainter>
#include <QRect>
#include <QStaticText>
#include <array>
#include <cstdint>
#include <vector>

namespace poolscope::ui {

struct TimelineGeometry {
    // A stream lane's padding above and below its rows, and a collapsed stream lane's one row
    // (the geometry lays them out, the painter draws into them).
    static constexpr int kStreamPad = 3;
    static constexpr int kSummaryH = 12;
    int labelW = 250;
    int rulerH = 24;
    // The NVTX band between the ruler and the lanes (0 without ranges): nvtxRows rows of
    // nvtxRowH pixels.
    int nvtxH = 0;
    int nvtxRowH = 0;
    int nvtxRows = 0;
    int legendH = 20;
    int rightPad = 14; // the vertical scroll bar
    int width = 0;
    int height = 0;
    int64_t v0 = 0; // visible time range [v0, v1)
    int64_t v1 = 1;
    // Time 0 of the ruler and of times in tooltips, and what it is; INT64_MIN: the trace's first
    // event. Several traces on one axis (the window's lanes per process) share one origin.
    int64_t origin = INT64_MIN;
    QString originLabel;
    int64_t originOr(int64_t t0) const { return origin == INT64_MIN ? t0 : origin; }
    int scrollY = 0;
    // Pixel columns [clipX0, clipX1) that paintContent() paints (a pan paints only the strip
    // it exposes). Everything painted there depends only on the column's times, not on v0.
    int clipX0 = 0;
    int clipX1 = 1 << 30;
    std::vector<int> laneTop; // content coordinates
    std::vector<int> laneH;   // 0 for a lane hidden inside a collapsed group
    // Collapse state per lane (LaneState), and the lane each one is drawn as: itself, or the
    // collapsed group header that hides it (wait arrows end there).
    std::vector<uint8_t> laneState;
    std::vector<int> shownAs;
    int contentH = 0;

    int plotW() const { return std::max(1, width - labelW - rightPad); }
    int lanesTop() const { return rulerH + nvtxH; }
    int lanesBottom() const { return height - legendH; }
    double xOf(int64_t t) const {
        // t - v0 exactly where it fits; in double where a damaged trace's time (INT64_MIN) would
        // overflow it.
        int64_t d;
        const double dt = __builtin_sub_overflow(t, v0, &d) ? double(t) - double(v0) : double(d);
        return labelW + dt * plotW() / double(std::max<int64_t>(1, v1 - v0));
    }
    int64_t tOf(double x) const {
        return v0 + static_cast<int64_t>((x - labelW) * double(v1 - v0) / plotW());
    }
    int laneY(size_t i) const { return lanesTop() + laneTop[i] - scrollY; }
    // Sizes the NVTX band for this many rows (at most kMaxNvtxRows are drawn).
    void layoutNvtx(size_t rows);
    static constexpr int kMaxNvtxRows = 12;
    // Lane heights from the layout: fixed headers, stream lanes grow with their rows (capped).
    // collapsed: per lane, whether the user collapsed it (empty: none).
    // idleFrom (when set): streams that never allocate, free or fail in it (they only sync or
    // wait) take no lane; their markers and wait arrows go to their device's lane.
    void layoutLanes(const LaneLayout& layout, const std::vector<uint8_t>& collapsed = {},
                     const Timeline* idleFrom = nullptr);
    static int rowPitch(const Lane& l, int laneHeight);
    bool collapsed(size_t i) const { return i < laneState.size() && laneState[i] == kCollapsed; }
    bool hidden(size_t i) const { return i < laneState.size() && laneState[i] == kHidden; }
    enum LaneState : uint8_t { kExpanded = 0, kCollapsed = 1, kHidden = 2 };
    // The disclosure triangle's box in the label column (empty when the lane cannot collapse).
    QRect disclosureRect(const LaneLayout& layout, size_t i) const;
    static int labelIndent(const Lane& l); // where a lane's title starts
    static bool collapsible(const Lane& l);
};

struct PaintStats {
    uint64_t bars = 0;       // allocation rectangles drawn
    uint64_t mergedRuns = 0; // sub-pixel runs drawn as one rectangle
    uint64_t markers = 0;
    uint64_t edges = 0;
};

struct TimelineHit {
    Selection sel;
    int lane = -1;
    bool toggle = false; // on a lane's disclosure triangle (or a device header): collapse/expand
    int dropGap = -1;    // index into Timeline::dropGaps under the pointer: events lost there
    int64_t nvtxRange = -1; // index into StackTables::ranges under the pointer (the NVTX band)
    int deviceSync = -1; // index into Timeline::deviceSyncs under the pointer (a cudaFree)
    int64_t t = 0;       // the time under the pointer (charts: the value there)
};

class TimelinePainter {
public:
    TimelinePainter(const TraceSnapshot& s, const TimelineGeometry& g, const ColorScheme& c,
                    BarColoring coloring)
        : s_(s), g_(g), c_(c), coloring_(coloring) {}

    // The whole widget: paintContent() then paintOverlay().
    void paint(QPainter& p, const Selection& sel, int64_t cursor, int highlightedLane,
               const QRect& rubberBand);
    // The lanes' contents (backgrounds, grid, bars, pool charts, markers) in the columns
    // [g.clipX0, g.clipX1): what the widget caches in an image and shifts on a pan.
    void paintContent(QPainter& p);
    // What changes without the view moving: highlight, wait arrows, selection, cursor, rubber
    // band, lane labels, ruler and legend.
    // withText = false leaves out the lane labels and the legend (the widget caches those).
    void paintOverlay(QPainter& p, const Selection& sel, int64_t cursor, int highlightedLane,
                      const QRect& rubberBand, bool withText = true);
    void paintLabels(QPainter& p, int64_t cursor, int highlightedLane); // the label column
    void paintLegend(QPainter& p);                                      // the bottom strip
    // The legend strip's height at this width (its entries wrap rather than being cut).
    static int legendHeight(int width, const QFontMetrics& fm, BarColoring coloring,
                            bool drops = false, bool syncs = false);
    TimelineHit hitTest(QPoint pos) const;
    int focusLane = -1; // the lane with keyboard focus (outlined in the label column)
    // Allocations to mark (a call site chosen in the Call sites view), ascending indices into
    // Timeline::allocations; drawn in the overlay.
    const std::vector<uint32_t>* highlightedAllocations = nullptr;
    // The NVTX band's rows (built by the widget per snapshot); null: no band.
    const view::NvtxRows* nvtx = nullptr;
    void paintNvtx(QPainter& p);
    QHash<QString, QStaticText>* textCache = nullptr; // the ruler's labels, kept by the widget
    QString tooltip(const TimelineHit& h) const;
    PaintStats stats;
    // Area charts use the layout's block times from this many points per pixel column on
    // (fewer: the plain column-by-column scan is cheaper). Tests set 0 to compare the two.
    static inline size_t blockScanMinPoints = Series::kBlock;

private:
    void paintRuler(QPainter& p, int64_t cursor);
    void paintRows(QPainter& p, size_t lane, int mergedY = -1, int mergedH = 0);
    void paintSummary(QPainter& p, size_t lane); // a collapsed stream lane
    void paintPoolChart(QPainter& p, size_t lane);
    void paintOutsideChart(QPainter& p, size_t lane); // device memory outside the pools
    void paintHostChart(QPainter& p, size_t lane);    // pinned host memory
    void paintDeviceSyncs(QPainter& p, int x0, int x1); // cudaFree across the device's lanes
    void paintArea(QPainter& p, const Series& s, const std::vector<int64_t>& blockT, int top,
                   int bottom, double scale, QColor fill,
                   QColor line);
    void paintMarkers(QPainter& p, size_t lane);
    void paintEdges(QPainter& p);
    void paintSelection(QPainter& p, const Selection& sel);
    void paintHighlightedAllocations(QPainter& p);
    // Where an allocation's bar is drawn: its lane's rectangle row (y, height), following
    // collapsed and hidden lanes; false when it has no row.
    bool barRowOf(uint32_t index, int& y, int& h) const;
    int64_t endOf(const Allocation& a) const;
    const QImage& markerGlyph(int which); // 0 release, 1 trim, 2 attribute, 3 knob
    QColor barColor(const Allocation& a) const;

    const TraceSnapshot& s_;
    const TimelineGeometry& g_;
    const ColorScheme& c_;
    BarColoring coloring_;
    std::array<QImage, 4> glyphs_;
};

} // namespace poolscope::ui
