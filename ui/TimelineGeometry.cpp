// The timeline's lane geometry (TimelineGeometry, TimelinePainter.h): each lane's height and
// place from the layout, what is collapsed or hidden, the NVTX band, and the rows a lane's bars
// take.
#include "TimelinePainter.h"

#include <algorithm>

namespace poolscope::ui {

namespace {
constexpr int kDeviceH = 22;
constexpr int kPoolH = 44;
constexpr int kRowPitch = 8;
constexpr int kMaxVisibleRows = 12; // more rows than this squeeze into the same height
constexpr int kStreamPad = TimelineGeometry::kStreamPad;
constexpr int kSummaryH = TimelineGeometry::kSummaryH;
} // namespace

void TimelineGeometry::layoutLanes(const LaneLayout& layout,
                                   const std::vector<uint8_t>& collapsedIn, const Timeline* idleFrom) {
    auto idle = [&](const Lane& l) {
        if (!idleFrom || l.streamIndex < 0 || size_t(l.streamIndex) >= idleFrom->streams.size())
            return false;
        const StreamTimeline& st = idleFrom->streams[size_t(l.streamIndex)];
        return st.allocCount == 0 && st.freeCount == 0 && st.failedCount == 0 && l.failed.empty();
    };
    laneTop.clear();
    laneH.clear();
    laneState.assign(layout.lanes.size(), kExpanded);
    shownAs.assign(layout.lanes.size(), -1);
    auto wants = [&](size_t i) { return i < collapsedIn.size() && collapsedIn[i]; };
    // Lanes come in tree order: a device, its pools each followed by their stream lanes, then
    // the device's streams that never allocate (not under any pool).
    int devLane = -1, poolLane = -1;
    bool devC = false, poolC = false;
    int y = 0;
    for (size_t i = 0; i < layout.lanes.size(); ++i) {
        const Lane& l = layout.lanes[i];
        int owner = -1; // the collapsed header hiding this lane
        if (l.kind == LaneKind::Host) { // after every device: under none of them
            devLane = poolLane = -1;
            devC = poolC = false;
        } else if (l.kind == LaneKind::Device) {
            devLane = int(i);
            poolLane = -1;
            devC = wants(i);
            poolC = false;
            if (devC) laneState[i] = kCollapsed;
        } else if (devC) {
            owner = devLane;
        } else if (l.kind == LaneKind::Outside) {
            poolLane = -1; // not under a pool: a collapsed pool above must not hide it
        } else if (l.kind == LaneKind::Pool) {
            poolLane = int(i);
            poolC = wants(i);
            if (poolC) laneState[i] = kCollapsed;
        } else {
            const bool underPool = poolLane >= 0 && layout.laneOf(l.pool, l.stream) == int(i);
            if (underPool && poolC)
                owner = poolLane;
            else if (!underPool && l.rowCount == 0 && idle(l))
                owner = devLane;
            else if (wants(i) && collapsible(l))
                laneState[i] = kCollapsed;
        }
        int h = kDeviceH;
        if (owner >= 0) {
            laneState[i] = kHidden;
            shownAs[i] = owner;
            h = 0;
        } else {
            shownAs[i] = int(i);
            if (l.kind == LaneKind::Pool || l.kind == LaneKind::Outside ||
                l.kind == LaneKind::Host)
                h = kPoolH;
            if (l.kind == LaneKind::Stream) {
                // Up to kMaxVisibleRows rows get full-height bars; a lane with more concurrent
                // blocks grows to 180 px and squeezes its rows (at least 3 px each while it can).
                // Collapsed: one summary row.
                const int rows = std::max(2, l.rowCount);
                h = laneState[i] == kCollapsed
                        ? 2 * kStreamPad + kSummaryH
                        : 2 * kStreamPad +
                              (rows <= kMaxVisibleRows
                                   ? rows * kRowPitch
                                   : std::clamp(rows * 3, kMaxVisibleRows * kRowPitch, 180));
            }
        }
        laneTop.push_back(y);
        laneH.push_back(h);
        y += h;
    }
    contentH = y;
}

void TimelineGeometry::layoutNvtx(size_t rows) {
    nvtxRows = int(std::min<size_t>(rows, kMaxNvtxRows));
    // Up to four rows get 14 px each; more share at most 72 px (at least 6 px a row).
    nvtxRowH = nvtxRows == 0 ? 0 : nvtxRows <= 4 ? 14 : std::max(6, 72 / nvtxRows);
    nvtxH = nvtxRows * nvtxRowH + (nvtxRows ? 2 : 0);
}

bool TimelineGeometry::collapsible(const Lane& l) {
    return l.kind != LaneKind::Stream || l.rowCount > 0;
}

int TimelineGeometry::labelIndent(const Lane& l) {
    return l.kind == LaneKind::Device ? 17 : l.kind == LaneKind::Pool ? 28 : 38;
}

QRect TimelineGeometry::disclosureRect(const LaneLayout& layout, size_t i) const {
    if (i >= layout.lanes.size() || i >= laneH.size() || laneH[i] <= 0) return {};
    const Lane& l = layout.lanes[i];
    if (!collapsible(l)) return {};
    const int x = labelIndent(l) - 13;
    const int h = l.kind == LaneKind::Pool ? 20 : std::min(laneH[i], 20);
    return QRect(x, laneY(i) + 1, 12, std::max(8, h - 2));
}

int TimelineGeometry::rowPitch(const Lane& l, int laneHeight) {
    if (l.rowCount <= 0) return kRowPitch;
    return std::max(1, (laneHeight - 2 * kStreamPad) / std::max(l.rowCount, 1));
}

} // namespace poolscope::ui
