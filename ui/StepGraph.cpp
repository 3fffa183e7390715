#include "StepGraph.h"

#include <algorithm>
#include <cmath>
#include <vector>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace poolscope::ui {

void StepGraph::drawLinePlot(QCPPainter* painter, const QVector<QPointF>& lines) const {
    const QPen pen = painter->pen();
    if (pen.style() == Qt::NoPen || pen.color().alpha() == 0) return;
    applyDefaultAntialiasingHint(painter);
    const bool eligible = fast_ && lineStyle() == lsStepLeft && pen.style() == Qt::SolidLine &&
                          pen.widthF() <= 1.0 && pen.color().alpha() == 255 &&
                          pen.brush().style() == Qt::SolidPattern && !painter->antialiasing() &&
                          !painter->modes().testFlag(QCPPainter::pmVectorized) &&
                          painter->deviceTransform().isIdentity() &&
                          keyAxis()->orientation() == Qt::Horizontal;
    if (!eligible || !fillSteps(painter, lines)) QCPGraph::drawLinePlot(painter, lines);
}

bool StepGraph::fillSteps(QCPPainter* painter, const QVector<QPointF>& pts) const {
    const int n = int(pts.size());
    if (n < 2) return false;
    if (!painter->hasClipping()) return false;
    const QRect clip = painter->clipBoundingRect().toAlignedRect();
    if (clip.isEmpty()) return true;
    // A line of few vertices (zoomed in) costs the stroker little; the columns cost as many
    // steps as the plot is wide.
    if (n < clip.width()) return false;
    // Positions in 1/64 px, as Qt's rasterizer takes them; a segment covers the pixels whose
    // centres it passes (columns [round(x0), round(x1)) of a horizontal one, in the row holding
    // it; rows [round(y0), round(y1)) of a vertical one, in the column holding it).
    const double xlo = clip.left() - 2, xhi = clip.right() + 3;
    const double ylo = clip.top() - 2, yhi = clip.bottom() + 3;
    auto fx = [&](double v) { return int(std::clamp(v, xlo, xhi) * 64.0); };
    auto fy = [&](double v) { return int(std::clamp(v, ylo, yhi) * 64.0); };
    auto floor64 = [](int v) { return v >= 0 ? v >> 6 : -((-v + 63) >> 6); };
    auto round64 = [&](int v) { return floor64(v + 32); };
    const int c0 = clip.left(), W = clip.width();
    std::vector<int> lo(size_t(W), INT32_MAX), hi(size_t(W), INT32_MIN);
    auto mark = [&](int col, int r0, int r1) { // rows [r0, r1] of column col
        if (col < c0 || col >= c0 + W || r1 < r0) return;
        int& l = lo[size_t(col - c0)];
        int& h = hi[size_t(col - c0)];
        l = std::min(l, r0);
        h = std::max(h, r1);
    };
    for (int i = 0; i + 1 < n; ++i) {
        const QPointF a = pts[i], b = pts[i + 1];
        if (std::isnan(a.x()) || std::isnan(a.y()) || std::isnan(b.x()) || std::isnan(b.y()))
            return false; // QCustomPlot breaks the line there: leave it to QCPGraph
        int x1 = fx(a.x()), y1 = fy(a.y()), x2 = fx(b.x()), y2 = fy(b.y());
        // Square caps: the line's two ends reach half a pixel further.
        const bool first = i == 0, last = i + 2 == n;
        if (y1 == y2) {
            if (x1 == x2) continue;
            const bool fwd = x1 < x2;
            if (first) x1 += fwd ? -32 : 32;
            if (last) x2 += fwd ? 32 : -32;
            const int ca = round64(std::min(x1, x2)), cb = round64(std::max(x1, x2));
            const int row = floor64(y1);
            for (int c = std::max(ca, c0); c < std::min(cb, c0 + W); ++c)
                mark(c, row, row);
        } else if (x1 == x2) {
            const bool fwd = y1 < y2;
            if (first) y1 += fwd ? -32 : 32;
            if (last) y2 += fwd ? 32 : -32;
            const int ra = round64(std::min(y1, y2)), rb = round64(std::max(y1, y2));
            mark(floor64(x1), ra, rb - 1);
        } else {
            return false; // not a step line
        }
    }
    const QColor color = painter->pen().color();
    // Rows [top, bottom] hold every covered pixel; px of them are covered.
    int top = INT32_MAX, bottom = INT32_MIN;
    int64_t px = 0;
    for (int c = 0; c < W; ++c) {
        int& l = lo[size_t(c)];
        int& h = hi[size_t(c)];
        l = std::max(l, clip.top());
        h = std::min(h, clip.bottom());
        if (l > h) continue;
        top = std::min(top, l);
        bottom = std::max(bottom, h);
        px += h - l + 1;
    }
    if (top > bottom) return true;
    const int H = bottom - top + 1;
    if (int64_t(W) * H <= 4 * px) {
        // Dense (a noisy line climbing and falling in every column): the covered pixels as an
        // image, built a row at a time, drawn in one blend. Opaque or transparent pixels over
        // the buffer: the same result as filling them.
        if (buf_.width() < W || buf_.height() < H)
            buf_ = QImage(std::max(W, buf_.width()), std::max(H, buf_.height()),
                          QImage::Format_ARGB32_Premultiplied);
        const uint32_t argb = color.rgba();
        // Branch-free: row r is covered in column c iff r - lo[c] (unsigned) <= hi[c] - lo[c];
        // an empty column gets a range no row reaches.
        std::vector<int32_t> from(static_cast<size_t>(W));
        std::vector<uint32_t> span(static_cast<size_t>(W));
        for (int c = 0; c < W; ++c) {
            const bool empty = lo[size_t(c)] > hi[size_t(c)];
            from[size_t(c)] = empty ? INT32_MIN / 2 : lo[size_t(c)];
            span[size_t(c)] = empty ? 0u : uint32_t(hi[size_t(c)] - lo[size_t(c)]);
        }
        for (int y = 0; y < H; ++y) {
            auto* out = reinterpret_cast<uint32_t*>(buf_.scanLine(y));
            const int32_t row = top + y;
            int c = 0;
#ifdef __SSE2__
            // Four columns at a time (the compiler does not vectorise this at -O2).
            const __m128i bias = _mm_set1_epi32(INT32_MIN), r4 = _mm_set1_epi32(row),
                          col4 = _mm_set1_epi32(int32_t(argb));
            for (; c + 4 <= W; c += 4) {
                const __m128i d = _mm_sub_epi32(
                    r4, _mm_loadu_si128(reinterpret_cast<const __m128i*>(from.data() + c)));
                const __m128i sp =
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(span.data() + c));
                // d > span, unsigned: outside the column's rows.
                const __m128i outside =
                    _mm_cmpgt_epi32(_mm_xor_si128(d, bias), _mm_xor_si128(sp, bias));
                _mm_storeu_si128(reinterpret_cast<__m128i*>(out + c),
                                 _mm_andnot_si128(outside, col4));
            }
#endif
            for (; c < W; ++c) {
                const uint32_t in = uint32_t(row - from[size_t(c)]) <= span[size_t(c)];
                out[c] = argb & (0u - in);
            }
        }
        painter->drawImage(QPoint(c0, top), buf_, QRect(0, 0, W, H));
        return true;
    }
    // Sparse: a run of columns covering the same rows is one integer rectangle (in an opaque
    // colour Qt fills it straight into the buffer); single columns are vertical lines, all in
    // one call (a rectangle per column costs a call each).
    std::vector<QLine> lines;
    int c = 0;
    while (c < W) {
        const int l = lo[size_t(c)], h = hi[size_t(c)];
        if (l > h) {
            ++c;
            continue;
        }
        int e = c + 1;
        while (e < W && lo[size_t(e)] == l && hi[size_t(e)] == h)
            ++e;
        if (e - c == 1)
            lines.emplace_back(c0 + c, l, c0 + c, h);
        else
            painter->fillRect(QRect(c0 + c, l, e - c, h - l + 1), color);
        c = e;
    }
    if (!lines.empty()) {
        const QPen old = painter->pen();
        painter->setPen(QPen(color, 0));
        painter->drawLines(lines.data(), int(lines.size()));
        painter->setPen(old);
    }
    return true;
}

} // namespace poolscope::ui
