#pragma once
// Time axis ticks in human units, shared by the painted timeline ruler and the QCustomPlot plot
// so both axes show the same labels. Times on screen are relative to the trace's first event.

#include "poolscope/Timeline.h"

#include <QString>
#include <cstdint>
#include <qcustomplot.h>
#include <vector>

namespace poolscope::ui {

// A 1-2-5 step giving about targetCount ticks over span nanoseconds (at least 1 ns).
int64_t niceTimeStep(int64_t spanNs, int targetCount);
// Label for a tick at relNs (relative to the trace start) with the given step: the unit follows
// the magnitude of scaleNs (the largest visible time), the decimals follow the step, so adjacent
// ticks never print the same text.
QString timeTickLabel(int64_t relNs, int64_t stepNs, int64_t scaleNs);

// Highest value of a step series over [t0, t1) through core's downsample (which skips whole
// blocks by their summaries), where Series::maxIn would scan every point in the range.
uint64_t seriesMax(const poolscope::Series& s, int64_t t0, int64_t t1);

// Plot keys are nanoseconds relative to the trace start.
class TimeTicker : public QCPAxisTicker {
public:
    int pixelWidth = 800; // set by the owner so the tick density follows the widget
protected:
    double getTickStep(const QCPRange& range) override;
    QString getTickLabel(double tick, const QLocale& locale, QChar formatChar,
                         int precision) override;
    int getSubTickCount(double) override { return 4; }

private:
    int64_t step_ = 1;
    int64_t scale_ = 1;
};

// Byte values on a power-of-two grid (1, 2, 4, 8... of KiB/MiB/GiB) with human labels.
class BytesTicker : public QCPAxisTicker {
protected:
    double getTickStep(const QCPRange& range) override;
    QString getTickLabel(double tick, const QLocale& locale, QChar formatChar,
                         int precision) override;
    int getSubTickCount(double) override { return 1; }
};

} // namespace poolscope::ui
