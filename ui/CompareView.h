#pragma once
// The window's compare mode (issue #16): two runs of a program, typically the same training step
// before and after a threshold change. Their pools' watermark plots one above the other on one
// time axis and one byte scale, lined up by start or by an NVTX range both recorded
// (interop::alignRuns: the first common range name unless the user picks another), and the
// table of what `poolscope diff` compares (interop::diffTraces, DiffTableModel). Selecting a
// pool in the table highlights it in both plots.

#include "MultiTraceLoader.h"
#include "poolscope/interop/Diff.h"

#include <QWidget>
#include <memory>
#include <optional>

class QCheckBox;
class QComboBox;
class QLabel;
class QSplitter;
class QTreeView;

namespace poolscope::ui {

class DiffTableModel;
class WatermarkPlot;

class CompareView : public QWidget {
    Q_OBJECT
public:
    explicit CompareView(QWidget* parent = nullptr);

    // Loads both in the background (A is the baseline: deltas are B - A); loaded() or
    // loadFailed() follows.
    void open(const QString& a, const QString& b);
    bool busy() const { return loader_->busy(); }
    void cancel() { loader_->cancel(); }
    // Both results must have loaded, with their reports (TraceLoadOptions::report).
    void setTraces(const TraceLoadResult& a, const TraceLoadResult& b);

    WatermarkPlot* plotA() const { return plotA_; }
    WatermarkPlot* plotB() const { return plotB_; }
    QTreeView* table() const { return table_; }
    DiffTableModel* model() const { return model_; }
    QComboBox* alignChoice() const { return align_; }
    QCheckBox* showUnchanged() const { return unchanged_; }
    const interop::RunAlignment& alignment() const { return alignment_; }
    const TraceSnapshot& snapshotA() const { return a_.snap; }
    const TraceSnapshot& snapshotB() const { return b_.snap; }
    QString headerText() const;
    // The shared axis' visible range, in time since each run's origin.
    std::pair<int64_t, int64_t> viewRange() const { return {x0_, x1_}; }
    void setViewRange(int64_t x0, int64_t x1);
    void fitAll();

signals:
    void loaded();
    void loadFailed(const QStringList& problems); // one line per file that could not be opened
    void closeRequested();

protected:
    void showEvent(QShowEvent* e) override;

private:
    void applyAlignment();
    void syncYScale();

    MultiTraceLoader* loader_;
    TraceLoadResult a_, b_;
    interop::RunAlignment alignment_;
    QLabel* header_;
    QLabel* alignNote_;
    QLabel* titleA_;
    QLabel* titleB_;
    QComboBox* align_;
    QCheckBox* unchanged_;
    WatermarkPlot* plotA_;
    WatermarkPlot* plotB_;
    QTreeView* table_;
    DiffTableModel* model_;
    QSplitter* splitter_;
    int64_t x0_ = 0, x1_ = 1;
    bool applying_ = false;
    bool sized_ = false;
};

} // namespace poolscope::ui
