#pragma once
// Reserved/used watermarks per pool (QCustomPlot). Shares the timeline's time axis: its x range
// follows the timeline, and drags/zooms here are sent back as a requested range. Every refresh
// feeds only core's downsampled points for the visible range.

#include "TraceSnapshot.h"
#include "poolscope/analysis/RangeSplit.h"

#include <QSharedPointer>
#include <QWidget>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <memory>

class QCustomPlot;
class QCPGraph;
class QCPGraphData;
template <class T> class QCPDataContainer;
using QCPGraphDataContainer = QCPDataContainer<QCPGraphData>;
class QCPItemStraightLine;
class QCPItemText;
class QCPLayer;
class QAction;
class QLabel;
class QPainter;
class QRectF;

namespace poolscope::ui {

class TimeTicker;

class WatermarkPlot : public QWidget {
    Q_OBJECT
public:
    explicit WatermarkPlot(QWidget* parent = nullptr);

    void setSnapshot(const TraceSnapshot& s);
    void setViewRange(int64_t t0, int64_t t1);
    // Where the time axis' 0 is (the compare mode lines two runs up by it); INT64_MIN, the
    // default: the trace's first event. Kept across snapshots.
    void setTimeOrigin(int64_t t);
    int64_t origin() const;
    // The y axis reaches at least this many bytes (two runs compared on one scale); 0: the
    // visible data's maximum alone.
    void setYFloor(uint64_t bytes);
    uint64_t dataYMax() const { return dataYMax_; } // the visible data's maximum
    void setCursorTime(int64_t t);
    void setHighlightedPool(uint64_t pool); // 0: none
    // Bytes live in the allocations of a chosen call site (the Call sites view), drawn over the
    // pools' graphs; null removes it.
    void setHighlightedSeries(std::shared_ptr<const Series> s, const QString& label);
    QCPGraph* highlightGraph() const { return siteGraph_; }
    // The What-if panel's predicted reserved curve of one pool (issue #14), drawn over the
    // recorded one until replaced; null removes it. Kept across a live session's snapshots.
    void setPredictedSeries(uint64_t pool, std::shared_ptr<const Series> s, const QString& label);
    QCPGraph* predictedGraph() const { return predictedGraph_; }
    QString legendText() const; // the legend's entries, as plain text (tests)
    // Used bytes split by NVTX range (issue #13): a stacked area under one pool's used line,
    // a band per innermost range open on the allocating thread (analysis/RangeSplit.h). The
    // pool is the highlighted one, else the one with the highest used peak. The action is
    // checkable, in the plot's context menu (the window adds it to View too), and enabled for
    // traces with NVTX ranges; the split is computed when it is on, once per pool and trace.
    QAction* splitByRangeAction() const { return splitAction_; }
    void setSplitByRange(bool on);
    bool splitByRange() const { return splitOn_; }
    // The split drawn now (null when off, or for a trace without ranges), and its graphs, bottom
    // band first (bands that never hold a byte have none).
    const analysis::UsedSplit* split() const { return shownSplit_.get(); }
    std::vector<QCPGraph*> splitGraphs() const;
    // The hover text at a point of the plot: each band's bytes at that time, the band under the
    // point first; empty where there is none.
    QString splitToolTip(const QPoint& pos) const;
    // While a partial timeline is shown (progressive loading), the part not loaded yet is
    // drawn from the trace's per-chunk summaries (TraceSnapshot::overview, issue #15): per
    // pixel column the least and greatest reserved and used bytes, in the pools' colours. The
    // window's loading overlay calls paintOverview over its shading; false when there is
    // nothing to draw (a whole timeline, a trace without summaries).
    bool hasOverview() const;
    void paintOverview(QPainter& p, const QRectF& band) const;
    // Aligns the plot area with the timeline's lanes (label column left, scroll bar right).
    void setHorizontalMargins(int left, int right);
    QCustomPlot* plot() const { return plot_; }
    int graphPointCount() const; // points currently fed to QCustomPlot (tests, benchmark)

signals:
    void viewRangeRequested(qint64 t0, qint64 t1);
    void cursorRequested(qint64 t);

protected:
    void changeEvent(QEvent* e) override;

private:
    void rebuildGraphs();
    // No trace, or a trace with no pool memory: a sentence instead of axes of "0-5 B" / "0-5 ns".
    void setEmptyNote(const QString& text);
    void refreshData();
    void applyTheme();
    uint64_t splitPoolNow() const;
    void rebuildSplitGraphs();
    void feedSplit(int64_t a, int64_t b, size_t maxPts);

    QCustomPlot* plot_;
    QLabel* legend_ = nullptr;
    QSharedPointer<TimeTicker> ticker_;
    QPoint pressPos_;
    QCPItemStraightLine* cursorLine_ = nullptr;
    QCPItemText* emptyNote_ = nullptr;
    TraceSnapshot snap_;
    struct PoolGraphs {
        uint64_t pool = 0;
        QCPGraph* reserved = nullptr;
        QCPGraph* used = nullptr;
        QCPGraph* high = nullptr;
        QCPGraph* threshold = nullptr;
        QCPGraph* events = nullptr; // implicit releases (the timeline's orange)
        QCPGraph* trims = nullptr;  // trims (the timeline's purple)
    };
    std::vector<PoolGraphs> graphs_;
    // The points fed for a view, shared with the graphs (QCustomPlot keeps the pointer, no
    // copy). Views at one zoom level inside the trace's extent share a key, the whole-trace
    // view among them, so most fit-all frames reuse them.
    struct ViewKey {
        quint64 generation = 0;
        int64_t a = 0, b = 0, span = 0; // queried range [a, b), view span
        size_t maxPts = 0;
        bool operator==(const ViewKey&) const = default;
    };
    struct ViewData {
        ViewKey key;
        struct Pool {
            QSharedPointer<QCPGraphDataContainer> reserved, used, high, threshold, events, trims;
        };
        std::vector<Pool> pools; // parallel to graphs_
        uint64_t ymax = 1;
    };
    std::shared_ptr<ViewData> computeView(const ViewKey& key) const;
    std::vector<std::shared_ptr<ViewData>> views_; // most recent first
    quint64 generation_ = 0;
    int64_t v0_ = 0, v1_ = 1;
    int64_t origin_ = INT64_MIN;
    uint64_t yFloor_ = 0, dataYMax_ = 0;
    int64_t cursor_ = INT64_MIN;
    uint64_t highlighted_ = 0;
    std::shared_ptr<const Series> site_;
    QString siteLabel_;
    QCPGraph* siteGraph_ = nullptr;
    uint64_t predictedPool_ = 0;
    std::shared_ptr<const Series> predicted_;
    QString predictedLabel_;
    QCPGraph* predictedGraph_ = nullptr;
    void ensurePredictedGraph();
    QString legendBase_;
    QAction* splitAction_ = nullptr;
    bool splitOn_ = false;
    QCPLayer* splitLayer_ = nullptr;
    // Splits computed for this snapshot, by pool; the one shown and its graphs (by band, null
    // for a band never shown; drawn topmost band first, each filled down to 0 over the last).
    std::map<uint64_t, std::shared_ptr<const analysis::UsedSplit>> splits_;
    std::shared_ptr<const analysis::UsedSplit> shownSplit_;
    std::vector<QCPGraph*> bandGraphs_;
    QString splitLegend_;
    std::unordered_map<std::string, uint32_t> nvtxSlots_; // view::NvtxRows::nameOrder
    void updateLegend();
    bool applyingRange_ = false;
    int left_ = 200, right_ = 14;
};

} // namespace poolscope::ui
