#include "TimeTicker.h"

#include "poolscope/Units.h"

#include <algorithm>
#include <cmath>

namespace poolscope::ui {

int64_t niceTimeStep(int64_t spanNs, int targetCount) {
    const double raw = std::max(1.0, double(spanNs) / std::max(1, targetCount));
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double f = raw / mag;
    const double nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
    return std::max<int64_t>(1, static_cast<int64_t>(nice * mag));
}

QString timeTickLabel(int64_t relNs, int64_t stepNs, int64_t scaleNs) {
    struct Unit {
        double ns;
        const char* name;
    };
    static const Unit kUnits[] = {{1, "ns"}, {1e3, "\xC2\xB5s"}, {1e6, "ms"}, {1e9, "s"}};
    // |scaleNs| in double: llabs(INT64_MIN) is undefined (a damaged trace's extent).
    const double scale = std::max(std::fabs(double(scaleNs)), double(stepNs));
    int u = 0;
    while (u < 3 && scale >= kUnits[u + 1].ns)
        ++u;
    const double unit = kUnits[u].ns;
    const int decimals = std::clamp(int(std::ceil(std::log10(unit / double(stepNs)) - 1e-9)), 0, 9);
    return QString::number(double(relNs) / unit, 'f', decimals) + QChar(' ') +
           QString::fromUtf8(kUnits[u].name);
}

uint64_t seriesMax(const Series& s, int64_t t0, int64_t t1) {
    uint64_t m = s.valueAt(t0);
    for (const Point& p : downsample(s, t0, std::max(t1, t0 + 1), 4))
        m = std::max(m, p.v);
    return m;
}

double TimeTicker::getTickStep(const QCPRange& range) {
    const int target = std::max(2, pixelWidth / 110);
    step_ = niceTimeStep(static_cast<int64_t>(range.size()), target);
    scale_ = static_cast<int64_t>(std::max(std::abs(range.lower), std::abs(range.upper)));
    return double(step_);
}

QString TimeTicker::getTickLabel(double tick, const QLocale&, QChar, int) {
    return timeTickLabel(static_cast<int64_t>(std::llround(tick)), step_, scale_);
}

double BytesTicker::getTickStep(const QCPRange& range) {
    // Powers of two, about 5 ticks.
    const double raw = std::max(1.0, range.size() / 5.0);
    return std::pow(2.0, std::ceil(std::log2(raw)));
}

QString BytesTicker::getTickLabel(double tick, const QLocale&, QChar, int) {
    if (tick < 0) return {};
    return QString::fromStdString(formatBytes(static_cast<uint64_t>(std::llround(tick))));
}

} // namespace poolscope::ui
