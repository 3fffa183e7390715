#pragma once
// Finding the allocation of a Timeline that an event belongs to (Timeline.h stays plain data;
// this is a query on it), shared by the window's selection and any CLI or export.

#include "poolscope/Event.h"
#include "poolscope/Timeline.h"

#include <cstdint>

namespace poolscope::view {

// Index into Timeline::allocations of the allocation an Alloc event made (same seq) or a Free
// event released (same seq and pointer); -1 for other kinds or when there is none.
int64_t allocationOf(const Timeline& tl, const Event& e);

} // namespace poolscope::view
