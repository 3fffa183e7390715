#pragma once
// The last pass over a Timeline the builder made (a snapshot, a partial or the whole one).

#include "poolscope/Timeline.h"

namespace poolscope::detail {
// The device sums, the totals that only make sense at the end, and the documented orderings.
// shrink: give growth slack back (not for vectors reserved for an upper bound: their unused part
// was never touched, costs no memory, and shrinking would copy everything once more).
void finishTimeline(Timeline& tl, bool shrink = true);
} // namespace poolscope::detail
