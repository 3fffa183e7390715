// The watermark plot's step lines: StepGraph fills them column by column instead of handing
// QCustomPlot's polyline to Qt's stroker. Compared with QCPGraph's own drawing on noisy and flat
// series fed ~2 points per pixel, as the plot feeds them.
#include "StepGraph.h"

#include <QImage>
#include <gtest/gtest.h>
#include <random>

using namespace poolscope::ui;

namespace {

struct Rendered {
    QImage fast, slow;
    QRect area; // the axis rect
};

// The same data drawn with the fast path on and off.
Rendered render(const QVector<QCPGraphData>& data, QSize size, QColor color, bool fastOn = true) {
    Rendered r;
    QCustomPlot plot;
    plot.setNotAntialiasedElements(QCP::aeAll);
    plot.setPlottingHint(QCP::phFastPolylines, false);
    auto* g = new StepGraph(plot.xAxis, plot.yAxis);
    g->setLineStyle(QCPGraph::lsStepLeft);
    g->setPen(QPen(color, 1));
    g->data()->set(data, true);
    plot.xAxis->setRange(data.front().key, data.back().key);
    plot.yAxis->setRange(0, 110);
    for (bool fast : {true, false}) {
        g->setFastSteps(fast && fastOn);
        (fast ? r.fast : r.slow) = plot.toPixmap(size.width(), size.height())
                                       .toImage()
                                       .convertToFormat(QImage::Format_RGB32);
    }
    r.area = plot.axisRect()->rect();
    return r;
}

// Pixels of `color` in a that have none in b in the same row within `reach` columns.
int unmatched(const QImage& a, const QImage& b, QRgb color, int reach, int x0, int x1) {
    int n = 0;
    for (int y = 0; y < a.height(); ++y)
        for (int x = x0; x < x1; ++x) {
            if (a.pixel(x, y) != color) continue;
            bool found = false;
            for (int dx = -reach; dx <= reach && !found; ++dx)
                found = x + dx >= 0 && x + dx < b.width() && b.pixel(x + dx, y) == color;
            n += !found;
        }
    return n;
}

QVector<QCPGraphData> series(std::mt19937& rng, bool noisy, int n) {
    QVector<QCPGraphData> d;
    double v = 50;
    for (int i = 0; i < n; ++i) {
        if (noisy)
            v = double(rng() % 100);
        else if (rng() % 8 == 0)
            v = std::clamp(v + double(int(rng() % 21) - 10), 0.0, 100.0);
        d.push_back({double(i) + (rng() % 1000) / 1000.0, v});
    }
    return d;
}

} // namespace

TEST(StepGraph, DrawsTheSameLinesAsQCustomPlotsPolyline) {
    // Qt's stroker draws a vertical step that follows a sub-pixel horizontal one as a slight
    // diagonal from the previous point, so some of its pixels land a column or two early;
    // StepGraph puts every step in its own column. Every StepGraph pixel is within two columns
    // of a stroker pixel in the same row and nearly every stroker pixel within two columns of a
    // StepGraph one; the rest of the plot (axes, grid, labels) is identical.
    std::mt19937 rng(11);
    const QColor blue(40, 110, 200);
    for (int trial = 0; trial < 6; ++trial) {
        const auto d = series(rng, trial % 2 == 0, trial < 4 ? 1200 : 300);
        const Rendered r = render(d, QSize(640, 300), blue);
        int line = 0, other = 0;
        for (int y = 0; y < r.slow.height(); ++y)
            for (int x = 0; x < r.slow.width(); ++x) {
                const bool a = r.fast.pixel(x, y) == blue.rgb(), b = r.slow.pixel(x, y) == blue.rgb();
                line += b;
                // Off the line (both not blue) the images must agree.
                other += !a && !b && r.fast.pixel(x, y) != r.slow.pixel(x, y);
            }
        EXPECT_GT(line, 500) << "trial " << trial;
        EXPECT_EQ(other, 0) << "trial " << trial;
        // Away from the plot's left and right ends (where the stroker's diagonals meet the clip).
        const int x0 = r.area.left() + 3, x1 = r.area.right() - 3;
        const int a = unmatched(r.slow, r.fast, blue.rgb(), 2, x0, x1);
        const int b = unmatched(r.fast, r.slow, blue.rgb(), 2, x0, x1);
        // A handful of the stroker's pixels sit further off (a diagonal reaching 3 columns).
        EXPECT_LE(a, line / 2000 + 2) << "trial " << trial;
        EXPECT_EQ(b, 0) << "trial " << trial;
    }
}

TEST(StepGraph, LeavesWhatItCannotFillToQCustomPlot) {
    // A dashed or translucent pen goes through QCPGraph: identical pixels.
    std::mt19937 rng(3);
    const auto d = series(rng, true, 600);
    for (const QPen& pen : {QPen(QColor(40, 110, 200), 1, Qt::DashLine),
                            QPen(QColor(40, 110, 200, 70), 1), QPen(QColor(40, 110, 200), 2)}) {
        QCustomPlot plot;
        plot.setNotAntialiasedElements(QCP::aeAll);
        auto* g = new StepGraph(plot.xAxis, plot.yAxis);
        g->setLineStyle(QCPGraph::lsStepLeft);
        g->setPen(pen);
        g->data()->set(d, true);
        plot.xAxis->setRange(d.front().key, d.back().key);
        plot.yAxis->setRange(0, 110);
        const QImage fast = plot.toPixmap(400, 200).toImage();
        g->setFastSteps(false);
        EXPECT_EQ(fast, plot.toPixmap(400, 200).toImage()) << pen.style() << " " << pen.widthF();
    }
}
