#pragma once
// Colours shared by the painted timeline and the plot, derived from the application palette so
// light and dark themes both stay readable.

#include <QColor>
#include <QPalette>
#include <QString>

namespace poolscope::ui {

enum class Theme { System, Light, Dark };
enum class BarColoring { BySize, ByPool };

class ColorScheme {
public:
    explicit ColorScheme(const QPalette& palette);

    bool dark() const { return dark_; }
    QColor background() const { return bg_; }
    QColor laneAlt() const { return laneAlt_; }
    QColor headerBg() const { return headerBg_; }
    QColor text() const { return text_; }
    QColor dimText() const { return dim_; }
    QColor grid() const { return grid_; }
    QColor cursor() const { return QColor(230, 60, 60); }
    QColor selection() const { return dark_ ? QColor(255, 255, 255) : QColor(0, 0, 0); }

    // Allocation bars: log2 of the size on a blue -> green -> orange ramp (256 B .. 16 GiB).
    QColor sizeColor(uint64_t bytes) const;
    // By the pool's slot (view::Lane::poolSlot: 0 for pool #1), not its index in the timeline.
    QColor poolColor(int slot) const;
    QColor reservedColor(int slot) const { return poolColor(slot); }
    static int reservedHue(int slot); // the hue sets behind poolColor / usedColor
    static int usedHue(int slot);
    QColor usedColor(int slot) const;

    QColor syncColor() const { return dark_ ? QColor(140, 170, 255) : QColor(40, 80, 200); }
    QColor releaseColor() const { return QColor(240, 140, 20); }
    QColor trimColor() const { return QColor(170, 80, 220); }
    QColor attributeColor() const { return QColor(20, 170, 160); }
    QColor knobColor() const { return QColor(220, 60, 170); }
    QColor failColor() const { return QColor(230, 30, 30); }
    // Memory outside the pools (cudaMalloc) and pinned host memory; cudaFree's device-wide sync.
    QColor outsideColor() const { return dark_ ? QColor(235, 120, 90) : QColor(200, 70, 40); }
    QColor pinnedColor() const { return dark_ ? QColor(110, 200, 136) : QColor(40, 140, 68); }
    QColor deviceSyncColor() const { return QColor(225, 40, 40); }
    QColor edgeColor() const {
        return dark_ ? QColor(230, 230, 230, 150) : QColor(60, 60, 60, 150);
    }
    QColor liveMark() const { return QColor(230, 30, 30); }
    // An NVTX range name by its colour slot (view::NvtxRows::colorSlot): the timeline's band
    // and the plot's split by range give one name one colour. Slots a golden angle apart in
    // hue, so that the first names of a trace differ clearly.
    QColor nvtxColor(uint32_t slot) const;

    static QPalette palette(Theme t); // Fusion-friendly light or dark palette (System: the default)

private:
    bool dark_ = false;
    QColor bg_, laneAlt_, headerBg_, text_, dim_, grid_;
};

} // namespace poolscope::ui
