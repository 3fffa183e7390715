// The window's side of loading detail per visible range (issue #15, RangeLoader.h): a trace
// larger than the window holds shows the detail of the range the user zooms into, the min/max
// overview around it, and says in the status bar which range is loaded.
#include "DetailsPane.h"
#include "LoadingOverlay.h"
#include "MainWindow.h"
#include "RangeLoader.h"
#include "StretchExporter.h"
#include "TimelineWidget.h"
#include "WatermarkPlot.h"
#include "poolscope/Units.h"

#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QStatusBar>
#include <algorithm>
#include <cstdlib>
#include <qcustomplot.h>

namespace poolscope::ui {

namespace {
QString qs(const std::string& s) { return QString::fromStdString(s); }

// A selection in the timeline shown before, in the one that replaces it: allocations are found
// again by their alloc's seq, pools and streams by handle; the rest is let go.
Selection carried(const Selection& s, const Timeline& from, const Timeline& to) {
    if (s.kind == Selection::Pool || s.kind == Selection::Stream || s.kind == Selection::None)
        return s;
    if (s.kind != Selection::Allocation || s.index >= from.allocations.size()) return {};
    const Allocation& a = from.allocations[s.index];
    if (a.beforeLoaded) return {};
    auto it = std::lower_bound(to.allocations.begin(), to.allocations.end(), a.allocSeq,
                               [](const Allocation& x, uint64_t seq) { return x.allocSeq < seq; });
    if (it == to.allocations.end() || it->allocSeq != a.allocSeq || it->beforeLoaded) return {};
    return {Selection::Allocation, uint32_t(it - to.allocations.begin()), 0, {}};
}
} // namespace

void MainWindow::setupRangeLoading() {
    rangeLoader_ = new RangeLoader(this);
    // The part before a range timeline's loaded range, shaded like the part after it.
    timelineOverlay_->setLeadingBand([this]() -> std::optional<QRectF> {
        if (!snap_.valid() || !snap_.timeline->isRange()) return std::nullopt;
        const int left = timeline_->labelWidth(), right = timeline_->width() - timeline_->rightPad();
        const int64_t v0 = timeline_->viewStart(), v1 = timeline_->viewEnd();
        const double x = left + double(snap_.timeline->loadedFromNs - v0) *
                                    std::max(1, right - left) /
                                    double(std::max<int64_t>(1, v1 - v0));
        const double x1 = std::min<double>(x, right);
        if (x1 <= left) return std::nullopt;
        const int bottom = timeline_->height() - timeline_->legendHeight();
        return QRectF(left, 0, x1 - left, std::max(0, bottom));
    });
    QCustomPlot* cp = plot_->plot();
    plotOverlay_->setLeadingBand([this, cp]() -> std::optional<QRectF> {
        if (!snap_.valid() || !snap_.timeline->isRange()) return std::nullopt;
        const QRect area = cp->axisRect()->rect();
        const double x =
            cp->xAxis->coordToPixel(double(snap_.timeline->loadedFromNs - snap_.timeline->t0));
        const double x1 = std::min<double>(x, area.right());
        if (x1 <= area.left()) return std::nullopt;
        return QRectF(area.left(), area.top(), x1 - area.left(), area.height());
    });
    connect(timeline_, &TimelineWidget::viewRangeChanged, this,
            [this](qint64 a, qint64 b) { rangeLoader_->viewChanged(snap_, a, b); });
    connect(rangeLoader_, &RangeLoader::loaded, this, &MainWindow::onRangeLoaded);
    connect(rangeLoader_, &RangeLoader::loading, this, [this](qint64 a, qint64 b) {
        if (!snap_.valid()) return;
        const int64_t t0 = snap_.timeline->t0;
        showStatus(tr("Loading the detail of %1 – %2…")
                       .arg(qs(formatDuration(nsBetween(t0, a))), qs(formatDuration(nsBetween(t0, b)))));
    });
    connect(rangeLoader_, &RangeLoader::tooLarge, this,
            [this](qint64 a, qint64 b, quint64 events, quint64 limit) {
                if (!snap_.valid()) return;
                const int64_t t0 = snap_.timeline->t0;
                showStatus(tr("%1 – %2 holds %3 events, more than the window holds (%4): zoom in "
                              "to load its detail. Shown: the min/max overview.")
                               .arg(qs(formatDuration(nsBetween(t0, a))),
                                    qs(formatDuration(nsBetween(t0, b))), qs(formatCount(events)),
                                    qs(formatCount(limit))));
            });
    connect(rangeLoader_, &RangeLoader::failed, this, [this](const QString& message) {
        showStatus(tr("Could not load the detail of this range: %1").arg(message));
    });
    stretchExporter_ = new StretchExporter(this);
    auto ended = [this] { exportStretch_->setText(tr("&Export Visible Stretch to Perfetto…")); };
    connect(stretchExporter_, &StretchExporter::progress, this, [this](int p) {
        showStatus(tr("%1 reading the trace for the names: %2 % (File > Cancel the Stretch Export stops it)")
                       .arg(exportingWhat_)
                       .arg(p));
    });
    connect(stretchExporter_, &StretchExporter::finished, this, [this, ended](const QString& m) {
        ended();
        showStatus(m);
    });
    connect(stretchExporter_, &StretchExporter::cancelled, this, [this, ended] {
        ended();
        showStatus(tr("The export was cancelled; nothing was written."));
    });
    connect(stretchExporter_, &StretchExporter::failed, this, [this, ended](const QString& message) {
        ended();
        showStatus(tr("The export failed: %1").arg(message));
        if (qEnvironmentVariableIsEmpty("POOLSCOPE_EXPORT_TO"))
            QMessageBox::warning(this, tr("Export Visible Stretch"), message);
    });
}

void MainWindow::exportVisibleStretch() {
    if (!snap_.valid() || snap_.path.isEmpty()) {
        showStatus(tr("Open a trace file to export a stretch of it (a live session has none yet)."));
        return;
    }
    if (stretchExporter_->busy()) { // the action reads "Cancel the Stretch Export" meanwhile
        stretchExporter_->cancel();
        return;
    }
    const Timeline& tl = *snap_.timeline;
    const int64_t v0 = std::max(timeline_->viewStart(), tl.t0), v1 = std::min(timeline_->viewEnd(), tl.t1);
    QString out = qEnvironmentVariable("POOLSCOPE_EXPORT_TO");
    if (out.isEmpty()) {
        const QFileInfo trace(snap_.path);
        const QString name = QStringLiteral("%1-%2s-%3s.json")
                                 .arg(trace.completeBaseName())
                                 .arg(double(nsBetween(tl.t0, v0)) / 1e9, 0, 'f', 3)
                                 .arg(double(nsBetween(tl.t0, v1)) / 1e9, 0, 'f', 3);
        out = QFileDialog::getSaveFileName(this, tr("Export the Visible Stretch to Perfetto"),
                                           trace.dir().filePath(name), tr("Perfetto JSON (*.json)"));
        if (out.isEmpty()) return;
    }
    exportingWhat_ = tr("Exporting %1 – %2:").arg(qs(formatDuration(nsBetween(tl.t0, v0))),
                                                  qs(formatDuration(nsBetween(tl.t0, v1))));
    showStatus(exportingWhat_ + tr(" reading the trace for the names…"));
    if (stretchExporter_->start(snap_, v0, v1, out))
        exportStretch_->setText(tr("&Cancel the Stretch Export"));
}

void MainWindow::onRangeLoaded(const TraceSnapshot& loaded) {
    if (!snap_.valid() || loaded.path != snap_.path || !loaded.valid()) return;
    const Selection sel = carried(timeline_->selection(), *snap_.timeline, *loaded.timeline);
    TraceSnapshot s = loaded;
    s.bundledSample = snap_.bundledSample;
    timeline_->setSelection({}); // indices of the timeline being replaced
    setSnapshot(s, true);
    if (sel.kind != Selection::None) onSelection(sel, nullptr);
    else details_->showSelection({});
    const Timeline& tl = *s.timeline;
    uint64_t unaccounted = 0;
    for (const PoolTimeline& p : tl.pools) unaccounted += p.unaccountedAtLoadStart;
    // Short enough for the status bar beside the counts (nothing cut off at 1400 px).
    QString text = tr("Detail: %1 – %2 (%3 events); min/max overview outside.")
                       .arg(qs(formatDuration(nsBetween(tl.t0, tl.loadedFromNs))),
                            qs(formatDuration(nsBetween(tl.t0, tl.loadedUntilNs))),
                            qs(formatCount(tl.eventCount)));
    if (tl.isRange() && unaccounted)
        text += tr(" %1 in use from earlier blocks (no bars).").arg(qs(formatBytes(unaccounted)));
    showStatus(text);
    emit rangeShown();
}

void MainWindow::applyRequestedView() {
    // "FROM:TO" in seconds from the trace's start: a screenshot or a test opens zoomed in.
    const QByteArray v = qgetenv("POOLSCOPE_VIEW_RANGE");
    if (v.isEmpty() || !snap_.valid()) return;
    const QList<QByteArray> parts = v.split(':');
    bool ok0 = false, ok1 = false;
    const double a = parts.size() == 2 ? parts[0].toDouble(&ok0) : 0;
    const double b = parts.size() == 2 ? parts[1].toDouble(&ok1) : 0;
    if (!ok0 || !ok1 || b <= a) return;
    const int64_t t0 = snap_.timeline->t0;
    timeline_->setViewRange(t0 + int64_t(a * 1e9), t0 + int64_t(b * 1e9));
}

} // namespace poolscope::ui
