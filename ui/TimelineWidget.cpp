#include "TimelineWidget.h"

#include "ColorScheme.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollBar>
#include <QSettings>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <cstring>

namespace poolscope::ui {

namespace {
constexpr int64_t kMinSpanNs = 50;
// The view's times are kept within +-2^61 ns (73 years), so that its spans, margins and centres
// cannot overflow int64_t: a damaged trace can date an event at INT64_MIN (UBSan under the
// debug preset, hostile.window).
constexpr int64_t kTimeLimit = int64_t{1} << 61;
int64_t clampTime(int64_t t) { return std::clamp(t, -kTimeLimit, kTimeLimit); }
const char* kCollapsedKey = "timeline/collapsedLanes";
} // namespace

TimelineWidget::TimelineWidget(QWidget* parent) : QWidget(parent) {
    setFocusPolicy(Qt::StrongFocus);
    setMouseTracking(true);
    setAttribute(Qt::WA_OpaquePaintEvent);
    setMinimumHeight(160);
    vbar_ = new QScrollBar(Qt::Vertical, this);
    vbar_->hide();
    connect(vbar_, &QScrollBar::valueChanged, this, [this](int v) {
        geo_.scrollY = v;
        update();
        emit lanesScrolled();
    });
    const QStringList keys = QSettings().value(kCollapsedKey).toStringList();
    collapsedKeys_ = QSet<QString>(keys.begin(), keys.end());
}

QString TimelineWidget::laneKey(size_t i) const {
    const Lane& l = snap_.layout->lanes[i];
    switch (l.kind) {
    case LaneKind::Device:
        return QStringLiteral("d%1").arg(l.device);
    case LaneKind::Pool:
        return QStringLiteral("p%1/%2").arg(l.device).arg(l.pool, 0, 16);
    case LaneKind::Stream:
        return QStringLiteral("s%1/%2").arg(l.pool, 0, 16).arg(l.stream, 0, 16);
    case LaneKind::Outside:
        return QStringLiteral("o%1").arg(l.device);
    case LaneKind::Host:
        return QStringLiteral("h");
    }
    return {};
}

bool TimelineWidget::laneCollapsed(int lane) const {
    return snap_.valid() && lane >= 0 && geo_.collapsed(size_t(lane));
}

void TimelineWidget::setLaneCollapsed(int lane, bool c) {
    if (!snap_.valid() || lane < 0 || size_t(lane) >= snap_.layout->lanes.size()) return;
    if (!TimelineGeometry::collapsible(snap_.layout->lanes[size_t(lane)])) return;
    if (geo_.hidden(size_t(lane))) return; // expand its group first
    const QString k = laneKey(size_t(lane));
    if (c == collapsedKeys_.contains(k)) return;
    if (c)
        collapsedKeys_.insert(k);
    else
        collapsedKeys_.remove(k);
    saveCollapsed();
    relayout();
    update();
    emit lanesCollapsedChanged();
}

void TimelineWidget::expandAll() {
    if (!snap_.valid()) return;
    bool any = false;
    for (size_t i = 0; i < snap_.layout->lanes.size(); ++i)
        any |= collapsedKeys_.remove(laneKey(i));
    if (!any) return;
    saveCollapsed();
    relayout();
    update();
    emit lanesCollapsedChanged();
}

void TimelineWidget::saveCollapsed() const {
    QStringList keys(collapsedKeys_.begin(), collapsedKeys_.end());
    keys.sort();
    QSettings().setValue(kCollapsedKey, keys);
}

int TimelineWidget::laneHeight(int lane) const {
    return lane >= 0 && size_t(lane) < geo_.laneH.size() ? geo_.laneH[size_t(lane)] : 0;
}

int TimelineWidget::laneTop(int lane) const {
    return lane >= 0 && size_t(lane) < geo_.laneTop.size() ? geo_.laneY(size_t(lane)) : 0;
}

void TimelineWidget::setFocusLane(int lane) {
    if (!snap_.valid() || lane >= int(snap_.layout->lanes.size())) lane = -1;
    focusLane_ = lane;
    if (lane >= 0) scrollToLane(lane);
    update();
}

void TimelineWidget::moveFocusLane(int delta) {
    if (!snap_.valid() || snap_.layout->lanes.empty()) return;
    const int n = int(snap_.layout->lanes.size());
    int i = focusLane_ < 0 ? (delta > 0 ? -1 : n) : focusLane_;
    do {
        i += delta;
    } while (i >= 0 && i < n && geo_.laneH[size_t(i)] <= 0);
    if (i >= 0 && i < n) setFocusLane(i);
}

void TimelineWidget::setSnapshot(const TraceSnapshot& s, bool keepView) {
    const int64_t a = geo_.v0, b = geo_.v1;
    snap_ = s;
    ++generation_;
    if (!keepView) {
        sel_ = {};
        highlightedLane_ = -1;
        highlightedAllocs_.reset();
        cursor_ = INT64_MIN;
    }
    if (!keepView) focusLane_ = -1;
    nvtx_.reset();
    if (snap_.valid() && snap_.stacks && !snap_.stacks->ranges.empty())
        nvtx_ = std::make_shared<const view::NvtxRows>(
            view::NvtxRows::build(*snap_.stacks, snap_.timeline->t1));
    relayout();
    if (keepView && snap_.valid())
        setViewRange(a, b);
    else
        fitActivity();
    update();
}

void TimelineWidget::setShowIdleStreams(bool show) {
    if (show == showIdleStreams_) return;
    showIdleStreams_ = show;
    relayout();
    update();
}

void TimelineWidget::clear() {
    snap_ = {};
    ++generation_;
    sel_ = {};
    cursor_ = INT64_MIN;
    relayout();
    update();
}

void TimelineWidget::relayout() {
    geo_.width = width();
    geo_.height = height();
    geo_.legendH = TimelinePainter::legendHeight(
        width(), fontMetrics(), coloring_, snap_.timeline && !snap_.timeline->dropGaps.empty(),
        snap_.timeline && !snap_.timeline->deviceSyncs.empty());
    geo_.layoutNvtx(nvtx_ ? nvtx_->rows.size() : 0);
    if (snap_.valid()) {
        std::vector<uint8_t> want(snap_.layout->lanes.size(), 0);
        for (size_t i = 0; i < want.size(); ++i)
            want[i] = collapsedKeys_.contains(laneKey(i));
        geo_.layoutLanes(*snap_.layout, want, showIdleStreams_ ? nullptr : snap_.timeline.get());
        if (focusLane_ >= int(want.size())) focusLane_ = -1;
    } else {
        geo_.laneTop.clear();
        geo_.laneH.clear();
        geo_.laneState.clear();
        geo_.shownAs.clear();
        geo_.contentH = 0;
    }
    updateScrollBar();
}

void TimelineWidget::updateScrollBar() {
    const int visible = geo_.lanesBottom() - geo_.lanesTop();
    const int maxScroll = std::max(0, geo_.contentH - visible);
    vbar_->setGeometry(width() - geo_.rightPad, geo_.lanesTop(), geo_.rightPad,
                       std::max(0, visible));
    vbar_->setRange(0, maxScroll);
    vbar_->setPageStep(std::max(1, visible));
    vbar_->setSingleStep(20);
    vbar_->setVisible(maxScroll > 0);
    geo_.scrollY = std::min(geo_.scrollY, maxScroll);
}

std::pair<int64_t, int64_t> TimelineWidget::extent() const {
    const int64_t t0 = clampTime(framed_ ? frameBegin_ : snap_.timeline->t0);
    const int64_t t1 = clampTime(framed_ ? frameEnd_ : snap_.timeline->t1);
    return {t0, std::max(t1, t0 + kMinSpanNs)};
}

void TimelineWidget::setTimeFrame(int64_t origin, int64_t begin, int64_t end,
                                  const QString& label) {
    framed_ = true;
    frameBegin_ = std::min(begin, end);
    frameEnd_ = std::max(begin, end);
    geo_.origin = origin;
    geo_.originLabel = label;
    update();
}

void TimelineWidget::clearTimeFrame() {
    framed_ = false;
    geo_.origin = INT64_MIN;
    geo_.originLabel.clear();
    update();
}

void TimelineWidget::clampView(int64_t& a, int64_t& b) const {
    if (!snap_.valid()) return;
    const auto [t0, t1] = extent();
    const int64_t margin = (t1 - t0) / 20;
    const int64_t maxSpan = (t1 - t0) + 2 * margin;
    int64_t span = std::clamp<int64_t>(b - a, kMinSpanNs, maxSpan);
    if (b - a != span) {
        const int64_t mid = a + (b - a) / 2;
        a = mid - span / 2;
    }
    a = std::clamp(a, t0 - margin, t1 + margin - span);
    b = a + span;
}

void TimelineWidget::setViewRange(int64_t t0, int64_t t1) {
    if (t1 < t0) std::swap(t0, t1);
    t0 = clampTime(t0);
    t1 = clampTime(t1);
    clampView(t0, t1);
    const int64_t span = t1 - t0;
    if (span == geo_.v1 - geo_.v0 && contentValid_ && geo_.plotW() > 1) {
        // A pan: snap it to a whole number of pixels (less than a pixel's worth of time) so
        // the next frame shifts the cached lanes image instead of repainting it.
        const double nsPerPx = double(span) / geo_.plotW();
        t0 = geo_.v0 + std::llround(std::round(double(t0 - geo_.v0) / nsPerPx) * nsPerPx);
        t1 = t0 + span;
    }
    if (t0 == geo_.v0 && t1 == geo_.v1) return;
    geo_.v0 = t0;
    geo_.v1 = t1;
    update();
    emit viewRangeChanged(t0, t1);
}

void TimelineWidget::fitAll() {
    if (!snap_.valid()) return;
    const auto [t0, t1] = extent();
    const int64_t m = (t1 - t0) / 100;
    setViewRange(t0 - m, t1 + m);
}

void TimelineWidget::fitActivity() {
    if (!snap_.valid()) return;
    const Timeline& tl = *snap_.timeline;
    const view::TimeSpan act = view::allocatorActivity(tl);
    const int64_t whole = std::max<int64_t>(1, clampTime(tl.t1) - clampTime(tl.t0));
    const int64_t begin = clampTime(act.begin), end = clampTime(act.end);
    if (act.empty() || end - begin > whole / 10 * 8 + whole % 10 * 8 / 10) { // whole * 8 / 10
        fitAll();
        return;
    }
    const int64_t m = std::max<int64_t>((end - begin) / 30, kMinSpanNs / 2);
    setViewRange(begin - m, end + m); // clampView keeps it inside the trace
}

void TimelineWidget::zoomBy(double factor, int64_t anchor) {
    const double a = double(geo_.v0), b = double(geo_.v1), x = double(anchor);
    setViewRange(static_cast<int64_t>(x - (x - a) / factor),
                 static_cast<int64_t>(x + (b - x) / factor));
}

void TimelineWidget::panBy(double f) {
    const int64_t d = static_cast<int64_t>(double(geo_.v1 - geo_.v0) * f);
    setViewRange(geo_.v0 + d, geo_.v1 + d);
}

void TimelineWidget::centerOn(int64_t t) {
    const int64_t half = (geo_.v1 - geo_.v0) / 2;
    setViewRange(t - half, t + half);
}

void TimelineWidget::zoomToSelection() {
    if (!snap_.valid()) return;
    const Timeline& tl = *snap_.timeline;
    int64_t a = 0, b = 0;
    if (sel_.kind == Selection::Allocation && sel_.index < tl.allocations.size()) {
        const Allocation& al = tl.allocations[sel_.index];
        a = al.allocTsNs;
        b = al.live() ? tl.t1 : al.freeTsNs;
    } else if (sel_.kind == Selection::Marker && sel_.index < tl.markers.size()) {
        a = b = tl.markers[sel_.index].tsNs;
    } else if (sel_.kind == Selection::Failed && sel_.index < tl.failed.size()) {
        a = b = tl.failed[sel_.index].tsNs;
    } else if (sel_.kind == Selection::Event) {
        a = b = sel_.event.tsNs;
    } else {
        return;
    }
    const int64_t span = std::max<int64_t>(b - a, 2000);
    setViewRange(a - span / 2, b + span / 2);
}

void TimelineWidget::setCursorTime(int64_t t) {
    if (t == cursor_) return;
    cursor_ = t;
    update();
}

void TimelineWidget::setSelection(const Selection& s) {
    sel_ = s;
    update();
}

void TimelineWidget::setHighlightedAllocations(
    std::shared_ptr<const std::vector<uint32_t>> allocations) {
    highlightedAllocs_ = std::move(allocations);
    update();
}

void TimelineWidget::setHighlightedLane(int lane) {
    highlightedLane_ = lane;
    update();
}

void TimelineWidget::scrollToLane(int lane) {
    if (lane < 0 || size_t(lane) >= geo_.laneTop.size()) return;
    const int visible = geo_.lanesBottom() - geo_.lanesTop();
    const int top = geo_.laneTop[size_t(lane)], h = geo_.laneH[size_t(lane)];
    if (top < geo_.scrollY)
        vbar_->setValue(top);
    else if (top + h > geo_.scrollY + visible)
        vbar_->setValue(top + h - visible);
}

void TimelineWidget::setBarColoring(BarColoring c) {
    coloring_ = c;
    relayout(); // the legend's height depends on its texts
    update();
}

QRect TimelineWidget::allocationRect(uint32_t index) const {
    if (!snap_.valid() || index >= snap_.timeline->allocations.size()) return {};
    const int row = snap_.layout->rowOfAlloc[index];
    if (row < 0) return {};
    const size_t lane = size_t(snap_.layout->laneOfRow[size_t(row)]);
    const Lane& l = snap_.layout->lanes[lane];
    if (geo_.hidden(lane)) return {};
    int pitch = TimelineGeometry::rowPitch(l, geo_.laneH[lane]);
    int y = geo_.laneY(lane) + 3 + (row - l.firstRow) * pitch;
    if (geo_.collapsed(lane)) {
        pitch = geo_.laneH[lane] - 6; // the summary row
        y = geo_.laneY(lane) + 3;
    }
    const Allocation& a = snap_.timeline->allocations[index];
    const int64_t end = a.live() ? std::max(snap_.timeline->t1, a.allocTsNs) : a.freeTsNs;
    const double x0 = std::max<double>(geo_.labelW, geo_.xOf(a.allocTsNs));
    const double x1 = std::min<double>(geo_.width - geo_.rightPad, geo_.xOf(end));
    if (x1 < x0 || y + pitch < geo_.lanesTop() || y > geo_.lanesBottom()) return {};
    return QRect(int(x0), y, std::max(1, int(x1 - x0)), std::max(1, pitch - 1));
}

void TimelineWidget::paintEvent(QPaintEvent*) {
    QElapsedTimer timer;
    timer.start();
    ColorScheme colors(palette());
    if (!snap_.valid()) {
        QPainter p(this);
        p.fillRect(rect(), colors.background());
        p.setPen(colors.dimText());
        p.drawText(rect().adjusted(20, 20, -20, -20), Qt::AlignCenter | Qt::TextWordWrap,
                   tr("No trace open.\n\nOpen a .poolscope trace with File > Open, or drop one "
                      "here.\nRecord one with:  poolscope record -- ./your_cuda_program"));
        return;
    }
    geo_.width = width();
    geo_.height = height();
    TimelinePainter painter(snap_, geo_, colors, coloring_);
    painter.focusLane = hasFocus() ? focusLane_ : -1;
    painter.highlightedAllocations = highlightedAllocs_.get();
    painter.nvtx = nvtx_.get();
    painter.textCache = &rulerText_;

    const qreal dpr = devicePixelRatioF();
    const QSize px = (QSizeF(size()) * dpr).toSize();
    ContentKey key{generation_, width(),           height(),  geo_.scrollY,
                   geo_.labelW, geo_.v1 - geo_.v0, coloring_, geo_.laneState};
    bool full = !contentValid_ || !(key == contentKey_) || content_.size() != px;
    int x0 = geo_.labelW, x1 = width();
    if (!full) {
        x0 = x1 = 0; // same view: the image as is
        if (geo_.v0 != contentV0_) {
            // A pan: shift by whole pixels (setViewRange snaps pans to them, to within 1 ns of
            // time, < 0.01 px unless zoomed to a few hundred ns) and paint the strip.
            const double dx = double(contentV0_ - geo_.v0) * geo_.plotW() / double(key.span);
            const double r = std::round(dx);
            const int maxShift = (width() - geo_.labelW) * 3 / 4;
            if (dpr == 1.0 && std::abs(dx - r) < 0.01 && std::abs(r) < maxShift && r != 0) {
                shiftContent(int(r));
                x0 = r > 0 ? geo_.labelW : width() + int(r);
                x1 = r > 0 ? geo_.labelW + int(r) : width();
            } else {
                full = true;
                x0 = geo_.labelW;
                x1 = width();
            }
        }
    }
    if (full) {
        content_ = QImage(px, QImage::Format_RGB32);
        content_.setDevicePixelRatio(dpr);
    }
    if (x1 > x0) {
        QPainter cp(&content_);
        geo_.clipX0 = x0;
        geo_.clipX1 = x1;
        painter.paintContent(cp);
        geo_.clipX0 = 0;
        geo_.clipX1 = 1 << 30;
    }
    lastContent_ = full ? ContentPaint::Full : x1 > x0 ? ContentPaint::Strip : ContentPaint::Cached;
    lastStripW_ = x1 - x0;
    contentKey_ = std::move(key);
    contentV0_ = geo_.v0;
    contentValid_ = true;

    QPainter p(this);
    const QRect lanes(geo_.labelW, geo_.lanesTop(), width() - geo_.labelW,
                      geo_.lanesBottom() - geo_.lanesTop());
    p.drawImage(lanes, content_,
                QRectF(QPointF(lanes.topLeft()) * dpr, QSizeF(lanes.size()) * dpr));
    painter.paintOverlay(p, sel_, cursor_, highlightedLane_, band_, /*withText=*/false);

    LabelKey lk{generation_, height(),         geo_.scrollY,      geo_.labelW,
                cursor_,     highlightedLane_, painter.focusLane, geo_.laneState};
    const QSize labelPx = (QSizeF(geo_.labelW, height()) * dpr).toSize();
    if (!(lk == labelKey_) || labels_.size() != labelPx) {
        labels_ = QImage(labelPx, QImage::Format_RGB32);
        labels_.setDevicePixelRatio(dpr);
        labels_.fill(colors.headerBg());
        QPainter lp(&labels_);
        lp.setFont(font());
        painter.paintLabels(lp, cursor_, highlightedLane_);
        labelKey_ = std::move(lk);
    }
    const QRect labelRect(0, geo_.lanesTop(), geo_.labelW, geo_.lanesBottom() - geo_.lanesTop());
    p.drawImage(labelRect, labels_,
                QRectF(QPointF(labelRect.topLeft()) * dpr, QSizeF(labelRect.size()) * dpr));

    // Legend: same for every frame of one width, colouring and palette.
    const quint64 legendKey = (generation_ << 24) ^ (quint64(width()) << 2) ^ quint64(coloring_);
    const QSize legendPx = (QSizeF(width(), geo_.legendH) * dpr).toSize();
    if (legendKey != legendKey_ || legend_.size() != legendPx) {
        legend_ = QImage(legendPx, QImage::Format_RGB32);
        legend_.setDevicePixelRatio(dpr);
        QPainter gp(&legend_);
        gp.setFont(font());
        gp.translate(0, -geo_.lanesBottom());
        painter.paintLegend(gp);
        legendKey_ = legendKey;
    }
    p.drawImage(QPoint(0, geo_.lanesBottom()), legend_);
    stats_ = painter.stats;
    lastPaintNs_ = timer.nsecsElapsed();
}

void TimelineWidget::shiftContent(int dx) {
    // In place, one scan line at a time: only the lanes' band [labelW, width) moves.
    const int top = std::max(0, geo_.lanesTop()),
              bottom = std::min(content_.height(), geo_.lanesBottom());
    const int x0 = geo_.labelW, w = content_.width() - x0, n = w - std::abs(dx);
    if (n <= 0) return;
    for (int y = top; y < bottom; ++y) {
        auto* line = reinterpret_cast<uint32_t*>(content_.scanLine(y)) + x0;
        if (dx > 0)
            std::memmove(line + dx, line, size_t(n) * 4);
        else
            std::memmove(line, line - dx, size_t(n) * 4);
    }
}

void TimelineWidget::resizeEvent(QResizeEvent*) {
    relayout();
}

void TimelineWidget::wheelEvent(QWheelEvent* e) {
    if (!snap_.valid()) return;
    const QPoint d = e->angleDelta();
    if (e->modifiers() & Qt::ShiftModifier) {
        vbar_->setValue(vbar_->value() - d.y() / 2);
    } else if (std::abs(d.x()) > std::abs(d.y())) {
        panBy(-d.x() / 1200.0);
    } else if (d.y() != 0) {
        const double factor = std::pow(1.2, d.y() / 120.0);
        const double x = std::max<double>(geo_.labelW, e->position().x());
        zoomBy(factor, geo_.tOf(x));
    }
    e->accept();
}

void TimelineWidget::mousePressEvent(QMouseEvent* e) {
    setFocus();
    pressPos_ = e->pos();
    pressV0_ = geo_.v0;
    pressV1_ = geo_.v1;
    if (!snap_.valid()) return;
    if (e->pos().y() < geo_.rulerH && e->pos().x() >= geo_.labelW) {
        drag_ = Drag::Cursor;
        emit cursorRequested(geo_.tOf(e->pos().x()));
        return;
    }
    const bool band = e->button() == Qt::RightButton ||
                      (e->button() == Qt::LeftButton && (e->modifiers() & Qt::ShiftModifier));
    drag_ = band ? Drag::Band : e->button() == Qt::LeftButton ? Drag::Pan : Drag::None;
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* e) {
    switch (drag_) {
    case Drag::Pan: {
        const double dx = e->pos().x() - pressPos_.x();
        const int64_t dt = static_cast<int64_t>(dx * double(pressV1_ - pressV0_) / geo_.plotW());
        setViewRange(pressV0_ - dt, pressV1_ - dt);
        const int dy = e->pos().y() - pressPos_.y();
        if (std::abs(dy) > 4) {
            vbar_->setValue(vbar_->value() - dy);
            pressPos_.setY(e->pos().y());
        }
        break;
    }
    case Drag::Band: {
        const int x0 = std::max(geo_.labelW, std::min(pressPos_.x(), e->pos().x()));
        const int x1 = std::max(pressPos_.x(), e->pos().x());
        band_ = QRect(x0, geo_.lanesTop(), x1 - x0, geo_.lanesBottom() - geo_.lanesTop());
        update();
        break;
    }
    case Drag::Cursor:
        emit cursorRequested(geo_.tOf(std::max(e->pos().x(), geo_.labelW)));
        break;
    case Drag::None:
        break;
    }
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent* e) {
    const Drag d = drag_;
    drag_ = Drag::None;
    if (!snap_.valid()) return;
    const bool click = (e->pos() - pressPos_).manhattanLength() < 4;
    if (d == Drag::Band) {
        const QRect b = band_;
        band_ = {};
        if (b.width() > 4) setViewRange(geo_.tOf(b.left()), geo_.tOf(b.right()));
        update();
        return;
    }
    if (d == Drag::Pan && click && e->button() == Qt::LeftButton) {
        TimelinePainter painter(snap_, geo_, ColorScheme(palette()), coloring_);
        painter.nvtx = nvtx_.get();
        const TimelineHit hit = painter.hitTest(e->pos());
        if (hit.toggle) {
            focusLane_ = hit.lane;
            toggleLane(hit.lane);
            return;
        }
        if (!(hit.sel == sel_)) {
            sel_ = hit.sel;
            update();
            emit selectionChanged(sel_);
        }
    }
}

void TimelineWidget::mouseDoubleClickEvent(QMouseEvent* e) {
    if (!snap_.valid() || e->button() != Qt::LeftButton) return;
    TimelinePainter painter(snap_, geo_, ColorScheme(palette()), coloring_);
        painter.nvtx = nvtx_.get();
    const TimelineHit hit = painter.hitTest(e->pos());
    if (e->pos().x() < geo_.labelW && hit.lane >= 0) {
        // Double-click a lane's title: collapse or expand it (a device header toggles on the
        // first click already).
        if (!hit.toggle) toggleLane(hit.lane);
        return;
    }
    if (hit.sel.kind == Selection::None)
        fitAll();
    else {
        sel_ = hit.sel;
        emit selectionChanged(sel_);
        zoomToSelection();
    }
}

void TimelineWidget::keyPressEvent(QKeyEvent* e) {
    if (!snap_.valid()) return QWidget::keyPressEvent(e);
    const int64_t mid = geo_.v0 + (geo_.v1 - geo_.v0) / 2;
    switch (e->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
    case Qt::Key_W:
        zoomBy(1.5, cursor_ != INT64_MIN ? cursor_ : mid);
        break;
    case Qt::Key_Minus:
    case Qt::Key_S:
        zoomBy(1 / 1.5, cursor_ != INT64_MIN ? cursor_ : mid);
        break;
    case Qt::Key_Left:
    case Qt::Key_A:
        if (focusLane_ >= 0 && (e->modifiers() & Qt::ControlModifier))
            setLaneCollapsed(focusLane_, true);
        else
            panBy(-0.1);
        break;
    case Qt::Key_Right:
    case Qt::Key_D:
        if (focusLane_ >= 0 && (e->modifiers() & Qt::ControlModifier))
            setLaneCollapsed(focusLane_, false);
        else
            panBy(0.1);
        break;
    case Qt::Key_Up:
        if (e->modifiers() & Qt::ControlModifier)
            moveFocusLane(-1); // lane focus, for collapsing from the keyboard
        else
            vbar_->setValue(vbar_->value() - 40);
        break;
    case Qt::Key_Down:
        if (e->modifiers() & Qt::ControlModifier)
            moveFocusLane(1);
        else
            vbar_->setValue(vbar_->value() + 40);
        break;
    case Qt::Key_Return:
    case Qt::Key_Enter:
        if (focusLane_ >= 0) toggleLane(focusLane_);
        break;
    case Qt::Key_Home:
    case Qt::Key_0:
    case Qt::Key_F:
        fitAll();
        break;
    case Qt::Key_Z:
        zoomToSelection();
        break;
    case Qt::Key_Escape:
        sel_ = {};
        update();
        emit selectionChanged(sel_);
        break;
    default:
        QWidget::keyPressEvent(e);
    }
}

bool TimelineWidget::event(QEvent* e) {
    if (e->type() == QEvent::FocusIn || e->type() == QEvent::FocusOut) update(); // lane focus
    if (e->type() == QEvent::ToolTip && snap_.valid()) {
        auto* he = static_cast<QHelpEvent*>(e);
        TimelinePainter painter(snap_, geo_, ColorScheme(palette()), coloring_);
        painter.nvtx = nvtx_.get();
        const QString tip = painter.tooltip(painter.hitTest(he->pos()));
        if (tip.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(he->globalPos(), tip, this);
        return true;
    }
    return QWidget::event(e);
}

void TimelineWidget::changeEvent(QEvent* e) {
    if (e->type() == QEvent::PaletteChange || e->type() == QEvent::FontChange ||
        e->type() == QEvent::StyleChange) {
        ++generation_; // colours and fonts are in the cached image
        rulerText_.clear();
        update();
    }
    QWidget::changeEvent(e);
}

bool TimelineWidget::hasOverview() const {
    return snap_.valid() && snap_.timeline->partial && snap_.overview &&
           snap_.overview->available();
}

void TimelineWidget::paintOverview(QPainter& p, const QRectF& band) const {
    if (!hasOverview()) return;
    const int x0 = std::max(int(std::ceil(band.left())), geo_.labelW);
    const int x1 = std::min(int(std::floor(band.right())), geo_.labelW + int(geo_.plotW()));
    if (x1 <= x0) return;
    int64_t t0 = geo_.tOf(x0), t1 = geo_.tOf(x1);
    // The band after the loaded part, or (a range timeline) the one before it.
    if (t0 + (t1 - t0) / 2 < snap_.timeline->loadedFromNs)
        t1 = std::min(t1, snap_.timeline->loadedFromNs);
    else
        t0 = std::max(t0, snap_.timeline->loadedUntilNs);
    if (t1 <= t0) return;
    const size_t columns = size_t(x1 - x0);
    const ColorScheme c(palette());
    std::vector<view::OverviewColumn> cols;
    QVector<QLineF> reserved, used;
    p.setRenderHint(QPainter::Antialiasing, false);
    for (size_t i = 0; i < snap_.layout->lanes.size(); ++i) {
        const Lane& l = snap_.layout->lanes[i];
        if (l.kind != LaneKind::Pool || l.poolIndex < 0 || geo_.laneH[i] == 0) continue;
        const PoolTimeline& pt = snap_.timeline->pools[size_t(l.poolIndex)];
        const int top = std::max(geo_.laneY(i) + 4, geo_.lanesTop());
        const int bottom = std::min(geo_.laneY(i) + geo_.laneH[i] - 3, geo_.lanesBottom());
        if (bottom <= top) continue;
        if (!snap_.overview->query(pt.info.handle, t0, t1, columns, true, cols)) continue;
        // The chart's own scale (the loaded part's peak, as its label says); higher values
        // reach the lane's top.
        const double scale = double(std::max<uint64_t>(1, pt.peakReserved));
        const int laneTop = geo_.laneY(i) + 4, laneBottom = geo_.laneY(i) + geo_.laneH[i] - 3;
        auto y = [&](uint64_t v) {
            const double f = std::min(1.0, double(v) / scale);
            return std::clamp(laneBottom - (laneBottom - laneTop) * f, double(top), double(bottom));
        };
        reserved.clear();
        used.clear();
        for (size_t k = 0; k < columns; ++k) {
            if (!cols[k].any) continue;
            const double x = x0 + double(k) + 0.5;
            reserved.push_back(QLineF(x, y(cols[k].reservedMin) + 0.5, x, y(cols[k].reservedMax) - 0.5));
            used.push_back(QLineF(x, y(cols[k].usedMin) + 0.5, x, y(cols[k].usedMax) - 0.5));
        }
        QColor rc = c.reservedColor(l.poolSlot), uc = c.usedColor(l.poolSlot);
        rc.setAlpha(110);
        uc.setAlpha(190);
        p.setPen(QPen(rc, 1));
        p.drawLines(reserved);
        p.setPen(QPen(uc, 1));
        p.drawLines(used);
    }
}

} // namespace poolscope::ui
