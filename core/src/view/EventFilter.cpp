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

// Each `return false` is one test of matches() that no event of the chunk passes; any event
// that matches passes them all, so the chunk holds none.
bool EventFilter::mayMatch(const ChunkFacts& c) const {
    if (c.tMax < t0 || c.tMin >= t1) return false;
    uint64_t kinds = c.kinds & kindMask;
    if (sizeActive()) kinds &= bit(EventKind::Alloc) | bit(EventKind::Free);
    if (!kinds) return false;
    const ChunkIndexRow* x = c.index;
    if (!x) return true;
    if (failedOnly && x->failed == 0) return false;
    if (stream) {
        const uint64_t b = ChunkIndexRow::bloomBits(*stream);
        if ((x->streams & b) != b) return false;
    }
    if (pool) {
        const uint64_t b = ChunkIndexRow::bloomBits(*pool);
        if ((x->pools & b) != b) return false;
    }
    // Only alloc/free events can pass a size test, and their sizes all lie in [sizeMin, sizeMax].
    if (sizeActive() && (x->sizeMin > x->sizeMax || x->sizeMax < minSize || x->sizeMin > maxSize))
        return false;
    return true;
}

} // namespace poolscope::view
