#pragma once
// Which events the events table shows, and where they come from. The provider is a function so
// a file (TraceReader, range queries) and, later, a live session (its own buffer) can both feed
// the same table.

#include "poolscope/Event.h"
#include "poolscope/Result.h"
#include "poolscope/view/EventFilter.h"

#include <QString>
#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

namespace poolscope::ui {

// The filter itself is Qt-free (poolscope/view/EventFilter.h).
using view::EventFilter;

struct EventQueryResult {
    std::vector<Event> events;
    bool truncated = false; // more matches existed than the cap
    QString error;
    // What the rows are drawn from, when not the whole trace (a live session's latest events):
    // a few words after the row count, and a sentence for its tooltip.
    QString note;
    QString noteDetail;
};

using EventProvider = std::function<EventQueryResult(const EventFilter& filter, size_t cap,
                                                     const std::atomic<bool>& cancel)>;

// Queries a trace file through TraceReader::forEachMatchingChunk (each job opens its own reader,
// so jobs never share an SQLite connection across threads): chunks that cannot match are not
// decoded. The trace's span bounds the filter's times; eventCount is not needed any more.
EventProvider fileEventProvider(const QString& path, int64_t traceT0, int64_t traceT1,
                                uint64_t eventCount);

} // namespace poolscope::ui
