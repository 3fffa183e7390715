#pragma once
// What the user picked in any view. Every view reports and accepts this one type, which is how
// selecting in one view updates the others.

#include "poolscope/Event.h"

#include <cstdint>

namespace poolscope::ui {

struct Selection {
    enum Kind { None, Allocation, Marker, Failed, Edge, Pool, Stream, Event };
    Kind kind = None;
    uint32_t index = 0;       // into Timeline::allocations / markers / failed / edges
    uint64_t handle = 0;      // Pool / Stream
    poolscope::Event event{}; // Event (from the events table)

    bool operator==(const Selection& o) const {
        return kind == o.kind && index == o.index && handle == o.handle &&
               (kind != Event || event.seq == o.event.seq);
    }
};

} // namespace poolscope::ui
