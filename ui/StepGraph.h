#pragma once
// A QCPGraph whose step-left line, when drawn with a 1-px solid opaque aliased pen on a raster
// device, is filled as one rectangle per run of pixel columns covering the same rows, instead of
// a polyline through Qt's cosmetic stroker. The watermark lines are fed ~2 points per pixel and
// a noisy one climbs and falls nearly the plot's height in every column: the stroker writes
// each of those pixels at least twice, one pixel at a time (most of a zoomed-out replot). Same
// lines, each vertical step in its own pixel column: Qt's stroker, when a horizontal step is
// shorter than half a pixel, draws the next vertical one as a slight diagonal from the earlier
// point (its dropout control), so some of its pixels land a column or two early. Anything else
// (dashes, translucent or wide pens, antialiasing, vector export, scaled devices, gaps) is drawn
// by QCPGraph itself.

#include <QImage>
#include <qcustomplot.h>

namespace poolscope::ui {

class StepGraph : public QCPGraph {
public:
    StepGraph(QCPAxis* keyAxis, QCPAxis* valueAxis) : QCPGraph(keyAxis, valueAxis) {}
    // For tests and comparisons: always QCPGraph's own polyline.
    void setFastSteps(bool on) { fast_ = on; }

protected:
    void drawLinePlot(QCPPainter* painter, const QVector<QPointF>& lines) const override;

private:
    bool fillSteps(QCPPainter* painter, const QVector<QPointF>& lines) const;
    bool fast_ = true;
    mutable QImage buf_; // dense lines: the covered pixels, reused between replots
};

} // namespace poolscope::ui
