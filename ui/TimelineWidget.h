#pragma once
// The per-stream timeline: one custom-painted widget (no object per event). Holds the view state
// (visible time range, vertical scroll, selection, replay cursor) and turns input into changes of
// that state; TimelinePainter does the drawing.

#include "ColorScheme.h"
#include "Selection.h"
#include "TimelinePainter.h"
#include "TraceSnapshot.h"

#include <QElapsedTimer>
#include <QImage>
#include <QSet>
#include <QWidget>
#include <cstdint>

class QScrollBar;

namespace poolscope::ui {

class TimelineWidget : public QWidget {
    Q_OBJECT
public:
    explicit TimelineWidget(QWidget* parent = nullptr);

    // keepView: a live refresh keeps the user's zoom; a new document fits all.
    void setSnapshot(const TraceSnapshot& s, bool keepView = false);
    // Streams that never allocate (PyTorch creates ~128 of them): hidden unless asked for.
    void setShowIdleStreams(bool show);
    bool showIdleStreams() const { return showIdleStreams_; }
    void clear();
    const TraceSnapshot& snapshot() const { return snap_; }

    int64_t viewStart() const { return geo_.v0; }
    int64_t viewEnd() const { return geo_.v1; }
    void setViewRange(int64_t t0, int64_t t1);
    void fitAll();
    // The span where the allocator was busy (view::allocatorActivity), with a margin: the first
    // view of a trace. The whole trace when that is most of it or there is no activity.
    void fitActivity();
    void zoomBy(double factor, int64_t anchor);
    void zoomToSelection(); // the selected allocation or marker, with some context
    void centerOn(int64_t t);
    void panBy(double fractionOfView);

    // Several traces on one time axis (MultiProcessView): the ruler counts from `origin` (in
    // this trace's clock) and says what that is; views are kept within [begin, end] instead of
    // the trace's own extent, so every process can show the same span. Kept across snapshots.
    void setTimeFrame(int64_t origin, int64_t begin, int64_t end, const QString& originLabel);
    void clearTimeFrame();

    void setCursorTime(int64_t t); // INT64_MIN: no cursor
    int64_t cursorTime() const { return cursor_; }
    void setSelection(const Selection& s); // does not emit selectionChanged
    const Selection& selection() const { return sel_; }
    void setHighlightedLane(int lane);
    int highlightedLane() const { return highlightedLane_; }
    // Allocations to mark (ascending indices; a call site's): null or empty for none.
    void setHighlightedAllocations(std::shared_ptr<const std::vector<uint32_t>> allocations);
    const std::vector<uint32_t>* highlightedAllocations() const { return highlightedAllocs_.get(); }
    void scrollToLane(int lane);
    void setBarColoring(BarColoring c);
    BarColoring barColoring() const { return coloring_; }

    // Collapsible lanes (device > pool > stream). A collapsed device or pool hides the lanes
    // under it (a pool keeps its reserved/used chart); a collapsed stream lane shows one
    // summary row. Remembered in QSettings by device ordinal and pool/stream handles.
    bool laneCollapsed(int lane) const;
    void setLaneCollapsed(int lane, bool collapsed);
    void toggleLane(int lane) { setLaneCollapsed(lane, !laneCollapsed(lane)); }
    void expandAll();
    int laneHeight(int lane) const; // 0 while hidden inside a collapsed group
    int laneTop(int lane) const;    // in widget coordinates
    int focusLane() const { return focusLane_; }
    void setFocusLane(int lane);

