#pragma once
// Which events the events table shows, and where they come from. The provider is a function so
// a file (TraceReader, range queries) and, later, a live session (its own buffer) can both feed
// the same table.

#include "poolscope/Event.h"
#include "poolscope/Result.h"

#include <QString>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace poolscope::ui {

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

struct EventQueryResult {
    std::vector<Event> events;
    bool truncated = false; // more matches existed than the cap
    QString error;
};

using EventProvider = std::function<EventQueryResult(const EventFilter& filter, size_t cap,
                                                     const std::atomic<bool>& cancel)>;

// Queries a trace file in time chunks (each job opens its own reader, so jobs never share an
// SQLite connection across threads). eventCount and the span size the chunks.
EventProvider fileEventProvider(const QString& path, int64_t traceT0, int64_t traceT1,
                                uint64_t eventCount);

} // namespace poolscope::ui
