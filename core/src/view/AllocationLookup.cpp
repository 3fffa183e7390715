#include "poolscope/view/AllocationLookup.h"

#include <algorithm>

namespace poolscope::view {

int64_t allocationOf(const Timeline& tl, const Event& e) {
    const auto& all = tl.allocations;
    if (e.kind == EventKind::Alloc) {
        // Allocations are in alloc order: a binary search on seq.
        auto it = std::lower_bound(all.begin(), all.end(), e.seq,
                                   [](const Allocation& a, uint64_t s) { return a.allocSeq < s; });
        if (it != all.end() && it->allocSeq == e.seq) return it - all.begin();
    } else if (e.kind == EventKind::Free) {
        // A free comes after its alloc: only allocations made before it can match.
        auto end = std::lower_bound(all.begin(), all.end(), e.seq,
                                    [](const Allocation& a, uint64_t s) { return a.allocSeq < s; });
        for (auto it = all.begin(); it != end; ++it)
            if (it->freeSeq == e.seq && it->ptr == e.ptr) return it - all.begin();
    }
    return -1;
}

} // namespace poolscope::view