    // Where an allocation bar is drawn now (tests, and anchoring popups); empty if off screen.
    QRect allocationRect(uint32_t index) const;
    // While a partial timeline is shown, the pool charts' part not loaded yet drawn from the
    // trace's per-chunk summaries (TraceSnapshot::overview, issue #15): per pixel column the
    // least and greatest reserved and used bytes, on the chart's scale. The window's loading
    // overlay calls it over its shading (band: the shaded area, widget coordinates).
    bool hasOverview() const;
    void paintOverview(QPainter& p, const QRectF& band) const;
    int labelWidth() const { return geo_.labelW; }
    int lanesTop() const { return geo_.lanesTop(); } // below the ruler and the NVTX band
    int legendHeight() const { return geo_.legendH; }
    int contentHeight() const { return geo_.contentH + geo_.lanesTop() + geo_.legendH; }
    int nvtxBandHeight() const { return geo_.nvtxH; } // 0 without NVTX ranges
    const view::NvtxRows* nvtxRows() const { return nvtx_.get(); }
    int rightPad() const { return geo_.rightPad; }
    const PaintStats& lastPaintStats() const { return stats_; }
    qint64 lastPaintNs() const { return lastPaintNs_; }
    // How the last frame got the lanes' contents: repainted all, a shifted image plus a strip
    // of this many pixels, or the cached image as is (benchmark, tests).
    enum class ContentPaint { Full, Strip, Cached };
    ContentPaint lastContentPaint() const { return lastContent_; }
    int lastStripWidth() const { return lastStripW_; }
    QSize sizeHint() const override { return {1000, 420}; }

signals:
    void lanesCollapsedChanged();
    void lanesScrolled(); // the lanes moved vertically (their scroll bar)
    void viewRangeChanged(qint64 t0, qint64 t1);
    void selectionChanged(const poolscope::ui::Selection& s);
    void cursorRequested(qint64 t); // a click in the ruler

protected:
    void paintEvent(QPaintEvent*) override;
    void resizeEvent(QResizeEvent*) override;
    void wheelEvent(QWheelEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mouseReleaseEvent(QMouseEvent*) override;
    void mouseDoubleClickEvent(QMouseEvent*) override;
    void keyPressEvent(QKeyEvent*) override;
    bool event(QEvent*) override;
    void changeEvent(QEvent*) override;

private:
    void relayout();
    void updateScrollBar();
    QString laneKey(size_t lane) const;
    void saveCollapsed() const;
    void moveFocusLane(int delta);
    void clampView(int64_t& a, int64_t& b) const;

    // The extent views are kept in: the trace's own, or the frame's.
    std::pair<int64_t, int64_t> extent() const;
    bool framed_ = false;
    int64_t frameBegin_ = 0, frameEnd_ = 0;

    TraceSnapshot snap_;
    TimelineGeometry geo_;
    Selection sel_;
    int64_t cursor_ = INT64_MIN;
    int highlightedLane_ = -1;
    std::shared_ptr<const std::vector<uint32_t>> highlightedAllocs_;
    std::shared_ptr<const view::NvtxRows> nvtx_;
    BarColoring coloring_ = BarColoring::BySize;
    QScrollBar* vbar_ = nullptr;
    // The lanes' contents as last painted (TimelinePainter::paintContent), reused while only
    // the overlay changes (selection, cursor, highlight) and shifted on a pan by whole pixels,
    // painting just the exposed strip. Anything else in the key changing repaints it all.
    struct ContentKey {
        quint64 generation = 0; // snapshot, palette, font
        int width = 0, height = 0, scrollY = 0, labelW = 0;
        int64_t span = 0;
        BarColoring coloring = BarColoring::BySize;
        std::vector<uint8_t> laneState;
        bool operator==(const ContentKey&) const = default;
    };
    void shiftContent(int dx);
    // The label column and the legend change far less often than the view: cached too (text
    // layout was ~1/4 of a frame).
    struct LabelKey {
        quint64 generation = 0;
        int height = 0, scrollY = 0, labelW = 0;
        int64_t cursor = 0;
        int highlighted = -1, focus = -1;
        std::vector<uint8_t> laneState;
        bool operator==(const LabelKey&) const = default;
    };
    QImage labels_, legend_;
    QHash<QString, QStaticText> rulerText_; // cleared with the font
    LabelKey labelKey_;
    quint64 legendKey_ = ~0ull;
    QImage content_;
    ContentKey contentKey_;
    int64_t contentV0_ = 0;
    bool contentValid_ = false;
    quint64 generation_ = 0;
    bool showIdleStreams_ = false;
    QSet<QString> collapsedKeys_; // laneKey()s, all traces (QSettings "timeline/collapsedLanes")
    int focusLane_ = -1;

    enum class Drag { None, Pan, Band, Cursor };
    Drag drag_ = Drag::None;
    QPoint pressPos_;
    int64_t pressV0_ = 0, pressV1_ = 0;
    QRect band_;
    PaintStats stats_;
    qint64 lastPaintNs_ = 0;
    ContentPaint lastContent_ = ContentPaint::Full;
    int lastStripW_ = 0;
};

} // namespace poolscope::ui
