#pragma once
// Which events an events list shows: by kind, failure, stream, pool, size and time. Plain data
// with one predicate, so the window's table, the CLI and tests filter the same way.

#include "poolscope/Event.h"

#include <cstdint>
#include <optional>

namespace poolscope::view {

struct EventFilter {
    uint32_t kindMask = ~0u; // bit (1 << EventKind)
    bool failedOnly = false;
    std::optional<uint64_t> stream;
    std::optional<uint64_t> pool;
    uint64_t minSize = 0; // applies to alloc/free: other kinds are hidden while a size is set
    uint64_t maxSize = UINT64_MAX;
    int64_t t0 = INT64_MIN; // [t0, t1)
    int64_t t1 = INT64_MAX;

    static uint32_t bit(EventKind k) { return 1u << unsigned(k); }
    bool sizeActive() const { return minSize > 0 || maxSize != UINT64_MAX; }
    bool matches(const Event& e) const;
};

} // namespace poolscope::view
