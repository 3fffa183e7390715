#include "ColorScheme.h"

#include <QApplication>
#include <QStyle>
#include <algorithm>
#include <bit>
#include <cmath>

namespace poolscope::ui {

ColorScheme::ColorScheme(const QPalette& p) {
    bg_ = p.color(QPalette::Base);
    text_ = p.color(QPalette::Text);
    dark_ = bg_.lightness() < 128;
    laneAlt_ = dark_ ? bg_.lighter(125) : bg_.darker(104);
    headerBg_ = p.color(QPalette::Window);
    dim_ = dark_ ? text_.darker(150) : text_.lighter(170);
    grid_ = dark_ ? QColor(255, 255, 255, 28) : QColor(0, 0, 0, 24);
}

QColor ColorScheme::nvtxColor(uint32_t slot) const {
    const int hue = int(std::fmod(20.0 + 137.508 * double(slot % 1024), 360.0));
    return QColor::fromHsv(hue, dark_ ? 90 : 70, dark_ ? 150 : 232);
}

QColor ColorScheme::sizeColor(uint64_t bytes) const {
    // 2^8 (256 B) .. 2^34 (16 GiB) mapped to hue 220 (blue) .. 20 (orange-red).
    const int lg = bytes ? 63 - std::countl_zero(bytes) : 0;
    const double f = std::clamp((lg - 8) / 26.0, 0.0, 1.0);
    const int hue = static_cast<int>(220 - 200 * f);
    return QColor::fromHsv(hue, dark_ ? 170 : 200, dark_ ? 230 : 215);
}

// Reserved and used hues come from two separate sets (reserved cool blues, used greens and
// yellows), so no pool's used line takes another pool's reserved colour, and neither set comes
// near a marker's colour (synchronize 225, implicit release 33, trim 279, attribute 176, knob
// 319, failure 0, memory outside the pools 11 and pinned host memory 137): with the old sets,
// pool #2's reserved line was the releases' orange and pool #3's the trims' purple. The six hues
// are at least 30 degrees apart. Pools #4 to #6 take the same hues darker, #7 to #9 paler.
namespace {
constexpr int kReservedHues[] = {200, 246, 157};
constexpr int kUsedHues[] = {114, 52, 83};
constexpr int kHueSets = 3;
int hueSet(int slot) {
    return ((slot % kHueSets) + kHueSets) % kHueSets;
}
int tier(int slot) {
    return ((slot / kHueSets) % 3 + 3) % 3;
}
} // namespace

int ColorScheme::reservedHue(int i) { return kReservedHues[hueSet(i)]; }
int ColorScheme::usedHue(int i) { return kUsedHues[hueSet(i)]; }

QColor ColorScheme::poolColor(int i) const {
    switch (tier(i)) {
    case 1: return QColor::fromHsv(reservedHue(i), 255, dark_ ? 185 : 150);
    case 2: return QColor::fromHsv(reservedHue(i), 120, 235);
    default: return QColor::fromHsv(reservedHue(i), 200, dark_ ? 235 : 205);
    }
}

QColor ColorScheme::usedColor(int i) const {
    // A different hue from the pool's reserved colour: the two lines must be told apart at a
    // glance, since the gap between them is what the tool is about.
    switch (tier(i)) {
    case 1: return QColor::fromHsv(usedHue(i), 255, dark_ ? 180 : 140);
    case 2: return QColor::fromHsv(usedHue(i), 140, 235);
    default: return QColor::fromHsv(usedHue(i), 220, dark_ ? 235 : 175);
    }
}

QPalette ColorScheme::palette(Theme t) {
    if (t == Theme::System) return QApplication::style()->standardPalette();
    QPalette p;
    if (t == Theme::Light) {
        p.setColor(QPalette::Window, QColor(239, 239, 239));
        p.setColor(QPalette::WindowText, Qt::black);
        p.setColor(QPalette::Base, Qt::white);
        p.setColor(QPalette::AlternateBase, QColor(246, 246, 246));
        p.setColor(QPalette::Text, Qt::black);
        p.setColor(QPalette::Button, QColor(239, 239, 239));
        p.setColor(QPalette::ButtonText, Qt::black);
        p.setColor(QPalette::Highlight, QColor(48, 140, 198));
        p.setColor(QPalette::HighlightedText, Qt::white);
        p.setColor(QPalette::ToolTipBase, QColor(255, 255, 220));
        p.setColor(QPalette::ToolTipText, Qt::black);
        p.setColor(QPalette::PlaceholderText, QColor(120, 120, 120));
        p.setColor(QPalette::Link, QColor(30, 90, 200));
        // Disabled controls must look it (a button that cannot act, such as What if's "Apply
        // to the running program" outside a live session, looked like one that can).
        p.setColor(QPalette::Disabled, QPalette::Text, QColor(150, 150, 150));
        p.setColor(QPalette::Disabled, QPalette::WindowText, QColor(150, 150, 150));
        p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(150, 150, 150));
        return p;
    }
    p.setColor(QPalette::Window, QColor(45, 45, 48));
    p.setColor(QPalette::WindowText, QColor(230, 230, 230));
    p.setColor(QPalette::Base, QColor(30, 30, 32));
    p.setColor(QPalette::AlternateBase, QColor(40, 40, 43));
    p.setColor(QPalette::Text, QColor(230, 230, 230));
    p.setColor(QPalette::Button, QColor(55, 55, 58));
    p.setColor(QPalette::ButtonText, QColor(230, 230, 230));
    p.setColor(QPalette::Highlight, QColor(60, 130, 210));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::ToolTipBase, QColor(60, 60, 64));
    p.setColor(QPalette::ToolTipText, QColor(235, 235, 235));
    p.setColor(QPalette::PlaceholderText, QColor(150, 150, 150));
    p.setColor(QPalette::Link, QColor(120, 170, 255));
    p.setColor(QPalette::Disabled, QPalette::Text, QColor(120, 120, 120));
    p.setColor(QPalette::Disabled, QPalette::WindowText, QColor(120, 120, 120));
    p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(120, 120, 120));
    return p;
}

} // namespace poolscope::ui
