#include "poolscope/view/EventFilter.h"

namespace poolscope::view {

bool EventFilter::matches(const Event& e) const {
    if (e.tsNs < t0 || e.tsNs >= t1) return false;
    if (!(kindMask & bit(e.kind))) return false;
    if (failedOnly && e.result == 0) return false;
    if (stream && e.stream != *stream) return false;
    if (pool && e.pool != *pool) return false;
    if (sizeActive()) {
        if (e.kind != EventKind::Alloc && e.kind != EventKind::Free) return false;
        if (e.size < minSize || e.size > maxSize) return false;
    }
    return true;
}

} // namespace poolscope::view
